//! The model-side values an event carries: a tool call, why the model
//! stopped, and what a request billed.

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

/// Why the model stopped (the finish reasons every provider maps onto).
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
