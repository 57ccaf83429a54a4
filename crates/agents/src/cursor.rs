//! Cursor's hooks (`.cursor/hooks.json`): `hook_event_name`,
//! `conversation_id` (the session), and per event `command` and `cwd`
//! (`beforeShellExecution`), `tool_name` and `tool_input`
//! (`beforeMCPExecution`), `file_path` (`beforeReadFile`, `afterFileEdit`),
//! `prompt` (`beforeSubmitPrompt`), `status` (`stop`). The answer: before a
//! tool, `permission` (`deny` / `ask`; nothing, `{}`, when the hooks have
//! no objection: never `allow`, which would approve past Cursor's own rules) with `user_message` and
//! `agent_message`; before a prompt, `continue`; at `stop`,
//! `followup_message`.

use serde_json::{Map, Value, json};

use crate::{AgentError, AgentEvent, Fields, Point, Reply, Verdict, response_text, session, string, text};

/// Reads one input: (event name, session id, point, fields).
pub(crate) fn read(obj: &Map<String, Value>) -> Result<(String, String, Point, Fields), AgentError> {
    let name = string(obj, "hook_event_name")?.to_string();
    let session_id = session(obj, "conversation_id")?;
    let mut f = Fields { call_id: text(obj, "generation_id"), model: text(obj, "model"), ..Fields::default() };
    let point = match name.as_str() {
        "beforeShellExecution" => Point::BeforeTool {
            tool: "Shell".into(),
            input: json!({"command": string(obj, "command")?, "cwd": text(obj, "cwd")}),
        },
        "beforeMCPExecution" => {
            Point::BeforeTool { tool: string(obj, "tool_name")?.to_string(), input: mcp_input(obj)? }
        }
        "beforeReadFile" => {
            Point::BeforeTool { tool: "Read".into(), input: json!({"file_path": string(obj, "file_path")?}) }
        }
        "afterFileEdit" => {
            f.arguments = json!({"file_path": string(obj, "file_path")?}).to_string();
            f.result = response_text(obj.get("edits"));
            f.success = true;
            Point::AfterTool { tool: "Edit".into(), response: Value::Null }
        }
        "afterShellExecution" => {
            f.arguments = json!({"command": text(obj, "command")}).to_string();
            f.result = text(obj, "output");
            f.success = true;
            Point::AfterTool { tool: "Shell".into(), response: Value::Null }
        }
        "afterMCPExecution" => {
            f.arguments = mcp_input(obj)?.to_string();
            f.result = response_text(obj.get("result_json"));
            f.success = true;
            Point::AfterTool { tool: string(obj, "tool_name")?.to_string(), response: Value::Null }
        }
        "beforeSubmitPrompt" => {
            f.text = string(obj, "prompt")?.to_string();
            Point::Prompt
        }
        "stop" => Point::Stop { again: obj.get("loop_count").and_then(Value::as_u64).unwrap_or(0) > 0 },
        _ => Point::Unmapped,
    };
    Ok((name, session_id, point, f))
}

/// An MCP call's input: an object, or JSON text holding one.
fn mcp_input(obj: &Map<String, Value>) -> Result<Value, AgentError> {
    match obj.get("tool_input") {
        None | Some(Value::Null) => Ok(json!({})),
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err(AgentError::Field { field: "tool_input", problem: "must be a JSON object or its text" }),
        },
        Some(_) => Err(AgentError::Field { field: "tool_input", problem: "must be a JSON object or its text" }),
    }
}

/// The JSON Cursor reads, with exit code 0.
pub(crate) fn answer(event: &AgentEvent, v: &Verdict) -> Reply {
    let mut out = Map::new();
    match &event.point {
        Point::BeforeTool { .. } => {
            if let Some(reason) = v.stop.as_ref().or(v.deny.as_ref()) {
                out.insert("permission".into(), json!("deny"));
                out.insert("user_message".into(), json!(reason));
                out.insert("agent_message".into(), json!(reason));
            } else if let Some(reason) = &v.ask {
                out.insert("permission".into(), json!("ask"));
                out.insert("user_message".into(), json!(reason));
                out.insert("agent_message".into(), json!(reason));
            }
        }
        Point::Prompt => {
            out.insert("continue".into(), json!(v.stop.is_none()));
            if let Some(reason) = &v.stop {
                out.insert("user_message".into(), json!(reason));
            }
        }
        Point::Stop { .. } => {
            if let (Some(feedback), None) = (&v.retry, &v.stop) {
                out.insert("followup_message".into(), json!(feedback));
            }
        }
        Point::AfterTool { .. } | Point::Unmapped => {}
    }
    Reply { json: Value::Object(out), exit_code: 0, stderr: None, quiet_when_empty: false }
}
