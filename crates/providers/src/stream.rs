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

use serde_json::{Value, json};

use crate::model::{Delta, ModelResponse, ProviderError, Usage};
use crate::sse::SseEvent;

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

pub(crate) fn parse_data(provider: &'static str, event: &SseEvent) -> Result<Value, ProviderError> {
    serde_json::from_str(&event.data).map_err(|e| ProviderError::Decode {
        provider,
        what: format!("the data of a `{}` event is not JSON: {e}", event.event),
    })
}

pub(crate) fn truncated(provider: &'static str, what: &str, partial_usage: Usage) -> ProviderError {
    ProviderError::Truncated { provider, what: what.to_owned(), partial_usage }
}

pub(crate) fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Appends `piece` to the string at `obj[key]` (creating it).
pub(crate) fn append(obj: &mut Value, key: &str, piece: &str) {
    if let Some(map) = obj.as_object_mut() {
        match map.get_mut(key) {
            Some(Value::String(s)) => s.push_str(piece),
            _ => {
                map.insert(key.to_owned(), json!(piece));
            }
        }
    }
}

mod anthropic;
mod gemini;
mod openai_chat;
mod responses;

pub use anthropic::AnthropicStream;
pub use gemini::GeminiStream;
pub use openai_chat::OpenAiChatStream;
pub use responses::ResponsesStream;

#[cfg(test)]
mod tests;
