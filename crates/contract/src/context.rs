//! [`EventContext`]: where an event happens — the run (a session's turn),
//! the session, the turn's number, the iteration and how close the run is to
//! its `max_iterations`. WIT `hookbox:hooks@0.2.0` passes it with every event
//! (`on-event(event, context)`); a 0.1.0 plugin never sees it.

use serde::{Deserialize, Serialize};

/// Where an event happens; the same for every hook called for that event.
///
/// JSON shape (in `hookbox test` traces, optional per step): snake_case
/// fields, `{"run_id": "…", "session_id": "…", "turn": 1, "iteration": 0,
/// "max_iterations": 10, "retries": 0}`; a missing field is its default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventContext {
    /// This run's id (a UUID). A session's turn is one run, so this is also the turn's id.
    pub run_id: String,
    /// The session the run belongs to (its chosen id, or the run id).
    pub session_id: String,
    /// The turn's number in its session, 1-based (completed turns before it + 1).
    pub turn: u32,
    /// The iteration the event belongs to: 0 before the first `iteration-start`.
    pub iteration: u32,
    /// The agent's `max_iterations`.
    pub max_iterations: u32,
    /// The `retry`s hooks asked for so far in the run. Another model call is
    /// refused once `iteration + retries` would pass `max_iterations`, so at
    /// `final-answer` the answer is the last the run can get when
    /// [`EventContext::last_chance`] holds.
    pub retries: u32,
}

impl EventContext {
    /// True when a `retry` now would end the run with `max-iterations`
    /// (`iteration + retries >= max_iterations`; false when `max_iterations` is 0, i.e. unknown).
    pub fn last_chance(&self) -> bool {
        self.max_iterations > 0 && self.iteration.saturating_add(self.retries) >= self.max_iterations
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_chance_counts_retries_toward_max_iterations() {
        let cx = EventContext { iteration: 2, max_iterations: 3, ..EventContext::default() };
        assert!(!cx.last_chance());
        assert!(EventContext { retries: 1, ..cx.clone() }.last_chance());
        assert!(EventContext { iteration: 3, ..cx }.last_chance());
        assert!(!EventContext::default().last_chance(), "an unknown limit is never the last chance");
    }

    #[test]
    fn json_fields_default_and_unknown_ones_are_refused() {
        let cx: EventContext = serde_json::from_str(r#"{"turn": 2}"#).expect("parses");
        assert_eq!(cx, EventContext { turn: 2, ..EventContext::default() });
        assert!(serde_json::from_str::<EventContext>(r#"{"trun": 2}"#).is_err());
    }
}
