//! The plugin's configuration: the key/value table of its manifest entry.
//!
//! The host gives strings as they are and numbers, booleans, arrays and
//! tables as JSON text. These functions call the host, so they work only
//! inside a component (on another target they panic).

use serde::de::DeserializeOwned;

use crate::bindings::hookbox::hooks::host;

/// The raw value of `key`, if set.
pub fn get(key: &str) -> Option<String> {
    host::get_config(key)
}

/// The value of `key` parsed as JSON into `T`, if set. A string value is not
/// JSON text (`"a"` comes as `a`): read strings with [`get`].
pub fn json<T: DeserializeOwned>(key: &str) -> Option<Result<T, serde_json::Error>> {
    get(key).map(|raw| serde_json::from_str(&raw))
}

/// The value of `key` as a list of strings; see [`parse_string_list`]. An
/// unset key is an empty list (use [`get`] first to tell the two apart).
pub fn string_list(key: &str) -> Result<Vec<String>, serde_json::Error> {
    get(key).map_or(Ok(Vec::new()), |raw| parse_string_list(&raw))
}

/// Every key of the plugin's configuration, sorted.
pub fn keys() -> Vec<String> {
    host::config_keys()
}

/// Reads a configuration value as a list of strings: a JSON array of strings
/// (`["a", "b"]`), or else one string (`a`), or nothing for an empty or
/// all-whitespace value. A JSON array holding anything but strings is an
/// error; text that starts with `[` but is not a JSON array (a glob such as
/// `[ab]*.txt`) is one string.
pub fn parse_string_list(raw: &str) -> Result<Vec<String>, serde_json::Error> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    if trimmed.starts_with('[')
        && let Ok(value @ serde_json::Value::Array(_)) = serde_json::from_str(trimmed)
    {
        return serde_json::from_value(value);
    }
    Ok(vec![raw.to_owned()])
}
