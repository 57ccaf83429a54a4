//! Conversions between the host's serde types ([`hookbox_contract`]) and the
//! types `bindgen!` generates for `hookbox:hooks@0.1.0`
//! (`wit/frozen/hookbox-hooks@0.1.0/`). A later version gets conversions of
//! its own: host fields 0.1.0 lacks are left out when lowering to 0.1.0, and
//! every 0.1.0 directive maps to a host directive.

use hookbox_contract::{ContentBlock, Directive, Event, FinishReason, ToolCall, Usage};

use crate::bindings::v0_1_0::hookbox::hooks::types as wit;

fn usage(u: &Usage) -> wit::Usage {
    wit::Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_tokens,
        cache_write_tokens: u.cache_write_tokens,
        cost_usd: u.cost,
    }
}

fn finish(f: FinishReason) -> wit::FinishReason {
    match f {
        FinishReason::Stop => wit::FinishReason::Stop,
        FinishReason::ToolCall => wit::FinishReason::ToolCall,
        FinishReason::Length => wit::FinishReason::Length,
        FinishReason::ContentFilter => wit::FinishReason::ContentFilter,
        FinishReason::Other => wit::FinishReason::Other,
    }
}

fn content_from_wit(blocks: Vec<wit::ContentBlockResult>) -> Vec<ContentBlock> {
    blocks
        .into_iter()
        .map(|b| match b {
            wit::ContentBlockResult::Text(t) => ContentBlock::Text(t),
        })
        .collect()
}

fn call(c: &ToolCall) -> wit::ToolCall<'_> {
    wit::ToolCall { id: &c.id, name: &c.name, arguments: &c.arguments }
}

/// The lists an event's WIT form borrows (the WIT types hold slices of
/// borrowed records); every string is borrowed from the host event, so no
/// text is copied before it is lowered into the guest.
#[derive(Default)]
pub(crate) struct WitLists<'a> {
    content: Vec<wit::ContentBlockParam<'a>>,
    calls: Vec<wit::ToolCall<'a>>,
    names: Vec<&'a str>,
}

impl<'a> WitLists<'a> {
    /// The lists of `e` (empty for events without any).
    pub(crate) fn new(e: &'a Event) -> Self {
        let content = |blocks: &'a [ContentBlock]| {
            blocks
                .iter()
                .map(|b| match b {
                    ContentBlock::Text(t) => wit::ContentBlockParam::Text(t),
                })
                .collect()
        };
        match e {
            Event::RunStart { user_content, .. } => WitLists { content: content(user_content), ..Self::default() },
            Event::ModelResponse { content: c, tool_calls, .. } => {
                WitLists { content: content(c), calls: tool_calls.iter().map(call).collect(), ..Self::default() }
            }
            Event::FinalAnswer { content: c, .. } => WitLists { content: content(c), ..Self::default() },
            Event::IterationComplete { tools_called, .. } => {
                WitLists { names: tools_called.iter().map(String::as_str).collect(), ..Self::default() }
            }
            _ => Self::default(),
        }
    }

    /// The WIT form of `e`, the event these lists were made from.
    pub(crate) fn event<'b>(&'b self, e: &'b Event) -> wit::Event<'b> {
        match e {
            Event::RunStart { run_id, session_id, model, provider, .. } => {
                wit::Event::RunStart(wit::RunStart { run_id, session_id, model, provider, user_content: &self.content })
            }
            Event::IterationStart { iteration, loop_counter } => {
                wit::Event::IterationStart(wit::IterationStart { iteration: *iteration, loop_counter: *loop_counter })
            }
            Event::RequestStart { request_index, iteration, attempt, purpose, model, provider } => {
                wit::Event::RequestStart(wit::RequestStart {
                    request_index: *request_index,
                    iteration: *iteration,
                    attempt: *attempt,
                    purpose,
                    model,
                    provider,
                })
            }
            Event::ModelResponse { iteration, text, reasoning, finish_reason, usage: u, .. } => {
                wit::Event::ModelResponse(wit::ModelResponse {
                    iteration: *iteration,
                    text,
                    content: &self.content,
                    tool_calls: &self.calls,
                    reasoning,
                    finish_reason: finish(*finish_reason),
                    usage: u.as_ref().map(usage),
                })
            }
            Event::ToolCallStart { iteration, call: c } => {
                wit::Event::ToolCallStart(wit::ToolCallEvent { iteration: *iteration, call: call(c) })
            }
            Event::BeforeToolCall { iteration, call: c } => {
                wit::Event::BeforeToolCall(wit::ToolCallEvent { iteration: *iteration, call: call(c) })
            }
            Event::ToolCallResult {
                iteration,
                tool_name,
                tool_call_id,
                result,
                truncated,
                success,
                duration_ms,
                reported_cost,
                // Added after 0.1.0 (cost_estimated, arguments, result_data): a 0.1.0 plugin never sees them.
                ..
            } => wit::Event::ToolCallResult(wit::ToolCallResult {
                iteration: *iteration,
                tool_name,
                tool_call_id,
                result,
                truncated: *truncated,
                success: *success,
                duration_ms: *duration_ms,
                reported_cost: *reported_cost,
            }),
            Event::IterationComplete { iteration, usage: u, stop_reason, .. } => {
                wit::Event::IterationComplete(wit::IterationComplete {
                    iteration: *iteration,
                    usage: usage(u),
                    tools_called: &self.names,
                    stop_reason: finish(*stop_reason),
                })
            }
            Event::FinalAnswer { text, finish_reason, usage: u, .. } => wit::Event::FinalAnswer(wit::FinalAnswer {
                text,
                content: &self.content,
                finish_reason: finish(*finish_reason),
                usage: usage(u),
            }),
            Event::RunEnd { iterations, usage: u, error } => {
                wit::Event::RunEnd(wit::RunEnd { iterations: *iterations, usage: usage(u), error: error.as_deref() })
            }
        }
    }
}

/// The host form of a directive a guest returned.
pub(crate) fn directive_from_wit(d: wit::Directive) -> Directive {
    match d {
        wit::Directive::Continue => Directive::Continue,
        wit::Directive::SkipTool(m) => Directive::SkipTool(m),
        wit::Directive::ReplaceArguments(a) => Directive::ReplaceArguments(a),
        wit::Directive::ReplaceResult(r) => Directive::ReplaceResult(r),
        wit::Directive::ReplaceContent(c) => Directive::ReplaceContent(content_from_wit(c)),
        wit::Directive::ReplaceUserContent(c) => Directive::ReplaceUserContent(content_from_wit(c)),
        wit::Directive::InjectMessage(m) => Directive::InjectMessage(m),
        wit::Directive::Retry(f) => Directive::Retry(f),
        wit::Directive::Reject(r) => Directive::Reject(r),
        wit::Directive::SkipRun(r) => Directive::SkipRun(r),
        wit::Directive::Pause => Directive::Pause,
        wit::Directive::Abort(r) => Directive::Abort(r),
    }
}
