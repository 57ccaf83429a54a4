//! Conversions between the host's serde types ([`crate::event`]) and the
//! types `bindgen!` generates from `wit/hook.wit`.

use super::wasm::bindings::hookbox::hooks::types as wit;
use crate::event::{ContentBlock, Directive, Event};
use crate::model::{FinishReason, ToolCall, Usage};

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

fn content_to_wit(blocks: &[ContentBlock]) -> Vec<wit::ContentBlock> {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) => wit::ContentBlock::Text(t.clone()),
        })
        .collect()
}

fn content_from_wit(blocks: Vec<wit::ContentBlock>) -> Vec<ContentBlock> {
    blocks
        .into_iter()
        .map(|b| match b {
            wit::ContentBlock::Text(t) => ContentBlock::Text(t),
        })
        .collect()
}

fn call(c: &ToolCall) -> wit::ToolCall {
    wit::ToolCall { id: c.id.clone(), name: c.name.clone(), arguments: c.arguments.clone() }
}

/// The WIT form of a host event.
pub(crate) fn event_to_wit(e: &Event) -> wit::Event {
    match e {
        Event::RunStart { run_id, session_id, model, provider, user_content } => wit::Event::RunStart(wit::RunStart {
            run_id: run_id.clone(),
            session_id: session_id.clone(),
            model: model.clone(),
            provider: provider.clone(),
            user_content: content_to_wit(user_content),
        }),
        Event::IterationStart { iteration, loop_counter } => {
            wit::Event::IterationStart(wit::IterationStart { iteration: *iteration, loop_counter: *loop_counter })
        }
        Event::RequestStart { request_index, iteration, attempt, purpose, model, provider } => {
            wit::Event::RequestStart(wit::RequestStart {
                request_index: *request_index,
                iteration: *iteration,
                attempt: *attempt,
                purpose: purpose.clone(),
                model: model.clone(),
                provider: provider.clone(),
            })
        }
        Event::ModelResponse { iteration, text, content, tool_calls, reasoning, finish_reason, usage: u } => {
            wit::Event::ModelResponse(wit::ModelResponse {
                iteration: *iteration,
                text: text.clone(),
                content: content_to_wit(content),
                tool_calls: tool_calls.iter().map(call).collect(),
                reasoning: reasoning.clone(),
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
        } => wit::Event::ToolCallResult(wit::ToolCallResult {
            iteration: *iteration,
            tool_name: tool_name.clone(),
            tool_call_id: tool_call_id.clone(),
            result: result.clone(),
            truncated: *truncated,
            success: *success,
            duration_ms: *duration_ms,
            reported_cost: *reported_cost,
        }),
        Event::IterationComplete { iteration, usage: u, tools_called, stop_reason } => {
            wit::Event::IterationComplete(wit::IterationComplete {
                iteration: *iteration,
                usage: usage(u),
                tools_called: tools_called.clone(),
                stop_reason: finish(*stop_reason),
            })
        }
        Event::FinalAnswer { text, content, finish_reason, usage: u } => wit::Event::FinalAnswer(wit::FinalAnswer {
            text: text.clone(),
            content: content_to_wit(content),
            finish_reason: finish(*finish_reason),
            usage: usage(u),
        }),
        Event::RunEnd { iterations, usage: u, error } => {
            wit::Event::RunEnd(wit::RunEnd { iterations: *iterations, usage: usage(u), error: error.clone() })
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
