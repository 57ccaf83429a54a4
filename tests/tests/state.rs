//! Hook state kept by the host (CONTRACT.md "Hook state", seed 003): a call
//! starts from the state the last successful call left; a call that fails
//! leaves it untouched; state is kept per (session, plugin) with a size cap;
//! a session resumed in a new process (`--session ID --state-db FILE`) gives
//! each hook the state it had; a plugin of another version gets the old state
//! and the version that wrote it; concurrent runs of one session never
//! lose a write unseen (compare-and-swap: a call whose write lost is made
//! again from the winner's state, up to three times, then it is a `state`
//! failure); a store that stays locked is a `state` failure within the
//! call's deadline.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;

use hookbox::RunHandle;
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::FailureKind;
use hookbox::sandbox::HookChain;
use hookbox::sandbox::HookRuntime;
use hookbox::sandbox::Limits;
use hookbox::sandbox::PluginOptions;
use hookbox::{Agent, AgentConfig, RunResult};
use hookbox::{Workspace, workspace_tools};
use hookbox_tests::{DEMO_PROMPT, STATE_COUNTER, cli, config, demo_session, demo_workspace};
use serde_json::json;

fn logs(r: &RunResult) -> Vec<String> {
    r.hook_logs.iter().filter(|l| l.plugin == "state-counter").map(|l| l.message.clone()).collect()
}

async fn run(runtime: &HookRuntime, session: &str, cfg: &[(&str, serde_json::Value)], version: &str) -> RunResult {
    let options = PluginOptions { version: version.into(), ..PluginOptions::default() };
    let hookbox::sandbox::LoadedPlugin { plugin, .. } =
        runtime.load("state-counter", STATE_COUNTER.as_ref(), config(cfg), options).expect("load");
    let ws = demo_workspace();
    let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let agent = Agent::new(provider, tools, AgentConfig::default());
    let mut chain = HookChain::new(vec![Box::new(plugin.hook())]);
    agent.run_in_session(DEMO_PROMPT, &mut chain, RunHandle::new(), session).await.expect("run")
}

#[tokio::test]
async fn state_carries_over_between_runs_of_a_session_and_is_per_session() {
    let runtime = HookRuntime::new().expect("runtime");
    let first = run(&runtime, "s1", &[], "1").await;
    assert_eq!(logs(&first), vec!["start empty", "count=1", "count=2"]);
    let second = run(&runtime, "s1", &[], "1").await;
    assert_eq!(logs(&second), vec!["start count=2 version=1", "count=3", "count=4"]);
    let other = run(&runtime, "s2", &[], "1").await;
    assert_eq!(logs(&other)[0], "start empty", "another session starts empty");
}

#[tokio::test]
async fn a_call_that_fails_leaves_the_state_untouched() {
    let runtime = HookRuntime::new().expect("runtime");
    // Call 2 saves count=2 and then panics: the host keeps count=1.
    let r = run(&runtime, "s", &[("trap_at", json!(2))], "1").await;
    assert_eq!(r.hook_failures.len(), 1);
    assert_eq!(r.hook_failures[0].kind, FailureKind::Trap);
    let next = run(&runtime, "s", &[], "1").await;
    assert_eq!(logs(&next)[0], "start count=1 version=1", "the failed call's write was dropped");
}

#[tokio::test]
async fn a_write_over_max_state_bytes_is_refused() {
    let runtime = HookRuntime::new().expect("runtime");
    let r = run(&runtime, "s", &[("big_at", json!(2))], "1").await;
    assert_eq!(r.hook_failures.len(), 1, "{:?}", r.hook_failures);
    assert_eq!(r.hook_failures[0].kind, FailureKind::InvalidOutput);
    assert!(r.hook_failures[0].message.contains("max_state_bytes"), "{}", r.hook_failures[0].message);
    let next = run(&runtime, "s", &[], "1").await;
    assert_eq!(logs(&next)[0], "start count=1 version=1");
}

#[tokio::test]
async fn a_new_version_gets_the_old_state_and_its_version() {
    let runtime = HookRuntime::new().expect("runtime");
    run(&runtime, "s", &[], "1.0.0").await;
    let upgraded = run(&runtime, "s", &[], "2.0.0").await;
    assert_eq!(logs(&upgraded)[0], "start count=2 version=1.0.0");
    let again = run(&runtime, "s", &[], "2.0.0").await;
    assert_eq!(logs(&again)[0], "start count=4 version=2.0.0", "saved by the new version now");
}

#[test]
fn a_session_resumed_in_a_new_process_gets_its_state_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("state.db");
    let config_path = dir.path().join("hookbox.toml");
    std::fs::write(&config_path, format!("[[plugins]]\npath = {STATE_COUNTER:?}\nversion = \"1\"\n")).expect("write");
    let invoke = |session: &str| {
        let ws = demo_workspace();
        let out = cli(&[
            "run",
            "--model",
            &format!("replay:{}", demo_session().display()),
            "--config",
            &config_path.display().to_string(),
            "--workspace",
            &ws.path().display().to_string(),
            "--session",
            session,
            "--state-db",
            &db.display().to_string(),
            "--json",
            DEMO_PROMPT,
        ]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let v = out.json();
        assert!(v["events"][0]["session_id"] == session, "run-start carries the session id");
        v["hook_logs"]
            .as_array()
            .expect("logs")
            .iter()
            .map(|l| l["message"].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    // Each in-process invocation builds its own runtime: only the database carries over.
    assert_eq!(invoke("chat-42")[0], "start empty");
    assert_eq!(invoke("chat-42"), vec!["start count=2 version=1", "count=3", "count=4"]);
    assert_eq!(invoke("chat-43")[0], "start empty");
}

/// One run of the demo session in `session` with an already loaded plugin.
async fn run_loaded(plugin: &Arc<hookbox::sandbox::WasmPlugin>, session: &str) -> RunResult {
    let ws = demo_workspace();
    let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let agent = Agent::new(provider, tools, AgentConfig::default());
    let mut chain = HookChain::new(vec![Box::new(plugin.hook())]);
    agent.run_in_session(DEMO_PROMPT, &mut chain, RunHandle::new(), session).await.expect("run")
}

fn sqlite_runtime(db: &std::path::Path) -> HookRuntime {
    let store = hookbox::SqliteStateStore::open(db).expect("open the state db");
    HookRuntime::new().expect("runtime").with_state_store(Arc::new(store))
}

fn load_counter(runtime: &HookRuntime, limits: Limits) -> Arc<hookbox::sandbox::WasmPlugin> {
    let options = PluginOptions { version: "1".into(), limits, ..PluginOptions::default() };
    runtime.load("state-counter", STATE_COUNTER.as_ref(), config(&[]), options).expect("load").plugin
}

// Compare-and-swap, not serialization: every increment is either in the
// final count or reported as a `state` failure of its call, never lost unseen.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_runs_of_one_session_keep_every_write_or_report_a_state_conflict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = sqlite_runtime(&dir.path().join("state.db"));
    let plugin = load_counter(&runtime, Limits::default());
    let runs: Vec<_> = (0..8)
        .map(|_| {
            let plugin = plugin.clone();
            tokio::spawn(async move { run_loaded(&plugin, "shared").await })
        })
        .collect();
    let mut failures = Vec::new();
    for run in runs {
        failures.extend(run.await.expect("run task").hook_failures);
    }
    for f in &failures {
        assert_eq!(f.kind, FailureKind::State, "{f:?}");
        assert!(f.message.contains("another run of the session saved first"), "{}", f.message);
    }
    let after = run_loaded(&plugin, "shared").await;
    assert!(after.hook_failures.is_empty(), "{:?}", after.hook_failures);
    // 8 runs × 2 increments: each one either committed (counted) or failed visibly.
    let committed = 16 - failures.len();
    assert_eq!(logs(&after)[0], format!("start count={committed} version=1"), "{} conflicts", failures.len());
}

#[tokio::test]
async fn a_locked_state_database_is_a_state_failure_within_the_deadline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("state.db");
    let runtime = sqlite_runtime(&db);
    let plugin = load_counter(&runtime, Limits { deadline_ms: 300, ..Limits::default() });
    // Another process (here: another connection) holds the write lock for the whole run.
    let other = rusqlite::Connection::open(&db).expect("second connection");
    other.execute_batch("BEGIN IMMEDIATE").expect("lock");
    let started = std::time::Instant::now();
    let r = run_loaded(&plugin, "locked").await;
    let took = started.elapsed();
    // Both saves (one per tool result) fail visibly, each within its 300 ms deadline.
    assert_eq!(r.hook_failures.len(), 2, "{:?}", r.hook_failures);
    for f in &r.hook_failures {
        assert_eq!(f.kind, FailureKind::State);
        assert!(f.message.contains("hook state not saved") && f.message.contains("locked"), "{}", f.message);
    }
    assert!(took < std::time::Duration::from_millis(2_000), "the run took {took:?}: waited past the deadlines");
    other.execute_batch("ROLLBACK").expect("unlock");
    let after = run_loaded(&plugin, "locked").await;
    assert_eq!(logs(&after)[0], "start empty", "nothing was saved while locked");
}

/// A store in which another run of the session saves first, once: before
/// the first save it is asked for, it saves `{"count": 100}` itself.
struct RacingStore {
    inner: hookbox::sandbox::MemoryStateStore,
    raced: std::sync::atomic::AtomicBool,
}

impl hookbox::sandbox::StateStore for RacingStore {
    fn load(
        &self,
        session: &str,
        plugin: &str,
        wait: std::time::Duration,
    ) -> Result<(Option<hookbox::sandbox::StoredState>, u64), hookbox::sandbox::StateError> {
        self.inner.load(session, plugin, wait)
    }

    fn save(
        &self,
        session: &str,
        plugin: &str,
        state: &hookbox::sandbox::StoredState,
        expected: Option<u64>,
        wait: std::time::Duration,
    ) -> Result<u64, hookbox::sandbox::StateError> {
        if !self.raced.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let winner = hookbox::sandbox::StoredState { version: "1".into(), data: br#"{"count":100}"#.to_vec() };
            self.inner.save(session, plugin, &winner, None, wait)?;
        }
        self.inner.save(session, plugin, state, expected, wait)
    }
}

#[tokio::test]
async fn a_save_that_loses_a_race_is_made_again_from_the_winner_s_state() {
    let store = Arc::new(RacingStore { inner: Default::default(), raced: false.into() });
    let runtime = HookRuntime::builder().state_store(store.clone()).build().expect("runtime");
    let r = run(&runtime, "raced", &[], "1").await;
    // The first tool result's save lost to the racer's count=100: the call
    // was made again on a fresh instance, read 100 and saved 101.
    assert!(r.hook_failures.is_empty(), "{:?}", r.hook_failures);
    assert_eq!(logs(&r), vec!["start empty", "count=101", "count=102"]);
    let stats = r.plugin_stats.iter().find(|s| s.plugin == "state-counter").expect("stats");
    assert!(stats.failures == 0, "a conflict counted as a failure: {stats:?}");
}

/// A hook-state store that is down: every load and save fails.
struct DownStore;

impl hookbox::sandbox::StateStore for DownStore {
    fn load(
        &self,
        _session: &str,
        _plugin: &str,
        _wait: std::time::Duration,
    ) -> Result<(Option<hookbox::sandbox::StoredState>, u64), hookbox::sandbox::StateError> {
        Err(hookbox::sandbox::StateError::Backend { store: "down".into(), source: "connection refused".into() })
    }

    fn save(
        &self,
        _session: &str,
        _plugin: &str,
        _state: &hookbox::sandbox::StoredState,
        _expected: Option<u64>,
        _wait: std::time::Duration,
    ) -> Result<u64, hookbox::sandbox::StateError> {
        Err(hookbox::sandbox::StateError::Backend { store: "down".into(), source: "connection refused".into() })
    }
}

// A database outage is the host's failure, not the plugin's: with a breaker
// that trips on the first failure, every call still fails visibly as `state`
// and the plugin is never suspended (it is called again once the store is back).
#[tokio::test]
async fn a_store_that_is_down_fails_calls_as_state_without_tripping_the_breaker() {
    let runtime = HookRuntime::builder().state_store(Arc::new(DownStore)).build().expect("runtime");
    let mut options = PluginOptions { version: "1".into(), ..PluginOptions::default() };
    options.breaker.failures = 1;
    let plugin = runtime.load("state-counter", STATE_COUNTER.as_ref(), config(&[]), options).expect("load").plugin;
    let r = run_loaded(&plugin, "down").await;
    assert!(r.plugin_suspensions.is_empty(), "suspended for the store's outage: {:?}", r.plugin_suspensions);
    assert!(r.hook_failures.len() >= 2, "every call that read the store fails: {:?}", r.hook_failures);
    for f in &r.hook_failures {
        assert_eq!(f.kind, FailureKind::State, "{f:?}");
        assert!(f.message.contains("connection refused"), "{}", f.message);
    }
}
