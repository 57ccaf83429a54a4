//! What the host prints is made safe for a terminal: text a hook, a plugin's
//! config or the model provided (log lines, stdout/stderr, directive values,
//! failure messages, plugin and tool names, tool arguments) may hold control
//! characters that would move the cursor, clear the screen, rewrite a line
//! (`\r`, ESC sequences) or reorder what is shown (bidi overrides). Every
//! line the CLI prints goes through [`line`] (or [`text`] for the final
//! answer, whose line breaks are kept), which renders each such character
//! visibly: `\x1b`, `\r`, `\n`, `\t`, `\u{9b}`, `\u{202e}`.
//!
//! `--json` output goes through [`json`]: JSON already escapes C0 controls;
//! DEL, C1 and the bidi controls are escaped there as `\u007f`, `\u009b`,
//! `\u202e`, so the text stays valid JSON with the same value.

use std::borrow::Cow;

/// True for a character that must not reach a terminal raw: C0 controls,
/// DEL, C1 controls, the bidi marks, embeddings, overrides and isolates
/// (U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069) and the Unicode
/// line and paragraph separators (U+2028, U+2029).
pub(crate) fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200e}' | '\u{200f}'
        | '\u{2028}' | '\u{2029}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

fn render(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{0}'..='\u{1f}' | '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
        _ => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
    }
}

fn escape_where(s: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if escape(c) {
            render(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One line for the terminal: every unsafe character (see [`is_unsafe`]),
/// line breaks and tabs included, rendered visibly.
pub(crate) fn line(s: &str) -> Cow<'_, str> {
    escape_where(s, is_unsafe)
}

/// Multi-line text for the terminal (the final answer): as [`line`], but
/// `\n` and `\t` are kept.
pub(crate) fn text(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| is_unsafe(c) && c != '\n' && c != '\t')
}

/// JSON text (already serialized) with DEL, C1 and the bidi controls written
/// as `\uXXXX` escapes: the same JSON value, nothing raw for a terminal.
/// (Such characters can only occur inside JSON strings, where the escape is valid.)
pub(crate) fn json(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One host log record (`HOOKBOX_LOG`) for the terminal: as [`line`], with
/// its one trailing line break kept. Paths, plugin names and messages in host
/// logs can come from config files, journals and plugins.
pub(crate) fn log_record(buf: &[u8]) -> String {
    let text = String::from_utf8_lossy(buf);
    match text.strip_suffix('\n') {
        Some(body) => format!("{}\n", line(body)),
        None => line(&text).into_owned(),
    }
}

/// Stderr for the host's `tracing` logs: tracing's formatter writes each
/// record with one `write_all`, and each is escaped with [`log_record`].
pub(crate) struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::io::stderr().lock().write_all(log_record(buf).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_log_records_are_escaped_but_keep_their_line_break() {
        let escaped = log_record("WARN cache /tmp/\u{1b}[2J\rx\n[directive] skip\n".as_bytes());
        assert_eq!(escaped, "WARN cache /tmp/\\x1b[2J\\rx\\n[directive] skip\n");
        assert_eq!(escaped.matches('\n').count(), 1, "one record, one line");
        assert_eq!(log_record(b"no newline"), "no newline");
    }

    #[test]
    fn control_characters_are_rendered_visibly() {
        assert_eq!(line("plain text, ünïcode ✓ and \\ backslash"), "plain text, ünïcode ✓ and \\ backslash");
        assert_eq!(line("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(line("tag\r[directive] forged"), "tag\\r[directive] forged");
        assert_eq!(line("one\ntwo\tthree"), "one\\ntwo\\tthree");
        assert_eq!(line("\0\x07\x08\x7f"), "\\x00\\x07\\x08\\x7f");
        assert_eq!(line("c1 \u{9b}31m \u{85}"), "c1 \\u{9b}31m \\u{85}");
        assert_eq!(line("abc\u{202e}fed\u{202c}"), "abc\\u{202e}fed\\u{202c}");
        assert_eq!(line("\u{2066}x\u{2069}\u{200f}\u{61c}\u{2028}"), "\\u{2066}x\\u{2069}\\u{200f}\\u{61c}\\u{2028}");
        assert!(matches!(line("nothing to do"), Cow::Borrowed(_)));
    }

    #[test]
    fn text_keeps_line_breaks_and_tabs() {
        assert_eq!(text("line 1\n\tline 2\r\x1b[1A"), "line 1\n\tline 2\\r\\x1b[1A");
    }

    #[test]
    fn json_stays_json_with_the_same_value() {
        let value = serde_json::json!({"log": "a\x1b[2J\r\u{7f}\u{9b}\u{202e}b"});
        let raw = value.to_string();
        let escaped = json(&raw);
        assert!(!escaped.chars().any(is_unsafe), "{escaped}");
        let back: serde_json::Value = serde_json::from_str(&escaped).expect("valid JSON");
        assert_eq!(back, value);
    }
}
