//! The fault matrix: every limit is real, and each fault leaves the host, the
//! run and the other plugins unharmed. Each adversarial plugin runs on the
//! demo session (two tool calls) alone and beside deny-tools: the run
//! completes with the recorded final answer, deny-tools still denies, and the
//! failure kind is the right one. Also fail-closed, the crash-loop breaker,
//! run budgets, trap-on-Nth-call and the capability grants.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hookbox::contract::Event;
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::HookChain;
use hookbox::sandbox::HookRuntime;
use hookbox::sandbox::{Breaker, DirGrant, DirMode, FailPolicy, Grants, Limits, PluginOptions};
use hookbox::sandbox::{FailureKind, HookHandler, SuspendReason};
use hookbox::{Agent, AgentConfig, RunResult, StopReason};
use hookbox::{Workspace, workspace_tools};
use hookbox_tests::{
    ADVERSARY, AUDIT_LOG, DEMO_PROMPT, DENY_TOOLS, FS_ESCAPE, NET_ESCAPE, TRAP_ON_TOOL, cli, config, demo_session,
    demo_workspace, fixture, notes_workspace,
};
use serde_json::json;

const RECORDED_ANSWER: &str = "The file `.env` has been deleted and `test.txt` has been created successfully.";

struct Plugin<'a> {
    name: &'a str,
    path: &'a str,
    config: BTreeMap<String, String>,
    options: PluginOptions,
}

fn plugin<'a>(name: &'a str, path: &'a str, cfg: &[(&str, serde_json::Value)], options: PluginOptions) -> Plugin<'a> {
    Plugin { name, path, config: config(cfg), options }
}

fn deny() -> Plugin<'static> {
    plugin("deny-tools", DENY_TOOLS, &[("paths", json!([".env"]))], PluginOptions::default())
}

fn chain(runtime: &HookRuntime, plugins: Vec<Plugin<'_>>) -> HookChain {
    let hooks: Vec<Box<dyn HookHandler>> = plugins
        .into_iter()
        .map(|p| {
            let hookbox::sandbox::LoadedPlugin { plugin, .. } = runtime
                .load(p.name, p.path.as_ref(), p.config, p.options)
                .unwrap_or_else(|e| panic!("{}: {e}", p.name));
            Box::new(plugin.hook()) as Box<dyn HookHandler>
        })
        .collect();
    HookChain::new(hooks)
}

/// Runs the demo session on a fresh demo workspace; the run must complete.
async fn demo_run(plugins: Vec<Plugin<'_>>) -> (RunResult, tempfile::TempDir) {
    let ws = demo_workspace();
    let runtime = HookRuntime::new().expect("runtime");
    let mut chain = chain(&runtime, plugins);
    let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let agent = Agent::new(provider, tools, AgentConfig::default());
    let r = agent.run(DEMO_PROMPT, &mut chain).await.expect("the run completes whatever the hooks do");
    (r, ws)
}

fn adversary(mode: &str, limits: Limits, extra: &[(&str, serde_json::Value)]) -> Plugin<'static> {
    let mut cfg = vec![("mode", json!(mode))];
    cfg.extend(extra.iter().cloned());
    plugin("adversary", ADVERSARY, &cfg, PluginOptions { limits, ..PluginOptions::default() })
}

/// One adversary mode, its limits, and the failure kind each of its calls must record.
struct Case {
    mode: &'static str,
    limits: Limits,
    extra: Vec<(&'static str, serde_json::Value)>,
    kind: Option<FailureKind>,
}

fn cases() -> Vec<Case> {
    let huge_fuel = Limits { fuel: 1 << 50, deadline_ms: 200, ..Limits::default() };
    vec![
        Case { mode: "spin", limits: huge_fuel, extra: vec![], kind: Some(FailureKind::Deadline) },
        Case {
            mode: "spin",
            limits: Limits { fuel: 2_000_000, ..Limits::default() },
            extra: vec![],
            kind: Some(FailureKind::OutOfFuel),
        },
        Case { mode: "sleep", limits: huge_fuel, extra: vec![], kind: Some(FailureKind::Deadline) },
        Case {
            mode: "grow",
            limits: Limits { memory_bytes: 16 << 20, ..Limits::default() },
            extra: vec![],
            kind: Some(FailureKind::Memory),
        },
        Case { mode: "recurse", limits: Limits::default(), extra: vec![], kind: Some(FailureKind::Trap) },
        Case {
            mode: "big-output",
            limits: Limits::default(),
            extra: vec![("bytes", json!(8 << 20))],
            kind: Some(FailureKind::InvalidOutput),
        },
        Case { mode: "slice-panic", limits: Limits::default(), extra: vec![], kind: Some(FailureKind::Trap) },
        Case { mode: "big-log", limits: Limits::default(), extra: vec![], kind: None },
    ]
}

fn check_failures(r: &RunResult, case: &Case) {
    let ours: Vec<_> = r.hook_failures.iter().filter(|f| f.plugin == "adversary").collect();
    match case.kind {
        None => assert!(ours.is_empty(), "{}: {ours:#?}", case.mode),
        Some(kind) => {
            assert_eq!(ours.len(), 2, "{}: one failure per before-tool-call: {ours:#?}", case.mode);
            for f in ours {
                assert_eq!(f.kind, kind, "{}: {}", case.mode, f.message);
                assert_eq!(f.event, "before-tool-call");
                if kind == FailureKind::Deadline {
                    let limit = Duration::from_millis(case.limits.deadline_ms * 2);
                    assert!(
                        Duration::from_micros(f.duration_us) <= limit,
                        "{}: a deadline fault ends within twice its deadline: {} µs",
                        case.mode,
                        f.duration_us
                    );
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_adversary_beside_deny_tools_leaves_the_run_and_deny_tools_intact() {
    for case in cases() {
        let (r, ws) = demo_run(vec![adversary(case.mode, case.limits, &case.extra), deny()]).await;
        assert_eq!(r.stop_reason, StopReason::EndTurn, "{}", case.mode);
        assert_eq!(r.final_answer.as_deref(), Some(RECORDED_ANSWER), "{}", case.mode);
        assert!(ws.path().join(".env").exists(), "{}: deny-tools still denied the delete", case.mode);
        assert!(ws.path().join("test.txt").exists(), "{}", case.mode);
        assert_eq!(
            r.directives.iter().filter(|d| d.plugin == "deny-tools" && d.directive.action() == "skip-tool").count(),
            1,
            "{}",
            case.mode
        );
        check_failures(&r, &case);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_adversary_alone_fails_open() {
    for case in cases() {
        let (r, ws) = demo_run(vec![adversary(case.mode, case.limits, &case.extra)]).await;
        assert_eq!(r.final_answer.as_deref(), Some(RECORDED_ANSWER), "{}", case.mode);
        if case.mode == "big-output" {
            // Its skip-tool is over max_output_bytes: an invalid-output failure, never honoured.
            assert!(r.directives.is_empty(), "{:?}", r.directives);
        }
        assert!(!ws.path().join(".env").exists(), "{}: fail-open, nothing else denied the delete", case.mode);
        check_failures(&r, &case);
    }
}

#[tokio::test]
async fn logs_are_capped_per_call_without_failing_the_hook() {
    let (r, _ws) = demo_run(vec![adversary("big-log", Limits::default(), &[])]).await;
    assert!(r.hook_failures.is_empty(), "{:#?}", r.hook_failures);
    let logged: usize = r.hook_logs.iter().filter(|l| l.plugin == "adversary").map(|l| l.message.len()).sum();
    // Two calls, each capped at 64 KiB for the log import and for stdout, plus the notes.
    assert!(logged <= 2 * 2 * (64 << 10) + 4_096, "logged {logged} bytes");
    assert!(r.hook_logs.iter().any(|l| l.message.contains("dropped")), "the drop is said");
}

#[tokio::test]
async fn trap_on_the_nth_call_leaves_calls_before_and_after_it_working() {
    // iteration-start fires three times in the two-roundtrip session: call 2 traps,
    // call 3 runs on a fresh instance (its count restarts) and succeeds.
    let ws = notes_workspace();
    let runtime = HookRuntime::new().expect("runtime");
    let mut chain = chain(
        &runtime,
        vec![plugin(
            "adversary",
            ADVERSARY,
            &[("mode", json!("trap-nth")), ("n", json!(2)), ("at", json!("iteration-start"))],
            PluginOptions::default(),
        )],
    );
    let provider = Arc::new(ReplayProvider::from_file(fixture("two_roundtrips.session.json")).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let r = Agent::new(provider, tools, AgentConfig::default()).run("notes?", &mut chain).await.expect("run");
    assert_eq!(r.hook_failures.len(), 1, "{:#?}", r.hook_failures);
    assert_eq!(r.hook_failures[0].event, "iteration-start");
    assert_eq!(r.hook_failures[0].kind, FailureKind::Trap);
    let stats = &r.plugin_stats[0];
    assert_eq!(stats.failures, 1);
    assert_eq!(stats.calls, r.events.len() as u64, "every event entered the plugin, before and after the trap");
    assert_eq!(r.final_answer.as_deref(), Some("The notes say: remember the milk."));
}

#[tokio::test]
async fn fail_closed_declines_the_tool_when_the_hook_fails() {
    let options = PluginOptions { fail: FailPolicy::Closed, ..PluginOptions::default() };
    let (r, ws) = demo_run(vec![plugin("trap-on-tool", TRAP_ON_TOOL, &[], options)]).await;
    assert!(ws.path().join(".env").exists(), "the failing guard declined the delete");
    assert!(!ws.path().join("test.txt").exists(), "and the create");
    assert_eq!(r.hook_failures.len(), 2);
    let declined: Vec<_> = r.directives.iter().filter(|d| d.directive.action() == "skip-tool").collect();
    assert_eq!(declined.len(), 2, "{:?}", r.directives);
    assert!(declined.iter().all(|d| d.note.as_deref().is_some_and(|n| n.contains("fail-closed"))));
    assert_eq!(r.final_answer.as_deref(), Some(RECORDED_ANSWER), "the run completes");
}

#[tokio::test]
async fn the_crash_loop_breaker_quarantines_and_the_run_completes() {
    let options = PluginOptions { breaker: Breaker { failures: 1, window_ms: 60_000 }, ..PluginOptions::default() };
    let (r, ws) = demo_run(vec![plugin("trap-on-tool", TRAP_ON_TOOL, &[], options), deny()]).await;
    assert_eq!(r.hook_failures.len(), 1, "quarantined after the first failure: {:#?}", r.hook_failures);
    assert_eq!(r.plugin_suspensions.len(), 1);
    assert_eq!(r.plugin_suspensions[0].reason, SuspendReason::CrashLoop);
    assert_eq!(r.plugin_suspensions[0].plugin, "trap-on-tool");
    assert_eq!(r.plugin_stats[0].calls, 5, "run-start, iteration-start, model-response, tool-call-start, the trap");
    assert!(ws.path().join(".env").exists(), "deny-tools still acts");
    assert_eq!(r.final_answer.as_deref(), Some(RECORDED_ANSWER));

    // A quarantined fail-closed guard keeps declining tools.
    let options = PluginOptions {
        fail: FailPolicy::Closed,
        breaker: Breaker { failures: 1, window_ms: 60_000 },
        ..PluginOptions::default()
    };
    let (r, ws) = demo_run(vec![plugin("trap-on-tool", TRAP_ON_TOOL, &[], options)]).await;
    assert_eq!(r.hook_failures.len(), 1);
    assert!(ws.path().join(".env").exists() && !ws.path().join("test.txt").exists());
}

#[tokio::test]
async fn a_run_fuel_budget_skips_the_plugin_once_spent() {
    // Measure what audit-log spends on this run, then give it half.
    let (free, _ws) = demo_run(vec![plugin("audit-log", AUDIT_LOG, &[], PluginOptions::default())]).await;
    let spent = free.plugin_stats[0].fuel_used;
    assert!(spent > 0);
    let limits = Limits { run_fuel: Some(spent / 2), ..Limits::default() };
    let options = PluginOptions { limits, ..PluginOptions::default() };
    let (r, _ws) = demo_run(vec![plugin("audit-log", AUDIT_LOG, &[], options)]).await;
    assert_eq!(r.plugin_suspensions.len(), 1, "{:?}", r.plugin_suspensions);
    assert_eq!(r.plugin_suspensions[0].reason, SuspendReason::Budget);
    assert!(r.plugin_stats[0].fuel_used <= spent / 2, "the budget is a hard cap");
    assert!(r.plugin_stats[0].calls < r.events.len() as u64, "skipped for the rest of the run");
    assert_eq!(r.final_answer.as_deref(), Some(RECORDED_ANSWER));
}

#[test]
fn memory_below_a_page_is_refused_and_odd_sizes_are_rounded_up() {
    let runtime = HookRuntime::new().expect("runtime");
    let small = PluginOptions { limits: Limits { memory_bytes: 1000, ..Limits::default() }, ..Default::default() };
    let err = runtime.load("d", DENY_TOOLS.as_ref(), BTreeMap::new(), small).err().expect("refused").to_string();
    assert!(err.contains("memory_bytes") && err.contains("64 KiB"), "{err}");
    let odd =
        PluginOptions { limits: Limits { memory_bytes: (32 << 20) + 1, ..Limits::default() }, ..Default::default() };
    let hookbox::sandbox::LoadedPlugin { plugin, notes } =
        runtime.load("d", DENY_TOOLS.as_ref(), BTreeMap::new(), odd).expect("loads");
    assert_eq!(plugin.options().limits.memory_bytes, (32 << 20) + (64 << 10));
    assert!(notes.iter().any(|n| n.contains("rounded up")), "{notes:?}");
}

// ---- capabilities ----

#[test]
fn a_component_importing_sockets_is_refused_at_load_naming_the_interface() {
    let runtime = HookRuntime::new().expect("runtime");
    let err = runtime
        .load("net", NET_ESCAPE.as_ref(), BTreeMap::new(), PluginOptions::default())
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("wasi:sockets/"), "{err}");
    let out = cli(&["check", NET_ESCAPE]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("wasi:sockets/"), "{}", out.stderr);
}

#[test]
fn a_component_importing_the_filesystem_needs_a_dirs_grant() {
    let runtime = HookRuntime::new().expect("runtime");
    let err = runtime
        .load("fs", FS_ESCAPE.as_ref(), BTreeMap::new(), PluginOptions::default())
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("wasi:filesystem/") && err.contains("dirs"), "{err}");
    let out = cli(&["check", FS_ESCAPE]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("needs a `dirs` grant") && out.stdout.contains("grants needed: dirs"),
        "{}",
        out.stdout
    );
}

fn escape_logs(r: &RunResult) -> Vec<String> {
    r.hook_logs.iter().filter(|l| l.plugin == "fs-escape").map(|l| l.message.clone()).collect()
}

fn line<'a>(logs: &'a [String], prefix: &str) -> &'a str {
    logs.iter()
        .find(|l| l.starts_with(prefix))
        .map(String::as_str)
        .unwrap_or_else(|| panic!("no `{prefix}` in {logs:#?}"))
}

async fn escape_run(mode: DirMode, env: Vec<String>, granted: &Path) -> RunResult {
    let grants = Grants { env, dirs: vec![DirGrant { host: granted.to_path_buf(), guest: "/data".into(), mode }] };
    let options = PluginOptions { grants, ..PluginOptions::default() };
    let cfg = [("guest_dir", json!("/data")), ("env_var", json!("PATH"))];
    demo_run(vec![plugin("fs-escape", FS_ESCAPE, &cfg, options)]).await.0
}

#[tokio::test]
async fn escape_attempts_fail_inside_the_guest_and_only_granted_dirs_are_reachable() {
    let base = tempfile::tempdir().expect("tempdir");
    let granted_dir = base.path().join("granted");
    std::fs::create_dir(&granted_dir).expect("mkdir");
    std::fs::write(granted_dir.join("allowed.txt"), "granted content").expect("write");
    let granted = GrantedDir(granted_dir);

    let r = escape_run(DirMode::ReadOnly, Vec::new(), granted.path()).await;
    assert!(r.hook_failures.is_empty(), "{:#?}", r.hook_failures);
    let logs = escape_logs(&r);
    assert!(line(&logs, "read /etc/passwd:").contains("denied"));
    assert!(line(&logs, "read ../../etc/passwd:").contains("denied"));
    assert!(line(&logs, "read /data/../../etc/passwd:").contains("denied"));
    assert!(line(&logs, "list /:").contains("denied"));
    assert!(line(&logs, "env PATH:").contains("unset"), "no env grant, no variables");
    assert!(line(&logs, "read /data/allowed.txt:").contains("ALLOWED (15 bytes): granted content"));
    assert!(line(&logs, "write /data/written.txt:").contains("denied"), "read-only grant");
    assert!(!granted.path().join("written.txt").exists());

    let r = escape_run(DirMode::ReadWrite, vec!["PATH".into()], granted.path()).await;
    let logs = escape_logs(&r);
    assert!(line(&logs, "write /data/written.txt:").contains("ALLOWED"));
    assert_eq!(std::fs::read_to_string(granted.path().join("written.txt")).expect("written"), "pwned");
    assert!(line(&logs, "env PATH:").contains("set ("), "the granted variable is visible");
    assert!(line(&logs, "env vars:").contains("1 set"), "and only it");
    assert!(line(&logs, "read /etc/passwd:").contains("denied"), "a rw grant opens nothing else");
    assert!(line(&logs, "read /data/../../etc/passwd:").contains("denied"));
    // Nothing appeared beside the granted directory.
    let beside: Vec<_> = std::fs::read_dir(base.path()).expect("ls").flatten().map(|e| e.file_name()).collect();
    assert_eq!(beside, vec![std::ffi::OsString::from("granted")]);
}

struct GrantedDir(std::path::PathBuf);

impl GrantedDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

// ---- stress ----

/// FNV-1a 64 over `seed \0 event \0 key`: the adversary's `random-fault` rule
/// (plugins/README.md), recomputed here independently of the plugin.
fn faults(seed: &str, event: &str, key: &str, percent: u64) -> bool {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [seed.as_bytes(), &[0], event.as_bytes(), &[0], key.as_bytes()] {
        for &b in part {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash % 100 < percent
}

fn event_key(e: &Event) -> String {
    match e {
        Event::ToolCallStart { call, .. } | Event::BeforeToolCall { call, .. } => call.id.clone(),
        Event::ToolCallResult { tool_call_id, .. } => tool_call_id.clone(),
        Event::RunStart { run_id, .. } => run_id.clone(),
        Event::IterationStart { iteration, loop_counter } => format!("{iteration}/{loop_counter}"),
        Event::ModelResponse { iteration, .. } | Event::IterationComplete { iteration, .. } => iteration.to_string(),
        _ => String::new(),
    }
}

/// A two-response OpenAI session whose tool call ids are unique to `run`.
fn session_for(run: usize, dir: &Path) -> std::path::PathBuf {
    let body = |message: serde_json::Value, finish: &str| {
        json!({"id": format!("chatcmpl-{run}"), "object": "chat.completion", "model": "gpt-4o",
               "choices": [{"index": 0, "finish_reason": finish, "message": message}],
               "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
    };
    let calls = json!([
        {"id": format!("call_{run}_a"), "type": "function", "function": {"name": "list_dir", "arguments": "{}"}},
        {"id": format!("call_{run}_b"), "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"notes.txt\"}"}}
    ]);
    let session = json!({"hookbox_replay": 1, "format": "openai-chat", "model": "gpt-4o", "responses": [
        body(json!({"role": "assistant", "content": null, "tool_calls": calls}), "tool_calls"),
        body(json!({"role": "assistant", "content": format!("done {run}")}), "stop"),
    ]});
    let path = dir.join(format!("session-{run}.json"));
    std::fs::write(&path, session.to_string()).expect("write session");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_runs_with_seeded_random_faults_all_complete_and_every_fault_is_counted() {
    const RUNS: usize = 200;
    const SEED: &str = "hookbox-stress-1";
    let sessions = tempfile::tempdir().expect("tempdir");
    let ws = notes_workspace();
    let runtime = HookRuntime::new().expect("runtime");
    let options = PluginOptions {
        // Spinning faults stop at 5M fuel; the breaker is off so every event is entered.
        limits: Limits { fuel: 5_000_000, ..Limits::default() },
        breaker: Breaker { failures: 0, window_ms: 1 },
        ..PluginOptions::default()
    };
    let cfg = config(&[("mode", json!("random-fault")), ("seed", json!(SEED)), ("percent", json!(10))]);
    let hookbox::sandbox::LoadedPlugin { plugin: faulty, .. } =
        runtime.load("random-fault", ADVERSARY.as_ref(), cfg, options).expect("adversary");
    let hookbox::sandbox::LoadedPlugin { plugin: audit, .. } =
        runtime.load("audit-log", AUDIT_LOG.as_ref(), BTreeMap::new(), PluginOptions::default()).expect("audit");
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));

    let mut tasks = tokio::task::JoinSet::new();
    for run in 0..RUNS {
        let provider = Arc::new(ReplayProvider::from_file(session_for(run, sessions.path())).expect("session"));
        let agent = Agent::new(provider, tools.clone(), AgentConfig::default());
        let mut chain = HookChain::new(vec![Box::new(faulty.hook()), Box::new(audit.hook())]);
        tasks.spawn(async move { (run, agent.run(&format!("run {run}"), &mut chain).await) });
    }
    let mut expected = 0usize;
    let mut recorded = 0usize;
    let mut completed = 0usize;
    while let Some(joined) = tasks.join_next().await {
        let (run, outcome) = joined.expect("task");
        let r = outcome.unwrap_or_else(|e| panic!("run {run} failed: {e}"));
        assert_eq!(r.final_answer, Some(format!("done {run}")));
        completed += 1;
        expected += r.events.iter().filter(|e| faults(SEED, e.kind().as_str(), &event_key(e), 10)).count();
        recorded += r.hook_failures.iter().filter(|f| f.plugin == "random-fault").count();
        assert!(r.hook_failures.iter().all(|f| f.plugin == "random-fault"), "audit-log never fails");
    }
    assert_eq!(completed, RUNS);
    assert!(expected > RUNS / 20, "the seed injects a meaningful number of faults: {expected}");
    assert_eq!(recorded, expected, "every injected fault is recorded, and nothing else");
}

#[tokio::test]
async fn a_run_time_budget_caps_the_deadline_and_skips_the_plugin_once_spent() {
    // Each call spins until its deadline: 100 ms, then what is left of the 150 ms budget.
    let limits = Limits { fuel: 1 << 50, deadline_ms: 100, run_time_ms: Some(150), ..Limits::default() };
    let (r, ws) = demo_run(vec![adversary("spin", limits, &[]), deny()]).await;
    let ours: Vec<_> = r.hook_failures.iter().filter(|f| f.plugin == "adversary").collect();
    assert_eq!(ours.len(), 2, "{ours:#?}");
    assert!(ours.iter().all(|f| f.kind == FailureKind::Deadline));
    assert!(ours[1].duration_us < 100_000, "the second call only got what was left: {} µs", ours[1].duration_us);
    assert_eq!(r.plugin_suspensions.len(), 1);
    assert_eq!(r.plugin_suspensions[0].reason, SuspendReason::Budget);
    assert!(r.plugin_stats[0].time_us < 150_000 + 50_000, "{} µs", r.plugin_stats[0].time_us);
    assert!(ws.path().join(".env").exists());
    assert_eq!(r.final_answer.as_deref(), Some(RECORDED_ANSWER));
}

#[tokio::test]
async fn a_call_stopped_by_its_deadline_is_charged_the_fuel_it_burnt() {
    // Fuel enough for seconds of spinning, so only the 50 ms deadline stops each call.
    let limits = Limits { fuel: 1 << 50, deadline_ms: 50, ..Limits::default() };
    let (r, ws) = demo_run(vec![adversary("spin", limits, &[]), deny()]).await;
    let ours: Vec<_> = r.hook_failures.iter().filter(|f| f.plugin == "adversary").collect();
    assert!(!ours.is_empty());
    assert!(ours.iter().all(|f| f.kind == FailureKind::Deadline), "{ours:#?}");
    // Before the fix a 300 ms spin was charged ~2,000 fuel (the count lost at the
    // interrupt). Now the fuel is counted in slices of 1,000,000 and the running slice
    // is charged whole: more than two slices means slices were counted, not only the
    // one added at the interrupt (50 ms of spinning burns tens to hundreds of millions).
    let least = ours.iter().map(|f| f.fuel_used).min().unwrap_or(0);
    assert!(least > 2_000_000, "charged {least} fuel for a deadline-stopped call: {ours:#?}");
    // The run's count, which `run_fuel` is checked against, includes what was charged.
    let stats = r.plugin_stats.iter().find(|s| s.plugin == "adversary").expect("stats");
    assert!(stats.fuel_used >= ours.iter().map(|f| f.fuel_used).sum::<u64>(), "{stats:?}");
    assert!(ws.path().join(".env").exists(), "deny-tools still denies");
}

#[tokio::test]
async fn many_empty_content_blocks_are_invalid_output_not_host_memory() {
    // 100,000 empty text blocks: 0 string bytes, but 1.2 MB lowered.
    let extra = [("at", json!("model-response")), ("n", json!(100_000))];
    let (r, _ws) = demo_run(vec![adversary("many-blocks", Limits::default(), &extra), deny()]).await;
    let ours: Vec<_> = r.hook_failures.iter().filter(|f| f.plugin == "adversary").collect();
    assert_eq!(ours.len(), 2, "one failure per model-response: {ours:#?}");
    for f in &ours {
        assert_eq!(f.kind, FailureKind::InvalidOutput, "{}", f.message);
        assert!(f.message.contains("100000 content blocks"), "{}", f.message);
    }
    assert!(r.directives.iter().all(|d| d.plugin != "adversary"), "nothing of it is recorded as a directive");
    assert_eq!(r.final_answer.as_deref(), Some(RECORDED_ANSWER));
    // A few blocks are still fine.
    let extra = [("at", json!("model-response")), ("n", json!(3))];
    let (r, _ws) = demo_run(vec![adversary("many-blocks", Limits::default(), &extra)]).await;
    assert!(r.hook_failures.is_empty(), "{:?}", r.hook_failures);
}

#[tokio::test]
async fn a_log_flood_is_capped_per_call_and_per_run_with_a_note() {
    // 100,000 empty log lines per call: every call runs to completion.
    let extra = [("at", json!("model-response")), ("n", json!(100_000))];
    let (r, _ws) = demo_run(vec![adversary("log-flood", Limits::default(), &extra)]).await;
    assert!(r.hook_failures.is_empty(), "{:?}", r.hook_failures);
    let ours: Vec<_> = r.hook_logs.iter().filter(|l| l.plugin == "adversary").collect();
    let limits = Limits::default();
    assert!(ours.len() as u64 <= 2 * (limits.max_log_records + 1), "{} records kept", ours.len());
    let notes: Vec<_> = ours.iter().filter(|l| l.message.starts_with("[hookbox]")).collect();
    assert_eq!(notes.len(), 2, "one note per call: {notes:?}");
    assert!(notes[0].message.contains("99000 log records"), "{}", notes[0].message);
    // A run budget smaller than one call's records: one note for the run, then nothing.
    let limits = Limits { run_log_records: 10, ..Limits::default() };
    let (r, _ws) = demo_run(vec![adversary("log-flood", limits, &extra)]).await;
    let ours: Vec<_> = r.hook_logs.iter().filter(|l| l.plugin == "adversary").collect();
    assert_eq!(ours.len(), 11, "{ours:?}");
    assert!(ours[10].message.contains("run_log_records = 10"), "{}", ours[10].message);
}

#[test]
fn bytes_over_max_component_bytes_are_refused_before_compiling() {
    use hookbox::sandbox::{LoadError, RuntimeOptions};
    let options = RuntimeOptions { max_component_bytes: 1_000, ..RuntimeOptions::default() };
    let runtime = HookRuntime::with_options(options).expect("runtime");
    let bytes = std::fs::read(DENY_TOOLS).expect("deny-tools");
    let err = runtime
        .load_bytes("deny", "tenant-a/deny", &bytes, BTreeMap::new(), PluginOptions::default())
        .err()
        .expect("refused");
    assert!(matches!(err, LoadError::TooLarge { max: 1_000, .. }), "{err}");
    assert!(err.to_string().contains("tenant-a/deny"), "{err}");
}

/// Issue 13, B.5: the model pads `delete_file`'s arguments to 3 MiB, so
/// deny-tools runs out of fuel. A guard (a plugin whose `events` name
/// `before-tool-call`, as the demo configures deny-tools) fails closed by
/// default: the delete is declined, not passed.
#[tokio::test]
async fn a_guard_fails_closed_when_padded_arguments_exhaust_it() {
    use hookbox::contract::{Directive, EventKind, ToolCall};
    use hookbox::sandbox::DispatchTrace;
    let runtime = HookRuntime::new().expect("runtime");
    let args = format!("{{\"path\": \".env\"{}}}", " ".repeat(3 << 20));
    let event = Event::BeforeToolCall {
        iteration: 1,
        call: ToolCall { id: "call-1".into(), name: "delete_file".into(), arguments: args },
    };
    let mut outcomes = Vec::new();
    for events in [Some(vec![EventKind::BeforeToolCall]), None] {
        let options = PluginOptions { events: events.clone(), ..PluginOptions::default() };
        let hookbox::sandbox::LoadedPlugin { plugin, .. } = runtime
            .load("deny-tools", DENY_TOOLS.as_ref(), config(&[("paths", json!([".env"]))]), options)
            .expect("load");
        let policy = plugin.options().fail;
        let mut chain = HookChain::new(vec![Box::new(plugin.hook()) as Box<dyn HookHandler>]);
        let mut trace = DispatchTrace::default();
        let decision = chain.dispatch(&event, &hookbox::contract::EventContext::default(), &mut trace).await;
        assert_eq!(trace.failures.len(), 1, "the padded event exhausts the plugin: {:?}", trace.failures);
        outcomes.push((policy, decision.terminal));
    }
    let declined = Directive::SkipTool(Some(hookbox::sandbox::FAIL_CLOSED_MESSAGE.into()));
    assert_eq!(outcomes[0], (FailPolicy::Closed, Some(declined)), "a guard fails closed by default");
    // A plugin entered for every event is not a declared guard: open unless `fail = "closed"`.
    assert_eq!(outcomes[1], (FailPolicy::Open, None));
}

/// The library refuses what is not a regular file before opening it (the CLI
/// checks first too): a FIFO would block the open, `/dev/zero` never ends.
#[test]
fn the_runtime_refuses_a_fifo_or_a_device_as_a_plugin_file() {
    use hookbox::sandbox::LoadError;
    let runtime = HookRuntime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("hook.wasm");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    for (path, kind) in
        [(fifo.as_path(), "FIFO"), (Path::new("/dev/zero"), "character device"), (dir.path(), "directory")]
    {
        let err = runtime.load("p", path, BTreeMap::new(), PluginOptions::default()).err().expect("refused");
        assert!(matches!(err, LoadError::NotAFile { kind: k, .. } if k == kind), "{err}");
    }
}
