//! The runs-per-second rows.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hookbox_bench::served::percentiles;

use crate::cpu::CpuSnapshot;
use crate::runs::{Outcome, one_run, run_body};
use crate::worker::{Api, CHAIN, Cluster, Worker, install_chain, tenant};
use crate::{Args, counts, ms};

/// One throughput row.
pub(crate) struct Row {
    pub(crate) label: String,
    pub(crate) runs: usize,
    pub(crate) wall: Duration,
    pub(crate) latencies: Vec<u64>,
    /// Final statuses and refusals, counted.
    pub(crate) statuses: BTreeMap<String, usize>,
    pub(crate) hook_failures: usize,
    pub(crate) warmup: BTreeMap<String, usize>,
    pub(crate) problems: Vec<String>,
    /// CPU ms of the timed runs: workers, PostgreSQL, this process; the machine's busy share.
    pub(crate) cpu: (f64, f64, f64, f64),
}

/// `runs` runs of the three-plugin chain, round-robin over `apis`, `concurrency` at once.
pub(crate) async fn drive(apis: &[Api], key: &str, runs: usize, concurrency: usize) -> (Duration, Vec<Outcome>) {
    drive_body(apis, key, &run_body(&CHAIN), runs, concurrency).await
}

/// `runs` runs of `body`, round-robin over `apis`, `concurrency` at once.
pub(crate) async fn drive_body(
    apis: &[Api],
    key: &str,
    body: &serde_json::Value,
    runs: usize,
    concurrency: usize,
) -> (Duration, Vec<Outcome>) {
    let apis = Arc::new(apis.to_vec());
    let next = Arc::new(AtomicUsize::new(0));
    let body = Arc::new(body.clone());
    let started = Instant::now();
    let clients: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (apis, next, body, key) = (apis.clone(), next.clone(), body.clone(), key.to_string());
            tokio::spawn(async move {
                let mut out = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= runs {
                        return out;
                    }
                    let Some(api) = apis.get(i % apis.len()) else { return out };
                    out.push(one_run(api, &key, &body).await);
                }
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for client in clients {
        match client.await {
            Ok(o) => outcomes.extend(o),
            Err(e) => outcomes.push(Outcome { status: format!("client task failed: {e}"), ..Outcome::default() }),
        }
    }
    (started.elapsed(), outcomes)
}

pub(crate) async fn throughput_row(
    args: &Args,
    label: &str,
    database: Option<&str>,
    workers: usize,
    tenant_name: &str,
    extra: &str,
) -> Result<Row> {
    eprintln!("[workers-bench] {label}: starting {workers} worker(s)");
    let cluster = Cluster::start_with(&args.profile, database, workers, extra).await?;
    let apis: Vec<Api> = cluster.workers.iter().map(|w| w.api.clone()).collect();
    let first = apis.first().context("no worker")?;
    let key = tenant(first, tenant_name).await?;
    install_chain(first, &key, &args.profile).await?;
    // Warm-up: two runs per worker (each worker compiles the plugins into its own cache on first use).
    let mut warmup = BTreeMap::new();
    for api in &apis {
        for _ in 0..2 {
            let o = one_run(api, &key, &run_body(&CHAIN)).await;
            *warmup.entry(o.status).or_insert(0) += 1;
        }
    }
    eprintln!("[workers-bench] {label}: {} runs, {} at once", args.runs, args.concurrency);
    let pids: Vec<u32> = cluster.workers.iter().map(Worker::pid).collect();
    let cpu_before = CpuSnapshot::take(&pids);
    let (wall, outcomes) = drive(&apis, &key, args.runs, args.concurrency).await;
    let cpu = CpuSnapshot::take(&pids).since(&cpu_before);
    let mut statuses = BTreeMap::new();
    let mut latencies = Vec::new();
    let mut hook_failures = 0;
    for o in outcomes {
        *statuses.entry(o.status).or_insert(0) += 1;
        latencies.extend(o.latency_us);
        hook_failures += o.hook_failures;
    }
    let problems = cluster.problems();
    Ok(Row {
        label: label.to_string(),
        runs: args.runs,
        wall,
        latencies,
        statuses,
        hook_failures,
        warmup,
        problems,
        cpu,
    })
}

pub(crate) fn print_throughput(rows: &mut [Row]) {
    println!("### Runs per second\n");
    println!(
        "| setup | runs | wall | runs/s | p50 | p99 | max | completed | not completed or refused | hook failures \
         | CPU ms per run: workers / PostgreSQL / load generator | machine busy |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|");
    for r in rows.iter_mut() {
        let (p50, p99, max) = percentiles(&mut r.latencies);
        let completed = r.statuses.get("completed").copied().unwrap_or(0);
        let others: BTreeMap<String, usize> =
            r.statuses.iter().filter(|(k, _)| k.as_str() != "completed").map(|(k, v)| (k.clone(), *v)).collect();
        let others = if others.is_empty() { "0".to_string() } else { counts(&others) };
        println!(
            "| {} | {} | {:.2} s | {:.1} | {} | {} | {} | {completed} | {others} | {} | {:.1} / {:.1} / {:.1} | {:.0} % |",
            r.label,
            r.runs,
            r.wall.as_secs_f64(),
            r.runs as f64 / r.wall.as_secs_f64(),
            ms(p50),
            ms(p99),
            ms(max),
            r.hook_failures,
            r.cpu.0 / r.runs.max(1) as f64,
            r.cpu.1 / r.runs.max(1) as f64,
            r.cpu.2 / r.runs.max(1) as f64,
            r.cpu.3 * 100.0
        );
    }
    println!();
    for r in rows.iter() {
        println!("- {}: warm-up runs (two per worker, not timed): {}", r.label, counts(&r.warmup));
        for p in &r.problems {
            println!("{p}");
        }
    }
    println!();
}
