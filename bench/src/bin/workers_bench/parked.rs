//! Runs parked for approval: memory per parked run, and approval latency.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::json;

use crate::counts;
use crate::runs::{poll_record, run_body_on, submit};
use crate::worker::{Api, Worker};

/// Submits `n` runs of the asker chain to `api`, `concurrency` at once; the ids and the refusals.
pub(crate) async fn submit_parked(
    api: &Api,
    key: &str,
    (model, n): (&str, usize),
    concurrency: usize,
) -> (Vec<String>, BTreeMap<String, usize>) {
    let next = Arc::new(AtomicUsize::new(0));
    let body = Arc::new(run_body_on(model, &["asker"]));
    let clients: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (api, next, body, key) = (api.clone(), next.clone(), body.clone(), key.to_string());
            tokio::spawn(async move {
                let mut out = Vec::new();
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    out.push(submit(&api, &key, &body).await);
                }
                out
            })
        })
        .collect();
    let (mut ids, mut refused) = (Vec::new(), BTreeMap::new());
    for client in clients {
        match client.await {
            Ok(results) => {
                for r in results {
                    match r {
                        Ok(id) => ids.push(id),
                        Err(e) => *refused.entry(e).or_insert(0) += 1,
                    }
                }
            }
            Err(e) => *refused.entry(format!("client task failed: {e}")).or_insert(0) += 1,
        }
    }
    (ids, refused)
}

/// Waits (at most `limit`) until `api`'s `GET /v1/approvals` lists an approval
/// for each of `runs`; returns run id → approval id, and how long it took.
pub(crate) async fn wait_listed(
    api: &Api,
    key: &str,
    runs: &[String],
    limit: Duration,
) -> Result<HashMap<String, String>> {
    let started = Instant::now();
    let mut progress = (0, Instant::now());
    loop {
        let (status, v) = api.get("/v1/approvals", key).await?;
        ensure!(status == 200, "GET /v1/approvals: {status} {v}");
        let listed: HashMap<String, String> = v
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| Some((a["run_id"].as_str()?.to_string(), a["id"].as_str()?.to_string())))
            .collect();
        let waiting = runs.iter().filter(|r| listed.contains_key(*r)).count();
        if waiting == runs.len() {
            return Ok(listed);
        }
        if waiting > progress.0 {
            progress = (waiting, Instant::now());
        }
        if started.elapsed() > limit || progress.1.elapsed() > Duration::from_secs(20) {
            bail!(
                "{waiting} of {} runs listed as waiting for approval after {:.0} s (none more in the last {:.0} s)",
                runs.len(),
                started.elapsed().as_secs_f64(),
                progress.1.elapsed().as_secs_f64()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Aborts `runs` on `api` and waits for each to end; the final statuses (and refusals) counted.
pub(crate) async fn abort_all(api: &Api, key: &str, runs: &[String]) -> BTreeMap<String, usize> {
    let queue = Arc::new(runs.to_vec());
    let next = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..32)
        .map(|_| {
            let (api, queue, next, key) = (api.clone(), queue.clone(), next.clone(), key.to_string());
            tokio::spawn(async move {
                let mut out = Vec::new();
                while let Some(run) = queue.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let aborted = api.post(&format!("/v1/runs/{run}/abort"), &key, &json!({"reason": "bench"})).await;
                    match aborted {
                        Ok((200, _)) => {}
                        Ok((status, v)) => out.push(format!("abort answered {status} {v}")),
                        Err(e) => out.push(format!("abort failed: {e}")),
                    }
                }
                out
            })
        })
        .collect();
    let mut statuses = BTreeMap::new();
    for client in clients {
        for problem in client.await.unwrap_or_else(|e| vec![format!("abort task failed: {e}")]) {
            *statuses.entry(problem).or_insert(0) += 1;
        }
    }
    // Then each must end, its record stored (all within two minutes).
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(120);
    let clients: Vec<_> = (0..16)
        .map(|_| {
            let (api, queue, next, key) = (api.clone(), queue.clone(), next.clone(), key.to_string());
            tokio::spawn(async move {
                let mut out = Vec::new();
                while let Some(run) = queue.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let got = tokio::time::timeout(left, poll_record(&api, &key, run, Duration::from_millis(50))).await;
                    out.push(match got {
                        Ok(Ok(v)) => v["status"].as_str().unwrap_or("?").to_string(),
                        Ok(Err(e)) => format!("lost: {e}"),
                        Err(_) => "not ended within 120 s of the aborts".to_string(),
                    });
                }
                out
            })
        })
        .collect();
    for client in clients {
        for status in client.await.unwrap_or_else(|e| vec![format!("wait task failed: {e}")]) {
            *statuses.entry(status).or_insert(0) += 1;
        }
    }
    statuses
}

/// The memory row.
pub(crate) struct Memory {
    pub(crate) n: usize,
    pub(crate) parked: usize,
    pub(crate) refused: BTreeMap<String, usize>,
    pub(crate) before: u64,
    pub(crate) waiting: u64,
    pub(crate) settled: u64,
    pub(crate) after_abort: u64,
    pub(crate) took: Duration,
    pub(crate) ended: BTreeMap<String, usize>,
    pub(crate) error: Option<String>,
}

/// `n` runs waiting for approval on `a`, measured, then aborted. With
/// `parked_in` (the database), they are counted there as `parked` (the
/// approvals list shows at most 1,000); else as listed by `a`.
pub(crate) async fn memory(a: &Worker, key: &str, n: usize, parked_in: Option<&str>) -> Result<Memory> {
    eprintln!("[workers-bench] memory: {n} runs waiting on {}", a.name);
    let before = a.rss_kib()?;
    let started = Instant::now();
    let (ids, refused) = submit_parked(&a.api, key, ("demo", n), 16).await;
    let limit = Duration::from_secs(120 + u64::try_from(n / 5).unwrap_or(0));
    let listed = match parked_in {
        Some(db) => wait_parked(db, ids.len(), limit).await,
        None => wait_listed(&a.api, key, &ids, limit).await.map(|_| ()),
    };
    let took = started.elapsed();
    let waiting = a.rss_kib()?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let settled = a.rss_kib()?;
    let error = listed.err().map(|e| e.to_string());
    eprintln!("[workers-bench] memory: aborting {} runs", ids.len());
    let ended = abort_all(&a.api, key, &ids).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after_abort = a.rss_kib()?;
    Ok(Memory { n, parked: ids.len(), refused, before, waiting, settled, after_abort, took, ended, error })
}

/// Waits (at most `limit`) until `n` runs are `parked` in `db`.
async fn wait_parked(db: &str, n: usize, limit: Duration) -> Result<()> {
    let started = Instant::now();
    loop {
        let parked = parked_count(db)?;
        if parked >= n {
            return Ok(());
        }
        if started.elapsed() > limit {
            bail!("{parked} of {n} runs parked after {:.0} s", started.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// How many runs are `parked` in `db`.
fn parked_count(db: &str) -> Result<usize> {
    let db = db.to_string();
    std::thread::spawn(move || -> Result<usize> {
        let mut c = postgres::Client::connect(&db, postgres::NoTls)?;
        let n: i64 = c.query_one("SELECT count(*) FROM runs WHERE status = 'parked'", &[])?.get(0);
        Ok(usize::try_from(n).unwrap_or(0))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the database thread panicked"))?
}

/// The approval rows.
pub(crate) struct Approvals {
    pub(crate) label: String,
    pub(crate) latencies: Vec<u64>,
    pub(crate) calls: Vec<u64>,
    pub(crate) statuses: BTreeMap<String, usize>,
    /// The parked runs' checkpoints, mean and largest, in bytes (none when they did not park).
    pub(crate) checkpoint_bytes: Option<(f64, i64)>,
}

/// The mean and largest checkpoint of the runs parked in `db` now, in bytes.
pub(crate) fn checkpoint_bytes(db: &str) -> Result<Option<(f64, i64)>> {
    let db = db.to_string();
    std::thread::spawn(move || -> Result<Option<(f64, i64)>> {
        let mut c = postgres::Client::connect(&db, postgres::NoTls)?;
        let row = c.query_one(
            "SELECT avg(octet_length(checkpoint))::FLOAT8, max(octet_length(checkpoint))::BIGINT FROM runs
             WHERE status = 'parked'",
            &[],
        )?;
        Ok(row.get::<_, Option<f64>>(0).zip(row.get::<_, Option<i64>>(1)))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the database thread panicked"))?
}

/// `m` runs of `model` parked on `a`, then approved one at a time through
/// `b`; each timed from the approve call to `b` showing the record. `db`:
/// the database, to measure the checkpoints.
pub(crate) async fn approvals(
    label: &str,
    (a, b): (&Api, &Api),
    key: &str,
    (model, m): (&str, usize),
    db: &str,
) -> Result<Approvals> {
    eprintln!("[workers-bench] approvals: {label}");
    let (ids, refused) = submit_parked(a, key, (model, m), 8).await;
    ensure!(refused.is_empty(), "runs refused: {}", counts(&refused));
    let listed = wait_listed(b, key, &ids, Duration::from_secs(120)).await?;
    // The parks are stored with the listing; a moment for the last ones.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let checkpoint_bytes = checkpoint_bytes(db)?;
    let mut out = Approvals {
        label: label.to_string(),
        latencies: Vec::new(),
        calls: Vec::new(),
        statuses: BTreeMap::new(),
        checkpoint_bytes,
    };
    for run in &ids {
        let id = listed.get(run).context("approval listed")?.replace('/', "%2F");
        // A random pause first, uniform over two of A's 200 ms command polls:
        // one approval right after another's run ended would fall at the same
        // point of the poll every time.
        tokio::time::sleep(jitter(Duration::from_millis(400))).await;
        let started = Instant::now();
        let (status, v) = b.post(&format!("/v1/approvals/{id}"), key, &json!({"decision": "approve"})).await?;
        out.calls.push(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
        if status != 200 {
            *out.statuses.entry(format!("approve answered {status} {v}")).or_insert(0) += 1;
            continue;
        }
        match tokio::time::timeout(Duration::from_secs(30), poll_record(b, key, run, Duration::from_millis(5))).await {
            Ok(Ok(v)) => {
                out.latencies.push(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
                *out.statuses.entry(v["status"].as_str().unwrap_or("?").to_string()).or_insert(0) += 1;
            }
            Ok(Err(e)) => *out.statuses.entry(format!("lost: {e}")).or_insert(0) += 1,
            Err(_) => *out.statuses.entry("no record within 30 s".into()).or_insert(0) += 1,
        }
    }
    Ok(out)
}

/// A pseudo-random duration below `max` (std's random hasher keys).
pub(crate) fn jitter(max: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let r = std::collections::hash_map::RandomState::new().build_hasher().finish();
    let max_us = u64::try_from(max.as_micros()).unwrap_or(u64::MAX).max(1);
    Duration::from_micros(r % max_us)
}
