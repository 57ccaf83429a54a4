//! What a component targets and needs: its world, WIT version, imports
//! (each with the grant it needs) and exports, as `hookbox check` prints
//! them and a registry reports them.

use serde::Serialize;

use crate::options::ImportNeed;

/// One import of a component and what it needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportInfo {
    /// The import's name, e.g. `wasi:cli/stdout@0.2.6`.
    pub name: String,
    /// What it needs before the plugin may load.
    pub need: ImportNeed,
}

/// What `hookbox check` prints about a component.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComponentInfo {
    /// The world it targets, e.g. `hookbox:hooks/hook@0.1.0`.
    pub world: String,
    /// The WIT package version, e.g. `0.1.0`.
    pub version: String,
    /// Everything the component imports, with the grant each needs.
    pub imports: Vec<ImportInfo>,
    /// Everything it exports, by name.
    pub exports: Vec<String>,
}

impl ComponentInfo {
    /// The grants the component needs to load (`dirs`), deduplicated.
    pub fn grants_needed(&self) -> Vec<&'static str> {
        if self.imports.iter().any(|i| i.need == ImportNeed::Dirs) { vec!["dirs"] } else { Vec::new() }
    }
}
