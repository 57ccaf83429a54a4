//! The [`Hook`] trait and its default dispatch.

use crate::{
    Directive, Event, FinalAnswer, IterationComplete, IterationStart, ModelResponse, RequestStart, RunEnd, RunStart,
    ToolCallEvent, ToolCallResult,
};

/// A Hookbox hook: one method per event, each defaulting to
/// [`Directive::Continue`].
///
/// Implement [`Hook::new`] and the methods for the events you care about, then
/// register the type with [`export_hook!`](crate::export_hook). Events arrive
/// in firing order within a run:
///
/// `run-start`, then per model request `iteration-start` (and the opt-in
/// `request-start`), `model-response`, then for each tool call
/// `tool-call-start`, `before-tool-call`, `tool-call-result`, then
/// `iteration-complete` once the follow-up response arrived; finally
/// `final-answer` and `run-end`.
///
/// A directive outside its event's list (given on each method) is ignored by
/// the host with a warning. With several hooks the host runs them in their
/// configured order; the first `skip-tool`, `abort`, `reject` or `skip-run`
/// ends the chain for that event, replacements feed the next hook and
/// injections accumulate.
pub trait Hook {
    /// Creates the hook. Called once per component instance, on its first
    /// event; read [`config`](crate::config) here or lazily.
    fn new() -> Self
    where
        Self: Sized;

    /// Receives every event. The default calls [`dispatch`], which forwards
    /// to the method for the event's kind; override it to handle all events
    /// in one place (and call [`dispatch`] for the rest if you like).
    fn on_event(&mut self, event: &Event) -> Directive {
        dispatch(self, event)
    }

    /// `run-start`: fires once, before the first model request, with the run
    /// and session ids, the model, the provider and the user's content.
    ///
    /// Honoured: `continue`, `inject-message`, `replace-user-content`,
    /// `skip-run(reason)`, `pause`, `abort`.
    fn run_start(&mut self, event: &RunStart) -> Directive {
        let _ = event;
        Directive::Continue
    }

    /// `iteration-start`: fires before every model request of the tool loop,
    /// with the iteration (1-based) and the loop counter. A tool roundtrip
    /// announces its number twice: before its request and before its follow-up.
    ///
    /// Honoured: `continue`, `inject-message`, `pause`, `abort`.
    fn iteration_start(&mut self, event: &IterationStart) -> Directive {
        let _ = event;
        Directive::Continue
    }

    /// `request-start` (opt-in): fires just before each provider request, with
    /// the request index, iteration, attempt, purpose, model and provider.
    ///
    /// Honoured: `continue` only (observation); anything else is ignored with
    /// a warning.
    fn request_start(&mut self, event: &RequestStart) -> Directive {
        let _ = event;
        Directive::Continue
    }

    /// `model-response`: fires after each model response arrives, before its
    /// tool calls run, with the iteration, text, content, tool calls,
    /// reasoning, finish reason and usage.
    ///
    /// Honoured: `continue`, `replace-content`, `retry(feedback)`,
    /// `reject(reason)`, `inject-message`, `pause`, `abort`.
    fn model_response(&mut self, event: &ModelResponse) -> Directive {
        let _ = event;
        Directive::Continue
    }

    /// `tool-call-start`: the model asked for a tool (an announcement), with
    /// the iteration and the call (id, tool name, JSON arguments).
    ///
    /// Honoured: `continue`, `inject-message`, `pause`, `abort`; `skip-tool`
    /// is ignored with a warning (veto in [`Hook::before_tool_call`]).
    fn tool_call_start(&mut self, event: &ToolCallEvent) -> Directive {
        let _ = event;
        Directive::Continue
    }

    /// `before-tool-call`: the veto point, immediately before the tool is
    /// dispatched; same payload as `tool-call-start`.
    ///
    /// Honoured: `continue`, `skip-tool(message)`, `replace-arguments(JSON)`,
    /// `inject-message`, `pause`, `abort`.
    fn before_tool_call(&mut self, event: &ToolCallEvent) -> Directive {
        let _ = event;
        Directive::Continue
    }

    /// `tool-call-result`: a tool finished or was declined, with the
    /// iteration, tool name and call id, the result text (first 500
    /// characters by default), the truncated and success flags, the duration
    /// and the reported cost.
    ///
    /// Honoured: `continue`, `replace-result(text)`, `inject-message`,
    /// `pause`, `abort`.
    fn tool_call_result(&mut self, event: &ToolCallResult) -> Directive {
        let _ = event;
        Directive::Continue
    }

    /// `iteration-complete`: a roundtrip's follow-up response arrived, with
    /// the iteration, the usage billed since the previous
    /// `iteration-complete`, the tools called and the stop reason. A run with
    /// no tools emits exactly one, with no tools called.
    ///
    /// Honoured: `continue`, `inject-message`, `pause`, `abort`.
    fn iteration_complete(&mut self, event: &IterationComplete) -> Directive {
        let _ = event;
        Directive::Continue
    }

    /// `final-answer`: the model's final answer of the run, before it is
    /// returned, with its text, content, finish reason and the run's usage.
    ///
    /// Honoured: `continue`, `replace-content`, `retry(feedback)`,
    /// `reject(reason)`, `pause`, `abort`.
    fn final_answer(&mut self, event: &FinalAnswer) -> Directive {
        let _ = event;
        Directive::Continue
    }

    /// `run-end`: fires once, after the result is assembled (never when the
    /// run raised an error), with the iteration count, total usage and error.
    ///
    /// Honoured: `continue` only.
    fn run_end(&mut self, event: &RunEnd) -> Directive {
        let _ = event;
        Directive::Continue
    }
}

/// Forwards `event` to the [`Hook`] method for its kind (what the default
/// [`Hook::on_event`] does).
pub fn dispatch<H: Hook + ?Sized>(hook: &mut H, event: &Event) -> Directive {
    match event {
        Event::RunStart(e) => hook.run_start(e),
        Event::IterationStart(e) => hook.iteration_start(e),
        Event::RequestStart(e) => hook.request_start(e),
        Event::ModelResponse(e) => hook.model_response(e),
        Event::ToolCallStart(e) => hook.tool_call_start(e),
        Event::BeforeToolCall(e) => hook.before_tool_call(e),
        Event::ToolCallResult(e) => hook.tool_call_result(e),
        Event::IterationComplete(e) => hook.iteration_complete(e),
        Event::FinalAnswer(e) => hook.final_answer(e),
        Event::RunEnd(e) => hook.run_end(e),
    }
}
