//! The readable trace on stderr and the run record as JSON. Whoever prints a
//! trace line passes it through [`crate::escape::line`].

use std::io::Write;

use hookbox::{DispatchTrace, Event, RunResult};

use crate::{escape, squash};

/// Characters of a directive's value the readable trace prints (the record keeps it whole).
pub(crate) const DIRECTIVE_VALUE_CHARS: usize = 200;

/// The serde name of a value (e.g. `end_turn`), for the readable trace.
pub(crate) fn wire_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".to_string(),
    }
}

/// The `--json` object: the run record, with `iteration` on every event (null where none).
pub fn record_json(record: &RunResult) -> serde_json::Value {
    record.record_json()
}

/// The readable trace lines for one event and what its hooks did.
pub(crate) fn trace_lines(event: &Event, trace: &DispatchTrace) -> Vec<String> {
    let mut out = Vec::new();
    let iter = event.iteration().map(|i| format!(" iteration={i}")).unwrap_or_default();
    let detail = match event {
        Event::RunStart { model, provider, session_id, run_id, .. } => {
            // A session's turns each start here; its id is the run's unless --session named one.
            let session = if session_id == run_id { String::new() } else { format!(" session={session_id}") };
            format!(" model={model} provider={provider}{session}")
        }
        Event::IterationStart { loop_counter, .. } => format!(" loop_counter={loop_counter}"),
        Event::ModelResponse { tool_calls, finish_reason, .. } => {
            format!(" tool_calls={} finish_reason={}", tool_calls.len(), wire_name(finish_reason))
        }
        Event::ToolCallStart { call, .. } | Event::BeforeToolCall { call, .. } => {
            format!(" tool={} id={} args={}", call.name, call.id, call.arguments)
        }
        Event::ToolCallResult { tool_name, success, result, .. } => {
            format!(" tool={tool_name} success={success} result={:?}", hookbox::contract::truncate_chars(result, 80))
        }
        Event::IterationComplete { tools_called, usage, .. } => format!(
            " tools_called={tools_called:?} input_tokens={} output_tokens={} cost={:.6}",
            usage.input_tokens, usage.output_tokens, usage.cost
        ),
        Event::FinalAnswer { .. } | Event::RequestStart { .. } => String::new(),
        Event::RunEnd { iterations, usage, .. } => format!(" iterations={iterations} cost={:.6}", usage.cost),
    };
    out.push(format!("[event] {}{iter}{detail}", event.kind()));
    for log in &trace.logs {
        out.push(format!("  [{}:{}] {}", log.plugin, log.level, squash(&log.message)));
    }
    for d in &trace.directives {
        let value = serde_json::to_value(&d.directive)
            .ok()
            .and_then(|v| v.get("value").cloned())
            .map(|v| format!(" {}", hookbox::contract::truncate_ellipsis(&v.to_string(), DIRECTIVE_VALUE_CHARS)))
            .unwrap_or_default();
        let note = match (&d.note, d.honoured) {
            (Some(n), false) => format!(" (ignored: {n})"),
            (Some(n), true) => format!(" ({n})"),
            (None, _) => String::new(),
        };
        out.push(format!("  [directive] {} -> {}{value}{note}", d.plugin, d.directive.action()));
    }
    for s in &trace.suspensions {
        out.push(format!("  [suspended] {} ({}): {}", s.plugin, wire_name(&s.reason), s.message));
    }
    for f in &trace.failures {
        out.push(format!(
            "  [hook failure] {} {}: {} (fuel used {}, {} µs)",
            f.plugin,
            f.kind.as_str(),
            squash(&f.message),
            f.fuel_used,
            f.duration_us
        ));
    }
    out
}

/// The run's summary lines on stderr, escaped for the terminal.
pub(crate) fn summary(record: &RunResult, stderr: &mut dyn Write) {
    let mut lines = vec![format!(
        "[run] stop_reason={} iterations={} requests={} input_tokens={} output_tokens={} cost=${:.6} hook_failures={}",
        wire_name(&record.stop_reason),
        record.iterations,
        record.requests,
        record.usage.input_tokens,
        record.usage.output_tokens,
        record.usage.cost,
        record.hook_failures.len()
    )];
    for s in &record.plugin_suspensions {
        lines.push(format!("[run] plugin `{}` suspended at `{}`: {}", s.plugin, s.event, s.message));
    }
    for a in &record.approvals {
        let answer = match &a.answer {
            hookbox::ApprovalAnswer::Approve => "approved".to_string(),
            hookbox::ApprovalAnswer::ApproveWithArguments(_) => "approved with other arguments".to_string(),
            hookbox::ApprovalAnswer::Deny(_) => "denied".to_string(),
        };
        let by = serde_json::to_value(a.answered_by).ok().and_then(|v| v.as_str().map(str::to_string));
        lines.push(format!(
            "[run] approval of `{}` ({}): {answer} by {}",
            a.tool,
            a.tool_call_id,
            by.unwrap_or_default()
        ));
    }
    if !record.injected_messages.is_empty() {
        lines.push(format!("[run] injected messages delivered: {:?}", record.injected_messages));
    }
    if !record.undelivered_injections.is_empty() {
        lines.push(format!("[run] undelivered injections: {:?}", record.undelivered_injections));
    }
    for line in lines {
        let _ = writeln!(stderr, "{}", escape::line(&line));
    }
}

#[cfg(test)]
mod tests {
    use hookbox::contract::{Directive, DirectiveRecord, HookLog};

    use super::*;

    #[test]
    fn a_hostile_log_line_and_plugin_name_reach_the_trace_escaped() {
        let event = Event::IterationStart { iteration: 1, loop_counter: 1 };
        let trace = DispatchTrace {
            logs: vec![HookLog {
                plugin: "evil\u{202e}lugin".into(),
                level: "stdout".into(),
                message: "\x1b[2J\x1b[H\r  [directive] deny-tools -> abort".into(),
            }],
            ..DispatchTrace::default()
        };
        let mut printed = Vec::new();
        for line in trace_lines(&event, &trace) {
            let _ = writeln!(printed, "{}", escape::line(&line));
        }
        let printed = String::from_utf8(printed).expect("utf-8");
        assert!(!printed.chars().any(|c| c != '\n' && escape::is_unsafe(c)), "{printed:?}");
        assert!(
            printed.contains("  [evil\\u{202e}lugin:stdout] \\x1b[2J\\x1b[H\\r  [directive] deny-tools -> abort"),
            "{printed}"
        );
        assert!(!printed.lines().any(|l| l.trim_start().starts_with("[directive]")), "no forged line: {printed}");
    }

    #[test]
    fn a_huge_directive_value_is_printed_bounded() {
        let event = Event::ToolCallResult {
            iteration: 1,
            tool_name: "read_file".into(),
            tool_call_id: "call_1".into(),
            result: "ok".into(),
            truncated: false,
            success: true,
            duration_ms: 1,
            reported_cost: None,
            cost_estimated: false,
            arguments: String::new(),
            result_data: None,
        };
        let huge = "x".repeat(100_000);
        let trace = DispatchTrace {
            directives: vec![DirectiveRecord {
                plugin: "big".into(),
                event: "tool-call-result".into(),
                iteration: Some(1),
                directive: Directive::ReplaceResult(huge),
                honoured: true,
                note: None,
            }],
            ..DispatchTrace::default()
        };
        let lines = trace_lines(&event, &trace);
        let line = lines.iter().find(|l| l.contains("[directive]")).expect("directive line");
        assert!(line.contains("replace-result \"xxx"), "{line}");
        assert!(line.chars().count() < DIRECTIVE_VALUE_CHARS + 80, "bounded: {} chars", line.chars().count());
        assert!(line.ends_with('…'), "the cut is visible: {line}");
    }
}
