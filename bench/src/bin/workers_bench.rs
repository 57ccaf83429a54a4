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
//!    `GET /v1/approvals` lists all N; then every run is aborted and must end.
//! 3. **Cross-worker approval latency**: M runs parked on worker A, each
//!    approved through worker B, one at a time: from B's approve call to B's
//!    `GET /v1/runs/{id}` showing the record (A takes queued commands every
//!    200 ms). The same approved on A itself, for comparison.
//!
//! Usage: `workers_bench [--profile debug|release] [--runs N] [--concurrency C]
//! [--parked N] [--approvals M]` with `HOOKBOX_TEST_POSTGRES` set (run it
//! under `scripts/with-postgres.sh`; `scripts/bench-workers.sh` builds and
//! does both). Markdown on stdout, progress on stderr. Every worker is killed
//! when the bench ends, however it ends.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use clap::Parser;
use hookbox_bench::served::{OPERATOR, percentiles};
use hookbox_bench::{demo_session, plugin_path, repo_root};
use reqwest::Method;
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    /// The build profile of the `hookbox` binary and the plugins.
    #[arg(long, default_value = "debug")]
    profile: String,
    /// Runs per throughput row.
    #[arg(long, default_value_t = 300)]
    runs: usize,
    /// Runs in flight at once in a throughput row (all workers together).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Runs parked for approval on one worker for the memory figure.
    #[arg(long, default_value_t = 1000)]
    parked: usize,
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

/// A worker's HTTP API.
#[derive(Clone)]
struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    /// One request; the status and the body as JSON (null when it is not JSON).
    async fn call(&self, method: Method, path: &str, key: &str, body: Option<&Value>) -> Result<(u16, Value)> {
        let mut req = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(key);
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body.to_string());
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    async fn get(&self, path: &str, key: &str) -> Result<(u16, Value)> {
        self.call(Method::GET, path, key, None).await
    }

    async fn post(&self, path: &str, key: &str, body: &Value) -> Result<(u16, Value)> {
        self.call(Method::POST, path, key, Some(body)).await
    }
}

/// A `hookbox serve` process (killed on drop).
struct Worker {
    name: String,
    child: Child,
    api: Api,
    data: PathBuf,
    log: PathBuf,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Worker {
    /// Starts `target/PROFILE/hookbox serve` in `dir` (its config, data and
    /// log there), on `database` (none: the SQLite default), with the key
    /// secret copied from `secret_from` (a data directory) when given.
    async fn start(
        name: &str,
        dir: &Path,
        profile: &str,
        database: Option<&str>,
        secret_from: Option<&Path>,
    ) -> Result<Worker> {
        let root = repo_root();
        let data = dir.join("data");
        std::fs::create_dir_all(&data)?;
        if let Some(from) = secret_from {
            std::fs::copy(from.join("server.secret"), data.join("server.secret"))
                .context("copy the first worker's server.secret")?;
        }
        let database = database.map(|url| format!("database = \"{url}\"\n")).unwrap_or_default();
        let config = format!(
            "data_dir = \"{}\"\nworkspace_template = \"{}\"\n{database}\
             [http]\nmax_requests_per_tenant = 4096\n\
             [default_quotas]\nconcurrent_runs = 100000\nlive_instances = 1000000\n\
             fuel_per_minute = 1000000000000000\nhook_ms_per_minute = 1000000000\nspend_per_day_usd = 1000000.0\n\
             [models]\ndemo = \"replay:{}\"\n",
            data.display(),
            root.join("examples/demo/workspace").display(),
            demo_session().display()
        );
        std::fs::write(dir.join("server.toml"), config)?;
        let log = dir.join("worker.log");
        let port = free_port()?;
        let bin = root.join("target").join(profile).join("hookbox");
        let child = Command::new(&bin)
            .args(["serve", "--config"])
            .arg(dir.join("server.toml"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("HOOKBOX_OPERATOR_KEY", OPERATOR)
            .env("HOOKBOX_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("start {} (build it first)", bin.display()))?;
        let http = reqwest::Client::builder().timeout(RUN_TIMEOUT).pool_max_idle_per_host(512).build()?;
        let mut worker =
            Worker { name: name.to_string(), child, api: Api { base: format!("http://127.0.0.1:{port}"), http }, data, log };
        let started = Instant::now();
        loop {
            if worker.api.http.get(format!("{}/healthz", worker.api.base)).send().await.is_ok() {
                return Ok(worker);
            }
            if let Some(status) = worker.child.try_wait()? {
                bail!("{name} exited at start ({status}): {}", tail(&worker.log));
            }
            if started.elapsed() > Duration::from_secs(60) {
                bail!("{name} did not answer /healthz within 60 s: {}", tail(&worker.log));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The worker's resident memory, in KiB.
    fn rss_kib(&self) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))?;
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .context("no VmRSS in /proc/PID/status")
    }

    /// The warnings, errors and panics in the worker's log: (count, the first few).
    fn log_problems(&self) -> (usize, Vec<String>) {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let bad: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR ") || l.contains("panicked"))
            .collect();
        let mut first: Vec<String> = Vec::new();
        for line in &bad {
            let line: String = line.chars().take(300).collect();
            if first.len() < 3 && !first.contains(&line) {
                first.push(line);
            }
        }
        (bad.len(), first)
    }
}

/// The last lines of a log file.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

/// Workers on one database (none: one worker on SQLite), each in a temporary directory.
struct Cluster {
    workers: Vec<Worker>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Cluster {
    async fn start(profile: &str, database: Option<&str>, n: usize) -> Result<Cluster> {
        let mut workers: Vec<Worker> = Vec::new();
        let mut dirs = Vec::new();
        for i in 0..n {
            let dir = tempfile::tempdir()?;
            let secret_from = workers.first().map(|w| w.data.clone());
            let name = format!("worker {}", i + 1);
            workers.push(Worker::start(&name, dir.path(), profile, database, secret_from.as_deref()).await?);
            dirs.push(dir);
        }
        Ok(Cluster { workers, _dirs: dirs })
    }

    /// Every worker's log problems, as markdown lines (empty when none).
    fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for w in &self.workers {
            let (n, first) = w.log_problems();
            if n > 0 {
                out.push(format!("- {}: {n} warning/error lines in its log, e.g.:", w.name));
                out.extend(first.into_iter().map(|l| format!("  `{}`", l.replace('`', "'"))));
            }
        }
        out
    }
}

/// Makes database `name` on the server of `url` (a `postgres://.../DB` URL); returns its URL.
fn create_database(url: &str, name: &str) -> Result<String> {
    let out = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", &format!("CREATE DATABASE {name}")])
        .stdin(Stdio::null())
        .output()
        .context("run psql (Debian's postgresql-client)")?;
    ensure!(out.status.success(), "CREATE DATABASE {name}: {}", String::from_utf8_lossy(&out.stderr));
    let (server, _) = url.rsplit_once('/').context("HOOKBOX_TEST_POSTGRES is not a URL ending in /DATABASE")?;
    Ok(format!("{server}/{name}"))
}

/// Makes tenant `name` (on any worker of the database); returns its admin key.
async fn tenant(api: &Api, name: &str) -> Result<String> {
    let (status, v) = api.post("/v1/admin/tenants", OPERATOR, &json!({"name": name})).await?;
    ensure!(status == 201, "tenant {name}: {status} {v}");
    v["key"].as_str().map(str::to_string).context("no key in the tenant's answer")
}

/// Uploads the plugin file `file` (of `profile`) as `plugin` and activates it.
async fn install(api: &Api, key: &str, plugin: &str, file: &str, profile: &str, manifest: &Value) -> Result<()> {
    let path = plugin_path(file, profile);
    let bytes = std::fs::read(&path).with_context(|| format!("{} (build the plugins first)", path.display()))?;
    let boundary = "workers-bench-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"manifest\"\r\n\r\n{manifest}\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"component\"\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let resp = api
        .http
        .post(format!("{}/v1/plugins/{plugin}/versions", api.base))
        .bearer_auth(key)
        .header("content-type", format!("multipart/form-data; boundary={boundary}"))
        .body(body)
        .send()
        .await?;
    let status = resp.status().as_u16();
    let v: Value = serde_json::from_str(&resp.text().await?).unwrap_or(Value::Null);
    ensure!(status == 201, "upload of {plugin}: {status} {v}");
    let version = v["version"].as_i64().with_context(|| format!("upload of {plugin}: {v}"))?;
    let (status, a) = api.post(&format!("/v1/plugins/{plugin}/versions/{version}/activate"), key, &json!({})).await?;
    ensure!(status == 200, "activate {plugin}: {status} {a}");
    Ok(())
}

/// The three-plugin chain of the throughput rows.
const CHAIN: [&str; 3] = ["deny-tools", "state-counter", "audit-log"];

async fn install_chain(api: &Api, key: &str, profile: &str) -> Result<()> {
    install(api, key, "deny-tools", "deny_tools", profile, &json!({"config": {"paths": [".env"]}})).await?;
    install(api, key, "state-counter", "state_counter", profile, &json!({})).await?;
    install(api, key, "audit-log", "audit_log", profile, &json!({})).await
}

/// The plugin that parks a run: it asks for approval before `create_file`.
async fn install_asker(api: &Api, key: &str, profile: &str) -> Result<()> {
    let manifest =
        json!({"config": {"before-tool-call": "ask-approval:{tool} needs a person", "only_tool": "create_file"}});
    install(api, key, "asker", "scripted", profile, &manifest).await
}

fn run_body(plugins: &[&str]) -> Value {
    json!({"prompt": PROMPT, "model": "demo", "plugins": plugins})
}

/// `POST /v1/runs`: the run id, or the answer that was not 201.
async fn submit(api: &Api, key: &str, body: &Value) -> Result<String, String> {
    match api.post("/v1/runs", key, body).await {
        Ok((201, v)) => v["run_id"].as_str().map(str::to_string).ok_or_else(|| format!("201 without run_id: {v}")),
        Ok((status, v)) => Err(format!("{status} {}", v["error"]["message"].as_str().unwrap_or(&v.to_string()))),
        Err(e) => Err(format!("request failed: {e}")),
    }
}

/// Waits until the run's record is stored; returns `GET /v1/runs/{id}`'s answer.
/// The run's event stream is read until `end` (the worker pushes it), then
/// the run is polled every 5 ms until its record is stored.
async fn wait_record(api: &Api, key: &str, run: &str) -> Result<Value> {
    let stream = api.http.get(format!("{}/v1/runs/{run}/events", api.base)).bearer_auth(key).send().await;
    if let Ok(mut resp) = stream
        && resp.status().as_u16() == 200
    {
        let mut pending = String::new();
        'read: while let Some(chunk) = resp.chunk().await? {
            pending.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(at) = pending.find('\n') {
                let line: String = pending.drain(..=at).collect();
                if line.strip_prefix("event:").is_some_and(|name| name.trim() == "end") {
                    break 'read;
                }
            }
        }
    }
    poll_record(api, key, run, Duration::from_millis(5)).await
}

/// Polls `GET /v1/runs/{id}` every `every` until the record is there.
async fn poll_record(api: &Api, key: &str, run: &str, every: Duration) -> Result<Value> {
    loop {
        let (status, v) = api.get(&format!("/v1/runs/{run}"), key).await?;
        ensure!(status == 200, "GET /v1/runs/{run}: {status} {v}");
        if !v["record"].is_null() {
            return Ok(v);
        }
        tokio::time::sleep(every).await;
    }
}

/// What became of one run.
#[derive(Default)]
struct Outcome {
    /// Submission to stored record, µs (none when it was refused or never ended).
    latency_us: Option<u64>,
    /// The run's final status, or the refusal.
    status: String,
    /// Hook failures in its record.
    hook_failures: usize,
}

/// Submits one run and waits (at most [`RUN_TIMEOUT`]) for its record.
async fn one_run(api: &Api, key: &str, body: &Value) -> Outcome {
    let started = Instant::now();
    let run = match submit(api, key, body).await {
        Ok(run) => run,
        Err(e) => return Outcome { status: format!("refused: {e}"), ..Outcome::default() },
    };
    match tokio::time::timeout(RUN_TIMEOUT, wait_record(api, key, &run)).await {
        Ok(Ok(v)) => Outcome {
            latency_us: Some(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)),
            status: v["status"].as_str().unwrap_or("?").to_string(),
            hook_failures: v["record"]["hook_failures"].as_array().map_or(0, Vec::len),
        },
        Ok(Err(e)) => Outcome { status: format!("lost: {e}"), ..Outcome::default() },
        Err(_) => Outcome { status: format!("no record within {} s", RUN_TIMEOUT.as_secs()), ..Outcome::default() },
    }
}

/// One throughput row.
struct Row {
    label: String,
    runs: usize,
    wall: Duration,
    latencies: Vec<u64>,
    /// Final statuses and refusals, counted.
    statuses: BTreeMap<String, usize>,
    hook_failures: usize,
    warmup: BTreeMap<String, usize>,
    problems: Vec<String>,
}

/// `runs` runs of the three-plugin chain, round-robin over `apis`, `concurrency` at once.
async fn drive(apis: &[Api], key: &str, runs: usize, concurrency: usize) -> (Duration, Vec<Outcome>) {
    let apis = Arc::new(apis.to_vec());
    let next = Arc::new(AtomicUsize::new(0));
    let body = Arc::new(run_body(&CHAIN));
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

async fn throughput_row(
    args: &Args,
    label: &str,
    database: Option<&str>,
    workers: usize,
    tenant_name: &str,
) -> Result<Row> {
    eprintln!("[workers-bench] {label}: starting {workers} worker(s)");
    let cluster = Cluster::start(&args.profile, database, workers).await?;
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
    let (wall, outcomes) = drive(&apis, &key, args.runs, args.concurrency).await;
    let mut statuses = BTreeMap::new();
    let mut latencies = Vec::new();
    let mut hook_failures = 0;
    for o in outcomes {
        *statuses.entry(o.status).or_insert(0) += 1;
        latencies.extend(o.latency_us);
        hook_failures += o.hook_failures;
    }
    let problems = cluster.problems();
    Ok(Row { label: label.to_string(), runs: args.runs, wall, latencies, statuses, hook_failures, warmup, problems })
}

fn ms(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

fn counts(map: &BTreeMap<String, usize>) -> String {
    map.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")
}

fn print_throughput(rows: &mut [Row]) {
    println!("### Runs per second\n");
    println!("| setup | runs | wall | runs/s | p50 | p99 | max | completed | not completed or refused | hook failures |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    for r in rows.iter_mut() {
        let (p50, p99, max) = percentiles(&mut r.latencies);
        let completed = r.statuses.get("completed").copied().unwrap_or(0);
        let others: BTreeMap<String, usize> =
            r.statuses.iter().filter(|(k, _)| k.as_str() != "completed").map(|(k, v)| (k.clone(), *v)).collect();
        let others = if others.is_empty() { "0".to_string() } else { counts(&others) };
        println!(
            "| {} | {} | {:.2} s | {:.1} | {} | {} | {} | {completed} | {others} | {} |",
            r.label,
            r.runs,
            r.wall.as_secs_f64(),
            r.runs as f64 / r.wall.as_secs_f64(),
            ms(p50),
            ms(p99),
            ms(max),
            r.hook_failures
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

/// Submits `n` runs of the asker chain to `api`, `concurrency` at once; the ids and the refusals.
async fn submit_parked(api: &Api, key: &str, n: usize, concurrency: usize) -> (Vec<String>, BTreeMap<String, usize>) {
    let next = Arc::new(AtomicUsize::new(0));
    let body = Arc::new(run_body(&["asker"]));
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
async fn wait_listed(api: &Api, key: &str, runs: &[String], limit: Duration) -> Result<HashMap<String, String>> {
    let started = Instant::now();
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
        if started.elapsed() > limit {
            bail!("{waiting} of {} runs listed as waiting for approval after {} s", runs.len(), limit.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Aborts `runs` on `api` and waits for each to end; the final statuses (and refusals) counted.
async fn abort_all(api: &Api, key: &str, runs: &[String]) -> BTreeMap<String, usize> {
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
struct Memory {
    n: usize,
    parked: usize,
    refused: BTreeMap<String, usize>,
    before: u64,
    waiting: u64,
    settled: u64,
    after_abort: u64,
    took: Duration,
    ended: BTreeMap<String, usize>,
    error: Option<String>,
}

async fn memory(a: &Worker, key: &str, n: usize) -> Result<Memory> {
    eprintln!("[workers-bench] memory: parking {n} runs on {}", a.name);
    let before = a.rss_kib()?;
    let started = Instant::now();
    let (ids, refused) = submit_parked(&a.api, key, n, 16).await;
    let limit = Duration::from_secs(120 + u64::try_from(n / 5).unwrap_or(0));
    let listed = wait_listed(&a.api, key, &ids, limit).await;
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

/// The approval rows.
struct Approvals {
    label: String,
    latencies: Vec<u64>,
    calls: Vec<u64>,
    statuses: BTreeMap<String, usize>,
}

/// `m` runs parked on `a`, then approved one at a time through `b`; each
/// timed from the approve call to `b` showing the record.
async fn approvals(label: &str, a: &Api, b: &Api, key: &str, m: usize) -> Result<Approvals> {
    eprintln!("[workers-bench] approvals: {label}");
    let (ids, refused) = submit_parked(a, key, m, 8).await;
    ensure!(refused.is_empty(), "runs refused: {}", counts(&refused));
    let listed = wait_listed(b, key, &ids, Duration::from_secs(120)).await?;
    let mut out = Approvals { label: label.to_string(), latencies: Vec::new(), calls: Vec::new(), statuses: BTreeMap::new() };
    for run in &ids {
        let id = listed.get(run).context("approval listed")?.replace('/', "%2F");
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

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

async fn bench(args: Args) -> Result<()> {
    let url = std::env::var("HOOKBOX_TEST_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty())
        .context("HOOKBOX_TEST_POSTGRES is not set: run under scripts/with-postgres.sh (scripts/bench-workers.sh does)")?;
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

    let mem = memory(a, &key, args.parked).await?;
    println!("### Memory of runs parked for approval (one worker, PostgreSQL)\n");
    println!("The chain: the `scripted` plugin asking before `create_file` (one instance per run).\n");
    println!("| runs submitted | parked (201) | time to all listed | VmRSS before | all waiting | 3 s later | KiB per parked run | after aborting all |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let per_run = |rss: u64| (rss.saturating_sub(mem.before)) as f64 / mem.parked.max(1) as f64;
    println!(
        "| {} | {} | {:.1} s | {} KiB | {} KiB | {} KiB | **{:.0}** ({:.0} 3 s later) | {} KiB |\n",
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
    if !mem.refused.is_empty() {
        println!("- refused submissions: {}", counts(&mem.refused));
    }
    if let Some(e) = &mem.error {
        println!("- **not all parked**: {e}");
    }
    println!("- after the aborts, the runs ended as: {}\n", counts(&mem.ended));

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
