//! Unit tests of every [`HookChain`] rule, with native [`ScriptedHook`]s (no
//! WebAssembly). Each test names the rule it checks (module docs of
//! `chain.rs` and `docs/contract.md`, sections 2 to 4).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hookbox_contract::{FinishReason, SuspendReason, ToolCall, Usage};
use tokio::sync::Semaphore;
use tokio::time::timeout;

use super::*;
use crate::testing::ScriptedHook;

type Seen = Arc<Mutex<Vec<Event>>>;

fn seen(s: &Seen) -> Vec<Event> {
    s.lock().unwrap().clone()
}

fn text(t: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::Text(t.into())]
}

fn chain(hooks: Vec<ScriptedHook>) -> HookChain {
    HookChain::new(hooks.into_iter().map(|h| Box::new(h) as Box<dyn HookHandler>).collect())
}

/// How long a dispatch or drain may take: a call that should have been
/// detached but waits at a closed [`Probe`] gate fails the test, not hangs it.
const PATIENCE: Duration = Duration::from_secs(10);

async fn dispatch(chain: &mut HookChain, event: &Event) -> (Decision, DispatchTrace) {
    let mut trace = DispatchTrace::default();
    let decision = timeout(PATIENCE, chain.dispatch(event, &EventContext::default(), &mut trace))
        .await
        .expect("dispatch waited for a call");
    (decision, trace)
}

async fn drain(chain: &mut HookChain) -> DispatchTrace {
    let mut trace = DispatchTrace::default();
    timeout(PATIENCE, chain.drain(&mut trace)).await.expect("drain finishes");
    trace
}

/// The record of `plugin`'s `directive` at `event`: honoured unless it has a `note`.
fn record(plugin: &str, event: &Event, directive: Directive, note: Option<&str>) -> DirectiveRecord {
    DirectiveRecord {
        plugin: plugin.into(),
        event: event.kind().to_string(),
        iteration: event.iteration(),
        directive,
        honoured: note.is_none(),
        note: note.map(String::from),
    }
}

fn run_start() -> Event {
    Event::RunStart {
        run_id: "run-1".into(),
        session_id: "sess-1".into(),
        model: "m".into(),
        provider: "p".into(),
        user_content: text("hello"),
    }
}

fn iteration_start(iteration: u32) -> Event {
    Event::IterationStart { iteration, loop_counter: iteration }
}

fn request_start() -> Event {
    Event::RequestStart {
        request_index: 1,
        iteration: 1,
        attempt: 1,
        purpose: "initial".into(),
        model: "m".into(),
        provider: "p".into(),
    }
}

fn tool_call(arguments: &str) -> ToolCall {
    ToolCall { id: "call-1".into(), name: "echo".into(), arguments: arguments.into() }
}

fn model_response() -> Event {
    Event::ModelResponse {
        iteration: 1,
        text: "draft".into(),
        content: text("draft"),
        tool_calls: vec![tool_call("{}")],
        reasoning: String::new(),
        finish_reason: FinishReason::ToolCall,
        usage: None,
    }
}

fn tool_call_start() -> Event {
    Event::ToolCallStart { iteration: 1, call: tool_call(r#"{"x":1}"#) }
}

fn before_tool_call(arguments: &str) -> Event {
    Event::BeforeToolCall { iteration: 1, call: tool_call(arguments) }
}

fn tool_result() -> Event {
    Event::ToolCallResult {
        iteration: 1,
        tool_name: "echo".into(),
        tool_call_id: "call-1".into(),
        result: "a long result, cut".into(),
        truncated: true,
        success: true,
        duration_ms: 2,
        reported_cost: None,
        cost_estimated: false,
        arguments: String::new(),
        result_data: None,
    }
}

fn final_answer() -> Event {
    Event::FinalAnswer {
        text: "done".into(),
        content: text("done"),
        finish_reason: FinishReason::Stop,
        usage: Usage::default(),
        tool_calls: Vec::new(),
        reasoning: String::new(),
    }
}

fn run_end() -> Event {
    Event::RunEnd { iterations: 1, usage: Usage::default(), error: None }
}

/// A [`ScriptedHook`] with what a script cannot express: a gate each call
/// waits at, the sessions `run_started` gave it, a suspension in every reply,
/// or a panic.
struct Probe {
    inner: ScriptedHook,
    gate: Option<Arc<Semaphore>>,
    sessions: Arc<Mutex<Vec<String>>>,
    suspend: bool,
    panic: bool,
}

fn probe(inner: ScriptedHook) -> Probe {
    Probe { inner, gate: None, sessions: Arc::default(), suspend: false, panic: false }
}

#[async_trait]
impl HookHandler for Probe {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn fail_policy(&self) -> FailPolicy {
        self.inner.fail_policy()
    }

    fn run_started(&mut self, session_id: &str) {
        self.sessions.lock().unwrap().push(session_id.to_string());
    }

    fn subscribed(&self, kind: EventKind) -> bool {
        self.inner.subscribed(kind)
    }

    fn observe_only(&self) -> bool {
        HookHandler::observe_only(&self.inner)
    }

    async fn on_event(&mut self, event: &Event, context: &EventContext) -> HookReply {
        if let Some(gate) = &self.gate {
            gate.acquire().await.expect("gate open").forget();
        }
        assert!(!self.panic, "the probe panics at {}", event.kind());
        let mut reply = self.inner.on_event(event, context).await;
        if self.suspend {
            reply.suspension = Some(Suspension {
                plugin: self.inner.name().into(),
                event: event.kind().to_string(),
                reason: SuspendReason::Budget,
                message: "budget spent".into(),
            });
        }
        reply
    }
}

#[derive(Default)]
struct Calls(Mutex<Vec<CallRecord>>);

impl CallSink for Calls {
    fn push_call(&self, record: CallRecord) {
        self.0.lock().unwrap().push(record);
    }
}

/// Rule: replacements feed the next hook. `replace-arguments` at
/// `before-tool-call`: each hook sees the arguments the hooks before it left,
/// never a later hook's, and the decision holds the last replacement, also
/// when a later hook declines the call (the history shows the new arguments).
#[tokio::test]
async fn replace_arguments_feeds_the_next_hook_and_the_last_wins() {
    let a = ScriptedHook::new("a").on(EventKind::BeforeToolCall, Directive::ReplaceArguments(r#"{"x":2}"#.into()));
    let b = ScriptedHook::new("b").on(EventKind::BeforeToolCall, Directive::ReplaceArguments(r#"{"x":3}"#.into()));
    let c = ScriptedHook::new("c").on(EventKind::BeforeToolCall, Directive::SkipTool(None));
    let (a_seen, b_seen, c_seen) = (a.seen(), b.seen(), c.seen());
    let event = before_tool_call(r#"{"x":1}"#);
    let (decision, trace) = dispatch(&mut chain(vec![a, b, c]), &event).await;

    assert_eq!(seen(&a_seen), vec![event.clone()], "a hook never sees a later hook's rewrite");
    assert_eq!(seen(&b_seen), vec![before_tool_call(r#"{"x":2}"#)]);
    assert_eq!(seen(&c_seen), vec![before_tool_call(r#"{"x":3}"#)], "id and name are kept");
    assert_eq!(decision.replace_arguments.as_deref(), Some(r#"{"x":3}"#));
    assert_eq!(decision.terminal, Some(Directive::SkipTool(None)));
    assert_eq!(
        trace.directives,
        vec![
            record("a", &event, Directive::ReplaceArguments(r#"{"x":2}"#.into()), None),
            record("b", &event, Directive::ReplaceArguments(r#"{"x":3}"#.into()), None),
            record("c", &event, Directive::SkipTool(None), None),
        ]
    );
}

/// Rule: `replace-result` at `tool-call-result` feeds the next hook, which
/// sees the new text with `truncated = false` (the rest of the event kept).
#[tokio::test]
async fn replace_result_feeds_the_next_hook_untruncated() {
    let a = ScriptedHook::new("a").on(EventKind::ToolCallResult, Directive::ReplaceResult("short".into()));
    let b = ScriptedHook::new("b");
    let b_seen = b.seen();
    let (decision, trace) = dispatch(&mut chain(vec![a, b]), &tool_result()).await;

    let Event::ToolCallResult { result, truncated, success, tool_call_id, .. } = &seen(&b_seen)[0] else {
        panic!("b saw {:?}", seen(&b_seen));
    };
    assert_eq!((result.as_str(), *truncated, *success, tool_call_id.as_str()), ("short", false, true, "call-1"));
    assert_eq!(decision.replace_result.as_deref(), Some("short"));
    assert_eq!(trace.directives.len(), 1);
    assert!(trace.directives[0].honoured);
}

/// Rule: `replace-content` feeds the next hook at `model-response` and at
/// `final-answer`: it sees the new blocks and their joined text; the tool
/// calls are kept.
#[tokio::test]
async fn replace_content_feeds_the_next_hook() {
    let blocks = vec![ContentBlock::Text("new ".into()), ContentBlock::Text("text".into())];
    for event in [model_response(), final_answer()] {
        let a = ScriptedHook::new("a")
            .on(EventKind::ModelResponse, Directive::ReplaceContent(blocks.clone()))
            .on(EventKind::FinalAnswer, Directive::ReplaceContent(blocks.clone()));
        let b = ScriptedHook::new("b");
        let b_seen = b.seen();
        let (decision, _) = dispatch(&mut chain(vec![a, b]), &event).await;

        let mut expected = event.clone();
        if let Event::ModelResponse { text, content, .. } | Event::FinalAnswer { text, content, .. } = &mut expected {
            (*text, *content) = ("new text".into(), blocks.clone());
        }
        assert_eq!(seen(&b_seen), vec![expected]);
        assert_eq!(decision.replace_content.as_ref(), Some(&blocks));
    }
}

/// Rule: `replace-user-content` at `run-start` feeds the next hook.
#[tokio::test]
async fn replace_user_content_feeds_the_next_hook() {
    let a = ScriptedHook::new("a").on(EventKind::RunStart, Directive::ReplaceUserContent(text("rewritten")));
    let b = ScriptedHook::new("b");
    let b_seen = b.seen();
    let (decision, _) = dispatch(&mut chain(vec![a, b]), &run_start()).await;

    let Event::RunStart { user_content, session_id, .. } = &seen(&b_seen)[0] else { panic!("b saw no run-start") };
    assert_eq!((user_content, session_id.as_str()), (&text("rewritten"), "sess-1"));
    assert_eq!(decision.replace_user_content, Some(text("rewritten")));
}

/// Rule: the first `skip-tool`, `abort`, `reject` or `skip-run` ends the
/// chain: later hooks are not called for that event; injections returned
/// before it are kept.
#[tokio::test]
async fn the_first_terminal_directive_ends_the_chain() {
    let cases = [
        (before_tool_call("{}"), Directive::SkipTool(Some("no".into()))),
        (tool_call_start(), Directive::Abort(Some("stop".into()))),
        (model_response(), Directive::Reject("bad".into())),
        (run_start(), Directive::SkipRun("not today".into())),
    ];
    for (event, terminal) in cases {
        let kind = event.kind();
        let a = ScriptedHook::new("a").on(kind, Directive::InjectMessage("before".into()));
        let b = ScriptedHook::new("b").on(kind, terminal.clone());
        let c = ScriptedHook::new("c").on(kind, Directive::InjectMessage("after".into()));
        let (b_seen, c_seen) = (b.seen(), c.seen());
        let mut hooks = chain(vec![a, b, c]);
        let (decision, trace) = dispatch(&mut hooks, &event).await;

        assert_eq!(decision.terminal.as_ref(), Some(&terminal), "{kind}");
        assert_eq!(decision.injections, vec!["before".to_string()], "{kind}");
        assert_eq!(seen(&b_seen).len(), 1, "{kind}");
        assert!(seen(&c_seen).is_empty(), "c is not called at {kind}");
        assert_eq!(hooks.stats()[2].calls, 0, "{kind}");
        let plugins: Vec<_> = trace.directives.iter().map(|d| (d.plugin.as_str(), d.honoured)).collect();
        assert_eq!(plugins, vec![("a", true), ("b", true)], "{kind}");
    }
}

/// Rule: the first `retry` wins; a later one is recorded but not used, and a
/// later `reject` ends the chain with the retry's feedback left unused.
#[tokio::test]
async fn the_first_retry_wins() {
    let a = ScriptedHook::new("a").on(EventKind::ModelResponse, Directive::Retry("first".into()));
    let b = ScriptedHook::new("b").on(EventKind::ModelResponse, Directive::Retry("second".into()));
    let c = ScriptedHook::new("c");
    let c_seen = c.seen();
    let (decision, trace) = dispatch(&mut chain(vec![a, b, c]), &model_response()).await;
    assert_eq!(decision.retry.as_deref(), Some("first"));
    assert_eq!(decision.terminal, None);
    assert_eq!(seen(&c_seen).len(), 1, "retry does not end the chain");
    let retries: Vec<_> = trace.directives.iter().map(|d| (d.plugin.as_str(), d.directive.clone())).collect();
    assert_eq!(retries, vec![("a", Directive::Retry("first".into())), ("b", Directive::Retry("second".into()))]);
    let honoured: Vec<_> = trace.directives.iter().map(|d| (d.honoured, d.note.is_some())).collect();
    assert_eq!(honoured, vec![(true, false), (false, true)], "the second retry is recorded as not honoured");

    let a = ScriptedHook::new("a").on(EventKind::ModelResponse, Directive::Retry("first".into()));
    let b = ScriptedHook::new("b").on(EventKind::ModelResponse, Directive::Reject("no".into()));
    let (decision, _) = dispatch(&mut chain(vec![a, b]), &model_response()).await;
    assert_eq!(decision.terminal, Some(Directive::Reject("no".into())));
}

/// Rule: fail-open: a failed call counts as `continue` (nothing recorded as a
/// directive), is kept in `trace.failures`, and the next hook still runs on
/// the unchanged event.
#[tokio::test]
async fn a_fail_open_failure_counts_as_continue() {
    let a = ScriptedHook::new("a").fail_on(EventKind::BeforeToolCall, FailureKind::Trap);
    let b = ScriptedHook::new("b").on(EventKind::BeforeToolCall, Directive::InjectMessage("b ran".into()));
    let b_seen = b.seen();
    let event = before_tool_call("{}");
    let (decision, trace) = dispatch(&mut chain(vec![a, b]), &event).await;

    assert_eq!(decision.terminal, None);
    assert_eq!(decision.injections, vec!["b ran".to_string()]);
    assert_eq!(seen(&b_seen), vec![event]);
    assert_eq!(trace.failures.len(), 1);
    assert_eq!((trace.failures[0].plugin.as_str(), trace.failures[0].kind), ("a", FailureKind::Trap));
    assert_eq!(trace.failures[0].event, "before-tool-call");
    assert_eq!(trace.directives.iter().map(|d| d.plugin.as_str()).collect::<Vec<_>>(), vec!["b"]);
}

/// Rule: fail-closed: a failure at `before-tool-call` becomes `skip-tool`
/// with [`FAIL_CLOSED_MESSAGE`], ends the chain and is recorded as an
/// honoured directive with a `fail-closed` note (and as a failure).
#[tokio::test]
async fn a_fail_closed_failure_declines_the_tool() {
    let a = ScriptedHook::new("a").fail_closed().fail_on(EventKind::BeforeToolCall, FailureKind::Deadline);
    let b = ScriptedHook::new("b");
    let b_seen = b.seen();
    let (decision, trace) = dispatch(&mut chain(vec![a, b]), &before_tool_call("{}")).await;

    let skip = Directive::SkipTool(Some(FAIL_CLOSED_MESSAGE.to_string()));
    assert_eq!(decision.terminal.as_ref(), Some(&skip));
    assert!(seen(&b_seen).is_empty(), "the chain ends");
    assert_eq!(trace.directives.len(), 1);
    let r = &trace.directives[0];
    assert_eq!((r.plugin.as_str(), r.event.as_str(), r.iteration), ("a", "before-tool-call", Some(1)));
    assert_eq!((&r.directive, r.honoured), (&skip, true));
    assert!(r.note.as_deref().is_some_and(|n| n.starts_with("fail-closed") && n.contains("deadline")), "{r:?}");
    assert_eq!(trace.failures.len(), 1);
    assert_eq!(trace.failures[0].kind, FailureKind::Deadline);
}

/// Rule: fail-closed applies at `before-tool-call` only: at any other event a
/// fail-closed hook's failure is `continue` and the next hook runs.
#[tokio::test]
async fn a_fail_closed_failure_elsewhere_is_continue() {
    for event in [run_start(), iteration_start(1), model_response(), tool_call_start(), tool_result(), final_answer()] {
        let kind = event.kind();
        let a = ScriptedHook::new("a").fail_closed().fail_on(kind, FailureKind::Trap);
        let b = ScriptedHook::new("b");
        let b_seen = b.seen();
        let (decision, trace) = dispatch(&mut chain(vec![a, b]), &event).await;

        assert_eq!(decision, Decision::default(), "{kind}");
        assert!(trace.directives.is_empty(), "{kind}");
        assert_eq!(trace.failures.len(), 1, "{kind}");
        assert_eq!(seen(&b_seen), vec![event], "{kind}");
    }
}

/// Rule: an observe-only hook's calls run beside the loop: dispatch does not
/// wait for them, the rest of the chain runs, its directives are never
/// applied and are recorded (with its logs and stats) when collected, as
/// ignored "from an observe-only plugin".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_only_calls_are_detached_and_never_applied() {
    let gate = Arc::new(Semaphore::new(0));
    let inner = ScriptedHook::new("watcher")
        .observe_only()
        .on(EventKind::BeforeToolCall, Directive::SkipTool(None))
        .log("saw it");
    let watcher_seen = inner.seen();
    let watcher = Probe { gate: Some(gate.clone()), ..probe(inner) };
    let guard = ScriptedHook::new("guard");
    let guard_seen = guard.seen();
    let mut hooks = HookChain::new(vec![Box::new(watcher), Box::new(guard)]);
    let event = before_tool_call("{}");
    let (decision, trace) = dispatch(&mut hooks, &event).await;

    assert_eq!(decision, Decision::default());
    assert!(watcher_seen.lock().unwrap().is_empty(), "its call still waits at the gate");
    assert_eq!(seen(&guard_seen), vec![event.clone()], "the chain goes on");
    assert!(trace.directives.is_empty() && trace.logs.is_empty());
    assert_eq!(hooks.stats()[0].calls, 0, "a detached call counts once collected");

    gate.add_permits(1);
    let trace = drain(&mut hooks).await;
    assert_eq!(seen(&watcher_seen), vec![event.clone()]);
    assert_eq!(
        trace.directives,
        vec![record("watcher", &event, Directive::SkipTool(None), Some("`skip-tool` from an observe-only plugin"))]
    );
    assert_eq!(trace.logs.iter().map(|l| l.message.as_str()).collect::<Vec<_>>(), vec!["saw it"]);
    assert_eq!(hooks.stats()[0].calls, 1);
}

/// Rule: a detached hook sees its events one at a time and in order; each
/// call is collected at the hook's next call, and the last by `drain`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observe_only_hook_sees_its_events_in_order() {
    let mut watcher = ScriptedHook::new("watcher").observe_only();
    for n in ["1", "2", "3"] {
        watcher = watcher.on(EventKind::IterationStart, Directive::InjectMessage(n.into()));
    }
    let watcher_seen = watcher.seen();
    let mut hooks = chain(vec![watcher]);
    let mut collected = Vec::new();
    for i in 1..=3 {
        let (decision, trace) = dispatch(&mut hooks, &iteration_start(i)).await;
        assert!(decision.injections.is_empty(), "never applied");
        collected.push(trace.directives);
    }
    collected.push(drain(&mut hooks).await.directives);

    assert_eq!(seen(&watcher_seen), (1..=3).map(iteration_start).collect::<Vec<_>>());
    let note = Some("`inject-message` from an observe-only plugin");
    let expect = |i: u32| vec![record("watcher", &iteration_start(i), Directive::InjectMessage(i.to_string()), note)];
    assert_eq!(collected, vec![vec![], expect(1), expect(2), expect(3)]);
}

/// Rule: observation events (`request-start`, `run-end`) detach the calls of
/// every hook; their directives are recorded as ignored and never applied,
/// not even a terminal one (the next hook is still called). An injection
/// there is valid (seed 000: anywhere) and handed over when the call is
/// collected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observation_events_detach_every_hook() {
    let gate = Arc::new(Semaphore::new(0));
    let inner = ScriptedHook::new("a")
        .on(EventKind::RequestStart, Directive::Abort(Some("stop".into())))
        .on(EventKind::RunEnd, Directive::Pause);
    let a_seen = inner.seen();
    let a = Probe { gate: Some(gate.clone()), ..probe(inner) };
    let b = ScriptedHook::new("b").on(EventKind::RequestStart, Directive::InjectMessage("hi".into()));
    let b_seen = b.seen();
    let mut hooks = HookChain::new(vec![Box::new(a), Box::new(b)]);

    let (decision, trace) = dispatch(&mut hooks, &request_start()).await;
    assert_eq!(decision, Decision::default());
    assert!(a_seen.lock().unwrap().is_empty(), "dispatch did not wait for a's call");
    assert!(trace.directives.is_empty());

    gate.add_permits(2);
    let (decision, trace) = dispatch(&mut hooks, &run_end()).await;
    assert_eq!(decision, Decision::default());
    let (abort, inject) = (Directive::Abort(Some("stop".into())), Directive::InjectMessage("hi".into()));
    let a_note = Some("`abort` is not valid at `request-start`");
    let expected = vec![record("a", &request_start(), abort, a_note), record("b", &request_start(), inject, None)];
    assert_eq!(trace.directives, expected);
    assert_eq!(trace.injections, vec!["hi".to_string()], "collected from b's detached call");
    let trace = drain(&mut hooks).await;
    let note = Some("`pause` is not valid at `run-end`");
    assert_eq!(trace.directives, vec![record("a", &run_end(), Directive::Pause, note)]);
    assert_eq!(seen(&a_seen), vec![request_start(), run_end()]);
    assert_eq!(seen(&b_seen), vec![request_start(), run_end()], "a's abort did not end the chain");
}

/// Rule: a directive outside its event's column is ignored with a note naming
/// it and the event: it changes nothing and does not end the chain.
#[tokio::test]
async fn directives_outside_their_column_are_ignored() {
    let a = ScriptedHook::new("a").on(EventKind::ModelResponse, Directive::SkipTool(None));
    let b = ScriptedHook::new("b").on(EventKind::ModelResponse, Directive::ReplaceArguments("{}".into()));
    let c = ScriptedHook::new("c")
        .on(EventKind::ModelResponse, Directive::InjectMessage("ok".into()))
        .on(EventKind::FinalAnswer, Directive::InjectMessage("late".into()));
    let (b_seen, c_seen) = (b.seen(), c.seen());
    let mut hooks = chain(vec![a, b, c]);
    let (decision, trace) = dispatch(&mut hooks, &model_response()).await;

    assert_eq!(decision, Decision { injections: vec!["ok".into()], ..Decision::default() });
    assert_eq!(seen(&b_seen), vec![model_response()]);
    assert_eq!(seen(&c_seen), vec![model_response()], "the ignored directives changed nothing");
    let (mr, replace) = (model_response(), Directive::ReplaceArguments("{}".into()));
    let expected = vec![
        record("a", &mr, Directive::SkipTool(None), Some("`skip-tool` is not valid at `model-response`")),
        record("b", &mr, replace, Some("`replace-arguments` is not valid at `model-response`")),
        record("c", &mr, Directive::InjectMessage("ok".into()), None),
    ];
    assert_eq!(trace.directives, expected);

    // Seed 000: `inject_message` is valid anywhere, final-answer included.
    let (decision, trace) = dispatch(&mut hooks, &final_answer()).await;
    assert_eq!(decision.injections, vec!["late".to_string()]);
    assert_eq!(trace.directives[0].note, None);
}

/// Rule: subscriptions: a hook is never called for an event it does not
/// subscribe to (its scripted answers there never apply), but `run-start`
/// still tells every hook the session.
#[tokio::test]
async fn a_hook_is_called_only_for_its_subscriptions() {
    let inner = ScriptedHook::new("guard")
        .subscribe(&[EventKind::BeforeToolCall])
        .on(EventKind::ModelResponse, Directive::Reject("never".into()));
    let guard_seen = inner.seen();
    let guard = probe(inner);
    let sessions = guard.sessions.clone();
    let all = ScriptedHook::new("all");
    let all_seen = all.seen();
    let calls = Arc::new(Calls::default());
    let mut hooks = HookChain::new(vec![Box::new(guard), Box::new(all)]).with_call_sink(calls.clone());

    dispatch(&mut hooks, &run_start()).await;
    let (decision, _) = dispatch(&mut hooks, &model_response()).await;
    dispatch(&mut hooks, &before_tool_call("{}")).await;

    assert_eq!(decision.terminal, None);
    assert_eq!(*sessions.lock().unwrap(), vec!["sess-1".to_string()]);
    assert_eq!(seen(&guard_seen), vec![before_tool_call("{}")]);
    assert_eq!(seen(&all_seen), vec![run_start(), model_response(), before_tool_call("{}")]);
    assert_eq!((hooks.stats()[0].calls, hooks.stats()[1].calls), (1, 3));
    let guard_calls: Vec<_> =
        calls.0.lock().unwrap().iter().filter(|c| c.plugin == "guard").map(|c| c.event.clone()).collect();
    assert_eq!(guard_calls, vec!["before-tool-call".to_string()]);
}

/// Rule: the call sink receives every call's record, `continue` and failures
/// included, in the order the chain collected them (detached calls when
/// collected).
#[tokio::test]
async fn the_call_sink_receives_every_call_in_order() {
    let a = ScriptedHook::new("a").fail_on(EventKind::ToolCallResult, FailureKind::OutOfFuel);
    let b = ScriptedHook::new("b").on(EventKind::IterationStart, Directive::InjectMessage("x".into()));
    let calls = Arc::new(Calls::default());
    let mut hooks = chain(vec![a, b]).with_call_sink(calls.clone());
    dispatch(&mut hooks, &iteration_start(1)).await;
    dispatch(&mut hooks, &tool_result()).await;
    dispatch(&mut hooks, &run_end()).await;
    drain(&mut hooks).await;

    let call = |plugin: &str, event: &str, iteration, directive, failure| CallRecord {
        plugin: plugin.into(),
        event: event.into(),
        iteration,
        directive,
        failure,
    };
    assert_eq!(
        *calls.0.lock().unwrap(),
        vec![
            call("a", "iteration-start", Some(1), Some(Directive::Continue), None),
            call("b", "iteration-start", Some(1), Some(Directive::InjectMessage("x".into())), None),
            call("a", "tool-call-result", Some(1), None, Some(FailureKind::OutOfFuel)),
            call("b", "tool-call-result", Some(1), Some(Directive::Continue), None),
            call("a", "run-end", None, Some(Directive::Continue), None),
            call("b", "run-end", None, Some(Directive::Continue), None),
        ]
    );
}

/// Rule: stats count calls, failures and time per plugin, in chain order
/// (a fail-closed decline counts as a failure; an unsubscribed hook has none).
#[tokio::test]
async fn stats_count_calls_and_failures_per_plugin() {
    let a = ScriptedHook::new("a")
        .fail_on(EventKind::IterationStart, FailureKind::Trap)
        .fail_on(EventKind::IterationStart, FailureKind::Memory);
    let b = ScriptedHook::new("b").fail_closed().fail_on(EventKind::BeforeToolCall, FailureKind::Instantiate);
    let c = ScriptedHook::new("c").subscribe(&[EventKind::FinalAnswer]);
    let mut hooks = chain(vec![a, b, c]);
    assert_eq!((hooks.len(), hooks.is_empty(), HookChain::default().is_empty()), (3, false, true));
    for event in [iteration_start(1), iteration_start(2), iteration_start(3), before_tool_call("{}")] {
        dispatch(&mut hooks, &event).await;
    }

    let stats: Vec<_> = hooks.stats().iter().map(|s| (s.plugin.as_str(), s.calls, s.failures, s.time_us)).collect();
    assert_eq!(stats, vec![("a", 4, 2, 4), ("b", 4, 1, 4), ("c", 0, 0, 0)]);
    assert!(hooks.stats().iter().all(|s| s.fuel_used == 0), "native hooks use no fuel");
}

/// Rule: a call's logs and suspension reach the trace.
#[tokio::test]
async fn logs_and_suspensions_reach_the_trace() {
    let hook = Probe { suspend: true, ..probe(ScriptedHook::new("a").log("one").log("two")) };
    let mut hooks = HookChain::new(vec![Box::new(hook)]);
    let (_, trace) = dispatch(&mut hooks, &iteration_start(1)).await;

    let logs: Vec<_> = trace.logs.iter().map(|l| (l.plugin.as_str(), l.level.as_str(), l.message.as_str())).collect();
    assert_eq!(logs, vec![("a", "info", "one"), ("a", "info", "two")]);
    assert_eq!(trace.suspensions.len(), 1);
    assert_eq!(
        (trace.suspensions[0].event.as_str(), trace.suspensions[0].reason),
        ("iteration-start", SuspendReason::Budget)
    );
}

/// Rule: a detached call whose task panics is recorded as a `trap` failure
/// and its hook is dropped for the rest of the run (never called again).
#[tokio::test]
async fn a_detached_hook_that_panics_is_dropped() {
    let inner = ScriptedHook::new("crasher").observe_only();
    let crasher_seen = inner.seen();
    let crasher = Probe { panic: true, ..probe(inner) };
    let mut hooks = HookChain::new(vec![Box::new(crasher)]);
    dispatch(&mut hooks, &iteration_start(1)).await;
    let trace = drain(&mut hooks).await;

    assert_eq!(trace.failures.len(), 1);
    let f = &trace.failures[0];
    assert_eq!((f.plugin.as_str(), f.kind), ("crasher", FailureKind::Trap));
    assert_eq!(f.event, "iteration-start", "the failure names the event it was called for");
    assert!(f.message.contains("dropped for the rest of the run"), "{}", f.message);

    let (_, trace) = dispatch(&mut hooks, &iteration_start(2)).await;
    let later = drain(&mut hooks).await;
    assert!(trace.failures.is_empty() && later.failures.is_empty(), "the hook is not called again");
    assert!(seen(&crasher_seen).is_empty());
    assert_eq!(hooks.stats()[0].calls, 0);
}

#[path = "chain_confirm_tests.rs"]
mod confirm;

#[path = "chain_injection_tests.rs"]
mod injection;
