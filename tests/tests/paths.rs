//! Path arguments are checked before the run: inputs are regular files under
//! their caps (no `/dev/zero`, no pipe for `--inbox`), no result file may
//! overwrite an input (by path or by device and inode, side files included),
//! and a workspace at a system folder needs `--allow-system-workspace`. Each
//! is bad input: exit 2 with one line.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::path::Path;

use hookbox_tests::{AUDIT_LOG, DEMO_PROMPT, cli, demo_session, demo_workspace};

/// `hookbox run` on the demo session with `extra` flags, in workspace `ws`.
fn run(ws: &Path, extra: &[&str]) -> hookbox_tests::CliOutput {
    let mut args = vec![
        "run".to_string(),
        "--model".into(),
        format!("replay:{}", demo_session().display()),
        "--workspace".into(),
        ws.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    if !extra.contains(&"--prompt-file") {
        args.push(DEMO_PROMPT.into());
    }
    cli(&args)
}

fn bad(out: &hookbox_tests::CliOutput, needle: &str) {
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(out.stderr.trim_end().lines().count(), 1, "one line: {}", out.stderr);
    assert!(out.stderr.contains(needle), "expected `{needle}` in: {}", out.stderr);
}

#[test]
fn record_trace_cannot_overwrite_the_runs_own_plugin_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let plugin = dir.path().join("run.audit-log.jsonl");
    std::fs::copy(AUDIT_LOG, &plugin).expect("copy plugin");
    let before = std::fs::read(&plugin).expect("read");
    let config = dir.path().join("hookbox.toml");
    std::fs::write(&config, format!("[[plugins]]\nname = \"audit-log\"\npath = {plugin:?}\n")).expect("write");
    let trace = dir.path().join("run.jsonl");
    let out = run(
        ws.path(),
        &["--config", config.to_str().expect("utf-8"), "--record-trace", trace.to_str().expect("utf-8")],
    );
    bad(&out, "is the run's plugin `audit-log`");
    assert_eq!(std::fs::read(&plugin).expect("read"), before, "the plugin file is untouched");
}

#[test]
fn record_trace_to_a_device_is_refused_and_writes_no_side_file() {
    let ws = demo_workspace();
    let side = Path::new("/dev/null.audit-log.jsonl");
    let existed = side.exists();
    let out = run(ws.path(), &["--plugin", AUDIT_LOG, "--record-trace", "/dev/null"]);
    bad(&out, "--record-trace /dev/null: not a regular file");
    assert!(existed || !side.exists(), "{} was created", side.display());
}

#[test]
fn an_output_that_is_a_hard_link_to_an_input_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let config = dir.path().join("hookbox.toml");
    std::fs::write(&config, "[agent]\n").expect("write");
    let link = dir.path().join("journal.json");
    std::fs::hard_link(&config, &link).expect("hard link");
    let out =
        run(ws.path(), &["--config", config.to_str().expect("utf-8"), "--journal", link.to_str().expect("utf-8")]);
    bad(&out, "is the run's --config file");
    assert_eq!(std::fs::read_to_string(&config).expect("read"), "[agent]\n");
}

#[test]
fn a_state_db_that_is_a_device_is_refused_and_leaves_no_journal_beside_it() {
    let ws = demo_workspace();
    let side = Path::new("/dev/null-journal");
    let existed = side.exists();
    let out = run(ws.path(), &["--state-db", "/dev/null"]);
    bad(&out, "--db /dev/null");
    assert!(existed || !side.exists(), "{} was created", side.display());
}

#[test]
fn prompt_and_inbox_devices_are_refused_at_once() {
    let ws = demo_workspace();
    let started = std::time::Instant::now();
    bad(&run(ws.path(), &["--prompt-file", "/dev/zero"]), "--prompt-file /dev/zero: not a regular file");
    bad(&run(ws.path(), &["--inbox", "/dev/zero"]), "--inbox /dev/zero: not a regular file");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "nothing was read");
}

#[test]
fn a_prompt_file_over_its_cap_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let prompt = dir.path().join("prompt.txt");
    std::fs::write(&prompt, vec![b'a'; 5 << 20]).expect("write");
    bad(&run(ws.path(), &["--prompt-file", prompt.to_str().expect("utf-8")]), "over the cap of 4 MiB");
}

#[test]
fn an_inbox_that_is_a_pipe_is_refused_with_the_way_to_read_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let fifo = dir.path().join("inbox.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("run mkfifo");
    assert!(made.success(), "mkfifo failed");
    let out = run(ws.path(), &["--inbox", fifo.to_str().expect("utf-8")]);
    bad(&out, "not a regular file");
    assert!(out.stderr.contains("--inbox -"), "{}", out.stderr);
}

#[test]
fn a_workspace_at_a_system_folder_needs_an_explicit_flag() {
    for folder in ["/", "/usr", "/etc", "/home"] {
        if Path::new(folder).is_dir() {
            bad(&run(Path::new(folder), &[]), "--allow-system-workspace");
        }
    }
    if let Some(home) = std::env::var_os("HOME").filter(|h| Path::new(h).is_dir()) {
        bad(&run(Path::new(&home), &[]), "is a system folder");
    }
    // With the flag the check passes (and the next one, the missing prompt file, fails).
    let out = run(Path::new("/"), &["--allow-system-workspace", "--prompt-file", "/nonexistent/prompt.txt"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("/nonexistent/prompt.txt") && !out.stderr.contains("system folder"), "{}", out.stderr);
}
