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
use hookbox::providers::Message;
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::{HookChain, HookHandler, HookRuntime};
use hookbox::{Agent, AgentConfig, ConversationStore, ConversationStoreError, MemoryConversationStore};
use hookbox::{LateInjectionPolicy, RunErrorInfo, RunHandle, Session, SessionFailure, SessionOptions};
use hookbox::{SqliteStateStore, StreamEvent};
use hookbox_tests::{Held, SCRIPTED, config, next_request, session_file, wire_users};
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
        wire_users(&provider.requests()[0]),
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

/// One handle steers every turn of a `run` call: a message injected while
/// turn 1's only request is in flight is late, so it becomes turn 2 under
/// new_turn; the handle is still open during turn 2, and its abort stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_handle_steers_the_follow_up_turns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = session_file(dir.path(), "s.json", &[Some("first"), Some("never sent")]);
    let (provider, mut entered) = Held::new(ReplayProvider::from_file(&file).expect("session"));
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
    provider.release();
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

/// `hookbox run --model replay:REPLAY --workspace WS ARGS... PROMPT`, in-process.
fn replay_run(replay: &std::path::Path, ws: &std::path::Path, args: &[&str], prompt: &str) -> hookbox_tests::CliOutput {
    let mut argv = vec![
        "run".to_string(),
        "--model".into(),
        format!("replay:{}", replay.display()),
        "--workspace".into(),
        ws.display().to_string(),
    ];
    argv.extend(args.iter().map(|s| s.to_string()));
    argv.push(prompt.into());
    hookbox_tests::cli(&argv)
}

/// `hookbox run --session ID` continues the conversation across processes
/// (issue 14 item 1): the second run's record starts with the first run's
/// turn, its journal holds that history, and `hookbox replay` of it matches.
#[test]
fn the_cli_continues_a_session_across_runs_and_replays_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("sessions.db").display().to_string();
    let ws = tempfile::tempdir().expect("workspace");
    let run = |replay: &std::path::Path, prompt: &str, extra: &[&str]| {
        let mut args = vec!["--session", "ticket-42", "--db", &db, "--json"];
        args.extend(extra);
        replay_run(replay, ws.path(), &args, prompt)
    };
    let first = run(&session_file(dir.path(), "1.json", &[Some("one")]), "first question", &[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(first.stderr.contains("run-start model=gpt-4o provider=replay session=ticket-42"), "{}", first.stderr);
    assert_eq!(wire_users(&first.json()), vec!["first question"]);
    let journal = dir.path().join("second.journal.json");
    let journal_arg = journal.display().to_string();
    let second =
        run(&session_file(dir.path(), "2.json", &[Some("two")]), "second question", &["--journal", &journal_arg]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    let record = second.json();
    assert_eq!(wire_users(&record), vec!["first question", "second question"], "the conversation continued");
    assert_eq!(record["events"][0]["session_id"], "ticket-42");
    let text = std::fs::read_to_string(&journal).expect("journal");
    assert!(text.contains("first question"), "the journal keeps the history the turn started from");
    let replayed = hookbox_tests::cli(&["replay", "--json", &journal_arg]);
    assert_eq!(replayed.code, 0, "{}\n{}", replayed.stdout, replayed.stderr);
    assert_eq!(replayed.json()["same"], true, "{}", replayed.stdout);

    // A third run sees both earlier turns; a different id sees none.
    let third = run(&session_file(dir.path(), "3.json", &[Some("three")]), "third", &[]);
    assert_eq!(wire_users(&third.json()).len(), 3);
    let other = replay_run(
        &session_file(dir.path(), "4.json", &[Some("x")]),
        ws.path(),
        &["--session", "another", "--db", &db, "--json"],
        "hi",
    );
    assert_eq!(wire_users(&other.json()), vec!["hi"]);
}

/// `late_injection_policy` and `max_follow_up_turns` from the config and the
/// flags: a late injection becomes a second turn with its own record; the
/// flag overrides the config; `--journal` (one turn) refuses `new_turn`.
#[test]
fn the_cli_sends_late_injections_as_new_turns_when_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = tempfile::tempdir().expect("workspace");
    let config = dir.path().join("hookbox.toml");
    std::fs::write(
        &config,
        format!(
            "[session]\nlate_injection_policy = \"new_turn\"\nmax_follow_up_turns = 2\n\n\
             [[routing.allow]]\nfrom = \"*\"\nto = \"main\"\n\n\
             [[plugins]]\npath = {:?}\n[plugins.config]\nmodel-response = \"inject-message:more please\"\n",
            SCRIPTED
        ),
    )
    .expect("config");
    let replay = session_file(dir.path(), "s.json", &[Some("first"), Some("second"), Some("third")]);
    let config = config.display().to_string();
    let base = |extra: &[&str]| {
        let mut args = vec!["--config", config.as_str()];
        args.extend(extra);
        replay_run(&replay, ws.path(), &args, "hello")
    };
    let out = base(&["--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let records: Vec<serde_json::Value> =
        out.stdout.lines().map(|l| serde_json::from_str(l).expect("one JSON record per line")).collect();
    assert_eq!(records.len(), 2, "the follow-up turn, then the repeated text is refused:\n{}", out.stderr);
    assert_eq!(records[1]["final_answer"], "second");
    assert_eq!(wire_users(&records[1]), vec!["hello", "more please"]);
    assert!(out.stderr.contains("[turn 2/2]"), "{}", out.stderr);
    let sessions: Vec<&str> = out.stderr.lines().filter_map(|l| l.split(" session=").nth(1)).collect();
    assert_eq!(sessions.len(), 2, "each turn's run-start names the session: {}", out.stderr);
    assert_eq!(sessions[0], sessions[1], "both turns are one (fresh) session");
    assert!(out.stderr.contains("[routing] is not used by `hookbox run`"), "{}", out.stderr);
    assert_eq!(records[0]["posts"], json!([]), "the record always has posts");

    // The flags override [session].
    let out = base(&["--json", "--late-injection-policy", "surface"]);
    assert_eq!(out.stdout.lines().count(), 1);
    assert_eq!(out.json()["undelivered_injections"], json!(["more please"]));
    let out = base(&["--json", "--max-follow-up-turns", "0"]);
    assert_eq!(out.stdout.lines().count(), 1);

    let journal = dir.path().join("j.json").display().to_string();
    let out = base(&["--journal", &journal]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("new_turn"), "{}", out.stderr);
}

/// Without `--db`, `--session` keeps the session in the data folder
/// (`HOOKBOX_DATA_DIR` here), created with mode 0700.
#[test]
fn the_default_session_database_lives_in_the_data_folder() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data/hookbox");
    let ws = tempfile::tempdir().expect("workspace");
    let run = |replay: std::path::PathBuf, prompt: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_hookbox-under-test"))
            .env_clear()
            .env("HOOKBOX_DATA_DIR", &data)
            .env("HOOKBOX_CACHE_DIR", "off")
            .args(["run", "--json", "--session", "s", "--workspace"])
            .arg(ws.path())
            .arg("--model")
            .arg(format!("replay:{}", replay.display()))
            .arg(prompt)
            .output()
            .expect("run hookbox")
    };
    let out = run(session_file(dir.path(), "1.json", &[Some("one")]), "first");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mode = std::fs::metadata(&data).expect("data folder").permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    assert!(data.join("hookbox.db").is_file());
    let out = run(session_file(dir.path(), "2.json", &[Some("two")]), "second");
    let record: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(wire_users(&record), vec!["first", "second"]);
}

/// Found by a hostile-input pass: a session database inside the workspace
/// (the model's tools could delete it, losing every session with exit 0), or
/// one other users may write (its history would be trusted), is refused
/// before the run; a journal's `history` and `session_id` get the same
/// bounds as a stored session.
#[test]
fn unsafe_session_databases_and_journal_histories_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = tempfile::tempdir().expect("workspace");
    let replay = session_file(dir.path(), "s.json", &[Some("ok")]);
    let inside = ws.path().join("h.db").display().to_string();
    let out = replay_run(&replay, ws.path(), &["--session", "s", "--db", &inside], "hi");
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("is inside the workspace"), "{}", out.stderr);
    assert!(!ws.path().join("h.db").exists(), "nothing was created there");

    let shared = dir.path().join("shared.db");
    std::fs::write(&shared, b"").expect("create");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let out = replay_run(&replay, ws.path(), &["--session", "s", "--db", &shared.display().to_string()], "hi");
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("writable by other users"), "{}", out.stderr);

    // A new database file is private.
    let db = dir.path().join("mine.db");
    let journal = dir.path().join("j.json");
    let args = ["--session", "s", "--db", &db.display().to_string(), "--journal", &journal.display().to_string()];
    let out = replay_run(&replay, ws.path(), &args, "hi");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(std::fs::metadata(&db).expect("db").permissions().mode() & 0o777, 0o600);

    // Tampered journals: an id `--session` would refuse, a history over the cap.
    let mut j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&journal).expect("read")).expect("json");
    j["session_id"] = json!("a\u{1b}[31mb");
    let bad_id = dir.path().join("bad-id.json");
    std::fs::write(&bad_id, j.to_string()).expect("write");
    let out = hookbox_tests::cli(&["replay", &bad_id.display().to_string()]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("session_id") && !out.stderr.contains('\u{1b}'), "{}", out.stderr);
    j["session_id"] = json!("s");
    j["history"] = json!(vec![json!({"role": "user", "content": "x"}); 100_001]);
    let big = dir.path().join("big.json");
    std::fs::write(&big, j.to_string()).expect("write");
    let out = hookbox_tests::cli(&["replay", &big.display().to_string()]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("100001 messages"), "{}", out.stderr);
}

/// `hookbox session list | show | delete`: what a database keeps, a
/// session's conversation (escaped), and deleting one with its hook state.
#[test]
fn the_cli_lists_shows_and_deletes_sessions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = tempfile::tempdir().expect("workspace");
    let db = dir.path().join("s.db").display().to_string();
    let hostile = "ticket \u{1b}[2J 7";
    let out = hookbox_tests::cli(&["session", "list", "--db", &db]);
    assert_eq!(out.code, 2, "no database yet: {}", out.stderr);
    assert!(out.stderr.contains("no session database"), "{}", out.stderr);
    for (id, prompt) in [("a", "first"), ("b", "second")] {
        let replay = session_file(dir.path(), &format!("{id}.json"), &[Some("ok \u{1b}[31m")]);
        let out = replay_run(&replay, ws.path(), &["--session", id, "--db", &db], prompt);
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let out = hookbox_tests::cli(&["session", "list", "--db", &db]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let ids: Vec<&str> = out.stdout.lines().filter_map(|l| l.split("  ").next()).collect();
    assert_eq!(ids.len(), 2, "{}", out.stdout);
    assert!(ids.contains(&"a") && ids.contains(&"b"));
    assert!(out.stdout.contains("1 turn(s)"), "{}", out.stdout);
    let out = hookbox_tests::cli(&["session", "show", "a", "--db", &db]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("user: first\nassistant: ok \\x1b[31m"), "escaped: {}", out.stdout);
    let out = hookbox_tests::cli(&["session", "show", "a", "--db", &db, "--json"]);
    let messages: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("json");
    assert_eq!(messages.as_array().map(Vec::len), Some(2));
    let out = hookbox_tests::cli(&["session", "show", hostile, "--db", &db]);
    assert_eq!(out.code, 2);
    assert!(!out.stderr.contains('\u{1b}'), "{}", out.stderr);
    let out = hookbox_tests::cli(&["session", "delete", "a", "--db", &db]);
    assert_eq!((out.code, out.stdout.trim()), (0, "deleted session `a`"));
    let out = hookbox_tests::cli(&["session", "delete", "a", "--db", &db]);
    assert_eq!(out.code, 1, "nothing left to delete");
    let out = hookbox_tests::cli(&["session", "list", "--db", &db]);
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    // A deleted session starts afresh.
    let replay = session_file(dir.path(), "c.json", &[Some("again")]);
    let out = replay_run(&replay, ws.path(), &["--session", "a", "--db", &db, "--json"], "new start");
    assert_eq!(wire_users(&out.json()), vec!["new start"]);
}
