//! `workers_bench`: several `hookbox serve` workers sharing one PostgreSQL
//! database (issue 17), measured side by side in one run, each worker a real
//! `hookbox serve` process on a loopback port with a data directory of its
//! own (the first worker's `server.secret` copied into the others):
//!
//! 1. **Runs per second** with 1, 2 and 3 workers on PostgreSQL (a fresh
//!    database each) and 1 worker on the SQLite default: the `demo` replay
//!    model and a chain of three plugins (deny-tools declining `.env`,
//!    state-counter, audit-log). A fixed number of runs is submitted
//!    round-robin over the workers by a fixed number of concurrent clients;
//!    each run is timed from its `POST /v1/runs` to its record being readable
//!    (`GET /v1/runs/{id}` on the worker it was submitted to: its event stream
//!    until `end`, then polled every 5 ms until the record is stored).
//!    Every answer that is not 201 is counted and shown, never retried.
//! 2. **Memory per parked run**: N runs waiting for an approval on one worker
//!    (the `scripted` plugin asking before `create_file`, alone in the chain:
//!    one instance per run), the worker's `VmRSS` before and once
//!    `GET /v1/approvals` lists all N; then every run is aborted and must end,
//!    and the cycle is repeated (`--cycles`) to see what stays resident.
//!    The workers' and PostgreSQL's CPU per run and the machine's busy share
//!    are reported beside the throughput rows.
//! 3. **Cross-worker approval latency**: M runs parked on worker A, each
//!    approved through worker B, one at a time after a random pause of up to
//!    400 ms (so the approvals do not lock onto A's command poll): from B's
//!    approve call to B's `GET /v1/runs/{id}` showing the record (A takes
//!    queued commands every 200 ms). The same approved on A itself, for
//!    comparison.
//!
//! Usage: `workers_bench [--profile debug|release] [--runs N] [--concurrency C]
//! [--parked N] [--cycles K] [--approvals M] [--max-workers W]` with `HOOKBOX_TEST_POSTGRES` set (run it
//! under `scripts/with-postgres.sh`; `scripts/bench-workers.sh` builds and
//! does both). Markdown on stdout, progress on stderr. Every worker is killed
//! when the bench ends, however it ends.

mod cpu;
mod parked;
mod runs;
mod throughput;
mod worker;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use clap::Parser;
use hookbox_bench::served::percentiles;

use crate::parked::{approvals, memory};
use crate::throughput::{print_throughput, throughput_row};
use crate::worker::{Cluster, create_database, install_asker, tenant};

#[derive(Parser)]
struct Args {
    /// The build profile of the `hookbox` binary and the plugins.
    #[arg(long, default_value = "debug")]
    profile: String,
    /// Runs per throughput row.
    #[arg(long, default_value_t = 400)]
    runs: usize,
    /// Runs in flight at once in a throughput row (all workers together).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Runs parked for approval on one worker for the memory figure.
    #[arg(long, default_value_t = 1000)]
    parked: usize,
    /// Park-measure-abort cycles of the memory figure on the same worker
    /// (the second on shows whether what a cycle leaves resident is reused).
    #[arg(long, default_value_t = 2)]
    cycles: usize,
    /// Runs approved across workers (and as many on the same worker).
    #[arg(long, default_value_t = 50)]
    approvals: usize,
    /// The largest number of PostgreSQL workers in the throughput rows.
    #[arg(long, default_value_t = 3)]
    max_workers: usize,
}

/// The prompt of every run (the replay model answers from its recording).
const PROMPT: &str = "Delete the file `.env` and create `test.txt`";

/// The longest a run may take from submission to its stored record.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

fn ms(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

fn counts(map: &BTreeMap<String, usize>) -> String {
    map.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

async fn bench(args: Args) -> Result<()> {
    let url = std::env::var("HOOKBOX_TEST_POSTGRES").ok().filter(|u| !u.is_empty()).context(
        "HOOKBOX_TEST_POSTGRES is not set: run under scripts/with-postgres.sh (scripts/bench-workers.sh does)",
    )?;
    let tag = std::process::id();
    println!("## workers_bench\n");
    println!(
        "Profile `{}`; {} cores; load average at the start {}; {} runs per throughput row, {} at once; \
         {} runs parked; {} approvals per approval row.\n",
        args.profile,
        std::thread::available_parallelism().map(usize::from).unwrap_or(0),
        loadavg(),
        args.runs,
        args.concurrency,
        args.parked,
        args.approvals
    );

    // 1. Runs per second.
    let mut rows = Vec::new();
    rows.push(throughput_row(&args, "1 worker, SQLite", None, 1, "bench-sqlite").await?);
    for n in 1..=args.max_workers {
        let db = create_database(&url, &format!("bench_{tag}_tp{n}"))?;
        let label = format!("{n} worker{}, PostgreSQL", if n == 1 { "" } else { "s" });
        rows.push(throughput_row(&args, &label, Some(&db), n, &format!("bench-pg{n}")).await?);
    }
    print_throughput(&mut rows);

    // 2 and 3: two workers on a fresh database.
    let db = create_database(&url, &format!("bench_{tag}_park"))?;
    eprintln!("[workers-bench] starting two workers for the memory and approval rows");
    let cluster = Cluster::start(&args.profile, Some(&db), 2).await?;
    let (a, b) = match cluster.workers.as_slice() {
        [a, b] => (a, b),
        _ => bail!("two workers expected"),
    };
    let key = tenant(&a.api, "bench-park").await?;
    install_asker(&a.api, &key, &args.profile).await?;
    // Warm-up: a run parked and approved on each worker (both compile the asker).
    for w in [a, b] {
        let warm = approvals("warm-up", &w.api, &w.api, &key, 2).await?;
        ensure!(warm.statuses.get("completed") == Some(&2), "warm-up on {}: {}", w.name, counts(&warm.statuses));
    }

    // Several cycles in a row: the second on shows whether what the first left
    // resident after its aborts is reused (kept by the allocators) or grows.
    let mut cycles = Vec::new();
    for _ in 0..args.cycles.max(1) {
        cycles.push(memory(a, &key, args.parked).await?);
    }
    println!("### Memory of runs parked for approval (one worker, PostgreSQL)\n");
    println!(
        "The chain: the `scripted` plugin asking before `create_file` (one instance per run). {} cycles of \
         park N, measure, abort all, on the same worker.\n",
        cycles.len()
    );
    println!(
        "| cycle | runs submitted | parked (201) | time to all listed | VmRSS before | all waiting | 3 s later \
         | KiB per parked run | after aborting all |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, mem) in cycles.iter().enumerate() {
        let per_run = |rss: u64| (rss.saturating_sub(mem.before)) as f64 / mem.parked.max(1) as f64;
        println!(
            "| {} | {} | {} | {:.1} s | {} KiB | {} KiB | {} KiB | **{:.0}** ({:.0} 3 s later) | {} KiB |",
            i + 1,
            mem.n,
            mem.parked,
            mem.took.as_secs_f64(),
            mem.before,
            mem.waiting,
            mem.settled,
            per_run(mem.waiting),
            per_run(mem.settled),
            mem.after_abort
        );
    }
    println!();
    for (i, mem) in cycles.iter().enumerate() {
        if !mem.refused.is_empty() {
            println!("- cycle {}: refused submissions: {}", i + 1, counts(&mem.refused));
        }
        if let Some(e) = &mem.error {
            println!("- cycle {}: **not all parked**: {e}", i + 1);
        }
        println!("- cycle {}: after the aborts, the runs ended as: {}", i + 1, counts(&mem.ended));
    }
    println!();

    let mut rows = vec![
        approvals("approved on worker B, run on worker A", &a.api, &b.api, &key, args.approvals).await?,
        approvals("approved on worker A, its own run", &a.api, &a.api, &key, args.approvals).await?,
    ];
    let (_, left) = a.api.get("/v1/approvals", &key).await?;
    println!("### Approval latency: approve call to the record readable on the answering worker\n");
    println!("| | runs | p50 | p99 | max | the approve call itself, p50 / p99 | ended as |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    for r in &mut rows {
        let (p50, p99, max) = percentiles(&mut r.latencies);
        let (c50, c99, _) = percentiles(&mut r.calls);
        println!(
            "| {} | {} | {} | {} | {} | {} / {} | {} |",
            r.label,
            r.latencies.len(),
            ms(p50),
            ms(p99),
            ms(max),
            ms(c50),
            ms(c99),
            counts(&r.statuses)
        );
    }
    println!();
    println!("- approvals still listed at the end: {}", left.as_array().map_or(0, Vec::len));
    for p in cluster.problems() {
        println!("{p}");
    }
    println!("\nLoad average at the end: {}.", loadavg());
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    // SIGINT or SIGTERM drops the bench's future, and with it every worker (killed on drop).
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = bench(args) => r,
        _ = tokio::signal::ctrl_c() => bail!("interrupted"),
        _ = term.recv() => bail!("terminated"),
    }
}
