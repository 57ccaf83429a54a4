//! Provider-neutral conversation types and the [`ModelProvider`] trait.
//!
//! The agent loop speaks only these types; each provider module turns them
//! into its own wire format (OpenAI Chat Completions and Responses, Anthropic
//! Messages, Gemini) and
//! back, so one loop serves every provider.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use hookbox_contract::{FinishReason, ToolCall, Usage};

/// The result that answers one tool call in the next request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the call this result answers.
    pub tool_call_id: String,
    /// The tool's name (Gemini-style APIs need it beside the id).
    pub name: String,
    /// The full result text the model receives.
    pub content: String,
    /// True when the tool failed, was refused or was declined (Anthropic `is_error`).
    pub is_error: bool,
}

/// One message of the conversation, in provider-neutral form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// A user message (the prompt, or an injected message).
    User {
        /// The text.
        content: String,
    },
    /// An assistant message: text and/or tool calls.
    Assistant {
        /// The text, empty when the model only called tools.
        content: String,
        /// The tool calls, in the order the model emitted them.
        tool_calls: Vec<ToolCall>,
    },
    /// The results answering every tool call of the previous assistant message.
    /// Encoders turn this into one `role: tool` message per result (OpenAI) or
    /// `tool_result` blocks in one user message (Anthropic).
    ToolResults {
        /// One result per tool call, in the calls' order.
        results: Vec<ToolResult>,
    },
    /// The provider's own form of the assistant message that FOLLOWS this one
    /// (a copy of [`ModelResponse::native`]), for content the neutral form
    /// cannot carry but the API needs back: Anthropic `server_tool_use` and
    /// `*_tool_result` blocks (server-side tools such as web search),
    /// `thinking` blocks with their signatures, Gemini `thoughtSignature`s.
    ///
    /// Push it right before the [`Message::Assistant`] of the same response.
    /// The encoder of the matching [`NativeContent::format`] then sends the
    /// native blocks in their order, with the neutral message's edits applied
    /// (tool call arguments by call id, calls dropped or added, changed text);
    /// encoders of other formats skip it.
    Native {
        /// The native content.
        native: NativeContent,
    },
}

/// An assistant message in a provider's own wire form (see [`Message::Native`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NativeContent {
    /// The wire format that produced it: `anthropic-messages` (blocks are the
    /// response's `content` blocks) or `gemini` (blocks are the candidate's
    /// `content.parts`, each function call part tagged with its neutral id).
    pub format: String,
    /// The blocks, in the provider's order.
    pub blocks: Vec<serde_json::Value>,
}

/// A tool the model may call: name, description and JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema (an object schema) of the arguments.
    pub parameters: serde_json::Value,
}

/// Everything a provider needs for one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The model name, e.g. `gpt-4o`.
    pub model: String,
    /// The system prompt, if any.
    pub system: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
}

/// One model response, decoded from the provider's wire format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The model that answered, as the provider named it.
    pub model: String,
    /// The text blocks, joined.
    pub text: String,
    /// The reasoning (thinking) text, empty if none.
    pub reasoning: String,
    /// The tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// The provider's own stop reason string (e.g. `tool_calls`, `end_turn`).
    pub raw_finish_reason: String,
    /// What this request billed; `cost` filled from the price table.
    pub usage: Usage,
    /// The assistant message in the provider's own form, when it holds
    /// something the neutral fields cannot carry (server-side tool blocks,
    /// thinking signatures); `None` otherwise. Server-side tool calls are
    /// never in [`Self::tool_calls`]: they ran at the provider. To send the
    /// turn back faithfully, push [`Message::Native`] with this before the
    /// [`Message::Assistant`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<NativeContent>,
    /// Set by the codec when the response is not an answer the loop can act
    /// on but a provider's request to be asked again (see [`Continuation`]);
    /// `None` for an ordinary response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation: Option<Continuation>,
}

/// A response the provider wants continued rather than acted on, as its
/// codec reports it. The agent loop asks again without firing tool calls or
/// ending the turn; each continuation is a model request of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Continuation {
    /// Anthropic `stop_reason: "pause_turn"`: a long server-side turn was
    /// paused; resend the assistant content so the provider continues it.
    PauseTurn,
    /// Gemini answered a turn with nothing at all (no text, no tool call,
    /// finish reason `STOP`): ask once more.
    EmptyTurn,
}

/// A piece of a response as it streams in, for live display.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "text", rename_all = "snake_case")]
pub enum Delta {
    /// Answer text, in order; the pieces joined are [`ModelResponse::text`].
    Text(String),
    /// Reasoning (thinking) text; the pieces joined are [`ModelResponse::reasoning`].
    Thinking(String),
}

/// Errors a provider returns.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The response body could not be decoded; `what` names the field or shape.
    #[error("cannot decode {provider} response: {what}")]
    Decode {
        /// The provider (wire format) name.
        provider: &'static str,
        /// What was wrong.
        what: String,
    },
    /// A replay session has no more recorded responses.
    #[error(
        "replay session {path} has no response left: the run asked for response #{wanted} but only {available} are recorded"
    )]
    ReplayExhausted {
        /// The session file.
        path: String,
        /// The 1-based number of the response asked for.
        wanted: usize,
        /// How many responses the file holds.
        available: usize,
    },
    /// Any other failure (a request that cannot be encoded, a bad option).
    #[error("{0}")]
    Other(String),
    /// The provider answered with an HTTP error status.
    #[error("{provider} returned HTTP {status}{}: {body}", retry_after.map(|d| format!(" (retry after {} ms)", d.as_millis())).unwrap_or_default())]
    Http {
        /// The provider name (`anthropic`, `openai`, `openai-responses`, `gemini`).
        provider: &'static str,
        /// The HTTP status code.
        status: u16,
        /// How long the provider asked to wait (`retry-after-ms`, or
        /// `retry-after` in seconds or as an HTTP date), if it said.
        retry_after: Option<std::time::Duration>,
        /// The response body (the provider's error JSON), cut to 4 KiB.
        body: String,
    },
    /// The request could not be sent or its response not read (DNS, connect,
    /// TLS, timeout, connection reset before the response began).
    #[error("transport error: {0}")]
    Transport(String),
    /// A streamed response ended before its final event (Anthropic
    /// `message_stop`, OpenAI Chat `[DONE]`, Responses `response.completed`,
    /// Gemini's chunk with `finishReason`), or its body could not be read to
    /// the end. Never a success: the partial output is dropped, but the
    /// tokens reported so far were billed.
    #[error("the {provider} stream was cut before its final event: {what}")]
    Truncated {
        /// The provider (wire format) name.
        provider: &'static str,
        /// What happened (the missing event, or the read error).
        what: String,
        /// The usage the stream reported before it was cut (zero if none).
        partial_usage: Usage,
    },
    /// A streamed response began, then sent nothing for the read timeout
    /// ([`crate::http::HttpOptions::read_timeout`]). Retried
    /// ([`crate::retry::is_retryable`]) unless `delivered`: once a text or
    /// reasoning piece was handed to the caller, it cannot be taken back.
    #[error(
        "the {provider} stream stalled: no bytes for {idle_ms} ms{}",
        if *delivered { " (not retried: part of the answer was already streamed)" } else { "" }
    )]
    Stalled {
        /// The provider (wire format) name.
        provider: &'static str,
        /// The read timeout that expired, in milliseconds.
        idle_ms: u64,
        /// Whether any text or reasoning piece had been handed to the caller.
        delivered: bool,
        /// The usage the stream reported before it stalled (zero if none).
        partial_usage: Usage,
    },
    /// A stream reported an error event mid-way (Anthropic `event: error`,
    /// Responses `response.failed` or `error`, an OpenAI Chat chunk with
    /// `error`).
    #[error("the {provider} stream reported an error ({kind}): {message}")]
    StreamError {
        /// The provider (wire format) name.
        provider: &'static str,
        /// The provider's error type or code (e.g. `overloaded_error`).
        kind: String,
        /// The provider's message.
        message: String,
        /// The HTTP status the provider documents for this error type (e.g.
        /// Anthropic `overloaded_error` → 529), used to decide on retries;
        /// `None` when unknown.
        status: Option<u16>,
        /// The usage the stream reported before the error (zero if none).
        partial_usage: Usage,
    },
}

/// A model provider: turns a [`ModelRequest`] into a [`ModelResponse`].
///
/// Implementations: [`crate::replay::ReplayProvider`] (offline,
/// plays back recorded wire-format responses) and
/// [`crate::http::HttpProvider`] (the live APIs). The agent loop
/// calls [`ModelProvider::complete`] (or [`ModelProvider::complete_streaming`])
/// once per attempt; providers never retry by themselves (see
/// [`crate::retry::RetryPolicy`]).
#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// The provider's name as hooks see it (e.g. `replay`, `openai`).
    fn name(&self) -> &str;
    /// The model name sent in requests.
    fn model(&self) -> &str;
    /// Sends one request and returns the decoded response.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError>;
    /// Like [`ModelProvider::complete`], calling `on_delta` with text and
    /// reasoning pieces as they arrive. The result is the same response
    /// `complete` would return. The default calls `complete` and emits nothing;
    /// streaming providers override it.
    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(Delta) + Send + Sync),
    ) -> Result<ModelResponse, ProviderError> {
        let _ = on_delta;
        self.complete(request).await
    }
    /// A run resumed from a checkpoint already holds the first `responses`
    /// answers of its conversation: a provider that answers by position (a
    /// replay) moves past them; one that answers each request on its own (a
    /// live API) has nothing to do, the default.
    fn skip_answered(&self, responses: usize) {
        let _ = responses;
    }
}
