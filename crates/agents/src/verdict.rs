//! [`Verdict`]: a chain's [`Decision`] read the way an outside agent can act
//! on it. Every format's answer is written from one of these.

use hookbox::contract::DECLINED_TOOL_MESSAGE;
use hookbox::{ContentBlock, Directive};
use serde_json::Value;

use crate::Decision;

/// What the chain asks of the agent, format-independent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// `skip-tool`: do not run the tool; the reason goes to the model.
    pub deny: Option<String>,
    /// `abort`, `reject`, `skip-run` or `skip-model-call`: end the agent's run with this reason.
    pub stop: Option<String>,
    /// `ask-approval` (the hooks' reasons, one line each) or `pause`: a person decides.
    pub ask: Option<String>,
    /// `replace-arguments`: the tool's new input, a JSON object.
    pub arguments: Option<Value>,
    /// `replace-result`: the text the model gets instead of the tool's result.
    pub result: Option<String>,
    /// `retry`: the feedback the agent should keep working with instead of stopping.
    pub retry: Option<String>,
    /// `inject-message`s, and a `replace-user-content` or `replace-content`
    /// (which no agent can apply in place), as context for the model, in order.
    pub context: Vec<String>,
}

impl Verdict {
    /// Reads `decision`.
    pub fn of(decision: &Decision) -> Self {
        let mut v = Verdict::default();
        match &decision.terminal {
            Some(Directive::SkipTool(reason)) => {
                v.deny = Some(reason.clone().unwrap_or_else(|| DECLINED_TOOL_MESSAGE.to_string()));
            }
            Some(Directive::Abort(reason)) => {
                v.stop = Some(reason.clone().unwrap_or_else(|| "a hook aborted the run".to_string()));
            }
            Some(Directive::Reject(reason) | Directive::SkipRun(reason) | Directive::SkipModelCall(reason)) => {
                v.stop = Some(reason.clone());
            }
            _ => {}
        }
        if !decision.approvals.is_empty() {
            let reasons: Vec<String> =
                decision.approvals.iter().map(|a| format!("{}: {}", a.plugin, a.reason)).collect();
            v.ask = Some(reasons.join("\n"));
        } else if decision.pause {
            v.ask = Some("a hook paused the run: a person decides whether it goes on".to_string());
        }
        // A rewrite that is not a JSON object is never passed on (the chain checks it too).
        v.arguments = decision
            .replace_arguments
            .as_deref()
            .and_then(|a| serde_json::from_str::<Value>(a).ok())
            .filter(Value::is_object);
        v.result = decision.replace_result.clone();
        v.retry = decision.retry.clone();
        if let Some(user) = &decision.replace_user_content {
            v.context.push(format!("A hook rewrote the user's message to: {}", ContentBlock::join_text(user)));
        }
        if let Some(content) = &decision.replace_content {
            v.context.push(format!("A hook replaced the answer with: {}", ContentBlock::join_text(content)));
        }
        v.context.extend(decision.injections.iter().cloned());
        v
    }

    /// The context as one text (blank lines between), or `None` when there is none.
    pub fn context_text(&self) -> Option<String> {
        (!self.context.is_empty()).then(|| self.context.join("\n\n"))
    }
}
