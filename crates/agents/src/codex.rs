//! Codex CLI's hooks (0.171): the same input as Claude Code's
//! ([`crate::claude_code::read`]; its shell tool is named `Bash`), a
//! stricter answer: a key an event does not take makes Codex drop the whole
//! answer and let the action through, so each event gets only its own keys.
//! `PreToolUse`: `permissionDecision: "deny"` with its reason; a rewrite is
//! `permissionDecision: "allow"` with `updatedInput` (Codex takes no bare
//! `allow`, and has no `ask`: a hook that wants a person denies).
//! `PostToolUse`: `decision: "block"` with `reason`, which replaces the
//! output the model sees. `UserPromptSubmit` and `Stop`: `decision:
//! "block"` with `reason`. Nothing to say is empty stdout.

use serde_json::{Map, Value, json};

use crate::{AgentEvent, Point, Reply, Verdict, decide};

/// The JSON Codex reads, with exit code 0 (empty stdout for `{}`).
pub(crate) fn answer(event: &AgentEvent, v: &Verdict) -> Reply {
    let mut out = Map::new();
    let mut specific = Map::new();
    let mut block = |reason: &str| {
        decide(&mut out, "block", reason);
    };
    match &event.point {
        Point::BeforeTool { .. } => {
            if let Some(reason) = v.stop.as_ref().or(v.deny.as_ref()).or(v.ask.as_ref()) {
                specific.insert("permissionDecision".into(), json!("deny"));
                specific.insert("permissionDecisionReason".into(), json!(reason));
            } else if let Some(args) = &v.arguments {
                specific.insert("permissionDecision".into(), json!("allow"));
                specific.insert("updatedInput".into(), args.clone());
            }
        }
        Point::AfterTool { .. } => {
            if let Some(reason) = v.stop.as_ref().or(v.result.as_ref()) {
                block(reason);
            } else if let Some(context) = v.context_text() {
                specific.insert("additionalContext".into(), json!(context));
            }
        }
        Point::Prompt => {
            if let Some(reason) = &v.stop {
                block(reason);
            } else if let Some(context) = v.context_text() {
                specific.insert("additionalContext".into(), json!(context));
            }
        }
        Point::Stop { .. } => {
            if let (Some(feedback), None) = (&v.retry, &v.stop) {
                block(feedback);
            }
        }
        Point::Unmapped => {}
    }
    if !specific.is_empty() {
        specific.insert("hookEventName".into(), json!(event.name));
        out.insert("hookSpecificOutput".into(), Value::Object(specific));
    }
    Reply { json: Value::Object(out), exit_code: 0, stderr: None, quiet_when_empty: true }
}
