//! Fair sharing of the hook workers between tenants ([`FairGate`]): at most
//! `slots` evaluate calls run at once (one per core by default), and each
//! tenant at most its share of them: `slots` divided by the tenants active
//! in the last second (at least one). When a slot frees, it goes to the
//! waiting tenant that runs the fewest calls now (ties: the one that waited
//! longest). A tenant that floods the server queues behind its own calls
//! and leaves the other tenants' share free for them; alone, it may use
//! every slot. Waiting calls hold no instance and burn no CPU; one dropped
//! while it waits (its request timed out, its connection closed) leaves the
//! queue or gives back the slot handed to it, so no client can make the
//! gate lose slots or keep entries for calls that are gone.
//!
//! The gate also holds back the reading of a flooding tenant's next
//! requests ([`FairGate::hold_reads`], used by [`crate::fair_io`]): while
//! [`READ_AHEAD`] or more of a tenant's calls wait, its keep-alive
//! connections read no new request, so the server spends no worker time
//! reading, parsing and queueing requests that could only wait, and another
//! tenant's request is read at once. Each call that leaves the queue lets
//! one held connection read (oldest first); an empty queue releases them
//! all.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::futures::OwnedNotified;
use tokio::sync::{Notify, oneshot};

/// The gate.
pub struct FairGate {
    inner: Mutex<Inner>,
}

/// How many of one tenant's calls may wait in the gate before its
/// connections stop reading new requests ([`FairGate::hold_reads`]).
pub const READ_AHEAD: usize = 2;

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
    /// Per tenant with a full queue, what its held connections wait on.
    readers: HashMap<i64, Arc<Notify>>,
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
                readers: HashMap::new(),
            }),
        })
    }

    /// Waits for a slot for a call of `tenant`.
    pub async fn enter(self: &Arc<Self>, tenant: i64) -> Ticket {
        let (rx, n) = {
            let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            inner.recent.insert(tenant, Instant::now());
            // Waiters a grown share lets run go first; a free slot left then
            // is one no waiter may take: a call under its share takes it.
            let share = inner.hand_out();
            let running = inner.running.get(&tenant).copied().unwrap_or(0);
            if inner.free > 0 && running < share {
                inner.free -= 1;
                *inner.running.entry(tenant).or_insert(0) += 1;
                return Ticket { gate: self.clone(), tenant };
            }
            let (tx, rx) = oneshot::channel();
            inner.arrivals += 1;
            let n = inner.arrivals;
            inner.waiting.entry(tenant).or_default().push_back((n, tx));
            (rx, n)
        };
        // The slot is counted as ours when it is handed over: if this future
        // is dropped from then on (the request timed out, its connection
        // closed) before it made the ticket, the guard gives the slot back;
        // dropped before, it takes its entry out of the queue.
        let mut waiter = Waiter { gate: self.clone(), tenant, arrival: n, rx: Some(rx) };
        if let Some(rx) = waiter.rx.as_mut() {
            // A closed channel cannot happen while the gate lives.
            let _ = rx.await;
        }
        waiter.rx = None;
        Ticket { gate: self.clone(), tenant }
    }

    /// `None` when a connection of `tenant` may read its next request now;
    /// else ([`READ_AHEAD`] or more of its calls wait) a waiter, already
    /// registered under the gate's lock so no notification can be missed,
    /// that completes once for each call that leaves the queue (oldest
    /// waiter first), and for all when the queue empties.
    pub fn hold_reads(&self, tenant: i64) -> Option<Pin<Box<OwnedNotified>>> {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if inner.waiting.get(&tenant).map_or(0, VecDeque::len) < READ_AHEAD {
            return None;
        }
        let mut held = Box::pin(inner.readers.entry(tenant).or_default().clone().notified_owned());
        held.as_mut().enable();
        Some(held)
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
        inner.hand_out();
    }
}

impl Inner {
    /// Hands the free slots to waiting calls ([`Inner::next_waiter`]) while
    /// any may run; returns the share it used. A slot no waiter may take
    /// stays free for another tenant's next call (a tenant with waiters
    /// always runs one, whose end hands out again).
    fn hand_out(&mut self) -> usize {
        let share = self.share();
        while self.free > 0 {
            let Some(t) = self.next_waiter(share) else { break };
            let Some(queue) = self.waiting.get_mut(&t) else { break };
            let Some((_, tx)) = queue.pop_front() else { break };
            let empty = queue.is_empty();
            if empty {
                self.waiting.remove(&t);
            }
            self.left_queue(t, empty);
            if tx.send(()).is_ok() {
                self.free -= 1;
                *self.running.entry(t).or_insert(0) += 1;
            }
            // A waiter leaves the queue as it goes away; one gone anyway is skipped.
        }
        share
    }

    /// One call of `tenant` left its queue (`empty`: the last one): one
    /// held connection of the tenant may read, or all of them.
    fn left_queue(&mut self, tenant: i64, empty: bool) {
        if empty {
            if let Some(n) = self.readers.remove(&tenant) {
                n.notify_waiters();
            }
        } else if let Some(n) = self.readers.get(&tenant) {
            n.notify_one();
        }
    }

    /// The tenant whose waiting call gets the next free slot: among the
    /// tenants under `share`, the one running the fewest calls, then the
    /// one whose first waiter came first; `None` when no waiter may run.
    fn next_waiter(&self, share: usize) -> Option<i64> {
        self.waiting
            .iter()
            .filter_map(|(t, q)| q.front().map(|(n, _)| (*t, *n)))
            .map(|(t, n)| (t, n, self.running.get(&t).copied().unwrap_or(0)))
            .filter(|(_, _, running)| *running < share)
            .min_by_key(|(_, n, running)| (*running, *n))
            .map(|(t, _, _)| t)
    }

    /// Each tenant's share of the slots now: the slots divided by the tenants
    /// active in the last second, at least one.
    fn share(&mut self) -> usize {
        let now = Instant::now();
        self.recent.retain(|t, at| now.duration_since(*at) < ACTIVE_FOR || self.running.contains_key(t));
        (self.slots / self.recent.len().max(1)).max(1)
    }
}

/// A call waiting in [`FairGate::enter`]; dropped while it waits (its
/// request timed out, its connection closed), it takes its entry out of
/// the queue, or gives back the slot already handed to it.
struct Waiter {
    gate: Arc<FairGate>,
    tenant: i64,
    /// Its arrival number, which names its entry in the queue.
    arrival: u64,
    /// Kept until the check in `drop`, so a handover cannot fail meanwhile.
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let Some(rx) = self.rx.take() else { return };
        let mut inner = self.gate.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(queue) = inner.waiting.get_mut(&self.tenant)
            && let Some(i) = queue.iter().position(|(n, _)| *n == self.arrival)
        {
            queue.remove(i);
            let empty = queue.is_empty();
            if empty {
                inner.waiting.remove(&self.tenant);
            }
            inner.left_queue(self.tenant, empty);
            return;
        }
        drop(inner);
        drop(rx);
        // Taken out of the queue (under the lock, while `rx` lived): the slot was handed to this call.
        self.gate.release(self.tenant);
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

    /// A tenant under its share takes a free slot at once while another
    /// tenant, at its share, has calls waiting (before, it queued behind
    /// them until one of that tenant's calls ended).
    #[tokio::test]
    async fn a_call_under_its_share_does_not_queue_behind_a_flooding_tenant() {
        let gate = FairGate::new(2);
        // Tenant 2 is active: each tenant's share is one slot.
        drop(gate.enter(2).await);
        let a = gate.enter(1).await;
        let mut flood = Vec::new();
        for _ in 0..3 {
            let g = gate.clone();
            flood.push(tokio::spawn(async move { g.enter(1).await }));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(flood.iter().all(|f| !f.is_finished()), "tenant 1 is at its share");
        let b = tokio::time::timeout(std::time::Duration::from_millis(200), gate.enter(2)).await;
        assert!(b.is_ok(), "tenant 2's call waited for the free slot");
        drop(a);
        for f in flood {
            f.abort();
        }
    }

    /// When another tenant goes quiet, the share grows: a waiting call it
    /// lets run starts at the next call's arrival, not at the next release.
    #[tokio::test]
    async fn a_waiter_a_grown_share_lets_run_starts_at_the_next_call() {
        let gate = FairGate::new(2);
        drop(gate.enter(2).await);
        let held = gate.enter(1).await;
        let g = gate.clone();
        let waiter = tokio::spawn(async move { g.enter(1).await });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "tenant 1 is at its share of one");
        // Tenant 2 has been quiet for longer than ACTIVE_FOR: tenant 1's share is two.
        tokio::time::sleep(ACTIVE_FOR + std::time::Duration::from_millis(100)).await;
        let g = gate.clone();
        let next = tokio::spawn(async move { g.enter(1).await });
        let started = tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await;
        assert!(matches!(started, Ok(Ok(_))), "the waiter did not get the free slot");
        assert!(!next.is_finished(), "the newer call waits behind it");
        drop(held);
        next.abort();
    }

    /// A call dropped after its slot was handed to it, before it ran (its
    /// request timed out or its connection closed), gives the slot back:
    /// without it each such call lost the gate one slot for good.
    #[tokio::test]
    async fn a_call_dropped_as_its_slot_is_handed_over_gives_it_back() {
        let gate = FairGate::new(1);
        let held = gate.enter(1).await;
        let mut waiting = Box::pin(gate.enter(2));
        let short = std::time::Duration::from_millis(20);
        assert!(tokio::time::timeout(short, &mut waiting).await.is_err(), "the one slot is held");
        // The slot is handed to the waiting call, which is dropped before it runs again.
        drop(held);
        drop(waiting);
        let next = tokio::time::timeout(std::time::Duration::from_secs(5), gate.enter(3)).await;
        let Ok(held) = next else { panic!("the slot handed to the dropped call was lost") };
        // A waiter dropped before any handover is skipped: the slot goes to the next one.
        let mut gone = Box::pin(gate.enter(4));
        assert!(tokio::time::timeout(short, &mut gone).await.is_err());
        let after = tokio::spawn({
            let gate = gate.clone();
            async move { gate.enter(5).await }
        });
        tokio::time::sleep(short).await;
        drop(gone);
        drop(held);
        let t = tokio::time::timeout(std::time::Duration::from_secs(5), after).await;
        assert!(matches!(t, Ok(Ok(_))), "the slot went to the dropped waiter");
    }
}
