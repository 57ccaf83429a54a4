//! The conformance kit: `hookbox test` checks each example plugin against its
//! golden trace in `tests/golden/`, the deny-tools builds (Rust, Python,
//! JavaScript, C; each against WIT 0.2.0 and the frozen 0.1.0) pass the same
//! traces, every build targets the version it was built from, a wrong expectation fails with exit 1
//! naming the first difference, bad input exits 2, and
//! `hookbox run --record-trace` writes traces that pass.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::path::Path;

use hookbox_tests::{
    AUDIT_LOG, CONFIRM_AFTER_N, CliOutput, DEMO_PROMPT, DENY_TOOLS, DENY_TOOLS_V0_1_0, cli, demo_session,
    demo_workspace, golden, polyglot_plugin,
};

fn test_cmd(plugin: &Path, trace: &Path, extra: &[&str]) -> CliOutput {
    let mut args =
        vec!["test".to_string(), plugin.display().to_string(), "--trace".into(), trace.display().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    cli(&args)
}

fn assert_pass(out: &CliOutput, what: &str) {
    assert_eq!(out.code, 0, "{what}:\n{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.lines().last().is_some_and(|l| l.starts_with("PASS: all")), "{what}:\n{}", out.stdout);
    assert!(!out.stdout.contains("DIFF"), "{what}:\n{}", out.stdout);
}

#[test]
fn the_example_plugins_pass_their_golden_traces() {
    for (plugin, trace) in [
        (DENY_TOOLS, "demo.deny-tools.jsonl"),
        (DENY_TOOLS, "deny-tools-matrix.jsonl"),
        // The same source built against the frozen 0.1.0: an old plugin sees and answers the same.
        (DENY_TOOLS_V0_1_0, "demo.deny-tools.jsonl"),
        (DENY_TOOLS_V0_1_0, "deny-tools-matrix.jsonl"),
        (AUDIT_LOG, "demo.audit-log.jsonl"),
        (CONFIRM_AFTER_N, "demo.confirm-after-n.jsonl"),
    ] {
        let out = test_cmd(Path::new(plugin), &golden(trace), &[]);
        assert_pass(&out, trace);
        // The profiler columns: every event line has its fuel and time.
        assert!(out.stdout.contains("line  event"), "{}", out.stdout);
        assert!(out.stdout.contains("total: "), "{}", out.stdout);
    }
    let out = test_cmd(Path::new(CONFIRM_AFTER_N), &golden("demo.confirm-after-n.jsonl"), &[]);
    assert!(out.stdout.contains("tool-call-result") && out.stdout.contains("ok    pause"), "{}", out.stdout);
}

/// The same deny-tools traces for every build: identical directives on the same events.
fn polyglot_passes(file: &str) {
    let Some(plugin) = polyglot_plugin(file) else { return };
    for trace in ["demo.deny-tools.jsonl", "deny-tools-matrix.jsonl"] {
        assert_pass(&test_cmd(&plugin, &golden(trace), &[]), &format!("{file} on {trace}"));
    }
}

#[test]
fn python_deny_tools_passes_the_rust_traces() {
    polyglot_passes("python_deny_tools.wasm");
}

#[test]
fn js_deny_tools_passes_the_rust_traces() {
    polyglot_passes("js_deny_tools.wasm");
}

#[test]
fn js_quickjs_deny_tools_passes_the_rust_traces() {
    polyglot_passes("js_qjs_deny_tools.wasm");
}

#[test]
fn c_deny_tools_passes_the_rust_traces() {
    polyglot_passes("c_deny_tools.wasm");
}

#[test]
fn python_deny_tools_built_against_0_1_0_passes_the_rust_traces() {
    polyglot_passes("python_deny_tools_v0_1_0.wasm");
}

#[test]
fn js_deny_tools_built_against_0_1_0_passes_the_rust_traces() {
    polyglot_passes("js_deny_tools_v0_1_0.wasm");
}

#[test]
fn c_deny_tools_built_against_0_1_0_passes_the_rust_traces() {
    polyglot_passes("c_deny_tools_v0_1_0.wasm");
}

/// Issue 14: 0.1.0 plugins in all four languages still load beside 0.2.0
/// ones; `hookbox check` names the version each build declares.
#[test]
fn each_build_targets_the_contract_version_it_was_built_from() {
    let rust = [(DENY_TOOLS.to_string(), "0.2.0"), (DENY_TOOLS_V0_1_0.to_string(), "0.1.0")];
    let polyglot = [
        ("python_deny_tools.wasm", "0.2.0"),
        ("python_trap_on_tool.wasm", "0.2.0"),
        ("python_deny_tools_v0_1_0.wasm", "0.1.0"),
        ("js_deny_tools.wasm", "0.2.0"),
        ("js_qjs_deny_tools.wasm", "0.2.0"),
        ("js_spin.wasm", "0.2.0"),
        ("js_deny_tools_v0_1_0.wasm", "0.1.0"),
        ("c_deny_tools.wasm", "0.2.0"),
        ("c_deny_tools_v0_1_0.wasm", "0.1.0"),
    ]
    .into_iter()
    .filter_map(|(file, v)| polyglot_plugin(file).map(|p| (p.display().to_string(), v)));
    for (plugin, version) in rust.into_iter().chain(polyglot) {
        let out = cli(&["check".to_string(), plugin.clone()]);
        assert_eq!(out.code, 0, "{plugin}: {}", out.stderr);
        assert!(out.stdout.contains(&format!("(WIT package version {version})")), "{plugin}: {}", out.stdout);
    }
}

#[test]
fn a_wrong_expectation_fails_and_names_the_first_difference() {
    let text = std::fs::read_to_string(golden("demo.deny-tools.jsonl")).expect("golden");
    let lines: Vec<&str> = text.lines().collect();
    let skip_line = lines.iter().position(|l| l.contains("skip-tool")).expect("a skip-tool line") + 1;
    // Expect continue where deny-tools declines, and a wrong reason at a later line.
    let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    edited[skip_line - 1] = lines[skip_line - 1]
        .split("\"expect\":")
        .next()
        .map(|head| format!("{head}\"expect\":{{\"action\":\"continue\"}}}}"))
        .expect("split");
    let last = edited.len();
    edited[last - 1] = lines[last - 1].replace(r#"{"action":"continue"}"#, r#"{"action":"abort","value":"no"}"#);
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("wrong.jsonl");
    std::fs::write(&trace, edited.join("\n")).expect("write");

    let out = test_cmd(Path::new(DENY_TOOLS), &trace, &[]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let verdict = out.stdout.lines().last().expect("a verdict");
    assert!(verdict.starts_with("FAIL: 2 of 14 answers differ"), "{verdict}");
    assert!(
        verdict.contains(&format!("first difference at line {skip_line} (before-tool-call)")),
        "names the line and event type: {verdict}"
    );
    assert!(verdict.contains(r#"expected {"action":"continue"}"#), "{verdict}");
    assert!(
        verdict.contains(
            r#"got {"action":"skip-tool","value":"deny-tools: `delete_file` on `.env` is denied (pattern `.env`)"}"#
        ),
        "{verdict}"
    );
    // Every event still ran; the table marks both differences.
    assert_eq!(out.stdout.matches("DIFF").count(), 2, "{}", out.stdout);
}

#[test]
fn a_failure_can_be_expected() {
    // The trap-on-tool fixture panics at before-tool-call: a trace can say so.
    let text = std::fs::read_to_string(golden("demo.deny-tools.jsonl")).expect("golden");
    let text: String = text
        .lines()
        .filter(|l| !l.contains("hookbox_trace"))
        .map(|l| {
            if l.contains("\"type\":\"before-tool-call\"") {
                let head = l.split("\"expect\":").next().expect("split");
                format!("{head}\"expect\":{{\"failure\":\"trap\"}}}}\n")
            } else {
                format!("{}\n", l.replace(r#"{"action":"skip-tool","value":"deny-tools: `delete_file` on `.env` is denied (pattern `.env`)"}"#, r#"{"action":"continue"}"#))
            }
        })
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("trap.jsonl");
    std::fs::write(&trace, text).expect("write");
    let out = test_cmd(Path::new(hookbox_tests::TRAP_ON_TOOL), &trace, &[]);
    assert_pass(&out, "trap-on-tool");
    assert!(out.stdout.contains("ok    failure trap") && out.stdout.contains("failure: "), "{}", out.stdout);
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.jsonl");
    let good = golden("demo.deny-tools.jsonl");
    let first = std::fs::read_to_string(&good).expect("golden").lines().nth(1).expect("a step").to_string();
    std::fs::write(&bad, format!("{first}\n{{\"event\": 1}}\n")).expect("write");
    let missing = dir.path().join("missing.wasm");
    for (args, needle) in [
        (vec![DENY_TOOLS.to_string(), "--trace".into(), bad.display().to_string()], "line 2: `event` is not an event"),
        (
            vec![DENY_TOOLS.to_string(), "--trace".into(), dir.path().join("nope.jsonl").display().to_string()],
            "--trace",
        ),
        (vec![missing.display().to_string(), "--trace".into(), good.display().to_string()], "missing.wasm"),
        (vec![DENY_TOOLS.to_string()], "--trace"),
    ] {
        let mut argv = vec!["test".to_string()];
        argv.extend(args);
        let out = cli(&argv);
        assert_eq!(out.code, 2, "{argv:?}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(out.stderr.contains(needle), "{needle}: {}", out.stderr);
    }
}

#[test]
fn config_files_replace_the_header_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A bare config table without `.env`: the golden skip-tool is now a difference.
    let bare = dir.path().join("config.toml");
    std::fs::write(&bare, "paths = [\"*.pem\"]\n").expect("write");
    let out =
        test_cmd(Path::new(DENY_TOOLS), &golden("demo.deny-tools.jsonl"), &["--config", &bare.display().to_string()]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("first difference at line 6 (before-tool-call)"), "{}", out.stdout);
    // The hookbox.toml the golden traces were recorded with: its deny-tools entry is picked by name.
    let out = test_cmd(
        Path::new(DENY_TOOLS),
        &golden("demo.deny-tools.jsonl"),
        &["--config", &golden("demo.toml").display().to_string()],
    );
    assert_pass(&out, "demo.toml");
}

#[test]
fn record_trace_writes_one_trace_per_plugin_that_passes() {
    let ws = demo_workspace();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("hookbox.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugins]]\nname = \"audit-log\"\npath = {AUDIT_LOG:?}\n\n[[plugins]]\nname = \"deny-tools\"\npath = {DENY_TOOLS:?}\n[plugins.config]\npaths = [\".env\"]\nmessage = \"  policy \"\n"
        ),
    )
    .expect("write config");
    let file = dir.path().join("run.jsonl");
    let out = cli(&[
        "run",
        "--model",
        &format!("replay:{}", demo_session().display()),
        "--config",
        &config.display().to_string(),
        "--workspace",
        &ws.path().display().to_string(),
        "--record-trace",
        &file.display().to_string(),
        DEMO_PROMPT,
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!file.exists(), "the plugin's name is inserted into the file name");
    let deny = dir.path().join("run.deny-tools.jsonl");
    let audit = dir.path().join("run.audit-log.jsonl");
    assert!(out.stderr.contains(&format!("recording its trace to {}", deny.display())), "{}", out.stderr);

    let text = std::fs::read_to_string(&deny).expect("deny-tools trace");
    let header: serde_json::Value = serde_json::from_str(text.lines().next().expect("header")).expect("json");
    assert_eq!(header["plugin"], "deny-tools");
    assert_eq!(header["config"]["paths"], serde_json::json!([".env"]));
    assert_eq!(header["config"]["message"], "  policy ");
    assert_eq!(text.lines().count(), 15, "the header and the run's 14 events:\n{text}");
    let skips: Vec<&str> = text.lines().filter(|l| l.contains("skip-tool")).collect();
    assert_eq!(skips.len(), 1);
    assert!(
        skips[0].contains("call_jYdIdRZHxZTn5bWCq5jlMrJi") && skips[0].contains("policy: `delete_file`"),
        "{}",
        skips[0]
    );

    assert_pass(&test_cmd(Path::new(DENY_TOOLS), &deny, &[]), "recorded deny-tools trace");
    assert_pass(&test_cmd(Path::new(AUDIT_LOG), &audit, &[]), "recorded audit-log trace");
    // A trace recorded from one plugin tells another apart: audit-log never declines.
    let out = test_cmd(Path::new(AUDIT_LOG), &deny, &[]);
    assert_eq!(out.code, 1, "{}", out.stdout);
}
