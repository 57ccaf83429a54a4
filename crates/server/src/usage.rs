//! What each tenant uses now ([`TenantUsage`]: runs, instances, fuel and
//! hook time this minute) and the counted slots ([`Slots`]) that hold a
//! share of a quota while a run or an evaluate chain lives.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::Quotas;
use crate::error::{ApiError, ApiResult};

/// What a tenant uses now.
#[derive(Default)]
pub struct TenantUsage {
    /// Runs in flight.
    pub runs: AtomicU32,
    /// Plugin instances held by runs and evaluate calls.
    pub instances: AtomicU32,
    /// The current minute's fuel and hook time.
    window: Mutex<Window>,
}

/// One minute's fuel and hook time (µs): this worker's, the part of it
/// added to the shared counts ([`crate::minutes`]), and the other workers'
/// as the store last said (zero on a store of one worker's own).
#[derive(Default, Clone, Copy)]
struct Window {
    /// Minutes since the Unix epoch.
    minute: u64,
    fuel: u64,
    us: u64,
    sent_fuel: u64,
    sent_us: u64,
    others_fuel: u64,
    others_us: u64,
}

/// Minutes since the Unix epoch, by this worker's clock.
pub fn minute_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() / 60).unwrap_or(0)
}

impl TenantUsage {
    fn window(&self) -> std::sync::MutexGuard<'_, Window> {
        let mut w = self.window.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = minute_now();
        if w.minute != now {
            *w = Window { minute: now, ..Window::default() };
        }
        w
    }

    /// Adds fuel and hook time (µs) to the current minute.
    pub fn charge(&self, fuel: u64, hook_us: u64) {
        let mut w = self.window();
        w.fuel = w.fuel.saturating_add(fuel);
        w.us = w.us.saturating_add(hook_us);
    }

    /// (fuel, hook ms) used this minute, on every worker (the others' as
    /// of the last exchange, [`crate::minutes`]).
    pub fn this_minute(&self) -> (u64, u64) {
        let w = self.window();
        (w.fuel.saturating_add(w.others_fuel), w.us.saturating_add(w.others_us) / 1000)
    }

    /// This worker's use of `minute` not yet added to the shared counts:
    /// (fuel, hook µs); `None` when there is none (or `minute` is over).
    pub fn unsent(&self, minute: u64) -> Option<(u64, u64)> {
        let w = self.window();
        let unsent = (w.fuel.saturating_sub(w.sent_fuel), w.us.saturating_sub(w.sent_us));
        (w.minute == minute && unsent != (0, 0)).then_some(unsent)
    }

    /// Marks `sent` (as [`TenantUsage::unsent`] gave it) added to the
    /// shared counts of `minute`, which now say `total` (fuel, hook µs) for
    /// every worker together: the others' share is what is not this worker's.
    pub fn exchanged(&self, minute: u64, sent: (u64, u64), total: (u64, u64)) {
        let mut w = self.window();
        if w.minute != minute {
            return;
        }
        w.sent_fuel = w.sent_fuel.saturating_add(sent.0).min(w.fuel);
        w.sent_us = w.sent_us.saturating_add(sent.1).min(w.us);
        w.others_fuel = total.0.saturating_sub(w.sent_fuel);
        w.others_us = total.1.saturating_sub(w.sent_us);
    }

    /// Errors with a 429 when this minute's fuel or hook time is spent.
    pub fn check_minute(&self, quotas: &Quotas) -> ApiResult<()> {
        let (fuel, ms) = self.this_minute();
        if fuel >= quotas.fuel_per_minute {
            return Err(ApiError::quota("fuel_per_minute", quotas.fuel_per_minute as f64, fuel as f64));
        }
        if ms >= quotas.hook_ms_per_minute {
            return Err(ApiError::quota("hook_ms_per_minute", quotas.hook_ms_per_minute as f64, ms as f64));
        }
        Ok(())
    }
}

/// A counted slot (runs, instances) that is given back when dropped.
pub struct Slots {
    counter: Arc<TenantUsage>,
    which: fn(&TenantUsage) -> &AtomicU32,
    n: u32,
}

impl Slots {
    /// Takes `n` slots of `which` if that keeps it within `limit`.
    ///
    /// Errors: a 429 naming `quota`.
    pub fn take(
        usage: &Arc<TenantUsage>,
        which: fn(&TenantUsage) -> &AtomicU32,
        n: u32,
        limit: u32,
        quota: &'static str,
    ) -> ApiResult<Slots> {
        let counter = which(usage);
        let mut current = counter.load(Ordering::Acquire);
        loop {
            let next = current.saturating_add(n);
            if next > limit {
                return Err(ApiError::quota(quota, f64::from(limit), f64::from(current)));
            }
            match counter.compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(Slots { counter: usage.clone(), which, n }),
                Err(seen) => current = seen,
            }
        }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        (self.which)(&self.counter).fetch_sub(self.n, Ordering::AcqRel);
    }
}

/// Today's date, UTC, `YYYY-MM-DD` (the day model spend is counted in).
pub fn today() -> String {
    let days = crate::store::unix_seconds() / 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minute_counts_this_worker_s_use_and_the_others_share_of_the_totals() {
        let usage = TenantUsage::default();
        let minute = minute_now();
        usage.charge(100, 2_000);
        assert_eq!(usage.unsent(minute), Some((100, 2_000)));
        assert_eq!(usage.unsent(minute.wrapping_sub(1)), None, "a minute that is over");
        // Sent; meanwhile 10 more were used here. The totals: 250 fuel, 5 ms, on all workers.
        usage.charge(10, 0);
        usage.exchanged(minute, (100, 2_000), (250, 5_000));
        // Here 110 and 2 ms, elsewhere 150 and 3 ms.
        if minute_now() == minute {
            assert_eq!(usage.this_minute(), (260, 5));
            assert_eq!(usage.unsent(minute), Some((10, 0)), "only what was not sent");
            // Totals read back before this worker's own were in them do not go below its share.
            usage.exchanged(minute, (10, 0), (50, 0));
            assert_eq!(usage.this_minute(), (110, 2));
            assert_eq!(usage.unsent(minute), None);
        }
    }
}
