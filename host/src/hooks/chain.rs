//! [`HookChain`]: the hooks of one run, called in their configured order.
//!
//! Rules (CONTRACT.md, "Directives"): a directive outside its event's column
//! is ignored with a warning; the first `skip-tool`, `abort`, `reject` or
//! `skip-run` ends the chain for that event; replacements feed the next hook
//! (it sees the replaced value); injections accumulate. A failed call counts
//! as `continue` and is kept as a [`HookFailure`].

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::options::{FAIL_CLOSED_MESSAGE, FailPolicy};
use super::{HookFailure, HookHandler, HookLog, PluginStats, Suspension};
use crate::event::{ContentBlock, Directive, Event, EventKind};
use crate::journal::{CallRecord, RunJournal};

/// One directive a hook returned, as recorded in the run result (`directives`).
/// `continue` is not recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectiveRecord {
    /// The plugin that returned it.
    pub plugin: String,
    /// The event's WIT name.
    pub event: String,
    /// The event's iteration, if it has one.
    pub iteration: Option<u32>,
    /// The directive: `action` and `value`.
    #[serde(flatten)]
    pub directive: Directive,
    /// False when the directive was ignored (see `note`).
    pub honoured: bool,
    /// Why it was ignored, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
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
}

/// The hooks of one run, in their configured order.
#[derive(Default)]
pub struct HookChain {
    hooks: Vec<Box<dyn HookHandler>>,
    stats: Vec<PluginStats>,
    journal: Option<Arc<RunJournal>>,
}

impl HookChain {
    /// A chain calling `hooks` in this order.
    pub fn new(hooks: Vec<Box<dyn HookHandler>>) -> Self {
        let stats =
            hooks.iter().map(|h| PluginStats { plugin: h.name().to_string(), ..PluginStats::default() }).collect();
        HookChain { hooks, stats, journal: None }
    }

    /// Writes every hook call's outcome (`continue` included) to `journal`.
    pub fn with_journal(mut self, journal: Arc<RunJournal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// What each hook cost so far, in chain order.
    pub fn stats(&self) -> &[PluginStats] {
        &self.stats
    }

    /// How many hooks the chain has.
    pub fn len(&self) -> usize {
        self.hooks.len()
    }

    /// True when the chain has no hooks.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Calls every hook with `event` (each sees the replacements of the ones
    /// before it) and returns what they decided; appends to `trace`.
    pub async fn dispatch(&mut self, event: &Event, trace: &mut DispatchTrace) -> Decision {
        let mut decision = Decision::default();
        let mut current = event.clone();
        let kind = event.kind();
        for (hook, stats) in self.hooks.iter_mut().zip(self.stats.iter_mut()) {
            let reply = hook.on_event(&current).await;
            if let Some(journal) = &self.journal {
                journal.push_call(CallRecord {
                    plugin: hook.name().to_string(),
                    event: kind.to_string(),
                    iteration: event.iteration(),
                    directive: reply.outcome.as_ref().ok().cloned(),
                    failure: reply.outcome.as_ref().err().map(|f| f.kind),
                });
            }
            if reply.duration_us > 0 || reply.fuel_used > 0 || reply.outcome.is_err() {
                stats.calls += 1;
                stats.failures += u64::from(reply.outcome.is_err());
                stats.fuel_used += reply.fuel_used;
                stats.time_us += reply.duration_us;
            }
            trace.logs.extend(reply.logs);
            trace.suspensions.extend(reply.suspension);
            let directive = match reply.outcome {
                Ok(d) => d,
                Err(failure) if hook.fail_policy() == FailPolicy::Closed && kind == EventKind::BeforeToolCall => {
                    // Fail-closed at the veto point: the failure declines the tool.
                    let note = format!("fail-closed: the hook failed ({})", failure.kind.as_str());
                    trace.failures.push(failure);
                    trace.directives.push(DirectiveRecord {
                        plugin: hook.name().to_string(),
                        event: kind.to_string(),
                        iteration: event.iteration(),
                        directive: Directive::SkipTool(Some(FAIL_CLOSED_MESSAGE.to_string())),
                        honoured: true,
                        note: Some(note),
                    });
                    decision.terminal = Some(Directive::SkipTool(Some(FAIL_CLOSED_MESSAGE.to_string())));
                    break;
                }
                Err(failure) => {
                    trace.failures.push(failure);
                    continue;
                }
            };
            if directive == Directive::Continue {
                continue;
            }
            let mut record = DirectiveRecord {
                plugin: hook.name().to_string(),
                event: kind.to_string(),
                iteration: event.iteration(),
                directive: directive.clone(),
                honoured: true,
                note: None,
            };
            if !directive.valid_at(kind) {
                let note = format!("`{}` is not valid at `{kind}`; ignored", directive.action());
                tracing::warn!(plugin = hook.name(), "{note}");
                record.honoured = false;
                record.note = Some(note);
                trace.directives.push(record);
                continue;
            }
            trace.directives.push(record);
            match directive {
                Directive::InjectMessage(text) => decision.injections.push(text),
                Directive::ReplaceArguments(args) => {
                    if let Event::BeforeToolCall { call, .. } = &mut current {
                        call.arguments = args.clone();
                    }
                    decision.replace_arguments = Some(args);
                }
                Directive::ReplaceResult(text) => {
                    if let Event::ToolCallResult { result, truncated, .. } = &mut current {
                        *result = text.clone();
                        *truncated = false;
                    }
                    decision.replace_result = Some(text);
                }
                Directive::ReplaceContent(blocks) => {
                    match &mut current {
                        Event::ModelResponse { text, content, .. } | Event::FinalAnswer { text, content, .. } => {
                            *text = ContentBlock::join_text(&blocks);
                            *content = blocks.clone();
                        }
                        _ => {}
                    }
                    decision.replace_content = Some(blocks);
                }
                Directive::ReplaceUserContent(blocks) => {
                    if let Event::RunStart { user_content, .. } = &mut current {
                        *user_content = blocks.clone();
                    }
                    decision.replace_user_content = Some(blocks);
                }
                Directive::Pause => decision.pause = true,
                Directive::Retry(feedback) => {
                    decision.retry.get_or_insert(feedback);
                }
                d if d.ends_chain() => {
                    decision.terminal = Some(d);
                    break;
                }
                _ => {}
            }
        }
        decision
    }
}
