//! [`ReplayProvider`]: an offline provider that plays back recorded responses.
//!
//! A replay file holds provider response bodies in one wire format. Each
//! [`ModelProvider::complete`] call returns the next body, decoded by the
//! same decoder a live provider of that format uses, and records the request
//! it was given, encoded in that wire format, for tests to inspect.
//!
//! Two file shapes are accepted:
//!
//! * a session file:
//!   ```json
//!   {"hookbox_replay": 1, "format": "openai-chat", "model": "gpt-4o",
//!    "note": "where the responses come from", "responses": [{...}, {...}]}
//!   ```
//!   `format` is `openai-chat`, `anthropic-messages`, `openai-responses` or
//!   `gemini`; `note` is optional; other fields are ignored;
//! * a provider recording (`interactions[].response.body`, as in
//!   `crates/providers/testdata/provider-recordings/`): the format is detected from the
//!   response bodies (`choices` → `openai-chat`, `"type": "message"` →
//!   `anthropic-messages`, `output` or `"object": "response"` →
//!   `openai-responses`, `candidates` → `gemini`), the model is the first interaction's
//!   `request.body.model` (or, when the request names none, the first
//!   response's `model`). A streamed response (an SSE `body` string, a
//!   `chunks` list of data payloads, or an `text/event-stream` content type)
//!   is played through the SSE decoder and the format's stream assembler,
//!   the same code a live streaming provider runs; its format is detected
//!   from its first event. A recording of one exchange may hold `request` and
//!   `response` at the top level instead of `interactions`.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use serde_json::Value;

use super::{WireFormat, json_type_name};
use crate::model::{ModelProvider, ModelRequest, ModelResponse, ProviderError};

/// The session-file version this build reads (`"hookbox_replay": 1`).
pub const SESSION_VERSION: u64 = 1;

/// Why a replay file could not be loaded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file could not be read.
    #[error("cannot read replay file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid JSON.
    #[error("replay file {} is not valid JSON: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The parse error (with line and column).
        source: serde_json::Error,
    },
    /// The file is JSON but not a replay session or a usable recording.
    #[error("replay file {}: {what}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// What was wrong, naming the field.
        what: String,
    },
}

/// A [`ModelProvider`] that plays back recorded response bodies in order.
///
/// Thread-safe: the playback position and the recorded requests live behind
/// a mutex, so one provider can be shared (`Arc`) by concurrent callers, who
/// then receive the responses in the order their calls take the lock.
#[derive(Debug)]
pub struct ReplayProvider {
    path: PathBuf,
    format: WireFormat,
    /// True for a session written by `hookbox run --record`: its responses are
    /// Hookbox's own [`ModelResponse`]s, replayed exactly as recorded.
    recorded: bool,
    model: String,
    note: Option<String>,
    responses: Vec<Value>,
    state: Mutex<State>,
}

/// The `format` of a session written by `hookbox run --record`: responses are
/// serialised [`ModelResponse`]s (whatever API produced them), requests are
/// recorded as serialised [`ModelRequest`]s.
pub const RECORDED_FORMAT: &str = "hookbox-recorded";

#[derive(Debug, Default)]
struct State {
    /// Index of the next response to play.
    next: usize,
    /// Every request received, encoded in `format`.
    requests: Vec<Value>,
}

impl ReplayProvider {
    /// Loads a session file or a provider recording (see the module docs).
    ///
    /// # Errors
    ///
    /// [`ReplayError::Io`] when the file cannot be read, [`ReplayError::Json`]
    /// when it is not JSON, [`ReplayError::Shape`] when it is neither shape,
    /// names an unknown format or version, holds no response, or holds a
    /// response that is neither a JSON object nor an SSE stream.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ReplayError> {
        let path = path.as_ref().to_path_buf();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(source) => return Err(ReplayError::Io { path, source }),
        };
        let value: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(source) => return Err(ReplayError::Json { path, source }),
        };
        Self::from_json(&value, path)
    }

    /// Loads a session from JSON already in memory (e.g. the `responses` of a
    /// run journal); `label` names it in errors.
    ///
    /// # Errors
    ///
    /// [`ReplayError::Shape`] as for [`Self::from_file`].
    pub fn from_json(value: &Value, label: impl AsRef<Path>) -> Result<Self, ReplayError> {
        Self::from_json_in(value, label, false)
    }

    /// [`ReplayProvider::from_json`] for the `responses` of a run's journal,
    /// which may hold none (a run that ended before its first model call,
    /// e.g. by `skip-run`); a replay that asks for one then gets the usual
    /// "no more responses" error.
    ///
    /// Errors: as [`ReplayProvider::from_json`], but for an empty session.
    pub fn from_journal_json(value: &Value, label: impl AsRef<Path>) -> Result<Self, ReplayError> {
        Self::from_json_in(value, label, true)
    }

    fn from_json_in(value: &Value, label: impl AsRef<Path>, allow_empty: bool) -> Result<Self, ReplayError> {
        let path = label.as_ref().to_path_buf();
        match Self::from_value(value, allow_empty) {
            Ok(loaded) => Ok(ReplayProvider {
                path,
                format: loaded.format,
                recorded: loaded.recorded,
                model: loaded.model,
                note: loaded.note,
                responses: loaded.responses,
                state: Mutex::new(State::default()),
            }),
            Err(what) => Err(ReplayError::Shape { path, what }),
        }
    }

    fn from_value(value: &Value, allow_empty: bool) -> Result<Loaded, String> {
        let Some(obj) = value.as_object() else {
            return Err(format!("expected a JSON object, found {}", json_type_name(value)));
        };
        if obj.contains_key("hookbox_replay") {
            load_session(obj, allow_empty)
        } else if obj.contains_key("interactions") {
            load_recording(obj)
        } else if obj.contains_key("response") {
            // One exchange at the top level (`request`, `response`).
            let mut one = serde_json::Map::new();
            one.insert("interactions".into(), Value::Array(vec![value.clone()]));
            load_recording(&one)
        } else {
            Err("neither a hookbox replay session (no `hookbox_replay` field) \
                 nor a provider recording (no `interactions` field)"
                .into())
        }
    }

    /// True for a session written by `hookbox run --record` ([`RECORDED_FORMAT`]).
    pub fn is_recorded(&self) -> bool {
        self.recorded
    }

    /// The file the responses were loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The wire format of the recorded responses (and of [`Self::requests`]);
    /// meaningless for a `hookbox-recorded` session (see [`Self::is_recorded`]).
    pub fn format(&self) -> WireFormat {
        self.format
    }

    /// The session's `note`, if it has one (recordings have none).
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// How many responses the file holds.
    pub fn response_count(&self) -> usize {
        self.responses.len()
    }

    /// How many responses have been played so far.
    pub fn played(&self) -> usize {
        self.state().next
    }

    /// Every request received so far, in order, encoded in the session's
    /// wire format (the body a live provider would have sent).
    pub fn requests(&self) -> Vec<Value> {
        self.state().requests.clone()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave State inconsistent
        // (each update is a single push or increment), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl ModelProvider for ReplayProvider {
    /// Always `replay`.
    fn name(&self) -> &str {
        "replay"
    }

    /// The session's `model` (or the recording's first request model).
    fn model(&self) -> &str {
        &self.model
    }

    /// Records `request` (encoded in the session's format), then decodes and
    /// returns the next recorded response.
    ///
    /// # Errors
    ///
    /// [`ProviderError::ReplayExhausted`] when every response has been played
    /// (the request is still recorded); the encoder's error when the request
    /// cannot be encoded (not recorded, no response consumed); the decoder's
    /// [`ProviderError::Decode`] when the recorded body does not decode (that
    /// response is consumed).
    fn skip_answered(&self, responses: usize) {
        let mut state = self.state();
        state.next = state.next.saturating_add(responses).min(self.responses.len());
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let encoded = if self.recorded {
            serde_json::to_value(request)
                .map_err(|e| ProviderError::Other(format!("cannot record the request: {e}")))?
        } else {
            self.format.encode_request(request)?
        };
        let body = {
            let mut state = self.state();
            state.requests.push(encoded);
            let wanted = state.next;
            let Some(body) = self.responses.get(wanted) else {
                return Err(ProviderError::ReplayExhausted {
                    path: self.path.display().to_string(),
                    wanted: wanted + 1,
                    available: self.responses.len(),
                });
            };
            state.next += 1;
            body
        };
        if self.recorded {
            return serde_json::from_value(body.clone()).map_err(|e| ProviderError::Decode {
                provider: RECORDED_FORMAT,
                what: format!("response #{} is not a recorded model response: {e}", self.played()),
            });
        }
        match body {
            // A streamed recording: the SSE text, through the live streaming path.
            Value::String(sse) => {
                crate::stream::assemble_bytes(self.format.stream_assembler(), self.format.as_str(), sse.as_bytes())
            }
            body => self.format.decode_response(body),
        }
    }
}

struct Loaded {
    format: WireFormat,
    recorded: bool,
    model: String,
    note: Option<String>,
    responses: Vec<Value>,
}

/// True for a recorded response that only has SSE text (a string `body`,
/// `chunks`, or an event-stream content type).
fn is_streamed(response: Option<&Value>) -> bool {
    let Some(response) = response else { return false };
    response.get("body").is_some_and(Value::is_string)
        || response.get("chunks").is_some()
        || response.get("content_type").and_then(Value::as_str).is_some_and(|t| t.starts_with("text/event-stream"))
}

fn load_session(obj: &serde_json::Map<String, Value>, allow_empty: bool) -> Result<Loaded, String> {
    match obj.get("hookbox_replay") {
        Some(v) if v.as_u64() == Some(SESSION_VERSION) => {}
        Some(v) => {
            return Err(format!(
                "unsupported `hookbox_replay` version {v}: this build reads version {SESSION_VERSION}"
            ));
        }
        None => return Err("no `hookbox_replay` field".into()),
    }
    let names = || WireFormat::ALL.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(" or ");
    let recorded = obj.get("format").and_then(Value::as_str) == Some(RECORDED_FORMAT);
    let format = match obj.get("format") {
        Some(Value::String(name)) if name == RECORDED_FORMAT => WireFormat::OpenAiChat,
        Some(Value::String(name)) => {
            WireFormat::from_name(name).ok_or_else(|| format!("unknown `format` `{name}`: expected {}", names()))?
        }
        Some(other) => return Err(format!("`format` is {}, expected {}", json_type_name(other), names())),
        None => return Err(format!("no `format` field: expected {}", names())),
    };
    let model = match obj.get("model") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        Some(Value::String(_)) => return Err("`model` is empty".into()),
        Some(other) => return Err(format!("`model` is {}, not a string", json_type_name(other))),
        None => return Err("no `model` field (the model name, e.g. `gpt-4o`)".into()),
    };
    let note = match obj.get("note") {
        None | Some(Value::Null) => None,
        Some(Value::String(n)) => Some(n.clone()),
        Some(other) => return Err(format!("`note` is {}, not a string", json_type_name(other))),
    };
    let responses = match obj.get("responses") {
        Some(Value::Array(list)) => list,
        Some(other) => return Err(format!("`responses` is {}, not an array", json_type_name(other))),
        None => return Err("no `responses` field (an array of response bodies)".into()),
    };
    if responses.is_empty() && !allow_empty {
        return Err("`responses` is empty: a session needs at least one response".into());
    }
    for (i, r) in responses.iter().enumerate() {
        if !r.is_object() {
            return Err(format!("`responses[{i}]` is {}, not a response body (a JSON object)", json_type_name(r)));
        }
    }
    Ok(Loaded { format, recorded, model, note, responses: responses.clone() })
}

fn load_recording(obj: &serde_json::Map<String, Value>) -> Result<Loaded, String> {
    let interactions = match obj.get("interactions") {
        Some(Value::Array(list)) if !list.is_empty() => list,
        Some(Value::Array(_)) => return Err("`interactions` is empty".into()),
        Some(other) => return Err(format!("`interactions` is {}, not an array", json_type_name(other))),
        None => return Err("no `interactions` field".into()),
    };
    let mut format = None;
    // The model a streamed response names (in its first event), if the request names none.
    let mut stream_model: Option<String> = None;
    let mut responses = Vec::with_capacity(interactions.len());
    for (i, interaction) in interactions.iter().enumerate() {
        let response = interaction.get("response");
        if is_streamed(response) {
            let sse = sse_text(response).map_err(|what| format!("`interactions[{i}].response`: {what}"))?;
            let (detected, model) = sse_format(&sse).map_err(|what| format!("`interactions[{i}].response`: {what}"))?;
            match format {
                None => format = Some(detected),
                Some(f) if f != detected => {
                    return Err(format!("`interactions[{i}].response` is {detected} but earlier responses are {f}"));
                }
                Some(_) => {}
            }
            if stream_model.is_none() {
                stream_model = model;
            }
            responses.push(Value::String(sse));
            continue;
        }
        let Some(body) = response.and_then(|r| r.get("body")).filter(|b| b.is_object()) else {
            return Err(format!("`interactions[{i}].response.body` is missing or not a JSON object"));
        };
        let detected = if body.get("choices").is_some() {
            WireFormat::OpenAiChat
        } else if body.get("type").and_then(Value::as_str) == Some("message") {
            WireFormat::AnthropicMessages
        } else if body.get("object").and_then(Value::as_str) == Some("response") || body.get("output").is_some() {
            WireFormat::OpenAiResponses
        } else if body.get("candidates").is_some() || body.get("promptFeedback").is_some() {
            WireFormat::Gemini
        } else {
            return Err(format!(
                "cannot tell the wire format of `interactions[{i}].response.body`: \
                 it has none of `choices` (openai-chat), `\"type\": \"message\"` (anthropic-messages), \
                 `output` (openai-responses) or `candidates` (gemini)"
            ));
        };
        match format {
            None => format = Some(detected),
            Some(f) if f != detected => {
                return Err(format!("`interactions[{i}].response.body` is {detected} but earlier responses are {f}"));
            }
            Some(_) => {}
        }
        responses.push(body.clone());
    }
    let Some(format) = format else {
        return Err("`interactions` is empty".into());
    };
    let first = &interactions[0];
    let model = first
        .pointer("/request/body/model")
        .and_then(Value::as_str)
        .or_else(|| responses.first().and_then(|b| b.get("model")).and_then(Value::as_str))
        .or(stream_model.as_deref())
        .filter(|m| !m.is_empty())
        .ok_or("no model name: neither `interactions[0].request.body.model` nor the first response's `model` is set")?
        .to_owned();
    Ok(Loaded { format, recorded: false, model, note: None, responses })
}

/// The SSE text of a streamed recorded response: its `body` string as it
/// is, or its `chunks` (one data payload each) as `data:` events.
fn sse_text(response: Option<&Value>) -> Result<String, String> {
    let Some(response) = response else { return Err("no response".into()) };
    match (response.get("body"), response.get("chunks")) {
        (Some(Value::String(text)), _) => Ok(text.clone()),
        (_, Some(Value::Array(chunks))) => {
            let mut text = String::new();
            for (j, chunk) in chunks.iter().enumerate() {
                let data = match chunk {
                    Value::String(s) => s.clone(),
                    Value::Object(_) => chunk.to_string(),
                    other => return Err(format!("`chunks[{j}]` is {}, not an event's data", json_type_name(other))),
                };
                if data.contains('\n') {
                    return Err(format!("`chunks[{j}]` spans lines: one data payload per chunk"));
                }
                text.push_str("data: ");
                text.push_str(&data);
                text.push_str("\n\n");
            }
            Ok(text)
        }
        _ => Err("a streamed response with neither a `body` string nor a `chunks` list".into()),
    }
}

/// The wire format of an SSE stream, from its first event with JSON data,
/// and the model that event names, if any.
fn sse_format(sse: &str) -> Result<(WireFormat, Option<String>), String> {
    let events = crate::sse::decode_all(sse.as_bytes()).map_err(|e| format!("the event stream: {e}"))?;
    for event in &events {
        let Ok(data) = serde_json::from_str::<Value>(&event.data) else { continue };
        let kind = data.get("type").and_then(Value::as_str).unwrap_or("");
        let model = |v: Option<&Value>| v.and_then(Value::as_str).filter(|m| !m.is_empty()).map(str::to_owned);
        let found = if data.get("choices").is_some()
            || data.get("object").and_then(Value::as_str) == Some("chat.completion.chunk")
        {
            Some((WireFormat::OpenAiChat, model(data.get("model"))))
        } else if kind.starts_with("message_") || kind.starts_with("content_block_") {
            Some((WireFormat::AnthropicMessages, model(data.pointer("/message/model"))))
        } else if kind.starts_with("response.") {
            Some((WireFormat::OpenAiResponses, model(data.pointer("/response/model"))))
        } else if data.get("candidates").is_some() {
            Some((WireFormat::Gemini, model(data.get("modelVersion"))))
        } else {
            None
        };
        if let Some(found) = found {
            return Ok(found);
        }
    }
    Err("cannot tell the wire format of the event stream: no event has `choices` (openai-chat), \
         a `message_*` or `content_block_*` type (anthropic-messages), a `response.*` type \
         (openai-responses) or `candidates` (gemini)"
        .into())
}

#[cfg(test)]
mod tests;
