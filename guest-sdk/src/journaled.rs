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

/// A random number in `0..n` (0 when `n` is 0), journaled. Unbiased: a
/// draw from the top sliver of `u64` that `n` does not divide evenly is
/// drawn again (at most once in 2^63 draws on average for any `n`).
pub fn random_below(n: u64) -> u64 {
    below(n, host::random)
}

/// A random float in `[0, 1)` with 53 random bits, journaled (Python's `random.random()`).
pub fn random_f64() -> f64 {
    unit(host::random())
}

/// A random float in `[a, b]` (or `[b, a]`), journaled (seed 003's `uniform`).
pub fn uniform(a: f64, b: f64) -> f64 {
    a + (b - a) * random_f64()
}

/// A random element of `items` (`None` when it is empty), journaled (seed 003's `choice`).
pub fn choice<T>(items: &[T]) -> Option<&T> {
    pick(items, host::random)
}

/// Shuffles `items` in place, every order equally likely (Fisher-Yates),
/// journaled: a replay shuffles the same way (seed 003's `shuffle`).
pub fn shuffle<T>(items: &mut [T]) {
    shuffle_with(items, host::random)
}

/// `0..n` from the draws of `next`, without modulo bias.
pub(crate) fn below(n: u64, mut next: impl FnMut() -> u64) -> u64 {
    if n == 0 {
        return 0;
    }
    // The largest multiple of n that fits: draws at or above it are redrawn.
    let zone = u64::MAX - (u64::MAX % n + 1) % n;
    loop {
        let r = next();
        if r <= zone {
            return r % n;
        }
    }
}

/// A draw as a float in `[0, 1)`: its top 53 bits over 2^53.
pub(crate) fn unit(r: u64) -> f64 {
    (r >> 11) as f64 / (1u64 << 53) as f64
}

pub(crate) fn pick<T>(items: &[T], next: impl FnMut() -> u64) -> Option<&T> {
    let n = u64::try_from(items.len()).unwrap_or(u64::MAX);
    if n == 0 {
        return None;
    }
    items.get(usize::try_from(below(n, next)).unwrap_or(0))
}

pub(crate) fn shuffle_with<T>(items: &mut [T], mut next: impl FnMut() -> u64) {
    for i in (1..items.len()).rev() {
        let j = below(i as u64 + 1, &mut next) as usize;
        items.swap(i, j);
    }
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
