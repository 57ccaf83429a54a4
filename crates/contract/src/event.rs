//! Host-side events and directives: the same shapes as the WIT world
//! (`wit/hook.wit`, `hookbox:hooks/types@0.2.0`), with serde for the run
//! trace (`--json`) and golden files.
//!
//! JSON shape: an event is an object tagged by `type` with the WIT case name
//! (`"run-start"`, `"before-tool-call"`, …) and snake_case fields; a directive
//! is tagged by `action` (`"skip-tool"`, `"inject-message"`, …) with its
//! payload in `value`.

use serde::{Deserialize, Serialize};

use crate::tool::{FinishReason, ToolCall, Usage};

/// One block of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "text", rename_all = "kebab-case")]
pub enum ContentBlock {
    /// Plain text.
    Text(String),
}

impl ContentBlock {
    /// Joins the text of `blocks`, in order, with no separator.
    pub fn join_text(blocks: &[ContentBlock]) -> String {
        blocks
            .iter()
            .map(|b| match b {
                ContentBlock::Text(t) => t.as_str(),
            })
            .collect()
    }
}

/// Something that happened in the agent loop (`docs/contract.md`, "Events").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Event {
    /// Once, before the first model request.
    RunStart {
        /// This run's id (UUID).
        run_id: String,
        /// The session's id (UUID).
        session_id: String,
        /// The model name.
        model: String,
        /// The provider name.
        provider: String,
        /// The user's content.
        user_content: Vec<ContentBlock>,
    },
    /// Before every model request of the tool loop; a roundtrip announces its number twice.
    IterationStart {
        /// The iteration (1-based).
        iteration: u32,
        /// Model requests started so far, this one included (1-based).
        loop_counter: u32,
    },
    /// Opt-in, just before each provider request; observation only.
    RequestStart {
        /// Requests so far, this one included (1-based).
        request_index: u32,
        /// The iteration.
        iteration: u32,
        /// Attempt number (1 = first try).
        attempt: u32,
        /// `initial` or `follow-up`.
        purpose: String,
        /// The model name.
        model: String,
        /// The provider name.
        provider: String,
    },
    /// After each model response, before its tool calls run.
    ModelResponse {
        /// The iteration the request belonged to.
        iteration: u32,
        /// The text.
        text: String,
        /// The content blocks.
        content: Vec<ContentBlock>,
        /// The tool calls.
        tool_calls: Vec<ToolCall>,
        /// Reasoning text.
        reasoning: String,
        /// Why the model stopped.
        finish_reason: FinishReason,
        /// What this request billed.
        usage: Option<Usage>,
    },
    /// The model asked for a tool (announcement).
    ToolCallStart {
        /// The iteration.
        iteration: u32,
        /// The call.
        call: ToolCall,
    },
    /// Veto point, immediately before dispatch.
    BeforeToolCall {
        /// The iteration.
        iteration: u32,
        /// The call.
        call: ToolCall,
    },
    /// A tool finished or was declined.
    ToolCallResult {
        /// The iteration.
        iteration: u32,
        /// The tool's name.
        tool_name: String,
        /// The call's id.
        tool_call_id: String,
        /// The first characters of the result (500 by default), cut on a character boundary.
        result: String,
        /// True when `result` was cut.
        truncated: bool,
        /// False when the tool failed, was refused or declined.
        success: bool,
        /// How long the tool ran, in milliseconds.
        duration_ms: u64,
        /// What the tool reported spending, in US dollars.
        reported_cost: Option<f64>,
        /// True when `reported_cost` is the tool's estimate, not a billed figure
        /// (seed 000's `tool_reported_cost_estimated`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cost_estimated: bool,
        /// The arguments the call ran with (or would have: a declined call's),
        /// after any rewrite or approval; JSON object text (seed 003).
        #[serde(default)]
        arguments: String,
        /// The whole result (after `max_tool_result_chars`) when the agent's
        /// `tool_result_preview_chars` is 0 (seed 000's `result_data`); none otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result_data: Option<String>,
    },
    /// A roundtrip's follow-up response arrived (or the only response of a run without tools).
    IterationComplete {
        /// The iteration.
        iteration: u32,
        /// Billed since the previous `iteration-complete`.
        usage: Usage,
        /// Tools called in this iteration, in order.
        tools_called: Vec<String>,
        /// Why the follow-up stopped.
        stop_reason: FinishReason,
    },
    /// The final answer, before it is returned.
    FinalAnswer {
        /// The text.
        text: String,
        /// The content blocks.
        content: Vec<ContentBlock>,
        /// Why the model stopped.
        finish_reason: FinishReason,
        /// The run's usage so far.
        usage: Usage,
        /// The response's tool calls: none, unless the token limit cut the
        /// response (its calls are then not run) (seed 003's `tool_calls`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// The response's reasoning (thinking) text, empty if none.
        #[serde(default)]
        reasoning: String,
    },
    /// Once, after the result is assembled (not when the run raised an error).
    RunEnd {
        /// Iterations the run had.
        iterations: u32,
        /// Total usage.
        usage: Usage,
        /// The error, if any.
        error: Option<String>,
    },
}

/// The kind of an [`Event`], without its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// `run-start`
    RunStart,
    /// `iteration-start`
    IterationStart,
    /// `request-start`
    RequestStart,
    /// `model-response`
    ModelResponse,
    /// `tool-call-start`
    ToolCallStart,
    /// `before-tool-call`
    BeforeToolCall,
    /// `tool-call-result`
    ToolCallResult,
    /// `iteration-complete`
    IterationComplete,
    /// `final-answer`
    FinalAnswer,
    /// `run-end`
    RunEnd,
}

impl EventKind {
    /// How many kinds there are.
    pub const COUNT: usize = 10;

    /// Every kind, in firing order of a run with tools.
    pub const ALL: [EventKind; EventKind::COUNT] = [
        EventKind::RunStart,
        EventKind::IterationStart,
        EventKind::RequestStart,
        EventKind::ModelResponse,
        EventKind::ToolCallStart,
        EventKind::BeforeToolCall,
        EventKind::ToolCallResult,
        EventKind::IterationComplete,
        EventKind::FinalAnswer,
        EventKind::RunEnd,
    ];

    /// This kind's position in [`EventKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// True for the events whose hooks can only observe (`docs/contract.md`: only
    /// `continue` is valid at `request-start` and `run-end`).
    pub fn is_observation(self) -> bool {
        matches!(self, EventKind::RequestStart | EventKind::RunEnd)
    }

    /// The WIT case name, e.g. `before-tool-call`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::RunStart => "run-start",
            EventKind::IterationStart => "iteration-start",
            EventKind::RequestStart => "request-start",
            EventKind::ModelResponse => "model-response",
            EventKind::ToolCallStart => "tool-call-start",
            EventKind::BeforeToolCall => "before-tool-call",
            EventKind::ToolCallResult => "tool-call-result",
            EventKind::IterationComplete => "iteration-complete",
            EventKind::FinalAnswer => "final-answer",
            EventKind::RunEnd => "run-end",
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Event {
    /// This event's kind.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::RunStart { .. } => EventKind::RunStart,
            Event::IterationStart { .. } => EventKind::IterationStart,
            Event::RequestStart { .. } => EventKind::RequestStart,
            Event::ModelResponse { .. } => EventKind::ModelResponse,
            Event::ToolCallStart { .. } => EventKind::ToolCallStart,
            Event::BeforeToolCall { .. } => EventKind::BeforeToolCall,
            Event::ToolCallResult { .. } => EventKind::ToolCallResult,
            Event::IterationComplete { .. } => EventKind::IterationComplete,
            Event::FinalAnswer { .. } => EventKind::FinalAnswer,
            Event::RunEnd { .. } => EventKind::RunEnd,
        }
    }

    /// The iteration the event belongs to, for events that carry one.
    pub fn iteration(&self) -> Option<u32> {
        match self {
            Event::IterationStart { iteration, .. }
            | Event::RequestStart { iteration, .. }
            | Event::ModelResponse { iteration, .. }
            | Event::ToolCallStart { iteration, .. }
            | Event::BeforeToolCall { iteration, .. }
            | Event::ToolCallResult { iteration, .. }
            | Event::IterationComplete { iteration, .. } => Some(*iteration),
            Event::RunStart { .. } | Event::FinalAnswer { .. } | Event::RunEnd { .. } => None,
        }
    }
}

/// What a hook asks the loop to do (`docs/contract.md`, "Directives").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", content = "value", rename_all = "kebab-case")]
pub enum Directive {
    /// Nothing changes.
    Continue,
    /// Do not run the tool; answer its slot with the message (default [`DECLINED_TOOL_MESSAGE`]).
    SkipTool(Option<String>),
    /// Run the tool with these JSON arguments instead.
    ReplaceArguments(String),
    /// The model gets this result text instead.
    ReplaceResult(String),
    /// Replace the response's content.
    ReplaceContent(Vec<ContentBlock>),
    /// Start the run with this user content instead.
    ReplaceUserContent(Vec<ContentBlock>),
    /// Queue a user message for the next turn boundary.
    InjectMessage(String),
    /// Drop the response and ask again with this feedback.
    Retry(String),
    /// End the run with this reason.
    Reject(String),
    /// End the run before any model call, stop reason `skipped`.
    SkipRun(String),
    /// Block at the next safe point until resumed.
    Pause,
    /// End the run with an aborted error carrying the reason.
    Abort(Option<String>),
    /// Post `text` to the session named `to` through the host's message bus
    /// (seed 000's sub-agent routing), if the routing policy lets this
    /// session post there; valid at every event. (WIT 0.2.0; native hooks today.)
    PostMessage {
        /// The target session's id.
        to: String,
        /// The message.
        text: String,
    },
    /// `iteration-start`: end the turn without calling the model, stop
    /// reason `skipped`, the text as its answer (seed 003's `pre_llm_call`
    /// skip). (WIT 0.2.0; native hooks today.)
    SkipModelCall(String),
    /// `before-tool-call`: park the call until the host approves it, denies
    /// it or approves it with other arguments; the text is the hook's reason,
    /// shown to whoever answers. (WIT 0.2.0; native hooks today.)
    AskApproval(String),
}

/// The text that answers a declined tool call when `skip-tool` carries no
/// message (a declined call's slot is always answered).
pub const DECLINED_TOOL_MESSAGE: &str = "Tool call declined by the host application.";

/// Content blocks an abridged directive keeps ([`Directive::abridged`]).
pub const ABRIDGED_BLOCKS: usize = 4;

impl Directive {
    /// The WIT case name, e.g. `skip-tool`.
    pub fn action(&self) -> &'static str {
        match self {
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
            Directive::AskApproval(_) => "ask-approval",
            Directive::SkipModelCall(_) => "skip-model-call",
            Directive::PostMessage { .. } => "post-message",
        }
    }

    /// Whether the contract's table (`docs/contract.md`) lets `kind` honour this directive.
    /// `continue` is valid everywhere; `request-start` and `run-end` take nothing else.
    pub fn valid_at(&self, kind: EventKind) -> bool {
        use Directive as D;
        use EventKind as K;
        match self {
            D::Continue => true,
            // Valid anywhere (seed 000); after the last turn boundary it is reported undelivered.
            D::InjectMessage(_) | D::PostMessage { .. } => true,
            D::Pause | D::Abort(_) => !matches!(kind, K::RequestStart | K::RunEnd),
            D::SkipTool(_) | D::ReplaceArguments(_) | D::AskApproval(_) => kind == K::BeforeToolCall,
            D::ReplaceResult(_) => kind == K::ToolCallResult,
            D::ReplaceContent(_) | D::Retry(_) | D::Reject(_) => {
                matches!(kind, K::ModelResponse | K::FinalAnswer)
            }
            D::ReplaceUserContent(_) | D::SkipRun(_) => kind == K::RunStart,
            D::SkipModelCall(_) => kind == K::IterationStart,
        }
    }

    /// A short copy for a record of a directive that was not applied (ignored
    /// at its event): each string cut to `max_chars` characters with `…`, and
    /// at most [`ABRIDGED_BLOCKS`] content blocks followed by one text block
    /// saying how many were left out. A directive that is already short comes
    /// back equal.
    pub fn abridged(&self, max_chars: usize) -> Directive {
        use crate::text::truncate_ellipsis as cut;
        let blocks = |b: &[ContentBlock]| -> Vec<ContentBlock> {
            let mut out: Vec<ContentBlock> = b
                .iter()
                .take(ABRIDGED_BLOCKS)
                .map(|c| match c {
                    ContentBlock::Text(t) => ContentBlock::Text(cut(t, max_chars)),
                })
                .collect();
            if b.len() > ABRIDGED_BLOCKS {
                out.push(ContentBlock::Text(format!("[… {} more content blocks]", b.len() - ABRIDGED_BLOCKS)));
            }
            out
        };
        match self {
            Directive::Continue => Directive::Continue,
            Directive::Pause => Directive::Pause,
            Directive::SkipTool(m) => Directive::SkipTool(m.as_deref().map(|m| cut(m, max_chars))),
            Directive::Abort(m) => Directive::Abort(m.as_deref().map(|m| cut(m, max_chars))),
            Directive::ReplaceArguments(s) => Directive::ReplaceArguments(cut(s, max_chars)),
            Directive::ReplaceResult(s) => Directive::ReplaceResult(cut(s, max_chars)),
            Directive::InjectMessage(s) => Directive::InjectMessage(cut(s, max_chars)),
            Directive::Retry(s) => Directive::Retry(cut(s, max_chars)),
            Directive::Reject(s) => Directive::Reject(cut(s, max_chars)),
            Directive::SkipRun(s) => Directive::SkipRun(cut(s, max_chars)),
            Directive::AskApproval(s) => Directive::AskApproval(cut(s, max_chars)),
            Directive::SkipModelCall(s) => Directive::SkipModelCall(cut(s, max_chars)),
            Directive::PostMessage { to, text } => {
                Directive::PostMessage { to: cut(to, max_chars), text: cut(text, max_chars) }
            }
            Directive::ReplaceContent(b) => Directive::ReplaceContent(blocks(b)),
            Directive::ReplaceUserContent(b) => Directive::ReplaceUserContent(blocks(b)),
        }
    }

    /// The same directive with every string (messages, arguments, results,
    /// each content block's text) passed through `f`.
    pub fn map_text(&self, f: impl Fn(&str) -> String) -> Directive {
        let blocks = |b: &[ContentBlock]| -> Vec<ContentBlock> {
            b.iter()
                .map(|c| match c {
                    ContentBlock::Text(t) => ContentBlock::Text(f(t)),
                })
                .collect()
        };
        match self {
            Directive::Continue => Directive::Continue,
            Directive::Pause => Directive::Pause,
            Directive::SkipTool(m) => Directive::SkipTool(m.as_deref().map(&f)),
            Directive::Abort(m) => Directive::Abort(m.as_deref().map(&f)),
            Directive::ReplaceArguments(s) => Directive::ReplaceArguments(f(s)),
            Directive::ReplaceResult(s) => Directive::ReplaceResult(f(s)),
            Directive::InjectMessage(s) => Directive::InjectMessage(f(s)),
            Directive::Retry(s) => Directive::Retry(f(s)),
            Directive::Reject(s) => Directive::Reject(f(s)),
            Directive::SkipRun(s) => Directive::SkipRun(f(s)),
            Directive::AskApproval(s) => Directive::AskApproval(f(s)),
            Directive::SkipModelCall(s) => Directive::SkipModelCall(f(s)),
            Directive::PostMessage { to, text } => Directive::PostMessage { to: f(to), text: f(text) },
            Directive::ReplaceContent(b) => Directive::ReplaceContent(blocks(b)),
            Directive::ReplaceUserContent(b) => Directive::ReplaceUserContent(blocks(b)),
        }
    }

    /// True for the directives that end the chain for their event
    /// (`docs/contract.md`: "the first skip-tool, abort, reject or skip-run ends the chain").
    pub fn ends_chain(&self) -> bool {
        matches!(
            self,
            Directive::SkipTool(_)
                | Directive::Abort(_)
                | Directive::Reject(_)
                | Directive::SkipRun(_)
                | Directive::SkipModelCall(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abridged_cuts_strings_and_block_lists_and_keeps_short_ones() {
        let long = Directive::ReplaceResult("x".repeat(1_000));
        assert_eq!(long.abridged(10), Directive::ReplaceResult(format!("{}…", "x".repeat(10))));
        let blocks = Directive::ReplaceContent(vec![ContentBlock::Text("hi".into()); 100_000]);
        let Directive::ReplaceContent(kept) = blocks.abridged(10) else { panic!("action changed") };
        assert_eq!(kept.len(), ABRIDGED_BLOCKS + 1);
        assert_eq!(kept[ABRIDGED_BLOCKS], ContentBlock::Text("[… 99996 more content blocks]".into()));
        let short = Directive::SkipTool(Some("no".into()));
        assert_eq!(short.abridged(10), short);
    }

    #[test]
    fn contract_table_columns() {
        use EventKind as K;
        let skip = Directive::SkipTool(None);
        assert!(skip.valid_at(K::BeforeToolCall));
        assert!(!skip.valid_at(K::ToolCallStart), "skip-tool at tool-call-start is ignored");
        let inject = Directive::InjectMessage("x".into());
        for k in [
            K::RunStart,
            K::IterationStart,
            K::ModelResponse,
            K::ToolCallStart,
            K::BeforeToolCall,
            K::ToolCallResult,
            K::IterationComplete,
            // Seed 000: inject_message is valid anywhere.
            K::RequestStart,
            K::RunEnd,
            K::FinalAnswer,
        ] {
            assert!(inject.valid_at(k), "{k}");
        }
        assert!(!Directive::Abort(None).valid_at(K::RequestStart));
        assert!(Directive::Abort(None).valid_at(K::FinalAnswer));
        assert!(Directive::SkipRun("s".into()).valid_at(K::RunStart));
        assert!(!Directive::SkipRun("s".into()).valid_at(K::IterationStart));
    }

    #[test]
    fn json_shapes_are_pinned() {
        let e = Event::IterationStart { iteration: 1, loop_counter: 2 };
        assert_eq!(
            serde_json::to_value(&e).ok(),
            Some(serde_json::json!({"type": "iteration-start", "iteration": 1, "loop_counter": 2}))
        );
        let d = Directive::SkipTool(Some("no".into()));
        assert_eq!(serde_json::to_value(&d).ok(), Some(serde_json::json!({"action": "skip-tool", "value": "no"})));
        assert_eq!(serde_json::to_value(Directive::Continue).ok(), Some(serde_json::json!({"action": "continue"})));
    }
}
