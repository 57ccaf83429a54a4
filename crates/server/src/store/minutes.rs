//! The shape of the shared per-minute counts of fuel and hook time
//! ([`ServerStore::add_minute_usage`]): one tenant's use of one minute on
//! every worker together, so that its `fuel_per_minute` and
//! `hook_ms_per_minute` quotas hold across workers (`crate::minutes`).

#[cfg(doc)]
use super::ServerStore;

/// One tenant's use of a minute: fuel, and hook time in µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinuteUsage {
    /// The tenant's id.
    pub tenant: i64,
    /// Fuel.
    pub fuel: i64,
    /// Hook time, in µs.
    pub hook_us: i64,
}

/// The most tenants whose counts one exchange reads back.
pub const MAX_MINUTE_TENANTS: i64 = 10_000;
