//! Stream assemblers: one per API, turning decoded SSE events
//! ([`super::sse::SseEvent`]) into the same [`ModelResponse`] the API's
//! non-streaming decoder gives for the same answer.
//!
//! Each assembler rebuilds the non-streaming response body from the events
//! and hands it to that format's `decode_response`, so both paths share every
//! rule (finish reasons, usage, `{}` for empty arguments, server-side tools).
//! Text and reasoning pieces are returned as [`Delta`]s as they arrive.
//!
//! A stream that ends before its final event is
//! [`ProviderError::Truncated`] with the usage reported so far, never a
//! success. Unknown event types and unknown fields are ignored.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::sse::SseEvent;
use super::{anthropic, gemini, openai_chat, openai_responses};
use crate::model::{Delta, ModelResponse, ProviderError, Usage};

/// Assembles one streamed response from its SSE events.
pub trait StreamAssembler {
    /// Takes the next event; returns the text and reasoning pieces it carried.
    ///
    /// # Errors
    ///
    /// [`ProviderError::Decode`] for an event whose data is not the JSON the
    /// API documents (or refers to a block or item never started), and
    /// [`ProviderError::StreamError`] for an error event.
    fn push(&mut self, event: &SseEvent) -> Result<Vec<Delta>, ProviderError>;

    /// The usage reported so far (for [`ProviderError::Truncated`]).
    fn partial_usage(&self) -> Usage;

    /// Whether the final event has arrived.
    fn is_complete(&self) -> bool;

    /// Ends the stream and returns the assembled response.
    ///
    /// # Errors
    ///
    /// [`ProviderError::Truncated`] when the final event never came; the
    /// format's decode error when the assembled body does not decode.
    fn finish(self: Box<Self>) -> Result<ModelResponse, ProviderError>;
}

/// Feeds a whole recorded stream (bytes) through the SSE decoder and `assembler`.
///
/// # Errors
///
/// As [`StreamAssembler::push`] and [`StreamAssembler::finish`];
/// [`ProviderError::Decode`] when the SSE itself is too large.
pub fn assemble_bytes(
    mut assembler: Box<dyn StreamAssembler + Send>,
    provider: &'static str,
    bytes: &[u8],
) -> Result<ModelResponse, ProviderError> {
    let mut decoder = super::sse::SseDecoder::new();
    let events =
        decoder.feed(bytes).map_err(|e| ProviderError::Decode { provider, what: format!("the event stream: {e}") })?;
    for event in &events {
        assembler.push(event)?;
    }
    assembler.finish()
}

fn parse_data(provider: &'static str, event: &SseEvent) -> Result<Value, ProviderError> {
    serde_json::from_str(&event.data).map_err(|e| ProviderError::Decode {
        provider,
        what: format!("the data of a `{}` event is not JSON: {e}", event.event),
    })
}

fn truncated(provider: &'static str, what: &str, partial_usage: Usage) -> ProviderError {
    ProviderError::Truncated { provider, what: what.to_owned(), partial_usage }
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Appends `piece` to the string at `obj[key]` (creating it).
fn append(obj: &mut Value, key: &str, piece: &str) {
    if let Some(map) = obj.as_object_mut() {
        match map.get_mut(key) {
            Some(Value::String(s)) => s.push_str(piece),
            _ => {
                map.insert(key.to_owned(), json!(piece));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Anthropic Messages
// ---------------------------------------------------------------------------

/// Assembles an Anthropic Messages stream.
///
/// Event flow (<https://docs.anthropic.com/en/docs/build-with-claude/streaming>):
/// `message_start` (the message with empty `content` and initial `usage`),
/// then per content block `content_block_start` (`index`, `content_block`),
/// `content_block_delta`s and `content_block_stop`, then `message_delta`
/// (`stop_reason`, cumulative `usage`) and `message_stop`, the final event.
///
/// * Blocks are kept by `index`. `text_delta` appends to `text`,
///   `thinking_delta` to `thinking`, `signature_delta` sets `signature`,
///   `citations_delta` appends to `citations`; `input_json_delta` pieces are
///   concatenated per block and parsed at `content_block_stop` into `input`
///   (an empty concatenation keeps the start's `input`, normally `{}`). This
///   holds for `tool_use` and `server_tool_use` alike; server-side blocks then
///   stay data (see [`anthropic::decode_response`]), never tool calls.
/// * `usage` fields of `message_delta` overwrite those of `message_start`.
/// * `ping` and unknown events are ignored; `error` is
///   [`ProviderError::StreamError`] with the HTTP status Anthropic documents
///   for the error type (<https://docs.anthropic.com/en/api/errors>).
#[derive(Debug, Default)]
pub struct AnthropicStream {
    message: Option<Value>,
    blocks: BTreeMap<u64, Value>,
    partial_json: BTreeMap<u64, String>,
    stop_reason: Value,
    stop_sequence: Value,
    done: bool,
}

impl AnthropicStream {
    /// A fresh assembler.
    pub fn new() -> Self {
        Self::default()
    }

    fn error(what: impl Into<String>) -> ProviderError {
        ProviderError::Decode { provider: anthropic::FORMAT, what: what.into() }
    }

    fn finish_block(&mut self, index: u64) -> Result<(), ProviderError> {
        let Some(json_text) = self.partial_json.remove(&index) else { return Ok(()) };
        if json_text.trim().is_empty() {
            return Ok(());
        }
        let input: Value = serde_json::from_str(&json_text)
            .map_err(|e| Self::error(format!("the streamed input of content block {index} is not valid JSON: {e}")))?;
        if let Some(block) = self.blocks.get_mut(&index).and_then(Value::as_object_mut) {
            block.insert("input".into(), input);
        }
        Ok(())
    }

    fn usage_value(&self) -> Option<&Value> {
        self.message.as_ref().and_then(|m| m.get("usage"))
    }

    fn model(&self) -> &str {
        self.message.as_ref().map_or("", |m| str_of(m, "model"))
    }
}

/// The HTTP status Anthropic documents for an error `type`.
fn anthropic_error_status(kind: &str) -> Option<u16> {
    Some(match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        _ => return None,
    })
}

impl StreamAssembler for AnthropicStream {
    fn push(&mut self, event: &SseEvent) -> Result<Vec<Delta>, ProviderError> {
        if self.done {
            return Ok(Vec::new());
        }
        let data = parse_data(anthropic::FORMAT, event)?;
        let kind = data.get("type").and_then(Value::as_str).unwrap_or(&event.event);
        let index = || {
            data.get("index")
                .and_then(Value::as_u64)
                .ok_or_else(|| Self::error(format!("a `{kind}` event has no `index`")))
        };
        let mut deltas = Vec::new();
        match kind {
            "message_start" => {
                let Some(message) = data.get("message").filter(|m| m.is_object()) else {
                    return Err(Self::error("`message_start` has no `message` object"));
                };
                self.message = Some(message.clone());
            }
            "content_block_start" => {
                let index = index()?;
                let Some(block) = data.get("content_block").filter(|b| b.is_object()) else {
                    return Err(Self::error(format!("`content_block_start` {index} has no `content_block` object")));
                };
                self.blocks.insert(index, block.clone());
            }
            "content_block_delta" => {
                let index = index()?;
                let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                let Some(block) = self.blocks.get_mut(&index) else {
                    return Err(Self::error(format!("`content_block_delta` for block {index}, which never started")));
                };
                match str_of(&delta, "type") {
                    "text_delta" => {
                        let piece = str_of(&delta, "text");
                        append(block, "text", piece);
                        if !piece.is_empty() {
                            deltas.push(Delta::Text(piece.to_owned()));
                        }
                    }
                    "thinking_delta" => {
                        let piece = str_of(&delta, "thinking");
                        append(block, "thinking", piece);
                        if !piece.is_empty() {
                            deltas.push(Delta::Thinking(piece.to_owned()));
                        }
                    }
                    "signature_delta" => append(block, "signature", str_of(&delta, "signature")),
                    "input_json_delta" => {
                        self.partial_json.entry(index).or_default().push_str(str_of(&delta, "partial_json"));
                    }
                    "citations_delta" => {
                        if let (Some(map), Some(citation)) = (block.as_object_mut(), delta.get("citation")) {
                            match map.entry("citations").or_insert_with(|| json!([])) {
                                Value::Array(list) => list.push(citation.clone()),
                                other => *other = json!([citation]),
                            }
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = index()?;
                self.finish_block(index)?;
            }
            "message_delta" => {
                if let Some(delta) = data.get("delta") {
                    if let Some(v) = delta.get("stop_reason") {
                        self.stop_reason = v.clone();
                    }
                    if let Some(v) = delta.get("stop_sequence") {
                        self.stop_sequence = v.clone();
                    }
                }
                if let Some(Value::Object(usage)) = data.get("usage") {
                    let message = self.message.get_or_insert_with(|| json!({}));
                    if let Some(map) = message.as_object_mut() {
                        let target = map.entry("usage").or_insert_with(|| json!({}));
                        if !target.is_object() {
                            *target = json!({});
                        }
                        if let Some(target) = target.as_object_mut() {
                            for (k, v) in usage {
                                if !v.is_null() {
                                    target.insert(k.clone(), v.clone());
                                }
                            }
                        }
                    }
                }
            }
            "message_stop" => self.done = true,
            "error" => {
                let error = data.get("error").unwrap_or(&data);
                let kind = str_of(error, "type").to_owned();
                return Err(ProviderError::StreamError {
                    provider: anthropic::FORMAT,
                    status: anthropic_error_status(&kind),
                    kind,
                    message: str_of(error, "message").to_owned(),
                    partial_usage: self.partial_usage(),
                });
            }
            // ping and anything new
            _ => {}
        }
        Ok(deltas)
    }

    fn partial_usage(&self) -> Usage {
        anthropic::decode_usage(self.usage_value(), self.model())
    }

    fn is_complete(&self) -> bool {
        self.done
    }

    fn finish(mut self: Box<Self>) -> Result<ModelResponse, ProviderError> {
        if !self.done {
            return Err(truncated(anthropic::FORMAT, "no `message_stop` event", self.partial_usage()));
        }
        let open: Vec<u64> = self.partial_json.keys().copied().collect();
        for index in open {
            self.finish_block(index)?;
        }
        let mut body = match self.message.take() {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        body.entry("type").or_insert_with(|| json!("message"));
        body.insert("content".into(), Value::Array(std::mem::take(&mut self.blocks).into_values().collect()));
        body.insert("stop_reason".into(), self.stop_reason.clone());
        body.insert("stop_sequence".into(), self.stop_sequence.clone());
        anthropic::decode_response(&Value::Object(body))
    }
}

// ---------------------------------------------------------------------------
// OpenAI Chat Completions
// ---------------------------------------------------------------------------

/// Assembles an OpenAI Chat Completions stream (`stream: true` with
/// `stream_options.include_usage`).
///
/// Chunks (<https://platform.openai.com/docs/api-reference/chat-streaming/streaming>)
/// are `chat.completion.chunk` objects; only choice `index` 0 is read:
/// `delta.content` appends to the text, `delta.reasoning_content` /
/// `delta.reasoning` (OpenAI-compatible servers) to the reasoning, and each
/// `delta.tool_calls[]` fragment is added to the call with its `index`: `id`,
/// `type` and `function.name` are taken from the first fragment that has
/// them (later fragments do not repeat them), `function.arguments` pieces are
/// concatenated. Fragments of different indices may interleave and stay
/// separate; a fragment without `index` (some compatible servers) starts a
/// new call when it has an `id`, else continues the last one. The last
/// non-null `finish_reason` is kept. The usage comes from the usage-only
/// chunk (`choices: []`) before `data: [DONE]`, the final event. A chunk with
/// `error` is [`ProviderError::StreamError`].
#[derive(Debug, Default)]
pub struct OpenAiChatStream {
    model: String,
    text: Option<String>,
    reasoning: Option<String>,
    /// Calls by index; each `(id, name, arguments)`.
    calls: BTreeMap<u64, (String, String, String)>,
    last_index: Option<u64>,
    finish_reason: Value,
    usage: Option<Value>,
    done: bool,
}

impl OpenAiChatStream {
    /// A fresh assembler.
    pub fn new() -> Self {
        Self::default()
    }

    fn add_tool_fragment(&mut self, fragment: &Value) {
        let id = str_of(fragment, "id");
        let index = match fragment.get("index").and_then(Value::as_u64) {
            Some(i) => i,
            None => match self.last_index {
                Some(last) if id.is_empty() => last,
                Some(_) | None => self.calls.keys().next_back().map_or(0, |k| k + 1),
            },
        };
        self.last_index = Some(index);
        let entry = self.calls.entry(index).or_default();
        if entry.0.is_empty() && !id.is_empty() {
            entry.0 = id.to_owned();
        }
        if let Some(function) = fragment.get("function") {
            let name = str_of(function, "name");
            if entry.1.is_empty() && !name.is_empty() {
                entry.1 = name.to_owned();
            }
            match function.get("arguments") {
                Some(Value::String(piece)) => entry.2.push_str(piece),
                // Some compatible servers send the arguments as an object at once.
                Some(v @ Value::Object(_)) => entry.2.push_str(&v.to_string()),
                _ => {}
            }
        }
    }
}

impl StreamAssembler for OpenAiChatStream {
    fn push(&mut self, event: &SseEvent) -> Result<Vec<Delta>, ProviderError> {
        if self.done {
            return Ok(Vec::new());
        }
        if event.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        let data = parse_data(openai_chat::FORMAT, event)?;
        if let Some(error) = data.get("error").filter(|e| !e.is_null()) {
            let kind = ["type", "code"].iter().map(|k| str_of(error, k)).find(|s| !s.is_empty()).unwrap_or("error");
            let status = match kind {
                "server_error" => Some(500),
                "rate_limit_exceeded" | "rate_limit_error" => Some(429),
                _ => None,
            };
            return Err(ProviderError::StreamError {
                provider: openai_chat::FORMAT,
                kind: kind.to_owned(),
                message: str_of(error, "message").to_owned(),
                status,
                partial_usage: self.partial_usage(),
            });
        }
        if self.model.is_empty() {
            self.model = str_of(&data, "model").to_owned();
        }
        if let Some(usage) = data.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let mut deltas = Vec::new();
        let choices = data.get("choices").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        for choice in choices.iter().filter(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0) {
            if let Some(delta) = choice.get("delta") {
                if let Some(piece) = delta.get("content").and_then(Value::as_str) {
                    self.text.get_or_insert_with(String::new).push_str(piece);
                    if !piece.is_empty() {
                        deltas.push(Delta::Text(piece.to_owned()));
                    }
                }
                if let Some(piece) =
                    ["reasoning_content", "reasoning"].iter().find_map(|k| delta.get(*k).and_then(Value::as_str))
                {
                    self.reasoning.get_or_insert_with(String::new).push_str(piece);
                    if !piece.is_empty() {
                        deltas.push(Delta::Thinking(piece.to_owned()));
                    }
                }
                for fragment in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                    self.add_tool_fragment(fragment);
                }
            }
            if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
                self.finish_reason = reason.clone();
            }
        }
        Ok(deltas)
    }

    fn partial_usage(&self) -> Usage {
        openai_chat::decode_usage(self.usage.as_ref(), &self.model)
    }

    fn is_complete(&self) -> bool {
        self.done
    }

    fn finish(self: Box<Self>) -> Result<ModelResponse, ProviderError> {
        if !self.done {
            return Err(truncated(openai_chat::FORMAT, "no `data: [DONE]` event", self.partial_usage()));
        }
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        message.insert("content".into(), self.text.map_or(Value::Null, Value::String));
        if let Some(reasoning) = self.reasoning {
            message.insert("reasoning_content".into(), json!(reasoning));
        }
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .calls
                .into_values()
                .map(|(id, name, arguments)| {
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
                })
                .collect();
            message.insert("tool_calls".into(), Value::Array(calls));
        }
        let mut body = Map::new();
        body.insert("object".into(), json!("chat.completion"));
        body.insert("model".into(), json!(self.model));
        body.insert(
            "choices".into(),
            json!([{"index": 0, "message": Value::Object(message), "finish_reason": self.finish_reason}]),
        );
        if let Some(usage) = self.usage {
            body.insert("usage".into(), usage);
        }
        openai_chat::decode_response(&Value::Object(body))
    }
}

// ---------------------------------------------------------------------------
// OpenAI Responses
// ---------------------------------------------------------------------------

/// Assembles an OpenAI Responses stream.
///
/// Events (<https://platform.openai.com/docs/api-reference/responses-streaming>):
/// `response.created` / `response.in_progress` (the response so far),
/// `response.output_item.added` (an item at `output_index`),
/// `response.content_part.added`, `response.output_text.delta` (text at
/// `output_index` / `content_index`), `response.refusal.delta`,
/// `response.reasoning_summary_text.delta` and `response.reasoning_text.delta`
/// (reasoning), `response.function_call_arguments.delta` (argument pieces of
/// the function_call item with `item_id`, or at `output_index`), `….done`
/// events (the complete value, which replaces the pieces), and
/// `response.output_item.done` (the complete item). The final event is
/// `response.completed` or `response.incomplete` (status, usage);
/// `response.failed` and `error` are [`ProviderError::StreamError`].
#[derive(Debug, Default)]
pub struct ResponsesStream {
    response: Option<Value>,
    items: BTreeMap<u64, Value>,
    done: bool,
}

impl ResponsesStream {
    /// A fresh assembler.
    pub fn new() -> Self {
        Self::default()
    }

    fn error(what: impl Into<String>) -> ProviderError {
        ProviderError::Decode { provider: openai_responses::FORMAT, what: what.into() }
    }

    /// The item an event refers to: by `output_index`, else by `item_id`.
    fn item_mut(&mut self, data: &Value) -> Result<&mut Value, ProviderError> {
        let index = match data.get("output_index").and_then(Value::as_u64) {
            Some(i) => Some(i),
            None => {
                let id = str_of(data, "item_id");
                self.items.iter().find(|(_, item)| str_of(item, "id") == id && !id.is_empty()).map(|(i, _)| *i)
            }
        };
        let kind = str_of(data, "type").to_owned();
        index
            .and_then(|i| self.items.get_mut(&i))
            .ok_or_else(|| Self::error(format!("a `{kind}` event refers to an output item that was never added")))
    }

    /// The content (or summary) part `index` of `item[key]`, created if missing.
    fn part_mut<'a>(item: &'a mut Value, key: &str, index: u64, kind: &str) -> Option<&'a mut Value> {
        let map = item.as_object_mut()?;
        let list = map.entry(key).or_insert_with(|| json!([]));
        let list = list.as_array_mut()?;
        let index = usize::try_from(index).ok()?;
        // Bounded: parts arrive in order, one new index at a time.
        if index > list.len() + 64 {
            return None;
        }
        while list.len() <= index {
            list.push(json!({"type": kind}));
        }
        list.get_mut(index)
    }
}

impl StreamAssembler for ResponsesStream {
    fn push(&mut self, event: &SseEvent) -> Result<Vec<Delta>, ProviderError> {
        if self.done {
            return Ok(Vec::new());
        }
        let data = parse_data(openai_responses::FORMAT, event)?;
        let kind = data.get("type").and_then(Value::as_str).unwrap_or(&event.event).to_owned();
        let mut deltas = Vec::new();
        match kind.as_str() {
            "response.created" | "response.in_progress" | "response.queued" => {
                if let Some(r) = data.get("response").filter(|r| r.is_object()) {
                    self.response = Some(r.clone());
                }
            }
            "response.output_item.added" | "response.output_item.done" => {
                let index = data
                    .get("output_index")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| Self::error(format!("a `{kind}` event has no `output_index`")))?;
                let Some(item) = data.get("item").filter(|i| i.is_object()) else {
                    return Err(Self::error(format!("a `{kind}` event has no `item` object")));
                };
                self.items.insert(index, item.clone());
            }
            "response.content_part.added" | "response.content_part.done" => {
                let content_index = data.get("content_index").and_then(Value::as_u64).unwrap_or(0);
                let part = data.get("part").cloned().unwrap_or_else(|| json!({}));
                let item = self.item_mut(&data)?;
                if let Some(slot) = Self::part_mut(item, "content", content_index, "output_text") {
                    *slot = part;
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let (part_kind, key) =
                    if kind == "response.refusal.delta" { ("refusal", "refusal") } else { ("output_text", "text") };
                let content_index = data.get("content_index").and_then(Value::as_u64).unwrap_or(0);
                let piece = str_of(&data, "delta").to_owned();
                let item = self.item_mut(&data)?;
                if let Some(part) = Self::part_mut(item, "content", content_index, part_kind) {
                    append(part, key, &piece);
                }
                if !piece.is_empty() {
                    deltas.push(Delta::Text(piece));
                }
            }
            "response.output_text.done" => {
                let content_index = data.get("content_index").and_then(Value::as_u64).unwrap_or(0);
                let text = data.get("text").cloned();
                let item = self.item_mut(&data)?;
                let part = Self::part_mut(item, "content", content_index, "output_text");
                if let (Some(map), Some(text)) = (part.and_then(Value::as_object_mut), text) {
                    map.insert("text".into(), text);
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let (key, index_key, part_kind) = if kind == "response.reasoning_text.delta" {
                    ("content", "content_index", "reasoning_text")
                } else {
                    ("summary", "summary_index", "summary_text")
                };
                let index = data.get(index_key).and_then(Value::as_u64).unwrap_or(0);
                let piece = str_of(&data, "delta").to_owned();
                let item = self.item_mut(&data)?;
                if let Some(part) = Self::part_mut(item, key, index, part_kind) {
                    append(part, "text", &piece);
                }
                if !piece.is_empty() {
                    deltas.push(Delta::Thinking(piece));
                }
            }
            "response.function_call_arguments.delta" => {
                let piece = str_of(&data, "delta").to_owned();
                let item = self.item_mut(&data)?;
                append(item, "arguments", &piece);
            }
            "response.function_call_arguments.done" => {
                let arguments = data.get("arguments").cloned();
                let item = self.item_mut(&data)?;
                if let (Some(map), Some(arguments)) = (item.as_object_mut(), arguments) {
                    map.insert("arguments".into(), arguments);
                }
            }
            "response.completed" | "response.incomplete" => {
                let Some(r) = data.get("response").filter(|r| r.is_object()) else {
                    return Err(Self::error(format!("`{kind}` has no `response` object")));
                };
                self.response = Some(r.clone());
                self.done = true;
            }
            "response.failed" | "error" => {
                let error = data
                    .pointer("/response/error")
                    .filter(|e| e.is_object())
                    .or_else(|| data.get("error").filter(|e| e.is_object()))
                    .unwrap_or(&data);
                let code = ["code", "type"].iter().map(|k| str_of(error, k)).find(|s| !s.is_empty()).unwrap_or("error");
                let status = match code {
                    "server_error" => Some(500),
                    "rate_limit_exceeded" => Some(429),
                    _ => None,
                };
                if let Some(r) = data.get("response").filter(|r| r.is_object()) {
                    self.response = Some(r.clone());
                }
                return Err(ProviderError::StreamError {
                    provider: openai_responses::FORMAT,
                    kind: code.to_owned(),
                    message: str_of(error, "message").to_owned(),
                    status,
                    partial_usage: self.partial_usage(),
                });
            }
            _ => {}
        }
        Ok(deltas)
    }

    fn partial_usage(&self) -> Usage {
        let response = self.response.as_ref();
        let model = response.map_or("", |r| str_of(r, "model"));
        openai_responses::decode_usage(response.and_then(|r| r.get("usage")), model)
    }

    fn is_complete(&self) -> bool {
        self.done
    }

    fn finish(self: Box<Self>) -> Result<ModelResponse, ProviderError> {
        if !self.done {
            return Err(truncated(
                openai_responses::FORMAT,
                "no `response.completed` (or `response.incomplete`) event",
                self.partial_usage(),
            ));
        }
        let mut body = match self.response {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let assembled: Vec<Value> = self.items.into_values().collect();
        let final_is_empty = body.get("output").and_then(Value::as_array).is_none_or(Vec::is_empty);
        if !assembled.is_empty() || final_is_empty {
            body.insert("output".into(), Value::Array(assembled));
        }
        openai_responses::decode_response(&Value::Object(body))
    }
}

// ---------------------------------------------------------------------------
// Gemini
// ---------------------------------------------------------------------------

/// Assembles a Gemini `streamGenerateContent?alt=sse` stream.
///
/// Each event's data is a whole `GenerateContentResponse` holding the next
/// parts of `candidates[0].content`
/// (<https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent>).
/// Parts are concatenated in order (adjacent plain text parts, or adjacent
/// thought parts, merged; parts with a `thoughtSignature` kept apart);
/// function calls arrive whole. The last `usageMetadata`, `modelVersion` and
/// `responseId` win. The final event is the chunk with a `finishReason` (or a
/// prompt `blockReason`). A chunk with `error` is
/// [`ProviderError::StreamError`] with the error's `code` as status.
#[derive(Debug, Default)]
pub struct GeminiStream {
    parts: Vec<Value>,
    finish_reason: Option<Value>,
    usage: Option<Value>,
    model_version: Option<Value>,
    response_id: Option<Value>,
    prompt_feedback: Option<Value>,
    done: bool,
}

impl GeminiStream {
    /// A fresh assembler.
    pub fn new() -> Self {
        Self::default()
    }

    fn push_part(&mut self, part: &Value) {
        let mergeable = |p: &Value| {
            p.as_object().is_some_and(|m| {
                m.get("text").is_some_and(Value::is_string) && m.keys().all(|k| k == "text" || k == "thought")
            })
        };
        let thought = |p: &Value| p.get("thought").and_then(Value::as_bool) == Some(true);
        if let Some(last) =
            self.parts.last_mut().filter(|last| mergeable(last) && mergeable(part) && thought(last) == thought(part))
        {
            append(last, "text", str_of(part, "text"));
            return;
        }
        self.parts.push(part.clone());
    }
}

impl StreamAssembler for GeminiStream {
    fn push(&mut self, event: &SseEvent) -> Result<Vec<Delta>, ProviderError> {
        let data = parse_data(gemini::FORMAT, event)?;
        if let Some(error) = data.get("error").filter(|e| !e.is_null()) {
            return Err(ProviderError::StreamError {
                provider: gemini::FORMAT,
                kind: str_of(error, "status").to_owned(),
                message: str_of(error, "message").to_owned(),
                status: error.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok()),
                partial_usage: self.partial_usage(),
            });
        }
        for (key, slot) in [
            ("usageMetadata", &mut self.usage),
            ("modelVersion", &mut self.model_version),
            ("responseId", &mut self.response_id),
            ("promptFeedback", &mut self.prompt_feedback),
        ] {
            if let Some(v) = data.get(key).filter(|v| !v.is_null()) {
                *slot = Some(v.clone());
            }
        }
        let mut deltas = Vec::new();
        if let Some(candidate) = data.get("candidates").and_then(Value::as_array).and_then(|c| c.first()) {
            for part in candidate.pointer("/content/parts").and_then(Value::as_array).into_iter().flatten() {
                if let Some(text) = part.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                    let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
                    deltas.push(if thought { Delta::Thinking(text.to_owned()) } else { Delta::Text(text.to_owned()) });
                }
                self.push_part(part);
            }
            if let Some(reason) = candidate.get("finishReason").filter(|r| !r.is_null()) {
                self.finish_reason = Some(reason.clone());
                self.done = true;
            }
        } else if self.prompt_feedback.as_ref().is_some_and(|f| f.get("blockReason").is_some()) {
            self.done = true;
        }
        Ok(deltas)
    }

    fn partial_usage(&self) -> Usage {
        let model = self.model_version.as_ref().and_then(Value::as_str).unwrap_or("");
        gemini::decode_usage(self.usage.as_ref(), model)
    }

    fn is_complete(&self) -> bool {
        self.done
    }

    fn finish(self: Box<Self>) -> Result<ModelResponse, ProviderError> {
        if !self.done {
            return Err(truncated(gemini::FORMAT, "no chunk with a `finishReason`", self.partial_usage()));
        }
        let mut body = Map::new();
        if self.finish_reason.is_some() || !self.parts.is_empty() {
            let mut candidate = Map::new();
            candidate.insert("content".into(), json!({"role": "model", "parts": self.parts}));
            if let Some(reason) = self.finish_reason {
                candidate.insert("finishReason".into(), reason);
            }
            candidate.insert("index".into(), json!(0));
            body.insert("candidates".into(), json!([Value::Object(candidate)]));
        }
        for (key, value) in [
            ("usageMetadata", self.usage),
            ("modelVersion", self.model_version),
            ("responseId", self.response_id),
            ("promptFeedback", self.prompt_feedback),
        ] {
            if let Some(v) = value {
                body.insert(key.into(), v);
            }
        }
        gemini::decode_response(&Value::Object(body))
    }
}

#[cfg(test)]
mod tests;
