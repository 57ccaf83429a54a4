//! [`RunHandle`]: steering a run in flight from outside the hooks (`docs/contract.md`,
//! "Pause, resume, abort and the run handle").
//!
//! The handle and the hooks share one injection queue and one pause/abort
//! state. Every method is safe from any thread or task. The loop looks at the
//! state only at its safe points (after each hook point), so nothing
//! pre-empts a tool that is already running: a pause or abort requested while
//! a tool runs takes effect once its result is appended.
//!
//! A pause needs someone to resume it. When the run's own copy is the only
//! handle left (a library run such as [`crate::Agent::run`] makes one nobody
//! else holds, or the embedder dropped its clones) and no pause timeout is
//! set, a pause ends the run at once with an aborted error saying so, instead
//! of waiting for ever.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use hookbox_contract::{Approval, ApprovalAnswer};
use tokio::sync::Notify;

/// Errors from [`RunHandle::inject`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandleError {
    /// The run has ended; nobody would read the message.
    #[error("the run has ended: the message would never be read")]
    Finished,
    /// Empty or whitespace-only text.
    #[error("cannot inject an empty message")]
    Empty,
    /// No approval with this id is waiting (never asked, or already answered).
    #[error("no approval `{0}` is waiting for an answer")]
    UnknownApproval(String),
    /// `approve_with_arguments` with arguments that are not a JSON object.
    #[error("{0}")]
    InvalidArguments(String),
}

#[derive(Debug, Default)]
struct State {
    paused: bool,
    /// Pauses begun so far: the current pause's number while paused.
    pauses: u64,
    abort: Option<Option<String>>,
    /// Messages waiting for the next turn boundary, oldest first.
    queue: Vec<Queued>,
    finished: bool,
    /// The approval the run waits for, if any (tool calls run one at a time).
    asking: Option<Approval>,
    /// Its answer, once given.
    answer: Option<ApprovalAnswer>,
    /// True while the run waits at a safe point in a pause.
    waiting: bool,
}

/// A message in the injection queue.
#[derive(Debug)]
struct Queued {
    text: String,
    /// True when it came through [`RunHandle::inject`] (from outside the
    /// run); false for a hook's injection or another run's post, which
    /// re-executing the run makes again.
    from_handle: bool,
}

/// The texts of `queue`, in order.
fn texts(queue: Vec<Queued>) -> Vec<String> {
    queue.into_iter().map(|q| q.text).collect()
}

#[derive(Debug, Default)]
struct Inner {
    state: Mutex<State>,
    changed: Notify,
    /// How many `RunHandle`s share this state (the run's own included).
    handles: AtomicUsize,
    /// The id the next turn started with this handle takes ([`RunHandle::with_run_id`]).
    run_id: Mutex<Option<String>>,
}

/// The reason an unresumable pause ends a run with.
pub const UNRESUMABLE_PAUSE: &str = "the run paused and nothing can resume it: no other RunHandle of the run exists \
     (keep a clone and pass it to Agent::run_with_handle, or set [agent] pause_timeout_ms)";

/// A cloneable, thread-safe handle on one run: pause, resume, abort, inject.
#[derive(Debug)]
pub struct RunHandle {
    inner: Arc<Inner>,
}

impl Default for RunHandle {
    fn default() -> Self {
        let inner = Arc::new(Inner::default());
        inner.handles.store(1, Ordering::SeqCst);
        RunHandle { inner }
    }
}

impl Clone for RunHandle {
    fn clone(&self) -> Self {
        self.inner.handles.fetch_add(1, Ordering::SeqCst);
        RunHandle { inner: self.inner.clone() }
    }
}

impl Drop for RunHandle {
    fn drop(&mut self) {
        // Counted down before the wake-up, so a paused run that wakes sees it.
        self.inner.handles.fetch_sub(1, Ordering::SeqCst);
        self.inner.changed.notify_waiters();
    }
}

/// A queue-only reference to a run ([`RunHandle::downgrade`]).
#[derive(Debug, Clone)]
pub(crate) struct WeakRunHandle {
    inner: std::sync::Weak<Inner>,
}

impl WeakRunHandle {
    /// Queues `text` for the run's next turn boundary, as [`RunHandle::inject`]
    /// does; gives it back when the run has ended (or its state is gone).
    pub(crate) fn inject(&self, text: String) -> Result<(), String> {
        let Some(inner) = self.inner.upgrade() else { return Err(text) };
        let mut s = inner.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.finished {
            return Err(text);
        }
        s.queue.push(Queued { text, from_handle: false });
        Ok(())
    }
}

/// What the loop finds at a safe point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SafePoint {
    /// Go on.
    Proceed,
    /// Stop: the run was aborted with this reason.
    Abort(Option<String>),
}

impl RunHandle {
    /// A handle for a run that has not started yet; pass it to
    /// [`crate::agent::Agent::run_with_handle`].
    pub fn new() -> Self {
        RunHandle::default()
    }

    /// A handle whose run takes `run_id` as its id (hooks see it in
    /// `run-start` and the event context; the record holds it), instead of a
    /// fresh UUID: a service that named the run before it started. Only the
    /// first turn run with the handle takes it (a session's follow-up turns
    /// get fresh ids); a replayed journal's recorded id wins over it.
    pub fn with_run_id(run_id: impl Into<String>) -> Self {
        let handle = RunHandle::default();
        *handle.inner.run_id.lock().unwrap_or_else(|p| p.into_inner()) = Some(run_id.into());
        handle
    }

    /// The id given by [`RunHandle::with_run_id`], once.
    pub(crate) fn take_run_id(&self) -> Option<String> {
        self.inner.run_id.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked while holding it;
        // the state itself is always consistent, so keep going.
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Pauses the run at its next safe point.
    pub fn pause(&self) {
        let mut s = self.state();
        if !s.paused {
            s.pauses += 1;
        }
        s.paused = true;
        drop(s);
        self.inner.changed.notify_waiters();
    }

    /// Releases a paused run.
    pub fn resume(&self) {
        self.state().paused = false;
        self.inner.changed.notify_waiters();
    }

    /// Aborts the run at its next safe point (also releases a pause). The run
    /// ends with an aborted error carrying `reason` and its partial usage.
    pub fn abort(&self, reason: impl Into<String>) {
        let mut s = self.state();
        if s.abort.is_none() {
            s.abort = Some(Some(reason.into()));
        }
        drop(s);
        self.inner.changed.notify_waiters();
    }

    /// Queues `text` as a user message, delivered at the run's next turn
    /// boundary, or returned as undelivered if the run ends first.
    ///
    /// Errors: [`HandleError::Finished`] after the run ended, [`HandleError::Empty`] for blank text.
    pub fn inject(&self, text: impl Into<String>) -> Result<(), HandleError> {
        let text = text.into();
        if text.trim().is_empty() {
            return Err(HandleError::Empty);
        }
        let mut s = self.state();
        if s.finished {
            return Err(HandleError::Finished);
        }
        s.queue.push(Queued { text, from_handle: true });
        Ok(())
    }

    /// Runs `f` with the injection queue held, and returns the messages
    /// injected through [`RunHandle::inject`] that wait for the run's next
    /// turn boundary (oldest first) with `f`'s result. A turn boundary takes
    /// the queue and writes its delivery into the run's journal under the
    /// same lock, so a journal read in `f` and these messages never both
    /// hold one message, nor both miss it: a durable host stores the two
    /// together (a checkpoint's inbox). `f` must not call this handle.
    pub fn undelivered_with<R>(&self, f: impl FnOnce() -> R) -> (Vec<String>, R) {
        let s = self.state();
        let out = f();
        let waiting = s.queue.iter().filter(|q| q.from_handle).map(|q| q.text.clone()).collect();
        drop(s);
        (waiting, out)
    }

    /// How many injected messages wait for the run's next turn boundary.
    pub fn queued(&self) -> usize {
        self.state().queue.len()
    }

    /// True while the run is paused.
    pub fn paused(&self) -> bool {
        self.state().paused
    }

    /// While the run is paused, the number of this pause (1 for the run's
    /// first, 2 for the next...); `None` when it is not paused. An answer to
    /// a pause is applied with [`RunHandle::resume_pause`] or
    /// [`RunHandle::abort_pause`] and this number, so an answer that comes
    /// after its pause ended (a pause timeout) never lands on a later pause.
    pub fn pause_id(&self) -> Option<u64> {
        let s = self.state();
        s.paused.then_some(s.pauses)
    }

    /// The number of the pause the run waits in at a safe point, if it
    /// does; `None` while it runs (a pause asked for while a tool or a hook
    /// runs takes effect at the next safe point, and waits only then). An
    /// embedder that parks paused runs parks only these.
    pub fn waiting_in_pause(&self) -> Option<u64> {
        let s = self.state();
        (s.paused && s.waiting).then_some(s.pauses)
    }

    /// Resumes the run if it is still in pause `id` (from [`RunHandle::pause_id`]);
    /// returns false, changing nothing, when that pause is over.
    pub fn resume_pause(&self, id: u64) -> bool {
        let mut s = self.state();
        if !(s.paused && s.pauses == id) {
            return false;
        }
        s.paused = false;
        drop(s);
        self.inner.changed.notify_waiters();
        true
    }

    /// Aborts the run if it is still in pause `id` (from [`RunHandle::pause_id`]);
    /// returns false, changing nothing, when that pause is over.
    pub fn abort_pause(&self, id: u64, reason: impl Into<String>) -> bool {
        let mut s = self.state();
        if !(s.paused && s.pauses == id) {
            return false;
        }
        if s.abort.is_none() {
            s.abort = Some(Some(reason.into()));
        }
        drop(s);
        self.inner.changed.notify_waiters();
        true
    }

    /// The approval the run is waiting for, if any: the tool call (with the
    /// arguments it would run with) and each hook's reason. Answer it with
    /// [`RunHandle::answer`]. A run asks for one approval at a time.
    pub fn approvals(&self) -> Vec<Approval> {
        let s = self.state();
        // An answered approval is no longer waiting, though the run may not have taken the answer yet.
        s.asking.iter().filter(|_| s.answer.is_none()).cloned().collect()
    }

    /// Answers the waiting approval `id`: approve, deny (the call gets a
    /// declined result and the run goes on) or approve with other arguments.
    ///
    /// Errors: [`HandleError::UnknownApproval`] when no approval `id` waits
    /// (never asked, already answered, or the run ended);
    /// [`HandleError::InvalidArguments`] when `approve_with_arguments` is not
    /// a JSON object (nothing is answered).
    pub fn answer(&self, id: &str, answer: ApprovalAnswer) -> Result<(), HandleError> {
        if let ApprovalAnswer::ApproveWithArguments(args) = &answer {
            check_arguments(args).map_err(HandleError::InvalidArguments)?;
        }
        let mut s = self.state();
        if s.answer.is_some() || s.asking.as_ref().is_none_or(|a| a.id != id) {
            return Err(HandleError::UnknownApproval(id.to_string()));
        }
        s.answer = Some(answer);
        drop(s);
        self.inner.changed.notify_waiters();
        Ok(())
    }

    /// True once the run has ended, however it ended.
    pub fn finished(&self) -> bool {
        self.state().finished
    }

    /// A reference to the run's queue that does not count as a handle (a
    /// pause is still "unresumable" when only such references remain): what
    /// the message bus keeps of a session's run in flight.
    pub(crate) fn downgrade(&self) -> WeakRunHandle {
        WeakRunHandle { inner: Arc::downgrade(&self.inner) }
    }

    /// Queues a hook's injection (the same queue the handle writes to).
    pub(crate) fn push_injection(&self, text: String) {
        self.state().queue.push(Queued { text, from_handle: false });
    }

    /// Takes every queued message (a turn boundary).
    pub(crate) fn drain(&self) -> Vec<String> {
        self.drain_with(|queued| queued)
    }

    /// Takes every queued message and passes them to `deliver` with the
    /// queue held (a turn boundary that journals what it delivers: see
    /// [`RunHandle::undelivered_with`]). `deliver` must not call this handle.
    pub(crate) fn drain_with<R>(&self, deliver: impl FnOnce(Vec<String>) -> R) -> R {
        let mut s = self.state();
        let queued = texts(std::mem::take(&mut s.queue));
        let out = deliver(queued);
        drop(s);
        out
    }

    /// Closes the queue and takes what is left: from now on `inject` fails, so
    /// no message can race into a run that has ended.
    pub(crate) fn close(&self) -> Vec<String> {
        let mut s = self.state();
        s.finished = true;
        s.paused = false;
        s.asking = None;
        s.answer = None;
        texts(std::mem::take(&mut s.queue))
    }

    pub(crate) fn abort_requested(&self) -> Option<Option<String>> {
        self.state().abort.clone()
    }

    /// Parks `approval` and waits for its answer (or an abort, or `timeout`).
    /// Without a timeout, an approval no other handle can answer is
    /// [`ApprovalWait::Nobody`] at once.
    pub(crate) async fn wait_for_approval(
        &self,
        approval: Approval,
        timeout: Option<std::time::Duration>,
    ) -> ApprovalWait {
        let id = approval.id.clone();
        {
            let mut s = self.state();
            s.asking = Some(approval);
            s.answer = None;
        }
        self.inner.changed.notify_waiters();
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let outcome = loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(reason) = self.abort_requested() {
                break ApprovalWait::Abort(reason);
            }
            if let Some(answer) = self.state().answer.take() {
                break ApprovalWait::Answered(answer);
            }
            if deadline.is_none() && self.inner.handles.load(Ordering::SeqCst) <= 1 {
                tracing::warn!(approval = %id, "an approval was asked and nothing can answer it: the call is denied");
                break ApprovalWait::Nobody;
            }
            match deadline {
                None => changed.await,
                Some(d) => {
                    if tokio::time::timeout_at(d, changed).await.is_err() {
                        break ApprovalWait::TimedOut;
                    }
                }
            }
        };
        let mut s = self.state();
        s.asking = None;
        s.answer = None;
        outcome
    }

    /// Resolves once an abort is requested (at once if one already was),
    /// with its reason: what a model request in flight waits beside.
    pub(crate) async fn abort_wanted(&self) -> Option<String> {
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(reason) = self.abort_requested() {
                return reason;
            }
            changed.await;
        }
    }

    /// A safe point: returns at once unless the run is paused; a paused run
    /// waits for resume or abort, or for `timeout` (then `on_timeout` decides).
    /// Without a timeout, a pause that no other handle can resume aborts with
    /// [`UNRESUMABLE_PAUSE`].
    pub(crate) async fn safe_point(&self, timeout: Option<std::time::Duration>, on_timeout: PauseTimeout) -> SafePoint {
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        /// Clears `waiting` when the safe point returns or is dropped.
        struct Waiting<'a>(&'a RunHandle);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.state().waiting = false;
            }
        }
        let mut waiting: Option<Waiting<'_>> = None;
        loop {
            // Register interest before reading the state, so a change between the
            // read and the wait is not missed.
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(reason) = self.abort_requested() {
                return SafePoint::Abort(reason);
            }
            if !self.paused() {
                return SafePoint::Proceed;
            }
            if deadline.is_none() && self.inner.handles.load(Ordering::SeqCst) <= 1 {
                tracing::warn!("{UNRESUMABLE_PAUSE}");
                return SafePoint::Abort(Some(UNRESUMABLE_PAUSE.to_string()));
            }
            // Waiting from here (also if this future is dropped while it waits).
            self.state().waiting = true;
            waiting.get_or_insert(Waiting(self));
            match deadline {
                None => changed.await,
                Some(d) => {
                    if tokio::time::timeout_at(d, changed).await.is_err() {
                        let waited = timeout.map(|t| t.as_millis()).unwrap_or_default();
                        match on_timeout {
                            PauseTimeout::Resume => {
                                tracing::warn!("pause timed out after {waited} ms: resuming");
                                self.resume();
                                return SafePoint::Proceed;
                            }
                            PauseTimeout::Abort => {
                                tracing::warn!("pause timed out after {waited} ms: aborting");
                                return SafePoint::Abort(Some(format!(
                                    "the run was paused for more than {waited} ms (pause timeout)"
                                )));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// What a clean end of a turn does with the injection queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueAtEnd {
    /// Close it: the handle is finished, later `inject`s fail (a lone run).
    Close,
    /// Take what is queued but keep the handle open: a session may send a
    /// follow-up turn on the same handle, and closes it after its last turn.
    Drain,
}

/// How the wait for an approval ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ApprovalWait {
    /// The host answered.
    Answered(ApprovalAnswer),
    /// The run was aborted while it waited (the reason, if any).
    Abort(Option<String>),
    /// `pause_timeout_ms` passed without an answer.
    TimedOut,
    /// No other handle exists and no timeout is set: nothing can answer.
    Nobody,
}

/// Checks `approve_with_arguments`' text: a JSON object.
///
/// Errors: a message saying what is wrong.
pub(crate) fn check_arguments(args: &str) -> Result<(), String> {
    match serde_json::from_str::<serde_json::Value>(args) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err("approve_with_arguments: the arguments are valid JSON but not an object".into()),
        Err(e) => Err(format!("approve_with_arguments: the arguments are not valid JSON: {e}")),
    }
}

/// What happens when a pause outlasts its timeout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseTimeout {
    /// End the run with an aborted error (the default: an unanswered confirmation is a no).
    #[default]
    Abort,
    /// Resume the run.
    Resume,
}

#[cfg(test)]
mod tests;
