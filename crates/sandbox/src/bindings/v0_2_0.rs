//! Host bindings of `hookbox:hooks@0.2.0`, world `hook`, generated from the
//! frozen copy `wit/frozen/hookbox-hooks@0.2.0/` (never edited, so what
//! 0.2.0 plugins get does not change when the live `wit/hook.wit` does).
#![allow(missing_docs)]

wasmtime::component::bindgen!({
    world: "hook",
    path: "../../wit/frozen/hookbox-hooks@0.2.0",
    // `sleep` waits without blocking the thread; everything else answers at once.
    imports: { "hookbox:hooks/host.sleep": async },
    exports: { default: async },
    // Events are lowered straight from borrowed strings: no copy per plugin per event.
    ownership: Borrowing { duplicate_if_necessary: true },
});

/// The version these bindings implement.
pub const VERSION: &str = "0.2.0";
