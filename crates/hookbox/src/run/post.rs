//! A hook's `post-message` in a run: sent through the session's message
//! bus (or refused), recorded in the run's `posts`, and a refused post's
//! directive record marked as not honoured.

use hookbox_contract::{Directive, EventKind};

use super::Run;
use crate::routing::{PostRecord, RouteError};

impl Run<'_> {
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
