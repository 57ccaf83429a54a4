//! Sessions hold the conversation (issue 14 item 1; seed 000 "Sessions",
//! seed 003: sessions keep state): a session's completed turns are saved in
//! a conversation store and a session opened again under its id continues
//! them; a failed turn is never saved and never drops earlier turns;
//! `Session::stream` never raises and banks an aborted turn's spend; one
//! handle steers a `run` call's follow-up turns.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;
use std::time::Duration;

use hookbox::contract::Event;
use hookbox::providers::replay::ReplayProvider;
use hookbox::providers::{Message, ModelProvider, ModelRequest, ModelResponse, ProviderError};
use hookbox::sandbox::{HookChain, HookHandler, HookRuntime};
use hookbox::{Agent, AgentConfig, ConversationStore, ConversationStoreError, MemoryConversationStore};
use hookbox::{LateInjectionPolicy, RunErrorInfo, RunHandle, Session, SessionFailure, SessionOptions};
use hookbox::{SqliteStateStore, StreamEvent};
use hookbox_tests::{SCRIPTED, config, session_file};
use serde_json::json;

fn agent(provider: Arc<ReplayProvider>) -> Arc<Agent> {
    Arc::new(Agent::new(provider, Vec::new(), AgentConfig::default()))
}

fn replay(path: &std::path::Path) -> Arc<ReplayProvider> {
    Arc::new(ReplayProvider::from_file(path).expect("session"))
}

/// A chain of the scripted plugin answering `script` (event -> directive).
fn scripted(runtime: &HookRuntime, script: &[(&str, serde_json::Value)]) -> HookChain {
    let loaded = runtime.load("scripted", SCRIPTED.as_ref(), config(script), Default::default()).expect("scripted");
    HookChain::new(vec![Box::new(loaded.plugin.hook()) as Box<dyn HookHandler>])
}

fn user_texts(messages: &[Message]) -> Vec<&str> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

/// The user messages of the request the model got, in order.
fn request_users(request: &serde_json::Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Seed 000: "Conversation history persists only up to the last completed
/// turn that session persistence saved; mid-turn progress is lost." Two
/// sessions opened on one SQLite file under one id, as two processes would:
/// the second continues the first's conversation, and a turn that raised is
/// not saved.
#[tokio::test]
async fn a_session_opened_again_continues_the_stored_conversation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store: Arc<dyn ConversationStore> =
        Arc::new(SqliteStateStore::open(&dir.path().join("hookbox.db")).expect("db"));
    let file = session_file(dir.path(), "s.json", &[Some("first answer")]);
    let options = SessionOptions::default();

    let mut one = Session::open(agent(replay(&file)), HookChain::default(), "chat-7", store.clone(), options)
        .expect("open a new session under a chosen id");
    assert!(one.history().is_empty());
    let turns = one.run("hello").await.expect("turn 1");
    assert!(
        matches!(&turns[0].events[0], Event::RunStart { session_id, .. } if session_id == "chat-7"),
        "hooks see the chosen id"
    );
    drop(one);

    // "Another process": a new agent, a new session object, the same id and file.
    let provider = replay(&session_file(dir.path(), "t.json", &[Some("second answer")]));
    let mut two = Session::open(agent(provider.clone()), HookChain::default(), "chat-7", store.clone(), options)
        .expect("open again");
    assert_eq!(user_texts(two.history()), vec!["hello"], "turn 1 was loaded");
    let turns = two.run("and then?").await.expect("turn 2");
    assert_eq!(
        request_users(&provider.requests()[0]),
        vec!["hello", "and then?"],
        "the model got the earlier turn before the new prompt"
    );
    assert_eq!(user_texts(&turns[0].messages), vec!["hello", "and then?"]);

    // A turn that raises (a hook aborts it) is not saved: the stored
    // conversation still ends at turn 2.
    let runtime = HookRuntime::new().expect("runtime");
    let file = session_file(dir.path(), "u.json", &[Some("never kept")]);
    let hooks = scripted(&runtime, &[("final-answer", json!("abort:no"))]);
    let mut three = Session::open(agent(replay(&file)), hooks, "chat-7", store.clone(), options).expect("open");
    let err = three.run("third").await.expect_err("aborted");
    assert!(matches!(&err.failure, SessionFailure::Turn(e) if matches!(e.info, RunErrorInfo::Aborted { .. })));
    let stored = store.load("chat-7").expect("load");
    assert_eq!(user_texts(&stored.messages), vec!["hello", "and then?"], "mid-turn progress is lost");
    assert_eq!(stored.revision, 2, "one save per completed turn");
    assert!(three.usage().input_tokens > 0, "the failed turn's spend is still banked");

    // Invalid ids are refused before anything runs.
    let bad = Session::open(agent(replay(&file)), HookChain::default(), "a\u{1b}[2J", store.clone(), options);
    assert!(matches!(bad.err(), Some(ConversationStoreError::InvalidId(_))));
}

/// Two runs of one session at once (two processes) never overwrite each
/// other's turns unseen: the second save is a conflict, and that turn's
/// result is still returned, not lost.
#[tokio::test]
async fn concurrent_turns_of_one_session_conflict_instead_of_overwriting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store: Arc<dyn ConversationStore> = Arc::new(MemoryConversationStore::new());
    let file = session_file(dir.path(), "s.json", &[Some("answer")]);
    let options = SessionOptions::default();
    let mut a = Session::open(agent(replay(&file)), HookChain::default(), "s", store.clone(), options).expect("a");
    let mut b = Session::open(agent(replay(&file)), HookChain::default(), "s", store.clone(), options).expect("b");
    a.run("from a").await.expect("a's turn is saved");
    let err = b.run("from b").await.expect_err("b's save conflicts");
    assert!(matches!(err.failure, SessionFailure::Store(ConversationStoreError::Conflict { .. })), "{err}");
    assert_eq!(err.completed.len(), 1, "b's completed turn is returned with the error");
    assert_eq!(err.completed[0].final_answer.as_deref(), Some("answer"));
    assert!(err.to_string().contains("changed by another run"), "{err}");
    assert_eq!(user_texts(&store.load("s").expect("load").messages), vec!["from a"], "a's turn was not overwritten");
}

/// Seed 000: "A session can take that decision for you ... runs the extra
/// turn itself, bounded by max_follow_up_turns and refused after an error,
/// an abort or a repeated text." A follow-up turn that raises (here the
/// model has no answer left for it) keeps the earlier turn's result: in the
/// error, in the history and in the store.
#[tokio::test]
async fn a_failing_follow_up_turn_keeps_the_earlier_turns() {
    let runtime = HookRuntime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    // Turn 1 ends with "again" queued (no boundary follows a final answer);
    // under new_turn it is sent as turn 2, whose request finds no response.
    let hooks = scripted(&runtime, &[("model-response", json!("inject-message:again"))]);
    let file = session_file(dir.path(), "s.json", &[Some("first")]);
    let store: Arc<dyn ConversationStore> = Arc::new(MemoryConversationStore::new());
    let options = SessionOptions { late_injection_policy: LateInjectionPolicy::NewTurn, max_follow_up_turns: 3 };
    let mut session = Session::open(agent(replay(&file)), hooks, "s", store.clone(), options).expect("open");
    let err = session.run("hello").await.expect_err("the follow-up turn fails");
    assert!(
        matches!(&err.failure, SessionFailure::Turn(e) if matches!(e.info, RunErrorInfo::Provider { .. })),
        "{err}"
    );
    assert_eq!(err.completed.len(), 1, "turn 1's result is not dropped");
    assert_eq!(err.completed[0].final_answer.as_deref(), Some("first"));
    assert_eq!(err.completed[0].undelivered_injections, vec!["again".to_string()]);
    assert_eq!(user_texts(session.history()), vec!["hello"], "the history keeps turn 1 only");
    let stored = store.load("s").expect("load");
    assert_eq!((user_texts(&stored.messages), stored.revision), (vec!["hello"], 1));
    assert_eq!(session.turns(), 2);
    assert_eq!(session.usage().input_tokens, 10, "turn 1's request; turn 2 sent none that completed");
}

/// A provider that holds every request until the test releases it, and says
/// when one is waiting.
struct Held {
    inner: ReplayProvider,
    entered: tokio::sync::mpsc::UnboundedSender<usize>,
    release: tokio::sync::Semaphore,
    count: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl ModelProvider for Held {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let n = self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let _ = self.entered.send(n);
        self.release.acquire().await.expect("semaphore").forget();
        self.inner.complete(request).await
    }
}

async fn next_request(rx: &mut tokio::sync::mpsc::UnboundedReceiver<usize>) -> usize {
    tokio::time::timeout(Duration::from_secs(20), rx.recv()).await.expect("a request comes").expect("open")
}

/// One handle steers every turn of a `run` call: a message injected while
/// turn 1's only request is in flight is late, so it becomes turn 2 under
/// new_turn; the handle is still open during turn 2, and its abort stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_handle_steers_the_follow_up_turns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = session_file(dir.path(), "s.json", &[Some("first"), Some("never sent")]);
    let (tx, mut entered) = tokio::sync::mpsc::unbounded_channel();
    let provider = Arc::new(Held {
        inner: ReplayProvider::from_file(&file).expect("session"),
        entered: tx,
        release: tokio::sync::Semaphore::new(0),
        count: Default::default(),
    });
    let agent = Arc::new(Agent::new(provider.clone(), Vec::new(), AgentConfig::default()));
    let options = SessionOptions { late_injection_policy: LateInjectionPolicy::NewTurn, max_follow_up_turns: 3 };
    let mut session = Session::new(agent, HookChain::default(), options);
    let handle = RunHandle::new();
    let steer = handle.clone();
    let run = tokio::spawn(async move {
        let outcome = session.run_with_handle("hello", steer).await;
        (outcome, session)
    });
    assert_eq!(next_request(&mut entered).await, 1);
    handle.inject("more").expect("turn 1 is running");
    provider.release.add_permits(1);
    assert_eq!(next_request(&mut entered).await, 2, "the late message became turn 2");
    assert!(!handle.finished(), "the handle spans the follow-up turn");
    handle.abort("enough");
    let (outcome, session) = tokio::time::timeout(Duration::from_secs(20), run).await.expect("ends").expect("task");
    let err = outcome.expect_err("turn 2 was aborted");
    assert!(
        matches!(&err.failure, SessionFailure::Turn(e)
            if matches!(&e.info, RunErrorInfo::Aborted { reason: Some(r), .. } if r == "enough")),
        "{err}"
    );
    assert_eq!(err.completed.len(), 1);
    assert_eq!(err.completed[0].undelivered_injections, vec!["more".to_string()]);
    assert!(handle.finished(), "the handle finishes with the last turn");
    assert_eq!(user_texts(session.history()), vec!["hello"]);
    assert!(handle.inject("late").is_err(), "nothing can be injected once the call has ended");
}

/// Seed 000: "Agent.stream() and AgentSession.stream() never raise. An abort
/// surfaces as an error event ... followed by the terminal complete event
/// every stream ends with — so a session banks the aborted turn's spend."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_stream_never_raises_and_banks_an_aborted_turn() {
    let runtime = HookRuntime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = session_file(dir.path(), "s.json", &[Some("first"), Some("second")]);
    let provider = replay(&file);
    let session = Session::new(agent(provider.clone()), scripted(&runtime, &[]), SessionOptions::default());

    // Turn 1 completes: its stream ends with Complete.
    let mut stream = session.stream("hello".into(), RunHandle::new());
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        events.push(e);
    }
    assert!(matches!(events.first(), Some(StreamEvent::Hook(Event::RunStart { .. }))));
    assert!(matches!(events.last(), Some(StreamEvent::Complete { result, .. }) if result.error.is_none()));
    assert_eq!(events.iter().filter(|e| matches!(e, StreamEvent::Complete { .. })).count(), 1);
    let session = stream.into_session().await.expect("the session comes back");
    assert_eq!(user_texts(session.history()), vec!["hello"]);

    // Turn 2 is aborted by the handle once its request is answered: an
    // error event with the partial figures, then Complete; the spend is banked.
    let handle = RunHandle::new();
    handle.pause();
    let mut stream = session.stream("next".into(), handle.clone());
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        if matches!(e, StreamEvent::Hook(Event::RunStart { .. })) {
            handle.abort("not now");
        }
        events.push(e);
    }
    let n = events.len();
    assert!(
        matches!(&events[n - 2], StreamEvent::Error { aborted: true, reason: Some(r), .. } if r == "not now"),
        "{:?}",
        events[n - 2]
    );
    assert!(matches!(&events[n - 1], StreamEvent::Complete { result, .. } if result.error.is_some()));
    let session = stream.into_session().await.expect("the session comes back");
    assert_eq!(session.turns(), 2);
    assert_eq!(user_texts(session.history()), vec!["hello"], "the aborted turn is not in the history");
    assert_eq!(session.usage().input_tokens, 10, "turn 1's request (turn 2 sent none)");
}
