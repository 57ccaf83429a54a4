//! The OpenAI Responses stream assembler.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{StreamAssembler, append, parse_data, str_of, truncated};
use crate::model::{Delta, ModelResponse, ProviderError, Usage};
use crate::openai_responses;
use crate::sse::SseEvent;

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
                let piece = match data.get("delta") {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(piece)) => piece.clone(),
                    Some(other) => {
                        return Err(Self::error(format!(
                            "the `delta` of `{kind}` is {}, not a string",
                            crate::json_type_name(other)
                        )));
                    }
                };
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
