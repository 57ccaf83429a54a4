//! Provider-neutral conversation types and the [`ModelProvider`] trait.
//!
//! The agent loop speaks only these types; each provider module turns them
//! into its own wire format (OpenAI Chat Completions and Responses, Anthropic
//! Messages, Gemini) and
//! back, so one loop serves every provider.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; unique within one response.
    pub id: String,
    /// The tool's name as the model gave it.
    pub name: String,
    /// The arguments as JSON text. Providers normalise an empty or missing
    /// argument string to `{}`.
    pub arguments: String,
}

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

/// Why the model stopped (seed 003's finish reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model finished its turn (`stop`, `end_turn`, `stop_sequence`).
    Stop,
    /// The model asked for tools (`tool_calls`, `tool_use`).
    ToolCall,
    /// The token limit cut the output (`length`, `max_tokens`).
    Length,
    /// Filtered or refused (`content_filter`, `refusal`).
    ContentFilter,
    /// Anything else (e.g. `pause_turn`).
    Other,
}

/// Tokens and cost of one or more requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens billed, cache reads and writes excluded.
    pub input_tokens: u64,
    /// Output tokens billed (reasoning included).
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Cost in US dollars (0 when the model is not in the price table).
    pub cost: f64,
}

impl Usage {
    /// Adds `other` to `self`, field by field.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cost += other.cost;
    }
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
/// Implementations: [`crate::provider::replay::ReplayProvider`] (offline,
/// plays back recorded wire-format responses) and
/// [`crate::provider::http::HttpProvider`] (the live APIs). The agent loop
/// calls [`ModelProvider::complete`] (or [`ModelProvider::complete_streaming`])
/// once per attempt; providers never retry by themselves (see
/// [`crate::provider::retry::RetryPolicy`]).
#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// The provider's name as hooks see it (e.g. `replay`, `openai`).
    fn name(&self) -> &str;
    /// The model name sent in requests.
    fn model(&self) -> &str;
    /// The wire format the provider speaks, when it has one (the loop handles
    /// some providers' quirks by format, e.g. Gemini's empty turn). Default none.
    fn wire_format(&self) -> Option<crate::provider::WireFormat> {
        None
    }
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
}
