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

use crate::{AgentError, AgentEvent, Fields, Point, Reply, Verdict, response_text, session, string, text, tool_input};

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
            f.result = match obj.get("tool_response") {
                Some(r) => response_text(Some(r)),
                None => response_text(obj.get("error")),
            };
            Point::AfterTool { tool: string(obj, "tool_name")?.to_string() }
        }
        "UserPromptSubmit" => {
            f.text = string(obj, "prompt")?.to_string();
            Point::Prompt
        }
        "Stop" | "SubagentStop" => {
            f.text = text(obj, "last_assistant_message");
            Point::Stop { again: obj.get("stop_hook_active").and_then(Value::as_bool).unwrap_or(false) }
        }
        _ => Point::Unmapped,
    };
    Ok((name, session_id, point, f))
}

/// The JSON Claude Code reads, always with exit code 0.
pub(crate) fn answer(event: &AgentEvent, v: &Verdict) -> Reply {
    let mut out = Map::new();
    let mut specific = Map::new();
    let context = v.context_text();
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
        Point::AfterTool { tool } => {
            if let Some(result) = &v.result {
                // Claude Code replaces an MCP tool's output in place; a built-in
                // tool's result is already in the conversation, so the model is
                // told, with `decision: block`, to use the hook's instead.
                if tool.starts_with("mcp__") {
                    specific.insert("updatedMCPToolOutput".into(), json!(result));
                }
                out.insert("decision".into(), json!("block"));
                out.insert(
                    "reason".into(),
                    json!(format!(
                        "A hook replaced the result of this {tool} call. Use this result instead:\n{result}"
                    )),
                );
            }
        }
        Point::Prompt => {
            if let Some(reason) = &v.stop {
                out.insert("decision".into(), json!("block"));
                out.insert("reason".into(), json!(reason));
            }
        }
        Point::Stop { .. } => {
            if let (Some(feedback), None) = (&v.retry, &v.stop) {
                out.insert("decision".into(), json!("block"));
                out.insert("reason".into(), json!(feedback));
            }
        }
        Point::Unmapped => {}
    }
    if let (Some(context), false) = (context, matches!(event.point, Point::Unmapped | Point::Stop { .. })) {
        specific.insert("additionalContext".into(), json!(context));
    }
    if let (Some(reason), false) = (&v.stop, matches!(event.point, Point::Prompt)) {
        out.insert("continue".into(), json!(false));
        out.insert("stopReason".into(), json!(reason));
    }
    if !specific.is_empty() {
        specific.insert("hookEventName".into(), json!(event.name));
        out.insert("hookSpecificOutput".into(), Value::Object(specific));
    }
    Reply::json(Value::Object(out))
}
