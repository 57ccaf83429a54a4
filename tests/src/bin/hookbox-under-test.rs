//! The `hookbox` binary for tests that need a real process (signals): the
//! same entry point as `crates/cli/src/main.rs`, built here so that tests in
//! this crate can spawn it (`env!("CARGO_BIN_EXE_hookbox-under-test")`).
//!
//! One test seam: `HOOKBOX_UNDER_TEST_TOOL_DELAY_MS` makes every tool call
//! wait that long before it runs, so a test can kill the process while a
//! run is in a tool.

fn main() {
    if let Some(ms) = std::env::var("HOOKBOX_UNDER_TEST_TOOL_DELAY_MS").ok().and_then(|v| v.parse().ok()) {
        hookbox::set_test_tool_delay_ms(ms);
    }
    std::process::exit(hookbox_cli::main_process());
}
