//! Hookbox's load test (issue 7): memory, throughput, the agent loop's own
//! share of a run, concurrent sessions, and calls per second. Each mode prints
//! a markdown table (with the command line, the date and the machine load) for
//! `BENCHMARKS.md`; `summary` turns criterion's results into ratio tables.
//!
//! ```text
//! loadtest memory     --plugin deny_tools --plugins 10 --instances 100
//! loadtest throughput --runs 1000 --plugin-set audit_log,deny_tools,noop --workers 2
//! loadtest overhead   --runs 300
//! loadtest sessions   --sessions 10000
//! loadtest calls      --plugin noop --threads 1 --seconds 3
//! loadtest summary    --criterion-dir target/criterion
//! ```
//!
//! Plugins load through a component cache in `target/bench-cache` (the first
//! load of a plugin compiles it once).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use hookbox::sandbox::HookChain;
use hookbox::sandbox::{HookHandler, PluginStats};
use hookbox::sandbox::{HookRuntime, RuntimeOptions, WasmPlugin};
use hookbox::{Agent, AgentConfig};
use hookbox::{Tool, workspace_tools};
use hookbox_bench::agentkit::{
    BenchProvider, CountedHook, Counters, Gate, LiveCounts, TimedHook, load_plugins, scratch_workspace, timed_tools,
};
use hookbox_bench::raw::{self, RawEngine, SyncHook};
use hookbox_bench::{before_tool_call, demo_session, load_average, map_count, plugin_path, repo_root, rss_kib};

const PROMPT: &str = "Delete the file `.env` and create `test.txt`";

#[derive(Parser)]
#[command(name = "loadtest", about = "Hookbox load test (issue 7); prints markdown")]
struct Cli {
    /// Build profile of the Rust plugins: `debug` (opt-level 1) or `release`.
    #[arg(long, global = true, default_value = "debug")]
    profile: String,
    /// Component cache directory (default: target/bench-cache).
    #[arg(long, global = true)]
    cache_dir: Option<PathBuf>,
    /// Hookbox with the on-demand instance allocator instead of its default pooling one.
    #[arg(long, global = true)]
    on_demand: bool,
    /// Hookbox's pool size (`RuntimeOptions::max_instances`; default: Hookbox's default).
    #[arg(long, global = true)]
    max_instances: Option<u32>,
    /// Hookbox's `RuntimeOptions::max_memory_bytes`, in MiB (default: Hookbox's default).
    #[arg(long, global = true)]
    max_memory_mib: Option<u64>,
    /// Hookbox's `RuntimeOptions::copy_on_write = false` (no copy-on-write memory images).
    #[arg(long, global = true)]
    no_copy_on_write: bool,
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// RSS per loaded plugin and per live instance.
    Memory {
        /// The plugin file name (without `.wasm`).
        #[arg(long, default_value = "deny_tools")]
        plugin: String,
        /// Copies of the plugin to load.
        #[arg(long, default_value_t = 10)]
        plugins: usize,
        /// Live instances (hooks that handled one event), spread over the copies.
        #[arg(long, default_value_t = 100)]
        instances: usize,
    },
    /// Wall time of many concurrent replayed runs, with no plugins and with the plugin set.
    Throughput {
        /// Runs per round, all started at once.
        #[arg(long, default_value_t = 1000)]
        runs: usize,
        /// Comma-separated plugin files for each run.
        #[arg(long, default_value = "audit_log,deny_tools,noop")]
        plugin_set: String,
        /// Tokio worker threads.
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// Rounds per configuration (interleaved); the median is reported.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
    /// Where a replayed run's time goes: provider, tools, hooks and the loop itself.
    Overhead {
        /// Sequential runs per configuration.
        #[arg(long, default_value_t = 300)]
        runs: usize,
        /// Comma-separated plugin files.
        #[arg(long, default_value = "audit_log,deny_tools,noop")]
        plugin_set: String,
    },
    /// N concurrent sessions, each with its plugins instantiated and held at its
    /// first model request, then released: memory and wall time.
    Sessions {
        /// Concurrent sessions.
        #[arg(long, default_value_t = 1000)]
        sessions: usize,
        /// Comma-separated plugin files per session ("" for none).
        #[arg(long, default_value = "audit_log,deny_tools,noop")]
        plugin_set: String,
        /// Tokio worker threads.
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// Stop adding sessions (open the gate) once the RSS passes this many GiB.
        #[arg(long, default_value_t = 12.0)]
        max_rss_gib: f64,
    },
    /// Hook calls per second on reused instances, one instance per thread, Hookbox and raw wasmtime.
    Calls {
        /// The plugin file name (without `.wasm`).
        #[arg(long, default_value = "noop")]
        plugin: String,
        /// Threads, each with its own instance.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Seconds per measurement.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Measure only `hookbox` or only `raw` (e.g. under a profiler); default both.
        #[arg(long)]
        only: Option<String>,
    },
    /// Live raw-wasmtime instances (no Hookbox), each after one event: memory,
    /// mappings and time with the on-demand or the pooling allocator.
    RawInstances {
        /// The plugin file name (without `.wasm`).
        #[arg(long, default_value = "deny_tools")]
        plugin: String,
        /// Instances to create and keep.
        #[arg(long, default_value_t = 30_000)]
        instances: u32,
        /// Use the pooling allocator, sized for exactly `instances`.
        #[arg(long)]
        pooling: bool,
        /// `Config::memory_reservation` in MiB (default: wasmtime's 4 GiB).
        #[arg(long)]
        memory_reservation_mib: Option<u64>,
        /// Async stacks in the pool (default: one per instance; these sync calls use none).
        #[arg(long)]
        stacks: Option<u32>,
        /// Turn off copy-on-write memory images (`Config::memory_init_cow(false)`).
        #[arg(long)]
        no_cow: bool,
    },
    /// Markdown tables (with ratios and the issue's goals) from criterion's results.
    Summary {
        /// Criterion's output directory.
        #[arg(long)]
        criterion_dir: Option<PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let args: Vec<String> = std::env::args().skip(1).collect();
    println!("<!-- loadtest {} | load average at start {} -->", args.join(" "), load_average());
    let mut options = RuntimeOptions { pooling: !cli.on_demand, ..RuntimeOptions::default() };
    if let Some(n) = cli.max_instances {
        options.max_instances = n;
    }
    if let Some(mib) = cli.max_memory_mib {
        options.max_memory_bytes = mib << 20;
    }
    if cli.no_copy_on_write {
        options.copy_on_write = false;
    }
    println!(
        "<!-- Hookbox allocator: {}, max_memory_bytes {} MiB, copy_on_write {} -->",
        if options.pooling { format!("pooling, max_instances {}", options.max_instances) } else { "on-demand".into() },
        options.max_memory_bytes >> 20,
        options.copy_on_write
    );
    let cache = Cache { dir: cli.cache_dir.clone().unwrap_or_else(|| repo_root().join("target/bench-cache")), options };
    let cache = &cache;
    match cli.mode {
        Mode::Memory { plugin, plugins, instances } => memory(cache, &cli.profile, &plugin, plugins, instances),
        Mode::Throughput { runs, plugin_set, workers, rounds } => {
            throughput(cache, &cli.profile, runs, &split(&plugin_set), workers, rounds)
        }
        Mode::Overhead { runs, plugin_set } => overhead(cache, &cli.profile, runs, &split(&plugin_set)),
        Mode::Sessions { sessions, plugin_set, workers, max_rss_gib } => {
            sessions_mode(cache, &cli.profile, sessions, &split(&plugin_set), workers, max_rss_gib)
        }
        Mode::Calls { plugin, threads, seconds, only } => {
            calls(cache, &cli.profile, &plugin, threads, seconds, only.as_deref())
        }
        Mode::RawInstances { plugin, instances, pooling, memory_reservation_mib, stacks, no_cow } => {
            raw_instances(&cli.profile, &plugin, instances, pooling, memory_reservation_mib, stacks, !no_cow)
        }
        Mode::Summary { criterion_dir } => {
            summary(&criterion_dir.unwrap_or_else(|| repo_root().join("target/criterion")))
        }
    }
}

fn split(list: &str) -> Vec<String> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// Where plugins are cached and how Hookbox's runtime is configured.
struct Cache {
    dir: PathBuf,
    options: RuntimeOptions,
}

fn runtime(cache: &Cache) -> anyhow::Result<HookRuntime> {
    let runtime = HookRuntime::with_options(cache.options)?.with_cache_dir(&cache.dir);
    let effective = runtime.options();
    if effective != cache.options {
        println!("<!-- Hookbox allocator in effect: pooling {} -->", effective.pooling);
    }
    for note in runtime.notes() {
        println!("\n**Note from Hookbox:** {note}\n");
    }
    Ok(runtime)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn delta_kib(after: u64, before: u64) -> i64 {
    i64::try_from(after).unwrap_or(i64::MAX) - i64::try_from(before).unwrap_or(i64::MAX)
}

fn tokio_rt(workers: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(workers.max(1)).enable_time().build()?)
}

// ---------------------------------------------------------------------------
// memory

fn memory(cache: &Cache, profile: &str, plugin: &str, copies: usize, instances: usize) -> anyhow::Result<()> {
    let runtime = runtime(cache)?;
    let files = vec![plugin.to_string(); copies.max(1)];
    // Warm the cache and the page cache (the first load may compile), then start from a clean slate.
    drop(load_plugins(&runtime, &files[..1], profile)?);
    let (base, _) = rss_kib()?;
    let maps0 = map_count();
    let started = Instant::now();
    let plugins = load_plugins(&runtime, &files, profile)?;
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let (loaded, _) = rss_kib()?;
    let maps1 = map_count();
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    let event = before_tool_call();
    let mut hooks = Vec::with_capacity(instances);
    let mut failures = 0usize;
    let started = Instant::now();
    for i in 0..instances {
        let mut hook = plugins[i % plugins.len()].hook();
        let reply = rt.block_on(hook.on_event(&event));
        failures += usize::from(reply.outcome.is_err());
        hooks.push(hook);
    }
    let inst_ms = started.elapsed().as_secs_f64() * 1e3;
    let (live, hwm) = rss_kib()?;
    let maps2 = map_count();
    let per_plugin = delta_kib(loaded, base) as f64 / copies.max(1) as f64;
    let per_instance = delta_kib(live, loaded) as f64 / instances.max(1) as f64;
    println!(
        "| plugin | profile | plugins loaded | load ms (all) | RSS per plugin KiB | live instances | instantiate+1st call ms (all) | RSS per instance KiB | RSS total MiB (peak) | mappings base/loaded/live | failed calls |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    println!(
        "| {plugin} | {profile} | {copies} | {load_ms:.1} | {per_plugin:.0} | {instances} | {inst_ms:.1} | {per_instance:.0} | {:.1} ({:.1}) | {maps0}/{maps1}/{maps2} | {failures} |",
        mib(live),
        mib(hwm)
    );
    drop(hooks);
    Ok(())
}

// ---------------------------------------------------------------------------
// throughput

struct Outcome {
    wall: Duration,
    ok: usize,
    errors: usize,
    events: usize,
    stats: Vec<PluginStats>,
    hook_failures: usize,
    failure_kinds: BTreeMap<String, usize>,
}

impl Outcome {
    fn hook_calls(&self) -> u64 {
        self.stats.iter().map(|s| s.calls).sum()
    }
}

/// How each hook of a run is wrapped.
#[derive(Clone)]
enum Wrap {
    None,
    Timed(Arc<Counters>),
    Counted(Arc<LiveCounts>),
}

fn chain_for(plugins: &[Arc<WasmPlugin>], wrap: &Wrap) -> HookChain {
    let hooks: Vec<Box<dyn HookHandler>> = plugins
        .iter()
        .map(|p| {
            let hook: Box<dyn HookHandler> = Box::new(p.hook());
            match wrap {
                Wrap::None => hook,
                Wrap::Timed(c) => Box::new(TimedHook::new(hook, c.clone())),
                Wrap::Counted(c) => Box::new(CountedHook::new(hook, c.clone())),
            }
        })
        .collect();
    HookChain::new(hooks)
}

/// Starts `runs` replayed runs at once on `rt` (each with its own provider and
/// hooks), optionally held at a gate, and gathers what they produced.
fn run_many(
    rt: &tokio::runtime::Runtime,
    runs: usize,
    plugins: &[Arc<WasmPlugin>],
    tools: &[Arc<dyn Tool>],
    gate: Option<&Gate>,
    wrap: &Wrap,
) -> anyhow::Result<(Instant, Vec<tokio::task::JoinHandle<RunSummary>>)> {
    let session = demo_session();
    let mut prepared = Vec::with_capacity(runs);
    for _ in 0..runs {
        let provider = Arc::new(BenchProvider::new(&session, None, gate)?);
        let agent = Agent::new(provider, tools.to_vec(), AgentConfig::default());
        prepared.push((agent, chain_for(plugins, wrap)));
    }
    let started = Instant::now();
    let handles = prepared
        .into_iter()
        .map(|(agent, mut chain)| {
            rt.spawn(async move {
                let result = agent.run(PROMPT, &mut chain).await;
                RunSummary::from(result)
            })
        })
        .collect();
    Ok((started, handles))
}

struct RunSummary {
    ok: bool,
    events: usize,
    stats: Vec<PluginStats>,
    failure_kinds: Vec<String>,
}

impl From<Result<hookbox::RunResult, hookbox::RunError>> for RunSummary {
    fn from(r: Result<hookbox::RunResult, hookbox::RunError>) -> Self {
        let (ok, rec) = match r {
            Ok(rec) => (true, rec),
            Err(e) => (false, *e.report),
        };
        RunSummary {
            ok,
            events: rec.events.len(),
            stats: rec.plugin_stats,
            failure_kinds: rec.hook_failures.iter().map(|f| f.kind.as_str().to_string()).collect(),
        }
    }
}

fn gather(
    rt: &tokio::runtime::Runtime,
    started: Instant,
    handles: Vec<tokio::task::JoinHandle<RunSummary>>,
) -> Outcome {
    let mut out = Outcome {
        wall: Duration::ZERO,
        ok: 0,
        errors: 0,
        events: 0,
        stats: Vec::new(),
        hook_failures: 0,
        failure_kinds: BTreeMap::new(),
    };
    for h in handles {
        match rt.block_on(h) {
            Ok(s) => {
                if s.ok {
                    out.ok += 1;
                } else {
                    out.errors += 1;
                }
                out.events += s.events;
                out.hook_failures += s.failure_kinds.len();
                for k in s.failure_kinds {
                    *out.failure_kinds.entry(k).or_default() += 1;
                }
                for (i, st) in s.stats.into_iter().enumerate() {
                    if out.stats.len() <= i {
                        out.stats.push(PluginStats { plugin: st.plugin.clone(), ..PluginStats::default() });
                    }
                    out.stats[i].calls += st.calls;
                    out.stats[i].failures += st.failures;
                    out.stats[i].fuel_used += st.fuel_used;
                    out.stats[i].time_us += st.time_us;
                }
            }
            Err(_) => out.errors += 1,
        }
    }
    out.wall = started.elapsed();
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
}

fn throughput(
    cache: &Cache,
    profile: &str,
    runs: usize,
    plugin_set: &[String],
    workers: usize,
    rounds: usize,
) -> anyhow::Result<()> {
    let runtime = runtime(cache)?;
    let plugins = load_plugins(&runtime, plugin_set, profile)?;
    let (_dir, ws) = scratch_workspace()?;
    let tools = workspace_tools(ws);
    let rt = tokio_rt(workers)?;
    let configs: [(&str, &[Arc<WasmPlugin>]); 2] = [("0 plugins", &[]), ("plugins", &plugins)];
    let mut walls: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut last: Vec<Option<Outcome>> = vec![None, None];
    // One warm-up round of each, then interleaved rounds.
    for round in 0..=rounds {
        for (i, (_, set)) in configs.iter().enumerate() {
            let (started, handles) = run_many(&rt, runs, set, &tools, None, &Wrap::None)?;
            let out = gather(&rt, started, handles);
            if round > 0 {
                walls[i].push(out.wall.as_secs_f64());
                last[i] = Some(out);
            }
        }
    }
    println!(
        "Runs: {runs} concurrent replayed demo runs per round (14 events each), {workers} tokio workers, plugins: {}, {profile} plugins; median of {rounds} rounds (interleaved).\n",
        plugin_set.join(", ")
    );
    println!(
        "| plugins per run | wall ms (median; rounds) | runs/s | events/s | hook calls | hook calls/s | run errors | hook failures |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (i, (label, set)) in configs.iter().enumerate() {
        let Some(out) = &last[i] else { continue };
        let wall = median(walls[i].clone());
        let all: Vec<String> = walls[i].iter().map(|w| format!("{:.0}", w * 1e3)).collect();
        let calls = out.hook_calls();
        let label =
            if set.is_empty() { (*label).to_string() } else { format!("{} ({})", set.len(), plugin_set.join(", ")) };
        println!(
            "| {label} | {:.0} ({}) | {:.0} | {:.0} | {calls} | {:.0} | {} | {} {:?} |",
            wall * 1e3,
            all.join(", "),
            runs as f64 / wall,
            out.events as f64 / wall,
            calls as f64 / wall,
            out.errors,
            out.hook_failures,
            out.failure_kinds
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// overhead

fn overhead(cache: &Cache, profile: &str, runs: usize, plugin_set: &[String]) -> anyhow::Result<()> {
    let runtime = runtime(cache)?;
    let plugins = load_plugins(&runtime, plugin_set, profile)?;
    let (_dir, ws) = scratch_workspace()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    let session = demo_session();
    // Per configuration: per-run (wall, provider, tools, hooks) in µs.
    let mut samples: [Vec<[f64; 4]>; 2] = [Vec::new(), Vec::new()];
    let mut ok = [0usize; 2];
    let sets: [&[Arc<WasmPlugin>]; 2] = [&[], &plugins];
    for i in 0..(runs + 10) {
        for (c, set) in sets.iter().enumerate() {
            let counters = Arc::new(Counters::default());
            let provider = Arc::new(BenchProvider::new(&session, Some(counters.clone()), None)?);
            let tools = timed_tools(workspace_tools(ws.clone()), &counters);
            let agent = Agent::new(provider, tools, AgentConfig::default());
            let mut chain = chain_for(set, &Wrap::Timed(counters.clone()));
            let started = Instant::now();
            let result = rt.block_on(agent.run(PROMPT, &mut chain));
            let wall = started.elapsed().as_secs_f64() * 1e6;
            if i < 10 {
                continue; // warm-up
            }
            ok[c] += usize::from(result.is_ok());
            let us = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64 / 1e3;
            samples[c].push([wall, us(&counters.provider_ns), us(&counters.tools_ns), us(&counters.hooks_ns)]);
        }
    }
    println!(
        "{runs} sequential replayed demo runs per configuration (interleaved, after 10 warm-up runs each), current-thread runtime, plugins: {}, {profile} plugins. Medians per run, µs; `loop` = wall − provider − tools − hooks (the agent loop's own work: events, records, chain rules, messages).\n",
        plugin_set.join(", ")
    );
    println!(
        "| plugins | wall | provider (replay decode) | tools | hooks | loop | loop share | hooks share | runs ok |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (c, set) in sets.iter().enumerate() {
        let col = |k: usize| median(samples[c].iter().map(|s| s[k]).collect());
        let own = median(samples[c].iter().map(|s| s[0] - s[1] - s[2] - s[3]).collect());
        let wall = col(0);
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} % | {:.0} % | {}/{} |",
            set.len(),
            wall,
            col(1),
            col(2),
            col(3),
            own,
            100.0 * own / wall,
            100.0 * col(3) / wall,
            ok[c],
            runs
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// sessions

fn sessions_mode(
    cache: &Cache,
    profile: &str,
    sessions: usize,
    plugin_set: &[String],
    workers: usize,
    max_rss_gib: f64,
) -> anyhow::Result<()> {
    let runtime = runtime(cache)?;
    let plugins = load_plugins(&runtime, plugin_set, profile)?;
    let (_dir, ws) = scratch_workspace()?;
    let tools = workspace_tools(ws);
    let rt = tokio_rt(workers)?;
    // Warm up the code paths with a few ungated runs.
    let (s, h) = run_many(&rt, 4, &plugins, &tools, None, &Wrap::None)?;
    gather(&rt, s, h);
    let (base, _) = rss_kib()?;
    let maps0 = map_count();
    let (open, arrived, gate) = Gate::new();
    let counts = Arc::new(LiveCounts::default());
    // Sessions start in batches of 100; each batch must reach the gate before the
    // next starts, and none starts once the RSS or the number of memory mappings
    // (Linux's vm.max_map_count: past it mmap fails, and a failed host allocation
    // aborts the process) is near its cap.
    let cap_kib = (max_rss_gib * 1024.0 * 1024.0) as u64;
    let max_maps = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(65_530);
    let maps_cap = max_maps.saturating_sub(3_000);
    let mut capped: Option<String> = None;
    let started = Instant::now();
    let mut handles = Vec::with_capacity(sessions);
    while handles.len() < sessions {
        let batch = (sessions - handles.len()).min(100);
        let (_, mut more) = run_many(&rt, batch, &plugins, &tools, Some(&gate), &Wrap::Counted(counts.clone()))?;
        handles.append(&mut more);
        loop {
            let n = arrived.load(Ordering::SeqCst);
            let finished = handles.iter().filter(|h| h.is_finished()).count();
            if n + finished >= handles.len() {
                break;
            }
            if started.elapsed() > Duration::from_secs(900) {
                bail!("only {n} of {sessions} sessions reached the gate in 900 s");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        if rss_kib()?.0 > cap_kib {
            capped = Some(format!("RSS cap {max_rss_gib} GiB"));
        } else if map_count() > maps_cap {
            capped = Some(format!("{maps_cap} mappings (vm.max_map_count {max_maps} − 3,000)"));
        }
        if capped.is_some() {
            break;
        }
    }
    let to_gate = started.elapsed();
    let at_gate = arrived.load(Ordering::SeqCst);
    let (held, _) = rss_kib()?;
    let maps1 = map_count();
    let released = Instant::now();
    open.send_replace(true);
    let out = gather(&rt, started, handles);
    let after_gate = released.elapsed();
    let (_, hwm) = rss_kib()?;
    let delta = delta_kib(held, base).max(0) as u64;
    let per_session = delta as f64 / at_gate.max(1) as f64;
    let instances = counts.live.load(Ordering::SeqCst);
    let inst_failed = counts.instantiate_failed.load(Ordering::SeqCst);
    println!(
        "| sessions held | plugins each | live instances (failed to instantiate) | to the gate s | RSS at the gate MiB (Δ) | Δ per session KiB | Δ per live instance KiB | released → done s | total s | peak RSS MiB | mappings | run errors | hook failures |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let per_instance =
        if plugins.is_empty() { "–".to_string() } else { format!("{:.0}", delta as f64 / instances.max(1) as f64) };
    println!(
        "| {at_gate}{} | {} | {instances} ({inst_failed}) | {:.2} | {:.0} ({:.0}) | {per_session:.0} | {per_instance} | {:.2} | {:.2} | {:.0} | {maps0} → {maps1} | {} | {} {:?} |",
        capped.map_or(String::new(), |why| format!(" of {sessions}: stopped at {why}")),
        plugins.len(),
        to_gate.as_secs_f64(),
        mib(held),
        mib(delta),
        after_gate.as_secs_f64(),
        out.wall.as_secs_f64(),
        mib(hwm),
        out.errors,
        out.hook_failures,
        out.failure_kinds
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// calls

fn calls(
    cache: &Cache,
    profile: &str,
    plugin: &str,
    threads: usize,
    seconds: f64,
    only: Option<&str>,
) -> anyhow::Result<()> {
    let (do_hookbox, do_raw) = (only != Some("raw"), only != Some("hookbox"));
    let runtime = runtime(cache)?;
    let loaded = load_plugins(&runtime, &[plugin.to_string()], profile)?;
    let wasm: Arc<WasmPlugin> = loaded.into_iter().next().context("no plugin loaded")?;
    let path = plugin_path(plugin, profile);
    let config = Arc::new(hookbox_bench::agentkit::plugin_config(plugin));
    let raw_engine = Arc::new(RawEngine::new(true)?);
    let component = raw_engine.compile(&path)?;
    let pre = raw_engine.sync_pre(&component)?;
    let span = Duration::from_secs_f64(seconds);

    let hookbox_counts: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..if do_hookbox { threads.max(1) } else { 0 })
            .map(|_| {
                let wasm = wasm.clone();
                s.spawn(move || -> anyhow::Result<u64> {
                    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
                    let event = before_tool_call();
                    let mut hook = wasm.hook();
                    rt.block_on(async {
                        hook.on_event(&event).await;
                        let started = Instant::now();
                        let mut n = 0u64;
                        while started.elapsed() < span {
                            for _ in 0..100 {
                                std::hint::black_box(hook.on_event(&event).await);
                            }
                            n += 100;
                        }
                        Ok(n)
                    })
                })
            })
            .collect();
        join_counts(handles)
    })?;

    let raw_counts: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..if do_raw { threads.max(1) } else { 0 })
            .map(|_| {
                let (engine, pre, config) = (&raw_engine, &pre, &config);
                s.spawn(move || -> anyhow::Result<u64> {
                    let event = raw::sync_event();
                    let mut hook = SyncHook::new(engine, pre, config)?;
                    hook.call(&event)?;
                    let started = Instant::now();
                    let mut n = 0u64;
                    while started.elapsed() < span {
                        for _ in 0..100 {
                            std::hint::black_box(hook.call(&event)?);
                        }
                        n += 100;
                    }
                    Ok(n)
                })
            })
            .collect();
        join_counts(handles)
    })?;

    println!("| plugin ({profile}) | path | threads | calls/s (all threads) | calls/s per thread | µs per call |");
    println!("|---|---|---:|---:|---:|---:|");
    for (label, counts) in [("Hookbox `WasmHook::on_event`", &hookbox_counts), ("raw wasmtime sync call", &raw_counts)]
    {
        if counts.is_empty() {
            continue;
        }
        let total: u64 = counts.iter().sum();
        let rate = total as f64 / seconds;
        println!(
            "| {plugin} | {label} | {threads} | {rate:.0} | {:.0} | {:.2} |",
            rate / threads.max(1) as f64,
            1e6 * threads.max(1) as f64 / rate
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// raw instances

fn raw_instances(
    profile: &str,
    plugin: &str,
    instances: u32,
    pooling: bool,
    reservation_mib: Option<u64>,
    stacks: Option<u32>,
    cow: bool,
) -> anyhow::Result<()> {
    let engine = RawEngine::configured(pooling.then_some(instances), reservation_mib.map(|m| m << 20), stacks, cow)?;
    let path = plugin_path(plugin, profile);
    let component = engine.compile(&path)?;
    let pre = engine.sync_pre(&component)?;
    let config = Arc::new(hookbox_bench::agentkit::plugin_config(plugin));
    let event = raw::sync_event();
    let (base, _) = rss_kib()?;
    let maps0 = map_count();
    let started = Instant::now();
    let mut live = Vec::with_capacity(instances as usize);
    let mut error = None;
    for _ in 0..instances {
        match SyncHook::new(&engine, &pre, &config).and_then(|mut h| h.call(&event).map(|_| h)) {
            Ok(h) => live.push(h),
            Err(e) => {
                error = Some(format!("{e:#}"));
                break;
            }
        }
    }
    let elapsed = started.elapsed();
    let (rss, hwm) = rss_kib()?;
    let n = live.len();
    println!(
        "| allocator | memory reservation | pool stacks | CoW images | live instances of {instances} | µs per instance (new store + instantiate + 1st call) | RSS Δ MiB | Δ per instance KiB | peak RSS MiB | mappings | stopped by |"
    );
    println!("|---|---|---:|---|---:|---:|---:|---:|---:|---|---|");
    println!(
        "| {} | {} | {} | {} | {n} | {:.1} | {:.0} | {:.0} | {:.0} | {maps0} → {} | {} |",
        if pooling { "pooling" } else { "on-demand" },
        reservation_mib.map_or("4 GiB (default)".to_string(), |m| format!("{m} MiB")),
        if pooling { stacks.unwrap_or(instances).to_string() } else { "–".to_string() },
        if cow { "on" } else { "off" },
        elapsed.as_secs_f64() * 1e6 / n.max(1) as f64,
        mib(delta_kib(rss, base).max(0) as u64),
        delta_kib(rss, base) as f64 / n.max(1) as f64,
        mib(hwm),
        map_count(),
        error.map_or("–".to_string(), |e| e.chars().take(160).collect::<String>().replace('|', "/"))
    );
    drop(live);
    Ok(())
}

// ---------------------------------------------------------------------------
// summary

/// One criterion result: its id and the median and mean time per iteration, in ns.
struct Row {
    id: String,
    median: f64,
    mean: f64,
    lo: f64,
    hi: f64,
}

fn read_rows(dir: &Path, out: &mut Vec<Row>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.is_dir() {
            continue;
        }
        let bench = path.join("new/benchmark.json");
        let est = path.join("new/estimates.json");
        if bench.exists() && est.exists() {
            let b: serde_json::Value = serde_json::from_slice(&std::fs::read(&bench)?)?;
            let e: serde_json::Value = serde_json::from_slice(&std::fs::read(&est)?)?;
            let num = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
            out.push(Row {
                id: b["full_id"].as_str().unwrap_or("?").to_string(),
                median: num(&e["median"]["point_estimate"]),
                mean: num(&e["mean"]["point_estimate"]),
                lo: num(&e["median"]["confidence_interval"]["lower_bound"]),
                hi: num(&e["median"]["confidence_interval"]["upper_bound"]),
            });
        } else {
            read_rows(&path, out)?;
        }
    }
    Ok(())
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn summary(dir: &Path) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    read_rows(dir, &mut rows).with_context(|| format!("reading {}", dir.display()))?;
    if rows.is_empty() {
        bail!("no criterion results in {}", dir.display());
    }
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    let get = |id: &str| rows.iter().find(|r| r.id == id).map(|r| r.median);
    println!("| benchmark | median | 95 % CI of the median | mean | × `deny/native` | × `deny/raw-async` |");
    println!("|---|---:|---|---:|---:|---:|");
    let native = get("deny/native");
    let raw_async = get("deny/raw-async");
    for r in &rows {
        let ratio = |base: Option<f64>| base.map_or("–".into(), |b| format!("{:.1}", r.median / b));
        println!(
            "| `{}` | {} | {} – {} | {} | {} | {} |",
            r.id,
            fmt_ns(r.median),
            fmt_ns(r.lo),
            fmt_ns(r.hi),
            fmt_ns(r.mean),
            ratio(native),
            ratio(raw_async)
        );
    }
    println!();
    println!("| goal | measured | met? |");
    println!("|---|---|---|");
    let goal = |name: &str, value: Option<String>, met: Option<bool>| {
        let met = match met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "not measured",
        };
        println!("| {name} | {} | {met} |", value.unwrap_or_else(|| "–".into()));
    };
    for (plugin, label) in [("deny", "deny-tools"), ("noop", "noop")] {
        for raw in ["raw-async", "raw-sync"] {
            let r = get(&format!("{plugin}/hookbox-hook")).zip(get(&format!("{plugin}/{raw}")));
            goal(
                &format!("Hookbox dispatch ≤ 1.5× raw wasmtime ({label}, vs `{raw}`)"),
                r.map(|(h, w)| format!("{} vs {}: {:.2}×", fmt_ns(h), fmt_ns(w), h / w)),
                r.map(|(h, w)| h / w <= 1.5),
            );
        }
    }
    for (plugin, label) in [("noop", "noop"), ("deny", "deny-tools")] {
        let f = get(&format!("{plugin}/hookbox-fresh"));
        goal(
            &format!("fresh instance per run ≤ 20 µs ({label}: new hook + first event + drop)"),
            f.map(fmt_ns),
            f.map(|f| f <= 20_000.0),
        );
    }
    for (baseline, label) in [("deny/hookbox-hook", "reused instance"), ("deny/hookbox-fresh", "fresh instance")] {
        for process in ["deny/process", "deny/process-sh"] {
            let r = get(process).zip(get(baseline));
            goal(
                &format!("≥ 1000× faster than process-per-event (`{process}` vs Hookbox, {label})"),
                r.map(|(p, h)| format!("{} vs {}: {:.0}×", fmt_ns(p), fmt_ns(h), p / h)),
                r.map(|(p, h)| p / h >= 1000.0),
            );
        }
    }
    let noop = get("noop/hookbox-hook");
    goal(
        "≥ 300,000 hook calls/s/core, no-op plugin (1 / `noop/hookbox-hook`)",
        noop.map(|n| format!("{:.0} calls/s ({})", 1e9 / n, fmt_ns(n))),
        noop.map(|n| 1e9 / n >= 300_000.0),
    );
    for (id, label, limit_ms) in [
        ("load/rust-deny-debug/cache", "Rust deny-tools (debug) from the cache < 1 ms", 1.0),
        ("load/rust-deny-release/cache", "Rust deny-tools (release) from the cache < 1 ms", 1.0),
        ("load/python-deny/cache", "Python deny-tools from the cache < 100 ms", 100.0),
        ("load/js-deny/cache", "JavaScript (StarlingMonkey) deny-tools from the cache < 100 ms", 100.0),
        ("load/js-qjs-deny/cache", "JavaScript (QuickJS) deny-tools from the cache < 100 ms", 100.0),
    ] {
        let v = get(id);
        goal(label, v.map(fmt_ns), v.map(|v| v / 1e6 < limit_ms));
    }
    Ok(())
}

/// Joins counting threads: each thread's count, or the first error (a panic is one).
fn join_counts(handles: Vec<std::thread::ScopedJoinHandle<'_, anyhow::Result<u64>>>) -> anyhow::Result<Vec<u64>> {
    handles.into_iter().map(|h| h.join().map_err(|_| anyhow::anyhow!("thread panicked")).and_then(|r| r)).collect()
}
