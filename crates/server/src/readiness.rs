//! `GET /readyz`'s answer, cached: the route is unauthenticated, so a
//! flood of it must not become a flood of database calls. An answer is
//! kept for [`Readiness::FRESH`]; requests that find it stale wait for one
//! probe (single flight) rather than each starting its own; and a probe
//! still stuck in the database after its [`Readiness::TIMEOUT`] (the
//! blocking call under it cannot be cancelled) is not joined by another:
//! until it returns, the answer is "not ready" without a new call. So at
//! most one probe per worker is ever in flight, and at most one starts per
//! second, whatever the request rate.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use std::time::Instant;

/// The cached readiness of one worker's database.
pub struct Readiness {
    fresh: Duration,
    timeout: Duration,
    /// The last probe's end and outcome; locked across a probe, so
    /// requests arriving meanwhile wait for its answer.
    last: tokio::sync::Mutex<Option<(Instant, bool)>>,
    /// True while a probe's call is in the database, including one whose
    /// request gave up on it after [`Readiness::TIMEOUT`].
    probing: Arc<AtomicBool>,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness::new(Self::FRESH, Self::TIMEOUT)
    }
}

impl Readiness {
    /// How long an answer is reused by default: 1 s.
    pub const FRESH: Duration = Duration::from_secs(1);
    /// How long a request waits for a probe by default: 2 s; past it the
    /// answer is "not ready" (and is cached as such).
    pub const TIMEOUT: Duration = Duration::from_secs(2);

    /// Answers kept for `fresh`, probes waited for `timeout`.
    pub fn new(fresh: Duration, timeout: Duration) -> Self {
        Readiness { fresh, timeout, last: tokio::sync::Mutex::new(None), probing: Arc::new(AtomicBool::new(false)) }
    }

    /// True when the database answered `probe` (a cheap query that gives
    /// true when it succeeds) within the timeout, at most the freshness
    /// ago ([`Readiness::TIMEOUT`], [`Readiness::FRESH`] by default). `probe` is called only when no answer is
    /// fresh and no earlier probe is still in flight; it runs on a task of
    /// its own, so a request that gives up does not cancel it.
    pub async fn check<F, Fut>(&self, probe: F) -> bool
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = bool> + Send + 'static,
    {
        let mut last = self.last.lock().await;
        if let Some((at, ready)) = *last
            && at.elapsed() < self.fresh
        {
            return ready;
        }
        // An earlier probe still stuck: not ready, and no second call behind it.
        if self.probing.swap(true, Ordering::AcqRel) {
            *last = Some((Instant::now(), false));
            return false;
        }
        let (probing, call) = (self.probing.clone(), probe());
        let task = tokio::spawn(async move {
            let ready = call.await;
            probing.store(false, Ordering::Release);
            ready
        });
        let ready = matches!(tokio::time::timeout(self.timeout, task).await, Ok(Ok(true)));
        *last = Some((Instant::now(), ready));
        ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flood_makes_one_probe_per_second_and_a_stuck_probe_is_not_joined() {
        // Durations scaled down (fresh 200 ms, timeout 100 ms); the test's
        // assertions count probes, not time.
        let (fresh, timeout) = (Duration::from_millis(200), Duration::from_millis(100));
        let readiness = Arc::new(Readiness::new(fresh, timeout));
        let calls = Arc::new(AtomicUsize::new(0));
        let probe = |calls: Arc<AtomicUsize>, hang: Duration| {
            move || async move {
                calls.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(hang).await;
                true
            }
        };
        // 50 requests at once: one probe, every request gets its answer.
        let mut asks = Vec::new();
        for _ in 0..50 {
            let (r, p) = (readiness.clone(), probe(calls.clone(), Duration::from_millis(20)));
            asks.push(tokio::spawn(async move { r.check(p).await }));
        }
        for ask in asks {
            assert!(ask.await.unwrap_or(false), "ready");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1, "one probe for 50 requests");
        // While fresh: the cached answer, no call.
        assert!(readiness.check(probe(calls.clone(), Duration::ZERO)).await);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Stale: a probe that hangs for 3 s (a database that does not answer).
        tokio::time::sleep(fresh).await;
        let hang = Instant::now();
        assert!(!readiness.check(probe(calls.clone(), Duration::from_millis(3000))).await, "timed out: not ready");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // While it hangs, stale answers start no second call behind it.
        for _ in 0..3 {
            tokio::time::sleep(fresh).await;
            assert!(!readiness.check(probe(calls.clone(), Duration::ZERO)).await, "still stuck");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2, "no probe joined the stuck one");
        // Once it returns, the next stale request probes again.
        tokio::time::sleep(Duration::from_millis(3300).saturating_sub(hang.elapsed())).await;
        assert!(readiness.check(probe(calls.clone(), Duration::ZERO)).await, "ready again");
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }
}
