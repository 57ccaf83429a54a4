//! Resuming a parked run from its checkpoint (issue 17 item 3): a run that
//! waits for an approval is dropped at that point with its journal's
//! [`Checkpoint`]; a new run, on any worker, re-executes the checkpoint
//! (recorded model responses, recorded tool outcomes, hooks given their
//! journaled values and state) and goes on live. The model is not asked
//! again, no tool runs twice, and no hook state is committed twice.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox::contract::{ApprovalRecord, EventKind};
use hookbox::journal::Checkpoint;
use hookbox::providers::record::RecordingProvider;
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::testing::ScriptedHook;
use hookbox::sandbox::{HookChain, HookHandler, HookRuntime, MemoryStateStore, PluginOptions, StateStore};
use hookbox::{
    Agent, AgentConfig, AnsweredBy, ApprovalAnswer, Directive, RunHandle, RunJournal, RunResult, Workspace,
    workspace_tools,
};
use hookbox_tests::{DEMO_PROMPT, STATE_COUNTER, config, demo_session, demo_workspace};

/// The chain of one run: `guard` asks for approval of both tool calls of the
/// demo, and `state-counter` counts tool results in its hook state; the WASM
/// hook takes its values from `journal`, and every call is journaled.
fn chain(runtime: &HookRuntime, journal: &Arc<RunJournal>) -> HookChain {
    let ask = || Directive::AskApproval("check this".into());
    let guard = ScriptedHook::new("guard").on(EventKind::BeforeToolCall, ask()).on(EventKind::BeforeToolCall, ask());
    let options = PluginOptions { version: "1".into(), ..PluginOptions::default() };
    let loaded = runtime.load("state-counter", STATE_COUNTER.as_ref(), config(&[]), options).expect("load");
    let counter = loaded.plugin.hook().with_host_env(journal.plugin("state-counter"));
    HookChain::new(vec![Box::new(guard) as Box<dyn HookHandler>, Box::new(counter)]).with_call_sink(journal.clone())
}

fn agent(ws: &tempfile::TempDir, provider: Arc<RecordingProvider>, journal: &Arc<RunJournal>) -> Arc<Agent> {
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    Arc::new(Agent::new(provider, tools, AgentConfig::default()).with_journal(journal.clone()))
}

async fn next_approval(handle: &RunHandle, not: Option<&str>) -> hookbox::Approval {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(a) = handle.approvals().into_iter().find(|a| Some(a.id.as_str()) != not) {
            return a;
        }
        assert!(Instant::now() < deadline, "the run asks for an approval");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn tool_results(result: &RunResult) -> Vec<String> {
    result
        .messages
        .iter()
        .filter_map(|m| match m {
            hookbox::providers::Message::ToolResults { results } => Some(results.iter().map(|r| r.content.clone())),
            _ => None,
        })
        .flatten()
        .collect()
}

/// Parks the demo run at its second approval (the first approved live, so
/// one tool ran and one state commit was made), drops it there as a worker
/// parking it does, and resumes it from the checkpoint with a fresh model,
/// fresh hooks and a fresh journal: it finishes with both tools run once,
/// the model asked only for what the checkpoint did not hold, and two state
/// commits in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_run_resumes_from_its_checkpoint_without_asking_running_or_committing_twice() {
    let store = Arc::new(MemoryStateStore::default());
    let runtime = HookRuntime::new().expect("runtime").with_state_store(store.clone());
    let ws = demo_workspace();
    let session = "resume-session";

    // The first worker: runs until the second approval, then drops the run.
    let journal = RunJournal::recording();
    let live_model = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let total = live_model.response_count();
    let recorder = Arc::new(RecordingProvider::new(live_model.clone()));
    let first = agent(&ws, recorder.clone(), &journal);
    let handle = RunHandle::new();
    let task = {
        let (agent, handle, mut chain) = (first.clone(), handle.clone(), chain(&runtime, &journal));
        tokio::spawn(async move { agent.run_in_session(DEMO_PROMPT, &mut chain, handle, session).await })
    };
    let one = next_approval(&handle, None).await;
    handle.answer(&one.id, ApprovalAnswer::Approve).expect("answered");
    let two = next_approval(&handle, Some(&one.id)).await;
    let mut checkpoint: Checkpoint = journal.checkpoint(recorder.responses());
    task.abort();
    assert!(task.await.expect_err("dropped at the park").is_cancelled());
    let asked_before = live_model.played();
    assert!(asked_before >= 1 && asked_before < total, "the run parked midway: {asked_before} of {total}");
    assert_eq!(checkpoint.responses.len(), asked_before);
    assert_eq!(checkpoint.tools.len(), 1, "one tool ran before the park: {:?}", checkpoint.tools);
    assert_eq!(checkpoint.approvals.len(), 1);
    let (_, revision) = store.load(session, "state-counter", Duration::from_secs(1)).expect("load");
    assert_eq!(revision, 1, "one state commit before the park");
    assert!(!ws.path().join(".env").exists(), "the first tool ran");

    // The checkpoint goes through the store as text.
    let text = serde_json::to_string(&checkpoint).expect("serialise");
    checkpoint = serde_json::from_str(&text).expect("read back");
    checkpoint.answer(ApprovalRecord {
        id: two.id.clone(),
        tool: two.call.name.clone(),
        tool_call_id: two.call.id.clone(),
        reasons: two.reasons.clone(),
        answer: ApprovalAnswer::Approve,
        answered_by: AnsweredBy::Host,
    });

    // Another worker: resumes it.
    let resumed = RunJournal::resuming(&checkpoint);
    assert!(resumed.catching_up());
    let model = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let provider = Arc::new(RecordingProvider::resuming(model.clone(), checkpoint.responses.clone()));
    let second = agent(&ws, provider.clone(), &resumed);
    let mut chain = chain(&runtime, &resumed);
    let result =
        second.run_in_session(DEMO_PROMPT, &mut chain, RunHandle::new(), session).await.expect("the resumed run");
    assert!(!resumed.catching_up(), "past the checkpoint");
    assert_eq!(result.run_id, checkpoint.run_id, "the same run");
    assert_eq!(model.requests().len(), total - asked_before, "the model is asked only past the checkpoint");
    assert_eq!(provider.responses().len(), total);
    let results = tool_results(&result);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results.iter().all(|r| !r.starts_with("error")), "each tool ran once, and succeeded: {results:?}");
    assert!(ws.path().join("test.txt").exists(), "the second tool ran after the resume");
    let (state, revision) = store.load(session, "state-counter", Duration::from_secs(1)).expect("load");
    assert_eq!(revision, 2, "the re-executed call committed nothing again");
    let state = String::from_utf8(state.expect("state").data).expect("utf-8");
    assert!(state.contains("\"count\":2"), "{state}");
    assert_eq!(result.approvals.len(), 2);
    assert!(result.approvals.iter().all(|a| a.answer == ApprovalAnswer::Approve && a.answered_by == AnsweredBy::Host));
    let calls = resumed.calls();
    assert_eq!(&calls[..checkpoint.calls.len()], &checkpoint.calls[..], "the hooks decided the same on re-execution");
    assert!(calls.len() > checkpoint.calls.len());
    assert_eq!(resumed.tools().len(), 2, "the journal goes on after the checkpoint");
    assert!(resumed.divergences().is_empty(), "{:?}", resumed.divergences());
}
