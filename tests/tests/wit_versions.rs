//! WIT `hookbox:hooks@0.2.0` (issue 14): every event comes with its context
//! (run, session, turn, iteration, `max_iterations`, retries so far; seed
//! 003: "every event carries the run id and a turn id"), WASM plugins can
//! ask for an approval, skip a later model call and post to another session,
//! and see the new payload fields, while a plugin built against the frozen
//! 0.1.0 loads beside them and behaves exactly as before.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::path::Path;
use std::sync::Arc;

use hookbox::contract::{Event, EventContext, EventKind};
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::testing::ScriptedHook;
use hookbox::sandbox::{HookChain, HookHandler, HookRuntime, PluginOptions, WitVersion};
use hookbox::{
    Agent, AgentConfig, AnsweredBy, ApprovalAnswer, Delivery, Directive, MessageBus, RoutingPolicy, Session,
    SessionOptions, StopReason, Workspace, workspace_tools,
};
use hookbox_tests::{DEMO_PROMPT, DENY_TOOLS, DENY_TOOLS_V0_1_0, SCRIPTED, config, demo_session, demo_workspace};
use serde_json::json;

fn agent(ws: &Path) -> (Arc<Agent>, Arc<ReplayProvider>) {
    let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws).expect("workspace")));
    (Arc::new(Agent::new(provider.clone(), tools, AgentConfig::default())), provider)
}

/// The `scripted` plugin (built against 0.2.0) with these config pairs.
fn scripted(runtime: &HookRuntime, pairs: &[(&str, serde_json::Value)]) -> Box<dyn HookHandler> {
    let loaded = runtime.load("scripted", Path::new(SCRIPTED), config(pairs), PluginOptions::default()).expect("load");
    assert_eq!(loaded.plugin.wit_version(), WitVersion::V0_2_0);
    Box::new(loaded.plugin.hook())
}

/// Seed 003: "every event carries the run id and a turn id". A session's two
/// turns: each event's context names the turn's run and session, the turn's
/// number, the iteration the event belongs to and the agent's limit.
#[tokio::test]
async fn every_event_carries_the_run_the_turn_and_the_iteration() {
    let ws = demo_workspace();
    let (agent, _) = agent(ws.path());
    let hook = ScriptedHook::new("watch");
    let (seen, contexts) = (hook.seen(), hook.contexts());
    let chain = HookChain::new(vec![Box::new(hook) as Box<dyn HookHandler>]);
    let mut session = Session::with_id(agent, chain, "s-1", SessionOptions::default()).expect("session");
    let first = session.run(DEMO_PROMPT).await.expect("turn 1");
    let second = session.run("and now?").await;
    let seen = seen.lock().expect("seen").clone();
    let contexts = contexts.lock().expect("contexts").clone();
    assert_eq!(seen.len(), contexts.len());
    let run_ids: Vec<String> = contexts.iter().map(|c| c.run_id.clone()).collect();
    assert!(run_ids.iter().take(first[0].events.len()).all(|id| *id == first[0].run_id), "turn 1's run id");
    for (event, cx) in seen.iter().zip(&contexts) {
        assert_eq!(cx.session_id, "s-1");
        assert_eq!(cx.max_iterations, AgentConfig::default().max_iterations);
        if let Some(iteration) = event.iteration() {
            assert_eq!(cx.iteration, iteration, "{event:?}");
        }
        if let Event::RunStart { run_id, .. } = event {
            assert_eq!(&cx.run_id, run_id);
            assert_eq!(cx.iteration, 0, "before the first iteration");
        }
    }
    let turns: Vec<u32> = contexts.iter().map(|c| c.turn).collect();
    assert_eq!(turns.first(), Some(&1));
    // The demo session has no response for a second turn: it fails, but its events still say turn 2.
    assert!(second.is_err());
    assert_eq!(turns.last(), Some(&2), "the second turn's events");
    assert!(turns.windows(2).all(|w| w[0] <= w[1]));
}

/// `retries` counts the `retry`s hooks asked for, so a hook at
/// `final-answer` knows when its answer is the last the run can get.
#[tokio::test]
async fn the_context_counts_retries_toward_max_iterations() {
    let dir = tempfile::tempdir().expect("tempdir");
    let session = hookbox_tests::session_file(dir.path(), "texts.json", &[Some("a"), Some("b"), Some("c")]);
    let provider = Arc::new(ReplayProvider::from_file(session).expect("session"));
    let agent = Agent::new(provider, Vec::new(), AgentConfig { max_iterations: 3, ..AgentConfig::default() });
    let retry = || Directive::Retry("again".into());
    let hook = ScriptedHook::new("retry").on(EventKind::FinalAnswer, retry()).on(EventKind::FinalAnswer, retry());
    let (seen, contexts) = (hook.seen(), hook.contexts());
    let r = agent.run("hi", &mut HookChain::new(vec![Box::new(hook) as Box<dyn HookHandler>])).await.expect("run");
    assert_eq!(r.final_answer.as_deref(), Some("c"));
    let seen = seen.lock().expect("seen").clone();
    let finals: Vec<EventContext> = seen
        .iter()
        .zip(contexts.lock().expect("contexts").iter())
        .filter(|(e, _)| matches!(e, Event::FinalAnswer { .. }))
        .map(|(_, c)| c.clone())
        .collect();
    let retries: Vec<u32> = finals.iter().map(|c| c.retries).collect();
    assert_eq!(retries, [0, 1, 2]);
    let last: Vec<bool> = finals.iter().map(EventContext::last_chance).collect();
    assert_eq!(last, [false, false, true], "1 + 2 retries = max_iterations 3: the third answer is the last");
}

/// Seed 003: "skipping a later model call ends the turn without calling the
/// model" — from a WASM plugin, at the second iteration (two tool roundtrips
/// recorded; the tool is unknown here, which only makes its result an error).
#[tokio::test]
async fn a_wasm_plugin_skips_a_later_model_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let session = hookbox_tests::session_file(dir.path(), "tools.json", &[None, None, Some("done")]);
    let provider = Arc::new(ReplayProvider::from_file(session).expect("session"));
    let agent = Agent::new(provider.clone(), Vec::new(), AgentConfig::default());
    let runtime = HookRuntime::new().expect("runtime");
    let hook = scripted(
        &runtime,
        &[
            ("iteration-start", json!("skip-model-call:enough at {iteration} of turn {turn}")),
            ("only_iteration", json!("2")),
        ],
    );
    let r = agent.run(DEMO_PROMPT, &mut HookChain::new(vec![hook])).await.expect("run");
    assert_eq!(r.stop_reason, StopReason::Skipped);
    assert_eq!(r.final_answer.as_deref(), Some("enough at 2 of turn 1"));
    assert_eq!(provider.requests().len(), 2, "the third request was never sent");
    assert!(r.hook_failures.is_empty(), "{:?}", r.hook_failures);
}

/// Seed 003's approvals, from a WASM plugin: `ask-approval` at
/// `before-tool-call` parks the call; in a plain run nobody can answer, so
/// the call is denied with the hook's reason on record.
#[tokio::test]
async fn a_wasm_plugin_asks_for_approval() {
    let ws = demo_workspace();
    let (agent, _) = agent(ws.path());
    let runtime = HookRuntime::new().expect("runtime");
    let hook = scripted(&runtime, &[("before-tool-call", json!("ask-approval:may {tool} run?"))]);
    let r = agent.run(DEMO_PROMPT, &mut HookChain::new(vec![hook])).await.expect("run");
    assert_eq!(r.approvals.len(), 2, "{:?}", r.approvals);
    for a in &r.approvals {
        assert_eq!(a.reasons[0].reason, format!("may {} run?", a.tool));
        assert!(matches!(a.answer, ApprovalAnswer::Deny(_)), "{:?}", a.answer);
        assert_eq!(a.answered_by, AnsweredBy::Nobody);
    }
    assert!(ws.path().join(".env").exists(), "the denied delete did not run");
}

/// The new payload fields reach a 0.2.0 plugin: `tool-call-result` carries
/// the arguments the call ran with, and the context the run id.
#[tokio::test]
async fn a_wasm_plugin_sees_the_arguments_and_the_run_at_tool_call_result() {
    let ws = demo_workspace();
    let (agent, _) = agent(ws.path());
    let runtime = HookRuntime::new().expect("runtime");
    let hook = scripted(&runtime, &[("tool-call-result", json!("inject-message:{tool} {arguments} in {run}"))]);
    let r = agent.run(DEMO_PROMPT, &mut HookChain::new(vec![hook])).await.expect("run");
    let injected = r.injected_messages.join("\n");
    assert!(injected.contains(r#"delete_file {"path": ".env"} in "#), "{injected}");
    assert!(injected.contains(&r.run_id), "{injected}");
}

/// Seed 000's sub-agent routing, from a WASM plugin: `post-message` goes
/// through the bus under the routing policy and the sender's record says so.
#[tokio::test]
async fn a_wasm_plugin_posts_to_another_session() {
    let ws = demo_workspace();
    let (agent, _) = agent(ws.path());
    let runtime = HookRuntime::new().expect("runtime");
    let policy: RoutingPolicy =
        serde_json::from_value(json!({"allow": [{"from": "main", "to": "sub"}]})).expect("policy");
    let bus = MessageBus::new(policy);
    // `sub` is on the bus but not running a turn: a message to it waits in its inbox.
    let (sub_agent, _) = self::agent(ws.path());
    let mut sub = Session::with_id(sub_agent, HookChain::default(), "sub", SessionOptions::default()).expect("sub");
    sub.join(bus.clone());
    let hook = scripted(
        &runtime,
        &[
            ("run-end", json!("post-message:sub:done with turn {turn}")),
            ("run-start", json!("post-message:other:no route")),
        ],
    );
    let mut main =
        Session::with_id(agent, HookChain::new(vec![hook]), "main", SessionOptions::default()).expect("main");
    main.join(bus.clone());
    let r = main.run(DEMO_PROMPT).await.expect("run").remove(0);
    assert_eq!(r.posts.len(), 2, "{:?}", r.posts);
    assert!(r.posts[0].refused.is_some(), "no route from main to `other`: {:?}", r.posts[0]);
    let sent = &r.posts[1];
    assert_eq!(sent.to, "sub");
    let id = sent.message_id.expect("routed");
    assert_eq!(bus.delivery(id), Some(Delivery::Queued));
}

/// Issue 14: a plugin built against the frozen 0.1.0 loads beside 0.2.0
/// ones, is called through the 0.1.0 bindings, and decides exactly as the
/// same source built against 0.2.0.
#[tokio::test]
async fn a_0_1_0_plugin_runs_beside_0_2_0_ones_and_decides_the_same() {
    let runtime = HookRuntime::new().expect("runtime");
    let cfg = config(&[("paths", json!([".env"]))]);
    let mut directives = Vec::new();
    for (path, version) in [(DENY_TOOLS, WitVersion::V0_2_0), (DENY_TOOLS_V0_1_0, WitVersion::V0_1_0)] {
        let loaded = runtime.load("deny-tools", Path::new(path), cfg.clone(), PluginOptions::default()).expect("load");
        assert_eq!(loaded.plugin.wit_version(), version, "{path}");
        let ws = demo_workspace();
        let (agent, _) = agent(ws.path());
        let audit = scripted(&runtime, &[("final-answer", json!("continue"))]);
        let mut chain = HookChain::new(vec![Box::new(loaded.plugin.hook()) as Box<dyn HookHandler>, audit]);
        let r = agent.run(DEMO_PROMPT, &mut chain).await.expect("run");
        assert!(r.hook_failures.is_empty(), "{:?}", r.hook_failures);
        assert!(ws.path().join(".env").exists(), "{path}: the delete was declined");
        directives.push(r.directives.iter().map(|d| (d.event.clone(), d.directive.clone())).collect::<Vec<_>>());
    }
    assert_eq!(directives[0], directives[1]);
    assert_eq!(directives[0].len(), 1, "{:?}", directives[0]);
}
