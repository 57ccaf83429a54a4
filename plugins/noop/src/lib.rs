//! `noop`: a Hookbox benchmark fixture that answers `continue` to every event
//! without looking at it (it overrides `on_event`, so not even the SDK's
//! per-kind dispatch runs). It reads no config. What a call to it costs is
//! the host's dispatch plus the canonical ABI lifting of the event:
//! `bench/` uses it for the hook-calls-per-second figure (issue 7).

use hookbox_sdk::{Directive, Event, Hook, export_hook};

struct Noop;

impl Hook for Noop {
    fn new() -> Self {
        Noop
    }

    fn on_event(&mut self, _event: &Event) -> Directive {
        Directive::Continue
    }
}

export_hook!(Noop);
