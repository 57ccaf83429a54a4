//! The Anthropic Messages stream assembler.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{StreamAssembler, append, parse_data, str_of, truncated};
use crate::anthropic;
use crate::model::{Delta, ModelResponse, ProviderError, Usage};
use crate::sse::SseEvent;

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
///   (an empty concatenation keeps the start's `input`, normally `{}`; a
///   `partial_json` that is not a string is [`ProviderError::Decode`]). This
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
                        let piece = match delta.get("partial_json") {
                            None | Some(Value::Null) => "",
                            Some(Value::String(piece)) => piece.as_str(),
                            Some(other) => {
                                return Err(Self::error(format!(
                                    "the `partial_json` of content block {index} is {}, not a string",
                                    crate::json_type_name(other)
                                )));
                            }
                        };
                        self.partial_json.entry(index).or_default().push_str(piece);
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
