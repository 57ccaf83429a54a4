//! `adversary`: a Hookbox test fixture that misbehaves on purpose, so the
//! tests can check that the host's sandbox contains it. Config `mode` picks
//! the misbehaviour, which happens only at the event named by config `at`
//! (a kebab-case event name, default `before-tool-call`); every other event
//! continues. Modes:
//!
//! - `spin`: an infinite loop (stopped by fuel or the deadline).
//! - `sleep`: calls `std::thread::sleep` for 10 s in a loop: a blocking host
//!   call (a WASI monotonic-clock pollable), far past any deadline.
//! - `grow`: allocates 1 MiB vectors in a loop (writing one byte of each)
//!   and keeps them all, until `memory.grow` is refused at the memory cap
//!   (about 1,000 fuel per MiB, so memory runs out long before fuel).
//! - `recurse`: unbounded recursion with a 1 KiB frame that cannot become a
//!   loop: a stack overflow. Rust keeps the frames on its stack in linear
//!   memory (1 MiB), so this traps as an out-of-bounds memory access after
//!   roughly a thousand calls, before wasmtime's own call stack is exhausted.
//! - `big-output`: returns `skip-tool` (at `before-tool-call`; at any other
//!   event `inject-message`) whose text is config `bytes` bytes of `x`
//!   (default 67108864, 64 MiB). The text lives in the guest's memory first,
//!   so it must fit under the memory cap: with the default 64 MiB cap the
//!   default size fails as `memory`, not as an oversized output. Building it
//!   costs about 1 fuel per byte.
//! - `big-log`: writes 100 log lines (host `log` import, info) of exactly
//!   1,048,576 bytes each (`adversary: big-log line 001/100 ` to
//!   `... 100/100 `, then `x`), then one line of 1,048,576 bytes plus a
//!   newline to stdout (`adversary: big-log stdout`, spaces to 32 bytes, then
//!   `x`), then continues. All are written over one buffer kept in the
//!   instance, so a call costs under 8 million fuel (8 % of the default):
//!   the host's log limits, not fuel, decide what gets through.
//!   A failed stdout write is logged (warn), not a panic.
//! - `trap-nth`: counts its calls at the `at` event in a global counter and
//!   panics on call number `n` (config `n`, default 2); continues otherwise.
//!   The counter lives in the instance: after a trap (or any other failure)
//!   the host gives the hook a fresh instance, so counting restarts; with no
//!   other failure the hook traps on calls `n`, `2n`, `3n`, ... (`n` = 1:
//!   every call; `n` = 0: never).
//! - `slice-panic`: slices `"héllo"` in the middle of the `é` (`[..2]`),
//!   which panics.
//! - `random-fault`: ignores `at` and, at every event, faults with a
//!   probability of about `percent` % (config `percent`, default 10),
//!   decided deterministically from the event (see [`decide`]):
//!   `hash = FNV-1a-64(seed ++ [0] ++ event_name ++ [0] ++ key)` over UTF-8
//!   bytes (offset basis `0xcbf29ce484222325`, prime `0x100000001b3`; for
//!   each byte `hash = (hash ^ byte) * prime` mod 2^64), where `seed` is
//!   config `seed` (default `0`; the raw config text, so TOML `seed = 7` and
//!   `seed = "7"` are the same), `event_name` the kebab-case name and `key`
//!   [`event_key`]: the tool call id at `tool-call-start`,
//!   `before-tool-call` and `tool-call-result`; the run id at `run-start`;
//!   `ITERATION/LOOP_COUNTER` in decimal at `iteration-start`; the iteration
//!   in decimal at `model-response` and `iteration-complete`; empty
//!   otherwise. It faults when `hash % 100 < percent`, and `hash % 3` picks
//!   the fault: 0 panics, 1 spins forever, 2 returns
//!   `replace-arguments("{not json")` at `before-tool-call` and panics at any
//!   other event. Examples with seed `0`: `before-tool-call` with call id
//!   `call_3` hashes `0\0before-tool-call\0call_3` to `0x7cd92daf2cfa6da0`,
//!   `% 100` = 4, `% 3` = 2: at 10 % it returns the invalid arguments;
//!   `run-start` with run id `run-1` gives `0xbd6762a93c88795c`, `% 100` =
//!   68: it continues.
//!
//! - `many-blocks`: returns `replace-content` with config `n` empty text
//!   blocks (default 100,000): a small answer in bytes but many elements.
//! - `log-flood`: calls the host `log` import (info, empty message) config
//!   `n` times (default: forever, until fuel or the deadline stops it),
//!   then continues.
//!
//! Config: `mode` (required), `at`, `bytes` (big-output), `n` (trap-nth,
//! many-blocks, log-flood),
//! `seed` and `percent` (random-fault). Numbers may be TOML integers or
//! decimal strings. An unknown mode, an unknown `at` or an unreadable number
//! panics at every event, naming the key.

use std::hint::black_box;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hookbox_sdk::{ContentBlock, Directive, EVENT_NAMES, Event, Hook, config, event_name, export_hook, log};

/// `big-output`'s default size: 64 MiB.
pub const DEFAULT_OUTPUT_BYTES: usize = 64 << 20;

/// The size of `big-log`'s lines and of `grow`'s allocations: 1 MiB.
pub const MIB: usize = 1 << 20;

/// FNV-1a 64-bit offset basis.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a 64-bit prime.
pub const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// `random-fault`'s decision: the FNV-1a 64 hash of `seed`, a 0 byte,
/// `event_name`, a 0 byte and `key`, if `hash % 100 < percent` (the event
/// faults), else `None`.
pub fn decide(seed: &str, event_name: &str, key: &str, percent: u64) -> Option<u64> {
    let mut hash = FNV_OFFSET;
    for part in [seed.as_bytes(), &[0], event_name.as_bytes(), &[0], key.as_bytes()] {
        for &byte in part {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(FNV_PRIME);
        }
    }
    (hash % 100 < percent).then_some(hash)
}

/// The per-event key `random-fault` hashes: the tool call id for tool
/// events, the run id for `run-start`, `ITERATION/LOOP_COUNTER` for
/// `iteration-start`, the iteration for `model-response` and
/// `iteration-complete`, and the empty string for the rest.
pub fn event_key(event: &Event) -> String {
    match event {
        Event::ToolCallStart(e) | Event::BeforeToolCall(e) => e.call.id.clone(),
        Event::ToolCallResult(e) => e.tool_call_id.clone(),
        Event::RunStart(e) => e.run_id.clone(),
        Event::IterationStart(e) => format!("{}/{}", e.iteration, e.loop_counter),
        Event::ModelResponse(e) => e.iteration.to_string(),
        Event::IterationComplete(e) => e.iteration.to_string(),
        Event::RequestStart(_) | Event::FinalAnswer(_) | Event::RunEnd(_) => String::new(),
    }
}

/// What `random-fault` does at a faulting event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Panic (a trap).
    Panic,
    /// Loop forever (out of fuel or past the deadline).
    Spin,
    /// Return `replace-arguments` with `{not json` (only at `before-tool-call`).
    InvalidArguments,
}

/// The fault for a faulting `hash` at `event_name`: `hash % 3` = 0 panic,
/// 1 spin, 2 invalid arguments at `before-tool-call` (panic elsewhere).
pub fn fault_kind(hash: u64, event_name: &str) -> Fault {
    match hash % 3 {
        0 => Fault::Panic,
        1 => Fault::Spin,
        _ if event_name == "before-tool-call" => Fault::InvalidArguments,
        _ => Fault::Panic,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Spin,
    Sleep,
    Grow,
    Recurse,
    BigOutput,
    BigLog,
    TrapNth,
    SlicePanic,
    RandomFault,
    ManyBlocks,
    LogFlood,
}

impl Mode {
    fn parse(name: &str) -> Option<Mode> {
        Some(match name {
            "spin" => Mode::Spin,
            "sleep" => Mode::Sleep,
            "grow" => Mode::Grow,
            "recurse" => Mode::Recurse,
            "big-output" => Mode::BigOutput,
            "big-log" => Mode::BigLog,
            "trap-nth" => Mode::TrapNth,
            "slice-panic" => Mode::SlicePanic,
            "random-fault" => Mode::RandomFault,
            "many-blocks" => Mode::ManyBlocks,
            "log-flood" => Mode::LogFlood,
            _ => return None,
        })
    }
}

/// `trap-nth`'s count of calls at the `at` event in this instance.
static CALLS: AtomicU64 = AtomicU64::new(0);

struct Adversary {
    mode: Mode,
    at: String,
    bytes: usize,
    n: u64,
    seed: String,
    percent: u64,
    /// `big-log`'s 1 MiB line, reused from call to call.
    buffer: String,
}

/// Config `key` as a non-negative integer, or `default` when unset.
fn number(key: &str, default: u64) -> u64 {
    match config::get(key) {
        None => default,
        Some(raw) => raw
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("adversary: config `{key}` must be a non-negative integer, not `{raw}`")),
    }
}

impl Hook for Adversary {
    fn new() -> Self {
        let mode = config::get("mode").unwrap_or_default();
        let mode =
            Mode::parse(&mode).unwrap_or_else(|| panic!("adversary: unknown or missing config `mode`: `{mode}`"));
        let at = config::get("at").unwrap_or_else(|| "before-tool-call".to_owned());
        if mode != Mode::RandomFault && !EVENT_NAMES.contains(&at.as_str()) {
            panic!("adversary: config `at` names no event: `{at}`");
        }
        let bytes = number("bytes", DEFAULT_OUTPUT_BYTES as u64);
        let bytes =
            usize::try_from(bytes).unwrap_or_else(|_| panic!("adversary: config `bytes` is too large: {bytes}"));
        Adversary {
            mode,
            at,
            bytes,
            n: number(
                "n",
                match mode {
                    Mode::ManyBlocks => 100_000,
                    Mode::LogFlood => u64::MAX,
                    _ => 2,
                },
            ),
            seed: config::get("seed").unwrap_or_else(|| "0".to_owned()),
            percent: number("percent", 10),
            buffer: String::new(),
        }
    }

    fn on_event(&mut self, event: &Event) -> Directive {
        let name = event_name(event);
        if self.mode == Mode::RandomFault {
            return random_fault(&self.seed, self.percent, name, &event_key(event));
        }
        if name != self.at {
            return Directive::Continue;
        }
        match self.mode {
            Mode::Spin => spin(),
            Mode::Sleep => loop {
                std::thread::sleep(Duration::from_secs(10));
            },
            Mode::Grow => grow(),
            Mode::Recurse => {
                let depth = recurse(0);
                panic!("adversary: recursion returned at depth {depth}")
            }
            Mode::BigOutput => {
                let text = "x".repeat(self.bytes);
                if name == "before-tool-call" {
                    Directive::SkipTool(Some(text))
                } else {
                    Directive::InjectMessage(text)
                }
            }
            Mode::BigLog => {
                big_log(&mut self.buffer);
                Directive::Continue
            }
            Mode::TrapNth => {
                let call = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
                if call == self.n {
                    panic!("adversary: trap-nth: deliberate panic on call {call} at {name}");
                }
                Directive::Continue
            }
            Mode::SlicePanic => {
                let text = black_box("héllo");
                let cut = black_box(2);
                Directive::InjectMessage(text[..cut].to_owned())
            }
            Mode::ManyBlocks => {
                let n = usize::try_from(self.n).unwrap_or(usize::MAX);
                Directive::ReplaceContent(vec![ContentBlock::Text(String::new()); n])
            }
            Mode::LogFlood => {
                for _ in 0..self.n {
                    log::info(black_box(""));
                }
                Directive::Continue
            }
            Mode::RandomFault => unreachable!("handled above"),
        }
    }
}

fn random_fault(seed: &str, percent: u64, name: &str, key: &str) -> Directive {
    let Some(hash) = decide(seed, name, key, percent) else {
        return Directive::Continue;
    };
    match fault_kind(hash, name) {
        Fault::Panic => panic!("adversary: random-fault: panic at {name} key `{key}` (hash {hash:#018x})"),
        Fault::Spin => spin(),
        Fault::InvalidArguments => Directive::ReplaceArguments("{not json".to_owned()),
    }
}

/// Loops forever; `black_box` keeps the loop from being optimised away.
fn spin() -> ! {
    let mut counter: u64 = 0;
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

/// Allocates 1 MiB vectors forever, keeping every one. Only one byte of
/// each is written: filling them would cost about a million fuel per MiB
/// and make the call run out of fuel before memory under a raised cap.
fn grow() -> ! {
    let mut kept: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut block = Vec::with_capacity(MIB);
        block.push(1u8);
        kept.push(black_box(block));
        black_box(&kept);
    }
}

/// Recurses until the stack overflows: each frame holds a 1 KiB array that
/// is used after the recursive call, so the call cannot become a loop.
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let frame = black_box([depth; 128]);
    if black_box(depth) == u64::MAX {
        return frame[0];
    }
    let below = recurse(depth + 1);
    below.wrapping_add(black_box(frame)[127])
}

/// `big-log`'s line prefixes, all [`PREFIX_LEN`] bytes long so that each
/// line is written over the same buffer in place.
fn big_log_prefix(line: Option<u32>) -> String {
    let label = match line {
        Some(i) => format!("adversary: big-log line {i:03}/100"),
        None => "adversary: big-log stdout".to_owned(),
    };
    format!("{label:<PREFIX_LEN$}")
}

/// The length of `big-log`'s prefixes: `adversary: big-log line 001/100 `.
const PREFIX_LEN: usize = 32;

/// Logs 100 lines of 1 MiB and prints one to stdout, all written over
/// `buffer` (1 MiB of `x`, kept by the caller: building it costs about
/// 1 fuel per byte, but dropping a 1 MiB `String` in a debug build costs
/// about 14, which would use most of the default fuel).
fn big_log(buffer: &mut String) {
    if buffer.len() != MIB {
        *buffer = "x".repeat(MIB);
    }
    for i in 1..=100 {
        buffer.replace_range(..PREFIX_LEN, &big_log_prefix(Some(i)));
        log::info(buffer);
    }
    buffer.replace_range(..PREFIX_LEN, &big_log_prefix(None));
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{buffer}").and_then(|()| stdout.flush()) {
        log::warn(&format!("adversary: big-log: stdout write failed: {e}"));
    }
}

export_hook!(Adversary);

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox_sdk::{IterationStart, ModelResponse, RunEnd, RunStart, ToolCall, ToolCallEvent, Usage};

    fn fnv(bytes: &[u8]) -> u64 {
        bytes.iter().fold(FNV_OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(FNV_PRIME))
    }

    #[test]
    fn fnv_reference_vectors() {
        // From the FNV reference test suite.
        assert_eq!(decide("", "", "", 100).map(|_| fnv(b"")), Some(0xcbf29ce484222325));
        assert_eq!(fnv(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn hash_is_fnv1a_over_seed_name_key_with_zero_separators() {
        // The doc's examples, computed independently (Python).
        let expected = fnv(b"0\0run-start\0run-1");
        assert_eq!(expected, 0xbd6762a93c88795c);
        assert_eq!(decide("0", "run-start", "run-1", 100), Some(expected));
        assert_eq!(decide("0", "run-start", "run-1", 68), None);
        assert_eq!(decide("0", "run-start", "run-1", 69), Some(expected));
        assert_eq!(decide("0", "run-start", "run-1", 10), None);
        assert_eq!(decide("0", "before-tool-call", "call_3", 10), Some(0x7cd92daf2cfa6da0));
        assert_eq!(fault_kind(0x7cd92daf2cfa6da0, "before-tool-call"), Fault::InvalidArguments);
        // The separators matter: moving a byte across them changes the hash.
        assert_ne!(decide("0r", "un-start", "run-1", 100), Some(expected));
    }

    #[test]
    fn percent_bounds() {
        for key in ["", "a", "call_1", "1/2"] {
            assert_eq!(decide("0", "before-tool-call", key, 0), None);
            assert!(decide("0", "before-tool-call", key, 100).is_some());
        }
    }

    #[test]
    fn rate_is_about_percent_and_every_fault_kind_occurs() {
        let mut faults = 0;
        let mut kinds = [0; 3];
        for i in 0..10_000 {
            if let Some(hash) = decide("0", "before-tool-call", &format!("call_{i}"), 10) {
                faults += 1;
                kinds[(hash % 3) as usize] += 1;
            }
        }
        assert!((800..1200).contains(&faults), "{faults}");
        assert!(kinds.iter().all(|&k| k > 200), "{kinds:?}");
    }

    #[test]
    fn fault_kinds() {
        assert_eq!(fault_kind(3, "run-start"), Fault::Panic);
        assert_eq!(fault_kind(4, "run-start"), Fault::Spin);
        assert_eq!(fault_kind(5, "run-start"), Fault::Panic);
        assert_eq!(fault_kind(5, "before-tool-call"), Fault::InvalidArguments);
    }

    #[test]
    fn event_keys() {
        let usage =
            Usage { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, cost_usd: 0.0 };
        let call = ToolCall { id: "call_x".into(), name: "read_file".into(), arguments: "{}".into() };
        let tool = ToolCallEvent { iteration: 1, call };
        assert_eq!(event_key(&Event::BeforeToolCall(tool.clone())), "call_x");
        assert_eq!(event_key(&Event::ToolCallStart(tool)), "call_x");
        let run = RunStart {
            run_id: "run-1".into(),
            session_id: "s".into(),
            model: "m".into(),
            provider: "p".into(),
            user_content: vec![],
        };
        assert_eq!(event_key(&Event::RunStart(run)), "run-1");
        assert_eq!(event_key(&Event::IterationStart(IterationStart { iteration: 1, loop_counter: 2 })), "1/2");
        let response = ModelResponse {
            iteration: 3,
            text: String::new(),
            content: vec![],
            tool_calls: vec![],
            reasoning: String::new(),
            finish_reason: hookbox_sdk::FinishReason::Stop,
            usage: None,
        };
        assert_eq!(event_key(&Event::ModelResponse(response)), "3");
        assert_eq!(event_key(&Event::RunEnd(RunEnd { iterations: 1, usage, error: None })), "");
    }

    #[test]
    fn big_log_prefixes_have_one_length() {
        assert_eq!(big_log_prefix(Some(1)), "adversary: big-log line 001/100 ");
        assert_eq!(big_log_prefix(Some(100)), "adversary: big-log line 100/100 ");
        assert_eq!(big_log_prefix(None), "adversary: big-log stdout       ");
        assert!([Some(1), Some(100), None].iter().all(|&i| big_log_prefix(i).len() == PREFIX_LEN));
    }
}
