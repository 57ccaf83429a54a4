//! Time, random numbers, UUIDs and waiting that replay the same (the contract's
//! `agents.now()`, `agents.random()`, `agents.uuid4()`, `agents.sleep()`).
//!
//! The host writes every value these return to the run's journal, and
//! `hookbox replay` gives the hook the same values in the same order, so a
//! hook that decides on the time or on chance decides the same on replay.
//! (`std::time::SystemTime::now()`, `Instant::now()` and WASI's random
//! numbers are journaled too; these calls say so in the code.) They call the
//! host, so they work only inside a component.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::bindings::hookbox::hooks::host;

/// The current time, journaled.
pub fn now() -> SystemTime {
    let t = host::now();
    UNIX_EPOCH + Duration::from_secs(t.seconds) + Duration::from_nanos(u64::from(t.nanoseconds))
}

/// Milliseconds since the Unix epoch, journaled.
pub fn now_ms() -> u64 {
    let t = host::now();
    t.seconds.saturating_mul(1000).saturating_add(u64::from(t.nanoseconds / 1_000_000))
}

/// A random 64-bit number, journaled.
pub fn random() -> u64 {
    host::random()
}

/// A random number in `0..n` (0 when `n` is 0), journaled.
pub fn random_below(n: u64) -> u64 {
    if n == 0 { 0 } else { host::random() % n }
}

/// A random version 4 UUID, hyphenated (36 characters), journaled.
pub fn uuid() -> String {
    host::uuid()
}

/// Waits `duration` (whole milliseconds), journaled. The wait counts toward
/// the call's deadline: a wait past it ends the call with a `deadline` failure.
pub fn sleep(duration: Duration) {
    host::sleep(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX));
}
