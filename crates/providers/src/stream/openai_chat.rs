//! The OpenAI Chat Completions stream assembler.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{StreamAssembler, parse_data, str_of, truncated};
use crate::model::{Delta, ModelResponse, ProviderError, Usage};
use crate::openai_chat;
use crate::sse::SseEvent;

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
///
/// As in the non-streamed decoder, a call is never invented: a call that no
/// fragment gave a non-empty `id` or `function.name` is
/// [`ProviderError::Decode`] at the end of the stream, and a
/// `function.arguments` fragment that is neither a string nor an object (nor
/// `null`) is [`ProviderError::Decode`] at once.
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

    fn add_tool_fragment(&mut self, fragment: &Value) -> Result<(), ProviderError> {
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
                None | Some(Value::Null) => {}
                Some(other) => {
                    return Err(ProviderError::Decode {
                        provider: openai_chat::FORMAT,
                        what: format!(
                            "`choices[0].delta.tool_calls[{index}].function.arguments` is {}, not a string",
                            crate::json_type_name(other)
                        ),
                    });
                }
            }
        }
        Ok(())
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
                    self.add_tool_fragment(fragment)?;
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
        for (index, (id, name, _)) in &self.calls {
            for (field, value) in [("id", id), ("function.name", name)] {
                if value.is_empty() {
                    return Err(ProviderError::Decode {
                        provider: openai_chat::FORMAT,
                        what: format!("`tool_calls[{index}].{field}` is missing from every fragment of the call"),
                    });
                }
            }
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
