//! Bad input to `hookbox run`: a missing plugin file, a non-component, a
//! plugin of an unsupported WIT version, a malformed config, an unknown model spec, a workspace that does not exist.
//! Each gets exit code 2 and a one-line error naming what and where, and
//! nothing is written in the workspace.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::path::Path;

use hookbox_tests::{DEMO_PROMPT, DENY_TOOLS, FUTURE_VERSION, cli, demo_session, demo_workspace, snapshot};

fn replay() -> String {
    format!("replay:{}", demo_session().display())
}

/// Runs `hookbox run` with `extra` args on a fresh demo workspace and checks
/// the bad-input contract; returns the error line.
fn bad_run(extra: &[String], workspace: Option<&Path>) -> String {
    let ws = demo_workspace();
    let before = snapshot(ws.path());
    let ws_arg = workspace.map(Path::to_path_buf).unwrap_or_else(|| ws.path().to_path_buf());
    let mut args: Vec<String> = vec!["run".into(), "--workspace".into(), ws_arg.display().to_string()];
    args.extend(extra.iter().cloned());
    args.push(DEMO_PROMPT.into());
    let out = cli(&args);
    assert_eq!(out.code, 2, "stdout: {}\nstderr: {}", out.stdout, out.stderr);
    assert!(out.stdout.is_empty(), "nothing on stdout: {}", out.stdout);
    let line = out.stderr.trim_end();
    assert_eq!(line.lines().count(), 1, "one line: {line}");
    assert!(line.starts_with("hookbox: error:"), "{line}");
    assert_eq!(snapshot(ws.path()), before, "nothing was written in the workspace");
    line.to_string()
}

#[test]
fn a_missing_plugin_file() {
    let err = bad_run(&["--model".into(), replay(), "--plugin".into(), "/nonexistent/deny.wasm".into()], None);
    assert!(err.contains("/nonexistent/deny.wasm") && err.contains("cannot read plugin"), "{err}");
}

#[test]
fn a_plugin_that_is_not_a_component() {
    let dir = tempfile::tempdir().expect("tempdir");
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\x00\x00\x00").expect("write");
    let err = bad_run(&["--model".into(), replay(), "--plugin".into(), core.display().to_string()], None);
    assert!(err.contains("core.wasm") && err.contains("not a component"), "{err}");
}

#[test]
fn a_plugin_that_is_a_fifo_or_a_device_is_refused_without_reading_it() {
    // Before: a FIFO blocked the open forever and /dev/zero was read until memory ran out.
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("hook.wasm");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let err = bad_run(&["--model".into(), replay(), "--plugin".into(), fifo.display().to_string()], None);
    assert!(err.contains("hook.wasm") && err.contains("not a regular file"), "{err}");
    let err = bad_run(&["--model".into(), replay(), "--plugin".into(), "/dev/zero".into()], None);
    assert!(err.contains("/dev/zero") && err.contains("not a regular file"), "{err}");
    let err = bad_run(&["--model".into(), replay(), "--plugin".into(), dir.path().display().to_string()], None);
    assert!(err.contains("directory") || err.contains("not a regular file"), "{err}");
}

#[test]
fn a_plugin_over_max_component_bytes_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("hookbox.toml");
    let size = std::fs::metadata(DENY_TOOLS).expect("deny-tools").len();
    std::fs::write(&config, format!("[runtime]\nmax_component_bytes = 100000\n[[plugins]]\npath = {DENY_TOOLS:?}\n"))
        .expect("write");
    let err = bad_run(&["--model".into(), replay(), "--config".into(), config.display().to_string()], None);
    assert!(err.contains(&format!("is {size} bytes, over max_component_bytes = 100000")), "{err}");
}

#[test]
fn a_plugin_of_an_unsupported_wit_version() {
    let err = bad_run(&["--model".into(), replay(), "--plugin".into(), FUTURE_VERSION.into()], None);
    assert!(err.contains(FUTURE_VERSION), "names the file: {err}");
    assert!(err.contains("hookbox:hooks@0.9.0") && err.contains("supported: 0.1.0"), "{err}");
    // Next to a valid plugin, the run still refuses to start.
    let err = bad_run(
        &["--model".into(), replay(), "--plugin".into(), DENY_TOOLS.into(), "--plugin".into(), FUTURE_VERSION.into()],
        None,
    );
    assert!(err.contains("hookbox:hooks@0.9.0") && err.contains("supported: 0.1.0"), "{err}");
}

#[test]
fn a_malformed_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("hookbox.toml");
    std::fs::write(&config, "[[plugins]]\npath = \"x.wasm\"\n[plugins.config\n").expect("write");
    let err = bad_run(&["--model".into(), replay(), "--config".into(), config.display().to_string()], None);
    assert!(err.contains("hookbox.toml") && err.contains("line 3"), "{err}");
}

#[test]
fn a_config_with_an_unknown_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("hookbox.toml");
    std::fs::write(&config, format!("[[plugins]]\npath = {DENY_TOOLS:?}\nconfg = {{}}\n")).expect("write");
    let err = bad_run(&["--model".into(), replay(), "--config".into(), config.display().to_string()], None);
    assert!(err.contains("hookbox.toml") && err.contains("confg"), "{err}");
}

#[test]
fn a_config_naming_a_missing_plugin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("hookbox.toml");
    std::fs::write(&config, "[[plugins]]\nname = \"ghost\"\npath = \"ghost.wasm\"\n").expect("write");
    let err = bad_run(&["--model".into(), replay(), "--config".into(), config.display().to_string()], None);
    assert!(err.contains("ghost") && err.contains(&dir.path().join("ghost.wasm").display().to_string()), "{err}");
}

#[test]
fn bad_limits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("hookbox.toml");
    std::fs::write(&config, format!("[[plugins]]\npath = {DENY_TOOLS:?}\nlimits = {{ memory_bytes = 0 }}\n"))
        .expect("write");
    let err = bad_run(&["--model".into(), replay(), "--config".into(), config.display().to_string()], None);
    assert!(err.contains("memory_bytes"), "{err}");
}

#[test]
fn an_unknown_model_spec() {
    let err = bad_run(&["--model".into(), "gpt-9:turbo".into()], None);
    assert!(err.contains("gpt-9:turbo") && err.contains("--model"), "{err}");
    let err = bad_run(&["--model".into(), "replay:".into()], None);
    assert!(err.contains("replay:"), "{err}");
}

#[test]
fn a_missing_replay_file() {
    let err = bad_run(&["--model".into(), "replay:/nonexistent/session.json".into()], None);
    assert!(err.contains("/nonexistent/session.json"), "{err}");
}

#[test]
fn a_replay_file_that_is_not_a_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("session.json");
    std::fs::write(&file, "{\"hello\": 1}").expect("write");
    let err = bad_run(&["--model".into(), format!("replay:{}", file.display())], None);
    assert!(err.contains("session.json"), "{err}");
}

#[test]
fn a_workspace_that_does_not_exist() {
    let err = bad_run(&["--model".into(), replay()], Some(Path::new("/nonexistent/workspace")));
    assert!(err.contains("/nonexistent/workspace") && err.contains("--workspace"), "{err}");
}

#[test]
fn a_workspace_that_is_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("file.txt");
    std::fs::write(&file, "x").expect("write");
    let err = bad_run(&["--model".into(), replay()], Some(&file));
    assert!(err.contains("file.txt"), "{err}");
}

#[test]
fn missing_arguments_are_a_usage_error() {
    for args in [&["run", "--model", "replay:x"][..], &["run"], &["run", "--bogus"], &["check", "a.wasm", "b.wasm"]] {
        let out = cli(args);
        assert_eq!(out.code, 2, "{args:?}");
        assert_eq!(out.stderr.trim_end().lines().count(), 1, "one line for {args:?}: {}", out.stderr);
        assert!(out.stderr.starts_with("hookbox: error:"), "{}", out.stderr);
    }
    let out = cli(&["run", "--model", "replay:x"]);
    assert!(out.stderr.contains("--workspace"), "names what is missing: {}", out.stderr);
}

#[test]
fn two_plugins_with_the_same_name() {
    let err = bad_run(
        &["--model".into(), replay(), "--plugin".into(), DENY_TOOLS.into(), "--plugin".into(), DENY_TOOLS.into()],
        None,
    );
    assert!(err.contains("deny-tools") && err.contains("distinct"), "{err}");
}

#[test]
fn a_memory_cap_too_small_to_start_the_plugin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("hookbox.toml");
    std::fs::write(&config, format!("[[plugins]]\npath = {DENY_TOOLS:?}\nlimits = {{ memory_bytes = 65536 }}\n"))
        .expect("write");
    let err = bad_run(&["--model".into(), replay(), "--config".into(), config.display().to_string()], None);
    assert!(err.contains("hookbox.toml") && err.contains("instantiation failed"), "{err}");
}

#[test]
fn a_deadline_over_one_hour() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("hookbox.toml");
    std::fs::write(
        &config,
        format!("[[plugins]]\npath = {DENY_TOOLS:?}\nlimits = {{ deadline_ms = 9223372036854775807 }}\n"),
    )
    .expect("write");
    let err = bad_run(&["--model".into(), replay(), "--config".into(), config.display().to_string()], None);
    assert!(err.contains("deadline_ms") && err.contains("maximum"), "{err}");
}

#[test]
fn errors_do_not_repeat_their_cause() {
    let err = bad_run(&["--model".into(), replay(), "--plugin".into(), "/nonexistent/deny.wasm".into()], None);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

#[test]
fn an_empty_prompt_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let prompt = dir.path().join("prompt.txt");
    std::fs::write(&prompt, "  \n").expect("write");
    let ws = demo_workspace();
    let out = cli(&[
        "run",
        "--model",
        &replay(),
        "--workspace",
        &ws.path().display().to_string(),
        "--prompt-file",
        &prompt.display().to_string(),
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("prompt is empty"), "{}", out.stderr);
}

#[test]
fn an_instance_pool_smaller_than_the_plugins_of_a_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("hookbox.toml");
    std::fs::write(
        &cfg,
        format!("[runtime]\nmax_instances = 1\n[[plugins]]\npath = {DENY_TOOLS:?}\n[[plugins]]\nname = \"again\"\npath = {DENY_TOOLS:?}\n"),
    )
    .expect("write");
    let err = bad_run(&["--model".into(), replay(), "--config".into(), cfg.display().to_string()], None);
    assert!(err.contains("[runtime] max_instances = 1 is below this run's 2 plugins"), "{err}");
}
