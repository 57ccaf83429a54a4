//! Approvals of one tool call (issue 14 item 2; seed 003: an approval has an
//! ID, "the one turn.answer takes"; Claude Code's `ask`): a hook at
//! `before-tool-call` asks, the call waits under an approval id, and the host
//! approves, denies (the slot gets a declined result and the run goes on) or
//! approves with other arguments; the answer is journaled and a replay
//! answers from the journal. An unanswered approval follows the
//! pause-timeout policy.
//!
//! The hooks here are native (`ScriptedHook`): WASM plugins ask through WIT
//! 0.2.0's `ask-approval` (tests/tests/wit_versions.rs).

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox::contract::EventKind;
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::testing::ScriptedHook;
use hookbox::sandbox::{HookChain, HookHandler};
use hookbox::{
    Agent, AgentConfig, AnsweredBy, ApprovalAnswer, Directive, HandleError, PauseTimeout, RunErrorInfo, RunHandle,
    RunJournal, RunResult, Workspace, workspace_tools,
};
use hookbox_tests::{DEMO_PROMPT, demo_session, demo_workspace, wire_assistant, wire_tool_results};

fn agent(ws: &tempfile::TempDir, config: AgentConfig) -> (Arc<Agent>, Arc<ReplayProvider>) {
    let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    (Arc::new(Agent::new(provider.clone(), tools, config)), provider)
}

/// A chain whose one hook asks for approval of both tool calls of the demo.
fn asking() -> HookChain {
    let ask = || Directive::AskApproval("check this".into());
    let hook = ScriptedHook::new("guard").on(EventKind::BeforeToolCall, ask()).on(EventKind::BeforeToolCall, ask());
    HookChain::new(vec![Box::new(hook) as Box<dyn HookHandler>])
}

/// Starts the demo run (delete_file `.env`, create_file `test.txt`) steered by `handle`.
fn spawn(
    agent: &Arc<Agent>,
    chain: HookChain,
    handle: &RunHandle,
) -> tokio::task::JoinHandle<Result<RunResult, hookbox::RunError>> {
    let (agent, handle) = (agent.clone(), handle.clone());
    let mut chain = chain;
    tokio::spawn(async move { agent.run_with_handle(DEMO_PROMPT, &mut chain, handle).await })
}

/// Waits until the run asks for an approval; returns it.
async fn next_approval(handle: &RunHandle) -> hookbox::Approval {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(a) = handle.approvals().into_iter().next() {
            return a;
        }
        assert!(Instant::now() < deadline, "the run asks for an approval");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Seed 003: "ctx.callback_id is the approval's ID, the one turn.answer
/// takes." Deny one call (its slot gets the reason, the run goes on) and
/// approve the other with other arguments (they run, and the history shows them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_denies_one_call_and_approves_another_with_other_arguments() {
    let ws = demo_workspace();
    let (agent, provider) = agent(&ws, AgentConfig::default());
    let handle = RunHandle::new();
    let run = spawn(&agent, asking(), &handle);

    let first = next_approval(&handle).await;
    assert_eq!(first.call.name, "delete_file");
    assert_eq!(first.turn, 1, "the approval names its turn");
    assert_eq!(first.reasons.len(), 1);
    assert_eq!((first.reasons[0].plugin.as_str(), first.reasons[0].reason.as_str()), ("guard", "check this"));
    assert!(first.id.ends_with(&format!("/{}", first.call.id)), "{}", first.id);
    assert_eq!(
        handle.answer("no-such-id", ApprovalAnswer::Approve),
        Err(HandleError::UnknownApproval("no-such-id".into()))
    );
    handle.answer(&first.id, ApprovalAnswer::Deny(Some("Keep .env.".into()))).expect("answer");
    assert!(handle.answer(&first.id, ApprovalAnswer::Approve).is_err(), "an approval is answered once");

    let second = next_approval(&handle).await;
    assert_eq!(second.call.name, "create_file");
    let bad = handle.answer(&second.id, ApprovalAnswer::ApproveWithArguments("[1]".into()));
    assert!(matches!(bad, Err(HandleError::InvalidArguments(_))), "{bad:?}");
    assert_eq!(handle.approvals().len(), 1, "a refused answer leaves the approval waiting");
    handle
        .answer(&second.id, ApprovalAnswer::ApproveWithArguments(r#"{"path": "approved.txt"}"#.into()))
        .expect("answer");

    let r = tokio::time::timeout(Duration::from_secs(20), run).await.expect("ends").expect("task").expect("run");
    assert!(ws.path().join(".env").exists(), "the denied delete did not run");
    assert!(ws.path().join("approved.txt").exists() && !ws.path().join("test.txt").exists());
    let results = wire_tool_results(&provider.requests()[1]);
    assert_eq!(results[0].1, "Keep .env.", "the model got the denial's reason");
    let requests = provider.requests();
    let calls = &wire_assistant(&requests[1])["tool_calls"];
    assert_eq!(
        calls[1]["function"]["arguments"], r#"{"path": "approved.txt"}"#,
        "the history shows the approved arguments"
    );
    assert_eq!(r.approvals.len(), 2);
    assert_eq!(r.approvals[0].answer, ApprovalAnswer::Deny(Some("Keep .env.".into())));
    assert_eq!(r.approvals[1].answered_by, AnsweredBy::Host);
    assert!(handle.approvals().is_empty());
}

/// A veto wins over a request for approval: nobody is asked.
#[tokio::test]
async fn a_skip_from_another_hook_wins_over_an_approval() {
    let ws = demo_workspace();
    let (agent, _) = agent(&ws, AgentConfig::default());
    let ask = ScriptedHook::new("asker").on(EventKind::BeforeToolCall, Directive::AskApproval("sure?".into()));
    let skip = ScriptedHook::new("denier").on(EventKind::BeforeToolCall, Directive::SkipTool(Some("no".into())));
    let mut chain = HookChain::new(vec![Box::new(ask) as Box<dyn HookHandler>, Box::new(skip)]);
    let r = agent.run(DEMO_PROMPT, &mut chain).await.expect("run");
    assert!(r.approvals.is_empty(), "{:?}", r.approvals);
    assert!(ws.path().join(".env").exists());
}

/// "An unanswered approval follows the pause-timeout policy": resume denies
/// the call and goes on; abort ends the run. With no timeout and no other
/// handle, nothing can answer: the call is denied at once.
#[tokio::test]
async fn unanswered_approvals_follow_the_pause_timeout_policy() {
    let ws = demo_workspace();
    let config =
        AgentConfig { pause_timeout_ms: Some(50), on_pause_timeout: PauseTimeout::Resume, ..AgentConfig::default() };
    let (a, _) = agent(&ws, config.clone());
    let handle = RunHandle::new();
    let _kept = handle.clone();
    let r = a.run_with_handle(DEMO_PROMPT, &mut asking(), handle).await.expect("run goes on");
    assert_eq!(r.approvals.len(), 2, "{:?}", r.approvals);
    assert!(r.approvals.iter().all(|x| x.answered_by == AnsweredBy::Timeout), "{:?}", r.approvals);
    assert!(ws.path().join(".env").exists() && !ws.path().join("test.txt").exists(), "nothing ran");

    let (a, _) = agent(&ws, AgentConfig { on_pause_timeout: PauseTimeout::Abort, ..config });
    let handle = RunHandle::new();
    let _kept = handle.clone();
    let err = a.run_with_handle(DEMO_PROMPT, &mut asking(), handle).await.expect_err("aborted");
    assert!(
        matches!(&err.info, RunErrorInfo::Aborted { reason: Some(r), .. } if r.contains("not answered within 50 ms")),
        "{err}"
    );
    // The approval that ended the run is listed in the error's record.
    let ended = &err.report.approvals;
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0].answered_by, AnsweredBy::Timeout);
    assert!(matches!(&ended[0].answer, ApprovalAnswer::Deny(Some(why)) if why.contains("aborted")), "{ended:?}");

    let (a, _) = agent(&ws, AgentConfig::default());
    let r = a.run(DEMO_PROMPT, &mut asking()).await.expect("nothing can answer: denied, the run goes on");
    assert!(
        r.approvals.iter().all(|x| x.answered_by == AnsweredBy::Nobody && matches!(x.answer, ApprovalAnswer::Deny(_)))
    );
    assert!(ws.path().join(".env").exists());
}

/// An abort while a call waits ends the run; the call's slot is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_while_waiting_ends_the_run() {
    let ws = demo_workspace();
    let (agent, _) = agent(&ws, AgentConfig::default());
    let handle = RunHandle::new();
    let run = spawn(&agent, asking(), &handle);
    next_approval(&handle).await;
    handle.abort("changed my mind");
    let err =
        tokio::time::timeout(Duration::from_secs(20), run).await.expect("ends").expect("task").expect_err("aborted");
    assert!(matches!(&err.info, RunErrorInfo::Aborted { reason: Some(r), .. } if r == "changed my mind"), "{err}");
    assert_eq!(err.report.approvals.len(), 1, "the waiting approval is listed: {:?}", err.report.approvals);
    assert_eq!(err.report.approvals[0].answered_by, AnsweredBy::Host);
    assert!(ws.path().join(".env").exists());
    assert!(handle.approvals().is_empty(), "nothing waits after the run ended");
}

/// "The answer is journaled so a replay reproduces it": a recorded run's
/// answers come back from its journal on replay, with nobody to answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_answers_from_the_journal() {
    let ws = demo_workspace();
    let journal = RunJournal::recording();
    let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let recorded = Arc::new(Agent::new(provider, tools, AgentConfig::default()).with_journal(journal.clone()));
    let handle = RunHandle::new();
    let run = spawn(&recorded, asking(), &handle);
    let first = next_approval(&handle).await;
    handle.answer(&first.id, ApprovalAnswer::Approve).expect("answer");
    let second = next_approval(&handle).await;
    handle.answer(&second.id, ApprovalAnswer::Deny(None)).expect("answer");
    let r = run.await.expect("task").expect("run");
    assert_eq!(journal.approvals().len(), 2);

    let mut file: hookbox::journal::JournalFile = serde_json::from_value(serde_json::json!({
        "format": hookbox::journal::JOURNAL_FORMAT, "version": hookbox::journal::JOURNAL_VERSION,
        "hookbox_version": "test", "run_id": r.run_id, "session_id": null, "prompt": DEMO_PROMPT,
        "provider": "openai", "model": "gpt-4o", "manifest": {}, "plugin_blake3": {}, "responses": {},
        "tools": [], "imports": {}, "calls": [], "stop_reason": "end_turn"
    }))
    .expect("a journal");
    file.tools = journal.tools();
    file.approvals = journal.approvals();
    let ws2 = demo_workspace();
    let replay = RunJournal::replaying(&file);
    let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws2.path()).expect("workspace")));
    let again = Agent::new(provider, tools, AgentConfig::default()).with_journal(replay);
    let r2 = again.run(DEMO_PROMPT, &mut asking()).await.expect("replay");
    assert_eq!(r2.run_id, r.run_id);
    let answers = |r: &RunResult| r.approvals.iter().map(|a| (a.id.clone(), a.answer.clone())).collect::<Vec<_>>();
    assert_eq!(answers(&r2), answers(&r));
    assert!(r2.approvals.iter().all(|a| a.answered_by == AnsweredBy::Journal));
    assert_eq!(r2.messages, r.messages, "the replay reproduces the conversation");
}
