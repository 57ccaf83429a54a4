//! A shadow comparison as stored: a candidate plugin version run beside
//! the active one on a live event, with both directives and the fuel and
//! time deltas (`GET /v1/plugins/{name}/shadow`).

use serde::{Deserialize, Serialize};

/// One shadow comparison.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ShadowRecord {
    /// The shadow version.
    pub version: i64,
    /// The event's kind.
    pub event: String,
    /// The active version's directive (`continue`, `skip-tool`, ...), or `failed:KIND`.
    pub active: String,
    /// The shadow version's.
    pub shadow: String,
    /// True when both decided the same action and value.
    pub agree: bool,
    /// The shadow's failure message, if it failed.
    pub failure: Option<String>,
    /// Shadow fuel minus active fuel.
    pub fuel_delta: i64,
    /// Shadow time minus active time, in µs.
    pub time_delta_us: i64,
    /// When, Unix seconds.
    pub at: i64,
}
