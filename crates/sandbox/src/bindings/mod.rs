//! Host bindings: one module per frozen version of the `hookbox:hooks` WIT
//! package, each generated from its copy in `wit/frozen/` (never from the
//! live `wit/hook.wit`), and [`pick`], the one place that decides which of
//! them a component gets.
//!
//! | version | frozen WIT | bindings |
//! |---|---|---|
//! | 0.1.0 | `wit/frozen/hookbox-hooks@0.1.0/` | [`v0_1_0`] |
//! | 0.2.0 | `wit/frozen/hookbox-hooks@0.2.0/` | [`v0_2_0`] |
//!
//! A component declares its version in the names it imports and exports:
//! every `hookbox:hooks/<interface>@<version>` name. A component built
//! against the world `hook` with wit-bindgen 0.61, componentize-py or
//! `wit-bindgen c` imports `hookbox:hooks/types@0.1.0` (the world's
//! `use types.{event, directive}`: the types of its `on-event` export) and,
//! when it calls the host, `hookbox:hooks/host@0.1.0`; its `on-event` export
//! is a plain function name without a version. [`pick`] reads those names;
//! the picked module's `HookPre::new` then type-checks the `on-event` export
//! against that version's types (`crate::instance` holds a component's
//! bindings of its version, so the rest of the crate calls `on-event`
//! without matching on versions). How a version is frozen and added:
//! `wit/README.md`.

pub(crate) mod v0_1_0;
pub(crate) mod v0_2_0;

use std::fmt;

/// The WIT package every hook world belongs to.
pub const PACKAGE: &str = "hookbox:hooks";

/// The `hookbox:hooks` versions this host runs, oldest first. Each has a
/// frozen copy under `wit/frozen/hookbox-hooks@<version>/` and a bindings
/// module; a component declaring any other version is refused at load.
pub const SUPPORTED_WIT_VERSIONS: &[&str] = &[v0_1_0::VERSION, v0_2_0::VERSION];

/// The newest version this host runs (the last of [`SUPPORTED_WIT_VERSIONS`]).
pub const WIT_VERSION: &str = v0_2_0::VERSION;

/// The world of the newest version this host runs ([`WIT_VERSION`]).
pub const WORLD: &str = "hookbox:hooks/hook@0.2.0";

/// A frozen version of `hookbox:hooks` that this host runs, as [`pick`]
/// found it in a component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WitVersion {
    /// `hookbox:hooks@0.1.0`, bound by `bindings::v0_1_0`.
    V0_1_0,
    /// `hookbox:hooks@0.2.0`, bound by `bindings::v0_2_0`: adds the event
    /// context, three directives and five event fields.
    V0_2_0,
}

impl WitVersion {
    /// Every supported version, oldest first (the same list as [`SUPPORTED_WIT_VERSIONS`]).
    pub const ALL: &'static [WitVersion] = &[WitVersion::V0_1_0, WitVersion::V0_2_0];

    /// The version number, e.g. `0.1.0`.
    pub fn as_str(self) -> &'static str {
        match self {
            WitVersion::V0_1_0 => v0_1_0::VERSION,
            WitVersion::V0_2_0 => v0_2_0::VERSION,
        }
    }

    /// The world a component of this version targets, e.g. `hookbox:hooks/hook@0.1.0`.
    pub fn world(self) -> String {
        format!("{PACKAGE}/hook@{}", self.as_str())
    }

    /// The supported version numbered `version` exactly (no semver matching:
    /// `0.1.1` is not `0.1.0`).
    pub fn parse(version: &str) -> Option<WitVersion> {
        WitVersion::ALL.iter().copied().find(|v| v.as_str() == version)
    }
}

impl fmt::Display for WitVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why [`pick`] found no supported version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PickError {
    /// No import or export is named `hookbox:hooks/…`.
    NoEvidence,
    /// Exactly one version is declared, and it is not supported
    /// (`unversioned` for names without `@version`).
    Unsupported(String),
    /// Several versions are declared (sorted, deduplicated).
    Mixed(Vec<String>),
}

/// What `unversioned` `hookbox:hooks/…` names (no `@version`) count as.
const UNVERSIONED: &str = "unversioned";

/// The version a name of the `hookbox:hooks` package declares
/// (`hookbox:hooks/types@0.1.0` → `0.1.0`, `hookbox:hooks/types` →
/// `unversioned`); `None` for names of other packages and plain names
/// such as `on-event`.
fn declared(name: &str) -> Option<&str> {
    let (package, rest) = name.split_once('/')?;
    if package != PACKAGE {
        return None;
    }
    Some(rest.split_once('@').map_or(UNVERSIONED, |(_, version)| version))
}

/// The version a component declares, from the names it imports and exports
/// (top-level names, e.g. `hookbox:hooks/types@0.1.0`, `wasi:cli/stdout@0.2.6`,
/// `on-event`). Every `hookbox:hooks/…` name must carry the same version, and
/// that version must be one of [`SUPPORTED_WIT_VERSIONS`], exactly.
///
/// Errors: [`PickError::NoEvidence`] when no name is of the `hookbox:hooks`
/// package, [`PickError::Mixed`] when they disagree, [`PickError::Unsupported`]
/// for any other version (higher or lower).
pub(crate) fn pick<'a>(
    imports: impl IntoIterator<Item = &'a str>,
    exports: impl IntoIterator<Item = &'a str>,
) -> Result<WitVersion, PickError> {
    let mut found: Vec<&str> = imports.into_iter().chain(exports).filter_map(declared).collect();
    found.sort_unstable();
    found.dedup();
    match found.as_slice() {
        [] => Err(PickError::NoEvidence),
        [one] => WitVersion::parse(one).ok_or_else(|| PickError::Unsupported((*one).to_string())),
        many => Err(PickError::Mixed(many.iter().map(|v| (*v).to_string()).collect())),
    }
}

/// [`SUPPORTED_WIT_VERSIONS`] as owned strings, for errors.
pub(crate) fn supported() -> Vec<String> {
    SUPPORTED_WIT_VERSIONS.iter().map(|v| (*v).to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names a wit-bindgen 0.61 component of world `hook@0.1.0` imports
    /// and exports (`wasm-tools component wit noop.wasm`), WASI trimmed.
    const NOOP_IMPORTS: &[&str] =
        &["hookbox:hooks/host@0.1.0", "hookbox:hooks/types@0.1.0", "wasi:io/streams@0.2.6", "wasi:cli/stdout@0.2.6"];

    #[test]
    fn a_0_1_0_component_gets_the_0_1_0_bindings() {
        assert_eq!(pick(NOOP_IMPORTS.iter().copied(), ["on-event"]), Ok(WitVersion::V0_1_0));
        // A hook that never calls the host still imports the types of `on-event`.
        assert_eq!(pick(["hookbox:hooks/types@0.1.0"], ["on-event"]), Ok(WitVersion::V0_1_0));
        // Evidence in the exports counts too (a world exporting an interface).
        assert_eq!(pick([], ["hookbox:hooks/handler@0.1.0"]), Ok(WitVersion::V0_1_0));
    }

    #[test]
    fn a_0_2_0_component_gets_the_0_2_0_bindings() {
        assert_eq!(
            pick(["hookbox:hooks/host@0.2.0", "hookbox:hooks/types@0.2.0"], ["on-event"]),
            Ok(WitVersion::V0_2_0)
        );
        assert_eq!(WitVersion::parse("0.2.0").map(WitVersion::world).as_deref(), Some("hookbox:hooks/hook@0.2.0"));
    }

    #[test]
    fn other_versions_are_refused_naming_what_was_found() {
        for version in ["0.9.0", "0.0.9", "0.1.1", "0.2.1", "0.3.0", "1.0.0", "0.1.0-rc.1"] {
            let name = format!("hookbox:hooks/types@{version}");
            assert_eq!(pick([name.as_str()], ["on-event"]), Err(PickError::Unsupported(version.to_string())));
        }
        assert_eq!(pick(["hookbox:hooks/types"], ["on-event"]), Err(PickError::Unsupported(UNVERSIONED.into())));
    }

    #[test]
    fn mixed_versions_are_refused() {
        assert_eq!(
            pick(["hookbox:hooks/types@0.9.0", "hookbox:hooks/host@0.1.0"], ["on-event"]),
            Err(PickError::Mixed(vec!["0.1.0".into(), "0.9.0".into()]))
        );
        assert_eq!(
            pick(["hookbox:hooks/types@0.1.0"], ["hookbox:hooks/handler@0.2.0"]),
            Err(PickError::Mixed(vec!["0.1.0".into(), "0.2.0".into()]))
        );
        assert_eq!(
            pick(["hookbox:hooks/types@0.2.0", "hookbox:hooks/host@0.1.0"], ["on-event"]),
            Err(PickError::Mixed(vec!["0.1.0".into(), "0.2.0".into()]))
        );
    }

    #[test]
    fn no_hookbox_name_is_no_evidence() {
        assert_eq!(pick([], ["on-event"]), Err(PickError::NoEvidence));
        // Look-alike packages are not `hookbox:hooks`.
        let others = ["wasi:cli/stdout@0.2.6", "hookbox:hooksx/types@0.1.0", "test:hookbox:hooks/types@0.1.0"];
        assert_eq!(pick(others, ["on-event", "greet"]), Err(PickError::NoEvidence));
    }

    #[test]
    fn the_version_lists_agree() {
        let all: Vec<&str> = WitVersion::ALL.iter().map(|v| v.as_str()).collect();
        assert_eq!(all, SUPPORTED_WIT_VERSIONS);
        assert_eq!(SUPPORTED_WIT_VERSIONS.last(), Some(&WIT_VERSION));
        assert_eq!(WitVersion::parse(WIT_VERSION).map(WitVersion::world).as_deref(), Some(WORLD));
    }
}
