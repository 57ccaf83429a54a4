//! `hookbox serve`: Hookbox as a multi-tenant HTTP service. Tenants upload
//! hook plugins (WebAssembly components) into a per-tenant registry, start
//! agent runs and follow them as Server-Sent Events, answer approvals, and
//! ask their chain for a decision on one event from their own loop
//! (`/v1/evaluate`). Every request carries a tenant's key; a tenant sees
//! only its own objects (another tenant's are 404). Quotas per tenant keep
//! one tenant from starving the others. `docs/server.md` is the manual;
//! `/openapi.json` the generated reference.
//!
//! The pieces: [`ServerConfig`] (`server.toml`), [`Server::start`] (opens
//! the store under the data directory, builds the hook runtime, serves),
//! [`RunningServer`] (its address, the keys made at start, graceful
//! shutdown). Inside: `store` (the [`ServerStore`] trait, its SQLite
//! default and PostgreSQL, which several workers share), `auth` (keys to
//! tenants), `registry` (uploads, capability diffs), `hooks` (metering and
//! shadow), `runs` and `flush` (a run and how it is stored), `queue` (new runs a worker has no room for), `park`, `resume` and `durable` (runs that outlive their worker), `steer` (commands to a run on any worker), `evaluate`,
//! `metrics` and `routes`; [`pin_worker_threads`] for `pin_workers`. Dependencies run one way: this crate uses `hookbox`'s
//! public API only.

mod affinity;
mod agent_hooks;
mod auth;
mod checkpoint;
mod config;
mod durable;
mod error;
mod eval_cache;
mod evaluate;
mod fair;
mod fair_io;
mod flush;
mod hooks;
mod journal_parts;
mod keys;
mod live;
mod metrics;
mod minutes;
mod names;
mod park;
mod queue;
mod readiness;
mod registry;
mod resume;
mod room;
mod routes;
mod runs;
mod serve;
mod state;
mod steer;
mod store;
mod usage;
mod workspace;

pub use affinity::{PinnedCores, Pinning, pin_worker_threads};
pub use config::{DEFAULT_LISTEN, HttpLimits, Quotas, ServerConfig, TenantSeed};
pub use error::{ApiError, ErrorBody, ServerError};
pub use keys::{KeyHasher, OPERATOR_PREFIX, TENANT_PREFIX};
pub use registry::{CapabilityDiff, UploadManifest};
pub use routes::ApiDoc;
pub use serve::{IO_EVENT_INTERVAL, OPERATOR_KEY_ENV, RunningServer, Server};
pub use store::{
    Checkpointed, Claim, ClaimedRun, KeyInfo, NewVersion, ParkRow, PluginRow, PluginVersion, PostgresServerStore,
    PostgresSessionStore, Role, RunEventRow, RunRow, ServerStore, SessionStore, ShadowRecord, SqliteServerStore,
    StoreError, Tenant, VersionStatus,
};
