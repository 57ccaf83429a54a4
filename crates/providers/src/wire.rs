//! [`WireFormat`]: names a provider's JSON body shapes and dispatches to
//! their codec, so code that only knows a format's name (a replay session, a
//! config file) can encode and decode without matching on it; and
//! [`cap_tool_result`], which cuts a long tool result before it is sent.

use std::fmt;

use crate::model::{ModelRequest, ModelResponse, ProviderError};
use crate::{anthropic, gemini, openai_chat, openai_responses, stream};

/// A provider wire format: the JSON body shapes of one provider API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireFormat {
    /// OpenAI Chat Completions (`POST /v1/chat/completions`), also spoken by
    /// OpenAI-compatible servers and routers. Named `openai-chat`.
    OpenAiChat,
    /// Anthropic Messages (`POST /v1/messages`). Named `anthropic-messages`.
    AnthropicMessages,
    /// OpenAI Responses (`POST /v1/responses`). Named `openai-responses`.
    OpenAiResponses,
    /// Google Gemini (`POST /v1beta/models/{model}:generateContent`). Named `gemini`.
    Gemini,
}

impl WireFormat {
    /// Every format, in a fixed order (for error messages and listings).
    pub const ALL: [WireFormat; 4] =
        [WireFormat::OpenAiChat, WireFormat::AnthropicMessages, WireFormat::OpenAiResponses, WireFormat::Gemini];

    /// The format's name as written in replay sessions and error messages:
    /// `openai-chat`, `anthropic-messages`, `openai-responses` or `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            WireFormat::OpenAiChat => openai_chat::FORMAT,
            WireFormat::AnthropicMessages => anthropic::FORMAT,
            WireFormat::OpenAiResponses => openai_responses::FORMAT,
            WireFormat::Gemini => gemini::FORMAT,
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
    /// The Anthropic and Gemini encoders fail on tool call arguments that are
    /// not a JSON object: see [`anthropic::encode_request`] and
    /// [`gemini::encode_request`].
    pub fn encode_request(self, request: &ModelRequest) -> Result<serde_json::Value, ProviderError> {
        match self {
            WireFormat::OpenAiChat => Ok(openai_chat::encode_request(request)),
            WireFormat::AnthropicMessages => anthropic::encode_request(request),
            WireFormat::OpenAiResponses => Ok(openai_responses::encode_request(request)),
            WireFormat::Gemini => gemini::encode_request(request),
        }
    }

    /// Decodes a (non-streaming) response body of this format.
    ///
    /// # Errors
    ///
    /// [`ProviderError::Decode`] when the body is an error body or lacks a
    /// field the decoder needs; see [`openai_chat::decode_response`],
    /// [`anthropic::decode_response`], [`openai_responses::decode_response`]
    /// and [`gemini::decode_response`].
    pub fn decode_response(self, body: &serde_json::Value) -> Result<ModelResponse, ProviderError> {
        match self {
            WireFormat::OpenAiChat => openai_chat::decode_response(body),
            WireFormat::AnthropicMessages => anthropic::decode_response(body),
            WireFormat::OpenAiResponses => openai_responses::decode_response(body),
            WireFormat::Gemini => gemini::decode_response(body),
        }
    }

    /// A fresh assembler for this format's event stream (see [`stream`]).
    pub fn stream_assembler(self) -> Box<dyn stream::StreamAssembler + Send> {
        match self {
            WireFormat::OpenAiChat => Box::new(stream::OpenAiChatStream::new()),
            WireFormat::AnthropicMessages => Box::new(stream::AnthropicStream::new()),
            WireFormat::OpenAiResponses => Box::new(stream::ResponsesStream::new()),
            WireFormat::Gemini => Box::new(stream::GeminiStream::new()),
        }
    }
}

impl fmt::Display for WireFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Cuts a tool result to at most `max_chars` characters (Unicode scalar
/// values, so never inside a UTF-8 sequence) before it is sent to the model
/// or stored.
///
/// Returns the text and whether it was cut. A cut text is the longest prefix
/// that, followed by the marker `\n[truncated: N more characters]` (N = the
/// characters left out), fits in `max_chars`; when even the marker does not
/// fit, the text is cut to `max_chars` characters without a marker. A text of
/// at most `max_chars` characters is returned unchanged with `false`.
pub fn cap_tool_result(text: &str, max_chars: usize) -> (String, bool) {
    let total = text.chars().count();
    if total <= max_chars {
        return (text.to_owned(), false);
    }
    let marker = |omitted: usize| format!("\n[truncated: {omitted} more characters]");
    // The marker shrinks (never grows) as `keep` grows, so the first fit found
    // from the largest candidate downwards is the longest prefix.
    let mut keep = max_chars.saturating_sub(marker(total).chars().count());
    while keep < max_chars && keep + 1 + marker(total - keep - 1).chars().count() <= max_chars {
        keep += 1;
    }
    let cut = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    let m = marker(total - keep);
    if keep + m.chars().count() > max_chars {
        let end = text.char_indices().nth(max_chars).map_or(text.len(), |(i, _)| i);
        return (text[..end].to_owned(), true);
    }
    (format!("{}{m}", &text[..cut]), true)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Loads a provider recording from `crates/providers/testdata/provider-recordings/`.
    pub(crate) fn recording(name: &str) -> serde_json::Value {
        let path = recording_path(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
    }

    /// The path of a provider recording in `crates/providers/testdata/provider-recordings/`.
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
        assert_eq!(WireFormat::from_name("openai-responses"), Some(WireFormat::OpenAiResponses));
        assert_eq!(WireFormat::from_name("gemini"), Some(WireFormat::Gemini));
        assert_eq!(WireFormat::from_name("responses"), None);
    }

    #[test]
    fn cap_tool_result_cuts_on_char_boundaries_with_a_marker() {
        assert_eq!(cap_tool_result("short", 10), ("short".to_owned(), false));
        assert_eq!(cap_tool_result("exactly10!", 10), ("exactly10!".to_owned(), false));
        assert_eq!(cap_tool_result("", 0), (String::new(), false));

        let text = "é".repeat(100) + &"日".repeat(100);
        for max in [0, 1, 5, 30, 31, 32, 33, 50, 150, 199] {
            let (cut, truncated) = cap_tool_result(&text, max);
            assert!(truncated, "{max}");
            assert!(cut.chars().count() <= max, "{max}: {} chars", cut.chars().count());
            if max >= 40 {
                let (kept, marker) = cut.split_once('\n').unwrap();
                assert!(text.starts_with(kept));
                let omitted = 200 - kept.chars().count();
                assert_eq!(marker, format!("[truncated: {omitted} more characters]"));
                // The longest prefix that fits: one more character would not.
                assert!(kept.chars().count() + 1 + marker.chars().count() + 1 > max || omitted == 0);
            } else if max < 32 {
                assert_eq!(cut, text.chars().take(max).collect::<String>(), "{max}");
            }
        }
        // A marker whose digit count drops as the prefix grows still fits exactly.
        let long = "a".repeat(1_000);
        let (cut, _) = cap_tool_result(&long, 40);
        assert_eq!(cut.chars().count(), 40, "{cut}");
        assert!(cut.ends_with("more characters]"));
    }
}
