//! Replayed agent runs for the load test: the demo session on the replay
//! provider, the workspace tools on a scratch directory, and wrappers (all
//! through Hookbox's public traits) that time the provider, the tools and the
//! hooks of a run, or hold a run at its first model request.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::Context;
use async_trait::async_trait;
use hookbox::contract::{Event, EventContext};
use hookbox::providers::replay::ReplayProvider;
use hookbox::providers::{ModelProvider, ModelRequest, ModelResponse, ProviderError, ToolSpec};
use hookbox::sandbox::PluginOptions;
use hookbox::sandbox::{HookHandler, HookReply};
use hookbox::sandbox::{HookRuntime, WasmPlugin};
use hookbox::{Tool, ToolOutput, Workspace};
use serde_json::Value;

/// Nanoseconds spent in each part of one or more runs.
#[derive(Debug, Default)]
pub struct Counters {
    /// In `ModelProvider::complete` (the replay provider decoding a recorded response).
    pub provider_ns: AtomicU64,
    /// In `Tool::call`.
    pub tools_ns: AtomicU64,
    /// In `HookHandler::on_event`, all hooks.
    pub hooks_ns: AtomicU64,
}

fn add(counter: &AtomicU64, since: Instant) {
    let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
    counter.fetch_add(ns, Ordering::Relaxed);
}

/// Holds runs at their first model request until it is opened.
pub struct Gate {
    open: tokio::sync::watch::Receiver<bool>,
    arrived: Arc<AtomicUsize>,
}

impl Gate {
    /// A closed gate; send `true` on the returned sender to open it. The
    /// counter says how many runs are waiting (or went through).
    pub fn new() -> (tokio::sync::watch::Sender<bool>, Arc<AtomicUsize>, Gate) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let arrived = Arc::new(AtomicUsize::new(0));
        (tx, arrived.clone(), Gate { open: rx, arrived })
    }

    fn handle(&self) -> Gate {
        Gate { open: self.open.clone(), arrived: self.arrived.clone() }
    }
}

/// The replay provider, optionally timed and gated.
pub struct BenchProvider {
    inner: ReplayProvider,
    counters: Option<Arc<Counters>>,
    gate: Option<Gate>,
    passed: AtomicBool,
}

impl BenchProvider {
    /// Loads the session `file` (each run needs its own provider: replay plays in order).
    ///
    /// Errors: the file cannot be loaded.
    pub fn new(file: &Path, counters: Option<Arc<Counters>>, gate: Option<&Gate>) -> anyhow::Result<Self> {
        let inner = ReplayProvider::from_file(file).with_context(|| format!("replay session {}", file.display()))?;
        Ok(BenchProvider { inner, counters, gate: gate.map(Gate::handle), passed: AtomicBool::new(false) })
    }
}

#[async_trait]
impl ModelProvider for BenchProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        if let Some(gate) = &self.gate
            && !self.passed.swap(true, Ordering::Relaxed)
        {
            gate.arrived.fetch_add(1, Ordering::SeqCst);
            let mut open = gate.open.clone();
            // A dropped sender counts as open.
            let _ = open.wait_for(|o| *o).await;
        }
        let started = Instant::now();
        let response = self.inner.complete(request).await;
        if let Some(c) = &self.counters {
            add(&c.provider_ns, started);
        }
        response
    }
}

/// A tool timed into [`Counters::tools_ns`].
pub struct TimedTool {
    inner: Arc<dyn Tool>,
    counters: Arc<Counters>,
}

#[async_trait]
impl Tool for TimedTool {
    fn spec(&self) -> ToolSpec {
        self.inner.spec()
    }

    async fn call(&self, arguments: &Value) -> ToolOutput {
        let started = Instant::now();
        let out = self.inner.call(arguments).await;
        add(&self.counters.tools_ns, started);
        out
    }
}

/// Wraps `tools` so their time goes into `counters`.
pub fn timed_tools(tools: Vec<Arc<dyn Tool>>, counters: &Arc<Counters>) -> Vec<Arc<dyn Tool>> {
    tools.into_iter().map(|inner| Arc::new(TimedTool { inner, counters: counters.clone() }) as Arc<dyn Tool>).collect()
}

/// A hook timed into [`Counters::hooks_ns`]. Like every wrapper of a
/// [`HookHandler`], it forwards all of the trait's methods (a default left
/// in place would change the hook's subscriptions or session tracking).
pub struct TimedHook {
    inner: Box<dyn HookHandler>,
    counters: Arc<Counters>,
}

impl TimedHook {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn HookHandler>, counters: Arc<Counters>) -> Self {
        TimedHook { inner, counters }
    }
}

#[async_trait]
impl HookHandler for TimedHook {
    hookbox::sandbox::forward_hook_handler!(inner);

    async fn on_event(&mut self, event: &Event, context: &EventContext) -> HookReply {
        let started = Instant::now();
        let reply = self.inner.on_event(event, context).await;
        add(&self.counters.hooks_ns, started);
        reply
    }
}

/// A scratch workspace where every tool call of the demo session leaves the
/// directory as it was: `.env` is absent (the delete fails, when deny-tools
/// does not skip it) and `test.txt` exists (the create is refused). So runs
/// can share it and all do the same work.
///
/// Errors: the directory cannot be created.
pub fn scratch_workspace() -> anyhow::Result<(tempfile::TempDir, Arc<Workspace>)> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("README.md"), "# A scratch workspace for hookbox-bench\n")?;
    std::fs::write(dir.path().join("test.txt"), "")?;
    let ws = Workspace::open(dir.path())?;
    Ok((dir, Arc::new(ws)))
}

/// The config the load test gives each plugin: deny-tools denies `delete_file`; the others get none.
pub fn plugin_config(file: &str) -> BTreeMap<String, String> {
    if file == "deny_tools" { crate::deny_config() } else { BTreeMap::new() }
}

/// Loads each plugin file (`deny_tools`, `audit_log`, ...) from the Rust
/// plugins of `profile`, named `file-N` so copies can be loaded side by side.
///
/// Errors: a plugin does not load.
pub fn load_plugins(runtime: &HookRuntime, files: &[String], profile: &str) -> anyhow::Result<Vec<Arc<WasmPlugin>>> {
    files
        .iter()
        .enumerate()
        .map(|(i, file)| {
            let path = crate::plugin_path(file, profile);
            let hookbox::sandbox::LoadedPlugin { plugin, .. } = runtime
                .load(&format!("{file}-{i}"), &path, plugin_config(file), PluginOptions::default())
                .with_context(|| format!("loading {}", path.display()))?;
            Ok(plugin)
        })
        .collect()
}

/// Counts hooks whose first call succeeded (a live instance) or failed to instantiate.
#[derive(Debug, Default)]
pub struct LiveCounts {
    /// Hooks whose first call succeeded: their instance is alive.
    pub live: AtomicUsize,
    /// Hooks whose first call failed with `instantiate`.
    pub instantiate_failed: AtomicUsize,
}

/// A hook that reports its first call to [`LiveCounts`].
pub struct CountedHook {
    inner: Box<dyn HookHandler>,
    counts: Arc<LiveCounts>,
    seen: bool,
}

impl CountedHook {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn HookHandler>, counts: Arc<LiveCounts>) -> Self {
        CountedHook { inner, counts, seen: false }
    }
}

#[async_trait]
impl HookHandler for CountedHook {
    hookbox::sandbox::forward_hook_handler!(inner);

    async fn on_event(&mut self, event: &Event, context: &EventContext) -> HookReply {
        let reply = self.inner.on_event(event, context).await;
        if !self.seen {
            self.seen = true;
            match &reply.outcome {
                Ok(_) => self.counts.live.fetch_add(1, Ordering::SeqCst),
                Err(f) if f.kind == hookbox::sandbox::FailureKind::Instantiate => {
                    self.counts.instantiate_failed.fetch_add(1, Ordering::SeqCst)
                }
                Err(_) => 0,
            };
        }
        reply
    }
}
