//! Embedding Hookbox (see README.md next to this file): one hook runtime
//! serving two tenants whose plugins arrive as bytes, events dispatched from
//! the embedder's own loop, then a whole Hookbox agent run on recorded model
//! traffic. Every check that fails exits non-zero, so CI catches regressions.
//!
//! Usage: `cargo run -p hookbox-embed-example [PLUGIN_DIR [REPO_ROOT]]`, or set
//! `HOOKBOX_PLUGIN_DIR` / `HOOKBOX_REPO_ROOT`. Defaults: the repository this
//! crate sits in, and `${CARGO_TARGET_DIR:-target}/plugins/wasm32-wasip2/debug`
//! (where `scripts/build-plugins.sh` and the tests put the example plugins).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail, ensure};
use hookbox::{AgentBuilder, Manifest, Workspace, workspace_tools};
use hookbox_sandbox::contract::{ContentBlock, Directive, Event, EventContext, EventKind, ToolCall, Usage};
use hookbox_sandbox::{
    DispatchTrace, FailPolicy, HookChain, HookHandler, HookRuntime, PluginOptions, PluginSource, WasmPlugin,
};

/// The session both tenants' runs claim. Hook state is kept per (session,
/// plugin name), so tenant-scoped plugin names keep their state apart even here.
const SESSION: &str = "shared-session";

/// The tool calls the embedder's loop asks about: tool, arguments, and
/// whether acme's and globex's policies must decline it.
const CALLS: [(&str, &str, bool, bool); 4] = [
    ("delete_file", r#"{"path": ".env"}"#, true, true),
    ("read_file", r#"{"path": ".env"}"#, true, false),
    ("delete_file", r#"{"path": "logs/old.log"}"#, false, true),
    ("create_file", r#"{"path": "test.txt"}"#, false, true),
];

/// The prompt the demo's recorded session (examples/demo/session.json) answers.
const PROMPT: &str = "Delete the file `.env` and create `test.txt`";

/// One tenant: its name and its loaded plugins, in chain order.
struct Tenant {
    name: &'static str,
    plugins: Vec<Arc<WasmPlugin>>,
}

#[tokio::main]
async fn main() -> Result<()> {
    let (root, plugin_dir) = paths();
    println!("repo root:  {}\nplugin dir: {}", root.display(), plugin_dir.display());

    // Step 1. One HookRuntime per process: the wasmtime engine, the instance
    // pool, the epoch ticker and the hook state store, shared by every tenant.
    let runtime = HookRuntime::builder().build()?;

    // Step 2. The components as bytes, as a service would receive uploads.
    let deny_tools = read_component(&plugin_dir, "deny_tools.wasm")?;
    let state_counter = read_component(&plugin_dir, "state_counter.wasm")?;

    // Step 3. Each tenant loads the same bytes with its own config: acme
    // protects secrets, globex is read-only. `message` prefixes the reasons.
    let acme_policy = [("paths", r#"[".env", "*.pem"]"#), ("message", "acme")];
    let globex_policy = [("tools", r#"["delete_file", "create_file"]"#), ("message", "globex")];
    let acme = load_tenant(&runtime, "acme", &deny_tools, &state_counter, &acme_policy).await?;
    let globex = load_tenant(&runtime, "globex", &deny_tools, &state_counter, &globex_policy).await?;

    // Step 4. Dispatch events from our own loop through each tenant's chain.
    let acme_counter = own_loop(&acme, |&(_, _, acme_declines, _)| acme_declines).await?;
    let globex_counter = own_loop(&globex, |&(_, _, _, globex_declines)| globex_declines).await?;
    // Both ran in the same session on one runtime, yet globex started from empty
    // state: acme's saved count is keyed by `acme/state-counter`.
    ensure!(acme_counter.first().map(String::as_str) == Some("start empty"), "acme: {acme_counter:?}");
    ensure!(acme_counter.last().map(String::as_str) == Some("count=4"), "acme: {acme_counter:?}");
    ensure!(
        globex_counter.first().map(String::as_str) == Some("start empty"),
        "globex saw acme's state: {globex_counter:?}"
    );

    // Step 5. A whole Hookbox agent on the same runtime, with recorded traffic.
    agent_run(&root, &plugin_dir, runtime).await?;
    println!("\nall checks passed");
    Ok(())
}

/// The repository root and the plugin directory, from the arguments, the
/// environment, or the defaults (see the crate docs).
fn paths() -> (PathBuf, PathBuf) {
    let mut args = std::env::args_os().skip(1);
    let mut pick = |var: &str| args.next().or_else(|| std::env::var_os(var)).filter(|v| !v.is_empty());
    let plugin_dir = pick("HOOKBOX_PLUGIN_DIR").map(PathBuf::from);
    let root = pick("HOOKBOX_REPO_ROOT").map(PathBuf::from).unwrap_or_else(|| {
        // This crate is examples/embed: the repository is two folders up.
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        here.ancestors().nth(2).unwrap_or(here).to_path_buf()
    });
    let plugin_dir = plugin_dir.unwrap_or_else(|| {
        let target = std::env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()).unwrap_or_else(|| "target".into());
        // An absolute CARGO_TARGET_DIR replaces the root in `join`.
        root.join(target).join("plugins/wasm32-wasip2/debug")
    });
    (root, plugin_dir)
}

/// Reads a component file into memory.
fn read_component(dir: &Path, file: &str) -> Result<Arc<[u8]>> {
    let path = dir.join(file);
    let bytes = std::fs::read(&path).with_context(|| {
        format!("cannot read {} (build the plugins: bash scripts/build-plugins.sh)", path.display())
    })?;
    Ok(bytes.into())
}

/// Loads a tenant's two plugins from bytes: deny-tools with `policy`, then
/// state-counter. Names are tenant-scoped: they tag logs and key hook state.
async fn load_tenant(
    runtime: &HookRuntime,
    tenant: &'static str,
    deny_tools: &Arc<[u8]>,
    state_counter: &Arc<[u8]>,
    policy: &[(&str, &str)],
) -> Result<Tenant> {
    println!("\n== {tenant}: loading deny-tools and state-counter from bytes");
    let config: BTreeMap<String, String> = policy.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect();
    // Per-plugin options: a security policy fails closed (a crash declines the
    // tool) and is entered only at the veto point; limits stay at their defaults.
    let deny_options = PluginOptions {
        fail: FailPolicy::Closed,
        events: Some(vec![EventKind::BeforeToolCall]),
        ..PluginOptions::default()
    };
    let counter_options = PluginOptions {
        events: Some(vec![EventKind::RunStart, EventKind::ToolCallResult]),
        ..PluginOptions::default()
    };
    let mut plugins = Vec::new();
    for (plugin, bytes, config, options) in [
        ("deny-tools", deny_tools, config, deny_options),
        ("state-counter", state_counter, BTreeMap::new(), counter_options),
    ] {
        let name = format!("{tenant}/{plugin}");
        // `label` names the bytes in errors, e.g. an upload's id and version.
        let source = PluginSource::Bytes { label: format!("{name}@1"), bytes: bytes.clone() };
        // load_async compiles on a blocking thread, never on an async worker.
        let loaded = runtime.load_async(&name, source, config, options).await?;
        println!("  loaded {name} (blake3 {}...)", &loaded.plugin.content_hash()[..12]);
        for note in &loaded.notes {
            println!("  note: {note}");
        }
        plugins.push(loaded.plugin);
    }
    Ok(Tenant { name: tenant, plugins })
}

/// One run of the embedder's own agent loop for `tenant`: run-start, then for
/// each of [`CALLS`] a before-tool-call veto and a tool-call-result, then
/// run-end. Checks each decision against `declines`; returns the lines
/// state-counter logged.
async fn own_loop(tenant: &Tenant, declines: impl Fn(&(&str, &str, bool, bool)) -> bool) -> Result<Vec<String>> {
    println!("\n== {}: our own loop, session `{SESSION}`", tenant.name);
    // Fresh hooks for each run: a WasmHook keeps one instance for the run's events.
    let hooks: Vec<Box<dyn HookHandler>> = tenant.plugins.iter().map(|p| Box::new(p.hook()) as _).collect();
    let mut chain = HookChain::new(hooks);
    let mut trace = DispatchTrace::default();
    let run_start = Event::RunStart {
        run_id: format!("{}-run-1", tenant.name),
        session_id: SESSION.into(),
        model: "my-model".into(),
        provider: "my-loop".into(),
        user_content: vec![ContentBlock::Text("Tidy up the workspace".into())],
    };
    let decision = chain.dispatch(&run_start, &EventContext::default(), &mut trace).await;
    ensure!(decision.terminal.is_none(), "{}: run-start ended with {:?}", tenant.name, decision.terminal);

    for (i, case) in CALLS.iter().enumerate() {
        let (tool, args, ..) = *case;
        let call = ToolCall { id: format!("call-{i}"), name: tool.into(), arguments: args.into() };
        let decision =
            chain.dispatch(&Event::BeforeToolCall { iteration: 1, call }, &EventContext::default(), &mut trace).await;
        // The Decision after the chain rules: a terminal skip-tool declines the call.
        let (ran, result) = match decision.terminal {
            None => (true, format!("{tool} done")), // a real loop runs the tool here
            Some(Directive::SkipTool(reason)) => (false, reason.unwrap_or_default()),
            Some(other) => bail!("{}: unexpected `{}` for {tool} {args}", tenant.name, other.action()),
        };
        println!("  {tool:<11} {args:<26} -> {}", if ran { "runs".to_string() } else { format!("declined: {result}") });
        let should = if ran { "" } else { "not " };
        ensure!(ran != declines(case), "{}: {tool} {args} should {should}have been declined", tenant.name);
        // Each declined reason comes from this tenant's own config.
        ensure!(ran || result.starts_with(tenant.name), "{}: reason from another config: {result}", tenant.name);
        // Every call gets a result event, declined ones with success = false.
        let done = Event::ToolCallResult {
            iteration: 1,
            tool_name: tool.into(),
            tool_call_id: format!("call-{i}"),
            result,
            truncated: false,
            success: ran,
            duration_ms: 0,
            reported_cost: None,
            cost_estimated: false,
            arguments: String::new(),
            result_data: None,
        };
        chain.dispatch(&done, &EventContext::default(), &mut trace).await;
    }
    chain
        .dispatch(
            &Event::RunEnd { iterations: 1, usage: Usage::default(), error: None },
            &EventContext::default(),
            &mut trace,
        )
        .await;
    // run-end hooks run beside the loop; drain waits for them before we read the trace.
    chain.drain(&mut trace).await;
    ensure!(trace.failures.is_empty(), "{}: hook failures: {:?}", tenant.name, trace.failures);
    let counter = format!("{}/state-counter", tenant.name);
    let lines: Vec<String> = trace.logs.iter().filter(|l| l.plugin == counter).map(|l| l.message.clone()).collect();
    println!("  {counter} logged: {}", lines.join(", "));
    Ok(lines)
}

/// A Hookbox agent run on the demo: its manifest (audit-log, then deny-tools
/// on `.env`, `*.pem`, `secrets/**`), the recorded OpenAI session in which the
/// model deletes `.env` and creates `test.txt`, and tools confined to a
/// temporary copy of its workspace.
async fn agent_run(root: &Path, plugin_dir: &Path, runtime: HookRuntime) -> Result<()> {
    println!("\n== a Hookbox agent run (replayed model traffic)");
    let demo = root.join("examples/demo");
    let mut manifest = Manifest::load(&demo.join("hookbox.toml"))?;
    // The manifest's plugin paths point into ../../target; take the files from plugin_dir.
    for plugin in &mut manifest.plugins {
        let file = plugin.path.file_name().context("a plugin path without a file name")?;
        plugin.path = plugin_dir.join(file);
    }
    let work = tempfile::tempdir()?; // the demo workspace is flat: copy its files
    for entry in std::fs::read_dir(demo.join("workspace"))? {
        let entry = entry?;
        std::fs::copy(entry.path(), work.path().join(entry.file_name()))?;
    }
    let provider =
        hookbox::providers::model_from_spec(&format!("replay:{}", demo.join("session.json").display()), None)?;
    let assembled = AgentBuilder::new(manifest)
        .provider(provider)
        .tools(workspace_tools(Arc::new(Workspace::open(work.path())?)))
        .runtime(runtime) // the same engine and pool as the tenants above
        .build()?;
    let mut chain = assembled.chain(); // fresh hooks for this run
    let result = assembled.agent().run(PROMPT, &mut chain).await?;

    for log in result.hook_logs.iter().filter(|l| l.plugin == "audit-log") {
        println!("  [audit-log] {}", log.message);
    }
    for d in &result.directives {
        println!("  directive: {} at {} -> {:?} (honoured: {})", d.plugin, d.event, d.directive, d.honoured);
    }
    println!("  final answer: {}", result.final_answer.as_deref().unwrap_or("(none)"));
    // The recorded model claims `.env` is gone; the workspace says otherwise.
    ensure!(work.path().join(".env").exists(), "`.env` was deleted: deny-tools did not hold");
    ensure!(work.path().join("test.txt").exists(), "`test.txt` was not created");
    println!("  workspace after the run: `.env` survived, `test.txt` was created");
    let skips = result.directives.iter().filter(|d| d.honoured && matches!(d.directive, Directive::SkipTool(_)));
    ensure!(skips.count() == 1, "expected one honoured skip-tool: {:?}", result.directives);
    Ok(())
}
