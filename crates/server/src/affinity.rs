//! Pinning a multi-thread tokio runtime's worker threads to cores
//! ([`pin_worker_threads`]), for `pin_workers = true` in `server.toml`.
//!
//! Why: when another process shares the server's cores (a load generator,
//! another service), Linux can leave both of a 2-core server's workers
//! runnable on one core while the other core runs that process, and one
//! worker then waits for the other's time slice (1–5 ms, measured with
//! `perf sched` on the 2-core bench machine). A request the waiting worker
//! holds waits with it. Pinned, each worker has a core of its own, and every
//! other thread of the runtime (the blocking threads: stores, compiles) is
//! reset to the whole mask when it starts, since Linux gives a new thread
//! its creator's mask. BENCHMARKS.md ("Pinned workers") measures it. The
//! cost: a pinned worker cannot leave a core something of equal priority
//! keeps busy. Linux only: elsewhere nothing is pinned.

#[cfg(target_os = "linux")]
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What [`pin_worker_threads`] set up.
#[derive(Debug, Clone)]
pub enum Pinning {
    /// The workers will pin themselves to these cores: the n-th worker to
    /// go idle takes `cores[n % cores.len()]`.
    Pinned(PinnedCores),
    /// The calling thread (in `hookbox serve`, the process) may run on
    /// fewer than 2 cores (`allowed`), so pinning would gain nothing;
    /// nothing is pinned.
    TooFewCores {
        /// Cores in the calling thread's affinity mask.
        allowed: usize,
    },
    /// The calling thread's affinity mask could not be read (`error`, the
    /// OS's message), or this is not Linux; nothing is pinned.
    Unavailable {
        /// Why, for the operator.
        error: String,
    },
}

/// The cores the workers pin to, and how many workers failed to.
#[derive(Debug, Clone)]
pub struct PinnedCores {
    cores: Vec<usize>,
    tried: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
}

impl PinnedCores {
    /// The cores, in the order the workers take them (at most one per
    /// worker).
    pub fn cores(&self) -> &[usize] {
        &self.cores
    }

    /// How many worker threads have so far tried to pin themselves
    /// (succeeded or failed).
    pub fn tried(&self) -> usize {
        self.tried.load(Ordering::Acquire)
    }

    /// How many worker threads have so far tried to pin themselves and
    /// failed (each then keeps the whole mask). A worker tries the first
    /// time it goes idle, which is at once after the runtime starts.
    pub fn failed(&self) -> usize {
        self.failed.load(Ordering::Relaxed)
    }
}

#[cfg(target_os = "linux")]
thread_local! {
    /// Whether this thread has been pinned (or tried to be) already.
    static PINNED: Cell<bool> = const { Cell::new(false) };
}

/// Makes each of the `workers` worker threads of the runtime `builder`
/// builds pin itself to a core of its own the first time it parks (goes
/// idle, which a worker does as soon as it has no task): the n-th worker to
/// park takes the n-th core of the CPU affinity mask of the calling thread
/// as read now (the process's, unless that thread changed its own; so
/// `taskset` and cpusets are kept), wrapping around when the runtime has
/// more workers than that mask has cores, or than `workers`. Every thread the runtime starts (workers and
/// blocking threads) is first reset to that whole mask, so a blocking
/// thread a pinned worker starts does not inherit the worker's core.
///
/// This sets the builder's `on_thread_park` and `on_thread_start` (one of
/// each per builder: it replaces any set before, and one set after replaces
/// this). Not for a runtime whose tasks call `tokio::task::block_in_place`:
/// the worker that blocks keeps its core while its replacement takes the
/// next one, so two threads can share a core (`hookbox serve` never calls
/// it). Several processes that each pin take the same first cores: give
/// each its own cores with `taskset` or a cpuset.
///
/// Errors: none; what was set up, or why nothing was, is the returned
/// [`Pinning`]. A worker whose core cannot be set stays on the whole mask
/// and is counted in [`PinnedCores::failed`].
pub fn pin_worker_threads(builder: &mut tokio::runtime::Builder, workers: usize) -> Pinning {
    #[cfg(target_os = "linux")]
    {
        linux::pin(builder, workers)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (builder, workers);
        Pinning::Unavailable { error: "pinning threads to cores is supported on Linux only".into() }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

    pub(super) fn pin(builder: &mut tokio::runtime::Builder, workers: usize) -> Pinning {
        let mask = match sched_getaffinity(None) {
            Ok(mask) => mask,
            Err(e) => return Pinning::Unavailable { error: format!("the CPU affinity mask cannot be read: {e}") },
        };
        let allowed = cores_of(&mask);
        if allowed.len() < 2 {
            return Pinning::TooFewCores { allowed: allowed.len() };
        }
        let cores: Vec<usize> = allowed.into_iter().take(workers.max(1)).collect();
        let failed = Arc::new(AtomicUsize::new(0));
        let tried = Arc::new(AtomicUsize::new(0));
        builder.on_thread_start(move || {
            // A new thread has its creator's mask; a blocking thread a
            // pinned worker starts would otherwise run on that one core.
            // On failure the thread keeps the mask it has: nothing to undo.
            let _ = sched_setaffinity(None, &mask);
        });
        let next = AtomicUsize::new(0);
        let list = cores.clone();
        let failures = failed.clone();
        let attempts = tried.clone();
        builder.on_thread_park(move || {
            if PINNED.with(|p| p.replace(true)) {
                return;
            }
            let core = list[next.fetch_add(1, Ordering::Relaxed) % list.len()];
            let mut set = CpuSet::new();
            set.set(core);
            if sched_setaffinity(None, &set).is_err() {
                failures.fetch_add(1, Ordering::Relaxed);
            }
            attempts.fetch_add(1, Ordering::Release);
        });
        Pinning::Pinned(PinnedCores { cores, tried, failed })
    }

    /// The cores set in `mask`, in order.
    pub(super) fn cores_of(mask: &CpuSet) -> Vec<usize> {
        (0..CpuSet::MAX_CPU).filter(|&c| mask.is_set(c)).collect()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

    /// The mask of the calling thread, as a list of cores.
    fn mask() -> Vec<usize> {
        linux::cores_of(&sched_getaffinity(None).unwrap_or_else(|e| panic!("{e}")))
    }

    #[test]
    fn each_worker_gets_a_core_of_its_own_and_blocking_threads_keep_the_mask() {
        let all = mask();
        if all.len() < 2 {
            eprintln!("skipped: this process may use {} core(s)", all.len());
            return;
        }
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(2).enable_all();
        let pinned = match pin_worker_threads(&mut builder, 2) {
            Pinning::Pinned(p) => p,
            other => panic!("{other:?}"),
        };
        assert_eq!(pinned.cores(), &all[..2], "one core per worker, the first of the mask");
        let rt = builder.build().unwrap_or_else(|e| panic!("{e}"));
        let (mut workers, from_worker, from_block_on) = rt.block_on(async {
            // Both workers park while this sleeps.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            // Two tasks that block until both run: one on each worker.
            let barrier = Arc::new(std::sync::Barrier::new(2));
            let tasks: Vec<_> = (0..2)
                .map(|_| {
                    let b = barrier.clone();
                    tokio::spawn(async move {
                        b.wait();
                        mask()
                    })
                })
                .collect();
            let mut workers = Vec::new();
            for t in tasks {
                workers.push(t.await.unwrap_or_else(|e| panic!("{e}")));
            }
            // A blocking thread started by a pinned worker: a task (so on a
            // worker) spawns it while another blocking thread is busy, so
            // tokio must start a new thread rather than reuse an idle one.
            let gate = Arc::new(std::sync::Barrier::new(2));
            let g = gate.clone();
            let busy = tokio::task::spawn_blocking(move || {
                g.wait();
                mask()
            });
            let from_worker = tokio::spawn(async move {
                let m = tokio::task::spawn_blocking(mask).await.unwrap_or_else(|e| panic!("{e}"));
                gate.wait();
                m
            });
            let from_worker = from_worker.await.unwrap_or_else(|e| panic!("{e}"));
            let from_block_on = busy.await.unwrap_or_else(|e| panic!("{e}"));
            (workers, from_worker, from_block_on)
        });
        workers.sort();
        assert_eq!(workers, vec![vec![all[0]], vec![all[1]]], "each worker is pinned to a core of its own");
        assert_eq!(from_worker, all, "a blocking thread a pinned worker starts keeps the whole mask");
        assert_eq!(from_block_on, all, "a blocking thread keeps the whole mask");
        assert_eq!((pinned.tried(), pinned.failed()), (2, 0));
    }

    #[test]
    fn a_thread_allowed_one_core_pins_nothing() {
        let before = sched_getaffinity(None).unwrap_or_else(|e| panic!("{e}"));
        let mut one = CpuSet::new();
        one.set(mask()[0]);
        sched_setaffinity(None, &one).unwrap_or_else(|e| panic!("{e}"));
        let got = pin_worker_threads(&mut tokio::runtime::Builder::new_multi_thread(), 2);
        sched_setaffinity(None, &before).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(got, Pinning::TooFewCores { allowed: 1 }), "{got:?}");
    }

    #[test]
    fn more_cores_than_workers_uses_only_as_many_cores_as_workers() {
        let all = mask();
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        match (pin_worker_threads(&mut builder, 1), all.len()) {
            (Pinning::Pinned(p), n) if n >= 2 => assert_eq!(p.cores(), &all[..1]),
            (Pinning::TooFewCores { allowed }, n) if n < 2 => assert_eq!(allowed, n),
            (other, n) => panic!("{other:?} with {n} cores"),
        }
    }
}
