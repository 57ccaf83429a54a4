//! Gemini CLI's hooks: `hook_event_name` (`BeforeTool`, `AfterTool`,
//! `BeforeAgent`, `AfterAgent`, ...), `session_id`, `tool_name`,
//! `tool_input`, `tool_response`, `prompt`, `prompt_response`,
//! `stop_hook_active`. The answer is a JSON object with `decision`
//! (`deny` / `ask`; an `AfterTool` deny's reason replaces the tool's
//! result, an `AfterAgent` deny's is sent back as a prompt), `reason`, `continue: false` with `stopReason`, and
//! `hookSpecificOutput` (`additionalContext`, `tool_input`).

use serde_json::{Map, Value};

use crate::{
    AgentError, AgentEvent, Fields, Point, Reply, Verdict, decide, finish, response_text, session, string, text,
    tool_input,
};

/// Reads one input: (event name, session id, point, fields).
pub(crate) fn read(obj: &Map<String, Value>) -> Result<(String, String, Point, Fields), AgentError> {
    let name = string(obj, "hook_event_name")?.to_string();
    let session_id = session(obj, "session_id")?;
    let mut f = Fields::default();
    let point = match name.as_str() {
        "BeforeTool" => {
            Point::BeforeTool { tool: string(obj, "tool_name")?.to_string(), input: tool_input(obj, "tool_input")? }
        }
        "AfterTool" => {
            f.arguments = tool_input(obj, "tool_input")?.to_string();
            let response = obj.get("tool_response");
            f.success = response.and_then(|r| r.get("error")).is_none_or(Value::is_null);
            f.result = match response.and_then(|r| r.get("llmContent")) {
                Some(content) => response_text(Some(content)),
                None => response_text(response),
            };
            Point::AfterTool { tool: string(obj, "tool_name")?.to_string(), response: Value::Null }
        }
        "BeforeAgent" => {
            f.text = string(obj, "prompt")?.to_string();
            Point::Prompt
        }
        "AfterAgent" => {
            f.text = text(obj, "prompt_response");
            Point::Stop { again: obj.get("stop_hook_active").and_then(Value::as_bool).unwrap_or(false) }
        }
        _ => Point::Unmapped,
    };
    Ok((name, session_id, point, f))
}

/// The JSON Gemini CLI reads, with exit code 0.
pub(crate) fn answer(event: &AgentEvent, v: &Verdict) -> Reply {
    let mut out = Map::new();
    let mut specific = Map::new();
    match &event.point {
        Point::BeforeTool { .. } => {
            if let Some(reason) = v.stop.as_ref().or(v.deny.as_ref()) {
                decide(&mut out, "deny", reason);
            } else if let Some(reason) = &v.ask {
                decide(&mut out, "ask", reason);
            } else if let Some(args) = &v.arguments {
                specific.insert("tool_input".into(), args.clone());
            }
        }
        Point::AfterTool { .. } => {
            // Gemini CLI gives the model the reason in place of the tool's result.
            if let Some(result) = &v.result {
                decide(&mut out, "deny", result);
            }
        }
        Point::Prompt | Point::Stop { .. } | Point::Unmapped => {}
    }
    finish(event, v, "deny", out, specific)
}
