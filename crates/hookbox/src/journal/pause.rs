//! Hook pauses across a resume (issue 17, durable pause): a run that waits
//! in a hook's `pause` can be parked with its checkpoint and resumed
//! elsewhere once the pause is answered. The re-executed run meets the same
//! `pause` directives again; those its checkpoint counts as passed
//! ([`super::Checkpoint::pauses`]) are not applied a second time, and the
//! pause it parked in counts as passed once answered
//! ([`super::Checkpoint::resume_pause`]). A park also counts the events
//! dispatched before it ([`super::Checkpoint::events`]), so a run parked in
//! the embedder's pause alone is re-executed without adding to its stream
//! the event it paused after.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::RunJournal;

/// A run's hook pauses: how many it passed, how many its checkpoint had passed.
#[derive(Debug, Default)]
pub(crate) struct Pauses {
    /// Hook pauses passed in this execution (a re-execution's included).
    passed: AtomicU64,
    /// Resuming: the hook pauses the checkpoint had passed.
    resumed: u64,
    /// True while the run waits in a hook's pause.
    waiting: AtomicBool,
    /// Events dispatched in this execution (a re-execution's included).
    dispatched: AtomicU64,
    /// Resuming: the events its checkpoint's stream holds ([`super::Checkpoint::events`]).
    events: u64,
}

impl Pauses {
    /// The pauses of a run resumed from a checkpoint that had passed
    /// `resumed` hook pauses and dispatched `events` events.
    pub(crate) fn resumed(resumed: u64, events: u64) -> Self {
        Pauses { resumed, events, ..Pauses::default() }
    }
}

impl RunJournal {
    /// A hook's `pause` directive was honoured: true when the run must
    /// pause, false when this is a re-execution of a pause the run passed
    /// before its checkpoint (or while it still catches up to it).
    pub fn hook_pause_applies(&self) -> bool {
        !self.catching_up() && self.pauses.passed.load(Ordering::SeqCst) >= self.pauses.resumed
    }

    /// The run waits in a hook's pause (`true`) or went past it (`false`).
    pub fn set_in_hook_pause(&self, waiting: bool) {
        self.pauses.waiting.store(waiting, Ordering::SeqCst);
    }

    /// True while the run waits in a hook's pause (not only the embedder's).
    pub fn in_hook_pause(&self) -> bool {
        self.pauses.waiting.load(Ordering::SeqCst)
    }

    /// The run went past a hook's `pause` directive (applied or not).
    pub fn hook_pause_passed(&self) {
        self.pauses.passed.fetch_add(1, Ordering::SeqCst);
    }

    /// Resuming: true while fewer hook pauses were passed than the checkpoint had passed.
    pub(crate) fn pauses_owed(&self) -> bool {
        self.pauses.passed.load(Ordering::SeqCst) < self.pauses.resumed
    }

    /// Hook pauses passed so far.
    pub(crate) fn hook_pauses_passed(&self) -> u64 {
        self.pauses.passed.load(Ordering::SeqCst)
    }

    /// An event's hooks were dispatched and its trace given to the trace
    /// sink (the agent calls this right after the sink).
    pub(crate) fn event_dispatched(&self) {
        self.pauses.dispatched.fetch_add(1, Ordering::SeqCst);
    }

    /// Events dispatched so far: what a park writes as [`super::Checkpoint::events`].
    pub fn events_dispatched(&self) -> u64 {
        self.pauses.dispatched.load(Ordering::SeqCst)
    }

    /// Resuming: true while the event being dispatched is one whose entries
    /// the stored stream holds already (its checkpoint's
    /// [`super::Checkpoint::events`]): a trace sink adds nothing for it. It
    /// marks where a pause of the embedder's alone parked the run, which no
    /// hook call or pause directive marks: re-executed, that event's hooks
    /// catch up before its trace is given to the sink.
    pub fn stream_owed(&self) -> bool {
        self.pauses.dispatched.load(Ordering::SeqCst) < self.pauses.events
    }
}
