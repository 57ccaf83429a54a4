//! [`Session`]: a multi-turn conversation. Each [`Session::run`] is a turn
//! (or a turn plus follow-up turns) with its own result and cost; the
//! conversation carries over, as do the session's hook instances. With a
//! [`ConversationStore`] ([`Session::open`]) the conversation outlives the
//! process: it is saved after every completed turn, and a session opened
//! again under the same id continues from it.
//!
//! Late injections (`docs/contract.md`, "Injected messages"): a
//! message that arrives after the last turn boundary of a run is returned as
//! undelivered. With [`LateInjectionPolicy::NewTurn`] the session sends those
//! messages as the next turn itself, bounded by `max_follow_up_turns`, and
//! never after an error, an abort or a text it already sent. One
//! [`RunHandle`] steers every turn of a `run` call, follow-ups included: it
//! finishes when the last turn ends.

use std::sync::Arc;

use crate::agent::{Agent, StreamSink, TurnContext};
use crate::config::{LateInjectionPolicy, SessionOptions};
use crate::conversation::{self, ConversationStore, ConversationStoreError};
use crate::handle::{QueueAtEnd, RunHandle};
use crate::outcome::{RunError, RunResult, StreamEvent};
use crate::routing::MessageBus;
use hookbox_contract::Usage;
use hookbox_providers::Message;
use hookbox_sandbox::HookChain;

/// Why a session's `run` stopped early. The turns that completed before are
/// kept: in `completed`, in the session's history and (with a store) saved.
#[derive(Debug)]
pub struct SessionError {
    /// Every turn of this `run` call that completed, in order (with a
    /// [`SessionFailure::Store`], the turn whose save failed is the last).
    pub completed: Vec<RunResult>,
    /// What went wrong.
    pub failure: SessionFailure,
}

/// What stopped a session's `run`.
#[derive(Debug, thiserror::Error)]
pub enum SessionFailure {
    /// A turn raised (an abort, a provider error, the iteration limit); its
    /// partial record is the error's `report`, and it is not in the history.
    #[error(transparent)]
    Turn(Box<RunError>),
    /// A turn completed but its conversation could not be saved.
    #[error(transparent)]
    Store(ConversationStoreError),
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.failure.fmt(f)
    }
}

impl std::error::Error for SessionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.failure)
    }
}

impl SessionError {
    /// The turn's error, when a turn raised.
    pub fn run_error(&self) -> Option<&RunError> {
        match &self.failure {
            SessionFailure::Turn(e) => Some(e),
            SessionFailure::Store(_) => None,
        }
    }
}

/// A conversation: an agent, the session's hooks and the history so far.
pub struct Session {
    agent: Arc<Agent>,
    hooks: HookChain,
    id: String,
    history: Vec<Message>,
    options: SessionOptions,
    store: Option<Arc<dyn ConversationStore>>,
    /// The store's revision of `history` (0: nothing saved yet).
    revision: u64,
    /// What every turn cost, aborted and failed turns' partial figures included.
    usage: Usage,
    /// Turns run, failed ones included.
    turns: u32,
    /// Turns saved before this process opened the session (the stored revision: one save per turn).
    turns_before: u32,
    /// The message bus the session joined ([`Session::join`]).
    bus: Option<Arc<MessageBus>>,
}

impl Session {
    /// A new session with a fresh id, its conversation in memory.
    pub fn new(agent: Arc<Agent>, hooks: HookChain, options: SessionOptions) -> Self {
        Session {
            agent,
            hooks,
            id: uuid::Uuid::new_v4().to_string(),
            history: Vec::new(),
            options,
            store: None,
            revision: 0,
            usage: Usage::default(),
            turns: 0,
            turns_before: 0,
            bus: None,
        }
    }

    /// A new session with the id `id` (hooks see it in `run-start`; it keys
    /// their saved state), its conversation in memory.
    ///
    /// Errors: [`ConversationStoreError::InvalidId`]: an empty id, one over
    /// 256 bytes or with control characters.
    pub fn with_id(
        agent: Arc<Agent>,
        hooks: HookChain,
        id: &str,
        options: SessionOptions,
    ) -> Result<Self, ConversationStoreError> {
        conversation::check_session_id(id)?;
        Ok(Session { id: id.to_string(), ..Session::new(agent, hooks, options) })
    }

    /// The session `id` of `store`: its stored conversation if it has one
    /// (the turns completed and saved by earlier runs, in any process),
    /// else a new one created under that id. Every completed turn is saved.
    /// Blocks on the store: call it where blocking is allowed.
    ///
    /// Errors: the store's ([`ConversationStoreError`]): an invalid id, a
    /// stored conversation too large or not valid, the backend failing.
    pub fn open(
        agent: Arc<Agent>,
        hooks: HookChain,
        id: &str,
        store: Arc<dyn ConversationStore>,
        options: SessionOptions,
    ) -> Result<Self, ConversationStoreError> {
        conversation::check_session_id(id)?;
        let stored = store.load(id)?;
        Ok(Session {
            id: id.to_string(),
            history: stored.messages,
            revision: stored.revision,
            turns_before: u32::try_from(stored.revision).unwrap_or(u32::MAX),
            store: Some(store),
            ..Session::new(agent, hooks, options)
        })
    }

    /// Joins `bus` under the session's id: other sessions' hooks can post to
    /// it (as the bus's routing policy allows), and its hooks can post to
    /// them. A message posted while a turn runs goes into that turn's queue;
    /// one posted while the session is idle waits for its next turn.
    pub fn join(&mut self, bus: Arc<MessageBus>) {
        bus.register(&self.id);
        self.bus = Some(bus);
    }

    /// The session's id (hooks see it in `run-start`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The conversation up to the last completed turn.
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// What the session's turns have cost so far: every completed turn, and
    /// the partial figures of turns that raised (seed 000: a session banks
    /// an aborted turn's spend).
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Turns run so far in this process, failed ones included.
    pub fn turns(&self) -> u32 {
        self.turns
    }

    /// The number the next turn gets (hooks see it in the event context):
    /// the turns saved before the store was opened (its revision: one save
    /// per completed turn), plus the turns run in this process, plus 1.
    pub fn turn_number(&self) -> u32 {
        self.turns_before.saturating_add(self.turns).saturating_add(1)
    }

    /// Runs one turn on `prompt`, then (under `new_turn`) follow-up turns for
    /// undelivered injections. Returns every turn's result, in order; the
    /// last one's `undelivered_injections` holds what was not sent.
    ///
    /// Errors: [`SessionError`] holding the turns that completed before a
    /// turn raised or a save failed; the history keeps every completed turn,
    /// never the failed one's (history persists up to the last completed turn).
    pub async fn run(&mut self, prompt: &str) -> Result<Vec<RunResult>, SessionError> {
        self.run_with_handle(prompt, RunHandle::new()).await
    }

    /// As [`Session::run`], steered by `handle` (keep a clone): it pauses,
    /// aborts and injects into whichever turn of this call is running, the
    /// follow-up turns included, and finishes when the last turn ends. An
    /// abort also stops any further follow-up turn.
    ///
    /// Errors: as [`Session::run`].
    pub async fn run_with_handle(&mut self, prompt: &str, handle: RunHandle) -> Result<Vec<RunResult>, SessionError> {
        self.run_turns(prompt, handle, None).await
    }

    /// Runs [`Session::run`] in a task and returns its stream: each turn's
    /// hook events and text deltas, then that turn's
    /// [`StreamEvent::Complete`]. Never raises: a turn that raises (an abort
    /// included) or a failed save is a [`StreamEvent::Error`] followed by
    /// the terminal `Complete`, and the turn's spend is banked in
    /// [`Session::usage`]. [`SessionStream::into_session`] gives the session
    /// back once the stream has ended.
    pub fn stream(mut self, prompt: String, handle: RunHandle) -> SessionStream {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let sink: StreamSink = Arc::new(move |e| {
                let _ = tx.send(e);
            });
            // Every outcome has been sent as events.
            let _ = self.run_turns(&prompt, handle, Some(sink)).await;
            self
        });
        SessionStream { events: rx, task }
    }

    async fn run_turns(
        &mut self,
        prompt: &str,
        handle: RunHandle,
        sink: Option<StreamSink>,
    ) -> Result<Vec<RunResult>, SessionError> {
        let emit = |e: StreamEvent| {
            if let Some(sink) = &sink {
                sink(e);
            }
        };
        // Only a stream needs the copy of each record.
        let complete = |result: &RunResult| {
            if let Some(sink) = &sink {
                let undelivered = result.undelivered_injections.clone();
                sink(StreamEvent::Complete { result: Box::new(result.clone()), undelivered_injections: undelivered });
            }
        };
        let mut turns = Vec::new();
        let mut sent_follow_ups: Vec<String> = Vec::new();
        let mut prompt = prompt.to_string();
        loop {
            let context = TurnContext {
                session_id: self.id.clone(),
                history: self.history.clone(),
                bus: self.bus.clone(),
                turn: self.turn_number(),
            };
            if let Some(bus) = &self.bus {
                // Messages that waited in the inbox go into this turn.
                bus.attach(&self.id, &handle);
            }
            let outcome =
                self.agent.run_turn(&prompt, &mut self.hooks, &handle, context, sink.clone(), QueueAtEnd::Drain).await;
            self.turns += 1;
            let mut result = match outcome {
                Ok(result) => result,
                Err(e) => {
                    self.settle(&e.report, true);
                    // The turn closed the handle; its spend is banked, its messages are not kept.
                    self.usage.add(&e.report.usage);
                    emit(StreamEvent::from_error(&e));
                    complete(&e.report);
                    return Err(SessionError { completed: turns, failure: SessionFailure::Turn(Box::new(e)) });
                }
            };
            self.usage.add(&result.usage);
            self.history.clone_from(&result.messages);
            if let Err(e) = self.save().await {
                result.undelivered_injections.extend(handle.close());
                self.settle(&result, false);
                emit(StreamEvent::Error {
                    message: e.to_string(),
                    aborted: false,
                    reason: None,
                    partial: result.usage,
                    iterations: result.iterations,
                });
                complete(&result);
                turns.push(result);
                return Err(SessionError { completed: turns, failure: SessionFailure::Store(e) });
            }
            let late = result.undelivered_injections.join("\n\n");
            let follow_up = self.follow_up(&late, &sent_follow_ups, &handle);
            if !follow_up {
                // Anything injected after the turn's end and before this close is the turn's too.
                result.undelivered_injections.extend(handle.close());
            }
            self.settle(&result, false);
            complete(&result);
            turns.push(result);
            if !follow_up {
                return Ok(turns);
            }
            sent_follow_ups.push(late.clone());
            prompt = late;
        }
    }

    /// Settles the bus messages a turn delivered or left undelivered (`raised`: attached to its error).
    fn settle(&self, record: &RunResult, raised: bool) {
        if let Some(bus) = &self.bus {
            bus.settle(&self.id, &record.injected_messages, &record.undelivered_injections, raised);
        }
    }

    /// Whether `late` (a turn's undelivered injections) becomes the next turn.
    fn follow_up(&self, late: &str, sent: &[String], handle: &RunHandle) -> bool {
        if self.options.late_injection_policy != LateInjectionPolicy::NewTurn || late.is_empty() {
            return false;
        }
        if handle.abort_requested().is_some() {
            tracing::info!("not sending undelivered injections as a new turn: the session was aborted");
            return false;
        }
        if sent.len() >= self.options.max_follow_up_turns as usize {
            tracing::info!(
                "not sending undelivered injections as a new turn: max_follow_up_turns = {} reached",
                self.options.max_follow_up_turns
            );
            return false;
        }
        if sent.iter().any(|s| s == late) {
            tracing::info!("not sending undelivered injections as a new turn: the same text was already sent");
            return false;
        }
        true
    }

    /// Saves the history (a completed turn) to the store, if there is one.
    async fn save(&mut self) -> Result<(), ConversationStoreError> {
        let Some(store) = self.store.clone() else { return Ok(()) };
        let (id, messages, expected) = (self.id.clone(), self.history.clone(), self.revision);
        let saved = tokio::task::spawn_blocking(move || store.save(&id, &messages, expected))
            .await
            .map_err(|e| ConversationStoreError::Backend { store: "conversation store".into(), source: Box::new(e) })?;
        self.revision = saved?;
        Ok(())
    }
}

/// A session's stream ([`Session::stream`]).
pub struct SessionStream {
    events: tokio::sync::mpsc::UnboundedReceiver<StreamEvent>,
    task: tokio::task::JoinHandle<Session>,
}

impl SessionStream {
    /// The next event; `None` once the last turn's `Complete` has been taken.
    pub async fn next(&mut self) -> Option<StreamEvent> {
        self.events.recv().await
    }

    /// Waits for the run to end and gives the session back (with the
    /// history and banked spend of every turn). `None` only if the run's
    /// task panicked.
    pub async fn into_session(self) -> Option<Session> {
        self.task.await.ok()
    }

    /// Drops the run where it stands (a run parked with its checkpoint, to
    /// be resumed elsewhere): its task is cancelled at its current wait, and
    /// this returns once the task, its hooks and their instances are gone.
    /// Nothing more is saved.
    pub async fn abandon(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}
