//! The chains `/v1/evaluate` keeps between calls, one per (tenant,
//! session, plugin list): the hooks of a session keep their instances from
//! one event to the next, as a run's do, so an evaluate call costs a hook
//! call rather than an instantiation. A kept chain holds its instances
//! against the tenant's `live_instances` quota; it is dropped when the
//! tenant's chain changes (an activation, a shadow), after
//! [`IDLE_TTL`] unused, when the cache is full ([`MAX_CHAINS`], least
//! recently used first), or when the tenant needs the instances for a run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hookbox::HookChain;

use crate::hooks::{Meter, PlanEntry};
use crate::usage::Slots;

/// How long an unused chain is kept.
pub const IDLE_TTL: Duration = Duration::from_secs(60);
/// The most chains kept across tenants.
pub const MAX_CHAINS: usize = 4096;

/// A kept chain: its hooks, the plan they were made from, the instance
/// slots it holds and its meter.
pub struct KeptChain {
    /// The chain.
    pub chain: HookChain,
    /// The plan it was made from (a different plan makes a new chain).
    pub plan: Arc<Vec<PlanEntry>>,
    /// Its meter.
    pub meter: Arc<Meter>,
    /// The instance slots it holds.
    pub _slots: Slots,
}

/// (tenant, session key, plugin list).
type Key = (i64, String, Option<Vec<String>>);

struct Entry {
    chain: Arc<tokio::sync::Mutex<Option<KeptChain>>>,
    last_used: Instant,
}

/// The kept chains.
#[derive(Default)]
pub struct EvalCache {
    entries: Mutex<HashMap<Key, Entry>>,
}

impl EvalCache {
    /// The slot of (tenant, session, plugins): a chain kept there, or `None`
    /// to fill. Lock it for the call: calls of one session run one at a time.
    pub fn slot(
        &self,
        tenant: i64,
        session: &str,
        plugins: Option<&[String]>,
    ) -> Arc<tokio::sync::Mutex<Option<KeptChain>>> {
        let mut map = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        let key = (tenant, session.to_string(), plugins.map(<[String]>::to_vec));
        if !map.contains_key(&key) && map.len() >= MAX_CHAINS {
            map.retain(|_, e| now.duration_since(e.last_used) < IDLE_TTL);
            if map.len() >= MAX_CHAINS {
                let oldest = map.iter().min_by_key(|(_, e)| e.last_used).map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    map.remove(&k);
                }
            }
        }
        let entry = map.entry(key).or_insert_with(|| Entry { chain: Arc::default(), last_used: now });
        entry.last_used = now;
        entry.chain.clone()
    }

    /// Drops `tenant`'s kept chains, giving their instances back once no
    /// call holds them.
    pub fn evict(&self, tenant: i64) {
        let mut map = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.retain(|k, _| k.0 != tenant);
    }

    /// Drops every chain unused for [`IDLE_TTL`].
    pub fn expire(&self) {
        let now = Instant::now();
        let mut map = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.retain(|_, e| now.duration_since(e.last_used) < IDLE_TTL);
    }
}
