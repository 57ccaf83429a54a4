//! Steering a run from the host (seed 000): the run handle's pause, resume,
//! abort and inject from other threads and tasks, the pause timeout, the
//! three outcomes of an injected message, sessions with the `new_turn`
//! policy, streams that end in an abort, and the confirm-after-n plugin.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hookbox::contract::Event;
use hookbox::providers::replay::ReplayProvider;
use hookbox::providers::{Message, ModelProvider, ModelRequest, ModelResponse, ProviderError, ToolSpec};
use hookbox::sandbox::HookChain;
use hookbox::sandbox::HookHandler;
use hookbox::sandbox::HookRuntime;
use hookbox::sandbox::PluginOptions;
use hookbox::{Agent, AgentConfig, RunErrorInfo, RunResult, StreamEvent};
use hookbox::{HandleError, PauseTimeout, RunHandle};
use hookbox::{LateInjectionPolicy, Session, SessionOptions};
use hookbox::{Tool, ToolOutput, Workspace, workspace_tools};
use hookbox_tests::{CONFIRM_AFTER_N, SCRIPTED, config, demo_session, demo_workspace, notes_workspace, session_file};
use serde_json::json;
use tokio::sync::Notify;

/// A provider that announces each request it starts and, for the request
/// numbered `hold` (1-based), waits for `release` before answering.
struct Gated {
    inner: ReplayProvider,
    count: AtomicUsize,
    hold: usize,
    entered: Notify,
    release: Notify,
}

impl Gated {
    fn new(inner: ReplayProvider, hold: usize) -> Arc<Self> {
        Arc::new(Gated { inner, count: AtomicUsize::new(0), hold, entered: Notify::new(), release: Notify::new() })
    }
}

#[async_trait]
impl ModelProvider for Gated {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.hold {
            let released = self.release.notified();
            self.entered.notify_one();
            released.await;
        }
        self.inner.complete(request).await
    }
}

/// Starts `agent` on "go" with no hooks, steered by `handle`.
fn spawn_run(agent: &Arc<Agent>, handle: &RunHandle) -> tokio::task::JoinHandle<Result<RunResult, hookbox::RunError>> {
    let (agent, handle) = (agent.clone(), handle.clone());
    tokio::spawn(async move { agent.run_with_handle("go", &mut HookChain::default(), handle).await })
}

fn demo_agent(provider: Arc<dyn ModelProvider>, ws: &tempfile::TempDir, config: AgentConfig) -> Agent {
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    Agent::new(provider, tools, config)
}

fn replay(path: &std::path::Path) -> ReplayProvider {
    ReplayProvider::from_file(path).expect("session")
}

/// Every injected text ends in exactly one list.
fn assert_disjoint(r: &RunResult, sent: &[&str]) {
    for text in sent {
        let places = r.injected_messages.iter().filter(|t| t == text).count()
            + r.undelivered_injections.iter().filter(|t| t == text).count();
        assert_eq!(places, 1, "`{text}` must be in exactly one list: {r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_from_the_handle_is_delivered_at_the_next_boundary() {
    let ws = demo_workspace();
    let provider = Gated::new(replay(&demo_session()), 1);
    let agent = Arc::new(demo_agent(provider.clone(), &ws, AgentConfig::default()));
    let handle = RunHandle::new();
    let run = spawn_run(&agent, &handle);
    provider.entered.notified().await;
    // From another OS thread, while the first request is in flight.
    let other = handle.clone();
    std::thread::spawn(move || other.inject("focus on test.txt")).join().expect("thread").expect("accepted");
    provider.release.notify_one();
    let r = run.await.expect("task").expect("run");
    assert_eq!(r.injected_messages, vec!["focus on test.txt".to_string()]);
    assert!(r.undelivered_injections.is_empty());
    assert!(r.messages.iter().any(|m| matches!(m, Message::User { content } if content == "focus on test.txt")));
    assert_disjoint(&r, &["focus on test.txt"]);
    assert_eq!(handle.inject("after the end"), Err(HandleError::Finished));
    assert_eq!(handle.inject(""), Err(HandleError::Empty));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_posted_during_the_final_answer_is_undelivered_not_lost() {
    let ws = demo_workspace();
    let provider = Gated::new(replay(&demo_session()), 2); // request 2 produces the final answer
    let agent = Arc::new(demo_agent(provider.clone(), &ws, AgentConfig::default()));
    let handle = RunHandle::new();
    let run = spawn_run(&agent, &handle);
    provider.entered.notified().await;
    handle.inject("actually, only section 7").expect("accepted while running");
    provider.release.notify_one();
    let r = run.await.expect("task").expect("run");
    assert!(r.injected_messages.is_empty());
    assert_eq!(r.undelivered_injections, vec!["actually, only section 7".to_string()]);
    assert_disjoint(&r, &["actually, only section 7"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_queued_right_before_an_abort_is_attached_to_the_error() {
    let ws = demo_workspace();
    let provider = Gated::new(replay(&demo_session()), 2);
    let agent = Arc::new(demo_agent(provider.clone(), &ws, AgentConfig::default()));
    let handle = RunHandle::new();
    let run = spawn_run(&agent, &handle);
    provider.entered.notified().await;
    handle.inject("one more thing").expect("accepted");
    handle.abort("user cancelled");
    provider.release.notify_one();
    let err = run.await.expect("task").expect_err("aborted");
    assert!(matches!(&err.info, RunErrorInfo::Aborted { reason: Some(r), .. } if r == "user cancelled"));
    assert_eq!(err.report.undelivered_injections, vec!["one more thing".to_string()]);
    assert!(err.report.injected_messages.is_empty());
    // Partial figures: both requests were made. The abort does not wait for the
    // request in flight (dropped, its usage unknown: the first request's 71 in,
    // 46 out), unless its answer came in the same instant as the abort (here
    // the release follows the abort at once): then it counts (71+133, 46+19).
    // `abort_in_flight.rs` shows the drop without that race.
    let usage = (err.report.usage.input_tokens, err.report.usage.output_tokens);
    assert!(usage == (71, 46) || usage == (204, 65), "{usage:?}");
    assert_eq!(err.report.requests, 2);
    assert!(!err.report.events.iter().any(|e| matches!(e, Event::RunEnd { .. })), "run-end does not fire");
}

/// A tool that takes 300 ms and says when it started.
struct SlowTool {
    started: Arc<Notify>,
}

#[async_trait]
impl Tool for SlowTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "slow".into(),
            description: "takes a while".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    async fn call(&self, _arguments: &serde_json::Value) -> ToolOutput {
        self.started.notify_one();
        tokio::time::sleep(Duration::from_millis(300)).await;
        ToolOutput::ok("slow done")
    }
}

/// An OpenAI session: `responses` bodies, each a tool call to `slow` or a final text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_while_a_slow_tool_runs_lets_it_finish_and_appends_its_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let provider = Arc::new(replay(&session_file(dir.path(), "s.json", &[None, Some("never reached")])));
    let started = Arc::new(Notify::new());
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(SlowTool { started: started.clone() })];
    let agent = Arc::new(Agent::new(provider.clone(), tools, AgentConfig::default()));
    let handle = RunHandle::new();
    let run = spawn_run(&agent, &handle);
    started.notified().await;
    let aborted_at = Instant::now();
    handle.abort("stop now");
    let err = run.await.expect("task").expect_err("aborted");
    assert!(aborted_at.elapsed() >= Duration::from_millis(200), "nothing pre-empts the running tool");
    assert!(matches!(&err.info, RunErrorInfo::Aborted { reason: Some(r), .. } if r == "stop now"));
    let r = &err.report;
    let results: Vec<_> = r
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResults { results } => Some(results.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0][0].content, "slow done", "the tool's result was appended");
    assert!(r.events.iter().any(|e| matches!(e, Event::ToolCallResult { success: true, .. })));
    assert_eq!(provider.requests().len(), 1, "no request after the abort");
    // Partial figures equal the sum of the completed requests: one request, 10 in, 3 out.
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens, r.requests), (10, 3, 1));
}

fn confirm_chain(runtime: &HookRuntime, n: u64) -> HookChain {
    let hookbox::sandbox::LoadedPlugin { plugin, .. } = runtime
        .load("confirm-after-n", CONFIRM_AFTER_N.as_ref(), config(&[("n", json!(n))]), PluginOptions::default())
        .expect("confirm-after-n");
    HookChain::new(vec![Box::new(plugin.hook()) as Box<dyn HookHandler>])
}

/// Runs the demo on a stream; each time the run pauses, records how many
/// tool results the stream had shown, then resumes from another thread.
async fn pauses_per_run(agent: &Arc<Agent>, chain: HookChain) -> Vec<usize> {
    let handle = RunHandle::new();
    let mut rx = agent.stream("go".into(), chain, handle.clone());
    let mut results_seen = 0;
    let mut pauses = Vec::new();
    let mut last = None;
    loop {
        match tokio::time::timeout(Duration::from_millis(100), rx.recv()).await {
            Ok(Some(event)) => {
                if let StreamEvent::Hook(Event::ToolCallResult { .. }) = &event {
                    results_seen += 1;
                }
                last = Some(event);
            }
            Ok(None) => break,
            // Nothing arrives while the run is paused: the pause came right after
            // the last event read.
            Err(_) if handle.paused() => {
                pauses.push(results_seen);
                let other = handle.clone();
                std::thread::spawn(move || other.resume()).join().expect("resume thread");
            }
            Err(_) => {}
        }
    }
    assert!(matches!(last, Some(StreamEvent::Complete { .. })), "every stream ends with complete");
    pauses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_after_n_pauses_after_exactly_n_tool_results_and_a_resume_from_another_thread_continues() {
    let runtime = HookRuntime::new().expect("runtime");
    for (n, expected) in [(1, vec![1, 2]), (2, vec![2]), (3, vec![])] {
        let ws = demo_workspace();
        let agent = Arc::new(demo_agent(Arc::new(replay(&demo_session())), &ws, AgentConfig::default()));
        let pauses = pauses_per_run(&agent, confirm_chain(&runtime, n)).await;
        assert_eq!(pauses, expected, "n = {n}");
        assert!(ws.path().join("test.txt").exists(), "the run went on after each resume");
    }
}

#[tokio::test]
async fn confirm_after_n_restarts_its_count_at_every_run_start() {
    // One session (the same plugin instance) over two runs of two tool results each:
    // with n = 3 a count carried over would pause in the second run.
    let runtime = HookRuntime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = session_file(dir.path(), "s.json", &[None, None, Some("a"), None, None, Some("b")]);
    let started = Arc::new(Notify::new());
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(SlowTool { started })];
    let config = AgentConfig { pause_timeout_ms: Some(50), ..AgentConfig::default() };
    let agent = Arc::new(Agent::new(Arc::new(replay(&file)), tools, config));
    let mut session = Session::new(agent, confirm_chain(&runtime, 3), SessionOptions::default());
    let first = session.run("one").await.expect("no pause in run 1");
    let second = session.run("two").await.expect("no pause in run 2: the count restarted");
    assert_eq!(first[0].final_answer.as_deref(), Some("a"));
    assert_eq!(second[0].final_answer.as_deref(), Some("b"));
}

#[tokio::test]
async fn a_pause_timeout_aborts_or_resumes() {
    let runtime = HookRuntime::new().expect("runtime");
    let script = |at: &str| {
        let hookbox::sandbox::LoadedPlugin { plugin: p, .. } = runtime
            .load("scripted", SCRIPTED.as_ref(), config(&[(at, json!("pause"))]), PluginOptions::default())
            .expect("scripted");
        HookChain::new(vec![Box::new(p.hook()) as Box<dyn HookHandler>])
    };
    let ws = demo_workspace();
    let config = AgentConfig { pause_timeout_ms: Some(80), ..AgentConfig::default() };
    let agent = demo_agent(Arc::new(replay(&demo_session())), &ws, config);
    let started = Instant::now();
    let err = agent.run("go", &mut script("tool-call-start")).await.expect_err("times out");
    assert!(started.elapsed() >= Duration::from_millis(70));
    assert!(matches!(&err.info, RunErrorInfo::Aborted { reason: Some(r), .. } if r.contains("pause timeout")), "{err}");
    assert!(ws.path().join(".env").exists(), "no tool ran after the pause");

    let ws = demo_workspace();
    let config =
        AgentConfig { pause_timeout_ms: Some(30), on_pause_timeout: PauseTimeout::Resume, ..AgentConfig::default() };
    let agent = demo_agent(Arc::new(replay(&demo_session())), &ws, config);
    let r = agent.run("go", &mut script("tool-call-result")).await.expect("auto-resumed");
    assert!(ws.path().join("test.txt").exists());
    assert!(r.directives.iter().all(|d| d.honoured), "pause is honoured now: {:?}", r.directives);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_run_whose_pause_nothing_can_resume_ends_with_a_reason_instead_of_hanging() {
    let runtime = HookRuntime::new().expect("runtime");
    let script = || {
        let hookbox::sandbox::LoadedPlugin { plugin: p, .. } = runtime
            .load(
                "scripted",
                SCRIPTED.as_ref(),
                config(&[("tool-call-start", json!("pause"))]),
                PluginOptions::default(),
            )
            .expect("scripted");
        HookChain::new(vec![Box::new(p.hook()) as Box<dyn HookHandler>])
    };
    let unresumable = |err: &hookbox::RunError| {
        matches!(&err.info, RunErrorInfo::Aborted { reason: Some(r), event: Some(e), .. }
            if r == hookbox::UNRESUMABLE_PAUSE && e == "tool-call-start")
    };
    // Agent::run: the run's handle is the only one.
    let ws = demo_workspace();
    let agent = Arc::new(demo_agent(Arc::new(replay(&demo_session())), &ws, AgentConfig::default()));
    let err = tokio::time::timeout(Duration::from_secs(20), agent.run("go", &mut script()))
        .await
        .expect("the run ends instead of hanging")
        .expect_err("aborted");
    assert!(unresumable(&err), "{err}");
    assert!(err.to_string().contains("nothing can resume it"), "{err}");
    assert_eq!(err.report.stop_reason, hookbox::StopReason::Error);
    assert!(ws.path().join(".env").exists(), "no tool ran after the pause");
    // Session::run: the same (a new agent: the replay model has played its first response).
    let agent = Arc::new(demo_agent(Arc::new(replay(&demo_session())), &ws, AgentConfig::default()));
    let mut session = Session::new(agent.clone(), script(), SessionOptions::default());
    let err = tokio::time::timeout(Duration::from_secs(20), session.run("go"))
        .await
        .expect("the session turn ends instead of hanging")
        .expect_err("aborted");
    assert!(unresumable(err.run_error().expect("a turn raised")), "{err}");
    // An embedder that keeps a clone can still resume: the pause waits for it.
    let agent = Arc::new(demo_agent(Arc::new(replay(&demo_session())), &ws, AgentConfig::default()));
    let handle = RunHandle::new();
    let (a, h) = (agent.clone(), handle.clone());
    let mut chain = script();
    let run = tokio::spawn(async move { a.run_with_handle("go", &mut chain, h).await });
    let deadline = Instant::now() + Duration::from_secs(20);
    while !handle.paused() {
        assert!(Instant::now() < deadline, "the run pauses");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(handle.paused() && !run.is_finished(), "a pause someone can resume waits");
    // Resume this pause and the next one (the demo has two tool calls).
    let resumer = handle.clone();
    tokio::spawn(async move {
        while !resumer.finished() {
            if resumer.paused() {
                resumer.resume();
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let r = tokio::time::timeout(Duration::from_secs(20), run).await.expect("ends").expect("task").expect("run");
    assert_eq!(r.stop_reason, hookbox::StopReason::EndTurn);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_ends_in_an_abort_yields_error_then_complete() {
    let runtime = HookRuntime::new().expect("runtime");
    let hookbox::sandbox::LoadedPlugin { plugin: p, .. } = runtime
        .load(
            "scripted",
            SCRIPTED.as_ref(),
            config(&[("before-tool-call", json!("abort:no tools today"))]),
            Default::default(),
        )
        .expect("scripted");
    let ws = demo_workspace();
    let agent = Arc::new(demo_agent(Arc::new(replay(&demo_session())), &ws, AgentConfig::default()));
    let mut rx = agent.stream("go".into(), HookChain::new(vec![Box::new(p.hook())]), RunHandle::new());
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    let n = events.len();
    assert!(n >= 3);
    match &events[n - 2] {
        StreamEvent::Error { aborted, reason, partial, .. } => {
            assert!(aborted);
            assert_eq!(reason.as_deref(), Some("no tools today"));
            assert_eq!((partial.input_tokens, partial.output_tokens), (71, 46), "the one completed request");
        }
        other => panic!("expected the error event, got {other:?}"),
    }
    assert!(matches!(&events[n - 1], StreamEvent::Complete { result, .. } if result.error.is_some()));
    assert!(matches!(&events[0], StreamEvent::Hook(Event::RunStart { .. })));
}

#[tokio::test]
async fn a_session_sends_late_injections_as_a_new_turn_within_its_bound() {
    let runtime = HookRuntime::new().expect("runtime");
    // Every model response injects "again": it is never delivered within a run
    // without tools, so under new_turn it becomes the next turn — once, then the
    // repeated text is refused.
    let chain = || {
        let hookbox::sandbox::LoadedPlugin { plugin: p, .. } = runtime
            .load(
                "scripted",
                SCRIPTED.as_ref(),
                config(&[("model-response", json!("inject-message:again"))]),
                Default::default(),
            )
            .expect("scripted");
        HookChain::new(vec![Box::new(p.hook()) as Box<dyn HookHandler>])
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let file = session_file(dir.path(), "s.json", &[Some("first"), Some("second"), Some("third")]);
    let ws = notes_workspace();
    let agent = Arc::new(demo_agent(Arc::new(replay(&file)), &ws, AgentConfig::default()));
    let options = SessionOptions { late_injection_policy: LateInjectionPolicy::NewTurn, max_follow_up_turns: 3 };
    let mut session = Session::new(agent.clone(), chain(), options);
    let turns = session.run("hello").await.expect("turns");
    assert_eq!(turns.len(), 2, "the follow-up turn, then the repeated text is refused");
    assert_eq!(turns[0].undelivered_injections, vec!["again".to_string()]);
    assert_eq!(turns[1].final_answer.as_deref(), Some("second"));
    let users: Vec<&str> = session
        .history()
        .iter()
        .filter_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(users, vec!["hello", "again"], "the late text was sent once, as a turn");
    assert!(turns.iter().all(|t| t.usage.input_tokens > 0), "each turn has its own cost");

    // The bound: max_follow_up_turns = 0 surfaces instead.
    let agent = Arc::new(demo_agent(Arc::new(replay(&file)), &ws, AgentConfig::default()));
    let options = SessionOptions { late_injection_policy: LateInjectionPolicy::NewTurn, max_follow_up_turns: 0 };
    let turns = Session::new(agent, chain(), options).run("hello").await.expect("turns");
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].undelivered_injections, vec!["again".to_string()]);

    // Refused after an error: turn 1 aborts at its final answer with "again" queued;
    // the text is attached to the error and no follow-up turn is sent.
    let hookbox::sandbox::LoadedPlugin { plugin: p, .. } = runtime
        .load(
            "scripted",
            SCRIPTED.as_ref(),
            config(&[("model-response", json!("inject-message:again")), ("final-answer", json!("abort:stop"))]),
            Default::default(),
        )
        .expect("scripted");
    let provider = Arc::new(replay(&file));
    let agent = Arc::new(demo_agent(provider.clone(), &ws, AgentConfig::default()));
    let options = SessionOptions { late_injection_policy: LateInjectionPolicy::NewTurn, max_follow_up_turns: 3 };
    let mut session = Session::new(agent, HookChain::new(vec![Box::new(p.hook())]), options);
    let err = session.run("hello").await.expect_err("turn 1 aborts");
    assert!(err.completed.is_empty());
    assert_eq!(err.run_error().expect("a turn raised").report.undelivered_injections, vec!["again".to_string()]);
    assert_eq!(provider.requests().len(), 1, "no follow-up turn after an abort");
    assert!(session.history().is_empty(), "history holds completed turns only");
}

#[test]
fn the_run_handle_is_send_sync_and_clone() {
    // Seed 000: callable from any thread; the embedder keeps clones.
    fn assert_send_sync_clone<T: Send + Sync + Clone>() {}
    assert_send_sync_clone::<RunHandle>();
}

/// A tool that reports what it spent.
struct PaidTool;

#[async_trait]
impl Tool for PaidTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec { name: "slow".into(), description: "costs money".into(), parameters: json!({"type": "object"}) }
    }
    async fn call(&self, _arguments: &serde_json::Value) -> ToolOutput {
        ToolOutput { content: "paid".into(), success: true, reported_cost: Some(0.25), cost_estimated: true }
    }
}

#[tokio::test]
async fn an_abort_reports_the_spend_of_tools_that_ran() {
    let runtime = HookRuntime::new().expect("runtime");
    let hookbox::sandbox::LoadedPlugin { plugin: p, .. } = runtime
        .load("scripted", SCRIPTED.as_ref(), config(&[("tool-call-result", json!("abort:enough"))]), Default::default())
        .expect("scripted");
    let dir = tempfile::tempdir().expect("tempdir");
    let provider = Arc::new(replay(&session_file(dir.path(), "s.json", &[None, Some("never")])));
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(PaidTool)];
    let agent = Agent::new(provider, tools, AgentConfig::default());
    let err = agent.run("go", &mut HookChain::new(vec![Box::new(p.hook())])).await.expect_err("aborted");
    let request_cost = err.report.usage.cost - 0.25;
    assert!(
        request_cost > 0.0 && request_cost < 0.001,
        "the tool's 0.25 USD plus one priced request: {}",
        err.report.usage.cost
    );
    assert!(
        matches!(err.report.events.last(), Some(Event::ToolCallResult { reported_cost: Some(c), .. }) if (*c - 0.25).abs() < 1e-12)
    );
}
