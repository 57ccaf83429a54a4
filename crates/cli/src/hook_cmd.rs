//! `hookbox hook --format AGENT`: a command hook for agents that spawn one
//! process per event (Claude Code, Codex CLI, Gemini CLI, Cursor). It reads
//! the agent's hook input on stdin and writes what that agent reads on
//! stdout, deciding either locally with the plugins of a hookbox.toml
//! (`--config`: the component cache makes a cached plugin load in
//! milliseconds, and hook state is kept per agent session in the local
//! database) or by asking a `hookbox serve` (`--url`).
//!
//! Exit codes: 0 with the agent's JSON on stdout (a veto is in the JSON);
//! when no hook could be asked (the config does not load, the server does
//! not answer): 1 with the reason on stderr (`--fail open`, the default:
//! the agents read 1 as a non-blocking error), or, with `--fail closed`, a
//! denying answer for a tool or a prompt (exit 0), and 2 with the reason on
//! stderr for input that cannot be read (the agents read 2 as "block").

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use hookbox::contract::EventContext;
use hookbox::{AgentBuilder, CachePolicy, DispatchTrace, Manifest};
use hookbox_agents::{AgentEvent, Decision, Format, Reply};

use crate::{BadInput, Input, escape, paths, session};

/// What happens when no hook can be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FailMode {
    /// The event passes; the reason goes to stderr with exit code 1.
    Open,
    /// A tool call or a prompt is blocked with the reason.
    Closed,
}

#[derive(Debug, clap::Args)]
pub(crate) struct HookArgs {
    /// The agent whose hook protocol stdin and stdout speak: claude-code, codex, gemini or cursor.
    #[arg(long, value_name = "AGENT")]
    pub(crate) format: String,
    /// Decide locally with the plugins of this hookbox.toml (no server).
    #[arg(long, value_name = "FILE", conflicts_with = "url", required_unless_present = "url")]
    pub(crate) config: Option<PathBuf>,
    /// Ask the `hookbox serve` at this base URL (`POST URL/v1/hooks/AGENT`),
    /// with the tenant key in $HOOKBOX_API_KEY.
    #[arg(long, value_name = "URL")]
    pub(crate) url: Option<String>,
    /// With --url: the plugins to ask, comma-separated (default: the tenant's active ones).
    #[arg(long, value_name = "NAMES")]
    pub(crate) plugins: Option<String>,
    /// With --config: the database hook state is kept in (default: hookbox.db in the data folder).
    #[arg(long, value_name = "FILE", conflicts_with = "url")]
    pub(crate) db: Option<PathBuf>,
    /// When no hook can be asked: `open` lets the event pass, `closed` blocks a tool call or prompt.
    #[arg(long, value_enum, default_value = "open")]
    pub(crate) fail: FailMode,
    /// With --url: how long to wait for the server's answer, in ms.
    #[arg(long, value_name = "MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub(crate) timeout_ms: u64,
}

/// Exit code for "no hook could be asked" with `--fail open`.
const EXIT_NOT_ASKED: i32 = 1;
/// Exit code the agents read as "block" (the reason on stderr).
const EXIT_BLOCK: i32 = 2;

/// Answers one hook call; returns the exit code.
pub(crate) fn hook(
    args: &HookArgs,
    input: Input,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<i32, BadInput> {
    let format: Format = args.format.parse().map_err(|e: hookbox_agents::AgentError| BadInput(e.into()))?;
    if args.plugins.is_some() && args.url.is_none() {
        return Err(BadInput(anyhow::anyhow!(
            "--plugins picks a server's plugins (with --url); with --config, list them in the file"
        )));
    }
    let block_or_pass = |stderr: &mut dyn Write, reason: &str| {
        let _ = writeln!(stderr, "hookbox hook: {}", escape::line(reason));
        if args.fail == FailMode::Closed { EXIT_BLOCK } else { EXIT_NOT_ASKED }
    };
    let body = match paths::read_capped("stdin", input, hookbox_agents::MAX_INPUT_BYTES as u64) {
        Ok(body) => body,
        Err(e) => return Ok(block_or_pass(stderr, &crate::one_line(&e))),
    };
    let event = match hookbox_agents::parse(format, body.as_bytes()) {
        Ok(event) => event,
        Err(e) => return Ok(block_or_pass(stderr, &format!("the {format} hook input: {e}"))),
    };
    if event.events.is_empty() {
        return Ok(emit(&hookbox_agents::answer(&event, &Decision::default()), stdout, stderr));
    }
    let decided = match (&args.config, &args.url) {
        (Some(config), _) => local(args, config, &event),
        (None, Some(url)) => remote(args, url, &event, &body).map(|reply| (reply, Vec::new())),
        (None, None) => Err(anyhow::anyhow!("give --config FILE or --url URL")),
    };
    match decided {
        Ok((reply, failures)) => {
            // The agents show a hook's stderr to the user (Claude Code in its
            // transcript): a plugin that failed is never silent.
            for failure in failures {
                let _ = writeln!(stderr, "hookbox hook: {}", escape::line(&failure));
            }
            Ok(emit(&reply, stdout, stderr))
        }
        Err(e) => {
            let reason = format!("no hook could be asked: {}", crate::one_line(&e));
            if args.fail == FailMode::Closed {
                let _ = writeln!(stderr, "hookbox hook: {}", escape::line(&reason));
                return Ok(emit(&hookbox_agents::failure_answer(&event, &reason, true), stdout, stderr));
            }
            Ok(block_or_pass(stderr, &reason))
        }
    }
}

/// Writes `reply`: its JSON on stdout, its stderr text; returns its exit code.
fn emit(reply: &Reply, stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32 {
    let _ = write!(stdout, "{}", reply.stdout());
    let _ = stdout.flush();
    if let Some(text) = &reply.stderr {
        let _ = writeln!(stderr, "{}", escape::line(text));
    }
    reply.exit_code
}

/// Decides with the plugins of `config`, hook state in the local database;
/// returns the answer and a line per hook failure.
fn local(args: &HookArgs, config: &std::path::Path, event: &AgentEvent) -> anyhow::Result<(Reply, Vec<String>)> {
    paths::check_input("--config", config, Some(paths::MAX_CONFIG_BYTES))?;
    let mut manifest = Manifest::load(config)?;
    // One instance per plugin for one event: reserving (and, at exit, unmapping)
    // the pooling allocator's address space costs more than it saves (BENCHMARKS.md).
    manifest.runtime.pooling = false;
    let (db, default) = match &args.db {
        Some(db) => (db.clone(), false),
        None => {
            let dir = hookbox::default_data_dir()
                .context("no data folder to keep hook state in (HOOKBOX_DATA_DIR, XDG_DATA_HOME and HOME are unset): give --db FILE")?;
            (dir.join("hookbox.db"), true)
        }
    };
    let store = session::open_db(&db, default, None)?;
    let config_path = config.to_path_buf();
    let hooks = AgentBuilder::new(manifest)
        .cache(CachePolicy::Default)
        .state_store(store)
        .plugin_source(move |i, _| format!("{} (plugins[{i}])", config_path.display()))
        .build_hooks()?;
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the tokio runtime")?;
    let mut failures = Vec::new();
    let decision = runtime.block_on(async {
        let mut chain = hooks.chain_for(&event.session_id);
        let mut answer_to: Option<Decision> = None;
        for e in &event.events {
            let context = EventContext {
                run_id: event.session_id.clone(),
                session_id: event.session_id.clone(),
                turn: 1,
                iteration: e.iteration().unwrap_or(0),
                max_iterations: 10,
                retries: 0,
            };
            let mut trace = DispatchTrace::default();
            let decision = chain.dispatch(e, &context, &mut trace).await;
            // Observe-only calls run detached: wait for them, so their state is saved.
            chain.drain(&mut trace).await;
            failures.extend(trace.failures.iter().map(|f| {
                format!("plugin `{}` failed at {} ({}): {}", f.plugin, e.kind().as_str(), f.kind.as_str(), f.message)
            }));
            let stops = hookbox_agents::settles(&decision);
            answer_to.get_or_insert(decision);
            if stops {
                break;
            }
        }
        answer_to.unwrap_or_default()
    });
    Ok((hookbox_agents::answer(event, &decision), failures))
}

/// Asks the server at `url`; its answer is the agent's JSON.
fn remote(args: &HookArgs, url: &str, event: &AgentEvent, body: &str) -> anyhow::Result<Reply> {
    let format = event.format;
    let key = std::env::var("HOOKBOX_API_KEY").context("--url: set HOOKBOX_API_KEY to the tenant's key")?;
    let mut endpoint = format!("{}/v1/hooks/{format}", url.trim_end_matches('/'));
    if let Some(plugins) = &args.plugins {
        endpoint.push_str("?plugins=");
        endpoint.push_str(&plugins.replace(['&', '#', ' '], ""));
    }
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the tokio runtime")?;
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(args.timeout_ms.max(1)))
            .build()
            .context("cannot build the HTTP client")?;
        let response = client
            .post(&endpoint)
            .bearer_auth(key.trim())
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .with_context(|| format!("POST {endpoint}"))?;
        let status = response.status();
        // The answer is bounded: a hostile or broken server cannot make this process hold more.
        let bytes = read_bounded(response, hookbox_agents::MAX_INPUT_BYTES).await?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(500)]).into_owned();
            anyhow::bail!("POST {endpoint}: {status}: {text}");
        }
        let json: serde_json::Value = serde_json::from_slice(&bytes).context("the server's answer is not JSON")?;
        anyhow::ensure!(json.is_object(), "the server's answer is not a JSON object");
        Ok(hookbox_agents::Reply { json, ..hookbox_agents::answer(event, &Decision::default()) })
    })
}

/// The body of `response`, at most `cap` bytes.
async fn read_bounded(mut response: reqwest::Response, cap: usize) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.context("reading the server's answer")? {
        anyhow::ensure!(bytes.len() + chunk.len() <= cap, "the server's answer is over {cap} bytes");
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}
