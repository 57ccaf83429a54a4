//! Cutting text for reports without splitting a character.

/// The first `max` characters of `s` (never splits a character); `s` itself
/// when it is no longer.
pub fn truncate_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The first `max` characters of `s`, with `…` appended when it was cut.
pub fn truncate_ellipsis(s: &str, max: usize) -> String {
    let head = truncate_chars(s, max);
    if head.len() < s.len() { format!("{head}…") } else { s.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_character_boundaries() {
        assert_eq!(truncate_chars("héllo", 2), "hé");
        assert_eq!(truncate_chars("hé", 5), "hé");
        assert_eq!(truncate_ellipsis("héllo", 2), "hé…");
        assert_eq!(truncate_ellipsis("hé", 2), "hé");
    }
}
