//! The `hookbox` command line, as a library function so tests can drive it
//! in-process ([`main_with_args`]); `src/main.rs` is a thin wrapper.
//!
//! Exit codes: 0 success; 1 the run raised an error (aborted, provider
//! failure, iteration limit); 2 bad input (a one-line error on stderr naming
//! what and where; nothing is written in the workspace).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::agent::{Agent, RunResult};
use crate::config::{Manifest, PluginEntry, plugin_name_from_path};
use crate::event::Event;
use crate::handle::RunHandle;
use crate::hooks::HookHandler;
use crate::hooks::chain::{DispatchTrace, HookChain};
use crate::hooks::state::SqliteStateStore;
use crate::hooks::wasm::{HookRuntime, RuntimeOptions};
use crate::journal::{
    JOURNAL_FORMAT, JOURNAL_VERSION, JournalFile, JournalProvider, MAX_PLUGIN_ENTRIES, RunJournal, compare,
};
use crate::model::ModelProvider;
use crate::output::OutputFile;
use crate::provider::record::RecordingProvider;
use crate::provider::replay::ReplayProvider;
use crate::tools::{Workspace, workspace_tools};

/// `--inbox` and `--confirm`: threads that steer the run through its handle.
mod terminal {
    use std::io::{BufRead, Read, Seek, SeekFrom};
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::sync::mpsc::UnboundedSender;

    use super::Input;
    use crate::handle::RunHandle;

    const POLL: Duration = Duration::from_millis(50);

    /// One line of input (lossy UTF-8, without its line end); `None` at the end.
    fn read_line(input: &Mutex<Input>) -> Option<String> {
        let mut line = Vec::new();
        let mut guard = input.lock().ok()?;
        match guard.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(String::from_utf8_lossy(&line).trim_end_matches(['\n', '\r']).to_string()),
        }
    }

    /// Queues `line`; a line the run can no longer take is said on stderr, never dropped silently.
    fn inject(handle: &RunHandle, line: &str, out: &UnboundedSender<String>) {
        if line.trim().is_empty() {
            return;
        }
        match handle.inject(line) {
            Ok(()) => {
                let _ = out.send(format!("[inbox] queued: {line}"));
            }
            Err(e) => {
                let text = format!("[inbox] not queued ({e}): {line}");
                // After the run the trace channel may be closed: fall back to stderr.
                if out.send(text.clone()).is_err() {
                    eprintln!("{text}");
                }
            }
        }
    }

    /// A file inbox: the complete lines from `offset` on (lossy UTF-8) and the new offset.
    /// A file that shrank (truncated or replaced) is read again from its start.
    fn new_lines(path: &Path, offset: u64, out: &UnboundedSender<String>) -> (Vec<String>, u64) {
        let Ok(mut file) = std::fs::File::open(path) else { return (Vec::new(), offset) };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let offset = if len < offset {
            let _ = out.send(format!("[inbox] {} shrank: reading it again from the start", path.display()));
            0
        } else {
            offset
        };
        let mut bytes = Vec::new();
        if file.seek(SeekFrom::Start(offset)).is_err() || file.read_to_end(&mut bytes).is_err() {
            return (Vec::new(), offset);
        }
        let Some(last_newline) = bytes.iter().rposition(|b| *b == b'\n') else { return (Vec::new(), offset) };
        let lines = bytes[..last_newline]
            .split(|b| *b == b'\n')
            .map(|l| String::from_utf8_lossy(l).trim_end_matches('\r').to_string())
            .collect();
        (lines, offset + last_newline as u64 + 1)
    }

    /// Injects what a file inbox holds now, before the run starts (so it cannot
    /// race the run), and returns where the watcher goes on from.
    pub(super) fn read_inbox_now(path: &Path, handle: &RunHandle, out: &UnboundedSender<String>) -> u64 {
        let (lines, offset) = new_lines(path, 0, out);
        for line in &lines {
            inject(handle, line, out);
        }
        offset
    }

    /// Injects each new line of `path` (`-`: the input) until the run ends.
    pub(super) fn spawn_inbox(
        path: PathBuf,
        start: u64,
        input: Arc<Mutex<Input>>,
        handle: RunHandle,
        out: UnboundedSender<String>,
    ) {
        std::thread::spawn(move || {
            if path.as_os_str() == "-" {
                while let Some(line) = read_line(&input) {
                    inject(&handle, &line, &out);
                    if handle.finished() {
                        break;
                    }
                }
                return;
            }
            // A file: poll for appended lines (like `tail -F`: a replaced file is reopened).
            let mut offset = start;
            while !handle.finished() {
                let (lines, next) = new_lines(&path, offset, &out);
                offset = next;
                for line in &lines {
                    inject(&handle, line, &out);
                }
                std::thread::sleep(POLL);
            }
            // Lines that arrived as the run ended are reported, not lost.
            for line in new_lines(&path, offset, &out).0 {
                inject(&handle, &line, &out);
            }
        });
    }

    /// When the run pauses, asks on the terminal and resumes or aborts. An
    /// answer that comes after the pause already ended (a pause timeout) is
    /// not applied to a later pause.
    pub(super) fn spawn_confirm(input: Arc<Mutex<Input>>, handle: RunHandle, out: UnboundedSender<String>) {
        std::thread::spawn(move || {
            while !handle.finished() {
                if !handle.paused() {
                    std::thread::sleep(POLL);
                    continue;
                }
                let _ = out.send("[confirm] the run is paused: continue? [y/N]".to_string());
                let answer = read_line(&input);
                if !handle.paused() {
                    let _ = out.send("[confirm] the pause already ended; that answer is ignored".to_string());
                    continue;
                }
                match answer {
                    Some(answer) if matches!(answer.trim(), "y" | "Y" | "yes") => {
                        let _ = out.send("[confirm] resuming".to_string());
                        handle.resume();
                    }
                    _ => {
                        let _ = out.send("[confirm] aborting".to_string());
                        handle.abort("declined at the confirmation prompt");
                        return;
                    }
                }
            }
        });
    }

    /// A replay has no one to answer a pause: resume every pause at once.
    pub(super) fn spawn_pause_resumer(handle: RunHandle) {
        std::thread::spawn(move || {
            while !handle.finished() {
                if handle.paused() {
                    handle.resume();
                }
                std::thread::sleep(POLL);
            }
        });
    }

    /// Without `--confirm` or a pause timeout nothing could resume a paused
    /// run: abort it with a reason that says so instead of hanging.
    pub(super) fn spawn_unanswerable_pause_guard(handle: RunHandle) {
        std::thread::spawn(move || {
            while !handle.finished() {
                if handle.paused() {
                    handle.abort(
                        "the run paused and nothing can resume it: use --confirm, or set [agent] pause_timeout_ms",
                    );
                    return;
                }
                std::thread::sleep(POLL);
            }
        });
    }
}

/// Exit code for bad input.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code for a run that raised an error.
pub const EXIT_RUN_ERROR: i32 = 1;

#[derive(Debug, Parser)]
#[command(name = "hookbox", version, about = "Run an LLM agent with sandboxed WebAssembly hooks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent on PROMPT: a readable trace on stderr, the final answer on stdout.
    Run(Box<RunArgs>),
    /// Load and validate a component against the hookbox:hooks/hook world.
    Check {
        /// The component file.
        plugin: PathBuf,
    },
    /// Feed a golden trace's events to a plugin and compare its directives (with fuel and time per event).
    Test(crate::conformance::TestArgs),
    /// Run a run again from its journal (`hookbox run --journal FILE`): the
    /// recorded model responses and tool results, the same plugins, every hook
    /// given the values it got; reports the first hook call that decides differently.
    Replay(ReplayArgs),
}

#[derive(Debug, clap::Args)]
struct ReplayArgs {
    /// The journal, written by `hookbox run --journal FILE`.
    journal: PathBuf,
    /// Replay with the plugins and [agent] settings of this hookbox.toml instead
    /// of the journal's (e.g. to see what a changed plugin would have decided).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print one JSON object with the comparison on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The model: `replay:FILE` plays back a recorded session (offline);
    /// `anthropic:MODEL`, `openai:MODEL`, `openai-responses:MODEL`, `gemini:MODEL`
    /// call the live APIs (keys from ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY).
    #[arg(long)]
    model: String,
    /// The live API's base URL (default: ANTHROPIC_BASE_URL / OPENAI_BASE_URL /
    /// GEMINI_BASE_URL, else the provider's public URL); e.g. an OpenAI-compatible server.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// A plugin component to load after those of --config (repeatable; empty config, default limits).
    #[arg(long = "plugin", value_name = "PATH")]
    plugins: Vec<PathBuf>,
    /// The directory the built-in tools may touch; nothing outside it.
    #[arg(long)]
    workspace: PathBuf,
    /// hookbox.toml: agent settings and plugins (with config and limits), in order.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The system prompt (overrides [agent] system).
    #[arg(long)]
    system: Option<String>,
    /// Print one JSON object with the whole run record on stdout instead of the answer.
    #[arg(long)]
    json: bool,
    /// Inject each line of FILE into the live run as a user message (`-`: stdin);
    /// a file is watched for new lines until the run ends.
    #[arg(long, value_name = "FILE")]
    inbox: Option<PathBuf>,
    /// When the run pauses, ask "continue? [y/N]" on the terminal and resume or abort.
    #[arg(long)]
    confirm: bool,
    /// The session this run belongs to: hooks see it in `run-start`, and their
    /// saved state is kept under it (default: a fresh id per run).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Keep hook state in this SQLite file, so a later `--session ID` run in
    /// another process continues from it (default: in memory, for this run only).
    #[arg(long, value_name = "FILE")]
    state_db: Option<PathBuf>,
    /// Write every model response of the run to FILE, a replay session that
    /// `--model replay:FILE` plays back exactly (same responses, same events).
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Write the run's journal to FILE: every value hooks got from `now`,
    /// `random`, `uuid`, `sleep`, `get-state` and WASI's clocks and random
    /// numbers, every model response and tool result, and every hook call's
    /// directive. `hookbox replay FILE` runs the run again from it.
    #[arg(long, value_name = "FILE")]
    journal: Option<PathBuf>,
    /// Read the prompt from FILE (`-` for stdin) instead of the PROMPT argument.
    #[arg(long, value_name = "FILE", conflicts_with = "prompt")]
    prompt_file: Option<PathBuf>,
    /// Write a golden trace of each plugin's events and answers to FILE with the
    /// plugin's name inserted (`run.jsonl` -> `run.deny-tools.jsonl`), for `hookbox test`.
    #[arg(long, value_name = "FILE")]
    record_trace: Option<PathBuf>,
    /// The user's prompt.
    #[arg(required_unless_present = "prompt_file")]
    prompt: Option<String>,
}

/// A bad-input error: printed as one line, exit code 2.
#[derive(Debug)]
struct BadInput(anyhow::Error);

/// What the terminal features (`--confirm`, `--inbox -`) read lines from.
pub type Input = Box<dyn std::io::BufRead + Send>;

/// Runs the CLI with `args` (the first is the program name), reading the
/// process's stdin and writing to `stdout` and `stderr`; returns the exit code.
pub fn main_with_args<I, T>(args: I, stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    main_with_io(args, Box::new(std::io::BufReader::new(std::io::stdin())), stdout, stderr)
}

/// As [`main_with_args`], reading terminal input (confirmation answers, inbox
/// lines from `-`) from `input`.
pub fn main_with_io<I, T>(args: I, input: Input, stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            // Usage errors keep the one-line promise: clap's first line, then a pointer to --help.
            // clap's message is everything before its usage block, folded onto one line.
            let text = e.render().to_string();
            let message: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
                .collect();
            let message = message.join(" ");
            let message = message.trim_start_matches("error: ");
            let _ = writeln!(stderr, "hookbox: error: {message} (see `hookbox --help`)");
            return EXIT_BAD_INPUT;
        }
        Err(e) => {
            let _ = write!(stdout, "{}", e.render());
            return 0;
        }
    };
    let result = match cli.command {
        Command::Check { plugin } => check(&plugin, stdout),
        Command::Run(args) => run(*args, input, stdout, stderr),
        Command::Test(args) => crate::conformance::test_command(&args, stdout).map_err(BadInput),
        Command::Replay(args) => replay(&args, stdout, stderr),
    };
    match result {
        Ok(code) => code,
        Err(BadInput(e)) => {
            let _ = writeln!(stderr, "hookbox: error: {}", one_line(&e));
            EXIT_BAD_INPUT
        }
    }
}

/// The error and its causes on one line, skipping a cause whose text the
/// line already holds (thiserror messages often embed their source).
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    squash(&line)
}

/// Folds a multi-line message (a TOML error's caret diagram, a guest's
/// stderr) onto one line: the first line and the last non-empty one when the
/// middle is a diagram, every line joined with ` | ` otherwise.
fn squash(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if lines.iter().any(|l| l.starts_with('|') || l.starts_with('^')) {
        let first = lines.first().copied().unwrap_or_default();
        let last = lines.last().copied().unwrap_or_default();
        return if first == last { first.to_string() } else { format!("{first}: {last}") };
    }
    lines.join(" | ")
}

fn check(path: &Path, stdout: &mut dyn Write) -> Result<i32, BadInput> {
    let runtime = runtime().map_err(|e| BadInput(e.into()))?;
    let info = runtime.inspect(path).map_err(|e| BadInput(e.into()))?;
    let _ =
        writeln!(stdout, "ok: {} targets world {} (WIT package version {})", path.display(), info.world, info.version);
    let _ = writeln!(stdout, "  exports: {}", info.exports.join(", "));
    let _ = writeln!(stdout, "  imports:");
    for import in &info.imports {
        let _ = writeln!(stdout, "    {} ({})", import.name, import.need.describe());
    }
    let grants = info.grants_needed();
    let _ =
        writeln!(stdout, "  grants needed: {}", if grants.is_empty() { "none".to_string() } else { grants.join(", ") });
    Ok(0)
}

/// Everything a run needs, validated before anything runs.
struct Prepared {
    agent: Agent,
    chain: HookChain,
    notes: Vec<String>,
    recorder: Option<Arc<RecordingProvider>>,
    journal: Option<JournalContext>,
    /// The files the run reads (what, path), which no result file may overwrite.
    inputs: Vec<(String, PathBuf)>,
}

/// `--journal`: the run's journal and what the file needs besides it.
struct JournalContext {
    journal: Arc<RunJournal>,
    manifest: Manifest,
    provider: String,
    model: String,
    /// Each plugin's BLAKE3 hash, of the file as loaded.
    hashes: BTreeMap<String, String>,
}

fn prepare(args: &RunArgs) -> anyhow::Result<Prepared> {
    let mut manifest = match &args.config {
        Some(path) => Manifest::load(path)?,
        None => Manifest::default(),
    };
    if let Some(system) = &args.system {
        manifest.agent.system = Some(system.clone());
    }
    for path in &args.plugins {
        manifest.plugins.push(PluginEntry {
            name: Some(plugin_name_from_path(path)),
            path: path.clone(),
            config: BTreeMap::new(),
            ..PluginEntry::with_defaults(path.clone())
        });
    }
    if !(1..=20).contains(&manifest.agent.max_attempts) {
        anyhow::bail!("[agent] max_attempts = {} must be between 1 and 20", manifest.agent.max_attempts);
    }
    if let Some(entry) = manifest.plugins.iter().find(|p| p.version.as_deref().is_some_and(|v| v.trim().is_empty())) {
        anyhow::bail!("plugin `{}`: `version` is empty", entry.display_name());
    }
    let mut provider = model_from_spec(&args.model, args.base_url.as_deref())?;
    let (provider_name, model_name) = (provider.name().to_string(), provider.model().to_string());
    // A journal holds the model's responses, so it records them like --record.
    let recorder =
        (args.record.is_some() || args.journal.is_some()).then(|| Arc::new(RecordingProvider::new(provider.clone())));
    if let Some(r) = &recorder {
        provider = r.clone();
    }
    let workspace =
        Workspace::open(&args.workspace).with_context(|| format!("--workspace {}", args.workspace.display()))?;
    check_runtime(&manifest)?;
    let mut runtime = runtime_with(manifest.runtime)?;
    if let Some(db) = &args.state_db {
        let store = SqliteStateStore::open(db).with_context(|| format!("--state-db {}", db.display()))?;
        runtime = runtime.with_state_store(Arc::new(store));
    }
    let journal = args.journal.as_ref().map(|_| RunJournal::recording());
    let from_config = manifest.plugins.len() - args.plugins.len();
    let source = |i: usize, entry: &PluginEntry| match &args.config {
        Some(config) if i < from_config => format!("{} (plugins[{i}])", config.display()),
        _ => format!("--plugin {}", entry.path.display()),
    };
    let Loaded { mut hooks, mut notes, hashes } = load_plugins(&runtime, &manifest, source, journal.as_deref())?;
    notes.splice(0..0, runtime.notes().iter().cloned());
    notes.extend(subscription_notes(&manifest));
    if let Some(file) = &args.record_trace {
        hooks = record_traces(hooks, file, &manifest, &mut notes)?;
    }
    let tools = workspace_tools(Arc::new(workspace));
    let mut chain = HookChain::new(hooks);
    let mut agent = Agent::new(provider, tools, manifest.agent.clone());
    if let Some(journal) = &journal {
        chain = chain.with_journal(journal.clone());
        agent = agent.with_journal(journal.clone());
    }
    let mut inputs: Vec<(String, PathBuf)> = Vec::new();
    if let Some(config) = &args.config {
        inputs.push(("--config file".into(), config.clone()));
    }
    if let Some(session) = args.model.strip_prefix("replay:") {
        inputs.push(("replay session (--model)".into(), PathBuf::from(session)));
    }
    for entry in &manifest.plugins {
        inputs.push((format!("plugin `{}`", entry.display_name()), entry.path.clone()));
    }
    for (what, path) in [("--prompt-file", &args.prompt_file), ("--inbox", &args.inbox), ("--state-db", &args.state_db)]
    {
        if let Some(path) = path.as_ref().filter(|p| p.as_os_str() != "-") {
            inputs.push((format!("{what} file"), path.clone()));
        }
    }
    let journal =
        journal.map(|journal| JournalContext { journal, manifest, provider: provider_name, model: model_name, hashes });
    Ok(Prepared { agent, chain, notes, recorder, journal, inputs })
}

/// A run holds one instance per plugin: a pool smaller than that would turn plugins off.
///
/// Errors: pooling with `max_instances` below the number of plugins.
fn check_runtime(manifest: &Manifest) -> anyhow::Result<()> {
    let r = manifest.runtime;
    let plugins = manifest.plugins.len();
    if r.pooling && r.max_instances > 0 && plugins > r.max_instances as usize {
        anyhow::bail!(
            "[runtime] max_instances = {} is below this run's {plugins} plugins: a run holds one instance per plugin",
            r.max_instances
        );
    }
    Ok(())
}

/// Notes on subscriptions that can never fire in this configuration.
fn subscription_notes(manifest: &Manifest) -> Vec<String> {
    use crate::event::EventKind;
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

/// The plugins of one run, loaded.
struct Loaded {
    /// The handlers, in chain order.
    hooks: Vec<Box<dyn HookHandler>>,
    /// Notes on adjusted options.
    notes: Vec<String>,
    /// Each plugin's BLAKE3 hash (hex) of its file as loaded, by name.
    hashes: BTreeMap<String, String>,
}

/// Loads `manifest`'s plugins in order, each as a handler for one run
/// (journaled in `journal` when given); `source(i, entry)` names where entry
/// `i` came from in errors. Returns the handlers and notes on adjusted options.
///
/// Errors: an empty or repeated plugin name, or any load error, naming the source.
fn load_plugins(
    runtime: &HookRuntime,
    manifest: &Manifest,
    source: impl Fn(usize, &PluginEntry) -> String,
    journal: Option<&RunJournal>,
) -> anyhow::Result<Loaded> {
    let mut hooks: Vec<Box<dyn HookHandler>> = Vec::new();
    let mut notes = Vec::new();
    let mut hashes = BTreeMap::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, entry) in manifest.plugins.iter().enumerate() {
        let name = entry.display_name();
        let source = source(i, entry);
        if name.trim().is_empty() {
            anyhow::bail!("{source}: the plugin name is empty");
        }
        if !names.insert(name.clone()) {
            anyhow::bail!(
                "{source}: a second plugin is named `{name}`; give each plugin a distinct `name` in hookbox.toml so traces can tell them apart"
            );
        }
        let (plugin, plugin_notes) = runtime
            .load(&name, &entry.path, entry.config_strings(), entry.options())
            .with_context(|| source.clone())?;
        notes.extend(plugin_notes.into_iter().map(|n| format!("plugin `{name}`: {n}")));
        hashes.insert(name.clone(), plugin.content_hash().to_string());
        let hook = plugin.hook();
        hooks.push(match journal {
            Some(journal) => Box::new(hook.with_journal(journal)),
            None => Box::new(hook),
        });
    }
    Ok(Loaded { hooks, notes, hashes })
}

/// `--record-trace FILE`: wraps every hook in a [`crate::conformance::Recorder`],
/// once all of them loaded (a run that fails to start writes no trace).
fn record_traces(
    hooks: Vec<Box<dyn HookHandler>>,
    file: &Path,
    manifest: &Manifest,
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<Box<dyn HookHandler>>> {
    let mut out: Vec<Box<dyn HookHandler>> = Vec::new();
    for (hook, entry) in hooks.into_iter().zip(&manifest.plugins) {
        let path = crate::conformance::record_path(file, hook.name());
        let recorder = crate::conformance::Recorder::new(hook, &path, &entry.config_strings())?;
        notes.push(format!("plugin `{}`: recording its trace to {}", recorder.name(), path.display()));
        out.push(Box::new(recorder));
    }
    Ok(out)
}

/// The hook runtime the CLI uses: with the on-disk component cache
/// ([`HookRuntime::default_cache_dir`]) unless `HOOKBOX_CACHE_DIR=off`.
///
/// Errors: the engine cannot be created.
pub fn runtime() -> Result<HookRuntime, crate::hooks::wasm::LoadError> {
    runtime_with(RuntimeOptions::default())
}

/// As [`runtime`], with `options` (hookbox.toml's `[runtime]`).
///
/// Errors: the engine cannot be created.
pub fn runtime_with(options: RuntimeOptions) -> Result<HookRuntime, crate::hooks::wasm::LoadError> {
    let runtime = HookRuntime::with_options(options)?;
    Ok(match HookRuntime::default_cache_dir() {
        Some(dir) => runtime.with_cache_dir(dir),
        None => runtime,
    })
}

/// Builds the provider for `--model`.
///
/// `replay:FILE` plays back a recorded session (offline); `anthropic:MODEL`,
/// `openai:MODEL`, `openai-responses:MODEL` and `gemini:MODEL` are the live
/// APIs ([`crate::provider::http`]), streaming, with the key from
/// `ANTHROPIC_API_KEY` / `OPENAI_API_KEY` / `GEMINI_API_KEY` and the base URL
/// from `base_url`, else `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` /
/// `GEMINI_BASE_URL`, else the public default.
///
/// Errors: an unknown scheme or an empty model/file, a replay file that cannot
/// be loaded, a live API without its key (naming the variable) or with a bad
/// base URL.
pub fn model_from_spec(spec: &str, base_url: Option<&str>) -> anyhow::Result<Arc<dyn ModelProvider>> {
    use crate::provider::http::{Api, HttpOptions, HttpProvider};
    let live = spec
        .split_once(':')
        .and_then(|(scheme, model)| Some((Api::from_scheme(scheme)?, model.trim())).filter(|(_, m)| !m.is_empty()));
    match (spec.split_once(':'), live) {
        (Some(("replay", "")), _) => anyhow::bail!("--model replay: names no file: use `replay:FILE`"),
        (Some(("replay", file)), _) => {
            let provider = ReplayProvider::from_file(Path::new(file)).with_context(|| format!("--model {spec}"))?;
            Ok(Arc::new(provider))
        }
        (_, Some((api, model))) => {
            let options = HttpOptions { base_url: base_url.map(str::to_owned), ..HttpOptions::default() };
            let provider = HttpProvider::new(api, model, options).with_context(|| format!("--model {spec}"))?;
            Ok(Arc::new(provider))
        }
        _ => {
            anyhow::bail!(
                "unknown model spec `{spec}` (--model): expected `replay:FILE` (the offline replay provider), \
                 `anthropic:MODEL`, `openai:MODEL`, `openai-responses:MODEL` or `gemini:MODEL`"
            )
        }
    }
}

fn is_stdin(path: &Option<PathBuf>) -> bool {
    path.as_deref() == Some(Path::new("-"))
}

fn read_prompt(args: &RunArgs) -> anyhow::Result<String> {
    match (&args.prompt_file, &args.prompt) {
        (Some(path), _) if path.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .context("--prompt-file -: reading stdin")?;
            Ok(text)
        }
        (Some(path), _) => std::fs::read_to_string(path).with_context(|| format!("--prompt-file {}", path.display())),
        (None, Some(prompt)) => Ok(prompt.clone()),
        (None, None) => anyhow::bail!("no prompt: give PROMPT or --prompt-file"),
    }
}

fn run(args: RunArgs, input: Input, stdout: &mut dyn Write, stderr: &mut dyn Write) -> Result<i32, BadInput> {
    let stdin_users = [args.inbox.as_deref() == Some(Path::new("-")), args.confirm, is_stdin(&args.prompt_file)];
    if stdin_users.iter().filter(|u| **u).count() > 1 {
        return Err(BadInput(anyhow::anyhow!(
            "--confirm, --inbox - and --prompt-file - all read stdin: use at most one of them"
        )));
    }
    if let Some(inbox) = args.inbox.as_deref().filter(|p| *p != Path::new("-")) {
        if !inbox.exists() {
            return Err(BadInput(anyhow::anyhow!("--inbox {}: no such file", inbox.display())));
        }
        if inbox.is_dir() {
            return Err(BadInput(anyhow::anyhow!("--inbox {}: a directory, not a file", inbox.display())));
        }
    }
    if args.session.as_deref().is_some_and(|s| s.trim().is_empty()) {
        return Err(BadInput(anyhow::anyhow!("--session: the session id is empty")));
    }
    let prompt = read_prompt(&args).map_err(BadInput)?;
    if prompt.trim().is_empty() {
        return Err(BadInput(anyhow::anyhow!("the prompt is empty")));
    }
    let prepared = prepare(&args).map_err(BadInput)?;
    // Result files are checked and opened before the run: a path that cannot be
    // written, or that is one of the run's own inputs, is bad input.
    let record_file = match &args.record {
        Some(path) => Some(OutputFile::open("--record", path, &prepared.inputs, &[]).map_err(|e| BadInput(e.into()))?),
        None => None,
    };
    let journal_out = match &args.journal {
        Some(path) => Some(
            OutputFile::open("--journal", path, &prepared.inputs, &record_file.iter().collect::<Vec<_>>())
                .map_err(|e| BadInput(e.into()))?,
        ),
        None => None,
    };
    let rt = tokio_runtime()?;
    let Prepared { agent, mut chain, mut notes, recorder, journal, inputs: _ } = prepared;
    let journal_prompt = prompt.clone();
    if args.state_db.is_some() && args.session.is_none() {
        notes.push(
            "--state-db without --session: this run's state is saved under a fresh session id that no later run will use"
                .into(),
        );
    }
    let pause_can_end = agent.config().pause_timeout_ms.is_some();
    for note in &notes {
        let _ = writeln!(stderr, "[note] {note}");
    }
    // The trace is printed as events fire: the run is a task, lines come back on a channel.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let trace_tx = tx.clone();
    let agent = agent.with_trace(Arc::new(move |event: &Event, trace: &DispatchTrace| {
        for line in trace_lines(event, trace) {
            let _ = trace_tx.send(line);
        }
    }));
    let handle = RunHandle::new();
    let input = Arc::new(std::sync::Mutex::new(input));
    if let Some(inbox) = &args.inbox {
        let start = if inbox.as_os_str() == "-" { 0 } else { terminal::read_inbox_now(inbox, &handle, &tx) };
        terminal::spawn_inbox(inbox.clone(), start, input.clone(), handle.clone(), tx.clone());
    }
    if args.confirm {
        terminal::spawn_confirm(input, handle.clone(), tx.clone());
    } else if !pause_can_end {
        terminal::spawn_unanswerable_pause_guard(handle.clone());
    }
    drop(tx);
    let outcome = rt.block_on(async {
        let session = args.session.clone();
        let mut task = tokio::spawn(async move {
            match session {
                Some(id) => agent.run_in_session(&prompt, &mut chain, handle, &id).await,
                None => agent.run_with_handle(&prompt, &mut chain, handle).await,
            }
        });
        loop {
            tokio::select! {
                Some(line) = rx.recv() => {
                    let _ = writeln!(stderr, "{line}");
                }
                done = &mut task => {
                    while let Ok(line) = rx.try_recv() {
                        let _ = writeln!(stderr, "{line}");
                    }
                    break done;
                }
            }
        }
    });
    let outcome = outcome.map_err(|e| BadInput(anyhow::anyhow!("the run task failed: {e}")))?;
    // A result file that cannot be written fails the command (exit 1), though the run completed.
    let mut lost_output = false;
    if let (Some(recorder), Some(out)) = (&recorder, record_file) {
        let path = out.path().to_path_buf();
        match recorder.to_text().and_then(|text| out.finish(&text)) {
            Ok(()) => {
                let _ = writeln!(stderr, "[record] {} response(s) written to {}", recorder.len(), path.display());
            }
            Err(e) => {
                lost_output = true;
                let _ = writeln!(stderr, "hookbox: error: --record {}: {e}", path.display());
            }
        }
    }
    if let (Some(ctx), Some(recorder), Some(out)) = (&journal, &recorder, journal_out) {
        let stop = match &outcome {
            Ok(r) => r.stop_reason,
            Err(e) => e.report.stop_reason,
        };
        let file = journal_file(ctx, recorder, journal_prompt, args.session.clone(), stop);
        let path = out.path().to_path_buf();
        match file.to_text().and_then(|text| out.finish(&text)) {
            Ok(()) => {
                let imports: usize = file.imports.values().map(Vec::len).sum();
                let _ = writeln!(
                    stderr,
                    "[journal] {} hook call(s), {imports} import value(s), {} tool result(s) written to {}",
                    file.calls.len(),
                    file.tools.len(),
                    path.display()
                );
                for (plugin, dropped) in &file.imports_cut {
                    let _ = writeln!(
                        stderr,
                        "[journal] plugin `{plugin}`: {dropped} import value(s) past the cap of {MAX_PLUGIN_ENTRIES} not written; its replay cannot be exact"
                    );
                }
            }
            Err(e) => {
                lost_output = true;
                let _ = writeln!(stderr, "hookbox: error: --journal {}: {e}", path.display());
            }
        }
    }
    let (record, code) = match outcome {
        Ok(r) => (r, 0),
        Err(e) => {
            let _ = writeln!(stderr, "hookbox: run failed: {}", e.info);
            (*e.report, EXIT_RUN_ERROR)
        }
    };
    let code = if lost_output && code == 0 { EXIT_RUN_ERROR } else { code };
    summary(&record, stderr);
    if args.json {
        let _ = writeln!(stdout, "{}", record_json(&record));
    } else if let Some(answer) = &record.final_answer {
        let _ = writeln!(stdout, "{answer}");
    }
    Ok(code)
}

/// The runtime a run (or a replay) is driven on: two workers, timers and I/O.
fn tokio_runtime() -> Result<tokio::runtime::Runtime, BadInput> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| BadInput(anyhow::anyhow!("cannot start the tokio runtime: {e}")))
}

/// The journal file of a finished run.
fn journal_file(
    ctx: &JournalContext,
    recorder: &RecordingProvider,
    prompt: String,
    session_id: Option<String>,
    stop_reason: crate::agent::StopReason,
) -> JournalFile {
    let mut manifest = ctx.manifest.clone();
    // Absolute paths, so the journal replays from any folder.
    for entry in &mut manifest.plugins {
        if let Ok(path) = std::fs::canonicalize(&entry.path) {
            entry.path = path;
        }
        for dir in &mut entry.dirs {
            if let Ok(path) = std::fs::canonicalize(&dir.host) {
                dir.host = path;
            }
        }
    }
    JournalFile {
        format: JOURNAL_FORMAT.to_string(),
        version: JOURNAL_VERSION,
        hookbox_version: env!("CARGO_PKG_VERSION").to_string(),
        run_id: ctx.journal.run_id(String::new()),
        session_id,
        prompt,
        provider: ctx.provider.clone(),
        model: ctx.model.clone(),
        manifest,
        plugin_blake3: ctx.hashes.clone(),
        responses: recorder.session(),
        tools: ctx.journal.tools(),
        imports: ctx.journal.imports(),
        imports_cut: ctx.journal.cut(),
        calls: ctx.journal.calls(),
        stop_reason,
    }
}

/// `hookbox replay JOURNAL`: exit 0 when every hook call decided as recorded,
/// 1 when one differs (the first difference is printed), 2 on bad input.
fn replay(args: &ReplayArgs, stdout: &mut dyn Write, stderr: &mut dyn Write) -> Result<i32, BadInput> {
    let file = JournalFile::load(&args.journal).map_err(|e| BadInput(e.into()))?;
    let manifest = match &args.config {
        Some(path) => Manifest::load(path).map_err(|e| BadInput(e.into()))?,
        None => file.manifest.clone(),
    };
    let journal = RunJournal::replaying(&file);
    check_runtime(&manifest).map_err(BadInput)?;
    let runtime = runtime_with(manifest.runtime).map_err(|e| BadInput(e.into()))?;
    let source = |i: usize, entry: &PluginEntry| match &args.config {
        Some(config) => format!("{} (plugins[{i}])", config.display()),
        None => format!("{} (plugin `{}`, {})", args.journal.display(), entry.display_name(), entry.path.display()),
    };
    let Loaded { hooks, mut notes, hashes } =
        load_plugins(&runtime, &manifest, source, Some(&journal)).map_err(BadInput)?;
    notes.splice(0..0, runtime.notes().iter().cloned());
    notes.extend(subscription_notes(&manifest));
    for (name, now) in &hashes {
        match file.plugin_blake3.get(name) {
            Some(then) if then != now => notes.push(format!(
                "plugin `{name}` changed since the recording (blake3 {} → {})",
                then.get(..12).unwrap_or(then),
                now.get(..12).unwrap_or(now)
            )),
            None => notes.push(format!("plugin `{name}` is not in the recording")),
            _ => {}
        }
    }
    for name in file.plugin_blake3.keys() {
        if !manifest.plugins.iter().any(|p| p.display_name() == *name) {
            notes.push(format!("plugin `{name}` of the recording is not loaded"));
        }
    }
    let provider = JournalProvider::new(&file, &args.journal).map_err(|e| BadInput(e.into()))?;
    for note in &notes {
        let _ = writeln!(stderr, "[note] {note}");
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let agent = Agent::new(Arc::new(provider), Vec::new(), manifest.agent.clone())
        .with_journal(journal.clone())
        .with_trace(Arc::new(move |event: &Event, trace: &DispatchTrace| {
            for line in trace_lines(event, trace) {
                let _ = tx.send(line);
            }
        }));
    let mut chain = HookChain::new(hooks).with_journal(journal.clone());
    let handle = RunHandle::new();
    terminal::spawn_pause_resumer(handle.clone());
    let rt = tokio_runtime()?;
    let prompt = file.prompt.clone();
    let session = file.session_id.clone();
    let outcome = rt.block_on(async move {
        match session {
            Some(id) => agent.run_in_session(&prompt, &mut chain, handle, &id).await,
            None => agent.run_with_handle(&prompt, &mut chain, handle).await,
        }
    });
    while let Ok(line) = rx.try_recv() {
        let _ = writeln!(stderr, "{line}");
    }
    let (stop, failure) = match &outcome {
        Ok(r) => (r.stop_reason, None),
        Err(e) => (e.report.stop_reason, Some(e.info.to_string())),
    };
    let comparison = compare(&file.calls, &journal.calls());
    let divergences = journal.divergences();
    let same_end = stop == file.stop_reason;
    let same = comparison.same() && divergences.is_empty() && same_end;
    if args.json {
        let report = serde_json::json!({
            "same": same,
            "recorded_calls": comparison.recorded_calls,
            "replayed_calls": comparison.replayed_calls,
            "first_difference": comparison.first_difference,
            "missing_plugins": comparison.missing_plugins,
            "added_plugins": comparison.added_plugins,
            "import_divergences": divergences,
            "recorded_stop_reason": file.stop_reason,
            "replayed_stop_reason": stop,
            "replay_error": failure,
        });
        let _ = writeln!(stdout, "{report}");
    } else {
        let mut lines = Vec::new();
        if let Some(d) = &comparison.first_difference {
            lines.push(format!("differs at {}", d.describe()));
        }
        for plugin in &comparison.missing_plugins {
            lines.push(format!("differs: plugin `{plugin}` has calls in the recording and none in the replay"));
        }
        for plugin in &comparison.added_plugins {
            lines.push(format!("differs: plugin `{plugin}` is not in the recording (its calls are not compared)"));
        }
        if !same_end {
            lines.push(format!(
                "differs: the replay ended with stop reason {}, the recording with {}",
                wire_name(&stop),
                wire_name(&file.stop_reason)
            ));
        }
        lines.extend(divergences.iter().map(|d| format!("differs: {d}")));
        if lines.is_empty() {
            lines.push(format!(
                "the same: {} hook call(s), every directive as recorded (stop reason {})",
                comparison.replayed_calls,
                wire_name(&stop)
            ));
        }
        if let Some(failure) = &failure {
            lines.push(format!("the replayed run raised: {failure}"));
        }
        for line in lines {
            let _ = writeln!(stdout, "replay: {line}");
        }
    }
    Ok(if same { 0 } else { EXIT_RUN_ERROR })
}

/// The serde name of a value (e.g. `end_turn`), for the readable trace.
fn wire_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".to_string(),
    }
}

/// The `--json` object: the run record, with `iteration` on every event (null where none).
pub fn record_json(record: &RunResult) -> serde_json::Value {
    let mut v = serde_json::to_value(record).unwrap_or(serde_json::Value::Null);
    if let Some(events) = v.get_mut("events").and_then(|e| e.as_array_mut()) {
        for e in events {
            if let Some(obj) = e.as_object_mut() {
                obj.entry("iteration").or_insert(serde_json::Value::Null);
            }
        }
    }
    v
}

/// The readable trace lines for one event and what its hooks did.
fn trace_lines(event: &Event, trace: &DispatchTrace) -> Vec<String> {
    let mut out = Vec::new();
    let iter = event.iteration().map(|i| format!(" iteration={i}")).unwrap_or_default();
    let detail = match event {
        Event::RunStart { model, provider, .. } => format!(" model={model} provider={provider}"),
        Event::IterationStart { loop_counter, .. } => format!(" loop_counter={loop_counter}"),
        Event::ModelResponse { tool_calls, finish_reason, .. } => {
            format!(" tool_calls={} finish_reason={}", tool_calls.len(), wire_name(finish_reason))
        }
        Event::ToolCallStart { call, .. } | Event::BeforeToolCall { call, .. } => {
            format!(" tool={} id={} args={}", call.name, call.id, call.arguments)
        }
        Event::ToolCallResult { tool_name, success, result, .. } => {
            format!(" tool={tool_name} success={success} result={:?}", crate::hooks::wasm::truncate_chars(result, 80))
        }
        Event::IterationComplete { tools_called, usage, .. } => format!(
            " tools_called={tools_called:?} input_tokens={} output_tokens={} cost={:.6}",
            usage.input_tokens, usage.output_tokens, usage.cost
        ),
        Event::FinalAnswer { .. } | Event::RequestStart { .. } => String::new(),
        Event::RunEnd { iterations, usage, .. } => format!(" iterations={iterations} cost={:.6}", usage.cost),
    };
    out.push(format!("[event] {}{iter}{detail}", event.kind()));
    for log in &trace.logs {
        out.push(format!("  [{}:{}] {}", log.plugin, log.level, squash(&log.message)));
    }
    for d in &trace.directives {
        let value = serde_json::to_value(&d.directive)
            .ok()
            .and_then(|v| v.get("value").cloned())
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        let note = match (&d.note, d.honoured) {
            (Some(n), false) => format!(" (ignored: {n})"),
            (Some(n), true) => format!(" ({n})"),
            (None, _) => String::new(),
        };
        out.push(format!("  [directive] {} -> {}{value}{note}", d.plugin, d.directive.action()));
    }
    for s in &trace.suspensions {
        out.push(format!("  [suspended] {} ({}): {}", s.plugin, wire_name(&s.reason), s.message));
    }
    for f in &trace.failures {
        out.push(format!(
            "  [hook failure] {} {}: {} (fuel used {}, {} µs)",
            f.plugin,
            f.kind.as_str(),
            squash(&f.message),
            f.fuel_used,
            f.duration_us
        ));
    }
    out
}

fn summary(record: &RunResult, stderr: &mut dyn Write) {
    let _ = writeln!(
        stderr,
        "[run] stop_reason={} iterations={} requests={} input_tokens={} output_tokens={} cost=${:.6} hook_failures={}",
        wire_name(&record.stop_reason),
        record.iterations,
        record.requests,
        record.usage.input_tokens,
        record.usage.output_tokens,
        record.usage.cost,
        record.hook_failures.len()
    );
    for s in &record.plugin_suspensions {
        let _ = writeln!(stderr, "[run] plugin `{}` suspended at `{}`: {}", s.plugin, s.event, s.message);
    }
    if !record.injected_messages.is_empty() {
        let _ = writeln!(stderr, "[run] injected messages delivered: {:?}", record.injected_messages);
    }
    if !record.undelivered_injections.is_empty() {
        let _ = writeln!(stderr, "[run] undelivered injections: {:?}", record.undelivered_injections);
    }
}
