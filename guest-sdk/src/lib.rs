//! Write Hookbox hooks in Rust.
//!
//! A hook is a WebAssembly component that the Hookbox host calls at every point
//! of an agent run with an [`Event`] and that answers with a [`Directive`]
//! (the WIT contract is `hookbox:hooks@0.1.0`, world `hook`). With this crate a
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
//! random numbers that replay the same ([`journaled`]), and [`event_name`] /
//! [`event_iteration`] to describe an event.
#![deny(missing_docs)]

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
    wit_bindgen::generate!({
        path: "../wit",
        world: "hook",
        additional_derives: [PartialEq],
        pub_export_macro: true,
        export_macro_name: "__export_hookbox_hook",
        default_bindings_module: "hookbox_sdk::bindings",
    });
}

pub use bindings::hookbox::hooks::host::LogLevel;
pub use bindings::hookbox::hooks::types::{
    ContentBlock, Directive, Event, FinalAnswer, FinishReason, IterationComplete, IterationStart, ModelResponse,
    RequestStart, RunEnd, RunStart, ToolCall, ToolCallEvent, ToolCallResult, Usage,
};
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
/// from event to event. Each event goes to [`Hook::on_event`].
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

            impl $crate::bindings::Guest for __HookboxGuest {
                fn on_event(event: $crate::Event) -> $crate::Directive {
                    $crate::__private::install_panic_hook();
                    __HOOKBOX_HOOK.with(|slot| {
                        let mut slot = slot.borrow_mut();
                        let hook = slot.get_or_insert_with(<$hook as $crate::Hook>::new);
                        $crate::Hook::on_event(hook, &event)
                    })
                }
            }

            // wit-bindgen's export macro takes an identifier, and the path to
            // the bindings so that it resolves from the hook's crate.
            $crate::bindings::__export_hookbox_hook! {
                __HookboxGuest with_types_in $crate::bindings
            }
        };
    };
}

/// Support for [`export_hook!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    use std::panic::{self, PanicHookInfo};
    use std::sync::Once;

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

#[cfg(test)]
mod tests;
