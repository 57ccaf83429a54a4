//! One run in flight: the loop from `run-start` to `run-end` — model
//! requests with retries, the hook points, tool dispatch, injections,
//! pause and abort at the safe points — and the record it builds.

use std::sync::Arc;
use std::time::Duration;

use hookbox_contract::{ContentBlock, Directive, Event, EventContext, EventKind};
use hookbox_providers::retry::RetryPolicy;
use hookbox_providers::{
    Continuation, Delta, FinishReason, Message, ModelRequest, ModelResponse, ProviderError, ToolCall, ToolResult,
    ToolSpec, Usage,
};
use hookbox_sandbox::{Decision, DispatchTrace, HookChain};

use crate::agent::{Agent, StreamSink, TurnContext};
use crate::handle::{QueueAtEnd, RunHandle, SafePoint};
use crate::outcome::{RunError, RunErrorInfo, RunResult, StopReason, StreamEvent};
use crate::routing::MessageBus;

/// The state of one run in flight.
pub(crate) struct Run<'a> {
    agent: &'a Agent,
    hooks: &'a mut HookChain,
    rec: RunResult,
    /// Pause, abort and the injection queue, shared with the embedder.
    handle: &'a RunHandle,
    /// What the end of a clean run does with the queue (see [`QueueAtEnd`]).
    at_end: QueueAtEnd,
    since_last_complete: Usage,
    iterations_completed: u32,
    /// Where stream events go, for [`Agent::stream`].
    observer: Option<StreamSink>,
    /// The session the run belongs to (its id, or the run id).
    session_id: String,
    /// The message bus of the session, for `post-message`.
    bus: Option<Arc<MessageBus>>,
    /// Where the next event happens: every hook gets it with the event.
    context: EventContext,
}
enum Flow {
    Go(Decision),
    Stop(RunErrorInfo),
}

impl Agent {
    /// One turn: the loop from `run-start` to `run-end`, starting from `context`.
    /// `handle` is the run's own copy, lent (its clone count is what tells a
    /// pause someone else can resume). A turn that raises always closes it.
    pub(crate) async fn run_turn(
        &self,
        prompt: &str,
        hooks: &mut HookChain,
        handle: &RunHandle,
        context: TurnContext,
        observer: Option<StreamSink>,
        at_end: QueueAtEnd,
    ) -> Result<RunResult, RunError> {
        let mut run_id = handle.take_run_id().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        if let Some(journal) = &self.journal {
            run_id = journal.run_id(run_id);
        }
        let session_id = if context.session_id.is_empty() { run_id.clone() } else { context.session_id };
        let mut turn = context.turn.max(1);
        if let Some(journal) = &self.journal {
            turn = journal.turn(turn);
        }
        let event_context = EventContext {
            run_id: run_id.clone(),
            session_id: session_id.clone(),
            turn,
            iteration: 0,
            max_iterations: self.config.max_iterations,
            retries: 0,
        };
        let mut run = Run {
            agent: self,
            hooks,
            rec: RunResult {
                run_id: run_id.clone(),
                final_answer: None,
                stop_reason: StopReason::Error,
                iterations: 0,
                requests: 0,
                usage: Usage::default(),
                events: Vec::new(),
                directives: Vec::new(),
                hook_failures: Vec::new(),
                hook_logs: Vec::new(),
                plugin_suspensions: Vec::new(),
                plugin_stats: Vec::new(),
                injected_messages: Vec::new(),
                undelivered_injections: Vec::new(),
                messages: context.history,
                approvals: Vec::new(),
                posts: Vec::new(),
                error: None,
            },
            handle,
            at_end,
            since_last_complete: Usage::default(),
            iterations_completed: 0,
            observer,
            session_id: session_id.clone(),
            bus: context.bus,
            context: event_context,
        };
        match run.drive(prompt, run_id, session_id).await {
            Ok(()) => Ok(run.finish().await),
            Err(info) => {
                // Observer calls still in flight finish and are recorded.
                let mut trace = DispatchTrace::default();
                run.hooks.drain(&mut trace).await;
                for text in trace.injections.drain(..) {
                    run.handle.push_injection(text);
                }
                run.keep(trace);
                Err(run.fail(info))
            }
        }
    }
}

impl Run<'_> {
    async fn fire(&mut self, event: Event) -> Flow {
        let kind = event.kind();
        let mut trace = DispatchTrace::default();
        if let Some(iteration) = event.iteration() {
            self.context.iteration = iteration;
        }
        let mut decision = self.hooks.dispatch(&event, &self.context, &mut trace).await;
        // A replaced tool result is held to `max_tool_result_chars`: in the
        // decision, and in the record and the trace sink, which never hold more.
        if let Some(replaced) = decision.replace_result.take() {
            decision.replace_result = Some(self.cap_result(replaced).0);
        }
        for record in &mut trace.directives {
            if let Directive::ReplaceResult(text) = &mut record.directive {
                *text = self.cap_result(std::mem::take(text)).0;
            }
        }
        if kind == EventKind::RunEnd {
            // The last event: its observer calls (and any still running) finish here.
            self.hooks.drain(&mut trace).await;
        }
        if let Some(sink) = &self.agent.trace {
            sink(&event, &trace);
        }
        if let Some(journal) = &self.agent.journal {
            journal.event_dispatched();
        }
        self.rec.events.push(event);
        self.take_effects(kind, trace, &decision);
        if let (Some(observer), Some(event)) = (&self.observer, self.rec.events.last()) {
            observer(StreamEvent::Hook(event.clone()));
        }
        if let Some(Directive::Abort(reason)) = &decision.terminal {
            let by = self.rec.directives.last();
            return Flow::Stop(RunErrorInfo::Aborted {
                reason: reason.clone(),
                plugin: by.map(|d| d.plugin.clone()),
                event: by.map(|d| d.event.clone()),
            });
        }
        // A pause a resumed run re-executes was resumed before its checkpoint.
        let journal = self.agent.journal.as_ref();
        if decision.pause && journal.is_none_or(|j| j.hook_pause_applies()) {
            self.handle.pause();
            if let Some(j) = journal {
                j.set_in_hook_pause(true);
            }
        }
        // A safe point: the embedder's pause and abort apply here, at every hook
        // point (request-start included), but never while a tool runs.
        if kind != EventKind::RunEnd {
            let timeout = self.agent.config.pause_timeout_ms.map(Duration::from_millis);
            if let SafePoint::Abort(reason) = self.handle.safe_point(timeout, self.agent.config.on_pause_timeout).await
            {
                return Flow::Stop(RunErrorInfo::Aborted { reason, plugin: None, event: Some(kind.to_string()) });
            }
        }
        if let Some(j) = journal.filter(|_| decision.pause) {
            j.set_in_hook_pause(false);
            j.hook_pause_passed();
        }
        Flow::Go(decision)
    }

    /// Appends what a dispatch produced to the run's record.
    fn keep(&mut self, mut trace: DispatchTrace) {
        self.rec.directives.append(&mut trace.directives);
        self.rec.hook_failures.append(&mut trace.failures);
        self.rec.hook_logs.append(&mut trace.logs);
        self.rec.plugin_suspensions.append(&mut trace.suspensions);
    }

    /// Delivers every queued message as a user message (a turn boundary).
    fn drain(&mut self) {
        // A resumed run delivers what its checkpoint delivered at this boundary.
        // Journaled with the queue held: a checkpoint finds each message in
        // the queue or in the journal's deliveries, never in both.
        let texts = match &self.agent.journal {
            Some(journal) => self.handle.drain_with(|queued| journal.delivery(queued)),
            None => self.handle.drain(),
        };
        for text in texts {
            self.rec.messages.push(Message::User { content: text.clone() });
            self.rec.injected_messages.push(text);
        }
    }

    async fn drive(&mut self, prompt: &str, run_id: String, session_id: String) -> Result<(), RunErrorInfo> {
        let provider = self.agent.provider.clone();
        let start = Event::RunStart {
            session_id,
            run_id,
            model: provider.model().to_string(),
            provider: provider.name().to_string(),
            user_content: vec![ContentBlock::Text(prompt.to_string())],
        };
        let decision = match self.fire(start).await {
            Flow::Stop(e) => return Err(e),
            Flow::Go(d) => d,
        };
        if let Some(Directive::SkipRun(reason)) = decision.terminal {
            self.rec.stop_reason = StopReason::Skipped;
            self.rec.final_answer = Some(reason);
            return Ok(());
        }
        let user = decision.replace_user_content.map_or_else(|| prompt.to_string(), |c| ContentBlock::join_text(&c));
        self.rec.messages.push(Message::User { content: user });

        let tools: Vec<ToolSpec> = self.agent.tools.iter().map(|(spec, _)| spec.clone()).collect();
        let mut iteration: u32 = 1;
        let mut loop_counter: u32 = 0;
        let mut tools_called: Vec<String> = Vec::new();
        // True once tool results were appended: the next response closes the iteration.
        let mut awaiting_follow_up = false;
        // The iteration whose iteration-complete fired (a retried final answer does not fire it twice).
        let mut completed: Option<u32> = None;
        // Responses dropped by a `retry` directive; each counts toward max_iterations.
        let mut retries: u32 = 0;
        let mut empty_turn_retried = false;
        let mut purpose = "initial";
        loop {
            loop_counter += 1;
            let decision = match self.fire(Event::IterationStart { iteration, loop_counter }).await {
                Flow::Stop(e) => return Err(e),
                Flow::Go(d) => d,
            };
            if let Some(Directive::SkipModelCall(reason)) = decision.terminal {
                // Seed 003: the turn ends without calling the model; what is queued stays undelivered.
                self.rec.stop_reason = StopReason::Skipped;
                self.rec.final_answer = Some(reason);
                self.rec.iterations = self.iterations_completed;
                return Ok(());
            }
            self.drain();
            let mut response = self.request(iteration, purpose, &tools).await?;
            let ev = Event::ModelResponse {
                iteration,
                text: response.text.clone(),
                content: text_content(&response.text),
                tool_calls: response.tool_calls.clone(),
                reasoning: response.reasoning.clone(),
                finish_reason: response.finish_reason,
                usage: Some(response.usage),
            };
            let decision = match self.fire(ev).await {
                Flow::Stop(e) => return Err(e),
                Flow::Go(d) => d,
            };
            if let Some(blocks) = decision.replace_content {
                response.text = ContentBlock::join_text(&blocks);
            }
            if let Some(Directive::Reject(reason)) = decision.terminal {
                self.rec.stop_reason = StopReason::Rejected;
                self.rec.final_answer = Some(reason);
                self.rec.iterations = iteration;
                return Ok(());
            }
            if let Some(feedback) = decision.retry {
                // Discard the response and call the model again with the feedback.
                self.retry_with(feedback, iteration, &mut retries)?;
                purpose = "retry";
                continue;
            }
            match response.continuation {
                Some(Continuation::PauseTurn) => {
                    // Anthropic paused a long server-side turn: resend its content and let it
                    // continue. Its server-side tools are never dispatched here.
                    self.push_assistant(&response, Vec::new());
                    purpose = "pause-turn-continuation";
                    continue;
                }
                Some(Continuation::EmptyTurn) if !empty_turn_retried => {
                    // Gemini sometimes answers a turn with nothing at all: ask once more.
                    empty_turn_retried = true;
                    purpose = "empty-turn-retry";
                    continue;
                }
                _ => {}
            }

            // A response cut off by the token limit may hold a tool call whose arguments
            // were cut too: none of its tool calls is run, and the run ends with max_tokens.
            let mut cut_calls = Vec::new();
            if response.finish_reason == FinishReason::Length && !response.tool_calls.is_empty() {
                tracing::warn!(
                    calls = response.tool_calls.len(),
                    "the response hit the token limit: its tool calls are not run"
                );
                cut_calls = std::mem::take(&mut response.tool_calls);
            }
            let has_tools = !response.tool_calls.is_empty();
            if (awaiting_follow_up || !has_tools) && completed != Some(iteration) {
                completed = Some(iteration);
                let ev = Event::IterationComplete {
                    iteration,
                    usage: std::mem::take(&mut self.since_last_complete),
                    tools_called: std::mem::take(&mut tools_called),
                    stop_reason: response.finish_reason,
                };
                // The iteration is complete once its follow-up arrived, whatever the hooks say.
                self.iterations_completed = iteration;
                if let Flow::Stop(e) = self.fire(ev).await {
                    return Err(e);
                }
            }

            if !has_tools {
                self.rec.iterations = iteration;
                self.push_assistant(&response, Vec::new());
                let ev = Event::FinalAnswer {
                    text: response.text.clone(),
                    content: text_content(&response.text),
                    finish_reason: response.finish_reason,
                    usage: self.rec.usage,
                    tool_calls: cut_calls,
                    reasoning: response.reasoning.clone(),
                };
                let decision = match self.fire(ev).await {
                    Flow::Stop(e) => return Err(e),
                    Flow::Go(d) => d,
                };
                let mut answer = response.text;
                if let Some(blocks) = decision.replace_content {
                    answer = ContentBlock::join_text(&blocks);
                    if let Some(Message::Assistant { content, .. }) = self.rec.messages.last_mut() {
                        content.clone_from(&answer);
                    }
                }
                if let Some(Directive::Reject(reason)) = decision.terminal {
                    self.rec.stop_reason = StopReason::Rejected;
                    self.rec.final_answer = Some(reason);
                    return Ok(());
                }
                if let Some(feedback) = decision.retry {
                    // The answer is dropped from the history and the model asked again.
                    self.rec.messages.pop();
                    if matches!(self.rec.messages.last(), Some(Message::Native { .. })) {
                        self.rec.messages.pop();
                    }
                    self.retry_with(feedback, iteration, &mut retries)?;
                    purpose = "retry";
                    continue;
                }
                self.rec.stop_reason = match response.finish_reason {
                    FinishReason::Stop | FinishReason::ToolCall => StopReason::EndTurn,
                    FinishReason::Length => StopReason::MaxTokens,
                    FinishReason::ContentFilter => StopReason::ContentFilter,
                    FinishReason::Other => StopReason::Other,
                };
                self.rec.final_answer = Some(answer);
                return Ok(());
            }

            if awaiting_follow_up {
                iteration += 1;
            }
            if iteration + retries > self.agent.config.max_iterations {
                return Err(RunErrorInfo::MaxIterations { limit: self.agent.config.max_iterations, retries });
            }
            awaiting_follow_up = true;
            purpose = "follow-up";
            self.rec.iterations = iteration;
            let calls = response.tool_calls.clone();
            self.push_assistant(&response, calls.clone());
            let mut results: Vec<ToolResult> = Vec::with_capacity(calls.len());
            let mut aborted = None;
            for call in &calls {
                if aborted.is_some() {
                    results.push(not_run(call, "Run aborted before this tool call ran."));
                    continue;
                }
                match self.tool_call(iteration, call, &mut results).await {
                    Ok(()) => tools_called.push(call.name.clone()),
                    Err(e) => aborted = Some(e),
                }
            }
            // Every tool call the model emitted gets exactly one result.
            self.rec.messages.push(Message::ToolResults { results });
            if let Some(e) = aborted {
                return Err(e);
            }
        }
    }

    /// Appends the assistant message of `response` (with `tool_calls`), after
    /// its provider-native form when it has one (server-side tool blocks,
    /// thinking signatures), so the next request can send it back faithfully.
    fn push_assistant(&mut self, response: &ModelResponse, tool_calls: Vec<ToolCall>) {
        if let Some(native) = &response.native {
            self.rec.messages.push(Message::Native { native: native.clone() });
        }
        self.rec.messages.push(Message::Assistant { content: response.text.clone(), tool_calls });
    }

    /// Sends one model request, retrying per the policy; fires `request-start`
    /// (when enabled) before every attempt, with its attempt number. Text and
    /// thinking deltas go to the stream when there is one.
    async fn request(
        &mut self,
        iteration: u32,
        purpose: &str,
        tools: &[ToolSpec],
    ) -> Result<ModelResponse, RunErrorInfo> {
        let provider = self.agent.provider.clone();
        let policy = RetryPolicy { max_attempts: self.agent.config.max_attempts.max(1), ..RetryPolicy::default() };
        let mut attempt: u32 = 1;
        loop {
            if self.agent.config.emit_request_start {
                let ev = Event::RequestStart {
                    request_index: self.rec.requests + 1,
                    iteration,
                    attempt,
                    purpose: purpose.to_string(),
                    model: provider.model().to_string(),
                    provider: provider.name().to_string(),
                };
                if let Flow::Stop(e) = self.fire(ev).await {
                    return Err(e);
                }
            }
            let request = ModelRequest {
                model: provider.model().to_string(),
                system: self.agent.config.system.clone(),
                messages: self.rec.messages.clone(),
                tools: tools.to_vec(),
            };
            // Counted when sent: a request that fails was still made.
            self.rec.requests += 1;
            let request_done = async {
                match &self.observer {
                    Some(observer) => {
                        let observer = observer.clone();
                        let on_delta = move |d: Delta| {
                            observer(match d {
                                Delta::Text(text) => StreamEvent::TextDelta { text },
                                Delta::Thinking(text) => StreamEvent::ThinkingDelta { text },
                            })
                        };
                        provider.complete_streaming(&request, &on_delta).await
                    }
                    None => provider.complete(&request).await,
                }
            };
            // An abort (the handle, Ctrl-C) does not wait for the request: it is
            // dropped, which closes its connection. What it had cost is unknown.
            let outcome = tokio::select! {
                biased;
                reason = self.handle.abort_wanted() => return Err(aborted_in_request(reason)),
                outcome = request_done => outcome,
            };
            let error = match outcome {
                Ok(mut response) => {
                    if let Some(price) =
                        hookbox_providers::pricing::find_override(&self.agent.config.prices, &response.model)
                    {
                        response.usage.cost = price.cost(&response.usage);
                    }
                    self.rec.usage.add(&response.usage);
                    self.since_last_complete.add(&response.usage);
                    if let Some(journal) = &self.agent.journal {
                        // Not asked again after a crash (a failed write only loses that).
                        journal.safe_point(crate::journal::SafePoint::ModelResponse).await;
                    }
                    return Ok(response);
                }
                Err(e) => e,
            };
            // A cut or stalled stream was still billed for what it reported.
            if let ProviderError::Truncated { partial_usage, .. }
            | ProviderError::StreamError { partial_usage, .. }
            | ProviderError::Stalled { partial_usage, .. } = &error
            {
                self.rec.usage.add(partial_usage);
                self.since_last_complete.add(partial_usage);
            }
            // The thread-local RNG is not Send: draw the delay before any await.
            let delay = policy.retry_delay(&error, attempt, &mut rand::rng());
            match delay {
                Some(delay) => {
                    tracing::warn!(
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        "model request failed, retrying: {error}"
                    );
                    tokio::select! {
                        biased;
                        reason = self.handle.abort_wanted() => return Err(aborted_in_request(reason)),
                        () = tokio::time::sleep(delay) => {}
                    }
                    attempt += 1;
                }
                None => return Err(RunErrorInfo::Provider { message: error.to_string() }),
            }
        }
    }

    /// Records a `retry`: the feedback becomes a user message for the next
    /// request, and the retry counts toward `max_iterations` (a hook
    /// that keeps retrying cannot loop for ever).
    fn retry_with(&mut self, feedback: String, iteration: u32, retries: &mut u32) -> Result<(), RunErrorInfo> {
        *retries += 1;
        self.context.retries = *retries;
        if iteration + *retries > self.agent.config.max_iterations {
            return Err(RunErrorInfo::MaxIterations { limit: self.agent.config.max_iterations, retries: *retries });
        }
        self.rec.messages.push(Message::User { content: feedback });
        Ok(())
    }
}

/// The error of a run aborted while a model request was in flight or waiting to be retried.
fn aborted_in_request(reason: Option<String>) -> RunErrorInfo {
    RunErrorInfo::Aborted { reason, plugin: None, event: Some("model request".into()) }
}

impl Run<'_> {
    /// A clean end: fires `run-end`, reports what is still queued as undelivered.
    async fn finish(mut self) -> RunResult {
        let ev = Event::RunEnd { iterations: self.rec.iterations, usage: self.rec.usage, error: None };
        // run-end is observation only: an abort there is recorded as ignored by the chain rules.
        let _ = self.fire(ev).await;
        self.rec.plugin_stats = self.hooks.stats().to_vec();
        self.rec.undelivered_injections = match self.at_end {
            QueueAtEnd::Close => self.handle.close(),
            QueueAtEnd::Drain => self.handle.drain(),
        };
        if !self.rec.undelivered_injections.is_empty() {
            tracing::info!(
                count = self.rec.undelivered_injections.len(),
                "the run ended before {} injected message(s) could be delivered: see undelivered_injections",
                self.rec.undelivered_injections.len()
            );
        }
        self.rec
    }

    /// An error end: no `run-end`; the queue is attached to the error.
    fn fail(mut self, info: RunErrorInfo) -> RunError {
        self.rec.stop_reason = StopReason::Error;
        self.rec.iterations = self.iterations_completed;
        self.rec.plugin_stats = self.hooks.stats().to_vec();
        self.rec.undelivered_injections = self.handle.close();
        if !self.rec.undelivered_injections.is_empty() {
            tracing::warn!(
                "the run raised an error with {} injected message(s) undelivered: see the error's undelivered_injections",
                self.rec.undelivered_injections.len()
            );
        }
        self.rec.error = Some(info.clone());
        RunError { info, report: Box::new(self.rec) }
    }
}

fn text_content(text: &str) -> Vec<ContentBlock> {
    if text.is_empty() { Vec::new() } else { vec![ContentBlock::Text(text.to_string())] }
}

mod approval;
mod post;
mod tool_call;

pub use approval::NOT_APPROVED_MESSAGE;

use tool_call::not_run;
