//! `confirm-after-n`: the "this agent has been working for a while — continue?"
//! pattern (seed 000, `ConfirmAfterNToolCalls`). It counts `tool-call-result`
//! events (not iterations: one iteration can run many tools) and returns
//! `pause` at the result that makes the count reach `n`, so the run stops at
//! that safe point until the embedder resumes (or aborts) it. The count then
//! starts again, and it restarts at every `run-start`.
//!
//! Config: `n` (a positive integer, default 5). An unreadable `n` panics at
//! the first event, so the host records the misconfiguration as a failure.

use hookbox_sdk::{Directive, Hook, RunStart, ToolCallResult, config, export_hook, log};

/// The counter; pure so it can be tested natively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counter {
    n: u64,
    seen: u64,
}

impl Counter {
    /// A counter that fires every `n` results.
    pub fn new(n: u64) -> Self {
        Counter { n: n.max(1), seen: 0 }
    }

    /// Counts one tool result; true when it is the n-th since the last pause.
    pub fn tool_result(&mut self) -> bool {
        self.seen += 1;
        if self.seen >= self.n {
            self.seen = 0;
            return true;
        }
        false
    }

    /// Starts counting again (a new run).
    pub fn reset(&mut self) {
        self.seen = 0;
    }
}

/// Reads `n` from a config value: absent means 5.
pub fn parse_n(raw: Option<&str>) -> Result<u64, String> {
    match raw.map(str::trim) {
        None => Ok(5),
        Some(s) => match s.trim_matches('"').parse::<u64>() {
            Ok(0) => Err("confirm-after-n: `n` must be at least 1".into()),
            Ok(n) => Ok(n),
            Err(_) => Err(format!("confirm-after-n: `n` must be a positive integer, got `{s}`")),
        },
    }
}

struct ConfirmAfterN {
    counter: Counter,
}

impl Hook for ConfirmAfterN {
    fn new() -> Self {
        let n = parse_n(config::get("n").as_deref()).unwrap_or_else(|e| panic!("{e}"));
        ConfirmAfterN { counter: Counter::new(n) }
    }

    fn run_start(&mut self, _event: &RunStart) -> Directive {
        self.counter.reset();
        Directive::Continue
    }

    fn tool_call_result(&mut self, event: &ToolCallResult) -> Directive {
        if self.counter.tool_result() {
            log::info(&format!("pausing after tool result for `{}`: confirm to continue", event.tool_name));
            return Directive::Pause;
        }
        Directive::Continue
    }
}

export_hook!(ConfirmAfterN);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_every_n_results_and_restarts() {
        let mut c = Counter::new(2);
        assert_eq!([c.tool_result(), c.tool_result(), c.tool_result(), c.tool_result()], [false, true, false, true]);
        c.tool_result();
        c.reset();
        assert!(!c.tool_result());
        assert!(c.tool_result());
    }

    #[test]
    fn n_is_parsed() {
        assert_eq!(parse_n(None), Ok(5));
        assert_eq!(parse_n(Some("3")), Ok(3));
        assert_eq!(parse_n(Some("\"3\"")), Ok(3));
        assert!(parse_n(Some("0")).is_err());
        assert!(parse_n(Some("x")).is_err());
    }
}
