//! Conversions for `hookbox:hooks@0.2.0` (`wit/frozen/hookbox-hooks@0.2.0/`):
//! every host field, the event context, and the directives 0.2.0 added
//! (`ask-approval`, `skip-model-call`, `post-message`).

use hookbox_contract::EventContext;

use crate::bindings::v0_2_0::hookbox::hooks::types as wit;

super::wit_conversions!(extra_directives {
    wit::Directive::AskApproval(reason) => Directive::AskApproval(reason),
    wit::Directive::SkipModelCall(reason) => Directive::SkipModelCall(reason),
    wit::Directive::PostMessage(wit::Post { to, text }) => Directive::PostMessage { to, text },
});

/// The WIT form of `cx`, borrowing its strings.
pub(crate) fn context(cx: &EventContext) -> wit::EventContext<'_> {
    wit::EventContext {
        run_id: &cx.run_id,
        session_id: &cx.session_id,
        turn: cx.turn,
        iteration: cx.iteration,
        max_iterations: cx.max_iterations,
        retries: cx.retries,
    }
}

fn tool_call_result(e: &Event) -> wit::ToolCallResult<'_> {
    let Event::ToolCallResult {
        iteration,
        tool_name,
        tool_call_id,
        result,
        truncated,
        success,
        duration_ms,
        reported_cost,
        cost_estimated,
        arguments,
        result_data,
    } = e
    else {
        unreachable!("called for tool-call-result only")
    };
    wit::ToolCallResult {
        iteration: *iteration,
        tool_name,
        tool_call_id,
        result,
        truncated: *truncated,
        success: *success,
        duration_ms: *duration_ms,
        reported_cost: *reported_cost,
        cost_estimated: *cost_estimated,
        arguments,
        result_data: result_data.as_deref(),
    }
}

fn final_answer<'b>(lists: &'b WitLists<'_>, e: &'b Event) -> wit::FinalAnswer<'b> {
    let Event::FinalAnswer { text, finish_reason, usage: u, reasoning, .. } = e else {
        unreachable!("called for final-answer only")
    };
    wit::FinalAnswer {
        text,
        content: &lists.content,
        finish_reason: finish(*finish_reason),
        usage: usage(u),
        tool_calls: &lists.calls,
        reasoning,
    }
}
