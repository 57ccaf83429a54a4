//! Hookbox's model providers: the provider-neutral conversation types
//! ([`ModelRequest`], [`ModelResponse`], the [`ModelProvider`] trait), a
//! codec and a stream assembler per wire format, the live HTTP providers,
//! retries, prices, and offline replay and recording. It depends on the
//! contract crate and on reqwest, never on the sandbox or the agent loop.
//!
//! * [`openai_chat`], [`openai_responses`], [`anthropic`] and [`gemini`]
//!   encode a [`ModelRequest`] as their API's request body and decode its
//!   (non-streaming) response body.
//! * [`sse`] decodes Server-Sent Events from bytes; [`stream`] assembles each
//!   API's event stream into the same [`ModelResponse`] its non-streaming
//!   decoder gives.
//! * [`http`] holds the live providers ([`http::HttpProvider`], reqwest);
//!   [`retry`] the retry policy the agent loop applies around them.
//! * [`pricing`] holds the built-in price table the decoders use to fill
//!   [`Usage::cost`].
//! * [`replay`] is an offline [`ModelProvider`] that plays back
//!   recorded response bodies through the same decoders a live provider uses.
//!
//! [`WireFormat`] names a format and dispatches to its codec, so code that
//! only knows the format's name (a replay session, a config file) can encode
//! and decode without matching on it. [`cap_tool_result`] cuts a long tool
//! result before it is sent.

//! * [`spec`] turns a `--model` spec (`replay:FILE`, `openai:gpt-4o`, ...)
//!   into a provider.
//!
//! A provider's quirks that the loop must act on (Anthropic's `pause_turn`,
//! Gemini's empty turn) are reported by the codec as data,
//! [`ModelResponse::continuation`], never matched on by format.

pub mod anthropic;
pub mod gemini;
pub mod http;
mod json;
mod model;
pub mod openai_chat;
pub mod openai_responses;
pub mod pricing;
pub mod record;
pub mod replay;
pub mod retry;
pub mod spec;
pub mod sse;
pub mod stream;
mod wire;

pub(crate) use json::{json_type_name, response_object};
pub use model::{
    Continuation, Delta, FinishReason, Message, ModelProvider, ModelRequest, ModelResponse, NativeContent,
    ProviderError, ToolCall, ToolResult, ToolSpec, Usage,
};
pub use spec::{SpecError, model_from_spec, model_from_spec_with};
pub use wire::{WireFormat, cap_tool_result};
