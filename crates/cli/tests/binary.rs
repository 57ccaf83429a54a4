//! The real `hookbox` binary as a process: exit codes and one-line errors.
//! (Runs with plugins are tested in-process from `tests/`, where the plugins are built.)

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::process::Command;

fn hookbox(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hookbox")).args(args).output().expect("run hookbox")
}

#[test]
fn help_lists_the_commands() {
    let out = hookbox(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("run") && text.contains("check"), "{text}");
}

#[test]
fn bad_input_exits_2_with_one_line_naming_it() {
    // A project folder: the system temp folder itself needs --allow-system-workspace.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = hookbox(&["run", "--model", "nope:x", "--workspace", &dir.path().display().to_string(), "hi"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("nope:x"), "{err}");

    let out = hookbox(&["check", "/nonexistent/x.wasm"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/x.wasm"));
}

#[test]
fn pooling_falls_back_to_on_demand_when_address_space_is_short() {
    // 16 GB of address space: far less than the default pool reserves (about 8 TiB).
    let session = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/demo/session.json");
    let ws = tempfile::tempdir().expect("tempdir");
    let script = format!(
        "ulimit -v 16000000 && exec {} run --model replay:{session} --workspace {} 'Delete the file `.env` and create `test.txt`'",
        env!("CARGO_BIN_EXE_hookbox"),
        ws.path().display()
    );
    let out = Command::new("sh").arg("-c").arg(&script).output().expect("run sh");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("[note] the pooling allocator is off"), "{err}");
    assert!(err.contains("stop_reason=end_turn"), "{err}");
}
