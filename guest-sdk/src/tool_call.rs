//! Parsing a tool call's JSON arguments.

use serde::de::DeserializeOwned;

use crate::ToolCall;

/// Typed access to a [`ToolCall`]'s arguments (a JSON object in text).
///
/// An empty or all-whitespace argument string reads as `{}`, as the host
/// promises for a missing one.
pub trait ToolCallExt {
    /// Deserializes the arguments into `T`, e.g. a `#[derive(Deserialize)]`
    /// struct with the fields the tool takes.
    fn args<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error>;

    /// The arguments as a JSON value (normally an object).
    fn args_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        self.args()
    }
}

impl ToolCallExt for ToolCall {
    fn args<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        let text = self.arguments.trim();
        serde_json::from_str(if text.is_empty() { "{}" } else { text })
    }
}
