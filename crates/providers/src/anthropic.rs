//! The Anthropic Messages wire format (non-streaming; the streamed form is
//! assembled by [`super::stream::AnthropicStream`]).
//!
//! API reference: <https://docs.anthropic.com/en/api/messages> (request and
//! response bodies). Tool use:
//! <https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use>
//! (`tool_use` / `tool_result` blocks; tool results must be in the user
//! message right after the assistant's `tool_use`, before any other content
//! of that message). Roles must alternate between `user` and `assistant`.

use serde_json::{Map, Value, json};

use super::{json_type_name, pricing};
use crate::model::{
    Continuation, FinishReason, Message, ModelRequest, ModelResponse, NativeContent, ProviderError, ToolCall, Usage,
};

/// The format's name, used in [`ProviderError::Decode`] and replay sessions.
pub const FORMAT: &str = "anthropic-messages";

/// The `max_tokens` every request carries (the API requires the field).
/// A caller wanting another limit overwrites `body["max_tokens"]`.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Encodes `req` as a Messages request body.
///
/// Shape: `{"model", "max_tokens": 4096, "messages", "stream": false}`, plus
/// `"system"` (a top-level string) when `req.system` is set, and, only when
/// `req.tools` is not empty, `"tools": [{"name", "description",
/// "input_schema"}]` and `"tool_choice": {"type": "auto"}`.
///
/// Messages carry content blocks:
/// * [`Message::User`] → a `user` message with one `{"type": "text", "text"}`
///   block;
/// * [`Message::Assistant`] → an `assistant` message with a `text` block (when
///   the text is not empty) followed by one `{"type": "tool_use", "id",
///   "name", "input"}` block per call, `input` being the call's arguments
///   parsed as JSON (empty text → `{}`);
/// * [`Message::ToolResults`] → ONE `user` message with a `{"type":
///   "tool_result", "tool_use_id", "content", "is_error"}` block per result.
///
/// * [`Message::Native`] of this format (`anthropic-messages`) followed by
///   [`Message::Assistant`] → the native blocks in their order (server-side
///   tool blocks, thinking blocks, ... verbatim), merged with the neutral
///   message: each `tool_use` block is rebuilt from the neutral call with the
///   same id (so rewritten arguments are sent) or dropped when that call is
///   gone; neutral calls not in the blocks are appended; when the neutral
///   text differs from the blocks' text, the native text blocks are replaced
///   by one block with the neutral text. A `Native` of another format, or one
///   not followed by an assistant message, is skipped.
///
/// Consecutive messages of the same role are merged into one (the API
/// requires alternating roles), e.g. tool results followed by an injected
/// user text become one user message; within a user message the
/// `tool_result` blocks are placed first, as the API requires. Empty text is
/// not sent (the API rejects empty text blocks), and a message left with no
/// block at all (an assistant turn with neither text nor calls) is dropped.
///
/// # Errors
///
/// [`ProviderError::Other`] when a tool call's arguments are not a JSON
/// object (the `input` field must be one); the message names the call.
pub fn encode_request(req: &ModelRequest) -> Result<Value, ProviderError> {
    // (role, blocks), merged as they are pushed.
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, blocks: Vec<Value>| {
        if blocks.is_empty() {
            return;
        }
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    };

    let mut native: Option<&NativeContent> = None;
    for message in &req.messages {
        let pending = native.take();
        match message {
            Message::Native { native: n } => native = (n.format == FORMAT).then_some(n),
            Message::User { content } => push("user", text_block(content).into_iter().collect()),
            Message::Assistant { content, tool_calls } => {
                let blocks = match pending {
                    Some(n) => merge_native(&n.blocks, content, tool_calls)?,
                    None => {
                        let mut blocks: Vec<Value> = text_block(content).into_iter().collect();
                        for call in tool_calls {
                            blocks.push(tool_use_block(call)?);
                        }
                        blocks
                    }
                };
                push("assistant", blocks);
            }
            Message::ToolResults { results } => push(
                "user",
                results
                    .iter()
                    .map(|r| {
                        json!({
                            "type": "tool_result",
                            "tool_use_id": r.tool_call_id,
                            "content": r.content,
                            "is_error": r.is_error,
                        })
                    })
                    .collect(),
            ),
        }
    }

    let messages = turns
        .into_iter()
        .map(|(role, mut blocks)| {
            if role == "user" {
                // Stable: tool results first, everything else after, each in order.
                blocks.sort_by_key(|b| b.get("type").and_then(Value::as_str) != Some("tool_result"));
            }
            json!({"role": role, "content": blocks})
        })
        .collect();

    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert("max_tokens".into(), json!(DEFAULT_MAX_TOKENS));
    if let Some(system) = &req.system {
        body.insert("system".into(), json!(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(false));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!({"type": "auto"}));
    }
    Ok(Value::Object(body))
}

fn tool_use_block(call: &ToolCall) -> Result<Value, ProviderError> {
    Ok(json!({
        "type": "tool_use",
        "id": call.id,
        "name": call.name,
        "input": parse_input(&call.id, &call.name, &call.arguments)?,
    }))
}

/// The native blocks of an assistant turn with the neutral message's edits
/// applied (see [`encode_request`]).
fn merge_native(blocks: &[Value], content: &str, calls: &[ToolCall]) -> Result<Vec<Value>, ProviderError> {
    let kind = |b: &Value| b.get("type").and_then(Value::as_str).map(str::to_owned).unwrap_or_default();
    let native_text: String =
        blocks.iter().filter(|b| kind(b) == "text").filter_map(|b| b.get("text").and_then(Value::as_str)).collect();
    let text_unchanged = native_text == content;
    let mut out = Vec::with_capacity(blocks.len() + 1);
    let mut text_placed = false;
    let mut used = Vec::new();
    for block in blocks {
        match kind(block).as_str() {
            "text" if text_unchanged => {
                if block.get("text").and_then(Value::as_str).is_some_and(|t| !t.is_empty()) {
                    out.push(block.clone());
                }
            }
            "text" => {
                if !text_placed {
                    out.extend(text_block(content));
                    text_placed = true;
                }
            }
            "tool_use" => {
                let id = block.get("id").and_then(Value::as_str).unwrap_or_default();
                if let Some(call) = calls.iter().find(|c| c.id == id) {
                    out.push(tool_use_block(call)?);
                    used.push(id.to_owned());
                }
            }
            _ => out.push(block.clone()),
        }
    }
    if !text_unchanged && !text_placed {
        out.splice(0..0, text_block(content));
    }
    for call in calls.iter().filter(|c| !used.contains(&c.id)) {
        out.push(tool_use_block(call)?);
    }
    Ok(out)
}

fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// Parses a tool call's JSON argument text into the object `input` needs.
fn parse_input(id: &str, name: &str, arguments: &str) -> Result<Value, ProviderError> {
    if arguments.trim().is_empty() {
        return Ok(json!({}));
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => Err(ProviderError::Other(format!(
            "cannot encode tool call {id} ({name}) for {FORMAT}: its arguments are {}, not a JSON object",
            json_type_name(&other)
        ))),
        Err(e) => Err(ProviderError::Other(format!(
            "cannot encode tool call {id} ({name}) for {FORMAT}: its arguments are not valid JSON: {e}"
        ))),
    }
}

fn decode_error(what: impl Into<String>) -> ProviderError {
    ProviderError::Decode { provider: FORMAT, what: what.into() }
}

/// Decodes a Messages response body (`"type": "message"`).
///
/// * `content` blocks: `text` blocks are concatenated into the text;
///   `thinking` blocks (their `thinking` field) are concatenated into the
///   reasoning; each `tool_use` block becomes a [`ToolCall`] whose arguments
///   are its `input` serialised as compact JSON (missing `input` → `{}`).
///   Server-side tool blocks (`server_tool_use`, `web_search_tool_result` and
///   any other `*_tool_result`) never become tool calls: the provider ran
///   those tools, and they are never dispatched locally. Other block types
///   (`redacted_thinking`, future ones) are not decoded either. When the
///   content holds any block other than `text` and `tool_use`, the whole
///   `content` array is kept in [`ModelResponse::native`] so the turn can be
///   sent back as it was (see [`encode_request`]).
/// * `stop_reason`: `end_turn` and `stop_sequence` → [`FinishReason::Stop`],
///   `tool_use` → [`FinishReason::ToolCall`], `max_tokens` →
///   [`FinishReason::Length`], `refusal` → [`FinishReason::ContentFilter`],
///   anything else (`pause_turn`, `null`) → [`FinishReason::Other`]; the raw
///   string is kept (`""` for `null`).
/// * `usage`: `input_tokens` (already excludes cache reads and writes),
///   `output_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`
///   (absent or `null` → 0). `cost` comes from [`pricing::cost`] for the
///   response's `model` (0 when the model is not in the table).
/// * Unknown fields are ignored.
///
/// # Errors
///
/// [`ProviderError::Decode`] naming what is wrong: the body is not an object,
/// is an error body (`{"type": "error", "error": {...}}`, message quoted),
/// has a `type` other than `message`, has no `content` array, or has a
/// `tool_use` block without `id` or `name`, or whose `input` is not an object.
pub fn decode_response(body: &Value) -> Result<ModelResponse, ProviderError> {
    let Some(obj) = body.as_object() else {
        return Err(decode_error(format!("the body is {}, not an object", json_type_name(body))));
    };
    let kind = obj.get("type").and_then(Value::as_str);
    if kind == Some("error") || obj.get("error").is_some_and(|e| !e.is_null()) {
        let error = obj.get("error").unwrap_or(body);
        let message = error.get("message").and_then(Value::as_str).map_or_else(|| error.to_string(), str::to_owned);
        return Err(decode_error(format!("the body is an error: {message}")));
    }
    if let Some(kind) = kind.filter(|k| *k != "message") {
        return Err(decode_error(format!("`type` is `{kind}`, expected `message`")));
    }
    let blocks = match obj.get("content") {
        Some(Value::Array(blocks)) => blocks,
        None => return Err(decode_error("no `content` field")),
        Some(other) => {
            return Err(decode_error(format!("`content` is {}, not an array", json_type_name(other))));
        }
    };

    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or_default()),
            Some("thinking") => {
                reasoning.push_str(block.get("thinking").and_then(Value::as_str).unwrap_or_default());
            }
            Some("tool_use") => {
                let field = |name: &str| {
                    block.get(name).and_then(Value::as_str).ok_or_else(|| {
                        decode_error(format!("`content[{i}].{name}` of a tool_use block is missing or not a string"))
                    })
                };
                let arguments = match block.get("input") {
                    None | Some(Value::Null) => "{}".to_owned(),
                    Some(input @ Value::Object(_)) => input.to_string(),
                    Some(other) => {
                        return Err(decode_error(format!(
                            "`content[{i}].input` of a tool_use block is {}, not an object",
                            json_type_name(other)
                        )));
                    }
                };
                tool_calls.push(ToolCall { id: field("id")?.to_owned(), name: field("name")?.to_owned(), arguments });
            }
            // server_tool_use, *_tool_result, redacted_thinking, unknown: not ours.
            _ => {}
        }
    }

    let raw_finish_reason = obj.get("stop_reason").and_then(Value::as_str).unwrap_or_default();
    let finish_reason = match raw_finish_reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCall,
        "max_tokens" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    };

    let model = obj.get("model").and_then(Value::as_str).unwrap_or_default().to_owned();
    let usage = decode_usage(obj.get("usage"), &model);
    let native = blocks
        .iter()
        .any(|b| !matches!(b.get("type").and_then(Value::as_str), Some("text" | "tool_use")))
        .then(|| NativeContent { format: FORMAT.to_owned(), blocks: blocks.clone() });

    Ok(ModelResponse {
        model,
        text,
        reasoning,
        tool_calls,
        finish_reason,
        raw_finish_reason: raw_finish_reason.to_owned(),
        usage,
        native,
        // A paused server-side turn is resent so the provider continues it.
        continuation: (raw_finish_reason == "pause_turn").then_some(Continuation::PauseTurn),
    })
}

/// The [`Usage`] of a Messages `usage` object (see [`decode_response`]).
pub(crate) fn decode_usage(usage: Option<&Value>, model: &str) -> Usage {
    let Some(usage) = usage else { return Usage::default() };
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let mut u = Usage {
        input_tokens: count("input_tokens"),
        output_tokens: count("output_tokens"),
        cache_read_tokens: count("cache_read_input_tokens"),
        cache_write_tokens: count("cache_creation_input_tokens"),
        cost: 0.0,
    };
    u.cost = pricing::cost(model, &u).unwrap_or(0.0);
    u
}

#[cfg(test)]
mod tests;
