//! Determinism and replay (seed 003's `now`, `uuid4`, `random`, `sleep`):
//! `hookbox run --journal FILE` writes every value hooks got from the
//! journaled imports and from WASI's clocks and random numbers, every model
//! response and tool result, and every hook call's directive; `hookbox replay
//! FILE` runs the run again and gets every directive the same, or reports the
//! first one that differs.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::path::Path;

use hookbox_tests::{CHANCE, DEMO_PROMPT, DENY_TOOLS, SCRIPTED, STATE_COUNTER, cli, demo_session, demo_workspace};
use serde_json::Value;

/// A hookbox.toml with chance (config `deny_on`), state-counter and deny-tools (denying nothing).
fn manifest(dir: &Path, chance: &Path, deny_on: &str) -> std::path::PathBuf {
    let path = dir.join(format!("hookbox-{deny_on}.toml"));
    let text = format!(
        "[[plugins]]\nname = \"chance\"\npath = {chance:?}\nconfig = {{ deny_on = \"{deny_on}\", sleep_ms = 2 }}\n\n\
         [[plugins]]\npath = {STATE_COUNTER:?}\n\n[[plugins]]\npath = {DENY_TOOLS:?}\nconfig = {{ deny = [\"nothing\"] }}\n"
    );
    std::fs::write(&path, text).expect("write manifest");
    path
}

/// Records the demo run with a journal; returns the journal's JSON.
fn record(ws: &Path, config: &Path, journal: &Path, extra: &[&str]) -> Value {
    let session = demo_session();
    let mut args = vec![
        "run",
        "--model",
        &format!("replay:{}", session.display()),
        "--workspace",
        ws.to_str().expect("utf-8"),
        "--config",
        config.to_str().expect("utf-8"),
        "--journal",
        journal.to_str().expect("utf-8"),
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(DEMO_PROMPT.to_string());
    let out = cli(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("[journal] "), "{}", out.stderr);
    serde_json::from_str(&std::fs::read_to_string(journal).expect("journal written")).expect("journal is JSON")
}

fn imports_of(journal: &Value, plugin: &str) -> Vec<String> {
    journal["imports"][plugin]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v["import"].as_str().map(String::from)).collect())
        .unwrap_or_default()
}

fn chance_directives(journal: &Value) -> Vec<Value> {
    journal["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .filter(|c| c["plugin"] == "chance" && c["directive"]["action"] != "continue")
        .cloned()
        .collect()
}

#[test]
fn a_journaled_run_replays_with_every_directive_the_same() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = manifest(dir.path(), CHANCE.as_ref(), "even");
    let ws = demo_workspace();
    let journal = dir.path().join("run.journal.json");
    let j = record(ws.path(), &config, &journal, &[]);

    assert_eq!(j["format"], "hookbox-journal");
    // 14 events × 3 plugins, `continue` included, less the two calls a chance `skip-tool` ends the chain before.
    let calls = j["calls"].as_array().map_or(0, Vec::len);
    let skips = chance_directives(&j).iter().filter(|d| d["directive"]["action"] == "skip-tool").count();
    assert_eq!(calls, 42 - 2 * skips, "{}", j["calls"]);
    let kinds = imports_of(&j, "chance");
    // `uuid` and `now` come only with a skip; these come in every run.
    for kind in ["random", "sleep", "wall-clock", "monotonic-clock", "insecure-seed", "state"] {
        assert!(kinds.iter().any(|k| k == kind), "chance's journal has no `{kind}`: {kinds:?}");
    }
    assert!(imports_of(&j, "state-counter").iter().any(|k| k == "state"), "get-state is journaled");
    assert_eq!(j["tools"].as_array().map(Vec::len), Some(2), "both tool outcomes are journaled");

    // The replay needs neither the workspace nor the model: it runs no tool.
    drop(ws);
    for _ in 0..2 {
        let out = cli(&["replay", journal.to_str().expect("utf-8")]);
        assert_eq!(out.code, 0, "stdout: {}\nstderr: {}", out.stdout, out.stderr);
        assert_eq!(
            out.stdout.trim(),
            format!("replay: the same: {calls} hook call(s), every directive as recorded (stop reason end_turn)")
        );
    }
}

#[test]
fn two_recordings_differ_and_each_replays_its_own_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = manifest(dir.path(), CHANCE.as_ref(), "even");
    let a_path = dir.path().join("a.json");
    let b_path = dir.path().join("b.json");
    let a = record(demo_workspace().path(), &config, &a_path, &[]);
    let b = record(demo_workspace().path(), &config, &b_path, &[]);
    // The values are live: two runs get different ones (a uuid, a clock, a hash).
    assert_ne!(chance_directives(&a), chance_directives(&b), "two live runs must not decide identically");
    for path in [&a_path, &b_path] {
        let out = cli(&["replay", "--json", path.to_str().expect("utf-8")]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let report = out.json();
        assert_eq!(report["same"], true, "{report}");
        assert_eq!(report["import_divergences"], serde_json::json!([]));
    }
}

#[test]
fn replay_gives_each_hook_the_state_it_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = manifest(dir.path(), CHANCE.as_ref(), "even");
    let db = dir.path().join("state.db");
    let db = db.to_str().expect("utf-8");
    let first = dir.path().join("turn1.json");
    let second = dir.path().join("turn2.json");
    record(demo_workspace().path(), &config, &first, &["--session", "s1", "--state-db", db]);
    let j = record(demo_workspace().path(), &config, &second, &["--session", "s1", "--state-db", db]);
    assert_eq!(j["session_id"], "s1");
    // The replay keeps state in memory (empty), yet state-counter starts from count=2 as recorded.
    let out = cli(&["replay", second.to_str().expect("utf-8")]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("[state-counter:info] start count=2 version=0"), "{}", out.stderr);
    assert!(out.stderr.contains("[state-counter:info] count=4"), "{}", out.stderr);
}

#[test]
fn a_changed_plugin_makes_the_replay_report_the_first_differing_directive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = manifest(dir.path(), CHANCE.as_ref(), "even");
    let journal = dir.path().join("run.json");
    let j = record(demo_workspace().path(), &config, &journal, &[]);
    let calls = j["calls"].as_array().expect("calls");
    // The first before-tool-call of chance: its directive flips with `deny_on`.
    let (index, recorded) = calls
        .iter()
        .enumerate()
        .find(|(_, c)| c["plugin"] == "chance" && c["event"] == "before-tool-call")
        .expect("chance saw a before-tool-call");
    let flipped = manifest(dir.path(), CHANCE.as_ref(), "odd");
    let out = cli(&["replay", journal.to_str().expect("utf-8"), "--config", flipped.to_str().expect("utf-8")]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let first_line = out.stdout.lines().next().expect("a report");
    let expected_prefix = format!(
        "replay: differs at hook call {}: plugin `chance` at `before-tool-call` (iteration 1): recorded {}",
        index + 1,
        if recorded["directive"]["action"] == "continue" { "continue" } else { "skip-tool(\"coin " }
    );
    assert!(first_line.starts_with(&expected_prefix), "{first_line}\nexpected: {expected_prefix}");
    assert!(first_line.contains("replayed "), "{first_line}");

    let report =
        cli(&["replay", "--json", journal.to_str().expect("utf-8"), "--config", flipped.to_str().expect("utf-8")]);
    let report = report.json();
    assert_eq!(report["same"], false);
    assert_eq!(report["first_difference"]["call"], index + 1);
    assert_eq!(report["first_difference"]["recorded"], *recorded);
}

#[test]
fn a_component_swapped_at_the_same_path_is_noted_and_its_difference_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = dir.path().join("chance.wasm");
    std::fs::copy(CHANCE, &plugin).expect("copy");
    let config = manifest(dir.path(), &plugin, "even");
    let journal = dir.path().join("run.json");
    let j = record(demo_workspace().path(), &config, &journal, &[]);
    // chance always replaces tool results: the swapped-in deny-tools (denying nothing) never does.
    let first_rewrite = j["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .position(|c| c["plugin"] == "chance" && c["directive"]["action"] != "continue")
        .expect("chance rewrote something");
    std::fs::copy(DENY_TOOLS, &plugin).expect("swap");
    let out = cli(&["replay", journal.to_str().expect("utf-8")]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("[note] plugin `chance` changed since the recording (blake3 "), "{}", out.stderr);
    assert!(
        out.stdout.starts_with(&format!("replay: differs at hook call {}: plugin `chance`", first_rewrite + 1)),
        "{}",
        out.stdout
    );
    assert!(out.stdout.lines().next().is_some_and(|l| l.ends_with("replayed continue")), "{}", out.stdout);
}

#[test]
fn bad_journals_are_refused_with_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.json");
    let out = cli(&["replay", missing.to_str().expect("utf-8")]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.starts_with("hookbox: error: cannot read journal "), "{}", out.stderr);

    let cases = [
        ("not-json.json", "{", "not JSON"),
        ("session.json", r#"{"hookbox_replay": 1}"#, "no `format: \"hookbox-journal\"` field"),
        ("other.json", r#"{"format": "hookbox-recorded"}"#, "`format` is `hookbox-recorded`"),
        ("future.json", r#"{"format": "hookbox-journal", "version": 99}"#, "version 99; this build reads version 1"),
        ("fields.json", r#"{"format": "hookbox-journal", "version": 1}"#, "missing field"),
    ];
    for (name, text, why) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        let out = cli(&["replay", path.to_str().expect("utf-8")]);
        assert_eq!(out.code, 2, "{name}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{name}: {}", out.stderr);
        assert!(out.stderr.contains("is not a hookbox journal"), "{name}: {}", out.stderr);
        assert!(out.stderr.contains(why), "{name}: {}", out.stderr);
    }

    // --journal into a folder that does not exist: refused before the run.
    let ws = demo_workspace();
    let session = demo_session();
    let out = cli(&[
        "run",
        "--model",
        &format!("replay:{}", session.display()),
        "--workspace",
        ws.path().to_str().expect("utf-8"),
        "--journal",
        dir.path().join("no/such/dir/j.json").to_str().expect("utf-8"),
        DEMO_PROMPT,
    ]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("--journal ") && out.stderr.contains("does not exist"), "{}", out.stderr);
    assert!(ws.path().join(".env").exists(), "nothing ran");
}

#[test]
fn result_files_never_overwrite_the_runs_inputs_or_special_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let session = dir.path().join("session.json");
    std::fs::copy(demo_session(), &session).expect("copy");
    let before = std::fs::read(&session).expect("read");
    let ws = demo_workspace();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run".to_string(),
            "--model".into(),
            format!("replay:{}", session.display()),
            "--workspace".into(),
            ws.path().display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push(DEMO_PROMPT.into());
        cli(&args)
    };
    let session_arg = session.to_str().expect("utf-8");
    let out = run(&["--journal", session_arg]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("is the run's replay session (--model)"), "{}", out.stderr);
    assert_eq!(std::fs::read(&session).expect("read"), before, "the session is intact");

    let out = run(&["--journal", "/dev/null"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("not a regular file"), "{}", out.stderr);

    let same = dir.path().join("out.json");
    let same = same.to_str().expect("utf-8");
    let out = run(&["--record", same, "--journal", same]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("is also --record's file"), "{}", out.stderr);
    assert!(ws.path().join(".env").exists(), "nothing ran");
}

/// Loads a journal, lets `edit` change it, writes it beside, returns the path.
fn edited(journal: &Path, name: &str, edit: impl FnOnce(&mut Value)) -> std::path::PathBuf {
    let mut j: Value = serde_json::from_str(&std::fs::read_to_string(journal).expect("read")).expect("json");
    edit(&mut j);
    let path = journal.with_file_name(name);
    std::fs::write(&path, serde_json::to_string(&j).expect("json")).expect("write");
    path
}

#[test]
fn a_replay_that_ends_otherwise_or_leaves_values_unused_differs_and_corrupt_values_are_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = manifest(dir.path(), CHANCE.as_ref(), "even");
    let journal = dir.path().join("run.json");
    record(demo_workspace().path(), &config, &journal, &[]);

    let stop = edited(&journal, "stop.json", |j| j["stop_reason"] = "max_tokens".into());
    let out = cli(&["replay", stop.to_str().expect("utf-8")]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("the replay ended with stop reason end_turn, the recording with max_tokens"));

    let extra = edited(&journal, "extra.json", |j| {
        if let Some(values) = j["imports"]["chance"].as_array_mut() {
            values.push(serde_json::json!({"import": "random", "value": 7}));
        }
    });
    let out = cli(&["replay", extra.to_str().expect("utf-8")]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("plugin `chance` did not ask for 1 recorded import value(s)"), "{}", out.stdout);

    for (name, edit, why) in [
        (
            "nanos.json",
            Box::new(|j: &mut Value| {
                if let Some(v) = j["imports"]["chance"]
                    .as_array_mut()
                    .and_then(|a| a.iter_mut().find(|v| v["import"] == "wall-clock" || v["import"] == "now"))
                {
                    v["nanoseconds"] = 1_000_000_000u64.into();
                }
            }) as Box<dyn FnOnce(&mut Value)>,
            "is not below 1,000,000,000",
        ),
        (
            "hex.json",
            Box::new(|j: &mut Value| {
                if let Some(v) = j["imports"]["state-counter"]
                    .as_array_mut()
                    .and_then(|a| a.iter_mut().find(|v| v["import"] == "state"))
                {
                    v["state"] = serde_json::json!({"version": "0", "hex": "zz"});
                }
            }),
            "is not an even-length hex string",
        ),
        ("event.json", Box::new(|j: &mut Value| j["calls"][0]["event"] = "bogus".into()), "`bogus` is not an event"),
        (
            "stranger.json",
            Box::new(|j: &mut Value| j["imports"]["stranger"] = serde_json::json!([])),
            "plugin `stranger` is not one of the journal's plugins",
        ),
    ] {
        let path = edited(&journal, name, edit);
        let out = cli(&["replay", path.to_str().expect("utf-8")]);
        assert_eq!(out.code, 2, "{name}: {}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains(why), "{name}: {}", out.stderr);
    }
}

#[test]
fn an_added_plugin_is_named_and_does_not_shift_the_others() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = manifest(dir.path(), CHANCE.as_ref(), "even");
    let journal = dir.path().join("run.json");
    record(demo_workspace().path(), &config, &journal, &[]);
    // The same plugins with audit-log added in front.
    let text = std::fs::read_to_string(&config).expect("read");
    let front = dir.path().join("front.toml");
    std::fs::write(&front, format!("[[plugins]]\npath = {:?}\n\n{text}", hookbox_tests::AUDIT_LOG)).expect("write");
    let out = cli(&["replay", journal.to_str().expect("utf-8"), "--config", front.to_str().expect("utf-8")]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_eq!(
        out.stdout.trim(),
        "replay: differs: plugin `audit-log` is not in the recording (its calls are not compared)",
        "every recorded plugin decided the same"
    );
}

/// A hookbox.toml asking for approval of every tool call (`scripted`), with
/// deny-tools guarding `README.md` after it.
fn asking_manifest(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("asking.toml");
    let text = format!(
        "[[plugins]]\nname = \"scripted\"\npath = {SCRIPTED:?}\nconfig = {{ before-tool-call = \"ask-approval:ok?\" }}\n\n\
         [[plugins]]\nname = \"deny-tools\"\npath = {DENY_TOOLS:?}\nconfig = {{ paths = [\"README.md\"] }}\n"
    );
    std::fs::write(&path, text).expect("write manifest");
    path
}

/// Contract, "A veto holds": arguments the host approves a call with are
/// decided on by the guards too — `--confirm` answered with a path
/// deny-tools protects does not delete it. The journal keeps the answers,
/// its replay is the same, and a replay whose recorded answer was changed
/// says it differs (the tool call went otherwise).
#[test]
fn approved_arguments_meet_the_guards_and_a_changed_answer_makes_the_replay_differ() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let config = asking_manifest(dir.path());
    let journal = dir.path().join("j.json");
    let session = format!("replay:{}", demo_session().display());
    let args = [
        "run",
        "--model",
        &session,
        "--workspace",
        ws.path().to_str().expect("utf-8"),
        "--config",
        config.to_str().expect("utf-8"),
        "--confirm",
        "--journal",
        journal.to_str().expect("utf-8"),
        DEMO_PROMPT,
    ];
    let out = hookbox_tests::cli_with_input(&args, "{\"path\": \"README.md\"}\nn\n");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(ws.path().join("README.md").exists(), "deny-tools vetoed the approved arguments: {}", out.stderr);
    assert!(out.stderr.contains("is denied (pattern `README.md`)"), "{}", out.stderr);

    let replay = cli(&["replay", journal.to_str().expect("utf-8")]);
    assert_eq!(replay.code, 0, "{}\n{}", replay.stdout, replay.stderr);
    assert!(replay.stdout.contains("replay: the same"), "{}", replay.stdout);

    // The second approval was denied; the tampered journal says approve.
    let mut file: Value = serde_json::from_str(&std::fs::read_to_string(&journal).expect("read")).expect("json");
    file["approvals"][1]["answer"] = serde_json::json!({"answer": "approve"});
    let tampered = dir.path().join("tampered.json");
    std::fs::write(&tampered, file.to_string()).expect("write");
    let replay = cli(&["replay", tampered.to_str().expect("utf-8")]);
    assert_eq!(replay.code, 1, "{}\n{}", replay.stdout, replay.stderr);
    assert!(replay.stdout.contains("the replay runs tool call"), "{}", replay.stdout);

    // An answer removed: the replay denies the call, and says the approvals differ.
    file["approvals"] = serde_json::json!([]);
    std::fs::write(&tampered, file.to_string()).expect("write");
    let replay = cli(&["replay", tampered.to_str().expect("utf-8")]);
    assert_eq!(replay.code, 1, "{}\n{}", replay.stdout, replay.stderr);
    assert!(replay.stdout.contains("the approvals differ"), "{}", replay.stdout);
}

/// A run that ends before any model call (`skip-run`) writes a journal with
/// no responses, and that journal replays.
#[test]
fn a_journal_without_model_responses_replays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let config = dir.path().join("skip.toml");
    let text = format!(
        "[[plugins]]\nname = \"scripted\"\npath = {SCRIPTED:?}\nconfig = {{ run-start = \"skip-run:not today\" }}\n"
    );
    std::fs::write(&config, text).expect("write manifest");
    let journal = dir.path().join("j.json");
    let recorded = record(ws.path(), &config, &journal, &[]);
    assert_eq!(recorded["responses"]["responses"].as_array().map(Vec::len), Some(0));
    let replay = cli(&["replay", journal.to_str().expect("utf-8")]);
    assert_eq!(replay.code, 0, "{}\n{}", replay.stdout, replay.stderr);
    assert!(replay.stdout.contains("replay: the same") && replay.stdout.contains("skipped"), "{}", replay.stdout);
}
