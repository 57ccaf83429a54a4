//! Test fixture: a hook built against `hookbox:hooks@0.9.0`
//! (`wit/hook.wit` beside this crate: 0.1.0's types and world with the
//! version bumped and no `import host;`). It answers `continue` to every
//! event. A host that runs only 0.1.0 must refuse it at load, naming the
//! version found (0.9.0) and the versions it supports.

#![allow(unsafe_code, missing_docs)]

wit_bindgen::generate!({ world: "hook", path: "wit" });

struct FutureVersion;

impl Guest for FutureVersion {
    fn on_event(_event: Event) -> Directive {
        Directive::Continue
    }
}

export!(FutureVersion);
