//! Pinning a multi-thread tokio runtime's worker threads to cores
//! ([`pin_worker_threads`]), for `pin_workers = true` in `server.toml`.
//!
//! Why: when another process shares the server's cores (a load generator,
//! another service), Linux can leave both of a 2-core server's workers
//! runnable on one core while the other core runs that process, and one
//! worker then waits for the other's time slice (1–5 ms, measured with
//! `perf sched` on the 2-core bench machine). A request the waiting worker holds waits with
//! it. Pinned, each worker has a core of its own. Not yet right: a blocking
//! thread (`spawn_blocking`: stores, compiles) that a pinned worker starts
//! inherits the worker's one core (Linux copies the creator's mask). BENCHMARKS.md
//! ("Pinned workers") measures it. The cost: a pinned worker cannot leave a
//! core something of equal priority keeps busy.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

thread_local! {
    /// Whether this thread has been pinned (or tried to be) already.
    static PINNED: Cell<bool> = const { Cell::new(false) };
}

/// Makes each worker thread of the runtime `builder` builds pin itself to
/// one core the first time it parks (goes idle, which a worker does as soon
/// as it has no task): the n-th worker to park takes the n-th core of the
/// process's CPU affinity mask as read now (so `taskset` and cpusets are
/// kept), wrapping around when there are more workers than cores. Tokio
/// calls the park hook only on worker threads, but a blocking thread a
/// pinned worker starts inherits its core (a known defect). This sets the builder's `on_thread_park` (one per builder:
/// it replaces any set before, and one set after replaces this).
///
/// Returns the cores it will use, in order (empty: nothing is pinned,
/// because the mask could not be read or holds fewer than 2 cores).
/// Errors: none; a worker whose core cannot be set stays unpinned and says
/// so once (`tracing::warn`).
pub fn pin_worker_threads(builder: &mut tokio::runtime::Builder) -> Vec<usize> {
    let cores = match sched_getaffinity(None) {
        Ok(mask) => (0..CpuSet::MAX_CPU).filter(|&c| mask.is_set(c)).collect::<Vec<_>>(),
        Err(e) => {
            tracing::warn!("pin_workers: the CPU affinity mask cannot be read ({e}); workers are not pinned");
            return Vec::new();
        }
    };
    if cores.len() < 2 {
        return Vec::new();
    }
    let next = Arc::new(AtomicUsize::new(0));
    let list = cores.clone();
    builder.on_thread_park(move || {
        if PINNED.with(|p| p.replace(true)) {
            return;
        }
        let core = list[next.fetch_add(1, Ordering::Relaxed) % list.len()];
        let mut set = CpuSet::new();
        set.set(core);
        if let Err(e) = sched_setaffinity(None, &set) {
            tracing::warn!("pin_workers: a worker thread cannot be pinned to core {core} ({e})");
        }
    });
    cores
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mask of the calling thread, as a list of cores.
    fn mask() -> Vec<usize> {
        let m = sched_getaffinity(None).unwrap_or_else(|e| panic!("{e}"));
        (0..CpuSet::MAX_CPU).filter(|&c| m.is_set(c)).collect()
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
        let cores = pin_worker_threads(&mut builder);
        assert_eq!(cores, all);
        let rt = builder.build().unwrap_or_else(|e| panic!("{e}"));
        let (mut workers, blocking) = rt.block_on(async {
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
            let blocking = tokio::task::spawn_blocking(mask).await.unwrap_or_else(|e| panic!("{e}"));
            (workers, blocking)
        });
        workers.sort();
        assert_eq!(workers, vec![vec![all[0]], vec![all[1]]], "each worker is pinned to a core of its own");
        assert_eq!(blocking, all, "a blocking thread keeps the whole mask");
    }
}
