//! Names and common fields of events, directives and finish reasons.

use crate::{ContentBlock, Directive, Event, FinishReason};

/// The kebab-case names of all events, in firing order (as in the WIT and
/// in plugin configuration).
pub const EVENT_NAMES: [&str; 10] = [
    "run-start",
    "iteration-start",
    "request-start",
    "model-response",
    "tool-call-start",
    "before-tool-call",
    "tool-call-result",
    "iteration-complete",
    "final-answer",
    "run-end",
];

/// The event's kebab-case name, e.g. `"before-tool-call"`.
pub fn event_name(event: &Event) -> &'static str {
    match event {
        Event::RunStart(_) => "run-start",
        Event::IterationStart(_) => "iteration-start",
        Event::RequestStart(_) => "request-start",
        Event::ModelResponse(_) => "model-response",
        Event::ToolCallStart(_) => "tool-call-start",
        Event::BeforeToolCall(_) => "before-tool-call",
        Event::ToolCallResult(_) => "tool-call-result",
        Event::IterationComplete(_) => "iteration-complete",
        Event::FinalAnswer(_) => "final-answer",
        Event::RunEnd(_) => "run-end",
    }
}

/// The iteration the event belongs to, for the events that carry one (all
/// but `run-start`, `final-answer` and `run-end`).
pub fn event_iteration(event: &Event) -> Option<u32> {
    match event {
        Event::IterationStart(e) => Some(e.iteration),
        Event::RequestStart(e) => Some(e.iteration),
        Event::ModelResponse(e) => Some(e.iteration),
        Event::ToolCallStart(e) | Event::BeforeToolCall(e) => Some(e.iteration),
        Event::ToolCallResult(e) => Some(e.iteration),
        Event::IterationComplete(e) => Some(e.iteration),
        Event::RunStart(_) | Event::FinalAnswer(_) | Event::RunEnd(_) => None,
    }
}

/// The tool's name for the events about one tool call (`tool-call-start`,
/// `before-tool-call`, `tool-call-result`).
pub fn event_tool_name(event: &Event) -> Option<&str> {
    match event {
        Event::ToolCallStart(e) | Event::BeforeToolCall(e) => Some(&e.call.name),
        Event::ToolCallResult(e) => Some(&e.tool_name),
        _ => None,
    }
}

/// The directive's kebab-case name, e.g. `"skip-tool"`.
pub fn directive_name(directive: &Directive) -> &'static str {
    match directive {
        Directive::Continue => "continue",
        Directive::SkipTool(_) => "skip-tool",
        Directive::ReplaceArguments(_) => "replace-arguments",
        Directive::ReplaceResult(_) => "replace-result",
        Directive::ReplaceContent(_) => "replace-content",
        Directive::ReplaceUserContent(_) => "replace-user-content",
        Directive::InjectMessage(_) => "inject-message",
        Directive::Retry(_) => "retry",
        Directive::Reject(_) => "reject",
        Directive::SkipRun(_) => "skip-run",
        Directive::Pause => "pause",
        Directive::Abort(_) => "abort",
        #[cfg(not(feature = "wit-0-1-0"))]
        Directive::AskApproval(_) => "ask-approval",
        #[cfg(not(feature = "wit-0-1-0"))]
        Directive::SkipModelCall(_) => "skip-model-call",
        #[cfg(not(feature = "wit-0-1-0"))]
        Directive::PostMessage(_) => "post-message",
    }
}

/// The finish reason's kebab-case name, e.g. `"tool-call"`.
pub fn finish_reason_name(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::ToolCall => "tool-call",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content-filter",
        FinishReason::Other => "other",
    }
}

/// The text of all content blocks, joined without a separator.
pub fn content_text(content: &[ContentBlock]) -> String {
    content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.as_str(),
        })
        .collect()
}
