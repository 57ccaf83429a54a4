//! The subset of `hookbox::provider` the decoders need.

#[path = "../../host/src/provider/anthropic.rs"]
pub mod anthropic;
#[path = "../../host/src/provider/gemini.rs"]
pub mod gemini;
#[path = "../../host/src/provider/openai_chat.rs"]
pub mod openai_chat;
#[path = "../../host/src/provider/openai_responses.rs"]
pub mod openai_responses;
#[path = "../../host/src/provider/pricing.rs"]
pub mod pricing;
#[path = "../../host/src/provider/sse.rs"]
pub mod sse;
#[path = "../../host/src/provider/stream.rs"]
pub mod stream;

/// Same as `hookbox::provider::json_type_name`.
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
