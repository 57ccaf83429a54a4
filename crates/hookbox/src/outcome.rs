//! What a run produced: [`RunResult`] (the run record the CLI's `--json`
//! prints), [`RunError`] with its partial record, why the run stopped
//! ([`StopReason`]) and what went wrong ([`RunErrorInfo`]), and the
//! [`StreamEvent`]s of a streamed run.

use hookbox_contract::{ApprovalRecord, DirectiveRecord, Event, HookFailure, HookLog, PluginStats, Suspension, Usage};
use hookbox_providers::Message;
use serde::{Deserialize, Serialize};

/// How a run ended when it did not raise an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model gave its final answer.
    EndTurn,
    /// The final response hit the token limit.
    MaxTokens,
    /// The provider filtered or refused the output.
    ContentFilter,
    /// Another provider stop reason.
    Other,
    /// A `run-start` hook returned `skip-run`: no model call was made.
    Skipped,
    /// A hook returned `reject` for the model's response.
    Rejected,
    /// The run raised an error (see `error`).
    Error,
}

/// What went wrong, in the run result's `error` field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunErrorInfo {
    /// A hook (or the embedder) aborted the run.
    Aborted {
        /// The reason given, if any.
        reason: Option<String>,
        /// The plugin that aborted.
        plugin: Option<String>,
        /// The event it aborted at.
        event: Option<String>,
    },
    /// The provider failed.
    Provider {
        /// The provider's message.
        message: String,
    },
    /// The model kept asking for tools, or hooks kept asking for retries, past `max_iterations`.
    MaxIterations {
        /// The limit.
        limit: u32,
        /// How many `retry`s hooks asked for in the run, the one refused
        /// included (seed 003: a retried call still counts toward `max_iterations`).
        #[serde(default)]
        retries: u32,
    },
}

impl std::fmt::Display for RunErrorInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunErrorInfo::Aborted { reason, plugin, event } => {
                write!(f, "run aborted")?;
                if let Some(p) = plugin {
                    write!(f, " by `{p}`")?;
                }
                if let Some(e) = event {
                    write!(f, " at `{e}`")?;
                }
                if let Some(r) = reason {
                    write!(f, ": {r}")?;
                }
                Ok(())
            }
            RunErrorInfo::Provider { message } => write!(f, "provider error: {message}"),
            RunErrorInfo::MaxIterations { limit, retries } if *retries > 0 => write!(
                f,
                "max_iterations = {limit} reached: hooks asked for {retries} {}, and each counts toward the limit",
                if *retries == 1 { "retry" } else { "retries" }
            ),
            RunErrorInfo::MaxIterations { limit, .. } => {
                write!(f, "the model asked for tools past max_iterations = {limit}")
            }
        }
    }
}

/// Everything a run produced. On an error it is the partial record, with
/// `error` set, `usage` the partial usage and `undelivered_injections` the
/// messages attached to the error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The run's id.
    pub run_id: String,
    /// The final answer's text (None when the run skipped, was rejected or failed).
    pub final_answer: Option<String>,
    /// How the run ended.
    pub stop_reason: StopReason,
    /// Iterations (tool roundtrips; 1 for a run with no tools). On an error: the iterations completed.
    pub iterations: u32,
    /// Model requests sent.
    pub requests: u32,
    /// Tokens and cost of every request.
    pub usage: Usage,
    /// Every event fired, in order, as the hooks first saw it.
    pub events: Vec<Event>,
    /// Every non-continue directive, honoured or ignored.
    pub directives: Vec<DirectiveRecord>,
    /// Every failed hook call.
    pub hook_failures: Vec<HookFailure>,
    /// Every line the hooks logged.
    pub hook_logs: Vec<HookLog>,
    /// Plugins skipped for the rest of the run (budget spent, crash-loop breaker).
    pub plugin_suspensions: Vec<Suspension>,
    /// What each plugin cost: calls, failures, fuel, time.
    pub plugin_stats: Vec<PluginStats>,
    /// Injected messages the model saw, in order.
    pub injected_messages: Vec<String>,
    /// Injected messages the run ended before delivering, in order.
    pub undelivered_injections: Vec<String>,
    /// The conversation, as the model saw it.
    pub messages: Vec<Message>,
    /// Every approval a hook asked for, with its answer, in order.
    #[serde(default)]
    pub approvals: Vec<ApprovalRecord>,
    /// Every `post-message` of the run's hooks, with its outcome at posting time.
    #[serde(default)]
    pub posts: Vec<crate::routing::PostRecord>,
    /// The error the run raised, if any.
    pub error: Option<RunErrorInfo>,
}

/// A run that raised an error. `report` is the partial record: usage,
/// iterations and undelivered injections as they stood .
#[derive(Debug, thiserror::Error)]
#[error("{info}")]
pub struct RunError {
    /// What went wrong.
    pub info: RunErrorInfo,
    /// The partial run record.
    pub report: Box<RunResult>,
}

/// What [`Agent::stream`] yields: hook events as they fire, text and thinking
/// deltas, then exactly one terminal [`StreamEvent::Complete`]. A stream never
/// raises: an abort or error is a [`StreamEvent::Error`] before the `Complete`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// A hook event, as it fired.
    Hook(Event),
    /// A piece of the model's text.
    TextDelta {
        /// The text.
        text: String,
    },
    /// A piece of the model's reasoning.
    ThinkingDelta {
        /// The text.
        text: String,
    },
    /// A tool call waits for the host's answer ([`crate::RunHandle::answer`]).
    Approval(hookbox_contract::Approval),
    /// The run raised an error (a stream never raises: an abort is an event).
    Error {
        /// The error's message.
        message: String,
        /// True when a hook or the handle aborted the run.
        aborted: bool,
        /// The abort's reason, if any.
        reason: Option<String>,
        /// What was really consumed: tokens and cost of the completed requests.
        partial: Usage,
        /// Iterations completed.
        iterations: u32,
    },
    /// The last event of every stream: the run record (partial after an error)
    /// and the messages it did not deliver.
    Complete {
        /// The run record.
        result: Box<RunResult>,
        /// Injected messages the run ended before delivering.
        undelivered_injections: Vec<String>,
    },
}

impl StreamEvent {
    /// The [`StreamEvent::Error`] of a turn that raised `e`: an abort's reason
    /// and the partial figures (seed 000: an abort under `stream()` is an event).
    pub(crate) fn from_error(e: &RunError) -> StreamEvent {
        let (aborted, reason) = match &e.info {
            RunErrorInfo::Aborted { reason, .. } => (true, reason.clone()),
            _ => (false, None),
        };
        StreamEvent::Error {
            message: e.info.to_string(),
            aborted,
            reason,
            partial: e.report.usage,
            iterations: e.report.iterations,
        }
    }
}

impl RunResult {
    /// The run record as `hookbox run --json` writes it (README, "CLI"):
    /// the serialised record with `iteration` on every event (null where the
    /// event has none). Also what `hookbox serve` returns for a run.
    pub fn record_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(events) = v.get_mut("events").and_then(|e| e.as_array_mut()) {
            events.iter_mut().for_each(with_iteration);
        }
        v
    }
}

/// An event as the run record lists it: `{type, iteration, ...payload}`,
/// `iteration` null where the event has none (`hookbox serve` streams them so).
pub fn event_json(event: &hookbox_contract::Event) -> serde_json::Value {
    let mut v = serde_json::to_value(event).unwrap_or(serde_json::Value::Null);
    with_iteration(&mut v);
    v
}

fn with_iteration(event: &mut serde_json::Value) {
    if let Some(obj) = event.as_object_mut() {
        obj.entry("iteration").or_insert(serde_json::Value::Null);
    }
}
