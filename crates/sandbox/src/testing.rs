//! Test support for embedders and Hookbox's own tests (feature
//! `test-support`): [`ScriptedHook`], a native hook driven by a table of
//! event → answers, so chain rules and agent behaviour can be tested without
//! building any WebAssembly, and [`state_store_roundtrip`], the checks every
//! [`StateStore`] must pass.
#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hookbox_contract::{Directive, Event, EventContext, EventKind, FailureKind, HookFailure, HookLog};

use crate::handler::{HookHandler, HookReply};
use crate::options::FailPolicy;
use crate::state::{StateError, StateStore, StoredState};

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Answer with this directive.
    Answer(Directive),
    /// Fail the call with this kind (the reply's outcome is a [`HookFailure`]).
    Fail(FailureKind),
}

/// A native [`HookHandler`] that answers from a script: for each event kind,
/// a queue of [`Step`]s taken in order; once a kind's queue is empty (or for
/// a kind never scripted) it answers `continue`. It records every event it
/// was called with, as it saw it ([`ScriptedHook::seen`]), and each event's
/// context ([`ScriptedHook::contexts`]).
#[derive(Debug)]
pub struct ScriptedHook {
    name: String,
    script: BTreeMap<&'static str, VecDeque<Step>>,
    fail: FailPolicy,
    observe: bool,
    events: Option<Vec<EventKind>>,
    seen: Arc<Mutex<Vec<Event>>>,
    contexts: Arc<Mutex<Vec<EventContext>>>,
    logs: Vec<String>,
}

impl ScriptedHook {
    /// A hook named `name` that answers `continue` to everything.
    pub fn new(name: impl Into<String>) -> Self {
        ScriptedHook {
            name: name.into(),
            script: BTreeMap::new(),
            fail: FailPolicy::Open,
            observe: false,
            events: None,
            seen: Arc::new(Mutex::new(Vec::new())),
            contexts: Arc::new(Mutex::new(Vec::new())),
            logs: Vec::new(),
        }
    }

    /// Queues `directive` as the next answer at events of `kind`.
    pub fn on(mut self, kind: EventKind, directive: Directive) -> Self {
        self.script.entry(kind.as_str()).or_default().push_back(Step::Answer(directive));
        self
    }

    /// Queues a failure of `failure` kind as the next answer at events of `kind`.
    pub fn fail_on(mut self, kind: EventKind, failure: FailureKind) -> Self {
        self.script.entry(kind.as_str()).or_default().push_back(Step::Fail(failure));
        self
    }

    /// Makes a failure at `before-tool-call` decline the tool (`fail = "closed"`).
    pub fn fail_closed(mut self) -> Self {
        self.fail = FailPolicy::Closed;
        self
    }

    /// Makes the hook observe-only: its calls are detached and its directives ignored.
    pub fn observe_only(mut self) -> Self {
        self.observe = true;
        self
    }

    /// Subscribes the hook to these kinds only (default: every kind).
    pub fn subscribe(mut self, kinds: &[EventKind]) -> Self {
        self.events = Some(kinds.to_vec());
        self
    }

    /// Adds a log line to every reply (to see logs reach the trace).
    pub fn log(mut self, line: impl Into<String>) -> Self {
        self.logs.push(line.into());
        self
    }

    /// The events the hook was called with, in order, shared with the hook.
    pub fn seen(&self) -> Arc<Mutex<Vec<Event>>> {
        self.seen.clone()
    }

    /// The context of each event in [`ScriptedHook::seen`], in the same order.
    pub fn contexts(&self) -> Arc<Mutex<Vec<EventContext>>> {
        self.contexts.clone()
    }
}

#[async_trait]
impl HookHandler for ScriptedHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn fail_policy(&self) -> FailPolicy {
        self.fail
    }

    fn subscribed(&self, kind: EventKind) -> bool {
        self.events.as_ref().is_none_or(|e| e.contains(&kind))
    }

    fn observe_only(&self) -> bool {
        self.observe
    }

    async fn on_event(&mut self, event: &Event, context: &EventContext) -> HookReply {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).push(event.clone());
        self.contexts.lock().unwrap_or_else(|p| p.into_inner()).push(context.clone());
        let kind = event.kind();
        let step = self.script.get_mut(kind.as_str()).and_then(VecDeque::pop_front);
        let outcome = match step {
            None => Ok(Directive::Continue),
            Some(Step::Answer(d)) => Ok(d),
            Some(Step::Fail(failure)) => Err(HookFailure {
                plugin: self.name.clone(),
                event: kind.to_string(),
                kind: failure,
                message: format!("scripted {} failure", failure.as_str()),
                fuel_used: 0,
                duration_us: 1,
            }),
        };
        let logs = self
            .logs
            .iter()
            .map(|l| HookLog { plugin: self.name.clone(), level: "info".into(), message: l.clone() })
            .collect();
        HookReply { outcome, logs, suspension: None, fuel_used: 0, duration_us: 1 }
    }
}

/// The checks every [`StateStore`] must pass: a missing entry loads as
/// `None` at revision 0; a save is loaded back with the next revision; a
/// second save replaces the first; entries are keyed by session and by
/// plugin; a save naming a revision the entry is no longer at is a
/// [`StateError::Conflict`] that writes nothing, and `None` saves whatever
/// is there. Panics on the first that fails.
pub fn state_store_roundtrip(store: &dyn StateStore) {
    let wait = std::time::Duration::from_secs(1);
    assert_eq!(store.load("s", "p", wait).expect("load"), (None, 0));
    let v1 = StoredState { version: "1".into(), data: b"one".to_vec() };
    assert_eq!(store.save("s", "p", &v1, Some(0), wait).expect("save"), 1);
    store.save("other", "p", &StoredState { version: "1".into(), data: b"x".to_vec() }, None, wait).expect("save");
    assert_eq!(store.load("s", "p", wait).expect("load"), (Some(v1.clone()), 1));
    let v2 = StoredState { version: "2".into(), data: vec![0, 255] };
    assert_eq!(store.save("s", "p", &v2, Some(1), wait).expect("save"), 2);
    assert_eq!(store.load("s", "p", wait).expect("load"), (Some(v2.clone()), 2));
    assert_eq!(store.load("s", "q", wait).expect("load"), (None, 0), "keyed by plugin");
    // A writer that read revision 1 (or nothing) lost the race: nothing changes.
    for stale in [Some(1), Some(0)] {
        match store.save("s", "p", &v1, stale, wait) {
            Err(StateError::Conflict { expected, found: 2, .. }) if Some(expected) == stale => {}
            other => panic!("a save expecting {stale:?} at revision 2 gave {other:?}"),
        }
    }
    assert_eq!(store.load("s", "p", wait).expect("load"), (Some(v2), 2));
    assert_eq!(store.save("s", "p", &v1, None, wait).expect("unconditional save"), 3);
    assert_eq!(store.load("s", "p", wait).expect("load"), (Some(v1), 3));
}
