//! A command hook, the way Claude Code and Codex run hooks: one process per
//! event, the event's JSON on stdin, the answer's JSON on stdout.
//!
//! `stdin_hook TOOLS`: TOOLS is deny-tools' `tools` config (a JSON array or
//! one name). It reads one Hookbox event (`{"type": "before-tool-call",
//! "call": {"name", "arguments", ...}, ...}`), applies the deny-tools plugin's
//! own policy and prints a Hookbox directive: `{"action": "skip-tool",
//! "value": REASON}` or `{"action": "continue"}`. Exit 2 on unreadable input.

use std::io::{Read, Write};

use serde_json::{Value, json};

fn main() {
    if let Err(e) = run() {
        eprintln!("stdin_hook: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let tools = std::env::args().nth(1).unwrap_or_default();
    let policy = deny_tools::Policy::from_config(|key| (key == "tools").then(|| tools.clone()))?;
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).map_err(|e| e.to_string())?;
    let event: Value = serde_json::from_str(&input).map_err(|e| format!("event is not JSON: {e}"))?;
    let mut answer = json!({ "action": "continue" });
    if event["type"] == "before-tool-call" {
        let name = event["call"]["name"].as_str().unwrap_or_default();
        let args = event["call"]["arguments"].as_str().and_then(|a| serde_json::from_str::<Value>(a).ok());
        if let Some(reason) = policy.check(name, args.as_ref()) {
            answer = json!({ "action": "skip-tool", "value": reason });
        }
    }
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &answer).map_err(|e| e.to_string())?;
    out.write_all(b"\n").map_err(|e| e.to_string())
}
