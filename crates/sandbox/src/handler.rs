//! [`HookHandler`]: one hook as the hook chain sees it, and [`HookReply`],
//! what one call of it produced. [`crate::WasmHook`] runs a WebAssembly
//! component; tests and embedders can write native ones.

use async_trait::async_trait;
use hookbox_contract::{Directive, Event, EventContext, EventKind, HookFailure, HookLog, Suspension};

use crate::options::FailPolicy;

/// What one hook call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct HookReply {
    /// The directive, or the failure that stands for `continue` (or, for a
    /// fail-closed hook at `before-tool-call`, for `skip-tool`).
    pub outcome: Result<Directive, HookFailure>,
    /// Lines the hook logged during the call, in order.
    pub logs: Vec<HookLog>,
    /// Set when this call left the plugin suspended for the rest of the run.
    pub suspension: Option<Suspension>,
    /// Fuel the call used (0 for a native hook or a call that was skipped).
    pub fuel_used: u64,
    /// How long the call took, in microseconds (0 when it was skipped).
    pub duration_us: u64,
}

/// Inside `impl HookHandler for Wrapper`, forwards every method but
/// `on_event` to the wrapped handler in field `$field`: its name, fail policy,
/// subscriptions, observe-only flag and session. A wrapper that left one of
/// them to the trait's default would silently change how the chain calls the
/// hook (every event instead of its subscriptions, say).
///
/// ```ignore
/// #[async_trait::async_trait]
/// impl HookHandler for Timed {
///     hookbox_sandbox::forward_hook_handler!(inner);
///     async fn on_event(&mut self, event: &Event, context: &EventContext) -> HookReply {
///         self.inner.on_event(event, context).await
///     }
/// }
/// ```
#[macro_export]
macro_rules! forward_hook_handler {
    ($field:ident) => {
        fn name(&self) -> &str {
            self.$field.name()
        }

        fn fail_policy(&self) -> $crate::FailPolicy {
            self.$field.fail_policy()
        }

        fn run_started(&mut self, session_id: &str) {
            self.$field.run_started(session_id)
        }

        fn subscribed(&self, kind: $crate::EventKind) -> bool {
            self.$field.subscribed(kind)
        }

        fn observe_only(&self) -> bool {
            self.$field.observe_only()
        }
    };
}

/// One hook, as the agent loop sees it.
///
/// Lifecycle: the loop builds one handler per hook per run, calls
/// [`HookHandler::on_event`] for every event of the run in firing order, and
/// drops it when the run ends. A handler never returns an error: a failure is
/// a [`HookFailure`] inside the reply.
#[async_trait]
pub trait HookHandler: Send + 'static {
    /// The hook's name, as it appears in traces.
    fn name(&self) -> &str;
    /// What a failure means at `before-tool-call` (default: fail-open).
    fn fail_policy(&self) -> FailPolicy {
        FailPolicy::Open
    }
    /// Called for every hook at `run-start`, subscribed to it or not, with the
    /// run's session (which keys hook state). Default: nothing.
    fn run_started(&mut self, _session_id: &str) {}
    /// True when the hook wants events of `kind` (default: every kind). The
    /// chain never enters a hook for an event it does not subscribe to.
    fn subscribed(&self, _kind: EventKind) -> bool {
        true
    }
    /// True for a hook that only watches: its calls run beside the loop and
    /// its directives other than `continue` are ignored (default: false).
    fn observe_only(&self) -> bool {
        false
    }
    /// Handles one event. `context` says where it happens (run, session,
    /// turn, iteration, `max_iterations`, retries so far); it is the same for
    /// every hook called for the event. A WebAssembly hook of WIT 0.1.0 never
    /// sees it.
    async fn on_event(&mut self, event: &Event, context: &EventContext) -> HookReply;
}
