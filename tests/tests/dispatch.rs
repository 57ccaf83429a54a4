//! How the host enters plugins (issue 7): event subscriptions (an
//! unsubscribed plugin is never entered), one instance per (run, plugin)
//! reused across events and replaced after a failure, a fresh instance when
//! the session changes (nothing in guest memory crosses sessions), and
//! observe-only plugins whose calls run beside the loop.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::{Arc, Mutex};

use hookbox::RunHandle;
use hookbox::contract::{ContentBlock, Event, EventContext, EventKind};
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::PluginOptions;
use hookbox::sandbox::{DispatchTrace, HookChain};
use hookbox::sandbox::{FailureKind, HookHandler};
use hookbox::sandbox::{HookRuntime, LoadError, WasmHook};
use hookbox::{Agent, AgentConfig, RunResult};
use hookbox::{Workspace, workspace_tools};
use hookbox_tests::{ADVERSARY, AUDIT_LOG, CHANCE, DEMO_PROMPT, STATE_COUNTER, config, demo_session, demo_workspace};
use serde_json::json;

fn load(
    runtime: &HookRuntime,
    name: &str,
    path: &str,
    cfg: &[(&str, serde_json::Value)],
    options: PluginOptions,
) -> WasmHook {
    let hookbox::sandbox::LoadedPlugin { plugin, .. } =
        runtime.load(name, path.as_ref(), config(cfg), options).expect("load");
    plugin.hook()
}

async fn demo(chain: &mut HookChain, session: &str) -> RunResult {
    let ws = demo_workspace();
    let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let agent = Agent::new(provider, tools, AgentConfig::default());
    agent.run_in_session(DEMO_PROMPT, chain, RunHandle::new(), session).await.expect("run")
}

/// Each event as it fired, with the log lines its dispatch collected.
type Seen = Vec<(EventKind, Vec<String>)>;

fn only(events: &[EventKind]) -> PluginOptions {
    PluginOptions { events: Some(events.to_vec()), ..PluginOptions::default() }
}

fn run_start(session: &str) -> Event {
    Event::RunStart {
        run_id: format!("run-{session}"),
        session_id: session.into(),
        model: "m".into(),
        provider: "p".into(),
        user_content: vec![ContentBlock::Text("hi".into())],
    }
}

fn iteration_start(n: u32) -> Event {
    Event::IterationStart { iteration: n, loop_counter: n }
}

#[tokio::test]
async fn an_unsubscribed_plugin_is_never_entered() {
    let runtime = HookRuntime::new().expect("runtime");
    let all = load(&runtime, "all", AUDIT_LOG, &[], PluginOptions::default());
    let some = load(&runtime, "some", AUDIT_LOG, &[], only(&[EventKind::BeforeToolCall, EventKind::RunEnd]));
    let mut chain = HookChain::new(vec![Box::new(all), Box::new(some)]);
    let r = demo(&mut chain, "s").await;
    let stats = |name: &str| r.plugin_stats.iter().find(|s| s.plugin == name).expect("stats").clone();
    assert_eq!(stats("all").calls, r.events.len() as u64, "14 events, 14 calls");
    assert_eq!(stats("some").calls, 3, "two before-tool-call and one run-end: {:?}", stats("some"));
    let seen: Vec<String> = r
        .hook_logs
        .iter()
        .filter(|l| l.plugin == "some")
        .map(|l| l.message.split(' ').next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(seen, vec!["before-tool-call", "before-tool-call", "run-end"]);
}

#[tokio::test]
async fn state_is_keyed_by_session_without_subscribing_to_run_start() {
    let runtime = HookRuntime::new().expect("runtime");
    let counts = |r: &RunResult| -> Vec<String> {
        r.hook_logs.iter().filter(|l| l.plugin == "state-counter").map(|l| l.message.clone()).collect()
    };
    let mut results = Vec::new();
    for session in ["a", "a", "b"] {
        let hook = load(&runtime, "state-counter", STATE_COUNTER, &[], only(&[EventKind::ToolCallResult]));
        let mut chain = HookChain::new(vec![Box::new(hook)]);
        results.push(counts(&demo(&mut chain, session).await));
    }
    assert_eq!(results[0], vec!["count=1", "count=2"]);
    assert_eq!(results[1], vec!["count=3", "count=4"], "the second turn of `a` continues from its state");
    assert_eq!(results[2], vec!["count=1", "count=2"], "session `b` starts from nothing");
}

#[tokio::test]
async fn one_instance_serves_the_run_and_a_failure_replaces_it() {
    let runtime = HookRuntime::new().expect("runtime");
    // trap-nth counts its calls in guest memory and panics on every 2nd call of that instance.
    let cfg = [("mode", json!("trap-nth")), ("n", json!(2)), ("at", json!("iteration-start"))];
    let mut hook = load(&runtime, "adversary", ADVERSARY, &cfg, PluginOptions::default());
    hook.run_started("s");
    let mut kinds = Vec::new();
    for n in 1..=5 {
        let reply = hook.on_event(&iteration_start(n), &EventContext::default()).await;
        kinds.push(reply.outcome.err().map(|f| f.kind));
    }
    // Reused: call 2 sees count 2 and traps (a fresh instance per event would never count past 1).
    // Replaced: call 3 starts a new count at 1 and succeeds (a poisoned store would fail it), call 4 traps.
    assert_eq!(kinds, vec![None, Some(FailureKind::Trap), None, Some(FailureKind::Trap), None]);
}

#[tokio::test]
async fn a_new_session_gets_a_fresh_instance() {
    let runtime = HookRuntime::new().expect("runtime");
    let cfg = [("mode", json!("trap-nth")), ("n", json!(2)), ("at", json!("iteration-start"))];
    let mut hook = load(&runtime, "adversary", ADVERSARY, &cfg, PluginOptions::default());
    let mut outcomes = Vec::new();
    for session in ["a", "a", "b"] {
        assert!(hook.on_event(&run_start(session), &EventContext::default()).await.outcome.is_ok());
        outcomes.push(hook.on_event(&iteration_start(1), &EventContext::default()).await.outcome.is_ok());
    }
    // Within `a` the instance is reused (its 2nd call traps); `b` starts from a fresh instance.
    assert_eq!(outcomes, vec![true, false, true]);
    let mut same = load(&runtime, "adversary", ADVERSARY, &cfg, PluginOptions::default());
    same.run_started("a");
    assert!(same.on_event(&iteration_start(1), &EventContext::default()).await.outcome.is_ok());
    same.run_started("a");
    assert!(
        same.on_event(&iteration_start(1), &EventContext::default()).await.outcome.is_err(),
        "the same session keeps its instance"
    );
}

#[tokio::test]
async fn an_observe_only_plugin_runs_beside_the_loop_and_cannot_steer() {
    let runtime = HookRuntime::new().expect("runtime");
    let options = PluginOptions { observe: true, ..PluginOptions::default() };
    // chance sleeps 30 ms at model-response and declines tools on an even coin: as an observer,
    // the sleep does not hold the loop and the declines are ignored.
    let chance = load(&runtime, "chance", CHANCE, &[("sleep_ms", json!(30)), ("deny_on", json!("even"))], options);
    let mut chain = HookChain::new(vec![Box::new(chance)]);
    let ws = demo_workspace();
    let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let sink = seen.clone();
    let agent = Agent::new(provider, tools, AgentConfig::default()).with_trace(Arc::new(
        move |event: &Event, trace: &DispatchTrace| {
            let logs = trace.logs.iter().map(|l| l.message.clone()).collect();
            sink.lock().expect("lock").push((event.kind(), logs));
        },
    ));
    let r = agent.run(DEMO_PROMPT, &mut chain).await.expect("run");
    // Both tools ran whatever the coin said: an observer's skip-tool is recorded as ignored.
    assert!(!ws.path().join(".env").exists() && ws.path().join("test.txt").exists());
    for d in &r.directives {
        assert!(!d.honoured, "{d:?}");
        assert!(d.note.as_deref().is_some_and(|n| n.contains("observe-only")), "{d:?}");
    }
    // The model-response call (with its sleep) was not awaited at model-response:
    // its log is collected when the plugin's next call starts, at a later event.
    let seen = seen.lock().expect("lock").clone();
    let at_model_response: Vec<&Vec<String>> =
        seen.iter().filter(|(k, _)| *k == EventKind::ModelResponse).map(|(_, l)| l).collect();
    assert!(at_model_response.iter().all(|l| l.iter().all(|m| !m.starts_with("slept"))), "{seen:?}");
    let slept = r.hook_logs.iter().filter(|l| l.message.starts_with("slept")).count();
    assert_eq!(slept, 2, "both model-response calls ran and were recorded: {:?}", r.hook_logs);
    assert_eq!(r.plugin_stats[0].calls, r.events.len() as u64, "every call was collected by the run's end");
}

#[test]
fn subscriptions_and_observe_are_checked_at_load() {
    let runtime = HookRuntime::new().expect("runtime");
    let err = |options: PluginOptions| match runtime.load("x", AUDIT_LOG.as_ref(), config(&[]), options) {
        Err(LoadError::Options { message, .. }) => message,
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("loaded"),
    };
    assert!(err(only(&[])).contains("events = []"));
    let closed =
        PluginOptions { observe: true, fail: hookbox::sandbox::FailPolicy::Closed, ..PluginOptions::default() };
    assert!(err(closed).contains("cannot fail closed"));
}

#[tokio::test]
async fn a_full_instance_pool_is_an_instantiate_failure_and_on_demand_allocation_works() {
    use hookbox::sandbox::RuntimeOptions;
    let runtime =
        HookRuntime::with_options(RuntimeOptions { pooling: true, max_instances: 1, ..RuntimeOptions::default() })
            .expect("runtime");
    let mut first = load(&runtime, "a", AUDIT_LOG, &[], PluginOptions::default());
    let mut second = load(&runtime, "b", AUDIT_LOG, &[], PluginOptions::default());
    assert!(first.on_event(&iteration_start(1), &EventContext::default()).await.outcome.is_ok(), "the one slot");
    let failure =
        second.on_event(&iteration_start(1), &EventContext::default()).await.outcome.expect_err("no slot left");
    assert_eq!(failure.kind, FailureKind::Instantiate, "{failure:?}");
    drop(first);
    assert!(
        second.on_event(&iteration_start(2), &EventContext::default()).await.outcome.is_ok(),
        "the slot is free again"
    );

    let on_demand =
        HookRuntime::with_options(RuntimeOptions { pooling: false, max_instances: 1, ..RuntimeOptions::default() })
            .expect("runtime");
    let mut hooks: Vec<WasmHook> =
        (0..3).map(|i| load(&on_demand, &format!("h{i}"), AUDIT_LOG, &[], PluginOptions::default())).collect();
    for hook in &mut hooks {
        assert!(
            hook.on_event(&iteration_start(1), &EventContext::default()).await.outcome.is_ok(),
            "no pool, no limit"
        );
    }
    assert!(matches!(
        HookRuntime::with_options(RuntimeOptions { pooling: true, max_instances: 0, ..RuntimeOptions::default() }),
        Err(LoadError::Engine(m)) if m.contains("max_instances")
    ));

    // A smaller reservation per memory slot (more instances fit the address space):
    // plugins run, and one asking for more memory than the slot is refused at load.
    // Also without copy-on-write images: fewer memory mappings per instance.
    let small = RuntimeOptions { max_memory_bytes: 256 << 20, copy_on_write: false, ..RuntimeOptions::default() };
    let runtime = HookRuntime::with_options(small).expect("runtime");
    let mut hook = load(&runtime, "a", AUDIT_LOG, &[], PluginOptions::default());
    assert!(hook.on_event(&iteration_start(1), &EventContext::default()).await.outcome.is_ok());
    let big = PluginOptions {
        limits: hookbox::sandbox::Limits { memory_bytes: 512 << 20, ..Default::default() },
        ..PluginOptions::default()
    };
    match runtime.load("big", AUDIT_LOG.as_ref(), config(&[]), big) {
        Err(LoadError::Options { message, .. }) => assert!(message.contains("max_memory_bytes"), "{message}"),
        other => panic!("expected a load error, got {:?}", other.map(|_| ())),
    }
    assert!(matches!(
        HookRuntime::with_options(RuntimeOptions { max_memory_bytes: 1000, ..RuntimeOptions::default() }),
        Err(LoadError::Engine(m)) if m.contains("max_memory_bytes")
    ));
}

#[tokio::test]
async fn a_journaled_sleep_past_the_deadline_is_a_deadline_failure() {
    let runtime = HookRuntime::new().expect("runtime");
    let options = PluginOptions {
        limits: hookbox::sandbox::Limits { deadline_ms: 50, ..Default::default() },
        ..PluginOptions::default()
    };
    let mut hook = load(&runtime, "chance", CHANCE, &[("sleep_ms", json!(5_000))], options);
    let event = Event::ModelResponse {
        iteration: 1,
        text: String::new(),
        content: Vec::new(),
        tool_calls: Vec::new(),
        reasoning: String::new(),
        finish_reason: hookbox::providers::FinishReason::Stop,
        usage: None,
    };
    let started = std::time::Instant::now();
    let failure =
        hook.on_event(&event, &EventContext::default()).await.outcome.expect_err("the sleep outlasts the deadline");
    assert_eq!(failure.kind, FailureKind::Deadline, "{failure:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_millis(2_000),
        "stopped near the deadline, not after the sleep"
    );
}
