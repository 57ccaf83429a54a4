//! Model providers: wire-format codecs, prices and the replay provider.
//!
//! * [`openai_chat`] encodes a [`ModelRequest`] as an OpenAI Chat Completions
//!   request body and decodes its (non-streaming) response body.
//! * [`anthropic`] does the same for the Anthropic Messages API.
//! * [`pricing`] holds the built-in price table the decoders use to fill
//!   [`crate::model::Usage::cost`].
//! * [`replay`] is an offline [`crate::model::ModelProvider`] that plays back
//!   recorded response bodies through the same decoders a live provider uses.
//!
//! [`WireFormat`] names a format and dispatches to its codec, so code that
//! only knows the format's name (a replay session, a config file) can encode
//! and decode without matching on it.

use std::fmt;

use crate::model::{ModelRequest, ModelResponse, ProviderError};

pub mod anthropic;
pub mod openai_chat;
pub mod pricing;
pub mod replay;

/// A provider wire format: the JSON body shapes of one provider API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireFormat {
    /// OpenAI Chat Completions (`POST /v1/chat/completions`), also spoken by
    /// OpenAI-compatible servers and routers. Named `openai-chat`.
    OpenAiChat,
    /// Anthropic Messages (`POST /v1/messages`). Named `anthropic-messages`.
    AnthropicMessages,
}

impl WireFormat {
    /// Every format, in a fixed order (for error messages and listings).
    pub const ALL: [WireFormat; 2] = [WireFormat::OpenAiChat, WireFormat::AnthropicMessages];

    /// The format's name as written in replay sessions and error messages:
    /// `openai-chat` or `anthropic-messages`.
    pub fn as_str(self) -> &'static str {
        match self {
            WireFormat::OpenAiChat => openai_chat::FORMAT,
            WireFormat::AnthropicMessages => anthropic::FORMAT,
        }
    }

    /// The format with this name (see [`WireFormat::as_str`]); `None` for any
    /// other string. Names are matched exactly (case-sensitive).
    pub fn from_name(name: &str) -> Option<WireFormat> {
        WireFormat::ALL.into_iter().find(|f| f.as_str() == name)
    }

    /// Encodes `request` as this format's request body (non-streaming).
    ///
    /// # Errors
    ///
    /// Only the Anthropic encoder can fail: see [`anthropic::encode_request`].
    pub fn encode_request(self, request: &ModelRequest) -> Result<serde_json::Value, ProviderError> {
        match self {
            WireFormat::OpenAiChat => Ok(openai_chat::encode_request(request)),
            WireFormat::AnthropicMessages => anthropic::encode_request(request),
        }
    }

    /// Decodes a (non-streaming) response body of this format.
    ///
    /// # Errors
    ///
    /// [`ProviderError::Decode`] when the body is an error body or lacks a
    /// field the decoder needs; see [`openai_chat::decode_response`] and
    /// [`anthropic::decode_response`].
    pub fn decode_response(self, body: &serde_json::Value) -> Result<ModelResponse, ProviderError> {
        match self {
            WireFormat::OpenAiChat => openai_chat::decode_response(body),
            WireFormat::AnthropicMessages => anthropic::decode_response(body),
        }
    }
}

impl fmt::Display for WireFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Names a JSON value's type for error messages (`null`, `a string`, ...).
pub(crate) fn json_type_name(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Loads a provider recording from `host/testdata/provider-recordings/`.
    pub(crate) fn recording(name: &str) -> serde_json::Value {
        let path = recording_path(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
    }

    /// The path of a provider recording in `host/testdata/provider-recordings/`.
    pub(crate) fn recording_path(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/provider-recordings").join(name)
    }

    #[test]
    fn names_round_trip() {
        for f in WireFormat::ALL {
            assert_eq!(WireFormat::from_name(f.as_str()), Some(f));
            assert_eq!(f.to_string(), f.as_str());
        }
        assert_eq!(WireFormat::from_name("openai-chat"), Some(WireFormat::OpenAiChat));
        assert_eq!(WireFormat::from_name("anthropic-messages"), Some(WireFormat::AnthropicMessages));
        assert_eq!(WireFormat::from_name("OpenAI-Chat"), None);
        assert_eq!(WireFormat::from_name("openai-responses"), None);
    }
}
