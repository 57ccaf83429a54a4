//! A worker's room for runs (issue 17): at most `worker_runs` runs at once
//! ([`Rooms`]), each holding a [`Room`] until it ends or parks. A room let
//! go while runs wait wakes the claim loop (`crate::resume`), so a run queued in the
//! database is started as soon as a place is free, and while runs are
//! known to wait there a new run queues behind them rather than taking the
//! free place first (`crate::queue`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// A worker's places for runs.
pub struct Rooms {
    places: Arc<Semaphore>,
    freed: Arc<Notify>,
    /// True when the last claim found a queued or resumable run.
    waiting: Arc<AtomicBool>,
}

/// One run's place; letting go of a place a run used wakes the claim loop
/// while runs wait (one given back unused, by a claim put off, does not:
/// the loop would claim and put off the same run without a pause).
pub struct Room {
    _place: OwnedSemaphorePermit,
    freed: Arc<Notify>,
    waiting: Arc<AtomicBool>,
    used: bool,
}

impl Room {
    /// Marks the place as taken by a run that started (or resumed) here.
    pub fn used(mut self) -> Self {
        self.used = true;
        self
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        // Otherwise the loop's tick finds what other workers queued.
        if self.used && self.waiting.load(Ordering::Acquire) {
            self.freed.notify_one();
        }
    }
}

impl Rooms {
    /// `places` places (`worker_runs`).
    pub fn new(places: u32) -> Self {
        Rooms {
            places: Arc::new(Semaphore::new(usize::try_from(places).unwrap_or(usize::MAX))),
            freed: Arc::new(Notify::new()),
            waiting: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A place, or `None` when every one is taken.
    pub fn take(&self) -> Option<Room> {
        let place = self.places.clone().try_acquire_owned().ok()?;
        Some(Room { _place: place, freed: self.freed.clone(), waiting: self.waiting.clone(), used: false })
    }

    /// Told when a place is let go (a wake-up while no one waits is kept for the next wait).
    pub fn freed(&self) -> Arc<Notify> {
        self.freed.clone()
    }

    /// Notes whether the last claim found a run waiting in the database.
    pub fn set_waiting(&self, waiting: bool) {
        self.waiting.store(waiting, Ordering::Release);
    }

    /// True when runs are known to wait in the database for a place.
    pub fn waiting(&self) -> bool {
        self.waiting.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn places_are_counted_and_a_place_let_go_wakes_a_waiter() {
        let rooms = Rooms::new(1);
        rooms.set_waiting(true);
        let unused = rooms.take();
        assert!(unused.is_some() && rooms.take().is_none(), "one place");
        drop(unused);
        let freed = rooms.freed();
        let woken = tokio::time::timeout(std::time::Duration::from_millis(50), freed.notified()).await;
        assert!(woken.is_err(), "a place given back unused wakes no one");
        drop(rooms.take().map(Room::used));
        // The wake-up is kept for the next wait.
        let freed = rooms.freed();
        tokio::time::timeout(std::time::Duration::from_secs(5), freed.notified())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(rooms.take().is_some(), "free again");
    }
}
