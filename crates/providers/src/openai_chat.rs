//! The OpenAI Chat Completions wire format (non-streaming; the streamed form
//! is assembled by [`super::stream::OpenAiChatStream`]).
//!
//! API reference: <https://platform.openai.com/docs/api-reference/chat/create>
//! (request) and <https://platform.openai.com/docs/api-reference/chat/object>
//! (response). Function calling:
//! <https://platform.openai.com/docs/guides/function-calling>.
//! OpenAI-compatible servers and routers (OpenRouter, vLLM, ...) speak the
//! same shapes, with extra fields this decoder ignores.

use serde_json::{Map, Value, json};

use super::{json_type_name, pricing};
use crate::model::{FinishReason, Message, ModelRequest, ModelResponse, ProviderError, ToolCall, Usage};

/// The format's name, used in [`ProviderError::Decode`] and replay sessions.
pub const FORMAT: &str = "openai-chat";

/// Encodes `req` as a Chat Completions request body.
///
/// Shape: `{"model", "messages", "stream": false}` plus, only when
/// `req.tools` is not empty, `"tools": [{"type": "function", "function":
/// {"name", "description", "parameters"}}]` and `"tool_choice": "auto"` (the
/// API's default when tools are present, sent explicitly).
///
/// Messages, in order:
/// * the system prompt, if any, first: `{"role": "system", "content"}`;
/// * [`Message::User`] → `{"role": "user", "content"}`;
/// * [`Message::Assistant`] → `{"role": "assistant", "content"}` where
///   `content` is `null` when the text is empty, plus `"tool_calls": [{"id",
///   "type": "function", "function": {"name", "arguments"}}]` when there are
///   calls (`arguments` is the JSON text, sent as-is);
/// * [`Message::ToolResults`] → one `{"role": "tool", "tool_call_id",
///   "content"}` message per result. The format has no error flag, so
///   `is_error` is carried by the content text only.
/// * [`Message::Native`] is skipped (it belongs to another format).
pub fn encode_request(req: &ModelRequest) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &req.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &req.messages {
        match message {
            Message::User { content } => messages.push(json!({"role": "user", "content": content})),
            Message::Assistant { content, tool_calls } => {
                let mut m = Map::new();
                m.insert("role".into(), json!("assistant"));
                m.insert("content".into(), if content.is_empty() { Value::Null } else { json!(content) });
                if !tool_calls.is_empty() {
                    let calls = tool_calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments},
                            })
                        })
                        .collect();
                    m.insert("tool_calls".into(), Value::Array(calls));
                }
                messages.push(Value::Object(m));
            }
            // Native content of other formats has no Chat Completions form.
            Message::Native { .. } => {}
            Message::ToolResults { results } => {
                for r in results {
                    messages.push(json!({
                        "role": "tool",
                        "tool_call_id": r.tool_call_id,
                        "content": r.content,
                    }));
                }
            }
        }
    }

    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(false));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
    }
    Value::Object(body)
}

fn decode_error(what: impl Into<String>) -> ProviderError {
    ProviderError::Decode { provider: FORMAT, what: what.into() }
}

/// Decodes a Chat Completions response body (`object: "chat.completion"`).
///
/// * Only `choices[0]` is read. Its `message.content` becomes the text
///   (`null` or absent → empty; an array of content parts → its `text` parts
///   joined); `message.reasoning_content` or `message.reasoning` (a string;
///   sent by some OpenAI-compatible servers) becomes the reasoning.
/// * Each `message.tool_calls[i]` becomes a [`ToolCall`] from `id`,
///   `function.name` and `function.arguments`; a missing, `null` or empty
///   `arguments` becomes `{}` (OpenRouter omits the key for argument-less
///   calls).
/// * `finish_reason`: `stop` → [`FinishReason::Stop`], `tool_calls` (and the
///   legacy `function_call`) → [`FinishReason::ToolCall`], `length` →
///   [`FinishReason::Length`], `content_filter` →
///   [`FinishReason::ContentFilter`], anything else or `null` →
///   [`FinishReason::Other`]; the raw string is kept (`""` for `null`).
/// * `usage`: `prompt_tokens_details.cached_tokens` are cache reads and are
///   subtracted from `prompt_tokens` to give the uncached input tokens;
///   `completion_tokens` are the output tokens (reasoning included). A missing
///   `usage` counts zero. `cost` comes from [`pricing::cost`] for the
///   response's `model` (0 when the model is not in the table).
/// * Unknown fields are ignored.
///
/// # Errors
///
/// [`ProviderError::Decode`] naming what is wrong: the body is not an object,
/// is an error body (`{"error": {...}}`, message quoted), has no
/// `choices[0].message`, or has a tool call without `id` or `function.name`.
pub fn decode_response(body: &Value) -> Result<ModelResponse, ProviderError> {
    let obj = super::response_object(body, FORMAT)?;
    let choice = match obj.get("choices") {
        None => return Err(decode_error("no `choices` field")),
        Some(Value::Array(choices)) => match choices.first() {
            Some(c) => c,
            None => return Err(decode_error("`choices` is empty")),
        },
        Some(other) => {
            return Err(decode_error(format!("`choices` is {}, not an array", json_type_name(other))));
        }
    };
    let Some(message) = choice.get("message").and_then(Value::as_object) else {
        return Err(decode_error("no `choices[0].message` object"));
    };

    let text = match message.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect(),
        Some(other) => {
            return Err(decode_error(format!(
                "`choices[0].message.content` is {}, not a string",
                json_type_name(other)
            )));
        }
    };
    let reasoning = ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|k| message.get(*k).and_then(Value::as_str))
        .unwrap_or_default()
        .to_owned();

    let mut tool_calls = Vec::new();
    match message.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (i, call) in calls.iter().enumerate() {
                tool_calls.push(decode_tool_call(i, call)?);
            }
        }
        Some(other) => {
            return Err(decode_error(format!(
                "`choices[0].message.tool_calls` is {}, not an array",
                json_type_name(other)
            )));
        }
    }

    let raw_finish_reason = choice.get("finish_reason").and_then(Value::as_str).unwrap_or_default();
    let finish_reason = match raw_finish_reason {
        "stop" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCall,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    };

    let model = obj.get("model").and_then(Value::as_str).unwrap_or_default().to_owned();
    let usage = decode_usage(obj.get("usage"), &model);

    Ok(ModelResponse {
        model,
        text,
        reasoning,
        tool_calls,
        finish_reason,
        raw_finish_reason: raw_finish_reason.to_owned(),
        usage,
        native: None,
        continuation: None,
    })
}

fn decode_tool_call(i: usize, call: &Value) -> Result<ToolCall, ProviderError> {
    let at = |field: &str| format!("`choices[0].message.tool_calls[{i}].{field}`");
    let id = call
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| decode_error(format!("{} is missing or not a string", at("id"))))?;
    let function = call
        .get("function")
        .and_then(Value::as_object)
        .ok_or_else(|| decode_error(format!("{} is missing or not an object", at("function"))))?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| decode_error(format!("{} is missing or not a string", at("function.name"))))?;
    let arguments = match function.get("arguments") {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) if s.trim().is_empty() => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        // Some compatible servers send the arguments as an object already.
        Some(v @ Value::Object(_)) => v.to_string(),
        Some(other) => {
            return Err(decode_error(format!(
                "{} is {}, not a string",
                at("function.arguments"),
                json_type_name(other)
            )));
        }
    };
    Ok(ToolCall { id: id.to_owned(), name: name.to_owned(), arguments })
}

/// The [`Usage`] of a Chat Completions `usage` object (see [`decode_response`]).
pub(crate) fn decode_usage(usage: Option<&Value>, model: &str) -> Usage {
    let count = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let Some(usage) = usage else { return Usage::default() };
    let prompt = count(usage.get("prompt_tokens"));
    let cached = count(usage.pointer("/prompt_tokens_details/cached_tokens"));
    let mut u = Usage {
        input_tokens: prompt.saturating_sub(cached),
        output_tokens: count(usage.get("completion_tokens")),
        cache_read_tokens: cached,
        cache_write_tokens: 0,
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

    fn fixture_08_tools(body: &Value) -> Vec<ToolSpec> {
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| ToolSpec {
                name: t["function"]["name"].as_str().unwrap().to_owned(),
                description: t["function"]["description"].as_str().unwrap().to_owned(),
                parameters: t["function"]["parameters"].clone(),
            })
            .collect()
    }

    /// The turn-2 conversation of fixture 08, built from neutral types.
    fn fixture_08_turn_2(tools: Vec<ToolSpec>) -> ModelRequest {
        ModelRequest {
            model: "gpt-4o".into(),
            system: Some("Just call tools without asking for confirmation.".into()),
            messages: vec![
                Message::User { content: "Delete the file `.env` and create `test.txt`".into() },
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![
                        ToolCall {
                            id: "call_jYdIdRZHxZTn5bWCq5jlMrJi".into(),
                            name: "delete_file".into(),
                            arguments: "{\"path\": \".env\"}".into(),
                        },
                        ToolCall {
                            id: "call_TmlTVWQbzrXCZ4jNsCVNbNqu".into(),
                            name: "create_file".into(),
                            arguments: "{\"path\": \"test.txt\"}".into(),
                        },
                    ],
                },
                Message::ToolResults {
                    results: vec![
                        ToolResult {
                            tool_call_id: "call_jYdIdRZHxZTn5bWCq5jlMrJi".into(),
                            name: "delete_file".into(),
                            content: "true".into(),
                            is_error: false,
                        },
                        ToolResult {
                            tool_call_id: "call_TmlTVWQbzrXCZ4jNsCVNbNqu".into(),
                            name: "create_file".into(),
                            content: "Success".into(),
                            is_error: false,
                        },
                    ],
                },
            ],
            tools,
        }
    }

    #[test]
    fn encodes_fixture_08_turn_2_exactly() {
        let fixture = recording("08_openai_chat_parallel_tool_calls_nonstream.json");
        let recorded = &fixture["interactions"][1]["request"]["body"];
        let req = fixture_08_turn_2(fixture_08_tools(recorded));
        let encoded = encode_request(&req);
        assert_eq!(encoded["messages"], recorded["messages"]);

        // The whole body matches too once the recording's `strict: true`
        // (which we never send) is removed from its tools.
        let mut expected = recorded.clone();
        for tool in expected["tools"].as_array_mut().unwrap() {
            tool["function"].as_object_mut().unwrap().remove("strict");
        }
        assert_eq!(encoded, expected);
    }

    #[test]
    fn encodes_fixture_08_turn_1_messages() {
        let fixture = recording("08_openai_chat_parallel_tool_calls_nonstream.json");
        let recorded = &fixture["interactions"][0]["request"]["body"];
        let mut req = fixture_08_turn_2(Vec::new());
        req.messages.truncate(1);
        let encoded = encode_request(&req);
        assert_eq!(encoded["messages"], recorded["messages"]);
        // Without tools, neither `tools` nor `tool_choice` is sent.
        assert!(encoded.get("tools").is_none());
        assert!(encoded.get("tool_choice").is_none());
        assert_eq!(encoded["stream"], json!(false));
        assert_eq!(encoded["model"], json!("gpt-4o"));
    }

    #[test]
    fn encodes_assistant_text_and_no_system() {
        let req = ModelRequest {
            model: "m".into(),
            system: None,
            messages: vec![
                Message::User { content: "hi".into() },
                Message::Assistant { content: "hello".into(), tool_calls: vec![] },
            ],
            tools: vec![],
        };
        let encoded = encode_request(&req);
        assert_eq!(
            encoded["messages"],
            json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
            ])
        );
    }

    #[test]
    fn decodes_fixture_08() {
        let fixture = recording("08_openai_chat_parallel_tool_calls_nonstream.json");
        let first = decode_response(&fixture["interactions"][0]["response"]["body"]).unwrap();
        assert_eq!(first.model, "gpt-4o-2024-08-06");
        assert_eq!(first.text, "");
        assert_eq!(first.reasoning, "");
        assert_eq!(first.finish_reason, FinishReason::ToolCall);
        assert_eq!(first.raw_finish_reason, "tool_calls");
        assert_eq!(
            first.tool_calls,
            vec![
                ToolCall {
                    id: "call_jYdIdRZHxZTn5bWCq5jlMrJi".into(),
                    name: "delete_file".into(),
                    arguments: "{\"path\": \".env\"}".into(),
                },
                ToolCall {
                    id: "call_TmlTVWQbzrXCZ4jNsCVNbNqu".into(),
                    name: "create_file".into(),
                    arguments: "{\"path\": \"test.txt\"}".into(),
                },
            ]
        );
        assert_eq!(first.usage.input_tokens, 71);
        assert_eq!(first.usage.output_tokens, 46);
        assert_eq!(first.usage.cache_read_tokens, 0);
        assert_eq!(first.usage.cache_write_tokens, 0);
        assert!((first.usage.cost - (71.0 * 2.5 + 46.0 * 10.0) / 1e6).abs() < 1e-12);

        let second = decode_response(&fixture["interactions"][1]["response"]["body"]).unwrap();
        assert_eq!(second.text, "The file `.env` has been deleted and `test.txt` has been created successfully.");
        assert!(second.tool_calls.is_empty());
        assert_eq!(second.finish_reason, FinishReason::Stop);
        assert_eq!(second.usage.input_tokens, 133);
        assert_eq!(second.usage.output_tokens, 19);
    }

    #[test]
    fn decodes_fixture_09_missing_arguments_as_empty_object() {
        let fixture = recording("09_openai_compat_tool_call_without_arguments.json");
        let r = decode_response(&fixture["interactions"][0]["response"]["body"]).unwrap();
        assert_eq!(r.text, "I'll search for education content for you.");
        assert_eq!(r.reasoning, "");
        assert_eq!(
            r.tool_calls,
            vec![ToolCall {
                id: "toolu_vrtx_015QAXScZzRDPttiPoc34AdD".into(),
                name: "find_education_content".into(),
                arguments: "{}".into(),
            }]
        );
        assert_eq!(r.finish_reason, FinishReason::ToolCall);
        assert_eq!(r.usage.input_tokens, 568);
        assert_eq!(r.usage.output_tokens, 48);
        // `anthropic/claude-sonnet-4.5` via a router is not in the price table.
        assert_eq!(r.usage.cost, 0.0);
    }

    #[test]
    fn empty_arguments_become_empty_object() {
        let body = json!({
            "model": "x",
            "choices": [{"finish_reason": "tool_calls", "message": {"content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": ""}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": null}},
            ]}}],
        });
        let r = decode_response(&body).unwrap();
        assert_eq!(r.tool_calls[0].arguments, "{}");
        assert_eq!(r.tool_calls[1].arguments, "{}");
    }

    #[test]
    fn cached_tokens_are_cache_reads_not_input() {
        let body = json!({
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"finish_reason": "stop", "message": {"content": "ok"}}],
            "usage": {
                "prompt_tokens": 2000,
                "completion_tokens": 10,
                "prompt_tokens_details": {"cached_tokens": 1536},
            },
        });
        let r = decode_response(&body).unwrap();
        assert_eq!(r.usage.input_tokens, 464);
        assert_eq!(r.usage.cache_read_tokens, 1536);
        assert_eq!(r.usage.output_tokens, 10);
        let expected = (464.0 * 0.15 + 10.0 * 0.60 + 1536.0 * 0.075) / 1e6;
        assert!((r.usage.cost - expected).abs() < 1e-12);
    }

    #[test]
    fn finish_reasons_map() {
        for (raw, want) in [
            ("stop", FinishReason::Stop),
            ("tool_calls", FinishReason::ToolCall),
            ("length", FinishReason::Length),
            ("content_filter", FinishReason::ContentFilter),
            ("something_new", FinishReason::Other),
        ] {
            let body = json!({"choices": [{"finish_reason": raw, "message": {"content": "x"}}]});
            let r = decode_response(&body).unwrap();
            assert_eq!(r.finish_reason, want, "{raw}");
            assert_eq!(r.raw_finish_reason, raw);
        }
        let body = json!({"choices": [{"finish_reason": null, "message": {"content": "x"}}]});
        let r = decode_response(&body).unwrap();
        assert_eq!(r.finish_reason, FinishReason::Other);
        assert_eq!(r.raw_finish_reason, "");
        assert_eq!(r.usage, Usage::default());
    }

    #[test]
    fn error_bodies_and_missing_choices_are_decode_errors() {
        let cases = [
            (
                json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}),
                "the body is an error: Incorrect API key provided",
            ),
            (json!({"id": "x"}), "no `choices` field"),
            (json!({"choices": []}), "`choices` is empty"),
            (json!({"choices": [{"finish_reason": "stop"}]}), "no `choices[0].message` object"),
            (json!([1, 2]), "the body is an array, not an object"),
            (
                json!({"choices": [{"message": {"tool_calls": [{"function": {"name": "f"}}]}}]}),
                "`choices[0].message.tool_calls[0].id` is missing or not a string",
            ),
            (
                json!({"choices": [{"message": {"tool_calls": [{"id": "a", "function": {}}]}}]}),
                "`choices[0].message.tool_calls[0].function.name` is missing or not a string",
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
