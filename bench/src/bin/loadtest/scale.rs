//! `memory`, `sessions`, `calls` and the raw-instance baseline: what instances cost at scale.

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::throughput::{Wrap, gather, run_many};

// memory

pub(super) fn memory(
    cache: &Cache,
    profile: &str,
    plugin: &str,
    copies: usize,
    instances: usize,
) -> anyhow::Result<()> {
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
        let reply = rt.block_on(hook.on_event(&event, &hookbox::contract::EventContext::default()));
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

// sessions

pub(super) fn sessions_mode(
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

// calls

pub(super) fn calls(
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
                        hook.on_event(&event, &hookbox::contract::EventContext::default()).await;
                        let started = Instant::now();
                        let mut n = 0u64;
                        while started.elapsed() < span {
                            for _ in 0..100 {
                                std::hint::black_box(
                                    hook.on_event(&event, &hookbox::contract::EventContext::default()).await,
                                );
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

// raw instances

pub(super) fn raw_instances(
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
