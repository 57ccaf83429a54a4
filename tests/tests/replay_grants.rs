//! `hookbox replay JOURNAL` does not trust the journal's grants: a journal
//! names plugin files and their `dirs`/`env` grants, and anyone may hand one
//! over. Without `--config` the plugins replay without those grants (a note
//! names them); `--trust-journal-grants` gives them, printing each first.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use hookbox_tests::{DEMO_PROMPT, FS_ESCAPE, cli, demo_session, demo_workspace};

/// Runs the demo with `config` and a journal in `dir`; returns the journal's path and the output.
fn journaled_demo(dir: &std::path::Path, config: &std::path::Path) -> (std::path::PathBuf, hookbox_tests::CliOutput) {
    let journal = dir.join("run.journal.json");
    let ws = demo_workspace();
    let out = cli(&[
        "run".to_string(),
        "--model".into(),
        format!("replay:{}", demo_session().display()),
        "--workspace".into(),
        ws.path().display().to_string(),
        "--config".into(),
        config.display().to_string(),
        "--journal".into(),
        journal.display().to_string(),
        DEMO_PROMPT.into(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    (journal, out)
}

/// Journals the demo with fs-escape granted a folder holding `allowed.txt`
/// and the `PATH` variable; returns (temp dir, journal path).
fn journaled_run_with_grants() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("mkdir");
    std::fs::write(data.join("allowed.txt"), "granted-content").expect("write");
    let config = dir.path().join("hookbox.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugins]]\npath = {FS_ESCAPE:?}\nenv = [\"PATH\"]\n\
             dirs = [{{ host = \"data\", guest = \"/data\", mode = \"ro\" }}]\n\
             [plugins.config]\nguest_dir = \"/data\"\nenv_var = \"PATH\"\n"
        ),
    )
    .expect("write config");
    let (journal, out) = journaled_demo(dir.path(), &config);
    assert!(out.stderr.contains("read /data/allowed.txt: ALLOWED"), "the run had the grant: {}", out.stderr);
    (dir, journal)
}

#[test]
fn a_replay_strips_the_journals_grants_and_says_which() {
    let (_dir, journal) = journaled_run_with_grants();
    let out = cli(&["replay", journal.to_str().expect("utf-8")]);
    assert!(
        out.stderr.contains("[note] plugin `fs-escape`: the journal's grants are not used (dir ")
            && out.stderr.contains(" as /data (ro), env PATH)")
            && out.stderr.contains("--trust-journal-grants"),
        "{}",
        out.stderr
    );
    // fs-escape imports wasi:filesystem, which needs a `dirs` grant: without the
    // journal's, it cannot load, and the replay stops as bad input saying why.
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("the journal's grants were not used") && out.stderr.contains("needs a `dirs` grant"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("read /data/allowed.txt: ALLOWED"), "no dir grant: {}", out.stderr);
}

#[test]
fn trust_journal_grants_gives_them_after_printing_them() {
    let (_dir, journal) = journaled_run_with_grants();
    let out = cli(&["replay", "--trust-journal-grants", journal.to_str().expect("utf-8")]);
    assert_ne!(out.code, 2, "{}", out.stderr);
    let note = out.stderr.find("[note] plugin `fs-escape`: using the journal's grants: dir ").expect(&out.stderr);
    let read = out.stderr.find("read /data/allowed.txt: ALLOWED").expect(&out.stderr);
    assert!(note < read, "the grants are printed before the plugin runs: {}", out.stderr);
    assert!(out.stderr.contains("granted-content"), "{}", out.stderr);
}

#[test]
fn trust_journal_grants_cannot_be_combined_with_config() {
    let (dir, journal) = journaled_run_with_grants();
    let config = dir.path().join("hookbox.toml");
    let out = cli(&[
        "replay",
        "--trust-journal-grants",
        "--config",
        config.to_str().expect("utf-8"),
        journal.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    // With --config the grants are the config's own: the replay reads the folder again.
    let out = cli(&["replay", "--config", config.to_str().expect("utf-8"), journal.to_str().expect("utf-8")]);
    assert_ne!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("read /data/allowed.txt: ALLOWED"), "{}", out.stderr);
}

/// A journal's `[runtime]` could raise the host's own bounds (how big a
/// component it reads, how much memory and time a compile may take): a
/// replay without `--config` lowers each to its default and says so.
#[test]
fn a_replay_lowers_the_journals_runtime_bounds_to_the_defaults() {
    use hookbox_tests::DENY_TOOLS;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("hookbox.toml");
    std::fs::write(&config, format!("[[plugins]]\npath = {DENY_TOOLS:?}\n")).expect("write config");
    let (journal, _) = journaled_demo(dir.path(), &config);
    let mut file: serde_json::Value = serde_json::from_slice(&std::fs::read(&journal).expect("read")).expect("json");
    let runtime = &mut file["manifest"]["runtime"];
    assert!(runtime.is_object(), "the journal keeps [runtime]: {file}");
    runtime["max_component_bytes"] = (1u64 << 40).into();
    runtime["compile_memory_bytes"] = (1u64 << 50).into();
    runtime["compile_timeout_ms"] = 86_400_000u64.into();
    std::fs::write(&journal, serde_json::to_vec(&file).expect("json")).expect("write");

    let out = cli(&["replay", journal.to_str().expect("utf-8")]);
    assert_eq!(out.code, 0, "the replay still matches: {}", out.stderr);
    assert!(
        out.stderr
            .contains("replaying with the defaults for: max_component_bytes, compile_memory_bytes, compile_timeout_ms"),
        "{}",
        out.stderr
    );
    let out = cli(&["replay", "--trust-journal-grants", journal.to_str().expect("utf-8")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("replaying with the defaults"), "trusted: the journal's own: {}", out.stderr);
}
