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
//! loadtest compile    --component big.wasm [--worker target/debug/hookbox]
//! ```
//!
//! Plugins load through a component cache in `target/bench-cache` (the first
//! load of a plugin compiles it once).

mod compile;
mod scale;
mod summary;
mod throughput;

use compile::compile_mode;
use scale::{calls, memory, raw_instances, sessions_mode};
use summary::summary;
use throughput::{overhead, throughput};

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
    /// Wall time of compiling one component (no cache), in this process or in
    /// a compile worker; run under `/usr/bin/time -f %M` for the peak memory.
    Compile {
        /// The component file.
        #[arg(long)]
        component: PathBuf,
        /// Compile in `WORKER compile-worker` (e.g. target/debug/hookbox) instead of in this process.
        #[arg(long)]
        worker: Option<PathBuf>,
        /// Compiles, one after another.
        #[arg(long, default_value_t = 1)]
        rounds: usize,
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
        Mode::Compile { component, worker, rounds } => compile_mode(options, &component, worker.as_deref(), rounds),
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

/// Joins counting threads: each thread's count, or the first error (a panic is one).
fn join_counts(handles: Vec<std::thread::ScopedJoinHandle<'_, anyhow::Result<u64>>>) -> anyhow::Result<Vec<u64>> {
    handles.into_iter().map(|h| h.join().map_err(|_| anyhow::anyhow!("thread panicked")).and_then(|r| r)).collect()
}
