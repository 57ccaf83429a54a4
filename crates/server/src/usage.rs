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
    /// (minute since the epoch, fuel, hook µs) of the current minute.
    window: Mutex<(u64, u64, u64)>,
}

fn minute_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() / 60).unwrap_or(0)
}

impl TenantUsage {
    /// Adds fuel and hook time (µs) to the current minute.
    pub fn charge(&self, fuel: u64, hook_us: u64) {
        let mut w = self.window.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = minute_now();
        if w.0 != now {
            *w = (now, 0, 0);
        }
        w.1 = w.1.saturating_add(fuel);
        w.2 = w.2.saturating_add(hook_us);
    }

    /// (fuel, hook ms) used this minute.
    pub fn this_minute(&self) -> (u64, u64) {
        let w = self.window.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if w.0 == minute_now() { (w.1, w.2 / 1000) } else { (0, 0) }
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
