//! [`MessageBus`]: sub-agent routing with the host as the message bus (seed
//! 000, "Sub-agent routing — the host is the message bus": "routing and
//! trust policy stay with the host, which decides who may talk to whom").
//!
//! Sessions join a bus under their id ([`crate::Session::join`]). A hook
//! posts with `post-message(to, text)`; the bus checks the
//! [`RoutingPolicy`] (the manifest's `[routing]`: who may post to whom,
//! default nobody) and the target, then:
//! - the target has a turn in flight: the text goes into that run's
//!   injection queue, so it is delivered at its next turn boundary, or
//!   reported undelivered, or attached to its error (the injection contract);
//! - the target is idle: the text waits in its inbox and is delivered at the
//!   first boundary of the target's next turn.
//!
//! Each post gets a [`MessageId`]; [`MessageBus::delivery`] tells its
//! [`Delivery`] as it moves on, and the sender's run record lists every
//! post with its outcome at posting time. Bounds: a message is at most
//! [`MAX_MESSAGE_BYTES`], an inbox holds at most [`MAX_INBOX`] messages,
//! and the bus remembers the outcome of the last [`MAX_OUTCOMES`] messages.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::handle::{RunHandle, WeakRunHandle};

/// The longest message (bytes).
pub const MAX_MESSAGE_BYTES: usize = 256 << 10;
/// The most messages waiting for one session: in its inbox, or put into its
/// turn in flight and not yet settled.
pub const MAX_INBOX: usize = 1_000;
/// How many messages' outcomes the bus remembers.
pub const MAX_OUTCOMES: usize = 10_000;

/// One route the policy allows: `from` may post to `to`; `"*"` matches any session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// The sending session's id, or `*`.
    pub from: String,
    /// The target session's id, or `*`.
    pub to: String,
}

/// Who may post to whom (the manifest's `[routing]` table). Default: nobody.
///
/// ```toml
/// [[routing.allow]]
/// from = "*"
/// to = "main"      # every sub-agent may report to main
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RoutingPolicy {
    /// The routes allowed; any other post is refused.
    pub allow: Vec<Route>,
}

impl RoutingPolicy {
    /// Whether `from` may post to `to` (never to itself).
    pub fn allows(&self, from: &str, to: &str) -> bool {
        let matches = |pattern: &str, name: &str| pattern == "*" || pattern == name;
        from != to && self.allow.iter().any(|r| matches(&r.from, from) && matches(&r.to, to))
    }
}

/// A posted message's id, unique within its bus.
pub type MessageId = u64;

/// Where a posted message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Waiting in the idle target's inbox for its next turn.
    Queued,
    /// In the target's turn in flight, waiting for a turn boundary.
    Sent,
    /// The target's model saw it (in the turn's `injected_messages`).
    Delivered,
    /// The target's turn ended before a boundary (in its `undelivered_injections`).
    Undelivered,
    /// The target's turn raised with it still queued (attached to the error).
    AttachedToError,
}

/// Why a post was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The routing policy has no route from the sender to the target.
    #[error("the routing policy does not let session `{from}` post to `{to}`")]
    NotAllowed {
        /// The sender.
        from: String,
        /// The target.
        to: String,
    },
    /// No session of that id has joined the bus.
    #[error("no session `{0}` is on the message bus")]
    UnknownSession(String),
    /// [`MAX_INBOX`] messages already wait for the target.
    #[error("session `{0}`'s inbox is full ({MAX_INBOX} messages wait)")]
    InboxFull(String),
    /// Blank text, or text over [`MAX_MESSAGE_BYTES`].
    #[error("{0}")]
    Invalid(String),
    /// The sender's run is on no bus.
    #[error("this session is on no message bus: nothing can be posted")]
    NoBus,
}

#[derive(Debug, Default)]
struct Mailbox {
    /// The session's turn in flight (a reference that keeps no run alive).
    run: Option<WeakRunHandle>,
    /// Waiting for the next turn.
    queued: VecDeque<(MessageId, String)>,
    /// Put into the turn in flight; settled when it ends.
    sent: Vec<(MessageId, String)>,
}

#[derive(Debug, Default)]
struct BusState {
    sessions: HashMap<String, Mailbox>,
    outcomes: BTreeMap<MessageId, Delivery>,
    next: MessageId,
}

/// The host's message bus between sessions (see the module docs).
#[derive(Debug, Default)]
pub struct MessageBus {
    policy: RoutingPolicy,
    state: Mutex<BusState>,
}

impl MessageBus {
    /// A bus that routes under `policy`.
    pub fn new(policy: RoutingPolicy) -> Arc<Self> {
        Arc::new(MessageBus { policy, state: Mutex::new(BusState::default()) })
    }

    fn state(&self) -> MutexGuard<'_, BusState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets session `id` receive messages (a session joining twice is one mailbox).
    pub fn register(&self, id: &str) {
        self.state().sessions.entry(id.to_string()).or_default();
    }

    /// Posts `text` from session `from` to session `to`.
    ///
    /// Errors: [`RouteError`]: the policy forbids it, `to` is not on the bus,
    /// its inbox is full, or the text is blank or too long.
    pub fn post(&self, from: &str, to: &str, text: impl Into<String>) -> Result<MessageId, RouteError> {
        let text = text.into();
        if text.trim().is_empty() {
            return Err(RouteError::Invalid("the message is empty".into()));
        }
        if text.len() > MAX_MESSAGE_BYTES {
            return Err(RouteError::Invalid(format!(
                "the message is {} bytes, over the limit of {MAX_MESSAGE_BYTES}",
                text.len()
            )));
        }
        if !self.policy.allows(from, to) {
            return Err(RouteError::NotAllowed { from: from.to_string(), to: to.to_string() });
        }
        let mut state = self.state();
        let id = state.next;
        let Some(mailbox) = state.sessions.get_mut(to) else {
            return Err(RouteError::UnknownSession(to.to_string()));
        };
        // A turn in flight takes it into its queue; otherwise (or if that turn just ended) the inbox.
        // Both count toward the inbox cap: a flood into a running turn is bounded too.
        if mailbox.queued.len() + mailbox.sent.len() >= MAX_INBOX {
            return Err(RouteError::InboxFull(to.to_string()));
        }
        let delivery = match mailbox.run.as_ref().map(|run| run.inject(text.clone())) {
            Some(Ok(())) => {
                mailbox.sent.push((id, text));
                Delivery::Sent
            }
            Some(Err(_)) | None => {
                mailbox.queued.push_back((id, text));
                Delivery::Queued
            }
        };
        state.next += 1;
        state.outcomes.insert(id, delivery);
        while state.outcomes.len() > MAX_OUTCOMES {
            state.outcomes.pop_first();
        }
        Ok(id)
    }

    /// Where message `id` is; `None` for an id this bus never gave or no longer remembers.
    pub fn delivery(&self, id: MessageId) -> Option<Delivery> {
        self.state().outcomes.get(&id).copied()
    }

    /// How many messages wait in session `id`'s inbox.
    pub fn queued(&self, id: &str) -> usize {
        self.state().sessions.get(id).map_or(0, |m| m.queued.len())
    }

    /// A turn of session `id` starts on `handle`: messages waiting in its
    /// inbox go into the turn's queue (delivered at its first boundary), and
    /// later posts go there directly until [`MessageBus::settle`].
    pub(crate) fn attach(&self, id: &str, handle: &RunHandle) {
        let mut state = self.state();
        let BusState { sessions, outcomes, .. } = &mut *state;
        let Some(mailbox) = sessions.get_mut(id) else { return };
        let weak = handle.downgrade();
        while let Some((msg, text)) = mailbox.queued.pop_front() {
            match weak.inject(text.clone()) {
                Ok(()) => {
                    outcomes.insert(msg, Delivery::Sent);
                    mailbox.sent.push((msg, text));
                }
                Err(_) => {
                    mailbox.queued.push_front((msg, text));
                    break;
                }
            }
        }
        mailbox.run = Some(weak);
    }

    /// The turn of session `id` ended having delivered `injected` and left
    /// `undelivered` (`raised`: it raised an error, and those were attached
    /// to it): each message put into it that the turn delivered or reported
    /// undelivered is settled by the injection contract's three outcomes;
    /// one still queued (a follow-up turn will take it) stays `sent`. Later
    /// posts wait in the inbox until the next [`MessageBus::attach`].
    pub(crate) fn settle(&self, id: &str, injected: &[String], undelivered: &[String], raised: bool) {
        let mut state = self.state();
        let BusState { sessions, outcomes, .. } = &mut *state;
        let Some(mailbox) = sessions.get_mut(id) else { return };
        mailbox.run = None;
        let mut delivered: Vec<&str> = injected.iter().map(String::as_str).collect();
        let mut left: Vec<&str> = undelivered.iter().map(String::as_str).collect();
        let take = |list: &mut Vec<&str>, text: &str| match list.iter().position(|d| *d == text) {
            Some(at) => {
                list.remove(at);
                true
            }
            None => false,
        };
        let mut pending = Vec::new();
        for (msg, text) in mailbox.sent.drain(..) {
            let outcome = if take(&mut delivered, &text) {
                Delivery::Delivered
            } else if take(&mut left, &text) {
                if raised { Delivery::AttachedToError } else { Delivery::Undelivered }
            } else {
                pending.push((msg, text));
                continue;
            };
            outcomes.insert(msg, outcome);
        }
        mailbox.sent = pending;
    }
}

/// One `post-message` of a run, in its record's `posts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PostRecord {
    /// The plugin that posted.
    pub plugin: String,
    /// The event it posted at.
    pub event: String,
    /// The target session.
    pub to: String,
    /// The message's id on the bus (none when refused); follow it with [`MessageBus::delivery`].
    pub message_id: Option<MessageId>,
    /// Where it was right after posting (`queued` or `sent`); none when refused.
    pub delivery: Option<Delivery>,
    /// Why it was refused, if it was.
    pub refused: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posts_into_a_running_turn_count_toward_the_inbox_cap() {
        let policy = RoutingPolicy { allow: vec![Route { from: "a".into(), to: "b".into() }] };
        let bus = MessageBus::new(policy);
        bus.register("b");
        let handle = RunHandle::new();
        bus.attach("b", &handle);
        for _ in 0..MAX_INBOX {
            let id = bus.post("a", "b", "x").expect("room");
            assert_eq!(bus.delivery(id), Some(Delivery::Sent));
        }
        assert_eq!(bus.post("a", "b", "x"), Err(RouteError::InboxFull("b".into())));
        // Settled messages free their places.
        bus.settle("b", &vec!["x".to_string(); MAX_INBOX], &[], false);
        assert!(bus.post("a", "b", "x").is_ok());
    }
}
