//! deny-tools' by-name rule as an Extism plugin: `on_event` takes a Hookbox
//! event as JSON (the host's serde form: `{"type": "before-tool-call",
//! "iteration": 1, "call": {"id", "name", "arguments"}}`) and returns a
//! Hookbox directive as JSON. Like the component, it reads its config (`tools`,
//! a JSON array) once, parses the call's arguments and formats the same reason.
//! `noop` returns `continue` without reading its input.

use std::sync::OnceLock;

use extism_pdk::{FnResult, config, plugin_fn};
use serde_json::{Value, json};

static TOOLS: OnceLock<Vec<String>> = OnceLock::new();

fn tools() -> &'static [String] {
    TOOLS.get_or_init(|| {
        let raw = config::get("tools").ok().flatten().unwrap_or_default();
        serde_json::from_str::<Vec<String>>(&raw).unwrap_or_else(|_| vec![raw])
    })
}

/// The deny-tools rule: `skip-tool` for a denied tool name, else `continue`.
#[plugin_fn]
pub fn on_event(input: String) -> FnResult<String> {
    let event: Value = serde_json::from_str(&input)?;
    if event["type"] == "before-tool-call" {
        let name = event["call"]["name"].as_str().unwrap_or_default();
        // The component parses the arguments too (for its path rules).
        let _args = event["call"]["arguments"].as_str().and_then(|a| serde_json::from_str::<Value>(a).ok());
        if tools().iter().any(|t| t == name) {
            let reason = format!("deny-tools: tool `{name}` is denied");
            return Ok(json!({ "action": "skip-tool", "value": reason }).to_string());
        }
    }
    Ok(r#"{"action":"continue"}"#.to_string())
}

/// Continues, without reading the event.
#[plugin_fn]
pub fn noop(_input: String) -> FnResult<String> {
    Ok(r#"{"action":"continue"}"#.to_string())
}
