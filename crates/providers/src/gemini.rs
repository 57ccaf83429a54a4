//! The Google Gemini `generateContent` wire format (non-streaming; the
//! streamed form, `streamGenerateContent?alt=sse`, is assembled by
//! [`super::stream::GeminiStream`]).
//!
//! API reference: <https://ai.google.dev/api/generate-content> (request,
//! `GenerateContentResponse`, `FinishReason`, `UsageMetadata`),
//! <https://ai.google.dev/api/caching#Content> (`Content`, `Part`,
//! `FunctionCall`, `FunctionResponse`), <https://ai.google.dev/api/caching#Tool>
//! (`functionDeclarations`, `parametersJsonSchema`), and the function-calling
//! guide <https://ai.google.dev/gemini-api/docs/function-calling> (results go
//! back as `functionResponse` parts in a `user` turn; thought signatures must
//! be sent back in the part they came in:
//! <https://ai.google.dev/gemini-api/docs/thought-signatures>).

use serde_json::{Map, Value, json};

use super::{json_type_name, pricing};
use crate::model::{
    Continuation, FinishReason, Message, ModelRequest, ModelResponse, NativeContent, ProviderError, ToolCall, Usage,
};

/// The format's name, used in [`ProviderError::Decode`], replay sessions and
/// [`NativeContent::format`].
pub const FORMAT: &str = "gemini";

/// The prefix of the call ids Hookbox makes up for function calls that came
/// without an `id` (Gemini usually sends none). Such ids are never sent back.
pub const SYNTHETIC_ID_PREFIX: &str = "gemini-call-";

/// The key under which a native `functionCall` part records its neutral call
/// id ([`NativeContent::blocks`] of this format); stripped before sending.
pub const NATIVE_CALL_ID_KEY: &str = "hookboxCallId";

/// The id of the `index`-th function call of a response: `functionCall.id`
/// when the API gave one, else `gemini-call-{responseId}-{index}` (or
/// `gemini-call-{index}` without a `responseId`): stable for the same response
/// however it was streamed, and unique within it.
pub fn call_id(function_call: &Value, response_id: Option<&str>, index: usize) -> String {
    match function_call.get("id").and_then(Value::as_str).filter(|id| !id.is_empty()) {
        Some(id) => id.to_owned(),
        None => match response_id.filter(|r| !r.is_empty()) {
            Some(r) => format!("{SYNTHETIC_ID_PREFIX}{r}-{index}"),
            None => format!("{SYNTHETIC_ID_PREFIX}{index}"),
        },
    }
}

/// Encodes `req` as a `generateContent` request body.
///
/// Shape: `{"contents"}`, plus `"systemInstruction": {"parts": [{"text"}]}`
/// when `req.system` is set, and, only when `req.tools` is not empty,
/// `"tools": [{"functionDeclarations": [{"name", "description",
/// "parametersJsonSchema"}]}]` (the schema sent as JSON Schema, as is) and
/// `"toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}`. The model is
/// named in the URL, not the body.
///
/// `contents`, roles `user` and `model`:
/// * [`Message::User`] → a `user` turn with a `{"text"}` part;
/// * [`Message::Assistant`] → a `model` turn with a `{"text"}` part (when not
///   empty) and one `{"functionCall": {"name", "args"}}` part per call (`args`
///   the parsed arguments, empty → `{}`; `id` sent only when the API gave
///   one, never a made-up `gemini-call-` id);
/// * [`Message::ToolResults`] → a `user` turn with one `{"functionResponse":
///   {"name", "response"}}` part per result, `response` being `{"output":
///   text}`, or `{"error": text}` for an error result (the API's documented
///   keys), plus `id` as for calls;
/// * [`Message::Native`] of this format followed by [`Message::Assistant`] →
///   the native parts in order (text with `thoughtSignature`s, thoughts, ...)
///   with the neutral message's edits applied: each `functionCall` part is
///   rebuilt from the neutral call with the same id (its `thoughtSignature`
///   kept) or dropped when the call is gone, neutral calls not in the parts
///   are appended, and changed text replaces the native non-thought text parts.
///
/// Consecutive turns of the same role are merged (tool results, then an
/// injected user text, make one `user` turn with the `functionResponse` parts
/// first); empty turns are dropped.
///
/// # Errors
///
/// [`ProviderError::Other`] when a call's arguments are not a JSON object.
pub fn encode_request(req: &ModelRequest) -> Result<Value, ProviderError> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, parts: Vec<Value>| {
        if parts.is_empty() {
            return;
        }
        match turns.last_mut() {
            Some((last, last_parts)) if *last == role => last_parts.extend(parts),
            _ => turns.push((role, parts)),
        }
    };
    let mut native: Option<&NativeContent> = None;
    for message in &req.messages {
        let pending = native.take();
        match message {
            Message::Native { native: n } => native = (n.format == FORMAT).then_some(n),
            Message::User { content } => push("user", text_part(content).into_iter().collect()),
            Message::Assistant { content, tool_calls } => {
                let parts = match pending {
                    Some(n) => merge_native(&n.blocks, content, tool_calls)?,
                    None => {
                        let mut parts: Vec<Value> = text_part(content).into_iter().collect();
                        for call in tool_calls {
                            parts.push(json!({"functionCall": function_call(call)?}));
                        }
                        parts
                    }
                };
                push("model", parts);
            }
            Message::ToolResults { results } => push(
                "user",
                results
                    .iter()
                    .map(|r| {
                        let key = if r.is_error { "error" } else { "output" };
                        let mut response = Map::new();
                        response.insert("name".into(), json!(r.name));
                        response.insert("response".into(), json!({key: r.content}));
                        if !r.tool_call_id.starts_with(SYNTHETIC_ID_PREFIX) && !r.tool_call_id.is_empty() {
                            response.insert("id".into(), json!(r.tool_call_id));
                        }
                        json!({"functionResponse": Value::Object(response)})
                    })
                    .collect(),
            ),
        }
    }
    let contents: Vec<Value> = turns
        .into_iter()
        .map(|(role, mut parts)| {
            if role == "user" {
                parts.sort_by_key(|p| p.get("functionResponse").is_none());
            }
            json!({"role": role, "parts": parts})
        })
        .collect();

    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(contents));
    if let Some(system) = &req.system {
        body.insert("systemInstruction".into(), json!({"parts": [{"text": system}]}));
    }
    if !req.tools.is_empty() {
        let declarations: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}))
            .collect();
        body.insert("tools".into(), json!([{"functionDeclarations": declarations}]));
        body.insert("toolConfig".into(), json!({"functionCallingConfig": {"mode": "AUTO"}}));
    }
    Ok(Value::Object(body))
}

fn text_part(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"text": text}))
}

/// `{"name", "args"[, "id"]}` for a neutral call.
fn function_call(call: &ToolCall) -> Result<Value, ProviderError> {
    let args = if call.arguments.trim().is_empty() {
        json!({})
    } else {
        match serde_json::from_str::<Value>(&call.arguments) {
            Ok(v @ Value::Object(_)) => v,
            Ok(other) => {
                return Err(ProviderError::Other(format!(
                    "cannot encode tool call {} ({}) for {FORMAT}: its arguments are {}, not a JSON object",
                    call.id,
                    call.name,
                    json_type_name(&other)
                )));
            }
            Err(e) => {
                return Err(ProviderError::Other(format!(
                    "cannot encode tool call {} ({}) for {FORMAT}: its arguments are not valid JSON: {e}",
                    call.id, call.name
                )));
            }
        }
    };
    let mut fc = Map::new();
    fc.insert("name".into(), json!(call.name));
    fc.insert("args".into(), args);
    if !call.id.starts_with(SYNTHETIC_ID_PREFIX) && !call.id.is_empty() {
        fc.insert("id".into(), json!(call.id));
    }
    Ok(Value::Object(fc))
}

fn is_answer_text(part: &Value) -> bool {
    part.get("text").is_some() && part.get("thought").and_then(Value::as_bool) != Some(true)
}

fn merge_native(parts: &[Value], content: &str, calls: &[ToolCall]) -> Result<Vec<Value>, ProviderError> {
    let native_text: String =
        parts.iter().filter(|p| is_answer_text(p)).filter_map(|p| p.get("text").and_then(Value::as_str)).collect();
    let text_unchanged = native_text == content;
    let mut out = Vec::with_capacity(parts.len() + 1);
    let mut text_placed = false;
    let mut used = Vec::new();
    for part in parts {
        if part.get("functionCall").is_some() {
            let id = part.get(NATIVE_CALL_ID_KEY).and_then(Value::as_str).unwrap_or_default();
            if let Some(call) = calls.iter().find(|c| c.id == id) {
                let mut rebuilt = part.as_object().cloned().unwrap_or_default();
                rebuilt.remove(NATIVE_CALL_ID_KEY);
                rebuilt.insert("functionCall".into(), function_call(call)?);
                out.push(Value::Object(rebuilt));
                used.push(id.to_owned());
            }
        } else if is_answer_text(part) && !text_unchanged {
            // The text changed: the native answer text goes, the new text
            // comes once, where the first one was. A signature-only part
            // (empty text) keeps its signature.
            if part.get("thoughtSignature").is_some() {
                let mut kept = part.as_object().cloned().unwrap_or_default();
                kept.insert("text".into(), json!(if text_placed { "" } else { content }));
                out.push(Value::Object(kept));
                text_placed = true;
            } else if !text_placed {
                out.extend(text_part(content));
                text_placed = true;
            }
        } else {
            out.push(part.clone());
        }
    }
    if !text_unchanged && !text_placed {
        out.splice(0..0, text_part(content));
    }
    for call in calls.iter().filter(|c| !used.contains(&c.id)) {
        out.push(json!({"functionCall": function_call(call)?}));
    }
    Ok(out)
}

fn decode_error(what: impl Into<String>) -> ProviderError {
    ProviderError::Decode { provider: FORMAT, what: what.into() }
}

/// Maps a Gemini `finishReason` to the neutral one. `STOP` with function
/// calls is [`FinishReason::ToolCall`] (Gemini has no tool-call reason);
/// `MAX_TOKENS` → [`FinishReason::Length`]; `SAFETY`, `RECITATION`,
/// `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`, `IMAGE_SAFETY` and a prompt
/// `blockReason` → [`FinishReason::ContentFilter`]; anything else
/// (`MALFORMED_FUNCTION_CALL`, `OTHER`, `LANGUAGE`, unknown) →
/// [`FinishReason::Other`].
pub fn finish_reason(raw: &str, has_calls: bool) -> FinishReason {
    match raw {
        "STOP" if has_calls => FinishReason::ToolCall,
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        _ => FinishReason::Other,
    }
}

/// Decodes a `GenerateContentResponse` body.
///
/// * Only `candidates[0]` is read. Its `content.parts`: `text` parts are
///   concatenated into the text, those with `"thought": true` into the
///   reasoning; each `functionCall` part becomes a [`ToolCall`] with the id
///   from [`call_id`], its `name`, and `args` as compact JSON (missing →
///   `{}`). Other parts (`executableCode`, ...) are not decoded.
/// * When a part carries a `thoughtSignature` or `"thought": true`, or is of
///   another kind, all parts are kept in [`ModelResponse::native`] (function
///   call parts tagged with their ids) so the turn can be sent back with its
///   signatures.
/// * `finishReason` as in [`finish_reason`], raw string kept. No candidate
///   with a `promptFeedback.blockReason` is [`FinishReason::ContentFilter`]
///   with the block reason as raw string. A candidate with neither parts nor
///   calls (an empty turn) decodes to empty text with its finish reason: the
///   caller may re-request.
/// * `usageMetadata`: `promptTokenCount` plus `toolUsePromptTokenCount` minus
///   `cachedContentTokenCount` are the uncached input tokens, the cached ones
///   are cache reads; `candidatesTokenCount` plus `thoughtsTokenCount` are the
///   output tokens. `cost` from [`pricing::cost`] for `modelVersion`.
/// * The model is `modelVersion`.
///
/// # Errors
///
/// [`ProviderError::Decode`]: the body is not an object, is an error body
/// (`{"error": {...}}`), has neither `candidates` nor a prompt block reason,
/// or has a `functionCall` without `name` or whose `args` is not an object.
pub fn decode_response(body: &Value) -> Result<ModelResponse, ProviderError> {
    let obj = super::response_object(body, FORMAT)?;
    let model = obj.get("modelVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
    let usage = decode_usage(obj.get("usageMetadata"), &model);
    let candidate = obj.get("candidates").and_then(Value::as_array).and_then(|c| c.first());
    let Some(candidate) = candidate else {
        if let Some(reason) = body.pointer("/promptFeedback/blockReason").and_then(Value::as_str) {
            return Ok(ModelResponse {
                model,
                text: String::new(),
                reasoning: String::new(),
                tool_calls: Vec::new(),
                finish_reason: FinishReason::ContentFilter,
                raw_finish_reason: reason.to_owned(),
                usage,
                native: None,
                continuation: None,
            });
        }
        return Err(decode_error("no `candidates[0]` and no `promptFeedback.blockReason`"));
    };
    let response_id = obj.get("responseId").and_then(Value::as_str);
    let parts: &[Value] = candidate.pointer("/content/parts").and_then(Value::as_array).map_or(&[], Vec::as_slice);

    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    let mut needs_native = false;
    let mut native_parts = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
        needs_native |= thought || part.get("thoughtSignature").is_some();
        if let Some(fc) = part.get("functionCall") {
            let name = fc.get("name").and_then(Value::as_str).ok_or_else(|| {
                decode_error(format!("`candidates[0].content.parts[{i}].functionCall.name` is missing or not a string"))
            })?;
            let arguments = match fc.get("args") {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(args @ Value::Object(_)) => args.to_string(),
                Some(other) => {
                    return Err(decode_error(format!(
                        "`candidates[0].content.parts[{i}].functionCall.args` is {}, not an object",
                        json_type_name(other)
                    )));
                }
            };
            let id = call_id(fc, response_id, tool_calls.len());
            let mut tagged = part.as_object().cloned().unwrap_or_default();
            tagged.insert(NATIVE_CALL_ID_KEY.into(), json!(id));
            native_parts.push(Value::Object(tagged));
            tool_calls.push(ToolCall { id, name: name.to_owned(), arguments });
            continue;
        }
        match part.get("text").and_then(Value::as_str) {
            Some(t) if thought => reasoning.push_str(t),
            Some(t) => text.push_str(t),
            None => needs_native = true,
        }
        native_parts.push(part.clone());
    }
    let raw = candidate.get("finishReason").and_then(Value::as_str).unwrap_or_default().to_owned();
    let finish_reason = finish_reason(&raw, !tool_calls.is_empty());
    // Gemini sometimes answers a turn with nothing at all: the loop asks once more.
    let empty_turn = text.trim().is_empty() && tool_calls.is_empty() && finish_reason == FinishReason::Stop;
    Ok(ModelResponse {
        model,
        text,
        reasoning,
        finish_reason,
        tool_calls,
        raw_finish_reason: raw,
        usage,
        native: needs_native.then(|| NativeContent { format: FORMAT.to_owned(), blocks: native_parts }),
        continuation: empty_turn.then_some(Continuation::EmptyTurn),
    })
}

/// The [`Usage`] of a `usageMetadata` object (see [`decode_response`]).
pub(crate) fn decode_usage(usage: Option<&Value>, model: &str) -> Usage {
    let Some(usage) = usage.filter(|u| u.is_object()) else { return Usage::default() };
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let cached = count("cachedContentTokenCount");
    let mut u = Usage {
        input_tokens: (count("promptTokenCount") + count("toolUsePromptTokenCount")).saturating_sub(cached),
        output_tokens: count("candidatesTokenCount") + count("thoughtsTokenCount"),
        cache_read_tokens: cached,
        cache_write_tokens: 0,
        cost: 0.0,
    };
    u.cost = pricing::cost(model, &u).unwrap_or(0.0);
    u
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::{ToolResult, ToolSpec};

    /// A two-call response in the documented shape (no ids, one signature).
    pub(crate) fn two_calls_body() -> Value {
        json!({
            "candidates": [{
                "content": {"role": "model", "parts": [
                    {"text": "Checking both."},
                    {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2ln"},
                    {"functionCall": {"name": "get_time"}},
                ]},
                "finishReason": "STOP",
                "index": 0,
            }],
            "usageMetadata": {
                "promptTokenCount": 120, "candidatesTokenCount": 30, "thoughtsTokenCount": 12,
                "cachedContentTokenCount": 20, "totalTokenCount": 162,
            },
            "modelVersion": "gemini-2.5-flash",
            "responseId": "resp-abc",
        })
    }

    #[test]
    fn decodes_calls_with_stable_ids_usage_and_native_parts() {
        let r = decode_response(&two_calls_body()).unwrap();
        assert_eq!(r.text, "Checking both.");
        assert_eq!(
            r.tool_calls,
            vec![
                ToolCall {
                    id: "gemini-call-resp-abc-0".into(),
                    name: "get_weather".into(),
                    arguments: "{\"city\":\"Paris\"}".into()
                },
                ToolCall { id: "gemini-call-resp-abc-1".into(), name: "get_time".into(), arguments: "{}".into() },
            ]
        );
        assert_eq!(r.finish_reason, FinishReason::ToolCall);
        assert_eq!(r.raw_finish_reason, "STOP");
        assert_eq!(
            (r.usage.input_tokens, r.usage.cache_read_tokens, r.usage.output_tokens, r.usage.cache_write_tokens),
            (100, 20, 42, 0)
        );
        let native = r.native.expect("a thought signature keeps the native parts");
        assert_eq!(native.format, FORMAT);
        assert_eq!(native.blocks[1][NATIVE_CALL_ID_KEY], json!("gemini-call-resp-abc-0"));
        // The same body decodes to the same ids.
        assert_eq!(decode_response(&two_calls_body()).unwrap().tool_calls, r.tool_calls);
    }

    #[test]
    fn finish_reasons_block_reasons_and_errors() {
        for (raw, want) in [
            ("STOP", FinishReason::Stop),
            ("MAX_TOKENS", FinishReason::Length),
            ("SAFETY", FinishReason::ContentFilter),
            ("RECITATION", FinishReason::ContentFilter),
            ("MALFORMED_FUNCTION_CALL", FinishReason::Other),
            ("OTHER", FinishReason::Other),
        ] {
            let body = json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": raw}]});
            let r = decode_response(&body).unwrap();
            assert_eq!((r.finish_reason, r.raw_finish_reason.as_str()), (want, raw));
            assert!(r.native.is_none());
        }
        let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 5}});
        let r = decode_response(&blocked).unwrap();
        assert_eq!((r.finish_reason, r.raw_finish_reason.as_str()), (FinishReason::ContentFilter, "SAFETY"));
        assert_eq!(r.usage.input_tokens, 5);
        // An empty turn: no parts at all.
        let empty = json!({"candidates": [{"content": {"role": "model"}, "finishReason": "STOP"}]});
        let r = decode_response(&empty).unwrap();
        assert!(r.text.is_empty() && r.tool_calls.is_empty());
        assert_eq!(r.finish_reason, FinishReason::Stop);
        for (body, want) in [
            (json!({"error": {"code": 400, "message": "bad"}}), "the body is an error: bad"),
            (json!({"candidates": []}), "no `candidates[0]` and no `promptFeedback.blockReason`"),
            (
                json!({"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]}),
                "`candidates[0].content.parts[0].functionCall.name` is missing or not a string",
            ),
        ] {
            match decode_response(&body) {
                Err(ProviderError::Decode { what, .. }) => assert_eq!(what, want),
                other => panic!("expected a decode error for {body}, got {other:?}"),
            }
        }
    }

    fn conversation(first: ModelResponse) -> ModelRequest {
        let mut messages = vec![Message::User { content: "weather and time?".into() }];
        if let Some(native) = first.native.clone() {
            messages.push(Message::Native { native });
        }
        messages.push(Message::Assistant { content: first.text.clone(), tool_calls: first.tool_calls.clone() });
        messages.push(Message::ToolResults {
            results: first
                .tool_calls
                .iter()
                .enumerate()
                .map(|(i, c)| ToolResult {
                    tool_call_id: c.id.clone(),
                    name: c.name.clone(),
                    content: format!("result {i}"),
                    is_error: i == 1,
                })
                .collect(),
        });
        messages.push(Message::User { content: "be quick".into() });
        ModelRequest {
            model: "gemini-2.5-flash".into(),
            system: Some("sys".into()),
            messages,
            tools: vec![ToolSpec {
                name: "get_weather".into(),
                description: "Weather.".into(),
                parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "additionalProperties": false}),
            }],
        }
    }

    #[test]
    fn encodes_calls_results_signatures_and_tools() {
        let first = decode_response(&two_calls_body()).unwrap();
        let body = encode_request(&conversation(first)).unwrap();
        assert_eq!(
            body,
            json!({
                "contents": [
                    {"role": "user", "parts": [{"text": "weather and time?"}]},
                    {"role": "model", "parts": [
                        {"text": "Checking both."},
                        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2ln"},
                        {"functionCall": {"name": "get_time", "args": {}}},
                    ]},
                    {"role": "user", "parts": [
                        {"functionResponse": {"name": "get_weather", "response": {"output": "result 0"}}},
                        {"functionResponse": {"name": "get_time", "response": {"error": "result 1"}}},
                        {"text": "be quick"},
                    ]},
                ],
                "systemInstruction": {"parts": [{"text": "sys"}]},
                "tools": [{"functionDeclarations": [{
                    "name": "get_weather", "description": "Weather.",
                    "parametersJsonSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "additionalProperties": false},
                }]}],
                "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
            })
        );
    }

    #[test]
    fn native_merge_applies_edits_and_api_ids_go_back() {
        let mut first = decode_response(&two_calls_body()).unwrap();
        // A hook rewrote the first call's arguments and the text; the second call is gone.
        first.tool_calls[0].arguments = "{\"city\":\"Lyon\"}".into();
        first.tool_calls.truncate(1);
        first.text = "Only weather.".into();
        let body = encode_request(&conversation(first)).unwrap();
        assert_eq!(
            body["contents"][1]["parts"],
            json!([
                {"text": "Only weather."},
                {"functionCall": {"name": "get_weather", "args": {"city": "Lyon"}}, "thoughtSignature": "c2ln"},
            ])
        );

        // Ids the API gave are sent back on both sides.
        let body = json!({"candidates": [{"content": {"parts": [
            {"functionCall": {"id": "fc-1", "name": "f", "args": {}}}]}, "finishReason": "STOP"}]});
        let first = decode_response(&body).unwrap();
        assert_eq!(first.tool_calls[0].id, "fc-1");
        let body = encode_request(&conversation(first)).unwrap();
        assert_eq!(body["contents"][1]["parts"][0]["functionCall"]["id"], json!("fc-1"));
        assert_eq!(body["contents"][2]["parts"][0]["functionResponse"]["id"], json!("fc-1"));
    }
}
