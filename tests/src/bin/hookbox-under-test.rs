//! The `hookbox` binary for tests that need a real process (signals): the
//! same entry point as `crates/cli/src/main.rs`, built here so that tests in
//! this crate can spawn it (`env!("CARGO_BIN_EXE_hookbox-under-test")`).

fn main() {
    std::process::exit(hookbox_cli::main_process());
}
