//! The approval of one tool call (`docs/contract.md`, "Approvals"): a hook
//! at `before-tool-call` answered `ask-approval`, so the call waits under an
//! approval id for the host's answer (the run handle), the journal's (a
//! replay) or the pause-timeout policy's, and the answer is recorded.

use std::time::Duration;

use hookbox_contract::{AnsweredBy, Approval, ApprovalAnswer, ApprovalRecord, MAX_APPROVALS_PER_RUN, ToolCall};
use hookbox_sandbox::Decision;

use super::Run;
use crate::handle::{ApprovalWait, PauseTimeout, check_arguments};
use crate::outcome::{RunErrorInfo, StreamEvent};

/// What a denied call's slot says when the answer gives no reason.
pub const NOT_APPROVED_MESSAGE: &str = "Tool call declined: the host did not approve it.";

/// What the answer lets the call do.
pub(super) enum Approved {
    /// Run it, with these arguments when the answer gave some.
    Run(Option<String>),
    /// Do not run it; the slot gets this text.
    Deny(String),
}

impl Run<'_> {
    /// Asks for the approval `decision` holds and waits for the answer.
    ///
    /// Errors: the run was aborted while it waited, or the pause timeout
    /// passed with `on_pause_timeout = "abort"`.
    pub(super) async fn approval(
        &mut self,
        iteration: u32,
        call: &ToolCall,
        decision: &Decision,
    ) -> Result<Approved, RunErrorInfo> {
        let arguments = decision.replace_arguments.clone().unwrap_or_else(|| call.arguments.clone());
        let approval = Approval {
            id: format!("{}/{}", self.rec.run_id, call.id),
            session_id: self.session_id.clone(),
            run_id: self.rec.run_id.clone(),
            turn: self.context.turn,
            iteration,
            call: ToolCall { arguments, ..call.clone() },
            reasons: decision.approvals.clone(),
        };
        let journal = self.agent.journal.clone();
        let replay = journal.as_ref().filter(|j| j.is_replaying());
        // A resumed run takes the answer its checkpoint holds (it is journaled already).
        let resumed = journal.as_ref().and_then(|j| j.resumed_approval(&approval.id));
        let (answer, answered_by) = if let Some(recorded) = &resumed {
            (recorded.answer.clone(), recorded.answered_by)
        } else if self.rec.approvals.len() >= MAX_APPROVALS_PER_RUN {
            let why = format!("Tool call declined: this run already asked for {MAX_APPROVALS_PER_RUN} approvals.");
            (ApprovalAnswer::Deny(Some(why)), AnsweredBy::Limit)
        } else if let Some(journal) = replay {
            match journal.take_approval(&approval.id) {
                Some(recorded) => (recorded.answer, AnsweredBy::Journal),
                None => {
                    let why = "Tool call declined: replay: the recorded run has no answer to this approval.";
                    (ApprovalAnswer::Deny(Some(why.into())), AnsweredBy::Journal)
                }
            }
        } else {
            if let Some(observer) = &self.observer {
                observer(StreamEvent::Approval(approval.clone()));
            }
            let timeout = self.agent.config.pause_timeout_ms.map(Duration::from_millis);
            let aborted =
                |reason| RunErrorInfo::Aborted { reason, plugin: None, event: Some("before-tool-call".into()) };
            // An approval that ends the run is still listed, denied, with why.
            let ended = |reason: &Option<String>, by: AnsweredBy| ApprovalRecord {
                id: approval.id.clone(),
                tool: call.name.clone(),
                tool_call_id: call.id.clone(),
                reasons: approval.reasons.clone(),
                answer: ApprovalAnswer::Deny(Some(format!(
                    "Tool call not run: the run was aborted while it waited ({}).",
                    reason.as_deref().unwrap_or("no reason given")
                ))),
                answered_by: by,
            };
            match self.handle.wait_for_approval(approval.clone(), timeout).await {
                ApprovalWait::Answered(answer) => (answer, AnsweredBy::Host),
                ApprovalWait::Abort(reason) => {
                    self.rec.approvals.push(ended(&reason, AnsweredBy::Host));
                    return Err(aborted(reason));
                }
                ApprovalWait::TimedOut => {
                    let waited = timeout.map(|t| t.as_millis()).unwrap_or_default();
                    match self.agent.config.on_pause_timeout {
                        PauseTimeout::Abort => {
                            let reason = Some(format!(
                                "the approval of `{}` was not answered within {waited} ms (pause timeout)",
                                call.name
                            ));
                            self.rec.approvals.push(ended(&reason, AnsweredBy::Timeout));
                            return Err(aborted(reason));
                        }
                        PauseTimeout::Resume => {
                            let why = format!("Tool call declined: its approval was not answered within {waited} ms.");
                            (ApprovalAnswer::Deny(Some(why)), AnsweredBy::Timeout)
                        }
                    }
                }
                ApprovalWait::Nobody => (ApprovalAnswer::Deny(None), AnsweredBy::Nobody),
            }
        };
        // A journal is untrusted input: arguments that are not an object deny the call.
        let answer = match &answer {
            ApprovalAnswer::ApproveWithArguments(args) => match check_arguments(args) {
                Ok(()) => answer,
                Err(e) => ApprovalAnswer::Deny(Some(format!("Tool call declined: {e}"))),
            },
            _ => answer,
        };
        let record = ApprovalRecord {
            id: approval.id,
            tool: call.name.clone(),
            tool_call_id: call.id.clone(),
            reasons: approval.reasons,
            answer: answer.clone(),
            answered_by,
        };
        if let Some(journal) = journal.as_ref().filter(|_| resumed.is_none()) {
            journal.push_approval(record.clone());
        }
        self.rec.approvals.push(record);
        Ok(match answer {
            ApprovalAnswer::Approve => Approved::Run(None),
            ApprovalAnswer::ApproveWithArguments(args) => Approved::Run(Some(args)),
            ApprovalAnswer::Deny(reason) => Approved::Deny(reason.unwrap_or_else(|| NOT_APPROVED_MESSAGE.to_string())),
        })
    }
}
