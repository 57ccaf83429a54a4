//! Host bindings generated from `wit/hook.wit` (world `hook`,
//! `hookbox:hooks@0.1.0`).
#![allow(missing_docs)]

wasmtime::component::bindgen!({
    world: "hook",
    path: "../../wit",
    // `sleep` waits without blocking the thread; everything else answers at once.
    imports: { "hookbox:hooks/host.sleep": async },
    exports: { default: async },
    // Events are lowered straight from borrowed strings: no copy per plugin per event.
    ownership: Borrowing { duplicate_if_necessary: true },
});

/// The WIT package version this host implements.
pub const WIT_VERSION: &str = "0.1.0";
/// The fully qualified world this host runs.
pub const WORLD: &str = "hookbox:hooks/hook@0.1.0";
