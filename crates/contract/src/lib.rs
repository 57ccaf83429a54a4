//! The Hookbox hook contract as Rust values: the [`Event`]s an agent run
//! fires, the [`Directive`]s a hook answers with, the [`ToolCall`]s and
//! [`Usage`] they carry, and what the host records of each call
//! ([`HookFailure`], [`DirectiveRecord`], [`CallRecord`]), and the
//! [`Approval`]s a hook can ask for one tool call.
//!
//! These are the same shapes as the WIT world (`wit/hook.wit`,
//! `hookbox:hooks@0.1.0`), with serde for run records, journals and golden
//! traces. This crate depends on serde only: the sandbox
//! (`hookbox-sandbox`), the providers (`hookbox-providers`) and the agent
//! (`hookbox`) all speak it. Which directive is valid at which event, and
//! why, is written down in `docs/contract.md`.

mod approval;
mod context;
mod event;
mod outcome;
mod text;
mod tool;

pub use approval::{AnsweredBy, Approval, ApprovalAnswer, ApprovalReason, ApprovalRecord, MAX_APPROVALS_PER_RUN};
pub use context::EventContext;
pub use event::{ABRIDGED_BLOCKS, ContentBlock, DECLINED_TOOL_MESSAGE, Directive, Event, EventKind};
pub use outcome::{
    CallRecord, DirectiveRecord, FailureKind, HookFailure, HookLog, PluginStats, SuspendReason, Suspension,
};
pub use text::{truncate_chars, truncate_ellipsis};
pub use tool::{FinishReason, ToolCall, Usage};
