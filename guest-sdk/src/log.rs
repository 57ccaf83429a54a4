//! Writing to the host's log: one line per call, tagged by the host with the
//! plugin's name. These functions call the host, so they work only inside a
//! component (on another target they panic).

use crate::LogLevel;
use crate::bindings::hookbox::hooks::host;

/// Writes `message` at `level`.
pub fn log(level: LogLevel, message: &str) {
    host::log(level, message);
}

/// Writes `message` at trace level (very detailed tracing).
pub fn trace(message: &str) {
    log(LogLevel::Trace, message);
}

/// Writes `message` at debug level (debugging detail).
pub fn debug(message: &str) {
    log(LogLevel::Debug, message);
}

/// Writes `message` at info level (normal operation).
pub fn info(message: &str) {
    log(LogLevel::Info, message);
}

/// Writes `message` at warn level (something looks wrong).
pub fn warn(message: &str) {
    log(LogLevel::Warn, message);
}

/// Writes `message` at error level (something failed).
pub fn error(message: &str) {
    log(LogLevel::Error, message);
}
