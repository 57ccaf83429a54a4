//! Names tenants and plugins may have: `[a-z0-9-]`, 1–64 characters, not
//! starting with `-` (safe in URLs, file names, metric labels and session keys).

/// Checks a tenant or plugin name: `[a-z0-9-]`, 1–64 characters, not
/// starting with `-`.
///
/// Errors: a sentence saying what is wrong.
pub fn check_tenant_name(name: &str) -> Result<(), String> {
    check_name("tenant", name)
}

/// As [`check_tenant_name`], for a plugin's name.
///
/// Errors: a sentence saying what is wrong.
pub fn check_plugin_name(name: &str) -> Result<(), String> {
    check_name("plugin", name)
}

fn check_name(what: &str, name: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&name.len())
        && !name.starts_with('-')
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!("a {what} name is 1 to 64 characters of a-z, 0-9 and `-`, not starting with `-`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_tenant_name("acme-2").is_ok());
        for bad in ["", "-a", "Acme", "a b", "a/b", &"x".repeat(65)] {
            assert!(check_tenant_name(bad).is_err(), "{bad}");
        }
    }
}
