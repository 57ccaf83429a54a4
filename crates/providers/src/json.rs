//! Helpers the decoders share: the body as an object, a JSON value's type
//! named for an error message.

use crate::model::ProviderError;

/// The body as a JSON object, or a decode error naming what it is instead:
/// not an object, or an error body (`{"error": {...}}`, with its message).
/// Shared by the decoders of the formats whose error bodies look alike
/// (OpenAI Chat, OpenAI Responses, Gemini).
pub(crate) fn response_object<'a>(
    body: &'a serde_json::Value,
    provider: &'static str,
) -> Result<&'a serde_json::Map<String, serde_json::Value>, ProviderError> {
    let decode = |what: String| ProviderError::Decode { provider, what };
    let Some(obj) = body.as_object() else {
        return Err(decode(format!("the body is {}, not an object", json_type_name(body))));
    };
    if let Some(error) = obj.get("error").filter(|e| !e.is_null()) {
        let message =
            error.get("message").and_then(serde_json::Value::as_str).map_or_else(|| error.to_string(), str::to_owned);
        return Err(decode(format!("the body is an error: {message}")));
    }
    Ok(obj)
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
