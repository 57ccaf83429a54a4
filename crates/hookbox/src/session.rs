//! [`Session`]: a multi-turn conversation. Each [`Session::run`] is a turn
//! (or a turn plus follow-up turns) with its own result and cost; the
//! conversation carries over, as do the session's hook instances.
//!
//! Late injections (`docs/contract.md`, "Injected messages"): a
//! message that arrives after the last turn boundary of a run is returned as
//! undelivered. With [`LateInjectionPolicy::NewTurn`] the session sends those
//! messages as the next turn itself, bounded by `max_follow_up_turns`, and
//! never after an error, an abort or a text it already sent.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::agent::{Agent, TurnContext};
use crate::handle::RunHandle;
use crate::outcome::{RunError, RunResult};
use hookbox_providers::Message;
use hookbox_sandbox::HookChain;

/// What a session does with injections a turn did not deliver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LateInjectionPolicy {
    /// Return them in the turn's `undelivered_injections` (the default).
    #[default]
    Surface,
    /// Send them, joined by a blank line, as the next turn.
    NewTurn,
}

/// Session settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionOptions {
    /// What to do with undelivered injections.
    pub late_injection_policy: LateInjectionPolicy,
    /// The most follow-up turns one `run` may add under `new_turn`. Default 3.
    pub max_follow_up_turns: u32,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions { late_injection_policy: LateInjectionPolicy::Surface, max_follow_up_turns: 3 }
    }
}

/// A conversation: an agent, the session's hooks and the history so far.
pub struct Session {
    agent: Arc<Agent>,
    hooks: HookChain,
    id: String,
    history: Vec<Message>,
    options: SessionOptions,
}

impl Session {
    /// A new session with a fresh id.
    pub fn new(agent: Arc<Agent>, hooks: HookChain, options: SessionOptions) -> Self {
        Session { agent, hooks, id: uuid::Uuid::new_v4().to_string(), history: Vec::new(), options }
    }

    /// The session's id (hooks see it in `run-start`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The conversation up to the last completed turn.
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// Runs one turn on `prompt`, then (under `new_turn`) follow-up turns for
    /// undelivered injections. Returns every turn's result, in order; the
    /// last one's `undelivered_injections` holds what was not sent.
    ///
    /// Errors: the first turn that raised; earlier turns' history is kept,
    /// the failed turn's is not (history persists up to the last
    /// completed turn).
    pub async fn run(&mut self, prompt: &str) -> Result<Vec<RunResult>, RunError> {
        self.run_with_handle(prompt, RunHandle::new()).await
    }

    /// As [`Session::run`], with a handle for the first turn (follow-up turns get their own).
    ///
    /// Errors: as [`Session::run`].
    pub async fn run_with_handle(&mut self, prompt: &str, handle: RunHandle) -> Result<Vec<RunResult>, RunError> {
        let mut turns = Vec::new();
        let mut sent_follow_ups: Vec<String> = Vec::new();
        let mut prompt = prompt.to_string();
        let mut handle = handle;
        loop {
            let context = TurnContext { session_id: self.id.clone(), history: self.history.clone() };
            let result = self.agent.run_turn(&prompt, &mut self.hooks, handle, context, None).await?;
            self.history.clone_from(&result.messages);
            let late = result.undelivered_injections.join("\n\n");
            turns.push(result);
            if self.options.late_injection_policy != LateInjectionPolicy::NewTurn || late.is_empty() {
                break;
            }
            if sent_follow_ups.len() >= self.options.max_follow_up_turns as usize {
                tracing::info!(
                    "not sending undelivered injections as a new turn: max_follow_up_turns = {} reached",
                    self.options.max_follow_up_turns
                );
                break;
            }
            if sent_follow_ups.contains(&late) {
                tracing::info!("not sending undelivered injections as a new turn: the same text was already sent");
                break;
            }
            sent_follow_ups.push(late.clone());
            prompt = late;
            handle = RunHandle::new();
        }
        Ok(turns)
    }
}
