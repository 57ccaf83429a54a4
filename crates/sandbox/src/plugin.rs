//! [`WasmPlugin`]: a loaded, validated plugin, compiled once and shared by
//! every run; it makes one [`WasmHook`] per run and the WASI context of each
//! instance from its grants.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hookbox_contract::EventKind;
use wasmtime::Engine;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use crate::bindings::WitVersion;
use crate::env::{EnvMonotonicClock, EnvRng, EnvWallClock, HostEnv};
use crate::instance::HookPre;
use crate::options::{DirMode, PluginOptions};
use crate::output::CappedPipe;
use crate::state::StateStore;

/// A loaded, validated plugin: compiled once, shared by every run.
pub struct WasmPlugin {
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    pub(crate) engine: Engine,
    /// The `hookbox:hooks` version the component declares, whose bindings `pre` is.
    pub(crate) version: WitVersion,
    /// Its imports resolved once, with the bindings of `version`.
    pub(crate) pre: HookPre,
    pub(crate) config: Arc<BTreeMap<String, String>>,
    pub(crate) options: PluginOptions,
    pub(crate) state: Arc<dyn StateStore>,
    /// Which events it is entered for, by [`EventKind::index`].
    pub(crate) subscribed: [bool; EventKind::COUNT],
    /// BLAKE3 hash of the component file as loaded, lowercase hex.
    pub(crate) hash: String,
    /// The world it targets and what it imports and exports.
    pub(crate) info: Arc<crate::info::ComponentInfo>,
}

impl WasmPlugin {
    /// BLAKE3 hash of the component file as it was loaded (lowercase hex,
    /// [`super::cache::content_hash`]).
    pub fn content_hash(&self) -> &str {
        &self.hash
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The component file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `hookbox:hooks` version the component declares, and so the
    /// bindings it is called through.
    pub fn wit_version(&self) -> WitVersion {
        self.version
    }

    /// The world and WIT version it targets and what it imports and
    /// exports (what `hookbox check` prints).
    pub fn info(&self) -> &crate::info::ComponentInfo {
        &self.info
    }

    /// Its options, as validated (memory rounded up to a page, `fail = auto` resolved).
    pub fn options(&self) -> &PluginOptions {
        &self.options
    }

    pub(crate) fn clone_for_trial(&self) -> WasmPlugin {
        WasmPlugin {
            name: self.name.clone(),
            path: self.path.clone(),
            engine: self.engine.clone(),
            version: self.version,
            pre: self.pre.clone(),
            config: self.config.clone(),
            options: self.options.clone(),
            state: self.state.clone(),
            subscribed: self.subscribed,
            hash: self.hash.clone(),
            info: self.info.clone(),
        }
    }

    pub(crate) fn wasi_ctx(
        &self,
        stdout: &CappedPipe,
        stderr: &CappedPipe,
        env: Option<&Arc<dyn HostEnv>>,
    ) -> Result<WasiCtx, String> {
        let mut b = WasiCtxBuilder::new();
        b.stdout(stdout.clone()).stderr(stderr.clone());
        if let Some(env) = env {
            // WASI's clocks and random numbers come from the run's environment too.
            b.wall_clock(EnvWallClock(env.clone()))
                .monotonic_clock(EnvMonotonicClock(env.clone()))
                .secure_random(EnvRng { env: env.clone(), insecure: false })
                .insecure_random(EnvRng { env: env.clone(), insecure: true })
                .insecure_random_seed(env.insecure_seed());
        }
        for name in &self.options.grants.env {
            if let Ok(value) = std::env::var(name) {
                b.env(name, value);
            }
        }
        for dir in &self.options.grants.dirs {
            let perms = match dir.mode {
                DirMode::ReadOnly => FsPerms::ReadOnly,
                DirMode::ReadWrite => FsPerms::ReadWrite,
            };
            b.preopened_dir(&dir.host, &dir.guest, perms)
                .map_err(|e| format!("cannot open granted dir {}: {e:#}", dir.host.display()))?;
        }
        Ok(b.build())
    }
}
