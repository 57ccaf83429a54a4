//! What a dispatch leaves besides its decision: injections queued, the
//! trace kept in the run's record, and each hook's `post-message` sent
//! through the session's message bus (or refused), recorded in the run's
//! `posts`, a refused post's directive record marked as not honoured.

use hookbox_contract::{Directive, EventKind};
use hookbox_sandbox::{Decision, DispatchTrace};

use super::Run;
use crate::routing::{PostRecord, RouteError};

impl Run<'_> {
    /// Applies the effects of a dispatch at `kind` that every caller shares:
    /// injections are queued (those of calls collected detached first: they
    /// were made at earlier events), `trace` joins the record, then posts are
    /// sent (a detached call's post names the event it was made at; a refused
    /// post's directive record must already be in the record to say so).
    pub(super) fn take_effects(&mut self, kind: EventKind, mut trace: DispatchTrace, decision: &Decision) {
        for text in trace.injections.drain(..).chain(decision.injections.iter().cloned()) {
            self.handle.push_injection(text);
        }
        let mut posts: Vec<_> = trace.posts.drain(..).collect();
        posts.extend(decision.posts.iter().map(|(p, to, text)| (p.clone(), kind, to.clone(), text.clone())));
        self.keep(trace);
        for (plugin, event, to, text) in posts {
            self.post(plugin, event, to, text);
        }
    }

    /// A hook's `post-message`: through the session's bus, recorded either way.
    pub(super) fn post(&mut self, plugin: String, kind: EventKind, to: String, text: String) {
        let posted = match &self.bus {
            Some(bus) => bus.post(&self.session_id, &to, text),
            None => Err(RouteError::NoBus),
        };
        if let Err(e) = &posted {
            tracing::warn!(plugin = %plugin, "post-message to `{to}` refused: {e}");
        }
        let (message_id, refused) = match posted {
            Ok(id) => (Some(id), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let delivery = message_id.and_then(|id| self.bus.as_ref().and_then(|b| b.delivery(id)));
        if let Some(why) = &refused {
            // The directive was valid, but nothing was sent: its record says so.
            let event = kind.to_string();
            if let Some(d) = self.rec.directives.iter_mut().rev().find(|d| {
                d.plugin == plugin
                    && d.event == event
                    && d.honoured
                    && matches!(&d.directive, Directive::PostMessage { to: t, .. } if *t == to)
            }) {
                d.honoured = false;
                d.note = Some(format!("refused: {why}"));
            }
        }
        self.rec.posts.push(PostRecord { plugin, event: kind.to_string(), to, message_id, delivery, refused });
    }
}
