//! Replay sessions whose runs park after a longer journal: one model
//! response with `k` `read_file` calls and then the `create_file` the asker
//! asks about, and a final answer. Each of the `k` calls adds a tool outcome
//! and its hook calls to the checkpoint, so a resume re-executes more.

use std::path::{Path, PathBuf};

use anyhow::Result;
use hookbox::contract::{FinishReason, ToolCall, Usage};
use hookbox::providers::ModelResponse;
use serde_json::json;

fn response(text: &str, tool_calls: Vec<ToolCall>) -> ModelResponse {
    let finish_reason = if tool_calls.is_empty() { FinishReason::Stop } else { FinishReason::ToolCall };
    ModelResponse {
        model: "gpt-4o".into(),
        text: text.into(),
        reasoning: String::new(),
        raw_finish_reason: if tool_calls.is_empty() { "stop" } else { "tool_calls" }.into(),
        tool_calls,
        finish_reason,
        usage: Usage { input_tokens: 100, output_tokens: 20, ..Usage::default() },
        native: None,
        continuation: None,
    }
}

/// Writes the session of `k` reads before the asked call into `dir`; its path.
pub(crate) fn write_long_session(dir: &Path, k: usize) -> Result<PathBuf> {
    let mut calls: Vec<ToolCall> = (0..k)
        .map(|i| ToolCall {
            id: format!("call_read_{i}"),
            name: "read_file".into(),
            arguments: json!({"path": "README.md"}).to_string(),
        })
        .collect();
    calls.push(ToolCall {
        id: "call_create".into(),
        name: "create_file".into(),
        arguments: json!({"path": "test.txt"}).to_string(),
    });
    let session = json!({
        "hookbox_replay": 1,
        "format": "hookbox-recorded",
        "model": "gpt-4o",
        "note": format!("workers_bench: {k} reads, then create_file"),
        "responses": [response("", calls), response("Done.", Vec::new())],
    });
    let path = dir.join(format!("long{k}.json"));
    std::fs::write(&path, serde_json::to_string(&session)?)?;
    Ok(path)
}
