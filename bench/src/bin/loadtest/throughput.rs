//! `throughput` and `overhead`: runs per second, and the loop's own share of a run.

#[allow(clippy::wildcard_imports)]
use super::*;

// throughput

pub(super) struct Outcome {
    pub(super) wall: Duration,
    pub(super) ok: usize,
    pub(super) errors: usize,
    pub(super) events: usize,
    pub(super) stats: Vec<PluginStats>,
    pub(super) hook_failures: usize,
    pub(super) failure_kinds: BTreeMap<String, usize>,
}

impl Outcome {
    fn hook_calls(&self) -> u64 {
        self.stats.iter().map(|s| s.calls).sum()
    }
}

/// How each hook of a run is wrapped.
#[derive(Clone)]
pub(super) enum Wrap {
    None,
    Timed(Arc<Counters>),
    Counted(Arc<LiveCounts>),
}

pub(super) fn chain_for(plugins: &[Arc<WasmPlugin>], wrap: &Wrap) -> HookChain {
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
pub(super) fn run_many(
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

pub(super) struct RunSummary {
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

pub(super) fn gather(
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

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
}

pub(super) fn throughput(
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

// overhead

pub(super) fn overhead(cache: &Cache, profile: &str, runs: usize, plugin_set: &[String]) -> anyhow::Result<()> {
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
