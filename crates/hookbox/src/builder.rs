//! [`AgentBuilder`]: the one correct way to assemble a runnable agent from a
//! [`Manifest`]: runtime → plugins (in order, names distinct, each
//! validated and compiled) → hooks → chain → agent. The CLI, the tests, the
//! benches and embedders all use it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), hookbox::Error> {
//! use std::sync::Arc;
//! use hookbox::{AgentBuilder, Manifest, Workspace, workspace_tools};
//!
//! let manifest = Manifest::load("hookbox.toml".as_ref())?;
//! let provider = hookbox::providers::model_from_spec("replay:session.json", None)?;
//! let assembled = AgentBuilder::new(manifest)
//!     .provider(provider)
//!     .tools(workspace_tools(Arc::new(Workspace::open("work")?)))
//!     .build()?;
//! let mut chain = assembled.chain(); // fresh hooks for one run
//! let result = assembled.agent().run("Tidy up", &mut chain).await;
//! # let _ = result; Ok(()) }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use hookbox_providers::ModelProvider;
use hookbox_sandbox::{EventKind, HookChain, HookHandler, HookRuntime, LoadError, StateStore, WasmPlugin};

use crate::agent::Agent;
use crate::config::{Manifest, PluginEntry};
use crate::error::Error;
use crate::journal::RunJournal;
use crate::tools::Tool;

/// Where compiled components are cached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CachePolicy {
    /// [`default_cache_dir`]: `HOOKBOX_CACHE_DIR`, else the user's cache folder.
    #[default]
    Default,
    /// This directory.
    Dir(PathBuf),
    /// No cache: every load compiles.
    Off,
}

/// The directory Hookbox uses for its component cache: `HOOKBOX_CACHE_DIR`
/// (`off` turns the cache off), else `$XDG_CACHE_HOME/hookbox/components`,
/// else `$HOME/.cache/hookbox/components`; `None` when off or no home is known.
pub fn default_cache_dir() -> Option<PathBuf> {
    match std::env::var_os("HOOKBOX_CACHE_DIR") {
        Some(v) if v == "off" => None,
        Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|base| base.join("hookbox").join("components")),
    }
}

/// Where sessions are kept by default (their conversations and hook state,
/// `hookbox.db` inside): `$HOOKBOX_DATA_DIR`, else `$XDG_DATA_HOME/hookbox`,
/// else `~/.local/share/hookbox`; `None` when none of them is set.
pub fn default_data_dir() -> Option<PathBuf> {
    match std::env::var_os("HOOKBOX_DATA_DIR") {
        Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => std::env::var_os("XDG_DATA_HOME")
            .filter(|v| !v.is_empty())
            .map(|v| PathBuf::from(v).join("hookbox"))
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share/hookbox"))),
    }
}

/// Builds the hook runtime a manifest asks for (`[runtime]`), with the
/// component cache of `cache` and hook state in `state` (in memory when
/// `None`).
///
/// Errors: [`Error::Config`] when the pool is smaller than the manifest's
/// plugins (a run holds one instance per plugin); [`Error::Load`] when the
/// engine cannot be created.
pub fn runtime_for(
    manifest: &Manifest,
    cache: &CachePolicy,
    state: Option<Arc<dyn StateStore>>,
) -> Result<HookRuntime, Error> {
    let r = manifest.runtime;
    let plugins = manifest.plugins.len();
    if r.pooling && r.max_instances > 0 && plugins > r.max_instances as usize {
        return Err(Error::Invalid(format!(
            "[runtime] max_instances = {} is below this run's {plugins} plugins: a run holds one instance per plugin",
            r.max_instances
        )));
    }
    let dir = match cache {
        CachePolicy::Default => default_cache_dir(),
        CachePolicy::Dir(dir) => Some(dir.clone()),
        CachePolicy::Off => None,
    };
    let mut builder = HookRuntime::builder().options(r).cache_dir(dir);
    if let Some(state) = state {
        builder = builder.state_store(state);
    }
    Ok(builder.build()?)
}

/// Names where plugin `i` of the manifest came from, for error messages.
type SourceNamer = Box<dyn Fn(usize, &PluginEntry) -> String + Send + Sync>;

/// Assembles an [`Agent`] and its plugins from a [`Manifest`] (see the module docs).
pub struct AgentBuilder {
    manifest: Manifest,
    provider: Option<Arc<dyn ModelProvider>>,
    tools: Vec<Arc<dyn Tool>>,
    runtime: Option<HookRuntime>,
    cache: CachePolicy,
    state: Option<Arc<dyn StateStore>>,
    journal: Option<Arc<RunJournal>>,
    source: Option<SourceNamer>,
}

impl AgentBuilder {
    /// Starts from `manifest`: its `[agent]` settings, `[runtime]` options and plugins.
    pub fn new(manifest: Manifest) -> Self {
        AgentBuilder {
            manifest,
            provider: None,
            tools: Vec::new(),
            runtime: None,
            cache: CachePolicy::Default,
            state: None,
            journal: None,
            source: None,
        }
    }

    /// The model provider (required).
    pub fn provider(mut self, provider: Arc<dyn ModelProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// The tools the model may call (default none).
    pub fn tools(mut self, tools: Vec<Arc<dyn Tool>>) -> Self {
        self.tools = tools;
        self
    }

    /// Uses this hook runtime instead of building one from `[runtime]` (share
    /// one runtime, and so one engine and instance pool, across agents).
    pub fn runtime(mut self, runtime: HookRuntime) -> Self {
        self.runtime = Some(runtime);
        self
    }

    /// Where compiled components are cached (default [`CachePolicy::Default`]);
    /// ignored with [`AgentBuilder::runtime`].
    pub fn cache(mut self, cache: CachePolicy) -> Self {
        self.cache = cache;
        self
    }

    /// Keeps hook state in `store` (default: in memory); ignored with [`AgentBuilder::runtime`].
    pub fn state_store(mut self, store: Arc<dyn StateStore>) -> Self {
        self.state = Some(store);
        self
    }

    /// Journals the runs (or replays them) through `journal`: the agent, the
    /// chain and every hook are given it.
    pub fn journal(mut self, journal: Arc<RunJournal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// How errors name plugin `i` of the manifest (default `plugins[i] (path)`).
    pub fn plugin_source(mut self, namer: impl Fn(usize, &PluginEntry) -> String + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(namer));
        self
    }

    /// Builds the runtime (unless one was given), loads every plugin in order
    /// and makes the agent.
    ///
    /// Errors: [`Error::Invalid`] for no provider, an out-of-range
    /// `max_attempts`, an empty `version`, an empty or repeated plugin name,
    /// or a pool smaller than the plugins; [`Error::Plugin`] for a plugin that
    /// cannot load, naming where it came from.
    pub fn build(self) -> Result<Assembled, Error> {
        let AgentBuilder { manifest, provider, tools, runtime, cache, state, journal, source } = self;
        let provider =
            provider.ok_or_else(|| Error::Invalid("no model provider: call AgentBuilder::provider".into()))?;
        if !(1..=20).contains(&manifest.agent.max_attempts) {
            return Err(Error::Invalid(format!(
                "[agent] max_attempts = {} must be between 1 and 20",
                manifest.agent.max_attempts
            )));
        }
        let runtime = match runtime {
            Some(runtime) => runtime,
            None => runtime_for(&manifest, &cache, state)?,
        };
        let (plugins, mut notes) = load_plugins(&manifest, &runtime, source.as_ref())?;
        notes.extend(subscription_notes(&manifest));
        let mut agent = Agent::new(provider, tools, manifest.agent.clone());
        if let Some(journal) = &journal {
            agent = agent.with_journal(journal.clone());
        }
        Ok(Assembled { agent, plugins, notes, journal, runtime, manifest })
    }
}

impl AgentBuilder {
    /// Loads only the manifest's plugins, with no provider or tools: for a
    /// host that dispatches events from someone else's agent loop
    /// (`hookbox hook`, the agents' http hooks). The provider, tools and
    /// journal given, if any, are not used.
    ///
    /// Errors: as [`AgentBuilder::build`], but for the provider.
    pub fn build_hooks(self) -> Result<HookSet, Error> {
        let AgentBuilder { manifest, runtime, cache, state, source, .. } = self;
        let runtime = match runtime {
            Some(runtime) => runtime,
            None => runtime_for(&manifest, &cache, state)?,
        };
        let (plugins, notes) = load_plugins(&manifest, &runtime, source.as_ref())?;
        Ok(HookSet { plugins, notes, runtime })
    }
}

/// Loads `manifest`'s plugins into `runtime`, in order: the plugins and the
/// runtime's and plugins' notes.
fn load_plugins(
    manifest: &Manifest,
    runtime: &HookRuntime,
    source: Option<&SourceNamer>,
) -> Result<(Vec<Arc<WasmPlugin>>, Vec<String>), Error> {
    let name_source = |i: usize, entry: &PluginEntry| match source {
        Some(namer) => namer(i, entry),
        None => format!("plugins[{i}] ({})", entry.path.display()),
    };
    if let Some(entry) = manifest.plugins.iter().find(|p| p.version.as_deref().is_some_and(|v| v.trim().is_empty())) {
        return Err(Error::Invalid(format!("plugin `{}`: `version` is empty", entry.display_name())));
    }
    let mut plugins = Vec::new();
    let mut notes: Vec<String> = runtime.notes().to_vec();
    let mut names = BTreeSet::new();
    for (i, entry) in manifest.plugins.iter().enumerate() {
        let name = entry.display_name();
        let source = name_source(i, entry);
        if name.trim().is_empty() {
            return Err(Error::Invalid(format!("{source}: the plugin name is empty")));
        }
        if !names.insert(name.clone()) {
            return Err(Error::Invalid(format!(
                "{source}: a second plugin is named `{name}`; give each plugin a distinct `name` in hookbox.toml so traces can tell them apart"
            )));
        }
        let loaded = runtime
            .load(&name, &entry.path, entry.config_strings(), entry.options())
            .map_err(|e| Error::Plugin { source_name: source, source: e })?;
        notes.extend(loaded.notes.into_iter().map(|n| format!("plugin `{name}`: {n}")));
        plugins.push(loaded.plugin);
    }
    Ok((plugins, notes))
}

/// What [`AgentBuilder::build_hooks`] loaded: the plugins, from which each
/// session gets a fresh chain ([`HookSet::chain_for`]).
pub struct HookSet {
    plugins: Vec<Arc<WasmPlugin>>,
    notes: Vec<String>,
    runtime: HookRuntime,
}

impl HookSet {
    /// The loaded plugins, in chain order.
    pub fn plugins(&self) -> &[Arc<WasmPlugin>] {
        &self.plugins
    }

    /// What was adjusted or will not work as configured, one sentence each.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The runtime the plugins were loaded into.
    pub fn runtime(&self) -> &HookRuntime {
        &self.runtime
    }

    /// A chain of fresh hooks whose state is kept under `session_id`.
    pub fn chain_for(&self, session_id: &str) -> HookChain {
        let hooks = self
            .plugins
            .iter()
            .map(|plugin| -> Box<dyn HookHandler> {
                let mut hook = plugin.hook();
                hook.run_started(session_id);
                Box::new(hook)
            })
            .collect();
        HookChain::new(hooks)
    }
}

/// Notes on subscriptions that can never fire in this configuration.
fn subscription_notes(manifest: &Manifest) -> Vec<String> {
    manifest
        .plugins
        .iter()
        .filter(|p| {
            !manifest.agent.emit_request_start
                && p.events.as_ref().is_some_and(|e| !e.is_empty() && e.iter().all(|k| *k == EventKind::RequestStart))
        })
        .map(|p| {
            format!(
                "plugin `{}` subscribes only to request-start, which fires only with [agent] emit_request_start = true: it will never be called",
                p.display_name()
            )
        })
        .collect()
}

/// What [`AgentBuilder::build`] assembled: the agent and its loaded plugins,
/// from which each run gets fresh hooks ([`Assembled::chain`]).
pub struct Assembled {
    agent: Agent,
    plugins: Vec<Arc<WasmPlugin>>,
    notes: Vec<String>,
    journal: Option<Arc<RunJournal>>,
    runtime: HookRuntime,
    manifest: Manifest,
}

impl Assembled {
    /// The agent.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// The agent, for a caller that keeps it (e.g. in an `Arc` for sessions).
    pub fn into_agent(self) -> Agent {
        self.agent
    }

    /// The loaded plugins, in chain order.
    pub fn plugins(&self) -> &[Arc<WasmPlugin>] {
        &self.plugins
    }

    /// The manifest the agent was built from (CLI flags applied).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The runtime the plugins were loaded into.
    pub fn runtime(&self) -> &HookRuntime {
        &self.runtime
    }

    /// What was adjusted or will not work as configured, one sentence each:
    /// the runtime's fallbacks, each plugin's load notes, subscriptions that
    /// can never fire.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Each plugin's BLAKE3 hash (lowercase hex) of its file as loaded, by name.
    pub fn hashes(&self) -> BTreeMap<String, String> {
        self.plugins.iter().map(|p| (p.name().to_string(), p.content_hash().to_string())).collect()
    }

    /// Fresh hooks for one run, in chain order (journaled when a journal was given).
    pub fn hooks(&self) -> Vec<Box<dyn HookHandler>> {
        self.plugins
            .iter()
            .map(|plugin| -> Box<dyn HookHandler> {
                let hook = plugin.hook();
                match &self.journal {
                    Some(journal) => Box::new(hook.with_host_env(journal.plugin(plugin.name()))),
                    None => Box::new(hook),
                }
            })
            .collect()
    }

    /// A chain of `hooks` (e.g. [`Assembled::hooks`], wrapped), writing its
    /// calls to the journal when one was given.
    pub fn chain_of(&self, hooks: Vec<Box<dyn HookHandler>>) -> HookChain {
        let chain = HookChain::new(hooks);
        match &self.journal {
            Some(journal) => chain.with_call_sink(journal.clone()),
            None => chain,
        }
    }

    /// A chain of fresh hooks for one run.
    pub fn chain(&self) -> HookChain {
        self.chain_of(self.hooks())
    }
}

impl From<LoadError> for Error {
    fn from(e: LoadError) -> Self {
        Error::Load(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PluginEntry;

    /// A provider that is never called: the builder only needs one to exist.
    struct Unused;

    #[async_trait::async_trait]
    impl ModelProvider for Unused {
        fn name(&self) -> &str {
            "unused"
        }
        fn model(&self) -> &str {
            "none"
        }
        async fn complete(
            &self,
            _request: &hookbox_providers::ModelRequest,
        ) -> Result<hookbox_providers::ModelResponse, hookbox_providers::ProviderError> {
            Err(hookbox_providers::ProviderError::Other("never called".into()))
        }
    }

    fn err(builder: AgentBuilder) -> String {
        match builder.build() {
            Ok(_) => panic!("the build should fail"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_builder_without_a_provider_or_with_bad_settings_is_refused_before_loading_anything() {
        assert!(err(AgentBuilder::new(Manifest::default())).contains("no model provider"));
        let mut m = Manifest::default();
        m.agent.max_attempts = 0;
        assert!(err(AgentBuilder::new(m).provider(Arc::new(Unused))).contains("max_attempts = 0"));
        // A pool smaller than the plugins: refused before any file is read.
        let mut m = Manifest::default();
        m.runtime.max_instances = 1;
        m.plugins = vec![PluginEntry::with_defaults("/nonexistent/a.wasm".into()); 2];
        let msg = err(AgentBuilder::new(m).provider(Arc::new(Unused)).cache(CachePolicy::Off));
        assert!(msg.contains("max_instances = 1 is below this run's 2 plugins"), "{msg}");
    }

    #[test]
    fn an_agent_without_plugins_builds_and_its_chain_is_empty() {
        let built = AgentBuilder::new(Manifest::default()).provider(Arc::new(Unused)).cache(CachePolicy::Off).build();
        let built = built.unwrap_or_else(|e| panic!("{e}"));
        assert!(built.chain().is_empty());
        assert!(built.hashes().is_empty());
        assert_eq!(built.agent().config().max_iterations, 20);
    }

    #[test]
    fn a_missing_plugin_names_where_it_came_from() {
        let m =
            Manifest { plugins: vec![PluginEntry::with_defaults("/nonexistent/a.wasm".into())], ..Manifest::default() };
        let msg = err(AgentBuilder::new(m)
            .provider(Arc::new(Unused))
            .cache(CachePolicy::Off)
            .plugin_source(|i, _| format!("test.toml (plugins[{i}])")));
        assert!(msg.starts_with("test.toml (plugins[0]): cannot read plugin /nonexistent/a.wasm"), "{msg}");
    }
}
