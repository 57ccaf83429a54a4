//! [`HookChain`]: the hooks of one run, called in their configured order.
//!
//! Rules (`docs/contract.md`, "The chain"): a directive outside its event's column
//! is ignored with a warning; the first `skip-tool`, `abort`, `reject` or
//! `skip-run` ends the chain for that event; replacements feed the next hook
//! (it sees the replaced value); injections accumulate. A failed call counts
//! as `continue` and is kept as a [`HookFailure`].
//!
//! Subscriptions: a hook is entered only for the events it subscribes to
//! ([`HookHandler::subscribed`]); for the others it is not called at all.
//!
//! Observers run beside the loop: a call that cannot change the run (every
//! call at `request-start` and `run-end`, and every call of an observe-only
//! hook, [`HookHandler::observe_only`]) is started on its own task and the
//! loop goes on without waiting. Each hook still sees its events one at a
//! time and in order: before a hook's next call, its previous one is awaited.
//! A detached call's directive, logs and failures are recorded when it is
//! collected (at the hook's next call, or by [`HookChain::drain`] when the run
//! ends); an observe-only hook's directives other than `continue` are
//! recorded as ignored. Veto points stay sequential and ordered.

use std::sync::Arc;

use hookbox_contract::{
    ApprovalReason, CallRecord, ContentBlock, Directive, DirectiveRecord, Event, EventContext, EventKind, FailureKind,
    HookFailure, HookLog, PluginStats, Suspension,
};

use crate::handler::{HookHandler, HookReply};
use crate::options::{FAIL_CLOSED_MESSAGE, FailPolicy};

/// Where a chain writes every hook call's outcome, `continue` included: a
/// run's journal, so a replay can compare its calls with the recorded ones.
pub trait CallSink: Send + Sync {
    /// Takes one call's record, in the order the chain collected the calls.
    fn push_call(&self, record: CallRecord);
}

/// What the hooks decided for one event, after the chain rules.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// The directive that ended the chain: `skip-tool`, `abort`, `reject` or `skip-run`.
    pub terminal: Option<Directive>,
    /// Messages to queue, in order.
    pub injections: Vec<String>,
    /// The last `replace-arguments` (JSON object text).
    pub replace_arguments: Option<String>,
    /// The last `replace-result`.
    pub replace_result: Option<String>,
    /// The last `replace-content`.
    pub replace_content: Option<Vec<ContentBlock>>,
    /// The last `replace-user-content`.
    pub replace_user_content: Option<Vec<ContentBlock>>,
    /// A hook asked to pause at the next safe point.
    pub pause: bool,
    /// The first `retry`'s feedback (later ones in the chain are recorded but the first wins).
    pub retry: Option<String>,
    /// `before-tool-call`: the hooks that asked for approval (`ask-approval`),
    /// one entry per plugin (its latest reason), in chain order. A terminal
    /// directive (`skip-tool`, `abort`) wins over them.
    pub approvals: Vec<ApprovalReason>,
    /// Messages to post to other sessions (`post-message`), in order: `(plugin, to, text)`.
    pub posts: Vec<(String, String, String)>,
}

impl Decision {
    /// Adds plugin `plugin`'s approval request, replacing its earlier one (the
    /// confirmation pass may ask a hook twice).
    fn ask_approval(&mut self, plugin: &str, reason: String) {
        match self.approvals.iter_mut().find(|a| a.plugin == plugin) {
            Some(a) => a.reason = reason,
            None => self.approvals.push(ApprovalReason { plugin: plugin.to_string(), reason }),
        }
    }
}

/// Everything one dispatch produced, for the run's trace.
#[derive(Debug, Default)]
pub struct DispatchTrace {
    /// Non-continue directives, honoured or not.
    pub directives: Vec<DirectiveRecord>,
    /// Failed calls.
    pub failures: Vec<HookFailure>,
    /// Log lines.
    pub logs: Vec<HookLog>,
    /// Plugins suspended for the rest of the run by this dispatch.
    pub suspensions: Vec<Suspension>,
    /// Texts injected by calls that finished detached (observation events,
    /// e.g. `run-end`, collected by this dispatch or [`HookChain::drain`]),
    /// in the order they were collected: the run queues them like
    /// [`Decision::injections`].
    pub injections: Vec<String>,
    /// Posts of calls that finished detached: (plugin, the event the call
    /// was made for, target session, text), in the order they were collected.
    pub posts: Vec<(String, EventKind, String, String)>,
}

/// The hooks of one run, in their configured order.
#[derive(Default)]
pub struct HookChain {
    slots: Vec<Slot>,
    stats: Vec<PluginStats>,
    calls: Option<Arc<dyn CallSink>>,
}

/// One hook of the chain and the call it may have running on its own task.
struct Slot {
    /// The handler; `None` while a detached call has it (or after that call's task panicked).
    hook: Option<Box<dyn HookHandler>>,
    /// A detached call in flight, and the event it was called for.
    pending: Option<(EventKind, tokio::task::JoinHandle<Detached>)>,
    name: String,
    /// Which events the hook is entered for, by [`EventKind::index`].
    subscribed: [bool; EventKind::COUNT],
    observe_only: bool,
    fail_policy: FailPolicy,
}

/// A detached call's result: the handler comes back with its reply.
struct Detached {
    hook: Box<dyn HookHandler>,
    kind: EventKind,
    iteration: Option<u32>,
    reply: HookReply,
}

impl HookChain {
    /// A chain calling `hooks` in this order.
    pub fn new(hooks: Vec<Box<dyn HookHandler>>) -> Self {
        let stats =
            hooks.iter().map(|h| PluginStats { plugin: h.name().to_string(), ..PluginStats::default() }).collect();
        let slots = hooks
            .into_iter()
            .map(|hook| Slot {
                name: hook.name().to_string(),
                subscribed: EventKind::ALL.map(|k| hook.subscribed(k)),
                observe_only: hook.observe_only(),
                fail_policy: hook.fail_policy(),
                hook: Some(hook),
                pending: None,
            })
            .collect();
        HookChain { slots, stats, calls: None }
    }

    /// Writes every hook call's outcome (`continue` included) to `sink`
    /// (a run's journal).
    pub fn with_call_sink(mut self, sink: Arc<dyn CallSink>) -> Self {
        self.calls = Some(sink);
        self
    }

    /// What each hook cost so far, in chain order (detached calls count once collected).
    pub fn stats(&self) -> &[PluginStats] {
        &self.stats
    }

    /// How many hooks the chain has.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the chain has no hooks.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Calls every subscribed hook with `event` (each sees the replacements of
    /// the ones before it) and `context` (where the event happens; the same for
    /// every hook), returns what they decided and appends to `trace`.
    /// Observation calls are started and not awaited (see the module docs).
    pub async fn dispatch(&mut self, event: &Event, context: &EventContext, trace: &mut DispatchTrace) -> Decision {
        let mut decision = Decision::default();
        // The event as the next hook sees it: cloned only when a hook replaces something.
        let mut replaced: Option<Event> = None;
        let kind = event.kind();
        let iteration = event.iteration();
        let can_detach = tokio::runtime::Handle::try_current().is_ok();
        if let Event::RunStart { session_id, .. } = event {
            // Every hook learns the session, subscribed to run-start or not.
            for i in 0..self.slots.len() {
                self.collect(i, trace).await;
                if let Some(hook) = self.slots[i].hook.as_mut() {
                    hook.run_started(session_id);
                }
            }
        }
        // The last hook that replaced a tool call's arguments: the ones before it decided on others.
        let mut last_rewrite: Option<usize> = None;
        for i in 0..self.slots.len() {
            if !self.slots[i].subscribed[kind.index()] {
                continue;
            }
            // A hook sees its events in order: its detached call finishes first.
            self.collect(i, trace).await;
            let slot = &mut self.slots[i];
            let Some(mut hook) = slot.hook.take() else { continue };
            let current = replaced.as_ref().unwrap_or(event);
            if can_detach && (slot.observe_only || kind.is_observation()) {
                let event = current.clone();
                let context = context.clone();
                slot.pending = Some((
                    kind,
                    tokio::spawn(async move {
                        let reply = hook.on_event(&event, &context).await;
                        Detached { hook, kind: event.kind(), iteration: event.iteration(), reply }
                    }),
                ));
                continue;
            }
            let reply = hook.on_event(current, context).await;
            self.slots[i].hook = Some(hook);
            let Some(directive) = self.record(i, kind, iteration, reply, trace) else { continue };
            match directive {
                Directive::InjectMessage(text) => decision.injections.push(text),
                Directive::PostMessage { to, text } => decision.posts.push((self.slots[i].name.clone(), to, text)),
                Directive::ReplaceArguments(args) => {
                    if let Event::BeforeToolCall { call, .. } = replaced.get_or_insert_with(|| event.clone()) {
                        call.arguments = args.clone();
                    }
                    decision.replace_arguments = Some(args);
                    last_rewrite = Some(i);
                }
                Directive::ReplaceResult(text) => {
                    if let Event::ToolCallResult { result, truncated, .. } =
                        replaced.get_or_insert_with(|| event.clone())
                    {
                        *result = text.clone();
                        *truncated = false;
                    }
                    decision.replace_result = Some(text);
                }
                Directive::ReplaceContent(blocks) => {
                    match replaced.get_or_insert_with(|| event.clone()) {
                        Event::ModelResponse { text, content, .. } | Event::FinalAnswer { text, content, .. } => {
                            *text = ContentBlock::join_text(&blocks);
                            *content = blocks.clone();
                        }
                        _ => {}
                    }
                    decision.replace_content = Some(blocks);
                }
                Directive::ReplaceUserContent(blocks) => {
                    if let Event::RunStart { user_content, .. } = replaced.get_or_insert_with(|| event.clone()) {
                        *user_content = blocks.clone();
                    }
                    decision.replace_user_content = Some(blocks);
                }
                Directive::Pause => decision.pause = true,
                Directive::AskApproval(reason) => {
                    let name = self.slots[i].name.clone();
                    decision.ask_approval(&name, reason);
                }
                Directive::Retry(feedback) => {
                    if decision.retry.is_some() {
                        // The first retry wins: this one is recorded, as not honoured.
                        if let Some(record) = trace.directives.last_mut() {
                            record.honoured = false;
                            record.note = Some("an earlier hook's `retry` applies: one retry per event".into());
                        }
                    } else {
                        decision.retry = Some(feedback);
                    }
                }
                d if d.ends_chain() => {
                    decision.terminal = Some(d);
                    break;
                }
                _ => {}
            }
        }
        if let (Some(upto), Some(final_event), None) = (last_rewrite, &replaced, &decision.terminal) {
            self.confirm_arguments(upto, final_event, context, &mut decision, trace).await;
        }
        decision
    }

    /// Asks every hook subscribed to `before-tool-call` (observe-only ones
    /// aside) about `event`, a `before-tool-call` whose arguments the host
    /// changed after the chain decided (an approval answered with other
    /// arguments): the guards decide on the arguments that will run. As in
    /// the confirmation pass, a `skip-tool` or `abort` ends it, a
    /// `replace-arguments` that changes the arguments again declines the call,
    /// injections and posts count; a new `ask-approval` is ignored (the host
    /// has answered). Appends to `trace`.
    pub async fn confirm(&mut self, event: &Event, context: &EventContext, trace: &mut DispatchTrace) -> Decision {
        let mut decision = Decision::default();
        let all = self.slots.len();
        self.confirm_arguments(all, event, context, &mut decision, trace).await;
        decision.approvals.clear();
        decision
    }

    /// The confirmation pass at `before-tool-call` (`docs/contract.md`, "A veto
    /// holds"): every hook before `upto` (the last that replaced the arguments)
    /// decided on arguments that will not run, so each is asked again, in
    /// order, with `event` (the final arguments). Its veto (`skip-tool`,
    /// `abort`) ends the chain as usual, injections and `pause` count; a
    /// `replace-arguments` that would change the final arguments again
    /// declines the tool call, since no order of the hooks agrees on them.
    async fn confirm_arguments(
        &mut self,
        upto: usize,
        event: &Event,
        context: &EventContext,
        decision: &mut Decision,
        trace: &mut DispatchTrace,
    ) {
        let Event::BeforeToolCall { call: final_call, .. } = event else { return };
        let final_args = serde_json::from_str::<serde_json::Value>(&final_call.arguments).ok();
        let kind = event.kind();
        let iteration = event.iteration();
        for i in 0..upto {
            let slot = &mut self.slots[i];
            if !slot.subscribed[kind.index()] || slot.observe_only {
                continue;
            }
            let Some(mut hook) = slot.hook.take() else { continue };
            let reply = hook.on_event(event, context).await;
            self.slots[i].hook = Some(hook);
            let Some(directive) = self.record(i, kind, iteration, reply, trace) else { continue };
            match directive {
                Directive::InjectMessage(text) => decision.injections.push(text),
                Directive::PostMessage { to, text } => decision.posts.push((self.slots[i].name.clone(), to, text)),
                Directive::Pause => decision.pause = true,
                Directive::AskApproval(reason) => {
                    let name = self.slots[i].name.clone();
                    decision.ask_approval(&name, reason);
                }
                Directive::ReplaceArguments(args) => {
                    let same =
                        serde_json::from_str::<serde_json::Value>(&args).ok().is_some_and(|a| Some(a) == final_args);
                    if !same {
                        let name = self.slots[i].name.clone();
                        let reason = format!(
                            "Tool call declined: hook `{name}` rewrites the arguments another hook rewrote; the hooks do not agree on what to run."
                        );
                        tracing::warn!(plugin = %name, "{reason}");
                        let skip = Directive::SkipTool(Some(reason));
                        trace.directives.push(DirectiveRecord {
                            plugin: name,
                            event: kind.to_string(),
                            iteration,
                            directive: skip.clone(),
                            honoured: true,
                            note: Some("confirmation pass: a second rewrite of the final arguments".into()),
                        });
                        decision.terminal = Some(skip);
                        return;
                    }
                }
                d if d.ends_chain() => {
                    decision.terminal = Some(d);
                    return;
                }
                _ => {}
            }
        }
    }

    /// Waits for every detached call and records them in `trace`. Call it when
    /// the run ends, so the run's record holds every call.
    pub async fn drain(&mut self, trace: &mut DispatchTrace) {
        for i in 0..self.slots.len() {
            self.collect(i, trace).await;
        }
    }

    /// Awaits hook `i`'s detached call, if one is running, and records it.
    async fn collect(&mut self, i: usize, trace: &mut DispatchTrace) {
        let Some((event, pending)) = self.slots[i].pending.take() else { return };
        match pending.await {
            Ok(Detached { hook, kind, iteration, reply }) => {
                self.slots[i].hook = Some(hook);
                // An observation's directive changes nothing (`record` notes it as
                // ignored), except an injection, which the run queues.
                match self.record(i, kind, iteration, reply, trace) {
                    Some(Directive::InjectMessage(text)) => trace.injections.push(text),
                    Some(Directive::PostMessage { to, text }) => {
                        trace.posts.push((self.slots[i].name.clone(), kind, to, text));
                    }
                    _ => {}
                }
            }
            Err(e) => {
                // The handler panicked (a bug: handlers report failures in their reply); it is gone.
                let slot = &self.slots[i];
                tracing::error!(plugin = %slot.name, "the hook's task failed and the hook is dropped for the rest of the run: {e}");
                trace.failures.push(HookFailure {
                    plugin: slot.name.clone(),
                    event: event.to_string(),
                    kind: FailureKind::Trap,
                    message: format!("the hook's task failed: {e}; the hook is dropped for the rest of the run"),
                    fuel_used: 0,
                    duration_us: 0,
                });
            }
        }
    }

    /// Records hook `i`'s reply to an event of `kind` (stats, call sink, logs,
    /// failures, the directive with whether it is honoured) and returns the
    /// directive the chain must apply: `None` for `continue`, a failure, an
    /// ignored directive or any directive of a detached call.
    fn record(
        &mut self,
        i: usize,
        kind: EventKind,
        iteration: Option<u32>,
        mut reply: HookReply,
        trace: &mut DispatchTrace,
    ) -> Option<Directive> {
        let slot = &self.slots[i];
        let stats = &mut self.stats[i];
        let blank_target = matches!(&reply.outcome, Ok(Directive::PostMessage { to, .. }) if to.trim().is_empty());
        if let Ok(Directive::InjectMessage(text) | Directive::PostMessage { text, .. }) = &reply.outcome
            && (text.trim().is_empty() || blank_target)
        {
            // Seed 000: empty injected text raises. Never an empty user message.
            reply.outcome = Err(HookFailure {
                plugin: slot.name.clone(),
                event: kind.to_string(),
                kind: FailureKind::InvalidOutput,
                message: "invalid output: an empty `inject-message` or `post-message` (the text and the target \
                          session must not be blank)"
                    .into(),
                fuel_used: reply.fuel_used,
                duration_us: reply.duration_us,
            });
        }
        if reply.duration_us > 0 || reply.fuel_used > 0 || reply.outcome.is_err() {
            stats.calls += 1;
            stats.failures += u64::from(reply.outcome.is_err());
            stats.fuel_used += reply.fuel_used;
            stats.time_us += reply.duration_us;
        }
        if let Some(calls) = &self.calls {
            calls.push_call(CallRecord {
                plugin: slot.name.clone(),
                event: kind.to_string(),
                iteration,
                directive: reply.outcome.as_ref().ok().cloned(),
                failure: reply.outcome.as_ref().err().map(|f| f.kind),
            });
        }
        trace.logs.extend(reply.logs);
        trace.suspensions.extend(reply.suspension);
        let detached = slot.observe_only || kind.is_observation();
        let directive = match reply.outcome {
            Ok(d) => d,
            Err(failure)
                if slot.fail_policy == FailPolicy::Closed && kind == EventKind::BeforeToolCall && !detached =>
            {
                // Fail-closed at the veto point: the failure declines the tool.
                let note = format!("fail-closed: the hook failed ({})", failure.kind.as_str());
                trace.failures.push(failure);
                let skip = Directive::SkipTool(Some(FAIL_CLOSED_MESSAGE.to_string()));
                trace.directives.push(DirectiveRecord {
                    plugin: slot.name.clone(),
                    event: kind.to_string(),
                    iteration,
                    directive: skip.clone(),
                    honoured: true,
                    note: Some(note),
                });
                return Some(skip);
            }
            Err(failure) => {
                trace.failures.push(failure);
                return None;
            }
        };
        if directive == Directive::Continue {
            return None;
        }
        let ignored = if !directive.valid_at(kind) {
            Some(format!("`{}` is not valid at `{kind}`", directive.action()))
        } else if slot.observe_only {
            Some(format!("`{}` from an observe-only plugin", directive.action()))
        } else {
            None
        };
        if let Some(note) = &ignored {
            tracing::warn!(plugin = %slot.name, "{note}; ignored");
        }
        let honoured = ignored.is_none();
        trace.directives.push(DirectiveRecord {
            plugin: slot.name.clone(),
            event: kind.to_string(),
            iteration,
            // An ignored directive changes nothing: its record is a short copy.
            directive: if honoured { directive.clone() } else { directive.abridged(IGNORED_RECORD_CHARS) },
            honoured,
            note: ignored,
        });
        // A detached call's directives change nothing, except an injection,
        // which is queued (and reported undelivered if no turn boundary follows).
        (honoured && (!detached || matches!(directive, Directive::InjectMessage(_) | Directive::PostMessage { .. })))
            .then_some(directive)
    }
}

/// Characters of each string an ignored directive's record keeps.
const IGNORED_RECORD_CHARS: usize = 256;

#[cfg(test)]
#[path = "chain_tests.rs"]
mod tests;
