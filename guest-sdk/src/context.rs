//! [`context`]: where the event being handled happens (WIT 0.2.0's
//! `event-context`), readable from any [`Hook`](crate::Hook) method.

use std::cell::RefCell;

use crate::EventContext;

std::thread_local! {
    static CURRENT: RefCell<Option<EventContext>> = const { RefCell::new(None) };
}

/// The context of the event being handled: the run (a session's turn) and
/// session ids, the turn's number (1-based), the iteration (0 before the
/// first), the agent's `max_iterations` and the `retry`s asked for so far.
/// At `final-answer`, `iteration + retries >= max_iterations` means a
/// `retry` would end the run with `max-iterations`: this answer is the last.
///
/// Outside a call (e.g. in a native unit test that calls the hook's methods
/// directly) it is the default: empty ids and zeros.
pub fn context() -> EventContext {
    CURRENT.with(|c| c.borrow().clone()).unwrap_or_else(|| EventContext {
        run_id: String::new(),
        session_id: String::new(),
        turn: 0,
        iteration: 0,
        max_iterations: 0,
        retries: 0,
    })
}

/// Makes `context` current until the guard drops (the end of the call).
#[doc(hidden)]
pub fn set_context(context: EventContext) -> ContextGuard {
    CURRENT.with(|c| *c.borrow_mut() = Some(context));
    ContextGuard(())
}

/// Clears the current context when dropped.
#[doc(hidden)]
pub struct ContextGuard(());

impl Drop for ContextGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = None);
    }
}

impl EventContext {
    /// True when a `retry` now would end the run with `max-iterations`:
    /// `iteration + retries >= max_iterations` (false when `max_iterations`
    /// is 0, i.e. unknown). At `final-answer` it means this answer is the
    /// last the run can get.
    pub fn last_chance(&self) -> bool {
        self.max_iterations > 0 && self.iteration.saturating_add(self.retries) >= self.max_iterations
    }
}
