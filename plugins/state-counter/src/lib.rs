//! `state-counter`: a test fixture for host-kept hook state. It counts tool
//! results in its state (`{"count": N}` as JSON) and logs what it sees:
//! `start count=N version=V` at `run-start` (or `start empty`), and
//! `count=N` after each save.
//!
//! Config: `trap_at` (integer): on the call that would save that count it
//! saves, then panics, so the host must keep the previous state.
//! `big_at` (integer): on that count it saves 2 MiB instead, over the default
//! `max_state_bytes`, so the host must refuse the write.

use hookbox_sdk::{Directive, Hook, RunStart, ToolCallResult, config, export_hook, log, state};
use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Serialize, Deserialize)]
struct Counter {
    count: u64,
}

fn setting(key: &str) -> Option<u64> {
    config::get(key).and_then(|v| v.trim_matches('"').parse().ok())
}

struct StateCounter;

impl Hook for StateCounter {
    fn new() -> Self {
        StateCounter
    }

    fn run_start(&mut self, _event: &RunStart) -> Directive {
        match state::get_json::<Counter>() {
            Some((version, Ok(c))) => log::info(&format!("start count={} version={version}", c.count)),
            Some((version, Err(e))) => log::warn(&format!("start unreadable state from version {version}: {e}")),
            None => log::info("start empty"),
        }
        Directive::Continue
    }

    fn tool_call_result(&mut self, _event: &ToolCallResult) -> Directive {
        let mut c = state::get_json::<Counter>().and_then(|(_, c)| c.ok()).unwrap_or_default();
        c.count += 1;
        if setting("big_at") == Some(c.count) {
            state::set(&vec![7u8; 2 << 20]);
            return Directive::Continue;
        }
        if let Err(e) = state::set_json(&c) {
            log::error(&format!("cannot save: {e}"));
        }
        if setting("trap_at") == Some(c.count) {
            panic!("state-counter: deliberate panic after saving count={}", c.count);
        }
        log::info(&format!("count={}", c.count));
        Directive::Continue
    }
}

export_hook!(StateCounter);
