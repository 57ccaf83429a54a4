//! This plugin's state for the current session, kept by the host: it
//! survives instance replacement (after a failure) and process restarts. A
//! call starts from what the last successful call saved; a call that fails
//! leaves it untouched, whatever it wrote. These functions call the host, so
//! they work only inside a component.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::hookbox::hooks::host;

/// The saved bytes and the plugin version that wrote them, if anything was saved.
pub fn get() -> Option<(String, Vec<u8>)> {
    host::get_state().map(|s| (s.version, s.data))
}

/// Saves `data` as this plugin's state (committed if this call succeeds).
pub fn set(data: &[u8]) {
    host::set_state(data)
}

/// The saved state parsed as JSON into `T`, with the version that wrote it.
/// `None` when nothing was saved; `Some(Err(..))` when the bytes are not a `T`
/// (an older layout to migrate, for example).
pub fn get_json<T: DeserializeOwned>() -> Option<(String, Result<T, serde_json::Error>)> {
    get().map(|(version, data)| (version, serde_json::from_slice(&data)))
}

/// Saves `value` as JSON.
///
/// Errors: `value` cannot be serialised (nothing is saved then).
pub fn set_json<T: Serialize>(value: &T) -> Result<(), serde_json::Error> {
    let data = serde_json::to_vec(value)?;
    set(&data);
    Ok(())
}
