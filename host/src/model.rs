//! Provider-neutral conversation types and the [`ModelProvider`] trait.
//!
//! The agent loop speaks only these types; each provider module turns them
//! into its own wire format (OpenAI Chat Completions, Anthropic Messages) and
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
    /// Any other failure (transport, status).
    #[error("{0}")]
    Other(String),
}

/// A model provider: turns a [`ModelRequest`] into a [`ModelResponse`].
///
/// Implementations: [`crate::provider::replay::ReplayProvider`] (offline,
/// plays back recorded wire-format responses). The agent loop calls
/// [`ModelProvider::complete`] once per model request, in order.
#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// The provider's name as hooks see it (e.g. `replay`, `openai`).
    fn name(&self) -> &str;
    /// The model name sent in requests.
    fn model(&self) -> &str;
    /// Sends one request and returns the decoded response.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError>;
}
