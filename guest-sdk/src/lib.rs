//! Write Hookbox hooks in Rust.
//!
//! A hook is a WebAssembly component that the Hookbox host calls at every point
//! of an agent run with an [`Event`] and that answers with a [`Directive`]
//! (the WIT contract is `hookbox:hooks@0.2.0`, world `hook`). With this crate a
//! hook is a type implementing [`Hook`], whose methods all default to
//! [`Directive::Continue`], registered with [`export_hook!`]:
//!
//! ```no_run
//! use hookbox_sdk::{Directive, Hook, ToolCallEvent, directive, export_hook};
//!
//! struct NoShell;
//!
//! impl Hook for NoShell {
//!     fn new() -> Self {
//!         NoShell
//!     }
//!
//!     fn before_tool_call(&mut self, event: &ToolCallEvent) -> Directive {
//!         if event.call.name == "shell" {
//!             directive::skip_tool("no-shell: the shell tool is not allowed")
//!         } else {
//!             Directive::Continue
//!         }
//!     }
//! }
//!
//! export_hook!(NoShell);
//! ```
//!
//! Build it as a `cdylib` for `wasm32-wasip2`; `hookbox-sdk` is the only
//! dependency a hook needs. Besides the trait and the macro the crate offers
//! the contract's types ([`Event`], [`Directive`] and the event records),
//! [`directive`] constructors, [`ToolCallExt`] to parse tool arguments, the
//! plugin's [`config`], the host's [`log`], its saved [`state`], time and
//! random numbers that replay the same ([`journaled`]), [`event_name`] /
//! [`event_iteration`] to describe an event, and [`context`]: where the
//! current event happens (run, session, turn, iteration, `max_iterations`,
//! retries so far).
//!
//! With the feature `wit-0-1-0` the crate builds against the frozen
//! `hookbox:hooks@0.1.0` instead (`wit/frozen/hookbox-hooks@0.1.0`): the same
//! API without what 0.2.0 added ([`context`], the `ask-approval`,
//! `skip-model-call` and `post-message` directives, the new event fields).
//! Hookbox keeps running 0.1.0 components; the feature exists so that one can
//! still be built, e.g. to keep old golden traces honest.
#![deny(missing_docs)]

#[cfg(not(feature = "wit-0-1-0"))]
mod context;
pub mod directive;
mod event;
mod hook;
mod tool_call;

pub mod config;
pub mod journaled;
pub mod log;
pub mod state;

/// The raw bindings that `wit-bindgen` generates from `wit/hook.wit`.
///
/// Hook authors rarely need them: the crate root re-exports the types, and
/// [`export_hook!`] implements [`bindings::Guest`] for a [`Hook`]. They are
/// public because the export macro refers to them from the hook's crate.
#[allow(missing_docs, unsafe_code)]
pub mod bindings {
    #[cfg(not(feature = "wit-0-1-0"))]
    wit_bindgen::generate!({
        path: "../wit",
        world: "hook",
        additional_derives: [PartialEq],
        pub_export_macro: true,
        export_macro_name: "__export_hookbox_hook",
        default_bindings_module: "hookbox_sdk::bindings",
    });
    #[cfg(feature = "wit-0-1-0")]
    wit_bindgen::generate!({
        path: "../wit/frozen/hookbox-hooks@0.1.0",
        world: "hook",
        additional_derives: [PartialEq],
        pub_export_macro: true,
        export_macro_name: "__export_hookbox_hook",
        default_bindings_module: "hookbox_sdk::bindings",
    });
}

/// The `hookbox:hooks` version this build of the crate targets (`0.2.0`, or
/// `0.1.0` with the feature `wit-0-1-0`).
#[cfg(not(feature = "wit-0-1-0"))]
pub const WIT_VERSION: &str = "0.2.0";
/// The `hookbox:hooks` version this build of the crate targets (`0.2.0`, or
/// `0.1.0` with the feature `wit-0-1-0`).
#[cfg(feature = "wit-0-1-0")]
pub const WIT_VERSION: &str = "0.1.0";

pub use bindings::hookbox::hooks::host::LogLevel;
pub use bindings::hookbox::hooks::types::{
    ContentBlock, Directive, Event, FinalAnswer, FinishReason, IterationComplete, IterationStart, ModelResponse,
    RequestStart, RunEnd, RunStart, ToolCall, ToolCallEvent, ToolCallResult, Usage,
};
#[cfg(not(feature = "wit-0-1-0"))]
pub use bindings::hookbox::hooks::types::{EventContext, Post};
#[cfg(not(feature = "wit-0-1-0"))]
pub use context::context;
pub use event::{
    EVENT_NAMES, content_text, directive_name, event_iteration, event_name, event_tool_name, finish_reason_name,
};
pub use hook::{Hook, dispatch};
/// The `serde_json` this crate uses, so that hooks need no direct dependency on it.
pub use serde_json;
pub use tool_call::ToolCallExt;

/// Registers a [`Hook`] as the component's `on-event` export.
///
/// Use it once per crate, at module level, with a type implementing [`Hook`]:
/// `export_hook!(MyHook);`. The instance is created with [`Hook::new`] on the
/// first event and kept for the life of the component instance (in a
/// thread-local, since a component is single-threaded), so fields persist
/// from event to event. Each event goes to [`Hook::on_event`]; its context is
/// what [`context()`] returns during the call.
///
/// A panic in the hook traps the component: the host records a hook failure
/// (and treats it as `continue`, or as `skip-tool` at a veto point when the
/// plugin is configured fail-closed). Before the first event the macro
/// installs a panic hook that also writes the panic's message and location
/// to the host log at error level (then runs the previous hook, which prints
/// to stderr), so the reason is not lost when the host discards stderr.
#[macro_export]
macro_rules! export_hook {
    ($hook:ty) => {
        const _: () = {
            struct __HookboxGuest;

            ::std::thread_local! {
                static __HOOKBOX_HOOK: ::core::cell::RefCell<::core::option::Option<$hook>> =
                    const { ::core::cell::RefCell::new(::core::option::Option::None) };
            }

            $crate::__hookbox_guest_impl!(__HookboxGuest, __HOOKBOX_HOOK, $hook);

            // wit-bindgen's export macro takes an identifier, and the path to
            // the bindings so that it resolves from the hook's crate.
            $crate::bindings::__export_hookbox_hook! {
                __HookboxGuest with_types_in $crate::bindings
            }
        };
    };
}

/// The `Guest` impl of [`export_hook!`] for 0.2.0: sets the event's context,
/// then calls the hook. Not part of the API.
#[cfg(not(feature = "wit-0-1-0"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __hookbox_guest_impl {
    ($guest:ident, $slot:ident, $hook:ty) => {
        impl $crate::bindings::Guest for $guest {
            fn on_event(event: $crate::Event, context: $crate::EventContext) -> $crate::Directive {
                $crate::__private::install_panic_hook();
                let _current = $crate::__private::set_context(context);
                $slot.with(|slot| {
                    let mut slot = slot.borrow_mut();
                    let hook = slot.get_or_insert_with(<$hook as $crate::Hook>::new);
                    $crate::Hook::on_event(hook, &event)
                })
            }
        }
    };
}

/// The `Guest` impl of [`export_hook!`] for 0.1.0 (no context). Not part of the API.
#[cfg(feature = "wit-0-1-0")]
#[doc(hidden)]
#[macro_export]
macro_rules! __hookbox_guest_impl {
    ($guest:ident, $slot:ident, $hook:ty) => {
        impl $crate::bindings::Guest for $guest {
            fn on_event(event: $crate::Event) -> $crate::Directive {
                $crate::__private::install_panic_hook();
                $slot.with(|slot| {
                    let mut slot = slot.borrow_mut();
                    let hook = slot.get_or_insert_with(<$hook as $crate::Hook>::new);
                    $crate::Hook::on_event(hook, &event)
                })
            }
        }
    };
}

/// Support for [`export_hook!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    use std::panic::{self, PanicHookInfo};
    use std::sync::Once;

    #[cfg(not(feature = "wit-0-1-0"))]
    pub use crate::context::set_context;

    /// Sends panic messages to the host log as well (once per instance).
    pub fn install_panic_hook() {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            let previous = panic::take_hook();
            panic::set_hook(Box::new(move |info| {
                crate::log::error(&panic_line(info));
                previous(info);
            }));
        });
    }

    /// `panic at FILE:LINE: MESSAGE` on one line.
    pub(crate) fn panic_line(info: &PanicHookInfo<'_>) -> String {
        let message = info.payload_as_str().unwrap_or("(non-string panic payload)");
        let message = message.replace('\n', " ");
        match info.location() {
            Some(at) => format!("panic at {}:{}: {message}", at.file(), at.line()),
            None => format!("panic: {message}"),
        }
    }
}

#[cfg(all(test, not(feature = "wit-0-1-0")))]
mod tests;
