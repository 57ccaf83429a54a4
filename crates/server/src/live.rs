//! A run in flight as the server holds it ([`LiveRun`]): its handle (to
//! steer it and answer its approvals) and its event stream, kept in memory
//! until the run ends and the stream is stored.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use hookbox::RunHandle;
use serde_json::{Value, json};

use crate::store::{Claim, RunEventRow, Tenant};

/// The most events a run keeps; later ones are dropped (one `truncated` event says so), the `end` event never.
pub const MAX_RUN_EVENTS: usize = 100_000;
/// A run in flight (or just ended, until its record is stored).
pub struct LiveRun {
    /// The tenant's id.
    pub tenant: i64,
    /// The tenant's name.
    pub tenant_name: String,
    /// The run's id.
    pub run_id: String,
    /// This worker's claim of the run (the fencing token its writes carry).
    pub claim: Claim,
    /// Steers the run.
    pub handle: RunHandle,
    log: Mutex<Vec<RunEventRow>>,
    /// The last event's id; subscribers wait on it.
    pub seq: tokio::sync::watch::Sender<i64>,
    ended: AtomicBool,
    /// Set as the run's end is being stored: no command is taken from then on.
    closing: AtomicBool,
    truncated: AtomicBool,
    /// Messages injected through the API so far.
    injected: std::sync::atomic::AtomicUsize,
    /// The id of the event before this process's first: a resumed run's
    /// stream goes on from the events stored before it parked.
    base: i64,
    /// Held while a command is applied, and while the run parks: a run that
    /// parked takes no command here.
    steering: Mutex<()>,
    /// True once the run parked (its events are stored; it is no longer here).
    parked: AtomicBool,
    /// True while a resumed run re-executes its checkpoint: commands wait.
    resuming: AtomicBool,
    /// An abort given while the run was parked: applied once the resumed
    /// run is past its checkpoint, so its record keeps what it did before.
    abort_after_resume: Mutex<Option<String>>,
    /// Messages injected while the run was parked, given to it once it is
    /// past its checkpoint (before that abort).
    inbox_after_resume: Mutex<Vec<String>>,
    /// True while that abort or those messages wait to be applied (read on
    /// every event, so that the two locks are taken only then).
    after_resume_pending: AtomicBool,
    /// True once that abort was applied (the run no longer parks).
    aborting: AtomicBool,
    /// An abort given through the API: its reason, kept in the run's
    /// checkpoints so that a run resumed after a crash ends aborted too.
    aborted_with: Mutex<Option<String>>,
    /// Told when an abort or a message is given through the API (makes it durable).
    on_change: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

/// The most messages the API injects into one run.
pub const MAX_INJECTIONS_PER_RUN: usize = 100;

impl LiveRun {
    /// A run of `tenant` that starts now, with the id `run_id`.
    pub fn new(tenant: &Tenant, run_id: String) -> Arc<Self> {
        LiveRun::resumed(tenant, run_id, 0, Claim::FIRST)
    }

    /// A run of `tenant` resumed here on `claim` of it, whose stored stream
    /// ends with event `base`.
    pub fn resumed(tenant: &Tenant, run_id: String, base: i64, claim: Claim) -> Arc<Self> {
        let handle = RunHandle::with_run_id(run_id.clone());
        Arc::new(LiveRun {
            tenant: tenant.id,
            tenant_name: tenant.name.clone(),
            run_id,
            claim,
            handle,
            log: Mutex::new(Vec::new()),
            seq: tokio::sync::watch::channel(0).0,
            ended: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            truncated: AtomicBool::new(false),
            injected: std::sync::atomic::AtomicUsize::new(0),
            base: base.max(0),
            steering: Mutex::new(()),
            parked: AtomicBool::new(false),
            resuming: AtomicBool::new(false),
            abort_after_resume: Mutex::new(None),
            inbox_after_resume: Mutex::new(Vec::new()),
            after_resume_pending: AtomicBool::new(false),
            aborting: AtomicBool::new(false),
            aborted_with: Mutex::new(None),
            on_change: std::sync::OnceLock::new(),
        })
    }

    /// Appends an event to the run's stream.
    pub fn push(&self, name: &str, data: &Value) {
        let seq = {
            let mut log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if log.len() >= MAX_RUN_EVENTS && name != "end" {
                if self.truncated.swap(true, Ordering::AcqRel) {
                    return;
                }
                let seq = self.next_seq(log.len());
                let note = json!({"message": format!("the run has more than {MAX_RUN_EVENTS} events; later ones are not kept")});
                log.push(RunEventRow { seq, name: "truncated".into(), data: note.to_string() });
                return;
            }
            let seq = self.next_seq(log.len());
            log.push(RunEventRow { seq, name: name.to_string(), data: data.to_string() });
            seq
        };
        self.seq.send_replace(seq);
    }

    /// Aborts the run for `reason` given through the API: kept for its
    /// checkpoints, and made durable at once (see [`LiveRun::on_change`]).
    pub fn abort_by_request(&self, reason: String) {
        *self.aborted_with.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reason.clone());
        self.handle.abort(reason);
        self.changed();
    }

    /// Queues `text`, given through the API, for the run's next turn
    /// boundary, and makes it durable at once (see [`LiveRun::on_change`]):
    /// until it is delivered, the run's checkpoints keep it in their inbox.
    ///
    /// Errors: as [`RunHandle::inject`].
    pub fn inject_by_request(&self, text: String) -> Result<(), hookbox::HandleError> {
        self.handle.inject(text)?;
        self.changed();
        Ok(())
    }

    fn changed(&self) {
        if let Some(f) = self.on_change.get() {
            f();
        }
    }

    /// The reason of an abort given through the API, if one was.
    pub fn aborted_with(&self) -> Option<String> {
        self.aborted_with.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Sets what makes an abort or an injection given through the API
    /// durable (once): called after each, it should write the run's
    /// checkpoint without blocking the caller.
    pub fn on_change(&self, f: Box<dyn Fn() + Send + Sync>) {
        let _ = self.on_change.set(f);
    }

    /// The id of the event before this process's first (0 for a run started here).
    pub fn base(&self) -> i64 {
        self.base
    }

    /// The id of the stream's last event (stored before this process, or pushed here).
    pub fn last_seq(&self) -> i64 {
        (*self.seq.borrow()).max(self.base)
    }

    fn next_seq(&self, kept: usize) -> i64 {
        self.base.saturating_add(i64::try_from(kept).unwrap_or(i64::MAX)).saturating_add(1)
    }

    /// Starts parking the run if `still_waiting` (checked while no command
    /// is applied): from then on commands are refused here
    /// ([`LiveRun::steering`]). True when it started.
    pub fn try_park(&self, still_waiting: impl FnOnce() -> bool) -> bool {
        let _steering = self.steering.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let park = still_waiting();
        if park {
            self.parked.store(true, Ordering::Release);
        }
        park
    }

    /// The park failed: the run goes on here and takes commands again.
    pub fn unpark(&self) {
        self.parked.store(false, Ordering::Release);
    }

    /// Marks a resumed run as re-executing its checkpoint (`true`) or past it.
    pub fn set_resuming(&self, resuming: bool) {
        self.resuming.store(resuming, Ordering::Release);
    }

    /// True while a resumed run re-executes its checkpoint: a command
    /// applied now would land inside the re-execution, so it waits.
    pub fn is_resuming(&self) -> bool {
        self.resuming.load(Ordering::Acquire)
    }

    /// Aborts the resumed run with `reason` once it is past its checkpoint.
    pub fn abort_after_resume(&self, reason: String) {
        // Kept in this run's checkpoints too: a second crash does not lose it.
        *self.aborted_with.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reason.clone());
        *self.abort_after_resume.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reason);
        // Set after what it tells of: an apply that missed it finds it set.
        self.after_resume_pending.store(true, Ordering::Release);
    }

    /// Messages injected while the run was parked, to give it once it is
    /// past its checkpoint.
    pub fn inject_after_resume(&self, texts: Vec<String>) {
        *self.inbox_after_resume.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = texts;
        self.after_resume_pending.store(true, Ordering::Release);
    }

    /// The messages injected while the run was parked and not given to it yet.
    pub fn inbox_after_resume(&self) -> Vec<String> {
        self.inbox_after_resume.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Runs `f` (a read of the run's journal) and returns, with its result,
    /// every message given through the API and not delivered yet: those
    /// injected while it was parked and not given to it yet, then those
    /// waiting in its handle's queue ([`RunHandle::undelivered_with`]). A
    /// message delivered meanwhile is in the journal `f` read or among these,
    /// never in both: a checkpoint stores them as its inbox, so a run resumed
    /// after its worker died delivers each once. `f` must not call this run.
    pub fn inbox_with<R>(&self, f: impl FnOnce() -> R) -> (Vec<String>, R) {
        let inbox = self.inbox_after_resume.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (waiting, out) = self.handle.undelivered_with(f);
        let mut all = inbox.clone();
        drop(inbox);
        all.extend(waiting);
        (all, out)
    }

    /// Gives the run the messages injected while it was parked, then applies
    /// the abort given while it was parked, if there is one.
    pub fn apply_abort_after_resume(&self) {
        if !self.after_resume_pending.swap(false, Ordering::AcqRel) {
            return;
        }
        {
            // Moved into the handle's queue with the inbox held, so that a
            // checkpoint ([`LiveRun::inbox_with`]) finds each in one of the two.
            let mut inbox = self.inbox_after_resume.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for text in std::mem::take(&mut *inbox) {
                // Counted as the API's injections are; a message the handle
                // refuses (the run ended) is logged: it can no longer be delivered.
                let _ = self.count_injection();
                if let Err(e) = self.handle.inject(text) {
                    tracing::warn!(run = %self.run_id, "a message injected while the run was parked was not delivered: {e}");
                }
            }
        }
        let reason = self.abort_after_resume.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(reason) = reason {
            self.aborting.store(true, Ordering::Release);
            self.handle.abort(reason);
        }
    }

    /// True once an abort given while the run was parked was applied: it does not park again.
    pub fn is_aborting(&self) -> bool {
        self.aborting.load(Ordering::Acquire)
    }

    /// True while the run parks or once it parked.
    pub fn is_parked(&self) -> bool {
        self.parked.load(Ordering::Acquire)
    }

    /// Runs `f` unless the run parked (`None` then): a command applied here
    /// never reaches a run that was dropped.
    pub fn steering<T>(&self, f: impl FnOnce() -> T) -> Option<T> {
        let _steering = self.steering.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (!self.parked.load(Ordering::Acquire)).then(f)
    }

    /// Counts one more injected message; false once the run has
    /// [`MAX_INJECTIONS_PER_RUN`] (the message is then refused).
    pub fn count_injection(&self) -> bool {
        self.injected
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_INJECTIONS_PER_RUN).then_some(n + 1))
            .is_ok()
    }

    /// Events after `after`, at most `limit`.
    pub fn events_after(&self, after: i64, limit: usize) -> Vec<RunEventRow> {
        let log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let start = usize::try_from(after.saturating_sub(self.base).max(0)).unwrap_or(usize::MAX).min(log.len());
        log[start..].iter().take(limit).cloned().collect()
    }

    /// Marks the run ended (its events and record are stored) and wakes its streams.
    pub fn mark_ended(&self) {
        self.ended.store(true, Ordering::Release);
        self.seq.send_modify(|_| {});
    }

    /// Marks the run as ending: its record is about to be stored, so a
    /// command given from now on is refused (409) rather than answered 200
    /// for a run whose record already says it is over.
    pub fn mark_closing(&self) {
        self.closing.store(true, Ordering::Release);
    }

    /// True once [`LiveRun::mark_closing`] was called.
    pub fn closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// True once the run ended and its events and record are stored.
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// `paused`, `waiting-approval` or `running`.
    pub fn status(&self) -> &'static str {
        if self.handle.paused() {
            "paused"
        } else if !self.handle.approvals().is_empty() {
            "waiting-approval"
        } else {
            "running"
        }
    }
}
