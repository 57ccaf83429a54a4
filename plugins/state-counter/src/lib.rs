//! `state-counter`: a test fixture for host-kept hook state. It counts tool
//! results in its state (`{"count": N}` as JSON) and logs what it sees:
//! `start count=N version=V` at `run-start` (or `start empty`), and
//! `count=N` after each save.
//!
//! Config: `trap_at` (integer): on the call that would save that count it
//! saves, then panics, so the host must keep the previous state.
//! `big_at` (integer): on that count it saves 2 MiB instead, over the default
//! `max_state_bytes`, so the host must refuse the write.
//! `cached` (`true`): it reads its state only at `run-start`, keeps the
//! count in the instance, and saves at each tool result without reading
//! first: the host must still swap the revision it read (or last wrote), so
//! a save another run of the session made meanwhile is not overwritten.
//! `sleep_ms` (integer): at each tool result it waits that long (the
//! journaled `sleep`) before it saves; observe-only, its calls are still
//! running when the run goes on.

use hookbox_sdk::{Directive, Hook, RunStart, ToolCallResult, config, export_hook, journaled, log, state};
use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Serialize, Deserialize)]
struct Counter {
    count: u64,
}

fn setting(key: &str) -> Option<u64> {
    config::get(key).and_then(|v| v.trim_matches('"').parse().ok())
}

struct StateCounter {
    /// With `cached`: the count read at `run-start` or last saved.
    cached: Option<u64>,
}

impl Hook for StateCounter {
    fn new() -> Self {
        StateCounter { cached: None }
    }

    fn run_start(&mut self, _event: &RunStart) -> Directive {
        let cache = config::get("cached").is_some_and(|v| v.trim_matches('"') == "true");
        match state::get_json::<Counter>() {
            Some((version, Ok(c))) => {
                log::info(&format!("start count={} version={version}", c.count));
                self.cached = cache.then_some(c.count);
            }
            Some((version, Err(e))) => log::warn(&format!("start unreadable state from version {version}: {e}")),
            None => {
                log::info("start empty");
                self.cached = cache.then_some(0);
            }
        }
        Directive::Continue
    }

    fn tool_call_result(&mut self, _event: &ToolCallResult) -> Directive {
        if let Some(ms) = setting("sleep_ms") {
            journaled::sleep(std::time::Duration::from_millis(ms));
        }
        let mut c = match self.cached {
            Some(count) => Counter { count },
            None => state::get_json::<Counter>().and_then(|(_, c)| c.ok()).unwrap_or_default(),
        };
        c.count += 1;
        if self.cached.is_some() {
            self.cached = Some(c.count);
        }
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
