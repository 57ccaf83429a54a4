//! The agent loop: model requests, tool calls, and a hook call at every point.
//!
//! Event order and iteration numbering follow `docs/contract.md`
//! ("Firing order"):
//!
//! ```text
//! run-start
//! iteration-start      iteration=1 loop_counter=1
//! model-response       iteration=1              (asks for tools)
//! tool-call-start      iteration=1   ┐ per tool call,
//! before-tool-call     iteration=1   │ in the order the
//! tool-call-result     iteration=1   ┘ model emitted them
//! iteration-start      iteration=1 loop_counter=2   (the follow-up request)
//! model-response       iteration=1
//! iteration-complete   iteration=1   tools_called=[…]
//! final-answer
//! run-end              iterations=1
//! ```
//!
//! A follow-up that asks for more tools opens the next iteration. A run with
//! no tools emits exactly one `iteration-complete`, with no tools called.
//! Each `iteration-complete` carries the usage billed since the previous one.
//!
//! Injected messages are delivered at the next turn boundary: after
//! `iteration-start`'s hooks, before the request is sent. Whatever is still
//! queued when the run ends is reported as undelivered (or attached to the
//! error the run raised): never lost, never counted twice.

use std::sync::Arc;

use hookbox_contract::Event;
use hookbox_providers::{Message, ModelProvider, ToolSpec};
use hookbox_sandbox::{DispatchTrace, HookChain};

use crate::config::AgentConfig;
use crate::handle::{QueueAtEnd, RunHandle};
use crate::journal::RunJournal;
use crate::outcome::{RunError, RunResult, StreamEvent};
use crate::routing::MessageBus;
use crate::tools::Tool;

/// Where a running turn sends its stream events.
pub(crate) type StreamSink = Arc<dyn Fn(StreamEvent) + Send + Sync>;

/// A callback that sees every event as it fires, with what its hooks did
/// (the CLI prints the readable trace from it).
pub type TraceSink = Arc<dyn Fn(&Event, &DispatchTrace) + Send + Sync>;

/// The agent: a provider, tools and settings. One [`Agent::run`] per run.
pub struct Agent {
    pub(crate) provider: Arc<dyn ModelProvider>,
    /// Each tool with its spec, computed once.
    pub(crate) tools: Vec<(ToolSpec, Arc<dyn Tool>)>,
    pub(crate) config: AgentConfig,
    pub(crate) trace: Option<TraceSink>,
    /// The run journal: records tool outcomes and the run id, or replays them.
    pub(crate) journal: Option<Arc<RunJournal>>,
}

/// What a turn starts from: the conversation so far and the session it belongs to.
#[derive(Debug, Clone, Default)]
pub struct TurnContext {
    /// The session's id; a fresh UUID when empty.
    pub session_id: String,
    /// The messages of earlier turns, sent before this turn's user message.
    pub history: Vec<Message>,
    /// The message bus the session is on: the turn's hooks can `post-message`
    /// through it (none: every post is refused).
    pub bus: Option<Arc<MessageBus>>,
    /// The turn's number in its session, 1-based (0 counts as 1); hooks see
    /// it in the event context.
    pub turn: u32,
}

impl Agent {
    /// An agent on `provider` with `tools`.
    pub fn new(provider: Arc<dyn ModelProvider>, tools: Vec<Arc<dyn Tool>>, config: AgentConfig) -> Self {
        let tools = tools.into_iter().map(|t| (t.spec(), t)).collect();
        Agent { provider, tools, config, trace: None, journal: None }
    }

    /// The agent's settings.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Keeps the run's id and every tool outcome in `journal` (recording), or
    /// takes them from it (replaying: no tool runs, each call gets its recorded
    /// result and duration). Give the same journal to the hook chain and the
    /// hooks ([`HookChain::with_journal`], `WasmHook::with_journal`).
    pub fn with_journal(mut self, journal: Arc<RunJournal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// Calls `sink` for every event as it fires.
    pub fn with_trace(mut self, sink: TraceSink) -> Self {
        self.trace = Some(sink);
        self
    }

    /// Runs the agent on `prompt`, calling `hooks` at every point.
    ///
    /// Errors: [`RunError`] when a hook aborts, the provider fails or the
    /// iteration limit is passed; its `report` holds the partial record.
    pub async fn run(&self, prompt: &str, hooks: &mut HookChain) -> Result<RunResult, RunError> {
        self.run_with_handle(prompt, hooks, RunHandle::new()).await
    }

    /// Runs the agent with a [`RunHandle`] the embedder keeps a clone of, to
    /// pause, resume, abort or inject from any thread while the run is in flight.
    ///
    /// Errors: as [`Agent::run`]; an abort from the handle is [`RunErrorInfo::Aborted`].
    pub async fn run_with_handle(
        &self,
        prompt: &str,
        hooks: &mut HookChain,
        handle: RunHandle,
    ) -> Result<RunResult, RunError> {
        self.run_turn(prompt, hooks, &handle, TurnContext::default(), None, QueueAtEnd::Close).await
    }

    /// Runs one turn of the session `session_id` (hooks see it in `run-start`,
    /// and it keys their saved state), with a fresh history.
    ///
    /// Errors: as [`Agent::run`].
    pub async fn run_in_session(
        &self,
        prompt: &str,
        hooks: &mut HookChain,
        handle: RunHandle,
        session_id: &str,
    ) -> Result<RunResult, RunError> {
        let context = TurnContext { session_id: session_id.to_string(), ..TurnContext::default() };
        self.run_turn(prompt, hooks, &handle, context, None, QueueAtEnd::Close).await
    }

    /// Runs one turn starting from `context`: the session id hooks see and
    /// the conversation so far (sent before `prompt`). What a session or a
    /// replay of a session's turn uses; [`crate::Session`] keeps the history for you.
    ///
    /// Errors: as [`Agent::run`].
    pub async fn run_with_context(
        &self,
        prompt: &str,
        hooks: &mut HookChain,
        handle: RunHandle,
        context: TurnContext,
    ) -> Result<RunResult, RunError> {
        self.run_turn(prompt, hooks, &handle, context, None, QueueAtEnd::Close).await
    }

    /// Runs the agent in a task and returns its stream: hook events as they
    /// fire, text and thinking deltas, then one terminal [`StreamEvent::Complete`].
    /// Never raises: an abort or error arrives as [`StreamEvent::Error`] first.
    /// Keep a clone of `handle` to steer the run.
    pub fn stream(
        self: &Arc<Self>,
        prompt: String,
        hooks: HookChain,
        handle: RunHandle,
    ) -> tokio::sync::mpsc::UnboundedReceiver<StreamEvent> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let agent = self.clone();
        tokio::spawn(async move {
            let mut hooks = hooks;
            let sink_tx = tx.clone();
            let sink: StreamSink = Arc::new(move |e| {
                let _ = sink_tx.send(e);
            });
            let outcome = agent
                .run_turn(&prompt, &mut hooks, &handle, TurnContext::default(), Some(sink), QueueAtEnd::Close)
                .await;
            let result = match outcome {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(StreamEvent::from_error(&e));
                    *e.report
                }
            };
            let undelivered = result.undelivered_injections.clone();
            let _ = tx.send(StreamEvent::Complete { result: Box::new(result), undelivered_injections: undelivered });
        });
        rx
    }
}
