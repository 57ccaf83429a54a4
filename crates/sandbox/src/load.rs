//! Loading a plugin: read (from a file or from bytes), check the header,
//! compile (or take from the cache), pick the WIT version the component
//! declares ([`crate::bindings::pick`]) and check its world, check imports
//! against grants, resolve imports once and try one instantiation.
//! [`ComponentInfo`] is what `hookbox check` reports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hookbox_contract::EventKind;
use wasmtime::component::Component;

use crate::bindings::{self, PickError, WORLD, WitVersion};
use crate::cache::Source;
use crate::error::LoadError;
use crate::info::{ComponentInfo, ImportInfo};
use crate::instance::HookPre;
use crate::options::{FailPolicy, ImportNeed, PluginOptions, import_need};
use crate::plugin::WasmPlugin;
use crate::runtime::HookRuntime;

/// Where a plugin's component comes from, for [`HookRuntime::load_async`].
#[derive(Debug, Clone)]
pub enum PluginSource {
    /// A component file.
    Path(PathBuf),
    /// The component's bytes, with a label that names them in errors.
    Bytes {
        /// What to call the bytes in errors and traces (e.g. `tenant-a/deny-tools@3`).
        label: String,
        /// The component.
        bytes: Arc<[u8]>,
    },
}

/// A plugin as [`HookRuntime::load`] returns it.
#[derive(Clone)]
pub struct LoadedPlugin {
    /// The plugin, ready to make a [`crate::WasmHook`] per run ([`WasmPlugin::hook`]).
    pub plugin: Arc<WasmPlugin>,
    /// What was adjusted while loading (e.g. memory rounded up to a whole
    /// page), one readable sentence each; also logged as warnings.
    pub notes: Vec<String>,
}

/// What a file that is not a regular file is, for an error.
fn file_kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// Reads a component file of at most `max` bytes. The path must name a
/// regular file: it is checked before opening (a FIFO would block the open),
/// opened non-blocking, checked again on the open handle, and read through a
/// `max + 1` byte window, so a file that grows while read is refused too.
fn read_component(path: &Path, max: u64) -> Result<Vec<u8>, LoadError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| LoadError::Io { path: path.to_path_buf(), source };
    let not_file = |t| LoadError::NotAFile { path: path.to_path_buf(), kind: file_kind(t) };
    let too_large = |bytes| LoadError::TooLarge { path: path.to_path_buf(), bytes, max };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(not_file(meta.file_type()));
    }
    if meta.len() > max {
        return Err(too_large(meta.len()));
    }
    // O_NONBLOCK (Linux's value): a FIFO swapped in after the check cannot block the open.
    let file = std::fs::OpenOptions::new().read(true).custom_flags(0o4000).open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(not_file(meta.file_type()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len().min(max)).unwrap_or(0));
    file.take(max.saturating_add(1)).read_to_end(&mut bytes).map_err(io)?;
    let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if len > max {
        return Err(too_large(len));
    }
    Ok(bytes)
}

impl HookRuntime {
    /// Compiles a component, checking the header first so a core module or a
    /// random file gets a precise error; `path` names it in errors.
    /// Returns the component and the bytes' [`crate::content_hash`].
    fn compile(&self, path: &Path, bytes: &[u8]) -> Result<(Component, String), LoadError> {
        let hash = crate::cache::content_hash(bytes);
        // Header: b"\0asm", then a u16 version and a u16 layer (component model binary format):
        // core modules are version 1 layer 0, components version 0x0d layer 1.
        if bytes.len() < 8 || &bytes[0..4] != b"\0asm" {
            return Err(LoadError::NotWasm { path: path.to_path_buf() });
        }
        if bytes[6..8] == [0, 0] {
            return Err(LoadError::CoreModule { path: path.to_path_buf() });
        }
        let compiled = match &self.cache {
            // The content hash is computed once: the journal and the cache key share it.
            Some(cache) => cache.load_with(&self.engine, bytes, &hash, |wasm| self.precompile(wasm)).map(|(c, _)| c),
            None => self.compile_component(bytes),
        };
        compiled.map(|c| (c, hash)).map_err(|e| compile_error(path, &e))
    }

    /// Where `path`'s component would come from now: a valid cache entry, or a compile.
    /// Compiles (and caches) it when needed.
    ///
    /// Errors: as [`HookRuntime::load`].
    pub fn warm(&self, path: &Path) -> Result<Source, LoadError> {
        let bytes = read_component(path, self.options.max_component_bytes)?;
        match &self.cache {
            Some(cache) => cache
                .load_with(&self.engine, &bytes, &crate::cache::content_hash(&bytes), |wasm| self.precompile(wasm))
                .map(|(_, source)| source)
                .map_err(|e| compile_error(path, &e)),
            None => Ok(Source::Compiled),
        }
    }

    /// Resolves `component`'s imports once and type-checks its `on-event`
    /// export with the bindings of `version` (the one [`bindings::pick`] chose).
    fn pre(&self, path: &Path, component: &Component, version: WitVersion) -> Result<HookPre, LoadError> {
        let wrong = |e: wasmtime::Error| LoadError::WrongWorld {
            path: path.to_path_buf(),
            world: version.world(),
            message: format!("{e:#}"),
        };
        let pre = self.linker.instantiate_pre(component).map_err(wrong)?;
        HookPre::new(version, pre).map_err(wrong)
    }

    /// Describes a compiled component: world, version, imports with their
    /// needs, exports; and the version whose bindings it gets.
    ///
    /// Errors: [`LoadError::UnsupportedVersion`], [`LoadError::MixedVersions`],
    /// [`LoadError::NoWitVersion`] from [`bindings::pick`];
    /// [`LoadError::WrongWorld`] when it exports no `on-event`.
    fn describe(&self, path: &Path, component: &Component) -> Result<(ComponentInfo, WitVersion), LoadError> {
        let ty = component.component_type();
        let imports: Vec<ImportInfo> =
            ty.imports(&self.engine).map(|(n, _)| ImportInfo { name: n.to_string(), need: import_need(n) }).collect();
        let exports: Vec<String> = ty.exports(&self.engine).map(|(n, _)| n.to_string()).collect();
        let picked = bindings::pick(imports.iter().map(|i| i.name.as_str()), exports.iter().map(String::as_str));
        let has_on_event = exports.iter().any(|e| e == "on-event");
        let no_on_event = |world: String| LoadError::WrongWorld {
            path: path.to_path_buf(),
            world,
            message: format!("it exports no `on-event` function (exports: {})", list_or_none(&exports)),
        };
        let version = match picked {
            Ok(version) => version,
            Err(PickError::Unsupported(found)) => {
                return Err(LoadError::UnsupportedVersion {
                    path: path.to_path_buf(),
                    found,
                    supported: bindings::supported(),
                });
            }
            Err(PickError::Mixed(found)) => {
                return Err(LoadError::MixedVersions {
                    path: path.to_path_buf(),
                    found,
                    supported: bindings::supported(),
                });
            }
            // Nothing of hookbox:hooks and no `on-event`: a component of another world.
            Err(PickError::NoEvidence) if !has_on_event => return Err(no_on_event(WORLD.to_string())),
            Err(PickError::NoEvidence) => {
                return Err(LoadError::NoWitVersion { path: path.to_path_buf(), supported: bindings::supported() });
            }
        };
        if !has_on_event {
            return Err(no_on_event(version.world()));
        }
        let info = ComponentInfo { world: version.world(), version: version.as_str().to_string(), imports, exports };
        Ok((info, version))
    }

    /// Loads a plugin from the component file at `path`: compiles it (or
    /// takes it from the cache), checks its WIT version and world, checks its
    /// imports against its grants, resolves its imports once and instantiates
    /// it once. Returns it with notes on adjusted options (e.g. memory rounded
    /// up to a page). Compiling blocks the calling thread (tens of ms to tens
    /// of seconds); from async code use [`HookRuntime::load_async`].
    ///
    /// `name` tags its logs and failures; `config` is what `get-config` returns.
    /// Errors: every [`LoadError`] variant, naming `path` or the plugin.
    pub fn load(
        &self,
        name: &str,
        path: &Path,
        config: BTreeMap<String, String>,
        options: PluginOptions,
    ) -> Result<LoadedPlugin, LoadError> {
        let bytes = read_component(path, self.options.max_component_bytes)?;
        self.load_from(name, path, &bytes, config, options)
    }

    /// As [`HookRuntime::load`], from the component's bytes (an upload, an
    /// embedded plugin); `label` names it in errors and in
    /// [`WasmPlugin::path`] (e.g. `tenant-a/deny-tools@3`).
    ///
    /// Errors: as [`HookRuntime::load`], naming `label`.
    pub fn load_bytes(
        &self,
        name: &str,
        label: &str,
        bytes: &[u8],
        config: BTreeMap<String, String>,
        options: PluginOptions,
    ) -> Result<LoadedPlugin, LoadError> {
        self.load_from(name, Path::new(label), bytes, config, options)
    }

    /// As [`HookRuntime::load`] or [`HookRuntime::load_bytes`], on a blocking
    /// thread (`tokio::task::spawn_blocking`), so compiling never holds an
    /// async worker. Needs a tokio runtime.
    ///
    /// Errors: as [`HookRuntime::load`]; [`LoadError::Engine`] if the
    /// blocking task could not run to its end.
    pub async fn load_async(
        &self,
        name: &str,
        source: PluginSource,
        config: BTreeMap<String, String>,
        options: PluginOptions,
    ) -> Result<LoadedPlugin, LoadError> {
        let runtime = self.clone();
        let name = name.to_string();
        tokio::task::spawn_blocking(move || match source {
            PluginSource::Path(path) => runtime.load(&name, &path, config, options),
            PluginSource::Bytes { label, bytes } => runtime.load_bytes(&name, &label, &bytes, config, options),
        })
        .await
        .map_err(|e| LoadError::Engine(format!("the loading task failed: {e}")))?
    }

    fn load_from(
        &self,
        name: &str,
        path: &Path,
        bytes: &[u8],
        config: BTreeMap<String, String>,
        options: PluginOptions,
    ) -> Result<LoadedPlugin, LoadError> {
        let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if len > self.options.max_component_bytes {
            return Err(LoadError::TooLarge {
                path: path.to_path_buf(),
                bytes: len,
                max: self.options.max_component_bytes,
            });
        }
        let bad = |message: String| LoadError::Options { plugin: name.to_string(), message };
        let (limits, notes) = options.limits.validated().map_err(bad)?;
        if limits.memory_bytes > self.options.max_memory_bytes {
            return Err(bad(format!(
                "limits.memory_bytes = {} is over the runtime's max_memory_bytes = {} ([runtime] in hookbox.toml)",
                limits.memory_bytes, self.options.max_memory_bytes
            )));
        }
        if options.events.as_ref().is_some_and(Vec::is_empty) {
            return Err(bad(
                "events = []: the plugin would never be called; list its events or leave `events` out".into()
            ));
        }
        if options.observe && options.fail == FailPolicy::Closed {
            return Err(bad(
                "observe = true with fail = \"closed\": an observe-only plugin cannot decline tools, so it cannot fail closed"
                    .into(),
            ));
        }
        let mut options = options;
        options.fail = options.fail.resolve(options.events.as_deref(), options.observe);
        let mut subscribed = [options.events.is_none(); EventKind::COUNT];
        for kind in options.events.iter().flatten() {
            subscribed[kind.index()] = true;
        }
        for dir in &options.grants.dirs {
            if !dir.guest.starts_with('/') {
                return Err(bad(format!("dirs: guest path `{}` must be absolute (e.g. `/data`)", dir.guest)));
            }
            if !dir.host.is_dir() {
                return Err(bad(format!("dirs: host path {} is not a directory", dir.host.display())));
            }
        }
        self.check_protected(&options.grants.dirs).map_err(bad)?;
        let (component, hash) = self.compile(path, bytes)?;
        let (info, version) = self.describe(path, &component)?;
        // Report a never-granted interface before one that only lacks a grant.
        let mut imports: Vec<&ImportInfo> = info.imports.iter().collect();
        imports.sort_by_key(|i| i.need != ImportNeed::Never);
        for import in imports {
            let refused = match import.need {
                ImportNeed::Always => None,
                ImportNeed::Dirs if !options.grants.dirs.is_empty() => None,
                ImportNeed::Dirs => Some(format!("needs a `dirs` grant and plugin `{name}` has none")),
                ImportNeed::Never => Some("no grant allows: hooks get no network and no other host interfaces".into()),
            };
            if let Some(why) = refused {
                return Err(LoadError::Ungranted { path: path.to_path_buf(), interface: import.name.clone(), why });
            }
        }
        let pre = self.pre(path, &component, version)?;
        let plugin = WasmPlugin {
            name: name.to_string(),
            path: path.to_path_buf(),
            engine: self.engine.clone(),
            version,
            pre,
            config: Arc::new(config),
            options: PluginOptions { limits, ..options },
            state: self.state.clone(),
            subscribed,
            hash,
            info: Arc::new(info),
        };
        plugin.trial_instantiate()?;
        for note in &notes {
            tracing::warn!(plugin = name, "{note}");
        }
        Ok(LoadedPlugin { plugin: Arc::new(plugin), notes })
    }

    /// Refuses a `dirs` grant that is, contains or lies inside a directory
    /// the host keeps trusted files in ([`HookRuntime::protected_dirs`]): a
    /// plugin that could write there could plant native code in the cache or
    /// rewrite every session's state. Paths are compared after resolving
    /// symbolic links.
    fn check_protected(&self, dirs: &[crate::options::DirGrant]) -> Result<(), String> {
        let resolve = |p: &Path| std::fs::canonicalize(p).or_else(|_| std::path::absolute(p));
        let protected: Vec<(&str, PathBuf)> = self
            .protected_dirs()
            .into_iter()
            .filter_map(|(what, dir)| resolve(&dir).ok().map(|dir| (what, dir)))
            .collect();
        for grant in dirs {
            let Ok(host) = resolve(&grant.host) else { continue };
            if let Some((what, dir)) = protected.iter().find(|(_, d)| host.starts_with(d) || d.starts_with(&host)) {
                return Err(format!(
                    "dirs: host path {} is, contains or lies inside {what} ({}); a plugin must not reach the host's own files: \
                     grant a directory outside it (or move the cache / state database)",
                    grant.host.display(),
                    dir.display()
                ));
            }
        }
        Ok(())
    }

    /// Validates a component against the world without running it.
    ///
    /// Errors: as [`HookRuntime::load`]; an import that no grant can allow is an error.
    pub fn inspect(&self, path: &Path) -> Result<ComponentInfo, LoadError> {
        let bytes = read_component(path, self.options.max_component_bytes)?;
        let (component, _) = self.compile(path, &bytes)?;
        let (info, version) = self.describe(path, &component)?;
        if let Some(never) = info.imports.iter().find(|i| i.need == ImportNeed::Never) {
            return Err(LoadError::Ungranted {
                path: path.to_path_buf(),
                interface: never.name.clone(),
                why: "no grant allows: hooks get no network and no other host interfaces".into(),
            });
        }
        self.pre(path, &component, version)?;
        Ok(info)
    }
}

pub(crate) fn list_or_none(items: &[String]) -> String {
    if items.is_empty() { "none".to_string() } else { items.join(", ") }
}

impl HookRuntime {
    /// Compiles `wasm` to an artifact: in the worker when there is one, else here.
    pub(crate) fn precompile(&self, wasm: &[u8]) -> wasmtime::Result<Vec<u8>> {
        match &self.compile_worker {
            Some(worker) => crate::compile::precompile_in_worker(worker, &self.options, wasm),
            None => self.engine.precompile_component(wasm),
        }
    }

    /// Compiles `wasm` to a component: in the worker and deserialised here
    /// when there is one, else [`Component::new`].
    pub(crate) fn compile_component(&self, wasm: &[u8]) -> wasmtime::Result<Component> {
        match &self.compile_worker {
            Some(_) => crate::compile::deserialize_own(&self.engine, &self.precompile(wasm)?),
            None => Component::new(&self.engine, wasm),
        }
    }
}

/// The load error for a failed compile of `path`: [`LoadError::CompileStopped`]
/// when the compile worker's limits (or the worker) stopped it, else
/// [`LoadError::Compile`] with wasmtime's message.
fn compile_error(path: &Path, e: &wasmtime::Error) -> LoadError {
    match e.downcast_ref::<crate::compile::CompileStopped>() {
        Some(stopped) => LoadError::CompileStopped { path: path.to_path_buf(), message: stopped.0.clone() },
        None => LoadError::Compile { path: path.to_path_buf(), message: format!("{e:#}") },
    }
}
