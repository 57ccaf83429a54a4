//! Constructors for the [`Directive`]s that carry a value.
//!
//! `Directive::Continue`, `Directive::Pause`, `Directive::SkipTool(None)` (the
//! host's default message) and `Directive::Abort(None)` are written directly.
//! Each function names the events where the host honours the directive.

use crate::{ContentBlock, Directive};

/// `skip-tool`: do not run the tool; its slot is answered with a declined
/// result carrying `message`. Honoured at `before-tool-call`.
pub fn skip_tool(message: impl Into<String>) -> Directive {
    Directive::SkipTool(Some(message.into()))
}

/// `replace-arguments`: run the tool with `arguments` (a JSON object)
/// instead. Honoured at `before-tool-call`; anything but an object is a hook
/// failure.
pub fn replace_arguments(arguments: &serde_json::Value) -> Directive {
    Directive::ReplaceArguments(arguments.to_string())
}

/// `replace-result`: the model gets `text` as the tool's result instead.
/// Honoured at `tool-call-result`.
pub fn replace_result(text: impl Into<String>) -> Directive {
    Directive::ReplaceResult(text.into())
}

/// `replace-content`: replace the response's content with one text block.
/// Honoured at `model-response` and `final-answer`.
pub fn replace_content(text: impl Into<String>) -> Directive {
    Directive::ReplaceContent(vec![ContentBlock::Text(text.into())])
}

/// `replace-user-content`: start the run with one text block instead of the
/// user's content. Honoured at `run-start`.
pub fn replace_user_content(text: impl Into<String>) -> Directive {
    Directive::ReplaceUserContent(vec![ContentBlock::Text(text.into())])
}

/// `inject-message`: queue `text` as a user message, delivered at the next
/// turn boundary (or reported undelivered). Honoured at every event but
/// `request-start`, `final-answer` and `run-end`.
pub fn inject(text: impl Into<String>) -> Directive {
    Directive::InjectMessage(text.into())
}

/// `retry`: drop the response and ask again with `feedback`. Honoured at
/// `model-response` and `final-answer`.
pub fn retry(feedback: impl Into<String>) -> Directive {
    Directive::Retry(feedback.into())
}

/// `reject`: end the run with `reason`. Honoured at `model-response` and
/// `final-answer`.
pub fn reject(reason: impl Into<String>) -> Directive {
    Directive::Reject(reason.into())
}

/// `skip-run`: end the run before any model call, stop reason `skipped`.
/// Honoured at `run-start`.
pub fn skip_run(reason: impl Into<String>) -> Directive {
    Directive::SkipRun(reason.into())
}

/// `abort`: end the run with an aborted error carrying `reason`. Honoured at
/// every event but `request-start` and `run-end`.
pub fn abort(reason: impl Into<String>) -> Directive {
    Directive::Abort(Some(reason.into()))
}

/// `ask-approval`: park the tool call until the host approves, denies or
/// rewrites it; `reason` is shown to whoever answers. Honoured at
/// `before-tool-call`; a later hook's `skip-tool` or `abort` still wins.
/// (WIT 0.2.0.)
#[cfg(not(feature = "wit-0-1-0"))]
pub fn ask_approval(reason: impl Into<String>) -> Directive {
    Directive::AskApproval(reason.into())
}

/// `skip-model-call`: end the turn without calling the model, stop reason
/// `skipped`, `reason` as its answer. Honoured at `iteration-start`. (WIT 0.2.0.)
#[cfg(not(feature = "wit-0-1-0"))]
pub fn skip_model_call(reason: impl Into<String>) -> Directive {
    Directive::SkipModelCall(reason.into())
}

/// `post-message`: send `text` to the session `to` through the host's
/// message bus, if its routing policy lets this session post there
/// (default: nobody may). Honoured at every event. (WIT 0.2.0.)
#[cfg(not(feature = "wit-0-1-0"))]
pub fn post_message(to: impl Into<String>, text: impl Into<String>) -> Directive {
    Directive::PostMessage(crate::Post { to: to.into(), text: text.into() })
}
