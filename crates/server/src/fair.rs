//! Fair sharing of the hook workers between tenants ([`FairGate`]): at most
//! `slots` evaluate calls run at once (one per core by default), and each
//! tenant at most its share of them: `slots` divided by the tenants active
//! in the last second (at least one). When a slot frees, it goes to the
//! waiting tenant that runs the fewest calls now (ties: the one that waited
//! longest). A tenant that floods the server queues behind its own calls
//! and leaves the other tenants' share free for them; alone, it may use
//! every slot. Waiting calls hold no instance and burn no CPU.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// The gate.
pub struct FairGate {
    inner: Mutex<Inner>,
}

/// How long a tenant counts as active after its last call began.
const ACTIVE_FOR: Duration = Duration::from_secs(1);

struct Inner {
    slots: usize,
    free: usize,
    /// When each tenant's last call arrived.
    recent: HashMap<i64, Instant>,
    running: HashMap<i64, usize>,
    /// Waiting calls per tenant, oldest first, each with its arrival number.
    waiting: HashMap<i64, VecDeque<(u64, oneshot::Sender<()>)>>,
    arrivals: u64,
}

/// A slot held by one call; dropping it hands the slot on.
pub struct Ticket {
    gate: Arc<FairGate>,
    tenant: i64,
}

impl FairGate {
    /// A gate with `slots` slots (at least 1).
    pub fn new(slots: usize) -> Arc<Self> {
        Arc::new(FairGate {
            inner: Mutex::new(Inner {
                slots: slots.max(1),
                free: slots.max(1),
                recent: HashMap::new(),
                running: HashMap::new(),
                waiting: HashMap::new(),
                arrivals: 0,
            }),
        })
    }

    /// Waits for a slot for a call of `tenant`.
    pub async fn enter(self: &Arc<Self>, tenant: i64) -> Ticket {
        let rx = {
            let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            inner.recent.insert(tenant, Instant::now());
            let share = inner.share();
            let running = inner.running.get(&tenant).copied().unwrap_or(0);
            if inner.free > 0 && inner.waiting.is_empty() && running < share {
                inner.free -= 1;
                *inner.running.entry(tenant).or_insert(0) += 1;
                return Ticket { gate: self.clone(), tenant };
            }
            let (tx, rx) = oneshot::channel();
            inner.arrivals += 1;
            let n = inner.arrivals;
            inner.waiting.entry(tenant).or_default().push_back((n, tx));
            rx
        };
        // The slot was counted as ours when it was handed over; a closed
        // channel cannot happen while the gate lives.
        let _ = rx.await;
        Ticket { gate: self.clone(), tenant }
    }

    /// Gives a slot back and hands it to the next call, if any.
    fn release(&self, tenant: i64) {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = inner.running.get_mut(&tenant) {
            *n -= 1;
            if *n == 0 {
                inner.running.remove(&tenant);
            }
        }
        inner.free += 1;
        let share = inner.share();
        while inner.free > 0 {
            // Among the tenants under their share, the one with the fewest calls running, then the oldest waiter.
            let next = inner
                .waiting
                .iter()
                .filter_map(|(t, q)| q.front().map(|(n, _)| (*t, *n)))
                .map(|(t, n)| (t, n, inner.running.get(&t).copied().unwrap_or(0)))
                .filter(|(_, _, running)| *running < share)
                .min_by_key(|(_, n, running)| (*running, *n));
            // None under its share: the free slot stays for another tenant's next call
            // (a tenant with waiters always runs one, whose end calls this again).
            let Some((t, _, _)) = next else { break };
            let Some(queue) = inner.waiting.get_mut(&t) else { break };
            let Some((_, tx)) = queue.pop_front() else { break };
            if queue.is_empty() {
                inner.waiting.remove(&t);
            }
            if tx.send(()).is_ok() {
                inner.free -= 1;
                *inner.running.entry(t).or_insert(0) += 1;
            }
            // A waiter that went away (its request was dropped) is skipped.
        }
    }
}

impl Inner {
    /// Each tenant's share of the slots now: the slots divided by the tenants
    /// active in the last second, at least one.
    fn share(&mut self) -> usize {
        let now = Instant::now();
        self.recent.retain(|t, at| now.duration_since(*at) < ACTIVE_FOR || self.running.contains_key(t));
        (self.slots / self.recent.len().max(1)).max(1)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.gate.release(self.tenant);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_tenant_running_the_fewest() {
        let gate = FairGate::new(2);
        let a1 = gate.enter(1).await;
        let a2 = gate.enter(1).await;
        // Tenant 1 queues three more, then tenant 2 one.
        let mut waits = Vec::new();
        for t in [1, 1, 1, 2] {
            let g = gate.clone();
            waits.push(tokio::spawn(async move { (t, g.enter(t).await) }));
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        drop(a1);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        // Tenant 1 still runs one and tenant 2 none: the freed slot goes to tenant 2 before tenant 1's older waiters.
        let finished: Vec<usize> = (0..waits.len()).filter(|&i| waits[i].is_finished()).collect();
        assert_eq!(finished, [3], "only tenant 2's call may hold the slot");
        let (t, ticket) = waits.remove(3).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t, 2);
        drop(ticket);
        // Tenant 2 was active within the second: tenant 1, which still runs one,
        // may not take its share, so the freed slot stays free...
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let finished: Vec<usize> = (0..waits.len()).filter(|&i| waits[i].is_finished()).collect();
        assert_eq!(finished, Vec::<usize>::new());
        // ...until tenant 1's running call ends: then its oldest waiter starts.
        drop(a2);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let finished: Vec<usize> = (0..waits.len()).filter(|&i| waits[i].is_finished()).collect();
        assert_eq!(finished, [0]);
        for w in waits {
            w.abort();
        }
    }
}
