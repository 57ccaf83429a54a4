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
/// `tool_use` block without `id` or `name`.
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
                    Some(input) => input.to_string(),
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
mod tests {
    use super::*;
    use crate::model::{ToolResult, ToolSpec};
    use crate::wire::tests::recording;

    const NAMES: [(&str, &str); 4] = [
        ("toolu_0167cfEnoQaPviGdVXA95zcu", "Alice"),
        ("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "Bob"),
        ("toolu_01XFyAjstT3966qvRynZyVPo", "Charlie"),
        ("toolu_013mnQZbgtK2oe3Mo3XKJsx3", "Daisy"),
    ];

    /// Fixture 02's second request, built from neutral types.
    fn fixture_02_turn_2(recorded: &Value) -> ModelRequest {
        let tool = &recorded["tools"][0];
        let answers = [
            "alice is bob's wife",
            "bob is alice's husband",
            "charlie is alice's son",
            "daisy is bob's daughter and charlie's younger sister",
        ];
        ModelRequest {
            model: "claude-haiku-4-5".into(),
            system: Some(recorded["system"].as_str().unwrap().to_owned()),
            messages: vec![
                Message::User { content: "Alice, Bob, Charlie and Daisy are a family. Who is the youngest?".into() },
                Message::Assistant {
                    content: "I'll help you find out who is the youngest by retrieving information about each family member. I'll retrieve their entity information to compare their ages.".into(),
                    tool_calls: NAMES
                        .iter()
                        .map(|(id, name)| ToolCall {
                            id: (*id).into(),
                            name: "retrieve_entity_info".into(),
                            arguments: format!("{{\"name\": \"{name}\"}}"),
                        })
                        .collect(),
                },
                Message::ToolResults {
                    results: NAMES
                        .iter()
                        .zip(answers)
                        .map(|((id, _), answer)| ToolResult {
                            tool_call_id: (*id).into(),
                            name: "retrieve_entity_info".into(),
                            content: answer.into(),
                            is_error: false,
                        })
                        .collect(),
                },
            ],
            tools: vec![ToolSpec {
                name: tool["name"].as_str().unwrap().into(),
                description: tool["description"].as_str().unwrap().into(),
                parameters: tool["input_schema"].clone(),
            }],
        }
    }

    #[test]
    fn encodes_fixture_02_turn_2_exactly() {
        let fixture = recording("02_anthropic_parallel_4_tool_use.json");
        let recorded = &fixture["interactions"][1]["request"]["body"];
        let encoded = encode_request(&fixture_02_turn_2(recorded)).unwrap();
        assert_eq!(encoded["messages"], recorded["messages"]);
        // The whole body, too: model, max_tokens, system, tools, tool_choice, stream.
        assert_eq!(&encoded, recorded);
    }

    #[test]
    fn merges_tool_results_and_injected_user_text() {
        let req = ModelRequest {
            model: "claude-sonnet-4-5".into(),
            system: None,
            messages: vec![
                Message::User { content: "go".into() },
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall { id: "t1".into(), name: "f".into(), arguments: String::new() }],
                },
                Message::ToolResults {
                    results: vec![ToolResult {
                        tool_call_id: "t1".into(),
                        name: "f".into(),
                        content: "refused: no".into(),
                        is_error: true,
                    }],
                },
                Message::User { content: "Budget almost spent; wrap up.".into() },
            ],
            tools: vec![],
        };
        let encoded = encode_request(&req).unwrap();
        assert!(encoded.get("system").is_none());
        assert!(encoded.get("tools").is_none());
        assert!(encoded.get("tool_choice").is_none());
        assert_eq!(encoded["max_tokens"], json!(4096));
        assert_eq!(
            encoded["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "go"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "refused: no", "is_error": true},
                    {"type": "text", "text": "Budget almost spent; wrap up."},
                ]},
            ])
        );
    }

    #[test]
    fn tool_results_go_first_in_a_merged_user_message() {
        let req = ModelRequest {
            model: "m".into(),
            system: None,
            messages: vec![
                Message::Assistant {
                    content: "calling".into(),
                    tool_calls: vec![ToolCall { id: "t1".into(), name: "f".into(), arguments: "{}".into() }],
                },
                Message::User { content: "note".into() },
                Message::ToolResults {
                    results: vec![ToolResult {
                        tool_call_id: "t1".into(),
                        name: "f".into(),
                        content: "ok".into(),
                        is_error: false,
                    }],
                },
            ],
            tools: vec![],
        };
        let encoded = encode_request(&req).unwrap();
        let user = &encoded["messages"][1]["content"];
        assert_eq!(user[0]["type"], json!("tool_result"));
        assert_eq!(user[1], json!({"type": "text", "text": "note"}));
    }

    #[test]
    fn empty_assistant_turn_is_dropped_and_neighbours_merge() {
        let req = ModelRequest {
            model: "m".into(),
            system: None,
            messages: vec![
                Message::User { content: "a".into() },
                Message::Assistant { content: String::new(), tool_calls: vec![] },
                Message::User { content: "b".into() },
            ],
            tools: vec![],
        };
        let encoded = encode_request(&req).unwrap();
        assert_eq!(
            encoded["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])
        );
    }

    #[test]
    fn invalid_arguments_are_an_encode_error() {
        for (args, what) in [("{\"path\": ", "not valid JSON"), ("[1]", "an array, not a JSON object")] {
            let req = ModelRequest {
                model: "m".into(),
                system: None,
                messages: vec![Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall { id: "t9".into(), name: "f".into(), arguments: args.into() }],
                }],
                tools: vec![],
            };
            match encode_request(&req) {
                Err(ProviderError::Other(msg)) => {
                    assert!(msg.contains("t9 (f)"), "{msg}");
                    assert!(msg.contains(what), "{msg}");
                }
                other => panic!("expected an error, got {other:?}"),
            }
        }
    }

    #[test]
    fn decodes_fixture_02() {
        let fixture = recording("02_anthropic_parallel_4_tool_use.json");
        let first = decode_response(&fixture["interactions"][0]["response"]["body"]).unwrap();
        assert_eq!(first.model, "claude-haiku-4-5-20251001");
        assert!(first.text.starts_with("I'll help you find out who is the youngest"));
        assert_eq!(first.finish_reason, FinishReason::ToolCall);
        assert_eq!(first.raw_finish_reason, "tool_use");
        assert_eq!(first.tool_calls.len(), 4);
        for (call, (id, name)) in first.tool_calls.iter().zip(NAMES) {
            assert_eq!(call.id, id);
            assert_eq!(call.name, "retrieve_entity_info");
            assert_eq!(call.arguments, format!("{{\"name\":\"{name}\"}}"));
        }
        assert_eq!(first.usage.input_tokens, 423);
        assert_eq!(first.usage.output_tokens, 202);
        let expected = (423.0 * 1.0 + 202.0 * 5.0) / 1e6;
        assert!((first.usage.cost - expected).abs() < 1e-12);

        let second = decode_response(&fixture["interactions"][1]["response"]["body"]).unwrap();
        assert!(second.text.ends_with("youngest among the four family members."));
        assert!(second.tool_calls.is_empty());
        assert_eq!(second.finish_reason, FinishReason::Stop);
        assert_eq!(second.raw_finish_reason, "end_turn");
    }

    #[test]
    fn decodes_fixture_03_with_unknown_fields() {
        let fixture = recording("03_anthropic_tool_result_is_error_retry.json");
        let r = decode_response(&fixture["interactions"][0]["response"]["body"]).unwrap();
        assert_eq!(r.text, "Let me correct that - the parameter should be \"symbol\" instead of \"ticker\".");
        assert_eq!(
            r.tool_calls,
            vec![ToolCall {
                id: "toolu_01GgM32pcJgjKXqUgpjs9XFT".into(),
                name: "stock_lookup".into(),
                arguments: "{\"symbol\":\"AAPL\"}".into(),
            }]
        );
        assert_eq!(r.finish_reason, FinishReason::ToolCall);
        assert_eq!(r.usage.input_tokens, 1122);
        assert_eq!(r.usage.output_tokens, 74);
        // claude-sonnet-4-5-20250929 is priced as claude-sonnet-4.
        assert!((r.usage.cost - (1122.0 * 3.0 + 74.0 * 15.0) / 1e6).abs() < 1e-12);

        let r = decode_response(&fixture["interactions"][1]["response"]["body"]).unwrap();
        assert_eq!(r.text, "The current stock price for AAPL (Apple Inc.) is **$150.00**.");
        assert_eq!(r.finish_reason, FinishReason::Stop);
    }

    #[test]
    fn decodes_fixture_04_max_tokens() {
        let fixture = recording("04_anthropic_max_tokens_truncated_tool_use.json");
        let r = decode_response(&fixture["interactions"][0]["response"]["body"]).unwrap();
        assert_eq!(r.finish_reason, FinishReason::Length);
        assert_eq!(r.raw_finish_reason, "max_tokens");
        assert_eq!(r.text, "Okay, let's get the weather and do that calculation.");
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].arguments, "{\"location\":\"San Francisco, CA\",\"unit\":\"fahrenheit\"}");
        assert_eq!(r.tool_calls[1].name, "calculate");
        assert_eq!(r.tool_calls[1].arguments, "{}");
        assert_eq!(r.usage.input_tokens, 435);
        assert_eq!(r.usage.output_tokens, 100);
        assert_eq!(r.usage.cache_read_tokens, 0);
        // claude-3-sonnet is not in the table.
        assert_eq!(r.usage.cost, 0.0);
    }

    #[test]
    fn thinking_server_tools_cache_usage_and_stop_reasons() {
        let body = json!({
            "type": "message",
            "model": "claude-sonnet-4-20250514",
            "content": [
                {"type": "thinking", "thinking": "Let me search.", "signature": "sig"},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                {"type": "text", "text": "Found it. "},
                {"type": "redacted_thinking", "data": "..."},
                {"type": "text", "text": "Now saving."},
                {"type": "tool_use", "id": "toolu_1", "name": "create_file", "input": {"path": "a.txt"}},
            ],
            "stop_reason": "tool_use",
            "usage": {
                "input_tokens": 10,
                "output_tokens": 20,
                "cache_read_input_tokens": 1000,
                "cache_creation_input_tokens": 100,
                "server_tool_use": {"web_search_requests": 1},
            },
        });
        let r = decode_response(&body).unwrap();
        assert_eq!(r.reasoning, "Let me search.");
        assert_eq!(r.text, "Found it. Now saving.");
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].id, "toolu_1");
        assert_eq!(r.usage.cache_read_tokens, 1000);
        assert_eq!(r.usage.cache_write_tokens, 100);
        let expected = (10.0 * 3.0 + 20.0 * 15.0 + 1000.0 * 0.30 + 100.0 * 3.75) / 1e6;
        assert!((r.usage.cost - expected).abs() < 1e-12);

        for (raw, want) in [
            ("end_turn", FinishReason::Stop),
            ("stop_sequence", FinishReason::Stop),
            ("tool_use", FinishReason::ToolCall),
            ("max_tokens", FinishReason::Length),
            ("refusal", FinishReason::ContentFilter),
            ("pause_turn", FinishReason::Other),
        ] {
            let body = json!({"type": "message", "content": [], "stop_reason": raw});
            let r = decode_response(&body).unwrap();
            assert_eq!(r.finish_reason, want, "{raw}");
            assert_eq!(r.raw_finish_reason, raw);
        }
    }

    #[test]
    fn error_bodies_and_bad_shapes_are_decode_errors() {
        let cases = [
            (
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
                "the body is an error: Overloaded",
            ),
            (json!({"type": "message"}), "no `content` field"),
            (json!({"type": "message", "content": "hi"}), "`content` is a string, not an array"),
            (json!({"type": "completion", "content": []}), "`type` is `completion`, expected `message`"),
            (json!("x"), "the body is a string, not an object"),
            (
                json!({"type": "message", "content": [{"type": "tool_use", "name": "f", "input": {}}]}),
                "`content[0].id` of a tool_use block is missing or not a string",
            ),
        ];
        for (body, want) in cases {
            match decode_response(&body) {
                Err(ProviderError::Decode { provider, what }) => {
                    assert_eq!(provider, FORMAT);
                    assert_eq!(what, want);
                }
                other => panic!("expected a decode error for {body}, got {other:?}"),
            }
        }
    }
}
