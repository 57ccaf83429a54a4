//! `audit-log`: a Hookbox hook that writes one info line per event through
//! the host logger, the event's kebab-case name first, then its key fields,
//! e.g. `before-tool-call iteration=1 tool=delete_file id=call_x args={"path": ".env"}`.
//! Free text (errors, reasons) is quoted; long texts are given as a
//! character count. It always continues and reads no config.

use std::fmt::{self, Write};

use hookbox_sdk::{Directive, Event, Hook, Usage, content_text, event_name, export_hook, finish_reason_name, log};

/// The log line for `event`.
pub fn describe(event: &Event) -> String {
    let mut line = event_name(event).to_owned();
    // Writing to a String cannot fail.
    let _ = write_fields(&mut line, event);
    line
}

fn write_fields(line: &mut String, event: &Event) -> fmt::Result {
    match event {
        Event::RunStart(e) => write!(
            line,
            " run_id={} session_id={} model={} provider={} user_chars={}",
            e.run_id,
            e.session_id,
            e.model,
            e.provider,
            content_text(&e.user_content).chars().count()
        ),
        Event::IterationStart(e) => write!(line, " iteration={} loop_counter={}", e.iteration, e.loop_counter),
        Event::RequestStart(e) => write!(
            line,
            " iteration={} request_index={} attempt={} purpose={} model={} provider={}",
            e.iteration, e.request_index, e.attempt, e.purpose, e.model, e.provider
        ),
        Event::ModelResponse(e) => {
            let tools: Vec<&str> = e.tool_calls.iter().map(|c| c.name.as_str()).collect();
            write!(
                line,
                " iteration={} finish={} text_chars={} tool_calls=[{}]",
                e.iteration,
                finish_reason_name(e.finish_reason),
                e.text.chars().count(),
                tools.join(",")
            )?;
            match &e.usage {
                Some(usage) => write_usage(line, usage),
                None => Ok(()),
            }
        }
        Event::ToolCallStart(e) | Event::BeforeToolCall(e) => {
            write!(line, " iteration={} tool={} id={} args={}", e.iteration, e.call.name, e.call.id, e.call.arguments)
        }
        Event::ToolCallResult(e) => {
            write!(
                line,
                " iteration={} tool={} id={} success={} truncated={} duration_ms={} result_chars={}",
                e.iteration,
                e.tool_name,
                e.tool_call_id,
                e.success,
                e.truncated,
                e.duration_ms,
                e.result.chars().count()
            )?;
            match e.reported_cost {
                Some(cost) => write!(line, " reported_cost={cost}"),
                None => Ok(()),
            }
        }
        Event::IterationComplete(e) => {
            write!(
                line,
                " iteration={} stop={} tools=[{}]",
                e.iteration,
                finish_reason_name(e.stop_reason),
                e.tools_called.join(",")
            )?;
            write_usage(line, &e.usage)
        }
        Event::FinalAnswer(e) => {
            write!(line, " finish={} text_chars={}", finish_reason_name(e.finish_reason), e.text.chars().count())?;
            write_usage(line, &e.usage)
        }
        Event::RunEnd(e) => {
            write!(line, " iterations={}", e.iterations)?;
            write_usage(line, &e.usage)?;
            match &e.error {
                Some(error) => write!(line, " error={error:?}"),
                None => Ok(()),
            }
        }
    }
}

fn write_usage(line: &mut String, usage: &Usage) -> fmt::Result {
    write!(
        line,
        " input_tokens={} output_tokens={} cache_read_tokens={} cache_write_tokens={} cost_usd={}",
        usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens, usage.cost_usd
    )
}

struct AuditLog;

impl Hook for AuditLog {
    fn new() -> Self {
        AuditLog
    }

    fn on_event(&mut self, event: &Event) -> Directive {
        log::info(&describe(event));
        Directive::Continue
    }
}

export_hook!(AuditLog);

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox_sdk::{RunEnd, ToolCall, ToolCallEvent};

    #[test]
    fn tool_events_show_tool_id_and_raw_args() {
        let event = Event::BeforeToolCall(ToolCallEvent {
            iteration: 1,
            call: ToolCall { id: "call_x".into(), name: "delete_file".into(), arguments: r#"{"path": ".env"}"#.into() },
        });
        assert_eq!(
            describe(&event),
            r#"before-tool-call iteration=1 tool=delete_file id=call_x args={"path": ".env"}"#
        );
    }

    #[test]
    fn run_end_quotes_the_error() {
        let event = Event::RunEnd(RunEnd {
            iterations: 2,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 4,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                cost_usd: 0.5,
            },
            error: Some("went \"wrong\"".into()),
        });
        assert_eq!(
            describe(&event),
            r#"run-end iterations=2 input_tokens=10 output_tokens=4 cache_read_tokens=0 cache_write_tokens=0 cost_usd=0.5 error="went \"wrong\"""#
        );
    }
}
