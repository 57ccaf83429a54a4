//! Claude Code's hooks (and Codex CLI's, which read the same input):
//! `hook_event_name`, `session_id`, and per event `tool_name`, `tool_input`,
//! `tool_use_id`, `tool_response`, `prompt`, `stop_hook_active`. The answer
//! is the JSON Claude Code reads from a hook's stdout (or an http hook's
//! body) with exit code 0: `hookSpecificOutput.permissionDecision`
//! (`deny` / `ask`, never `allow`: a Hookbox guard vetoes, it does not
//! approve past Claude Code's own permissions), `updatedInput`,
//! `additionalContext`, `decision: "block"` with `reason`, and
//! `continue: false` with `stopReason`.

use serde_json::{Map, Value, json};

use crate::{
    AgentError, AgentEvent, Fields, Point, Reply, Verdict, decide, finish, response_text, session, string, text,
    tool_input,
};

/// Reads one input: (event name, session id, point, fields).
pub(crate) fn read(obj: &Map<String, Value>) -> Result<(String, String, Point, Fields), AgentError> {
    let name = string(obj, "hook_event_name")?.to_string();
    let session_id = session(obj, "session_id")?;
    let mut f = Fields { call_id: text(obj, "tool_use_id"), model: text(obj, "model"), ..Fields::default() };
    let point = match name.as_str() {
        "PreToolUse" => {
            Point::BeforeTool { tool: string(obj, "tool_name")?.to_string(), input: tool_input(obj, "tool_input")? }
        }
        "PostToolUse" | "PostToolUseFailure" => {
            f.arguments = tool_input(obj, "tool_input")?.to_string();
            f.success = name == "PostToolUse";
            f.duration_ms = obj.get("duration_ms").and_then(Value::as_u64).unwrap_or(0);
            f.result = match obj.get("tool_response") {
                Some(r) => response_text(Some(r)),
                None => response_text(obj.get("error")),
            };
            let response = obj.get("tool_response").cloned().unwrap_or(Value::Null);
            Point::AfterTool { tool: string(obj, "tool_name")?.to_string(), response }
        }
        "UserPromptSubmit" => {
            f.text = string(obj, "prompt")?.to_string();
            Point::Prompt
        }
        "Stop" => {
            f.text = text(obj, "last_assistant_message");
            Point::Stop { again: obj.get("stop_hook_active").and_then(Value::as_bool).unwrap_or(false) }
        }
        // A sub-agent's stop carries its parent's session id: it is a run of
        // a session of its own (`PARENT/AGENT`), never the end of the parent's.
        "SubagentStop" if !text(obj, "agent_id").is_empty() => {
            f.text = text(obj, "last_assistant_message");
            let session_id = format!("{session_id}/{}", text(obj, "agent_id"));
            if session_id.len() > crate::MAX_SESSION_ID_BYTES || session_id.chars().any(char::is_control) {
                return Err(AgentError::Field {
                    field: "agent_id",
                    problem: "makes a session id over 128 bytes or with control characters",
                });
            }
            let point = Point::Stop { again: obj.get("stop_hook_active").and_then(Value::as_bool).unwrap_or(false) };
            return Ok((name, session_id, point, f));
        }
        _ => Point::Unmapped,
    };
    Ok((name, session_id, point, f))
}

/// The JSON Claude Code reads, always with exit code 0.
pub(crate) fn answer(event: &AgentEvent, v: &Verdict) -> Reply {
    let mut out = Map::new();
    let mut specific = Map::new();
    match &event.point {
        Point::BeforeTool { .. } => {
            if let Some(reason) = v.stop.as_ref().or(v.deny.as_ref()) {
                specific.insert("permissionDecision".into(), json!("deny"));
                specific.insert("permissionDecisionReason".into(), json!(reason));
            } else {
                if let Some(reason) = &v.ask {
                    specific.insert("permissionDecision".into(), json!("ask"));
                    specific.insert("permissionDecisionReason".into(), json!(reason));
                }
                if let Some(args) = &v.arguments {
                    specific.insert("updatedInput".into(), args.clone());
                }
            }
        }
        Point::AfterTool { tool, response } => {
            if let Some(result) = &v.result {
                match replaced_output(tool, response, result) {
                    Some((field, output)) => {
                        specific.insert(field.into(), output);
                    }
                    // A shape Claude Code would refuse: the model is told, with
                    // `decision: block`, to use the hook's result (the tool's own
                    // result stays in the conversation: docs/agents.md).
                    None => {
                        let reason = format!(
                            "A hook replaced the result of this {tool} call. Use this result instead:\n{result}"
                        );
                        decide(&mut out, "block", &reason);
                    }
                }
            }
        }
        Point::Prompt | Point::Stop { .. } | Point::Unmapped => {}
    }
    finish(event, v, "block", out, specific)
}

/// The output that replaces a tool's in place, in the shape Claude Code
/// checks it against (the tool's own output schema): an MCP tool's is
/// `updatedMCPToolOutput`; a shell's (`stdout` in its response) is its
/// response with `stdout` replaced and `stderr` emptied; a text response is
/// the text. `None` for any other shape.
fn replaced_output(tool: &str, response: &Value, result: &str) -> Option<(&'static str, Value)> {
    if tool.starts_with("mcp__") {
        return Some(("updatedMCPToolOutput", json!(result)));
    }
    match response {
        Value::String(_) => Some(("updatedToolOutput", json!(result))),
        Value::Object(fields) if fields.get("stdout").is_some_and(Value::is_string) => {
            let mut fields = fields.clone();
            fields.insert("stdout".into(), json!(result));
            fields.insert("stderr".into(), json!(""));
            Some(("updatedToolOutput", Value::Object(fields)))
        }
        _ => None,
    }
}
