//! The `hookbox` command line, as a library function so tests can drive it
//! in-process ([`main_with_args`]); `src/main.rs` is a thin wrapper.
//!
//! Exit codes: 0 success; 1 the run raised an error (aborted, provider
//! failure, iteration limit); 2 bad input (a one-line error on stderr naming
//! what and where; nothing is written in the workspace).

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use hookbox::CachePolicy;

mod escape;
mod hook_cmd;
#[cfg(feature = "otel")]
mod otel;
mod paths;
mod replay;
mod run;
mod serve_cmd;
mod session;
mod session_cmd;
mod signals;
mod terminal;
mod test_cmd;
mod trace;

pub use trace::record_json;

/// The hidden command that makes `hookbox` a compile worker.
const COMPILE_WORKER_COMMAND: &str = "compile-worker";

/// Exit code for bad input.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code for a run that raised an error.
pub const EXIT_RUN_ERROR: i32 = 1;

#[derive(Debug, Parser)]
#[command(name = "hookbox", version, about = "Run an LLM agent with sandboxed WebAssembly hooks")]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the agent on PROMPT: a readable trace on stderr, the final answer on stdout.
    Run(Box<RunArgs>),
    /// Load and validate a component against the hookbox:hooks/hook world.
    Check {
        /// The component file.
        plugin: PathBuf,
    },
    /// Feed a golden trace's events to a plugin and compare its directives (with fuel and time per event).
    Test(crate::test_cmd::TestArgs),
    /// The sessions a database keeps: list them, show one's conversation, delete one.
    #[command(subcommand)]
    Session(crate::session_cmd::SessionCommand),
    /// Run a run again from its journal (`hookbox run --journal FILE`): the
    /// recorded model responses and tool results, the same plugins, every hook
    /// given the values it got; reports the first hook call that decides differently.
    Replay(ReplayArgs),
    /// Serve Hookbox over HTTP: tenants, a plugin registry, runs, approvals,
    /// evaluate, metrics and an operator console (docs/server.md).
    Serve(crate::serve_cmd::ServeArgs),
    /// A command hook for Claude Code, Codex CLI, Gemini CLI or Cursor: reads
    /// the agent's hook input on stdin, writes its answer on stdout, deciding
    /// with a hookbox.toml's plugins (--config) or a `hookbox serve` (--url)
    /// (docs/agents.md).
    Hook(crate::hook_cmd::HookArgs),
    /// Internal: compile one component from stdin under the limits the
    /// request names (the runtime starts `hookbox compile-worker` for every
    /// compile; see `hookbox_sandbox::compile`).
    #[command(hide = true)]
    CompileWorker,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The journal, written by `hookbox run --journal FILE`.
    pub(crate) journal: PathBuf,
    /// Replay with the plugins and [agent] settings of this hookbox.toml instead
    /// of the journal's (e.g. to see what a changed plugin would have decided).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Without --config: give the journal's plugins the `dirs` and `env`
    /// grants the journal lists (printed first). By default they are removed:
    /// a journal is a file anyone may hand over.
    #[arg(long, conflicts_with = "config")]
    pub(crate) trust_journal_grants: bool,
    /// Print one JSON object with the comparison on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The model: `replay:FILE` plays back a recorded session (offline);
    /// `anthropic:MODEL`, `openai:MODEL`, `openai-responses:MODEL`, `gemini:MODEL`
    /// call the live APIs (keys from ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY).
    #[arg(long)]
    pub(crate) model: String,
    /// The live API's base URL (default: ANTHROPIC_BASE_URL / OPENAI_BASE_URL /
    /// GEMINI_BASE_URL, else the provider's public URL); e.g. an OpenAI-compatible server.
    #[arg(long, value_name = "URL")]
    pub(crate) base_url: Option<String>,
    /// A plugin component to load after those of --config (repeatable; empty config, default limits).
    #[arg(long = "plugin", value_name = "PATH")]
    pub(crate) plugins: Vec<PathBuf>,
    /// The directory the built-in tools may touch; nothing outside it.
    #[arg(long)]
    pub(crate) workspace: PathBuf,
    /// hookbox.toml: agent settings and plugins (with config and limits), in order.
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// The system prompt (overrides [agent] system).
    #[arg(long)]
    pub(crate) system: Option<String>,
    /// Print one JSON object with the whole run record on stdout instead of the answer.
    #[arg(long)]
    pub(crate) json: bool,
    /// Inject each line of FILE into the live run as a user message (`-`: stdin);
    /// a file is watched for new lines until the run ends.
    #[arg(long, value_name = "FILE")]
    pub(crate) inbox: Option<PathBuf>,
    /// Ask on the terminal: approve each tool call a hook asks approval for
    /// (y, N, or the arguments as a JSON object), and "continue? [y/N]" when the run pauses.
    #[arg(long)]
    pub(crate) confirm: bool,
    /// The session this run belongs to, created under this id if it is new:
    /// the run continues its conversation (the earlier turns are sent before
    /// the prompt) and its hooks' saved state, and saves both when the turn
    /// completes. Kept in `--db` (default: hookbox.db in the data folder,
    /// `$HOOKBOX_DATA_DIR`, else `$XDG_DATA_HOME/hookbox`, else
    /// `~/.local/share/hookbox`). Without it, a run is a fresh session
    /// nobody can continue.
    #[arg(long, value_name = "ID")]
    pub(crate) session: Option<String>,
    /// The SQLite file that keeps sessions' conversations and hook state
    /// (created if missing), so a later `--session ID` run in another
    /// process continues from it. `--state-db` is the older name.
    #[arg(long = "db", visible_alias = "state-db", value_name = "FILE")]
    pub(crate) state_db: Option<PathBuf>,
    /// What to do with messages injected too late for a turn to deliver:
    /// `surface` (report them as undelivered) or `new_turn` (send them as
    /// the next turn, up to `--max-follow-up-turns`); overrides [session].
    #[arg(long, value_name = "POLICY", value_parser = ["surface", "new_turn"])]
    pub(crate) late_injection_policy: Option<String>,
    /// The most follow-up turns `new_turn` may add to this run (default 3;
    /// overrides [session] max_follow_up_turns).
    #[arg(long, value_name = "N")]
    pub(crate) max_follow_up_turns: Option<u32>,
    /// Write every model response of the run to FILE, a replay session that
    /// `--model replay:FILE` plays back exactly (same responses, same events).
    #[arg(long, value_name = "FILE")]
    pub(crate) record: Option<PathBuf>,
    /// Write the run's journal to FILE: every value hooks got from `now`,
    /// `random`, `uuid`, `sleep`, `get-state` and WASI's clocks and random
    /// numbers, every model response and tool result, and every hook call's
    /// directive. `hookbox replay FILE` runs the run again from it.
    #[arg(long, value_name = "FILE")]
    pub(crate) journal: Option<PathBuf>,
    /// Read the prompt from FILE (`-` for stdin) instead of the PROMPT argument.
    #[arg(long, value_name = "FILE", conflicts_with = "prompt")]
    pub(crate) prompt_file: Option<PathBuf>,
    /// Write a golden trace of each plugin's events and answers to FILE with the
    /// plugin's name inserted (`run.jsonl` -> `run.deny-tools.jsonl`), for `hookbox test`.
    #[arg(long, value_name = "FILE")]
    pub(crate) record_trace: Option<PathBuf>,
    /// Allow a workspace at a system folder (`/`, `/usr`, `/etc`, `/home`,
    /// `$HOME` itself...), which is refused otherwise.
    #[arg(long)]
    pub(crate) allow_system_workspace: bool,
    /// The user's prompt.
    #[arg(required_unless_present = "prompt_file")]
    pub(crate) prompt: Option<String>,
}

/// A bad-input error: printed as one line, exit code 2.
#[derive(Debug)]
pub(crate) struct BadInput(pub(crate) anyhow::Error);

/// The `hookbox` process: as `hookbox compile-worker`, a compile worker
/// ([`hookbox::sandbox::compile_worker_main`]) and nothing else; otherwise
/// makes this program the compile worker of every runtime it creates, sets up
/// the host's logs (`HOOKBOX_LOG`), turns on
/// SIGINT/SIGTERM handling for runs (the first signal aborts the run at its
/// next safe point and the partial record and journal are written, exit 130
/// or 143; a second exits at once) and runs the command line of the process
/// with its stdin, stdout and stderr. Returns the exit code.
pub fn main_process() -> i32 {
    if std::env::args_os().nth(1).is_some_and(|a| a == COMPILE_WORKER_COMMAND) {
        // A compile worker: nothing else of the CLI runs (no logs, no signal handling).
        return hookbox::sandbox::compile_worker_main();
    }
    // Every component this process compiles is compiled in a child process
    // with a memory and time bound ([runtime] compile_memory_bytes, compile_timeout_ms).
    match hookbox::sandbox::CompileWorker::current_exe([COMPILE_WORKER_COMMAND]) {
        Ok(worker) => {
            hookbox::sandbox::CompileWorker::set_process_default(worker);
        }
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "hookbox: error: cannot find this program's path for its compile worker: {e}"
            );
            return EXIT_BAD_INPUT;
        }
    }
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOOKBOX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"));
    // Host logs carry paths, names and messages from config files, journals and
    // plugins: each record is escaped for the terminal, and has no colour codes of its own.
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let fmt = tracing_subscriber::fmt::layer().with_ansi(false).with_writer(|| escape::LogWriter).with_filter(filter);
    let registry = tracing_subscriber::registry().with(fmt);
    #[cfg(feature = "otel")]
    let registry = registry.with(otel::layer());
    let _ = registry.try_init();
    signals::enable();
    let code = main_with_args(std::env::args_os(), &mut std::io::stdout(), &mut std::io::stderr());
    #[cfg(feature = "otel")]
    otel::shutdown();
    code
}

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
            let _ = writeln!(stderr, "hookbox: error: {} (see `hookbox --help`)", escape::line(message));
            return EXIT_BAD_INPUT;
        }
        Err(e) => {
            let _ = write!(stdout, "{}", e.render());
            return 0;
        }
    };
    let result = match cli.command {
        Command::Check { plugin } => check(&plugin, stdout),
        Command::Run(args) => crate::run::run(*args, input, stdout, stderr),
        Command::Test(args) => crate::test_cmd::test_command(&args, stdout).map_err(BadInput),
        Command::Replay(args) => crate::replay::replay(&args, stdout, stderr),
        Command::Session(command) => crate::session_cmd::session_command(&command, stdout),
        Command::Serve(args) => crate::serve_cmd::serve(&args, stdout, stderr),
        Command::Hook(args) => crate::hook_cmd::hook(&args, input, stdout, stderr),
        Command::CompileWorker => Ok(hookbox::sandbox::compile_worker_main()),
    };
    match result {
        Ok(code) => code,
        Err(BadInput(e)) => {
            let _ = writeln!(stderr, "hookbox: error: {}", escape::line(&one_line(&e)));
            EXIT_BAD_INPUT
        }
    }
}

/// The error and its causes on one line, skipping a cause whose text the
/// line already holds (thiserror messages often embed their source).
pub(crate) fn one_line(e: &anyhow::Error) -> String {
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
pub(crate) fn squash(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if lines.iter().any(|l| l.starts_with('|') || l.starts_with('^')) {
        let first = lines.first().copied().unwrap_or_default();
        let last = lines.last().copied().unwrap_or_default();
        return if first == last { first.to_string() } else { format!("{first}: {last}") };
    }
    lines.join(" | ")
}

pub(crate) fn check(path: &Path, stdout: &mut dyn Write) -> Result<i32, BadInput> {
    let runtime = cli_runtime(hookbox::sandbox::RuntimeOptions::default()).map_err(BadInput)?;
    let info = runtime.inspect(path).map_err(|e| BadInput(e.into()))?;
    let mut lines = vec![
        format!("ok: {} targets world {} (WIT package version {})", path.display(), info.world, info.version),
        format!("  exports: {}", info.exports.join(", ")),
        "  imports:".to_string(),
    ];
    for import in &info.imports {
        lines.push(format!("    {} ({})", import.name, import.need.describe()));
    }
    let grants = info.grants_needed();
    lines.push(format!("  grants needed: {}", if grants.is_empty() { "none".to_string() } else { grants.join(", ") }));
    for line in lines {
        let _ = writeln!(stdout, "{}", escape::line(&line));
    }
    Ok(0)
}

pub(crate) fn is_stdin(path: &Option<PathBuf>) -> bool {
    path.as_deref() == Some(Path::new("-"))
}

pub(crate) fn read_prompt(args: &RunArgs) -> anyhow::Result<String> {
    match (&args.prompt_file, &args.prompt) {
        (Some(path), _) if path.as_os_str() == "-" => {
            paths::read_capped("--prompt-file -: reading stdin", std::io::stdin(), paths::MAX_PROMPT_BYTES)
        }
        (Some(path), _) => paths::read_file("--prompt-file", path, paths::MAX_PROMPT_BYTES),
        (None, Some(prompt)) => Ok(prompt.clone()),
        (None, None) => anyhow::bail!("no prompt: give PROMPT or --prompt-file"),
    }
}

/// The runtime a run (or a replay) is driven on: two workers, timers and I/O.
/// The hook runtime the CLI uses outside a run (`check`, `test`): default
/// options and the component cache ([`hookbox::default_cache_dir`]).
///
/// Errors: the engine cannot be created.
pub(crate) fn cli_runtime(options: hookbox::sandbox::RuntimeOptions) -> anyhow::Result<hookbox::HookRuntime> {
    let manifest = hookbox::Manifest { runtime: options, ..hookbox::Manifest::default() };
    Ok(hookbox::runtime_for(&manifest, &CachePolicy::Default, None)?)
}

pub(crate) fn tokio_runtime() -> Result<tokio::runtime::Runtime, BadInput> {
    tokio_runtime_with(|b| b)
}

/// Worker threads of the CLI's tokio runtimes.
pub(crate) const WORKER_THREADS: usize = 2;

/// [`tokio_runtime`], with `tune` applied to its builder first (`hookbox
/// serve` sets its I/O event interval).
pub(crate) fn tokio_runtime_with(
    tune: impl FnOnce(&mut tokio::runtime::Builder) -> &mut tokio::runtime::Builder,
) -> Result<tokio::runtime::Runtime, BadInput> {
    tune(tokio::runtime::Builder::new_multi_thread().worker_threads(WORKER_THREADS).enable_all())
        .build()
        .map_err(|e| BadInput(anyhow::anyhow!("cannot start the tokio runtime: {e}")))
}
