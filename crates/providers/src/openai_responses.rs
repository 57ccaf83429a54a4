//! The OpenAI Responses wire format (non-streaming; the streamed form is
//! assembled by [`super::stream::ResponsesStream`]).
//!
//! API reference: <https://platform.openai.com/docs/api-reference/responses/create>
//! (request), <https://platform.openai.com/docs/api-reference/responses/object>
//! (response), and the function-calling guide
//! <https://platform.openai.com/docs/guides/function-calling?api-mode=responses>
//! (`function_call` output items answered by `function_call_output` input
//! items with the same `call_id`).

use serde_json::{Map, Value, json};

use super::{json_type_name, pricing};
use crate::model::{FinishReason, Message, ModelRequest, ModelResponse, ProviderError, ToolCall, Usage};

/// The format's name, used in [`ProviderError::Decode`] and replay sessions.
pub const FORMAT: &str = "openai-responses";

/// Encodes `req` as a Responses request body.
///
/// Shape: `{"model", "input", "stream": false}`, plus `"instructions"` (the
/// system prompt) when `req.system` is set, and, only when `req.tools` is not
/// empty, `"tools": [{"type": "function", "name", "description",
/// "parameters", "strict": false}]` and `"tool_choice": "auto"`. `strict` is
/// sent as `false` because the Responses API defaults it to `true`, which
/// would reject schemas with optional properties.
///
/// `input` items, in order:
/// * [`Message::User`] → `{"role": "user", "content"}`;
/// * [`Message::Assistant`] → `{"role": "assistant", "content"}` when the text
///   is not empty, then one `{"type": "function_call", "call_id", "name",
///   "arguments"}` item per call (`arguments` sent as-is, empty → `{}`);
/// * [`Message::ToolResults`] → one `{"type": "function_call_output",
///   "call_id", "output"}` item per result (the format has no error flag:
///   `is_error` is carried by the text);
/// * [`Message::Native`] is skipped (no native form is kept for this format).
pub fn encode_request(req: &ModelRequest) -> Value {
    let mut input = Vec::new();
    for message in &req.messages {
        match message {
            Message::User { content } => input.push(json!({"role": "user", "content": content})),
            Message::Assistant { content, tool_calls } => {
                if !content.is_empty() {
                    input.push(json!({"role": "assistant", "content": content}));
                }
                for c in tool_calls {
                    let arguments = if c.arguments.trim().is_empty() { "{}" } else { c.arguments.as_str() };
                    input.push(json!({
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": arguments,
                    }));
                }
            }
            Message::ToolResults { results } => {
                for r in results {
                    input.push(json!({"type": "function_call_output", "call_id": r.tool_call_id, "output": r.content}));
                }
            }
            Message::Native { .. } => {}
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    if let Some(system) = &req.system {
        body.insert("instructions".into(), json!(system));
    }
    body.insert("input".into(), Value::Array(input));
    body.insert("stream".into(), json!(false));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": false,
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

/// Decodes a Responses response body (`"object": "response"`).
///
/// * `output` items: `message` items' `output_text` parts are concatenated
///   into the text, their `refusal` parts too (and make the finish reason
///   [`FinishReason::ContentFilter`], raw `refusal`); `reasoning` items'
///   `summary[].text` (and `content[].text`) become the reasoning; each
///   `function_call` item becomes a [`ToolCall`] with `id` = its `call_id`
///   (not its item `id`), `name`, and `arguments` (missing or empty → `{}`;
///   an object is taken as its JSON text; any other JSON type is an error).
///   Server-side tool items (`web_search_call`, `file_search_call`,
///   `code_interpreter_call`, `mcp_call`, ...) and unknown items are ignored:
///   they are never dispatched locally.
/// * `status`: `completed` → [`FinishReason::ToolCall`] when there are
///   function calls, else [`FinishReason::Stop`] (raw `completed`);
///   `incomplete` → by `incomplete_details.reason` (the raw string):
///   `max_output_tokens` → [`FinishReason::Length`], `content_filter` →
///   [`FinishReason::ContentFilter`], other → [`FinishReason::Other`]; any
///   other status → [`FinishReason::Other`] with the status as raw string.
/// * `usage`: `input_tokens` minus `input_tokens_details.cached_tokens` are
///   the uncached input tokens, the cached ones are cache reads;
///   `output_tokens` (reasoning included) are the output. `cost` from
///   [`pricing::cost`] for the response's `model`.
///
/// # Errors
///
/// [`ProviderError::Decode`]: the body is not an object, carries a non-null
/// `error` (or `status: failed`), has no `output` array, or has a
/// `function_call` item without `call_id` or `name`, or whose `arguments`
/// is neither a string nor an object.
pub fn decode_response(body: &Value) -> Result<ModelResponse, ProviderError> {
    let obj = super::response_object(body, FORMAT)?;
    let status = obj.get("status").and_then(Value::as_str).unwrap_or("completed");
    if status == "failed" {
        return Err(decode_error("the response has `status: failed`"));
    }
    let items = match obj.get("output") {
        Some(Value::Array(items)) => items,
        None => return Err(decode_error("no `output` field")),
        Some(other) => return Err(decode_error(format!("`output` is {}, not an array", json_type_name(other)))),
    };

    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    let mut refused = false;
    for (i, item) in items.iter().enumerate() {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
                    match part.get("type").and_then(Value::as_str) {
                        Some("output_text") => text.push_str(part.get("text").and_then(Value::as_str).unwrap_or("")),
                        Some("refusal") => {
                            refused = true;
                            text.push_str(part.get("refusal").and_then(Value::as_str).unwrap_or(""));
                        }
                        _ => {}
                    }
                }
            }
            Some("reasoning") => {
                for key in ["summary", "content"] {
                    for part in item.get(key).and_then(Value::as_array).into_iter().flatten() {
                        reasoning.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""));
                    }
                }
            }
            Some("function_call") => {
                let field = |name: &str| {
                    item.get(name).and_then(Value::as_str).ok_or_else(|| {
                        decode_error(format!("`output[{i}].{name}` of a function_call is missing or not a string"))
                    })
                };
                let arguments = match item.get("arguments") {
                    Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
                    None | Some(Value::Null | Value::String(_)) => "{}".to_owned(),
                    // Some compatible servers send the arguments as an object already.
                    Some(v @ Value::Object(_)) => v.to_string(),
                    Some(other) => {
                        return Err(decode_error(format!(
                            "`output[{i}].arguments` of a function_call is {}, not a string",
                            json_type_name(other)
                        )));
                    }
                };
                tool_calls.push(ToolCall {
                    id: field("call_id")?.to_owned(),
                    name: field("name")?.to_owned(),
                    arguments,
                });
            }
            _ => {}
        }
    }

    let (finish_reason, raw) = if refused {
        (FinishReason::ContentFilter, "refusal".to_owned())
    } else {
        match status {
            "completed" if tool_calls.is_empty() => (FinishReason::Stop, status.to_owned()),
            "completed" => (FinishReason::ToolCall, status.to_owned()),
            "incomplete" => {
                let reason = body.pointer("/incomplete_details/reason").and_then(Value::as_str).unwrap_or("incomplete");
                let finish = match reason {
                    "max_output_tokens" => FinishReason::Length,
                    "content_filter" => FinishReason::ContentFilter,
                    _ => FinishReason::Other,
                };
                (finish, reason.to_owned())
            }
            other => (FinishReason::Other, other.to_owned()),
        }
    };

    let model = obj.get("model").and_then(Value::as_str).unwrap_or_default().to_owned();
    let usage = decode_usage(obj.get("usage"), &model);
    Ok(ModelResponse {
        model,
        text,
        reasoning,
        tool_calls,
        finish_reason,
        raw_finish_reason: raw,
        usage,
        native: None,
        continuation: None,
    })
}

/// The [`Usage`] of a Responses `usage` object (see [`decode_response`]).
pub(crate) fn decode_usage(usage: Option<&Value>, model: &str) -> Usage {
    let Some(usage) = usage.filter(|u| u.is_object()) else { return Usage::default() };
    let count = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let input = count(usage.get("input_tokens"));
    let cached = count(usage.pointer("/input_tokens_details/cached_tokens"));
    let mut u = Usage {
        input_tokens: input.saturating_sub(cached),
        output_tokens: count(usage.get("output_tokens")),
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

    /// Fixture 10's second request, built from neutral types. The call id is
    /// the `call_id` the model gave; the recording (pydantic-ai) sent the
    /// item id `fc_...` as `call_id` instead, so ids are compared separately.
    pub(crate) fn fixture_10_turn_2(call_id: &str) -> ModelRequest {
        let fixture = recording("10_openai_responses_sse_function_call.json");
        let tool = &fixture["interactions"][0]["request"]["body"]["tools"][0];
        ModelRequest {
            model: "gpt-4o".into(),
            system: None,
            messages: vec![
                Message::User { content: "What is the capital of France?".into() },
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: call_id.into(),
                        name: "get_capital".into(),
                        arguments: "{\"country\":\"France\"}".into(),
                    }],
                },
                Message::ToolResults {
                    results: vec![ToolResult {
                        tool_call_id: call_id.into(),
                        name: "get_capital".into(),
                        content: "Paris".into(),
                        is_error: false,
                    }],
                },
            ],
            tools: vec![ToolSpec {
                name: "get_capital".into(),
                description: String::new(),
                parameters: tool["parameters"].clone(),
            }],
        }
    }

    #[test]
    fn encodes_fixture_10_turn_2_input_items() {
        let fixture = recording("10_openai_responses_sse_function_call.json");
        let recorded = &fixture["interactions"][1]["request"]["body"];
        let recorded_id = recorded["input"][1]["call_id"].as_str().unwrap();
        let encoded = encode_request(&fixture_10_turn_2(recorded_id));
        assert_eq!(encoded["input"], recorded["input"]);
        assert_eq!(encoded["tool_choice"], json!("auto"));
        assert_eq!(encoded["tools"][0]["type"], json!("function"));
        assert_eq!(encoded["tools"][0]["name"], json!("get_capital"));
        assert_eq!(encoded["tools"][0]["parameters"], recorded["tools"][0]["parameters"]);
        assert_eq!(encoded["tools"][0]["strict"], json!(false));
        assert!(encoded.get("instructions").is_none());
    }

    #[test]
    fn encodes_system_text_and_empty_arguments() {
        let req = ModelRequest {
            model: "gpt-4.1".into(),
            system: Some("be brief".into()),
            messages: vec![
                Message::User { content: "hi".into() },
                Message::Assistant {
                    content: "calling".into(),
                    tool_calls: vec![ToolCall { id: "call_1".into(), name: "f".into(), arguments: String::new() }],
                },
            ],
            tools: vec![],
        };
        let body = encode_request(&req);
        assert_eq!(body["instructions"], json!("be brief"));
        assert_eq!(
            body["input"],
            json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "calling"},
                {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
            ])
        );
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn decodes_the_completed_response_object() {
        let sse = String::from_utf8(
            std::fs::read(crate::wire::tests::recording_path("10_openai_responses_sse_function_call.0.response.sse"))
                .unwrap(),
        )
        .unwrap();
        // The response.completed event carries the whole response object.
        let completed = sse.lines().filter_map(|l| l.strip_prefix("data: ")).next_back().unwrap();
        let body: Value = serde_json::from_str(completed).unwrap();
        let r = decode_response(&body["response"]).unwrap();
        assert_eq!(
            r.tool_calls,
            vec![ToolCall {
                id: "call_kL0PCQV7M2WMoVX8V8OtYSAL".into(),
                name: "get_capital".into(),
                arguments: "{\"country\":\"France\"}".into(),
            }]
        );
        assert_eq!(r.finish_reason, FinishReason::ToolCall);
        assert_eq!(r.raw_finish_reason, "completed");
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (255, 16));
        assert!((r.usage.cost - (255.0 * 2.5 + 16.0 * 10.0) / 1e6).abs() < 1e-12);
        assert_eq!(r.model, "gpt-4o-2024-08-06");
    }

    #[test]
    fn statuses_refusals_reasoning_and_cache() {
        let body = json!({
            "object": "response", "status": "incomplete", "model": "gpt-4.1",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking"}]},
                {"type": "web_search_call", "id": "ws_1", "status": "completed"},
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f"},
            ],
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 40}, "output_tokens": 7},
        });
        let r = decode_response(&body).unwrap();
        assert_eq!(r.finish_reason, FinishReason::Length);
        assert_eq!(r.raw_finish_reason, "max_output_tokens");
        assert_eq!(r.reasoning, "thinking");
        assert_eq!(r.tool_calls, vec![ToolCall { id: "call_1".into(), name: "f".into(), arguments: "{}".into() }]);
        assert_eq!((r.usage.input_tokens, r.usage.cache_read_tokens, r.usage.output_tokens), (60, 40, 7));

        let refusal = json!({"status": "completed", "output": [
            {"type": "message", "content": [{"type": "refusal", "refusal": "I can't."}]}]});
        let r = decode_response(&refusal).unwrap();
        assert_eq!(
            (r.finish_reason, r.raw_finish_reason.as_str(), r.text.as_str()),
            (FinishReason::ContentFilter, "refusal", "I can't.")
        );

        for (body, want) in [
            (json!({"error": {"message": "boom"}, "output": []}), "the body is an error: boom"),
            (json!({"status": "failed", "error": null, "output": []}), "the response has `status: failed`"),
            (json!({"status": "completed"}), "no `output` field"),
            (
                json!({"output": [{"type": "function_call", "name": "f"}]}),
                "`output[0].call_id` of a function_call is missing or not a string",
            ),
        ] {
            match decode_response(&body) {
                Err(ProviderError::Decode { what, .. }) => assert_eq!(what, want),
                other => panic!("expected a decode error for {body}, got {other:?}"),
            }
        }
    }
}
