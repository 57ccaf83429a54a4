//! The safe-point journal's cost by run length (issue 17): one worker on
//! PostgreSQL, the three-plugin chain, runs of the `demo` session (one
//! tool call that runs) and of sessions with 10 and 100 `read_file` calls
//! before it (`long10`, `long100`). Side by side, each on a fresh database:
//! journal parts appended at each safe point (the default), the whole
//! checkpoint written at each safe point (`journal_parts = false`, as before),
//! and no journal (`checkpoint_runs = false`). Per row: runs/s, latency
//! p50/p99 (submission to stored record), the worker's and PostgreSQL's CPU
//! per run, and the WAL PostgreSQL wrote per run (`pg_current_wal_lsn()`
//! before and after, with a `CHECKPOINT` just before each batch so that
//! every row starts with the same full-page images to write: every byte the
//! journal, the events and the rest of the run made it write). The setups
//! run in the same order for each session, one batch each.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use hookbox_bench::served::percentiles;

use crate::cpu::CpuSnapshot;
use crate::runs::run_body_on;
use crate::throughput::drive_body;
use crate::worker::{Api, CHAIN, Cluster, Worker, create_database, install_chain, tenant};
use crate::{Args, counts, ms};

/// The setups compared: label and `server.toml` lines.
const SETUPS: [(&str, &str); 3] = [
    ("journal parts appended (default)", ""),
    ("whole checkpoint at every safe point (`journal_parts = false`)", "journal_parts = false"),
    ("no journal (`checkpoint_runs = false`)", "checkpoint_runs = false"),
];

/// The WAL position of the database server at `db`, in bytes; with
/// `checkpoint`, after a `CHECKPOINT`.
fn wal_bytes(db: &str, checkpoint: bool) -> Result<i64> {
    let db = db.to_string();
    std::thread::spawn(move || -> Result<i64> {
        let mut c = postgres::Client::connect(&db, postgres::NoTls)?;
        if checkpoint {
            c.batch_execute("CHECKPOINT")?;
        }
        Ok(c.query_one("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::BIGINT", &[])?.get(0))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the database thread panicked"))?
}

/// Prints the journal rows: for each session, each setup, `args.journal_runs` runs.
pub(crate) async fn journal_rows(args: &Args, url: &str, tag: u32) -> Result<()> {
    println!("### The safe-point journal by run length (1 worker, PostgreSQL)\n");
    println!(
        "{} runs per row, {} at once; the chain deny-tools, state-counter, audit-log. WAL: what PostgreSQL \
         wrote per run (the whole server; nothing else runs on it).\n",
        args.journal_runs, args.journal_concurrency
    );
    println!(
        "| session | setup | runs/s | p50 | p99 | CPU ms per run: worker / PostgreSQL | WAL per run | completed | other |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---|");
    for model in ["demo", "long10", "long100"] {
        for (i, (label, extra)) in SETUPS.iter().enumerate() {
            let db = create_database(url, &format!("bench_{tag}_journal_{model}_{i}"))?;
            eprintln!("[workers-bench] journal: {model}, {label}");
            let cluster = Cluster::start_with(&args.profile, Some(&db), 1, extra).await?;
            let apis: Vec<Api> = cluster.workers.iter().map(|w| w.api.clone()).collect();
            let api = apis.first().context("no worker")?;
            let key = tenant(api, &format!("bench-journal-{i}")).await?;
            install_chain(api, &key, &args.profile).await?;
            let body = run_body_on(model, &CHAIN);
            // Warm-up (not timed): the worker compiles the plugins on first use.
            drive_body(&apis, &key, &body, 2, 1).await;
            let pids: Vec<u32> = cluster.workers.iter().map(Worker::pid).collect();
            let wal_before = wal_bytes(&db, true)?;
            let cpu_before = CpuSnapshot::take(&pids);
            let (wall, outcomes) = drive_body(&apis, &key, &body, args.journal_runs, args.journal_concurrency).await;
            let (cpu, wal_after) = (CpuSnapshot::take(&pids).since(&cpu_before), wal_bytes(&db, false)?);
            let mut statuses = BTreeMap::new();
            let mut latencies = Vec::new();
            for o in outcomes {
                *statuses.entry(o.status).or_insert(0) += 1;
                latencies.extend(o.latency_us);
            }
            let (p50, p99, _) = percentiles(&mut latencies);
            let n = args.journal_runs.max(1) as f64;
            let completed = statuses.remove("completed").unwrap_or(0);
            let other = if statuses.is_empty() { "0".to_string() } else { counts(&statuses) };
            println!(
                "| `{model}` | {label} | {:.1} | {} | {} | {:.1} / {:.1} | {:.0} KiB | {completed} | {other} |",
                n / wall.as_secs_f64(),
                ms(p50),
                ms(p99),
                cpu.0 / n,
                cpu.1 / n,
                (wal_after - wal_before) as f64 / n / 1024.0,
            );
            for p in cluster.problems() {
                eprintln!("{p}");
            }
        }
    }
    println!();
    Ok(())
}
