//! Approvals of one tool call (seed 003's approvals, answered with
//! `turn.answer`; Claude Code's `ask`): a hook at `before-tool-call` answers
//! `ask-approval(reason)`, the run parks the call as an [`Approval`] under
//! an id, and the host answers it with an [`ApprovalAnswer`]. The run record
//! and the journal keep each answer as an [`ApprovalRecord`].

use serde::{Deserialize, Serialize};

use crate::ToolCall;

/// The most approvals one run may ask for; later asks are declined without
/// waiting (a hook cannot make a run wait for ever, one call at a time).
pub const MAX_APPROVALS_PER_RUN: usize = 1_000;

/// One hook's reason for asking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalReason {
    /// The plugin that asked.
    pub plugin: String,
    /// Its reason, as the hook wrote it (untrusted text: escape it to show it).
    pub reason: String,
}

/// A tool call waiting for the host's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    /// The approval's id: `{run_id}/{tool_call_id}`, the same on a replay.
    pub id: String,
    /// The session of the run that asked (a sub-agent's approval names the sub-session).
    pub session_id: String,
    /// The run (turn) that asked.
    pub run_id: String,
    /// The turn's number in its session (1-based), as in the event context.
    #[serde(default)]
    pub turn: u32,
    /// The iteration of the call.
    pub iteration: u32,
    /// The call, with the arguments it would run with (after any rewrite).
    pub call: ToolCall,
    /// Why, per hook that asked, in chain order.
    pub reasons: Vec<ApprovalReason>,
}

/// The host's answer to an [`Approval`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", content = "value", rename_all = "snake_case")]
pub enum ApprovalAnswer {
    /// Run the call as it stands.
    Approve,
    /// Do not run it: the slot gets a declined result with this reason (or a
    /// default) and the run goes on.
    Deny(Option<String>),
    /// Run it with these arguments (a JSON object in text) instead; the
    /// history shows them, as for `replace-arguments`.
    ApproveWithArguments(String),
}

/// Who or what answered an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnsweredBy {
    /// The host, through the run handle (a person, a UI, a policy).
    Host,
    /// The journal, on a replay.
    Journal,
    /// No answer came within `pause_timeout_ms` and `on_pause_timeout = "resume"`:
    /// the call was denied and the run went on.
    Timeout,
    /// Nothing could answer (no other handle, no pause timeout): denied.
    Nobody,
    /// The run's limit of approvals ([`MAX_APPROVALS_PER_RUN`]) was reached: denied.
    Limit,
}

/// An answered approval, in the run record (`approvals`) and the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// The approval's id.
    pub id: String,
    /// The tool's name.
    pub tool: String,
    /// The call's id.
    pub tool_call_id: String,
    /// Why the hooks asked.
    pub reasons: Vec<ApprovalReason>,
    /// The answer the run applied.
    pub answer: ApprovalAnswer,
    /// Where the answer came from.
    pub answered_by: AnsweredBy,
}
