//! `chance`: a test fixture whose every decision depends on values that
//! differ from one execution to the next, all of them journaled by the host,
//! so `hookbox replay` must reproduce its directives exactly.
//!
//! - `before-tool-call`: draws `random()`; when its parity is `deny_on`
//!   (config, `even` by default, or `odd`) it declines the tool with
//!   `skip-tool("coin R at T ms, ticket U")`, R the number, T `now_ms()`, U a
//!   `uuid()`; otherwise it continues.
//! - `tool-call-result`: replaces the result with the result plus
//!   `[seen at S s, hash H, n calls]`: S from `std::time::SystemTime::now()`
//!   (WASI's wall clock), H a hash with std's randomly keyed `RandomState`
//!   (WASI's random numbers), n its call count from its saved state.
//! - `model-response`: waits `sleep_ms` milliseconds (config, default 0) with
//!   the journaled `sleep`, and measures the wait with `Instant` (WASI's
//!   monotonic clock), logging it.

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant, UNIX_EPOCH};

use hookbox_sdk::{
    Directive, Hook, ModelResponse, ToolCallEvent, ToolCallResult, config, export_hook, journaled, log, state,
};

fn setting(key: &str) -> Option<String> {
    config::get(key).map(|v| v.trim_matches('"').to_string())
}

struct Chance;

impl Hook for Chance {
    fn new() -> Self {
        Chance
    }

    fn model_response(&mut self, _event: &ModelResponse) -> Directive {
        let ms = setting("sleep_ms").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        if ms > 0 {
            let started = Instant::now();
            journaled::sleep(Duration::from_millis(ms));
            log::info(&format!("slept {} ms", started.elapsed().as_millis()));
        }
        Directive::Continue
    }

    fn before_tool_call(&mut self, _event: &ToolCallEvent) -> Directive {
        let odd = setting("deny_on").as_deref() == Some("odd");
        let r = journaled::random();
        if (r % 2 == 1) == odd {
            let ticket = journaled::uuid();
            Directive::SkipTool(Some(format!("coin {r} at {} ms, ticket {ticket}", journaled::now_ms())))
        } else {
            Directive::Continue
        }
    }

    fn tool_call_result(&mut self, event: &ToolCallResult) -> Directive {
        let seen = std::time::SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write(event.tool_call_id.as_bytes());
        let n = state::get().and_then(|(_, d)| d.first().copied()).unwrap_or(0).wrapping_add(1);
        state::set(&[n]);
        Directive::ReplaceResult(format!(
            "{} [seen at {seen:.6} s, hash {:016x}, {n} calls]",
            event.result,
            hasher.finish()
        ))
    }
}

export_hook!(Chance);
