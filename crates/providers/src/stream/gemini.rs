//! The Gemini stream assembler.

use serde_json::{Map, Value, json};

use super::{StreamAssembler, append, parse_data, str_of, truncated};
use crate::gemini;
use crate::model::{Delta, ModelResponse, ProviderError, Usage};
use crate::sse::SseEvent;

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
