//! Conversions for `hookbox:hooks@0.1.0` (`wit/frozen/hookbox-hooks@0.1.0/`).
//! Lowering leaves out what 0.2.0 added: `tool-call-result`'s
//! `cost-estimated`, `arguments` and `result-data`, `final-answer`'s
//! `tool-calls` and `reasoning`, and the event context. A 0.1.0 plugin
//! cannot return `ask-approval`, `skip-model-call` or `post-message`.

use crate::bindings::v0_1_0::hookbox::hooks::types as wit;

super::wit_conversions!(extra_directives {});

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
        // Added after 0.1.0: a 0.1.0 plugin never sees them.
        cost_estimated: _,
        arguments: _,
        result_data: _,
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
    }
}

fn final_answer<'b>(lists: &'b WitLists<'_>, e: &'b Event) -> wit::FinalAnswer<'b> {
    // `tool_calls` and `reasoning` were added after 0.1.0.
    let Event::FinalAnswer { text, finish_reason, usage: u, tool_calls: _, reasoning: _, .. } = e else {
        unreachable!("called for final-answer only")
    };
    wit::FinalAnswer { text, content: &lists.content, finish_reason: finish(*finish_reason), usage: usage(u) }
}
