//! One tool call of a run: `tool-call-start`, the `before-tool-call` veto
//! point (skip, rewrite), dispatch (or the journaled result on replay), the
//! result capped and previewed, `tool-call-result` and its replacement.

use std::time::Instant;

use hookbox_contract::{DECLINED_TOOL_MESSAGE, Directive, Event, EventKind, truncate_chars};
use hookbox_providers::{Message, ToolCall, ToolResult, cap_tool_result};
use hookbox_sandbox::DispatchTrace;

use super::approval::Approved;
use super::{Flow, Run};
use crate::agent::Agent;
use crate::journal::{SafePoint, ToolRecord};
use crate::outcome::RunErrorInfo;
use crate::tools::ToolOutput;

impl Run<'_> {
    /// Announces, vetoes or dispatches one tool call and fires its result event;
    /// pushes exactly one result for the call (also when a hook aborts).
    pub(super) async fn tool_call(
        &mut self,
        iteration: u32,
        call: &ToolCall,
        results: &mut Vec<ToolResult>,
    ) -> Result<(), RunErrorInfo> {
        if let Flow::Stop(e) = self.fire(Event::ToolCallStart { iteration, call: call.clone() }).await {
            results.push(not_run(call, "Run aborted before this tool call ran."));
            return Err(e);
        }
        let mut decision = match self.fire(Event::BeforeToolCall { iteration, call: call.clone() }).await {
            Flow::Stop(e) => {
                results.push(not_run(call, "Run aborted before this tool call ran."));
                return Err(e);
            }
            Flow::Go(d) => d,
        };
        // A hook asked for approval (and none vetoed): the call waits for the answer.
        if decision.terminal.is_none() && !decision.approvals.is_empty() {
            match self.approval(iteration, call, &decision).await {
                Ok(Approved::Run(Some(args))) => {
                    // The host chose other arguments: the guards decide on them too (a veto holds).
                    let mut trace = DispatchTrace::default();
                    let event =
                        Event::BeforeToolCall { iteration, call: ToolCall { arguments: args.clone(), ..call.clone() } };
                    let confirmed = self.hooks.confirm(&event, &self.context, &mut trace).await;
                    self.take_effects(EventKind::BeforeToolCall, trace, &confirmed);
                    match confirmed.terminal {
                        Some(Directive::Abort(reason)) => {
                            results.push(not_run(call, "Run aborted before this tool call ran."));
                            let by = self.rec.directives.last();
                            return Err(RunErrorInfo::Aborted {
                                reason,
                                plugin: by.map(|d| d.plugin.clone()),
                                event: Some(EventKind::BeforeToolCall.to_string()),
                            });
                        }
                        Some(skip @ Directive::SkipTool(_)) => decision.terminal = Some(skip),
                        _ => {}
                    }
                    decision.replace_arguments = Some(args);
                }
                Ok(Approved::Run(None)) => {}
                Ok(Approved::Deny(message)) => decision.terminal = Some(Directive::SkipTool(Some(message))),
                Err(e) => {
                    results.push(not_run(call, "Run aborted before this tool call ran."));
                    return Err(e);
                }
            }
        }
        let started = Instant::now();
        let journal = self.agent.journal.clone();
        // On replay no tool runs: each call gets its recorded result and
        // duration; nor does one a resumed run re-executes from its checkpoint.
        let recorded = journal.as_ref().and_then(|j| j.recorded_tool(&call.id));
        let ran = !matches!(decision.terminal, Some(Directive::SkipTool(_)));
        if let (Some(journal), Some(recorded)) = (&journal, &recorded) {
            let recorded_ran = recorded.as_ref().is_some_and(|r| r.ran);
            if ran != recorded_ran {
                let (now, then) = if ran { ("runs", "did not run it") } else { ("declines", "ran it") };
                // Ids and names come from the journal: cut, like any text it holds.
                journal.note_tool_divergence(format!(
                    "the replay {now} tool call `{}` ({}), the recording {then}",
                    truncate_chars(&call.id, 200),
                    truncate_chars(&call.name, 200)
                ));
            }
        }
        // The arguments the call runs with (or would have, if declined): seed 003's effective arguments.
        let effective = decision.replace_arguments.clone().unwrap_or_else(|| call.arguments.clone());
        let (content, success, reported_cost, cost_estimated) =
            if let Some(Directive::SkipTool(message)) = decision.terminal {
                (message.unwrap_or_else(|| DECLINED_TOOL_MESSAGE.to_string()), false, None, false)
            } else if let Some(recorded) = &recorded {
                match recorded {
                    Some(r) if r.ran => (r.content.clone(), r.success, r.reported_cost, r.cost_estimated),
                    _ => (
                        format!(
                            "error: replay: the tool `{}` did not run in the recorded run, so it has no result",
                            call.name
                        ),
                        false,
                        None,
                        false,
                    ),
                }
            } else if let Some(journal) = journal.as_ref()
                && !journal.safe_point(SafePoint::ToolStarted(&call.id)).await
            {
                // Its start could not be made durable: a crash now could not be told from a run.
                (NOT_JOURNALED_TOOL_MESSAGE.to_string(), false, None, false)
            } else {
                let out = dispatch_tool(self.agent, &call.name, &effective).await;
                (out.content, out.success, out.reported_cost, out.cost_estimated)
            };
        let measured_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let duration_ms = match &recorded {
            Some(Some(r)) => r.duration_ms,
            _ => measured_ms,
        };
        if let Some(journal) = journal.as_ref().filter(|_| recorded.is_none()) {
            journal.push_tool(ToolRecord {
                tool_call_id: call.id.clone(),
                name: call.name.clone(),
                ran,
                content: content.clone(),
                success,
                reported_cost,
                cost_estimated,
                duration_ms,
            });
            if ran {
                journal.safe_point(SafePoint::ToolDone(&call.id)).await;
            }
        }
        // A result over the cap is cut before it is sent or stored; hooks see `truncated`.
        let (content, capped) = self.cap_result(content);
        if let Some(cost) = reported_cost {
            // What a tool reports spending is part of the run's cost (and of an abort's partial figures).
            self.rec.usage.cost += cost;
            self.since_last_complete.cost += cost;
        }
        // Seed 003: "The history's tool call entry shows the arguments the
        // hook set; a skipped call keeps the model's", also when an earlier
        // hook of the chain rewrote them before a later one skipped the call.
        if let Some(args) = decision.replace_arguments.filter(|_| ran)
            && let Some(Message::Assistant { tool_calls, .. }) = self.rec.messages.last_mut()
            && let Some(c) = tool_calls.iter_mut().find(|c| c.id == call.id)
        {
            c.arguments = args;
        }
        // 500 characters by default; 0 means the whole result.
        let preview = match self.agent.config.tool_result_preview_chars {
            0 => content.as_str(),
            n => truncate_chars(&content, n),
        };
        let ev = Event::ToolCallResult {
            iteration,
            tool_name: call.name.clone(),
            tool_call_id: call.id.clone(),
            result: preview.to_string(),
            truncated: capped || preview.len() < content.len(),
            success,
            duration_ms,
            reported_cost,
            cost_estimated: cost_estimated && reported_cost.is_some(),
            arguments: effective,
            result_data: (self.agent.config.tool_result_preview_chars == 0).then(|| content.clone()),
        };
        let flow = self.fire(ev).await;
        // A hook's replacement was held to the same cap by `fire`.
        let content = match &flow {
            Flow::Go(d) => d.replace_result.clone().unwrap_or(content),
            Flow::Stop(_) => content,
        };
        results.push(ToolResult {
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error: !success,
        });
        match flow {
            Flow::Stop(e) => Err(e),
            Flow::Go(_) => Ok(()),
        }
    }
}

impl Run<'_> {
    /// `content` cut to `max_tool_result_chars` (0: no cap) with the marker of
    /// [`cap_tool_result`]; true when it was cut.
    pub(super) fn cap_result(&self, content: String) -> (String, bool) {
        match self.agent.config.max_tool_result_chars {
            0 => (content, false),
            cap => cap_tool_result(&content, cap),
        }
    }
}

/// Runs the tool `name` with `arguments` (JSON text; empty means `{}`).
/// Takes the agent, not the run, so the future holds no reference to the hook chain.
/// The result of a tool call that did not run because its start could not
/// be journaled (the run's store was unreachable).
pub const NOT_JOURNALED_TOOL_MESSAGE: &str = "error: not run: the run's journal could not be written before this tool call, so it was not run \
     (a crash could not have been told apart from a run)";

async fn dispatch_tool(agent: &Agent, name: &str, arguments: &str) -> ToolOutput {
    let delay = crate::tools::test_delay();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let Some((_, tool)) = agent.tools.iter().find(|(spec, _)| spec.name == name) else {
        return ToolOutput::error(format!("error: unknown tool `{name}`"));
    };
    let arguments = if arguments.trim().is_empty() { "{}" } else { arguments };
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(args) => tool.call(&args).await,
        Err(e) => ToolOutput::error(format!("error: the arguments of `{name}` are not valid JSON: {e}")),
    }
}

pub(super) fn not_run(call: &ToolCall, why: &str) -> ToolResult {
    ToolResult { tool_call_id: call.id.clone(), name: call.name.clone(), content: why.to_string(), is_error: true }
}
