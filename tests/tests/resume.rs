//! Resuming a parked run from its checkpoint (issue 17 item 3): a run that
//! waits for an approval is dropped at that point with its journal's
//! [`Checkpoint`]; a new run, on any worker, re-executes the checkpoint
//! (recorded model responses, recorded tool outcomes, hooks given their
//! journaled values and state) and goes on live. The model is not asked
//! again, no tool runs twice, and no hook state is committed twice.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox::contract::{ApprovalRecord, EventKind, FailureKind};
use hookbox::journal::Checkpoint;
use hookbox::providers::record::RecordingProvider;
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::testing::ScriptedHook;
use hookbox::sandbox::{HookChain, HookHandler, HookRuntime, MemoryStateStore, PluginOptions, StateStore, StoredState};
use hookbox::{
    Agent, AgentConfig, AnsweredBy, ApprovalAnswer, Directive, RunHandle, RunJournal, RunResult, Workspace,
    workspace_tools,
};
use hookbox_tests::{DEMO_PROMPT, STATE_COUNTER, config, demo_session, demo_workspace};

/// The chain of one run: `guard` asks for approval of both tool calls of the
/// demo, and `state-counter` counts tool results in its hook state; the WASM
/// hook takes its values from `journal`, and every call is journaled.
fn chain(runtime: &HookRuntime, journal: &Arc<RunJournal>) -> HookChain {
    chain_with(runtime, journal, &[])
}

/// [`chain`] with `state-counter` given `counter` as its config.
fn chain_with(runtime: &HookRuntime, journal: &Arc<RunJournal>, counter: &[(&str, serde_json::Value)]) -> HookChain {
    let ask = || Directive::AskApproval("check this".into());
    let guard = ScriptedHook::new("guard").on(EventKind::BeforeToolCall, ask()).on(EventKind::BeforeToolCall, ask());
    let options = PluginOptions { version: "1".into(), ..PluginOptions::default() };
    let loaded = runtime.load("state-counter", STATE_COUNTER.as_ref(), config(counter), options).expect("load");
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

/// What [`park_demo`] left: the checkpoint (the second approval answered
/// in it), and how many model responses it holds of how many in all.
struct Parked {
    checkpoint: Checkpoint,
    asked_before: usize,
    total: usize,
}

/// Runs the demo in `session` until its second approval (the first approved
/// live, so one tool ran and one state commit was made) and drops it there
/// as a worker parking it does; the checkpoint has gone through text, as
/// through a store, and holds the second approval's answer.
async fn park_demo(
    runtime: &HookRuntime,
    ws: &tempfile::TempDir,
    session: &str,
    counter: &[(&str, serde_json::Value)],
) -> Parked {
    let journal = RunJournal::recording();
    let live_model = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let total = live_model.response_count();
    let recorder = Arc::new(RecordingProvider::new(live_model.clone()));
    let first = agent(ws, recorder.clone(), &journal);
    let handle = RunHandle::new();
    let task = {
        let (agent, handle, mut chain) = (first.clone(), handle.clone(), chain_with(runtime, &journal, counter));
        let session = session.to_string();
        tokio::spawn(async move { agent.run_in_session(DEMO_PROMPT, &mut chain, handle, &session).await })
    };
    let one = next_approval(&handle, None).await;
    handle.answer(&one.id, ApprovalAnswer::Approve).expect("answered");
    let two = next_approval(&handle, Some(&one.id)).await;
    let checkpoint: Checkpoint = journal.checkpoint(recorder.responses());
    task.abort();
    assert!(task.await.expect_err("dropped at the park").is_cancelled());
    let asked_before = live_model.played();
    assert!(asked_before >= 1 && asked_before < total, "the run parked midway: {asked_before} of {total}");
    assert!(!ws.path().join(".env").exists(), "the first tool ran");
    // The checkpoint goes through the store as text.
    let text = serde_json::to_string(&checkpoint).expect("serialise");
    let mut checkpoint: Checkpoint = serde_json::from_str(&text).expect("read back");
    checkpoint.answer(ApprovalRecord {
        id: two.id.clone(),
        tool: two.call.name.clone(),
        tool_call_id: two.call.id.clone(),
        reasons: two.reasons.clone(),
        answer: ApprovalAnswer::Approve,
        answered_by: AnsweredBy::Host,
    });
    Parked { checkpoint, asked_before, total }
}

/// Parks the demo run at its second approval ([`park_demo`]) and resumes
/// it from the checkpoint with a fresh model, fresh hooks and a fresh
/// journal: it finishes with both tools run once, the model asked only for
/// what the checkpoint did not hold, and two state commits in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_run_resumes_from_its_checkpoint_without_asking_running_or_committing_twice() {
    let store = Arc::new(MemoryStateStore::default());
    let runtime = HookRuntime::new().expect("runtime").with_state_store(store.clone());
    let ws = demo_workspace();
    let session = "resume-session";

    // The first worker: runs until the second approval, then drops the run.
    let Parked { checkpoint, asked_before, total } = park_demo(&runtime, &ws, session, &[]).await;
    assert_eq!(checkpoint.responses.len(), asked_before);
    assert_eq!(checkpoint.tools.len(), 1, "one tool ran before the park: {:?}", checkpoint.tools);
    assert_eq!(checkpoint.approvals.len(), 2, "the one answered live, and the one answered while parked");
    let (_, revision) = store.load(session, "state-counter", Duration::from_secs(1)).expect("load");
    assert_eq!(revision, 1, "one state commit before the park");

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

/// Rule: a hook that reads its state once and saves later without reading
/// again swaps the revision its instance read or last wrote, resumed or
/// not. `state-counter` with `cached` reads at `run-start` only. Parked
/// after its first save (revision 1) and resumed: alone in its session, its
/// next save lands on revision 1; when another run of the session saved
/// while it was parked, that save stays and the resumed call fails with a
/// `state` failure (before the checkpoint kept the revision, the resumed
/// instance knew none and its save overwrote the other run's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_hook_that_saves_without_reading_swaps_the_revision_its_run_saw() {
    let cached = [("cached", serde_json::Value::Bool(true))];
    let store = Arc::new(MemoryStateStore::default());
    let runtime = HookRuntime::new().expect("runtime").with_state_store(store.clone());
    let counter = "state-counter";
    for (session, saved_meanwhile) in [("cached-alone", false), ("cached-raced", true)] {
        let ws = demo_workspace();
        let Parked { checkpoint, .. } = park_demo(&runtime, &ws, session, &cached).await;
        assert_eq!(checkpoint.revisions.get(counter), Some(&1), "its instance wrote revision 1 before the park");
        if saved_meanwhile {
            let other = StoredState { version: "other".into(), data: br#"{"count":41}"#.to_vec() };
            let saved = store.save(session, counter, &other, Some(1), Duration::from_secs(1)).expect("saved");
            assert_eq!(saved, 2);
        }
        let result = resume_demo_with(&checkpoint, &store, &ws, session, &cached).await;
        assert_eq!(tool_results(&result).len(), 2, "{:?}", tool_results(&result));
        let (state, revision) = store.load(session, counter, Duration::from_secs(1)).expect("load");
        let state = state.expect("state");
        let failures: Vec<_> = result.hook_failures.iter().filter(|f| f.plugin == counter).collect();
        if saved_meanwhile {
            assert_eq!((revision, state.version.as_str()), (2, "other"), "the other run's save stays");
            assert_eq!(failures.len(), 1, "{failures:?}");
            assert_eq!(failures[0].kind, FailureKind::State, "{failures:?}");
            assert!(failures[0].message.contains("revision 1, now 2"), "{}", failures[0].message);
        } else {
            assert!(failures.is_empty(), "{failures:?}");
            let text = String::from_utf8(state.data).expect("utf-8");
            assert_eq!((revision, text.as_str()), (2, r#"{"count":2}"#), "saved on the revision the park left");
        }
    }
}

/// Where a [`Crashing`] run dies.
#[derive(Clone, Copy, PartialEq)]
enum CrashAt {
    /// Inside its second tool call: its start is journaled, its outcome not.
    SecondToolStart,
    /// At the first safe point after a hook committed its state (the
    /// checkpoint is the one the commit made durable).
    AfterFirstCommit,
}

/// The store of a run's safe points, as a server keeps them: the last
/// checkpoint made durable. At `crash`, the safe point never resolves: the
/// run stops there as if its worker was killed.
struct Crashing {
    journal: std::sync::Weak<RunJournal>,
    recorder: Arc<RecordingProvider>,
    crash: CrashAt,
    saved: std::sync::Mutex<Option<Checkpoint>>,
    commits: std::sync::atomic::AtomicUsize,
    tool_starts: std::sync::atomic::AtomicUsize,
}

impl Crashing {
    fn save(&self) {
        if let Some(journal) = self.journal.upgrade() {
            *self.saved.lock().expect("lock") = Some(journal.checkpoint(self.recorder.responses()));
        }
    }
}

impl hookbox::journal::SafePoints for Crashing {
    fn reached(&self, at: hookbox::journal::SafePoint<'_>) -> hookbox::journal::SafePointFuture {
        use std::sync::atomic::Ordering::SeqCst;
        let dies = match (self.crash, at) {
            (CrashAt::SecondToolStart, hookbox::journal::SafePoint::ToolStarted(_)) => {
                self.tool_starts.fetch_add(1, SeqCst) == 1
            }
            (CrashAt::AfterFirstCommit, _) => self.commits.load(SeqCst) > 0,
            _ => false,
        };
        if dies {
            if self.crash == CrashAt::SecondToolStart {
                self.save();
            }
            return Box::pin(std::future::pending());
        }
        self.save();
        Box::pin(std::future::ready(true))
    }

    fn committing(&self, _plugin: &str) -> bool {
        self.save();
        self.commits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        true
    }
}

/// A state store whose first save fails as if its process died just before
/// it: the commit was written down as pending, and never made.
struct CutFirstSave {
    inner: Arc<MemoryStateStore>,
    cut: std::sync::atomic::AtomicBool,
}

impl StateStore for CutFirstSave {
    fn load(
        &self,
        session: &str,
        plugin: &str,
        wait: Duration,
    ) -> Result<(Option<hookbox::sandbox::StoredState>, u64), hookbox::sandbox::StateError> {
        self.inner.load(session, plugin, wait)
    }

    fn save(
        &self,
        session: &str,
        plugin: &str,
        state: &hookbox::sandbox::StoredState,
        expected: Option<u64>,
        wait: Duration,
    ) -> Result<u64, hookbox::sandbox::StateError> {
        if !self.cut.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Err(hookbox::sandbox::StateError::Backend {
                store: "cut".into(),
                source: Box::new(std::io::Error::other("the process died here")),
            });
        }
        self.inner.save(session, plugin, state, expected, wait)
    }
}

/// Runs the demo (both tool calls approved at once) until it "crashes" at
/// `crash`; returns the last durable checkpoint, the state store, the
/// workspace and how many model responses were played.
async fn crash_demo(
    crash: CrashAt,
    session: &str,
    cut_first_save: bool,
    counter: &[(&str, serde_json::Value)],
) -> (Checkpoint, Arc<MemoryStateStore>, tempfile::TempDir, usize) {
    let store = Arc::new(MemoryStateStore::default());
    let runtime = if cut_first_save {
        let cut = CutFirstSave { inner: store.clone(), cut: std::sync::atomic::AtomicBool::new(false) };
        HookRuntime::new().expect("runtime").with_state_store(Arc::new(cut))
    } else {
        HookRuntime::new().expect("runtime").with_state_store(store.clone())
    };
    let ws = demo_workspace();
    let journal = RunJournal::recording();
    let live_model = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let recorder = Arc::new(RecordingProvider::new(live_model.clone()));
    let points = Arc::new(Crashing {
        journal: Arc::downgrade(&journal),
        recorder: recorder.clone(),
        crash,
        saved: std::sync::Mutex::new(None),
        commits: std::sync::atomic::AtomicUsize::new(0),
        tool_starts: std::sync::atomic::AtomicUsize::new(0),
    });
    journal.with_safe_points(points.clone());
    let first = agent(&ws, recorder.clone(), &journal);
    let handle = RunHandle::new();
    let task = {
        let (agent, handle, mut chain) = (first.clone(), handle.clone(), chain_with(&runtime, &journal, counter));
        let session = session.to_string();
        tokio::spawn(async move { agent.run_in_session(DEMO_PROMPT, &mut chain, handle, &session).await })
    };
    // Approves each call as it asks, until the run stops at its crash.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut answered = Vec::new();
    let mut still = 0;
    while still < 50 {
        assert!(Instant::now() < deadline, "the run reaches its crash");
        if let Some(a) = handle.approvals().into_iter().find(|a| !answered.contains(&a.id)) {
            handle.answer(&a.id, ApprovalAnswer::Approve).expect("answered");
            answered.push(a.id);
            still = 0;
        } else {
            still += 1;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!task.is_finished(), "the run hangs at its crash");
    task.abort();
    let checkpoint = points.saved.lock().expect("lock").clone().expect("a checkpoint was made durable");
    (checkpoint, store, ws, live_model.played())
}

/// Resumes `checkpoint` as another worker would.
async fn resume_demo(
    checkpoint: &Checkpoint,
    store: &Arc<MemoryStateStore>,
    ws: &tempfile::TempDir,
    session: &str,
) -> RunResult {
    resume_demo_with(checkpoint, store, ws, session, &[]).await
}

/// [`resume_demo`] with `state-counter` given `counter` as its config.
async fn resume_demo_with(
    checkpoint: &Checkpoint,
    store: &Arc<MemoryStateStore>,
    ws: &tempfile::TempDir,
    session: &str,
    counter: &[(&str, serde_json::Value)],
) -> RunResult {
    let runtime = HookRuntime::new().expect("runtime").with_state_store(store.clone());
    let checkpoint: Checkpoint =
        serde_json::from_str(&serde_json::to_string(checkpoint).expect("serialise")).expect("read back");
    let resumed = RunJournal::resuming(&checkpoint);
    let model = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let provider = Arc::new(RecordingProvider::resuming(model.clone(), checkpoint.responses.clone()));
    let second = agent(ws, provider, &resumed);
    let mut chain = chain_with(&runtime, &resumed, counter);
    let handle = RunHandle::new();
    let run = {
        let handle = handle.clone();
        let session = session.to_string();
        tokio::spawn(async move { second.run_in_session(DEMO_PROMPT, &mut chain, handle, &session).await })
    };
    approving_until_done(&handle, run).await
}

/// Approves every call `run` asks about until it ends; its result.
async fn approving_until_done<E: std::fmt::Debug>(
    handle: &RunHandle,
    run: tokio::task::JoinHandle<Result<RunResult, E>>,
) -> RunResult {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !run.is_finished() {
        assert!(Instant::now() < deadline, "the run ends");
        for a in handle.approvals() {
            handle.answer(&a.id, ApprovalAnswer::Approve).expect("answered");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    run.await.expect("joined").expect("the run")
}

/// Crash recovery, in a tool: the second tool call's start was made durable
/// and its worker died before its outcome. The resumed run does not run it
/// again (the file is not created) and the model gets an "interrupted"
/// error result for it; the first tool's result is the journaled one, and
/// the hook state is committed once per tool result in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_in_a_tool_resumes_with_an_interrupted_result_instead_of_running_it_twice() {
    let session = "crash-in-tool";
    let (checkpoint, store, ws, played) = crash_demo(CrashAt::SecondToolStart, session, false, &[]).await;
    assert_eq!(checkpoint.started.len(), 2, "both tool calls journaled as started: {:?}", checkpoint.started);
    assert_eq!(checkpoint.tools.len(), 1, "one outcome journaled: {:?}", checkpoint.tools);
    assert_eq!(checkpoint.responses.len(), played, "every response the model gave is in the checkpoint");
    assert!(!ws.path().join(".env").exists() && !ws.path().join("test.txt").exists());
    let (_, revision) = store.load(session, "state-counter", Duration::from_secs(1)).expect("load");
    assert_eq!(revision, 1, "one commit before the crash");

    let result = resume_demo(&checkpoint, &store, &ws, session).await;
    let results = tool_results(&result);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(!results[0].starts_with("error"), "the first tool's journaled result: {results:?}");
    assert_eq!(results[1], hookbox::journal::INTERRUPTED_TOOL_MESSAGE, "{results:?}");
    assert!(!ws.path().join("test.txt").exists(), "the interrupted tool did not run again");
    let (state, revision) = store.load(session, "state-counter", Duration::from_secs(1)).expect("load");
    assert_eq!(revision, 2, "each tool result committed once");
    assert!(String::from_utf8(state.expect("state").data).expect("utf-8").contains("\"count\":2"));
}

/// Crash recovery, in a hook: the run dies right after a hook call
/// committed its state (the journal was made durable just before, with the
/// commit pending). The resumed run re-executes that call, finds the
/// commit landed (the revision moved) and does not make it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_after_a_hook_commit_does_not_commit_it_again() {
    let session = "crash-after-commit";
    let (checkpoint, store, ws, _) = crash_demo(CrashAt::AfterFirstCommit, session, false, &[]).await;
    assert_eq!(checkpoint.tools.len(), 1, "{:?}", checkpoint.tools);
    assert!(checkpoint.begun.get("state-counter").is_some_and(|n| *n > 0), "{:?}", checkpoint.begun);
    let (_, revision) = store.load(session, "state-counter", Duration::from_secs(1)).expect("load");
    assert_eq!(revision, 1);

    let result = resume_demo(&checkpoint, &store, &ws, session).await;
    let results = tool_results(&result);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results.iter().all(|r| !r.starts_with("error")), "each tool ran once: {results:?}");
    assert!(ws.path().join("test.txt").exists());
    let (state, revision) = store.load(session, "state-counter", Duration::from_secs(1)).expect("load");
    assert_eq!(revision, 2, "the commit before the crash was not made again");
    assert!(String::from_utf8(state.expect("state").data).expect("utf-8").contains("\"count\":2"));
}

/// Crash recovery, between writing a commit down and making it: the
/// journal holds the hook call's commit as pending, and the save never
/// happened. The resumed run re-executes the call and makes the commit then:
/// it lands once, not never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_cut_off_after_it_was_written_down_lands_once_on_resume() {
    let session = "crash-before-commit";
    let (checkpoint, store, ws, _) = crash_demo(CrashAt::AfterFirstCommit, session, true, &[]).await;
    assert_eq!(checkpoint.pending.get("state-counter").map(Vec::len), Some(1), "{:?}", checkpoint.pending);
    let (_, revision) = store.load(session, "state-counter", Duration::from_secs(1)).expect("load");
    assert_eq!(revision, 0, "the commit was cut off");

    let result = resume_demo(&checkpoint, &store, &ws, session).await;
    assert_eq!(tool_results(&result).len(), 2);
    let (state, revision) = store.load(session, "state-counter", Duration::from_secs(1)).expect("load");
    assert_eq!(revision, 2, "the cut-off commit landed on resume, then the second");
    assert!(String::from_utf8(state.expect("state").data).expect("utf-8").contains("\"count\":2"));
}

/// Rule: a pending commit made again on resume tells its own landing (the
/// entry one save past it, with its bytes) from another run's save. With
/// `cached` (saves without reading), the save after the resume lands when
/// the commit had landed before the crash; when it was cut off and another
/// run of the session saved meanwhile, that save stays and the resumed
/// run's next one is a `state` failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_commit_made_again_tells_its_own_landing_from_another_runs_save() {
    let (cached, wait) = ([("cached", serde_json::Value::Bool(true))], Duration::from_secs(1));
    for (session, cut) in [("cached-landed", false), ("cached-cut", true)] {
        let (checkpoint, store, ws, _) = crash_demo(CrashAt::AfterFirstCommit, session, cut, &cached).await;
        assert_eq!(checkpoint.pending.get("state-counter").map(Vec::len), Some(1), "{:?}", checkpoint.pending);
        let (_, before) = store.load(session, "state-counter", wait).expect("load");
        assert_eq!(before, if cut { 0 } else { 1 });
        let other = StoredState { version: "other".into(), data: br#"{"count":41}"#.to_vec() };
        if cut {
            assert_eq!(store.save(session, "state-counter", &other, Some(0), wait).expect("saved"), 1);
        }
        let result = resume_demo_with(&checkpoint, &store, &ws, session, &cached).await;
        let failures: Vec<_> = result.hook_failures.iter().filter(|f| f.plugin == "state-counter").collect();
        let (state, revision) = store.load(session, "state-counter", wait).expect("load");
        let state = state.expect("state");
        if cut {
            assert_eq!((failures.len(), revision, state.data), (1, 1, other.data), "{failures:?}");
            assert!(failures[0].message.contains("revision 0, now 1"), "{}", failures[0].message);
        } else {
            assert!(failures.is_empty(), "{failures:?}");
            assert_eq!((revision, state.data), (2, br#"{"count":2}"#.to_vec()));
        }
    }
}

/// Safe points that cannot be made durable (the run's database failing).
struct Unreachable;

impl hookbox::journal::SafePoints for Unreachable {
    fn reached(&self, _at: hookbox::journal::SafePoint<'_>) -> hookbox::journal::SafePointFuture {
        Box::pin(std::future::ready(false))
    }

    fn committing(&self, _plugin: &str) -> bool {
        false
    }
}

/// A run whose journal cannot be made durable runs no tool and commits no
/// hook state: either could not be told apart from a crash after it. The
/// model gets an error result for each tool call; each commit is a `state`
/// failure of its call, and the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_durable_journal_no_tool_runs_and_no_state_is_committed() {
    let store = Arc::new(MemoryStateStore::default());
    let runtime = HookRuntime::new().expect("runtime").with_state_store(store.clone());
    let ws = demo_workspace();
    let journal = RunJournal::recording();
    journal.with_safe_points(Arc::new(Unreachable));
    let model = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let agent = agent(&ws, Arc::new(RecordingProvider::new(model)), &journal);
    let handle = RunHandle::new();
    let run = {
        let (handle, mut chain) = (handle.clone(), chain(&runtime, &journal));
        tokio::spawn(async move { agent.run_in_session(DEMO_PROMPT, &mut chain, handle, "unreachable").await })
    };
    let result = approving_until_done(&handle, run).await;
    let results = tool_results(&result);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results.iter().all(|r| r.starts_with("error: not run")), "{results:?}");
    assert!(ws.path().join(".env").exists() && !ws.path().join("test.txt").exists(), "no tool ran");
    let (_, revision) = store.load("unreachable", "state-counter", Duration::from_secs(1)).expect("load");
    assert_eq!(revision, 0, "no commit made");
    let failures: Vec<_> = result.hook_failures.iter().filter(|f| f.plugin == "state-counter").collect();
    assert!(!failures.is_empty() && failures.iter().all(|f| f.kind.as_str() == "state"), "{failures:?}");
}

/// Durable pause of a hook's pause (issue 17 item 3): a run waiting in a
/// hook's `pause` is dropped there with its checkpoint. Resumed from it as
/// answered ([`Checkpoint::resume_pause`]), the re-executed run goes past
/// that pause to the end; resumed from it unanswered (a crash while it
/// waited), it pauses there again (here with no other handle to resume it,
/// so it aborts saying so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_parked_in_a_hooks_pause_resumes_past_it_once_answered() {
    let store = Arc::new(MemoryStateStore::default());
    let runtime = HookRuntime::new().expect("runtime").with_state_store(store.clone());
    let ws = demo_workspace();
    let session = "paused-session";
    let chain = |journal: &Arc<RunJournal>| {
        let pauser = ScriptedHook::new("pauser").on(EventKind::ToolCallResult, Directive::Pause);
        let options = PluginOptions { version: "1".into(), ..PluginOptions::default() };
        let loaded = runtime.load("state-counter", STATE_COUNTER.as_ref(), config(&[]), options).expect("load");
        let counter = loaded.plugin.hook().with_host_env(journal.plugin("state-counter"));
        HookChain::new(vec![Box::new(counter) as Box<dyn HookHandler>, Box::new(pauser)])
            .with_call_sink(journal.clone())
    };

    let journal = RunJournal::recording();
    let recorder = Arc::new(RecordingProvider::new(Arc::new(ReplayProvider::from_file(demo_session()).expect("s"))));
    let first = agent(&ws, recorder.clone(), &journal);
    let handle = RunHandle::new();
    let task = {
        let (agent, handle, mut chain) = (first.clone(), handle.clone(), chain(&journal));
        tokio::spawn(async move { agent.run_in_session(DEMO_PROMPT, &mut chain, handle, session).await })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while handle.waiting_in_pause().is_none() {
        assert!(Instant::now() < deadline, "the run waits in the hook's pause");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(journal.in_hook_pause(), "the pause is the hook's");
    let unanswered = journal.checkpoint(recorder.responses());
    task.abort();
    assert!(task.await.expect_err("dropped in the pause").is_cancelled());
    assert_eq!(unanswered.pauses, 0, "no pause passed yet");
    assert_eq!(unanswered.tools.len(), 1, "{:?}", unanswered.tools);

    let resume = |checkpoint: &Checkpoint| {
        let resumed = RunJournal::resuming(checkpoint);
        let model = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
        let provider = Arc::new(RecordingProvider::resuming(model, checkpoint.responses.clone()));
        (agent(&ws, provider, &resumed), chain(&resumed), resumed)
    };
    // Unanswered: it waits in the same pause again.
    let (again, mut hooks, _) = resume(&unanswered);
    let result = again.run_in_session(DEMO_PROMPT, &mut hooks, RunHandle::new(), session).await;
    let error = result.expect_err("paused again, with no handle to resume it").to_string();
    assert!(error.contains("paused and nothing can resume it"), "{error}");

    // Answered (resumed while parked): past the pause, to the end, nothing done twice.
    let mut answered = unanswered.clone();
    answered.resume_pause();
    let (second, mut hooks, resumed) = resume(&answered);
    let result = second.run_in_session(DEMO_PROMPT, &mut hooks, RunHandle::new(), session).await.expect("resumed");
    let results = tool_results(&result);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(ws.path().join("test.txt").exists(), "the second tool ran after the resume");
    let (_, revision) = store.load(session, "state-counter", Duration::from_secs(1)).expect("load");
    assert_eq!(revision, 2, "each tool result committed once");
    assert_eq!(resumed.checkpoint(Vec::new()).pauses, 1, "the one pause, passed once");
}
