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
//!    and the cycle is repeated (`--cycles`) to see what stays resident. Side
//!    by side: runs parked in the database (the default, `--parked` of them)
//!    and runs waiting in their worker (`park_after_ms` out of reach,
//!    `--in-process` of them). The workers' and PostgreSQL's CPU per run and
//!    the machine's busy share are reported beside the throughput rows.
//! 3. **Resume latency**: M runs parked by worker A, each approved through
//!    worker B, one at a time after a random pause of up to 400 ms: from B's
//!    approve call to B's `GET /v1/runs/{id}` showing the record (B resumes
//!    the run by re-executing its checkpoint). For the demo session and for
//!    sessions with 10 and 100 tool calls before the asked one (longer
//!    checkpoints, whose sizes are shown); the demo resumed on A itself;
//!    and the demo waiting in its worker (not parked), answered there.
//!
//! 4. **The journal by run length** (`--journal-only`, `crate::journal`):
//!    appended journal parts, the whole checkpoint at every safe point and
//!    no journal, for runs of 1, 11 and 101 tool calls.
//!
//! Usage: `workers_bench [--profile debug|release] [--runs N] [--concurrency C]
//! [--parked N] [--in-process N] [--cycles K] [--approvals M] [--max-workers W] [--skip-throughput]
//! [--journal-only [--journal-runs N] [--journal-concurrency C]]` with `HOOKBOX_TEST_POSTGRES` set (run it
//! under `scripts/with-postgres.sh`; `scripts/bench-workers.sh` builds and
//! does both). Markdown on stdout, progress on stderr. Every worker is killed
//! when the bench ends, however it ends.

mod cpu;
mod journal;
mod parked;
mod runs;
mod sessions;
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
    /// Runs parked for approval (in the database) on one worker for the memory figure.
    #[arg(long, default_value_t = 10_000)]
    parked: usize,
    /// Runs waiting for approval in their worker (not parked) for the memory figure.
    #[arg(long, default_value_t = 1000)]
    in_process: usize,
    /// Leaves out the runs-per-second rows.
    #[arg(long)]
    skip_throughput: bool,
    /// Only the runs-per-second rows.
    #[arg(long)]
    throughput_only: bool,
    /// Park-measure-abort cycles of the memory figure on the same worker
    /// (the second on shows whether what a cycle leaves resident is reused).
    #[arg(long, default_value_t = 2)]
    cycles: usize,
    /// Runs approved across workers (and as many on the same worker).
    #[arg(long, default_value_t = 50)]
    approvals: usize,
    /// Only the journal rows (the safe-point journal by run length).
    #[arg(long)]
    journal_only: bool,
    /// Runs per journal row.
    #[arg(long, default_value_t = 40)]
    journal_runs: usize,
    /// Runs in flight at once in a journal row.
    #[arg(long, default_value_t = 4)]
    journal_concurrency: usize,
    /// The largest number of PostgreSQL workers in the throughput rows.
    #[arg(long, default_value_t = 3)]
    max_workers: usize,
}

/// The tool calls before the asked one in the longer sessions (models `long10`, `long100`).
const LONG_SESSIONS: [usize; 2] = [10, 100];

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

    if args.journal_only {
        return crate::journal::journal_rows(&args, &url, tag).await;
    }
    // 1. Runs per second.
    if !args.skip_throughput {
        let mut rows = Vec::new();
        rows.push(throughput_row(&args, "1 worker, SQLite", None, 1, "bench-sqlite", "").await?);
        // The cost of the safe-point journal: the same worker with crash recovery off.
        let db = create_database(&url, &format!("bench_{tag}_tp1_nockpt"))?;
        let label = "1 worker, PostgreSQL, no safe-point journal (`checkpoint_runs = false`)";
        rows.push(throughput_row(&args, label, Some(&db), 1, "bench-pg1-nockpt", "checkpoint_runs = false").await?);
        // The run queue: a worker with 4 places, so that runs past them wait in the database.
        let db = create_database(&url, &format!("bench_{tag}_tp1_queue"))?;
        let label = format!(
            "1 worker, PostgreSQL, `worker_runs = 4` (of the {} in flight, the rest queued in the database)",
            args.concurrency
        );
        rows.push(throughput_row(&args, &label, Some(&db), 1, "bench-pg1-queue", "worker_runs = 4").await?);
        for n in 1..=args.max_workers {
            let db = create_database(&url, &format!("bench_{tag}_tp{n}"))?;
            let label = format!("{n} worker{}, PostgreSQL", if n == 1 { "" } else { "s" });
            rows.push(throughput_row(&args, &label, Some(&db), n, &format!("bench-pg{n}"), "").await?);
        }
        print_throughput(&mut rows);
    }
    if args.throughput_only {
        return Ok(());
    }

    // 2 and 3: two workers on a fresh database, and a third whose runs wait in it.
    let db = create_database(&url, &format!("bench_{tag}_park"))?;
    eprintln!("[workers-bench] starting three workers for the memory and approval rows");
    let cluster = Cluster::start(&args.profile, Some(&db), 2).await?;
    let (a, b) = match cluster.workers.as_slice() {
        [a, b] => (a, b),
        _ => bail!("two workers expected"),
    };
    let dir_c = tempfile::tempdir()?;
    let c = crate::worker::Worker::start(
        "worker C (runs wait in it)",
        dir_c.path(),
        &args.profile,
        Some(&db),
        Some(&a.data),
        "park_after_ms = 3600000",
    )
    .await?;
    let key = tenant(&a.api, "bench-park").await?;
    install_asker(&a.api, &key, &args.profile).await?;
    // Warm-up: a run parked and approved on each worker (each compiles the asker).
    for w in [a, b, &c] {
        let warm = approvals("warm-up", (&w.api, &w.api), &key, ("demo", 2), &db).await?;
        ensure!(warm.statuses.get("completed") == Some(&2), "warm-up on {}: {}", w.name, counts(&warm.statuses));
    }

    // Several cycles in a row: the second on shows whether what the first left
    // resident after its aborts is reused (kept by the allocators) or grows.
    let mut cycles = Vec::new();
    for _ in 0..args.cycles.max(1) {
        cycles.push(("parked in PostgreSQL (worker A)", memory(a, &key, args.parked, Some(&db)).await?));
    }
    for _ in 0..args.cycles.max(1) {
        cycles.push(("waiting in the worker (worker C)", memory(&c, &key, args.in_process, None).await?));
    }
    println!("### Memory of runs waiting for approval (one worker, PostgreSQL)\n");
    println!(
        "The chain: the `scripted` plugin asking before `create_file` (one instance per run). {} cycles of \
         park N, measure, abort all, on the same worker, for each setup.\n",
        args.cycles.max(1)
    );
    println!(
        "| setup | cycle | runs submitted | waiting (201) | time to all waiting | VmRSS before | all waiting | 3 s later \
         | KiB per waiting run | after aborting all |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, (setup, mem)) in cycles.iter().enumerate() {
        let per_run = |rss: u64| (rss.saturating_sub(mem.before)) as f64 / mem.parked.max(1) as f64;
        println!(
            "| {setup} | {} | {} | {} | {:.1} s | {} KiB | {} KiB | {} KiB | **{:.1}** ({:.1} 3 s later) | {} KiB |",
            i % args.cycles.max(1) + 1,
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
    for (setup, mem) in &cycles {
        if !mem.refused.is_empty() {
            println!("- {setup}: refused submissions: {}", counts(&mem.refused));
        }
        if let Some(e) = &mem.error {
            println!("- {setup}: **not all waiting**: {e}");
        }
        println!("- {setup}: after the aborts, the runs ended as: {}", counts(&mem.ended));
    }
    println!();

    let m = args.approvals;
    let mut rows = vec![
        approvals("demo: parked by A, answered and resumed on B", (&a.api, &b.api), &key, ("demo", m), &db).await?,
    ];
    for k in LONG_SESSIONS {
        let label = format!("{k} tool calls before the asked one: parked by A, resumed on B");
        rows.push(approvals(&label, (&a.api, &b.api), &key, (&format!("long{k}"), m), &db).await?);
    }
    rows.push(
        approvals("demo: parked by A, answered and resumed on A", (&a.api, &a.api), &key, ("demo", m), &db).await?,
    );
    rows.push(
        approvals("demo: waiting in worker C (not parked), answered on C", (&c.api, &c.api), &key, ("demo", m), &db)
            .await?,
    );
    let (_, left) = a.api.get("/v1/approvals", &key).await?;
    println!("### Resume latency: approve call to the record readable on the answering worker\n");
    println!("| | runs | checkpoint, mean / max | p50 | p99 | max | the approve call itself, p50 / p99 | ended as |");
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    for r in &mut rows {
        let (p50, p99, max) = percentiles(&mut r.latencies);
        let (c50, c99, _) = percentiles(&mut r.calls);
        let bytes = r.checkpoint_bytes.map_or("–".to_string(), |(mean, max)| {
            format!("{:.0} KiB / {:.0} KiB", mean / 1024.0, max as f64 / 1024.0)
        });
        println!(
            "| {} | {} | {bytes} | {} | {} | {} | {} / {} | {} |",
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
    let (n, first) = c.log_problems();
    if n > 0 {
        println!("- worker C's log: {n} warnings or errors, e.g. {}", first.join(" | "));
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
