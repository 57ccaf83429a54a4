//! Safe points (issue 17, crash recovery): the moments a run's journal is
//! made durable, so that a run whose process died can be resumed there on
//! another worker ([`super::RunJournal::resuming`]) instead of being lost.
//!
//! The agent loop reaches one after each model response, just before a tool
//! call runs (the call is then journaled as started) and after each tool
//! outcome; a hook call reaches one just before it commits its state. An
//! embedder that stores runs ([`SafePoints`]) writes the journal at each.
//!
//! A tool call journaled as started but without an outcome was cut off by
//! the crash: a resumed run does not run it again (it may have taken effect)
//! and gives the model [`INTERRUPTED_TOOL_MESSAGE`] as its error result.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

/// A point of a run where its journal can be made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SafePoint<'a> {
    /// The model answered; its response is among the recorded ones.
    ModelResponse,
    /// Tool call `.0` (its id) is about to run and is journaled as started.
    ToolStarted(&'a str),
    /// Tool call `.0`'s outcome is journaled.
    ToolDone(&'a str),
}

/// A future a safe point resolves with.
pub type SafePointFuture = Pin<Box<dyn Future<Output = bool> + Send + 'static>>;

/// What makes a run's journal durable at its safe points (a server's run
/// store). Set with [`super::RunJournal::with_safe_points`].
pub trait SafePoints: Send + Sync {
    /// The run reached `at`: resolves `true` once the journal is durable
    /// there, `false` if it could not be made so. A tool call whose
    /// [`SafePoint::ToolStarted`] resolves `false` does not run (the model
    /// gets an error result): running it could not be told from a crash.
    fn reached(&self, at: SafePoint<'_>) -> SafePointFuture;
    /// A call of `plugin` is about to commit its hook state: make the
    /// journal durable before it does (this blocks the call, as its commit
    /// does). The journal then holds the call as begun and its commit as
    /// pending, so that a resumed run re-executes the call and makes the
    /// commit only if it had not landed: exactly once. False when the
    /// journal could not be made durable: the commit is then not made (the
    /// call fails with a `state` failure).
    fn committing(&self, plugin: &str) -> bool;
}

/// The result a resumed run gives the model for a tool call journaled as
/// started but with no outcome (its worker died while it ran).
pub const INTERRUPTED_TOOL_MESSAGE: &str = "error: interrupted: this tool call started, but the worker running it \
     stopped before its result was journaled. It was not run again; it may or may not have taken effect.";

/// A run's [`SafePoints`], once set; shared by its plugin journals.
#[derive(Default, Clone)]
pub(crate) struct SafeSlot(Arc<OnceLock<Arc<dyn SafePoints>>>);

impl SafeSlot {
    pub(crate) fn set(&self, points: Arc<dyn SafePoints>) -> bool {
        self.0.set(points).is_ok()
    }

    pub(crate) fn get(&self) -> Option<&Arc<dyn SafePoints>> {
        self.0.get()
    }
}

impl std::fmt::Debug for SafeSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() { "SafeSlot(set)" } else { "SafeSlot(unset)" })
    }
}
