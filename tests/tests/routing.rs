//! Sub-agent routing with the host as the message bus (issue 14 item 3;
//! seed 000, "Sub-agent routing — the host is the message bus"): real runs
//! of sessions on the replay model, hooks posting with `post-message`, the
//! routing policy deciding who may talk to whom (default nobody), and each
//! message ending by the injection contract (delivered, undelivered,
//! attached to the error). The hooks are native (`ScriptedHook`); WASM
//! plugins post from WIT 0.2.0 on.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hookbox::contract::EventKind;
use hookbox::providers::ToolSpec;
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::testing::ScriptedHook;
use hookbox::sandbox::{HookChain, HookHandler};
use hookbox::{
    Agent, AgentConfig, Delivery, Directive, MessageBus, RouteError, RoutingPolicy, Session, SessionOptions, Tool,
    ToolOutput,
};
use hookbox_tests::{Held, next_request, session_file, wire_users};
use serde_json::json;

/// The tool `slow` of [`session_file`]'s tool calls.
struct Slow;

#[async_trait]
impl Tool for Slow {
    fn spec(&self) -> ToolSpec {
        ToolSpec { name: "slow".into(), description: "does nothing".into(), parameters: json!({"type": "object"}) }
    }
    async fn call(&self, _arguments: &serde_json::Value) -> ToolOutput {
        ToolOutput::ok("done")
    }
}

fn agent(provider: Arc<dyn hookbox::providers::ModelProvider>) -> Arc<Agent> {
    Arc::new(Agent::new(provider, vec![Arc::new(Slow) as Arc<dyn Tool>], AgentConfig::default()))
}

fn replay(dir: &std::path::Path, name: &str, responses: &[Option<&str>]) -> Arc<ReplayProvider> {
    Arc::new(ReplayProvider::from_file(session_file(dir, name, responses)).expect("session"))
}

fn hooks(hook: ScriptedHook) -> HookChain {
    HookChain::new(vec![Box::new(hook) as Box<dyn HookHandler>])
}

fn post(to: &str, text: &str) -> Directive {
    Directive::PostMessage { to: to.into(), text: text.into() }
}

fn policy(routes: &[(&str, &str)]) -> RoutingPolicy {
    serde_json::from_value(
        json!({"allow": routes.iter().map(|(f, t)| json!({"from": f, "to": t})).collect::<Vec<_>>()}),
    )
    .expect("policy")
}

fn session(agent: Arc<Agent>, chain: HookChain, id: &str, bus: &Arc<MessageBus>) -> Session {
    let mut s = Session::with_id(agent, chain, id, SessionOptions::default()).expect("session");
    s.join(bus.clone());
    s
}

/// Seed 000: "Sub → main — the sub-agent's hook (or its final result) posts
/// to a queue the host routes into the main agent's inbox." The report is
/// posted at the sub-agent's `run-end`, after main's run ended: it waits in
/// main's inbox and is delivered at the first boundary of main's next turn.
#[tokio::test]
async fn a_sub_agent_reports_to_main_at_run_end_and_main_gets_it_next_turn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bus = MessageBus::new(policy(&[("*", "main")]));
    let main_provider = replay(dir.path(), "main.json", &[Some("first"), Some("second")]);
    let mut main = session(agent(main_provider.clone()), HookChain::default(), "main", &bus);
    main.run("start").await.expect("main's first turn");

    let reporter = ScriptedHook::new("router").on(EventKind::RunEnd, post("main", "Sub-agent sub-1 reports: 3 files"));
    let mut sub = session(agent(replay(dir.path(), "sub.json", &[Some("ok")])), hooks(reporter), "sub-1", &bus);
    let turns = sub.run("count the files").await.expect("sub's turn");
    let posted = &turns[0].posts;
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!((posted[0].to.as_str(), posted[0].delivery), ("main", Some(Delivery::Queued)), "main is idle");
    let id = posted[0].message_id.expect("an id");
    assert_eq!(bus.queued("main"), 1);

    let turns = main.run("anything new?").await.expect("main's second turn");
    assert_eq!(turns[0].injected_messages, vec!["Sub-agent sub-1 reports: 3 files".to_string()]);
    assert_eq!(bus.delivery(id), Some(Delivery::Delivered));
    assert_eq!(
        wire_users(&main_provider.requests()[1]),
        vec!["start", "anything new?", "Sub-agent sub-1 reports: 3 files"]
    );
    assert_eq!(bus.queued("main"), 0);
}

/// Seed 000: "Main → sub — ... mid-turn, write into the sub-agent's inbox
/// and let its hook inject." Main posts while the sub-agent's first request
/// is in flight: the message goes into the sub's turn and is delivered at
/// its next boundary (before its follow-up request). A message that reaches
/// a turn after its last boundary is undelivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn main_posts_into_a_sub_agents_turn_in_flight() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bus = MessageBus::new(policy(&[("main", "*")]));
    let (held, mut entered) =
        Held::new(ReplayProvider::from_file(session_file(dir.path(), "sub.json", &[None, Some("done")])).expect("sub"));
    let mut sub = session(agent(held.clone()), HookChain::default(), "sub-1", &bus);
    let sub_run = tokio::spawn(async move {
        let turns = sub.run("work").await.expect("sub's turn");
        (turns, sub)
    });
    assert_eq!(next_request(&mut entered).await, 1);

    let poster = ScriptedHook::new("router").on(EventKind::ModelResponse, post("sub-1", "Also check the logs."));
    let mut main = session(agent(replay(dir.path(), "main.json", &[Some("posted")])), hooks(poster), "main", &bus);
    let turns = main.run("delegate").await.expect("main's turn");
    let id = turns[0].posts[0].message_id.expect("an id");
    assert_eq!(turns[0].posts[0].delivery, Some(Delivery::Sent), "straight into the sub's turn");

    held.release(); // the tool call; the follow-up request carries the message
    assert_eq!(next_request(&mut entered).await, 2);
    held.release();
    let (turns, _) = tokio::time::timeout(Duration::from_secs(20), sub_run).await.expect("ends").expect("task");
    assert_eq!(turns[0].injected_messages, vec!["Also check the logs.".to_string()]);
    assert_eq!(bus.delivery(id), Some(Delivery::Delivered));

    // Undelivered: posted while the sub's only (final) request is in flight.
    let (held, mut entered) =
        Held::new(ReplayProvider::from_file(session_file(dir.path(), "sub2.json", &[Some("bye")])).expect("sub"));
    let mut sub = session(agent(held.clone()), HookChain::default(), "sub-1", &bus);
    let sub_run = tokio::spawn(async move { sub.run("last").await.expect("sub's turn") });
    next_request(&mut entered).await;
    let id = bus.post("main", "sub-1", "too late").expect("posted");
    assert_eq!(bus.delivery(id), Some(Delivery::Sent));
    held.release();
    let turns = tokio::time::timeout(Duration::from_secs(20), sub_run).await.expect("ends").expect("task");
    assert_eq!(turns[0].undelivered_injections, vec!["too late".to_string()]);
    assert_eq!(bus.delivery(id), Some(Delivery::Undelivered));
}

/// Seed 000: "Sub ↔ sub — identical; any session's outbound event can be
/// routed into any other session's inbox", and "routing and trust policy
/// stay with the host": a route the policy does not list is refused, as is
/// an unknown session, a session on no bus, and everything by default.
#[tokio::test]
async fn sub_agents_talk_to_each_other_only_where_the_policy_allows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bus = MessageBus::new(policy(&[("sub-1", "*")]));
    let sub2_provider = replay(dir.path(), "sub2.json", &[Some("thanks")]);
    let mut sub2 = session(
        agent(sub2_provider),
        hooks(ScriptedHook::new("router").on(EventKind::FinalAnswer, post("sub-1", "and back?"))),
        "sub-2",
        &bus,
    );
    let to_sub2 = ScriptedHook::new("router")
        .on(EventKind::RunStart, post("sub-2", "here is the draft"))
        .on(EventKind::FinalAnswer, post("nobody", "lost?"));
    let mut sub1 = session(agent(replay(dir.path(), "sub1.json", &[Some("sent")])), hooks(to_sub2), "sub-1", &bus);
    let turns = sub1.run("draft").await.expect("sub-1");
    let posts = &turns[0].posts;
    assert_eq!(posts[0].delivery, Some(Delivery::Queued), "sub-1 -> sub-2 is allowed: {posts:?}");
    assert_eq!(posts[1].refused.as_deref(), Some("no session `nobody` is on the message bus"), "{posts:?}");
    let turns = sub2.run("review").await.expect("sub-2");
    assert_eq!(turns[0].injected_messages, vec!["here is the draft".to_string()]);
    let back = &turns[0].posts[0];
    assert!(back.message_id.is_none());
    assert_eq!(
        back.refused.as_deref(),
        Some(RouteError::NotAllowed { from: "sub-2".into(), to: "sub-1".into() }.to_string().as_str())
    );

    // The default policy allows nobody; a run on no bus cannot post.
    let closed = MessageBus::new(RoutingPolicy::default());
    closed.register("a");
    closed.register("b");
    assert!(matches!(closed.post("a", "b", "hi"), Err(RouteError::NotAllowed { .. })));
    assert!(matches!(bus.post("sub-1", "sub-2", " "), Err(RouteError::Invalid(_))));
    let lone = Agent::new(replay(dir.path(), "lone.json", &[Some("x")]), Vec::new(), AgentConfig::default());
    let r = lone.run("go", &mut hooks(ScriptedHook::new("r").on(EventKind::RunStart, post("main", "hi")))).await;
    let r = r.expect("run");
    assert_eq!(r.posts[0].refused.as_deref(), Some(RouteError::NoBus.to_string().as_str()));
}

/// A message in a turn that raises is attached to its error; one queued
/// while the session was idle is delivered at the next turn's first boundary
/// even if that turn raises later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_in_a_turn_that_raises_is_attached_to_the_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bus = MessageBus::new(policy(&[("main", "sub-1")]));
    bus.register("sub-1");
    let early = bus.post("main", "sub-1", "queued while idle").expect("posted");
    assert_eq!(bus.delivery(early), Some(Delivery::Queued));
    let (held, mut entered) =
        Held::new(ReplayProvider::from_file(session_file(dir.path(), "s.json", &[Some("x")])).expect("sub"));
    let abort = ScriptedHook::new("stop").on(EventKind::FinalAnswer, Directive::Abort(Some("no".into())));
    let mut sub = session(agent(held.clone()), hooks(abort), "sub-1", &bus);
    let run = tokio::spawn(async move { sub.run("go").await });
    next_request(&mut entered).await;
    assert_eq!(bus.delivery(early), Some(Delivery::Sent), "in the turn: settled when it ends");
    let late = bus.post("main", "sub-1", "posted mid-request").expect("posted");
    held.release();
    let err =
        tokio::time::timeout(Duration::from_secs(20), run).await.expect("ends").expect("task").expect_err("aborted");
    let report = &err.run_error().expect("a turn raised").report;
    assert_eq!(report.undelivered_injections, vec!["posted mid-request".to_string()]);
    assert_eq!(bus.delivery(late), Some(Delivery::AttachedToError));
    assert_eq!(bus.delivery(early), Some(Delivery::Delivered), "it reached the model before the abort");
}

/// A post from a call that finished detached (an observation event such as
/// `request-start`, collected at a later event) is recorded with the event
/// it was made at, not the one that collected it.
#[tokio::test]
async fn a_detached_post_names_the_event_it_was_made_at() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bus = MessageBus::new(policy(&[("main", "sub")]));
    let provider = replay(dir.path(), "main.json", &[Some("done")]);
    let config = AgentConfig { emit_request_start: true, ..AgentConfig::default() };
    let agent = Arc::new(Agent::new(provider, vec![Arc::new(Slow) as Arc<dyn Tool>], config));
    let hook = ScriptedHook::new("poster").on(EventKind::RequestStart, post("sub", "asking the model"));
    let mut main = session(agent, hooks(hook), "main", &bus);
    let _sub = session(self::agent(replay(dir.path(), "sub.json", &[Some("x")])), HookChain::default(), "sub", &bus);
    let r = main.run("go").await.expect("run").remove(0);
    assert_eq!(r.posts.len(), 1, "{:?}", r.posts);
    assert_eq!(r.posts[0].event, "request-start");
    assert!(r.posts[0].refused.is_none(), "{:?}", r.posts[0]);
}

/// A post the bus refuses is not an honoured directive: its record says why.
#[tokio::test]
async fn a_refused_post_is_recorded_as_not_honoured() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bus = MessageBus::new(RoutingPolicy::default());
    let hook = ScriptedHook::new("poster").on(EventKind::RunStart, post("sub", "hello"));
    let mut main = session(agent(replay(dir.path(), "main.json", &[Some("done")])), hooks(hook), "main", &bus);
    let r = main.run("go").await.expect("run").remove(0);
    assert!(r.posts[0].refused.is_some(), "{:?}", r.posts);
    let d = r.directives.iter().find(|d| d.directive.action() == "post-message").expect("recorded");
    assert!(!d.honoured, "{d:?}");
    assert!(d.note.as_deref().is_some_and(|n| n.starts_with("refused: ")), "{d:?}");
}
