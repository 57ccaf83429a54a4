//! Per-event dispatch, side by side in one process (issue 7, items 1 and 5).
//!
//! Every row handles the same `before-tool-call` event (`delete_file` on
//! `.env`) with the same logic: deny-tools' policy with `tools = ["delete_file"]`,
//! answering `skip-tool`. Each row checks that answer once before it is timed.
//!
//! - `deny/native`: a native `HookHandler` trait object (the floor).
//! - `deny/raw-sync`, `deny/raw-async`: the deny-tools component called by a
//!   minimal wasmtime embedding (`hookbox_bench::raw`, pooling allocator,
//!   `InstancePre`, instance reused), sync and `call_async`.
//! - `deny/hookbox-hook`: `WasmPlugin::hook()` reused (`HookHandler::on_event`).
//! - `deny/hookbox-chain`: the same hook in a one-hook `HookChain::dispatch`,
//!   a fresh `DispatchTrace` per event (as the agent loop does).
//! - `deny/hookbox-fresh`: a new `plugin.hook()` per iteration (first event:
//!   instantiation, the call, the drop); `deny/raw-fresh-*` the same in raw wasmtime.
//! - `deny/process`, `deny/process-sh`: `stdin_hook` spawned per event (directly,
//!   and through `sh -c` as command hooks are), event JSON on stdin.
//! - `noop/*`: the no-op plugin, for calls per second.
//! - `chain/N`: one event through a chain of N no-op plugins (N = 1, 10, 100).
//! - `chain-1-subscribed/N`: the same with only the first plugin subscribed to
//!   `before-tool-call` (the other N − 1 to `run-end` only).
//! - `release/*`: the same rows for plugins built `--release`, when built.
//! - `versions/0.1.0`, `versions/0.2.0`: deny-tools' one source built against
//!   the frozen WIT 0.1.0 (`plugins/deny-tools-0-1-0`) and against 0.2.0,
//!   each through `WasmPlugin::hook()` reused, both given the same event
//!   context (which only 0.2.0 lowers): what 0.2.0's context costs per call.
//! - `checks/*`: what issue 13's output check (`check_directive`) adds to every
//!   call: deny-tools' `skip-tool` answer, `continue`, and a 1,000-block
//!   `replace-content` (input cloned outside the timing).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use hookbox::contract::{Directive, Event, EventContext, EventKind};
use hookbox::sandbox::PluginOptions;
use hookbox::sandbox::{DispatchTrace, HookChain};
use hookbox::sandbox::{HookHandler, HookReply};
use hookbox::sandbox::{HookRuntime, WasmPlugin};
use hookbox_bench::raw::{self, AsyncHook, RawEngine, SyncHook};
use hookbox_bench::{NativeDeny, before_tool_call, deny_config, plugin_path, process_hook, repo_root};
use tokio::runtime::Runtime;

fn rt() -> anyhow::Result<Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_time().build()?)
}

fn is_skip(reply: &HookReply) -> bool {
    matches!(reply.outcome, Ok(Directive::SkipTool(_)))
}

/// The component cache the benches share (so 100 copies of a plugin compile once).
fn runtime() -> anyhow::Result<HookRuntime> {
    Ok(HookRuntime::new()?.with_cache_dir(repo_root().join("target/bench-cache")))
}

fn load(
    runtime: &HookRuntime,
    name: &str,
    path: &Path,
    config: BTreeMap<String, String>,
) -> anyhow::Result<Arc<WasmPlugin>> {
    let hookbox::sandbox::LoadedPlugin { plugin, .. } = runtime
        .load(name, path, config, PluginOptions::default())
        .with_context(|| format!("loading {}", path.display()))?;
    Ok(plugin)
}

/// Times `iters` awaited calls of `hook.on_event(event)` on `rt`.
fn time_hook(rt: &Runtime, hook: &mut dyn HookHandler, event: &Event, iters: u64) -> Duration {
    time_hook_in(rt, hook, event, &EventContext::default(), iters)
}

/// Times `iters` awaited calls of `hook.on_event(event, context)` on `rt`.
fn time_hook_in(rt: &Runtime, hook: &mut dyn HookHandler, event: &Event, cx: &EventContext, iters: u64) -> Duration {
    rt.block_on(async {
        let started = Instant::now();
        for _ in 0..iters {
            black_box(hook.on_event(black_box(event), black_box(cx)).await);
        }
        started.elapsed()
    })
}

/// `versions/*`: the same deny-tools source on each WIT version, with a
/// context as a run fills it (two 36-character ids).
fn version_rows(c: &mut Criterion, runtime: &HookRuntime) -> anyhow::Result<()> {
    let rt = rt()?;
    let event = before_tool_call();
    let id = "3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4e".to_string();
    let cx = EventContext { run_id: id.clone(), session_id: id, turn: 1, iteration: 1, max_iterations: 10, retries: 0 };
    let mut g = c.benchmark_group("versions");
    g.throughput(Throughput::Elements(1));
    for (row, file) in [("0.1.0", "deny_tools_v0_1_0"), ("0.2.0", "deny_tools")] {
        let path = plugin_path(file, "debug");
        if !path.exists() {
            eprintln!("{} not built (scripts/build-plugins.sh): versions/{row} skipped", path.display());
            continue;
        }
        let plugin = load(runtime, file, &path, deny_config())?;
        ensure!(plugin.wit_version().as_str() == row, "{file} targets {}", plugin.wit_version());
        let mut hook = plugin.hook();
        ensure!(is_skip(&rt.block_on(hook.on_event(&event, &cx))), "versions/{row}: wanted skip-tool");
        g.bench_function(row, |b| b.iter_custom(|iters| time_hook_in(&rt, &mut hook, &event, &cx, iters)));
    }
    g.finish();
    Ok(())
}

/// The rows that run one component (`deny` or `noop`) several ways.
fn component_rows(
    c: &mut Criterion,
    group: &str,
    path: &Path,
    config: BTreeMap<String, String>,
    expect_skip: bool,
    runtime: &HookRuntime,
) -> anyhow::Result<()> {
    let rt = rt()?;
    let event = before_tool_call();
    let config_arc = Arc::new(config.clone());
    let check = |ok: bool, what: &str| -> anyhow::Result<()> {
        ensure!(ok, "{group}/{what}: unexpected answer (wanted skip-tool: {expect_skip})");
        Ok(())
    };

    let pooled = RawEngine::new(true)?;
    let on_demand = RawEngine::new(false)?;
    let component = pooled.compile(path)?;
    let sync_pre = pooled.sync_pre(&component)?;
    let async_pre = pooled.async_pre(&component)?;
    let od_component = on_demand.compile(path)?;
    let od_sync_pre = on_demand.sync_pre(&od_component)?;
    let raw_sync_event = raw::sync_event();
    let raw_async_event = raw::async_event();

    let plugin = load(runtime, group, path, config)?;

    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));

    // Raw wasmtime, instance reused.
    let mut sync_hook = SyncHook::new(&pooled, &sync_pre, &config_arc)?;
    check(raw::sync_is_skip(&sync_hook.call(&raw_sync_event)?) == expect_skip, "raw-sync")?;
    g.bench_function("raw-sync", |b| {
        b.iter(|| black_box(sync_hook.call(black_box(&raw_sync_event)).map(|d| raw::sync_is_skip(&d))))
    });
    drop(sync_hook);

    let mut async_hook = rt.block_on(AsyncHook::new(&pooled, &async_pre, &config_arc))?;
    check(raw::async_is_skip(&rt.block_on(async_hook.call(&raw_async_event))?) == expect_skip, "raw-async")?;
    g.bench_function("raw-async", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    black_box(async_hook.call(black_box(&raw_async_event)).await.map(|d| raw::async_is_skip(&d)).ok());
                }
                started.elapsed()
            })
        })
    });
    drop(async_hook);

    // Hookbox, instance reused.
    let mut hook = plugin.hook();
    check(is_skip(&rt.block_on(hook.on_event(&event, &EventContext::default()))) == expect_skip, "hookbox-hook")?;
    g.bench_function("hookbox-hook", |b| b.iter_custom(|iters| time_hook(&rt, &mut hook, &event, iters)));
    drop(hook);

    let mut chain = HookChain::new(vec![Box::new(plugin.hook())]);
    let first = rt.block_on(chain.dispatch(&event, &EventContext::default(), &mut DispatchTrace::default()));
    check(matches!(first.terminal, Some(Directive::SkipTool(_))) == expect_skip, "hookbox-chain")?;
    g.bench_function("hookbox-chain", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    let mut trace = DispatchTrace::default();
                    black_box(chain.dispatch(black_box(&event), &EventContext::default(), &mut trace).await);
                    black_box(trace);
                }
                started.elapsed()
            })
        })
    });
    drop(chain);

    // A fresh instance per run: instantiation, the first call, the drop.
    check(
        is_skip(&rt.block_on(plugin.hook().on_event(&event, &EventContext::default()))) == expect_skip,
        "hookbox-fresh",
    )?;
    g.bench_function("hookbox-fresh", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    let mut hook = plugin.hook();
                    black_box(hook.on_event(black_box(&event), &EventContext::default()).await);
                }
                started.elapsed()
            })
        })
    });

    g.bench_function("raw-fresh-sync-pooling", |b| {
        b.iter(|| {
            SyncHook::new(&pooled, &sync_pre, &config_arc)
                .and_then(|mut h| h.call(black_box(&raw_sync_event)))
                .map(|d| raw::sync_is_skip(&d))
        })
    });
    g.bench_function("raw-fresh-async-pooling", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    let r = match AsyncHook::new(&pooled, &async_pre, &config_arc).await {
                        Ok(mut h) => h.call(black_box(&raw_async_event)).await.map(|d| raw::async_is_skip(&d)),
                        Err(e) => Err(e),
                    };
                    black_box(r.ok());
                }
                started.elapsed()
            })
        })
    });
    g.bench_function("raw-fresh-sync-ondemand", |b| {
        b.iter(|| {
            SyncHook::new(&on_demand, &od_sync_pre, &config_arc)
                .and_then(|mut h| h.call(black_box(&raw_sync_event)))
                .map(|d| raw::sync_is_skip(&d))
        })
    });
    // Instantiation alone (no call), pooling, for the ~20 µs goal's reference figure.
    g.bench_function("raw-instantiate-only-pooling", |b| {
        b.iter(|| SyncHook::new(&pooled, &sync_pre, &config_arc).map(black_box).is_ok())
    });
    g.finish();
    Ok(())
}

fn deny_rows(c: &mut Criterion, runtime: &HookRuntime) -> anyhow::Result<()> {
    let rt = rt()?;
    let event = before_tool_call();
    let mut g = c.benchmark_group("deny");
    g.throughput(Throughput::Elements(1));
    let mut native: Box<dyn HookHandler> = Box::new(NativeDeny::new(&deny_config())?);
    ensure!(is_skip(&rt.block_on(native.on_event(&event, &EventContext::default()))), "native: wanted skip-tool");
    g.bench_function("native", |b| b.iter_custom(|iters| time_hook(&rt, native.as_mut(), &event, iters)));

    let stdin_hook = PathBuf::from(env!("CARGO_BIN_EXE_stdin_hook"));
    let json = serde_json::to_vec(&event)?;
    let tools = format!("[\"{}\"]", hookbox_bench::DENIED_TOOL);
    ensure!(
        matches!(process_hook(&stdin_hook, &[&tools], &json)?, Directive::SkipTool(_)),
        "process: wanted skip-tool"
    );
    g.bench_function("process", |b| b.iter(|| process_hook(&stdin_hook, &[&tools], black_box(&json)).is_ok()));
    let sh = PathBuf::from("/bin/sh");
    let bin = stdin_hook.display().to_string();
    let sh_args = ["-c", "\"$0\" \"$1\"", bin.as_str(), tools.as_str()];
    ensure!(matches!(process_hook(&sh, &sh_args, &json)?, Directive::SkipTool(_)), "process-sh: wanted skip-tool");
    g.bench_function("process-sh", |b| b.iter(|| process_hook(&sh, &sh_args, black_box(&json)).is_ok()));
    g.finish();

    component_rows(c, "deny", &plugin_path("deny_tools", "debug"), deny_config(), true, runtime)
}

fn chain_rows(c: &mut Criterion, runtime: &HookRuntime) -> anyhow::Result<()> {
    let rt = rt()?;
    let event = before_tool_call();
    let path = plugin_path("noop", "debug");
    let plugins: Vec<Arc<WasmPlugin>> =
        (0..100).map(|i| load(runtime, &format!("noop-{i}"), &path, BTreeMap::new())).collect::<Result<_, _>>()?;
    let mut g = c.benchmark_group("chain");
    for n in [1usize, 10, 100] {
        let hooks: Vec<Box<dyn HookHandler>> =
            plugins.iter().take(n).map(|p| Box::new(p.hook()) as Box<dyn HookHandler>).collect();
        let mut chain = HookChain::new(hooks);
        let first = rt.block_on(chain.dispatch(&event, &EventContext::default(), &mut DispatchTrace::default()));
        ensure!(first.terminal.is_none(), "chain/{n}: wanted continue");
        g.throughput(Throughput::Elements(n as u64));
        bench_dispatch(&mut g, n, &rt, &mut chain, &event);
    }
    g.finish();

    // The same chains where only the first plugin subscribes to before-tool-call
    // (the others to run-end only): what unsubscribed plugins cost.
    let options = PluginOptions { events: Some(vec![EventKind::RunEnd]), ..PluginOptions::default() };
    let idle: Vec<Arc<WasmPlugin>> = (1..100)
        .map(|i| {
            let hookbox::sandbox::LoadedPlugin { plugin: p, .. } = runtime
                .load(&format!("noop-run-end-{i}"), &path, BTreeMap::new(), options.clone())
                .with_context(|| format!("loading {}", path.display()))?;
            Ok(p)
        })
        .collect::<anyhow::Result<_>>()?;
    let mut g = c.benchmark_group("chain-1-subscribed");
    for n in [10usize, 100] {
        let mut hooks: Vec<Box<dyn HookHandler>> = vec![Box::new(plugins[0].hook())];
        hooks.extend(idle.iter().take(n - 1).map(|p| Box::new(p.hook()) as Box<dyn HookHandler>));
        let mut chain = HookChain::new(hooks);
        let first = rt.block_on(chain.dispatch(&event, &EventContext::default(), &mut DispatchTrace::default()));
        ensure!(first.terminal.is_none(), "chain-1-subscribed/{n}: wanted continue");
        bench_dispatch(&mut g, n, &rt, &mut chain, &event);
    }
    g.finish();
    Ok(())
}

/// Times `chain.dispatch(event)` as row `n` of `g`, a fresh trace per event as the loop does.
fn bench_dispatch(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    n: usize,
    rt: &Runtime,
    chain: &mut HookChain,
    event: &Event,
) {
    g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    let mut trace = DispatchTrace::default();
                    black_box(chain.dispatch(black_box(event), &EventContext::default(), &mut trace).await);
                }
                started.elapsed()
            })
        })
    });
}

/// `check_directive` on the answers a call returns, per call.
fn check_rows(c: &mut Criterion) {
    use criterion::BatchSize;
    use hookbox::contract::ContentBlock;
    use hookbox::sandbox::{Limits, check_directive};
    let limits = Limits::default();
    let mut g = c.benchmark_group("checks");
    let answers = [
        ("skip-tool", Directive::SkipTool(Some("Tool call declined: `delete_file` is denied by deny-tools".into()))),
        ("continue", Directive::Continue),
        ("replace-content-1000", Directive::ReplaceContent(vec![ContentBlock::Text("block".into()); 1_000])),
    ];
    for (name, d) in answers {
        g.bench_function(name, |b| {
            b.iter_batched(|| d.clone(), |d| black_box(check_directive(d, &limits).is_ok()), BatchSize::SmallInput)
        });
    }
    g.finish();
}

fn all(c: &mut Criterion) -> anyhow::Result<()> {
    check_rows(c);
    let runtime = runtime()?;
    deny_rows(c, &runtime)?;
    version_rows(c, &runtime)?;
    component_rows(c, "noop", &plugin_path("noop", "debug"), BTreeMap::new(), false, &runtime)?;
    chain_rows(c, &runtime)?;
    let release = plugin_path("deny_tools", "release");
    if release.exists() {
        component_rows(c, "release-deny", &release, deny_config(), true, &runtime)?;
        component_rows(c, "release-noop", &plugin_path("noop", "release"), BTreeMap::new(), false, &runtime)?;
    } else {
        eprintln!("release plugins not built ({}): release-* rows skipped", release.display());
    }
    Ok(())
}

fn dispatch(c: &mut Criterion) {
    if let Err(e) = all(c) {
        eprintln!("dispatch bench failed: {e:#}");
        std::process::exit(1);
    }
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .noise_threshold(0.05)
}

criterion_group! {
    name = benches;
    config = config();
    targets = dispatch
}
criterion_main!(benches);
