//! `serve_bench`: the figures of `hookbox serve` (issue 15) side by side in
//! one run. It starts the real `hookbox serve` binary as its own process on
//! a loopback port (with a fresh data directory) and drives it over HTTP
//! from this process:
//!
//! 1. `/v1/evaluate` latency (p50/p99) at a fixed rate of 1,000 requests/s
//!    (open loop: each request is timed from when it was due, so a stall
//!    counts against every request it delays), for a no-op and a deny-tools
//!    plugin, beside the same deny-tools policy as a process spawned per
//!    event (`stdin_hook`);
//! 2. evaluate throughput with 16 concurrent keep-alive clients;
//! 3. upload-to-active time (upload, compile, trial call, activate) of the
//!    Rust and the Python deny-tools;
//! 4. the server's resident memory per idle tenant (a tenant with an active
//!    deny-tools that evaluated once) and per run parked on an approval;
//! 5. fairness: tenant B's evaluate latency alone, then while tenant A
//!    floods the server over 256 connections, three ways: reqwest clients
//!    in this process, `wrk`, and `wrk` at `SCHED_IDLE` with B's client at
//!    `SCHED_FIFO` (clients that take no CPU the server wants, as ones on
//!    other machines would), and that last against a server without fair
//!    sharing (the control); the `wrk` rows again against servers with
//!    `pin_workers = true`.
//!
//! Usage: `serve_bench [--profile debug|release] [--seconds N]
//! [--fairness-only]` (the
//! `hookbox` binary and the plugins of that profile must be built: see
//! `scripts/bench-serve.sh`). Output: markdown on stdout.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use hookbox_bench::served::{POOL_IDLE, Served, percentiles, post_with};
use hookbox_bench::{plugin_path, polyglot_path, process_hook, repo_root};
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    /// The build profile of the `hookbox` binary and the plugins.
    #[arg(long, default_value = "debug")]
    profile: String,
    /// Seconds per fixed-rate and throughput measurement.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Only the fairness rows (after the set-up and warm-up).
    #[arg(long)]
    fairness_only: bool,
}

fn evaluate_body(plugin: &str) -> Value {
    json!({"session_id": "bench", "plugins": [plugin], "event": {"type": "before-tool-call", "iteration": 1,
        "call": {"id": "call_1", "name": "delete_file", "arguments": "{\"path\": \".env\"}"}}})
}

/// Open loop at `rate` requests/s for `seconds`: requests are started on
/// schedule (tokio's timer has 1 ms granularity, so a start can be up to
/// ~1 ms late: that lateness is reported apart) and each is timed from its
/// actual start. Returns (latencies µs, lateness µs, failures).
async fn fixed_rate(
    s: &Arc<Served>,
    key: &str,
    body: &Value,
    rate: u64,
    seconds: u64,
) -> Result<(Vec<u64>, Vec<u64>, usize)> {
    let n = rate * seconds;
    let period = Duration::from_nanos(1_000_000_000 / rate);
    let start = Instant::now() + Duration::from_millis(50);
    let mut tasks = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    let mut late = Vec::with_capacity(tasks.capacity());
    for i in 0..n {
        let due = start + period * u32::try_from(i).unwrap_or(u32::MAX);
        tokio::time::sleep_until(due.into()).await;
        late.push(u64::try_from(due.elapsed().as_micros()).unwrap_or(u64::MAX));
        let (s, key, body) = (s.clone(), key.to_string(), body.clone());
        tasks.push(tokio::spawn(async move {
            let sent = Instant::now();
            let ok = matches!(s.post("/v1/evaluate", &key, &body).await, Ok((200, _)));
            (u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX), ok)
        }));
    }
    let mut lat = Vec::new();
    let mut failed = 0;
    for t in tasks {
        let (us, ok) = t.await?;
        lat.push(us);
        failed += usize::from(!ok);
    }
    Ok((lat, late, failed))
}

/// Closed loop: `clients` concurrent clients for `seconds`; returns (requests, non-200s, latencies µs).
async fn closed_loop(
    s: &Arc<Served>,
    key: &str,
    body: &Value,
    clients: usize,
    seconds: u64,
) -> Result<(u64, u64, Vec<u64>)> {
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (s, key, body) = (s.clone(), key.to_string(), body.clone());
        tasks.push(tokio::spawn(async move {
            let (mut n, mut bad, mut lat) = (0u64, 0u64, Vec::new());
            while Instant::now() < until {
                let t = Instant::now();
                let ok = matches!(s.post("/v1/evaluate", &key, &body).await, Ok((200, _)));
                lat.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
                n += 1;
                bad += u64::from(!ok);
            }
            (n, bad, lat)
        }));
    }
    let (mut n, mut bad, mut lat) = (0, 0, Vec::new());
    for t in tasks {
        let (a, b, l) = t.await?;
        n += a;
        bad += b;
        lat.extend(l);
    }
    Ok((n, bad, lat))
}

/// Sequential evaluate calls of `key` for `seconds`, on a client of their own: latencies in µs.
async fn sequential(base: &str, key: &str, body: &Value, seconds: u64) -> Result<Vec<u64>> {
    let http = reqwest::Client::builder().pool_idle_timeout(POOL_IDLE).build()?;
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut lat = Vec::new();
    while Instant::now() < until {
        let t = Instant::now();
        let (status, v) = post_with(&http, base, "/v1/evaluate", key, body).await?;
        anyhow::ensure!(status == 200, "evaluate: {v}");
        lat.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(lat)
}

/// `wrk` (a C load generator, far lighter than this process's reqwest
/// clients) posting `body` to `/v1/evaluate` with `key`: 1 thread,
/// `connections` connections, `seconds`; with `idle`, at `SCHED_IDLE`
/// (through `chrt`), so it runs only on CPU time nothing else wants. The
/// directory holds its script and must outlive the command.
fn wrk_command(
    base: &str,
    key: &str,
    body: &Value,
    seconds: u64,
    connections: usize,
    idle: bool,
) -> Result<(tempfile::TempDir, Command)> {
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("post.lua");
    let lua_body = body.to_string().replace('\\', "\\\\").replace('"', "\\\"");
    std::fs::write(
        &script,
        format!(
            "wrk.method = \"POST\"\nwrk.body = \"{lua_body}\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.headers[\"Authorization\"] = \"Bearer {key}\"\n"
        ),
    )?;
    let mut cmd = if idle {
        let mut c = Command::new("chrt");
        c.args(["--idle", "0", "wrk"]);
        c
    } else {
        Command::new("wrk")
    };
    cmd.args(["-t1", &format!("-c{connections}"), &format!("-d{seconds}s"), "--latency", "-s"])
        .arg(&script)
        .arg(format!("{base}/v1/evaluate"));
    Ok((dir, cmd))
}

/// Drives `/v1/evaluate` with `wrk`, 16 connections, `seconds`. Returns
/// (requests/s, p50, p99) as wrk prints them.
fn wrk(base: &str, key: &str, body: &Value, seconds: u64) -> Result<(f64, String, String)> {
    let (_dir, mut cmd) = wrk_command(base, key, body, seconds, 16, false)?;
    let out = cmd.output().context("wrk is not installed (apt-get install wrk)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(!text.contains("Non-2xx"), "non-2xx answers: {text}");
    let rps: f64 = wrk_field(&text, "Requests/sec:").parse().with_context(|| format!("wrk said: {text}"))?;
    Ok((rps, wrk_field(&text, "50%"), wrk_field(&text, "99%")))
}

/// The value after `prefix` on the first line of wrk's output that starts with it.
fn wrk_field(text: &str, prefix: &str) -> String {
    text.lines().find_map(|l| l.trim().strip_prefix(prefix).map(|v| v.trim().to_string())).unwrap_or_default()
}

/// A's concurrent clients (connections) in a fairness row.
const FLOOD_CONNECTIONS: usize = 256;

/// How tenant A floods the server in a fairness row.
#[derive(Clone, Copy)]
enum Flood {
    /// [`FLOOD_CONNECTIONS`] reqwest clients on a 2-thread runtime of this process.
    Reqwest,
    /// `wrk`, [`FLOOD_CONNECTIONS`] connections, at normal priority.
    Wrk,
    /// `wrk`, [`FLOOD_CONNECTIONS`] connections, at `SCHED_IDLE`, and B's client at
    /// `SCHED_FIFO`: A's client takes only CPU the server and B leave idle
    /// and B's never waits for a core, as clients on other machines would.
    WrkIdle,
    /// The same, on a second server whose gate keeps no share for B
    /// (`evaluate_slots = 1024`: every call enters at once): the control.
    WrkIdleNoGate,
}

impl Flood {
    fn label(self) -> String {
        let n = FLOOD_CONNECTIONS;
        match self {
            Flood::Reqwest => format!("{n} reqwest clients in this process"),
            Flood::Wrk => format!("`wrk`, {n} connections"),
            Flood::WrkIdle => format!("`wrk`, {n} connections, at `SCHED_IDLE`; B's client at `SCHED_FIFO`"),
            Flood::WrkIdleNoGate => {
                "control: the same `SCHED_IDLE` flood, on a server without fair sharing (`evaluate_slots = 1024`)"
                    .into()
            }
        }
    }
}

/// Tenant B's sequential evaluate calls (2 ms apart, `secs`) on an OS
/// thread and runtime of their own, so they queue behind nothing of A's in
/// this process: latencies in µs. With `realtime`, the thread runs at
/// `SCHED_FIFO` (through `chrt`; it needs root or `CAP_SYS_NICE`), so it
/// never waits for a core behind the server's threads, as a client on
/// another machine would not.
fn b_client(base: &str, key: &str, body: &Value, secs: u64, realtime: bool) -> Result<Vec<u64>> {
    let (base, key, body) = (base.to_string(), key.to_string(), body.clone());
    std::thread::spawn(move || -> Result<Vec<u64>> {
        if realtime {
            // "/proc/thread-self" links to "PID/task/TID".
            let link = std::fs::read_link("/proc/thread-self")?;
            let tid = link.file_name().context("thread id")?.to_string_lossy().into_owned();
            let st = Command::new("chrt").args(["-f", "-p", "1", &tid]).status()?;
            anyhow::ensure!(st.success(), "chrt -f could not make B's thread SCHED_FIFO (root needed)");
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(sequential(&base, &key, &body, secs))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("B's thread panicked"))?
}

/// The server a fairness row floods.
#[derive(Clone, Copy, PartialEq)]
enum Target {
    /// The bench's server: fair sharing, workers free to move between cores.
    Shared,
    /// A server with `pin_workers = true`: each worker thread on a core of its own.
    Pinned,
    /// A server without fair sharing (`evaluate_slots = 1024`): the control.
    Ungated,
    /// The control with `pin_workers = true`.
    UngatedPinned,
}

impl Target {
    /// Its lines of `server.toml`.
    fn settings(self) -> &'static str {
        match self {
            Target::Shared => "",
            Target::Pinned => "pin_workers = true\n",
            Target::Ungated => "evaluate_slots = 1024\n",
            Target::UngatedPinned => "evaluate_slots = 1024\npin_workers = true\n",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Target::Shared => "",
            Target::Pinned => "; **pinned workers**",
            Target::Ungated => "",
            Target::UngatedPinned => "; **pinned workers**",
        }
    }
}

/// The fairness rows, in order: how A floods, and which server.
const ROWS: [(Flood, Target); 7] = [
    (Flood::Reqwest, Target::Shared),
    (Flood::Wrk, Target::Shared),
    (Flood::Wrk, Target::Pinned),
    (Flood::WrkIdle, Target::Shared),
    (Flood::WrkIdle, Target::Pinned),
    (Flood::WrkIdleNoGate, Target::Ungated),
    (Flood::WrkIdleNoGate, Target::UngatedPinned),
];

/// Fairness (issue 15, point 7): B's evaluate latency alone, then while A
/// floods, for each row of [`ROWS`]; B's "alone" is measured again before
/// each flood, so a row's ratio compares two measurements a few seconds
/// apart.
async fn fairness(s: &Arc<Served>, profile: &str, a: &str, deny: &Path, manifest: &Value, secs: u64) -> Result<()> {
    println!("\n### Fairness: tenant B's evaluate latency, alone and while tenant A floods\n");
    println!(
        "B: one client on its own thread, sequential calls 2 ms apart, {secs} s; A's flood starts 300 ms before \
         and ends about 700 ms after. The server's CPU share is its process's user + system time over the flood \
         (100 % = one core).\n"
    );
    let body = evaluate_body("deny-tools");
    let b = s.tenant("bench-b").await?;
    s.install(&b, "deny-tools", deny, manifest).await?;
    // The other servers (pinned workers, the controls), each with tenants A and B and the same plugin.
    let mut others = Vec::new();
    for target in [Target::Pinned, Target::Ungated, Target::UngatedPinned] {
        let server = Arc::new(Served::start_with(profile, target.settings()).await?);
        let (ka, kb) = (server.tenant("bench-a").await?, server.tenant("bench-b").await?);
        for key in [&ka, &kb] {
            server.install(key, "deny-tools", deny, manifest).await?;
        }
        closed_loop(&server, &ka, &body, 4, 1).await?;
        others.push((target, server, ka, kb));
    }
    println!(
        "| A's flood | B alone p50 / p99 | B under flood p50 / p99 | ratio p50 / p99 | A's requests/s | A's non-200 | server CPU share |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (flood, target) in ROWS {
        let (s, a, b) = match others.iter().find(|o| o.0 == target) {
            Some((_, server, ka, kb)) => (server, ka.as_str(), kb),
            None => (s, a, &b),
        };
        let realtime = matches!(flood, Flood::WrkIdle | Flood::WrkIdleNoGate);
        let mut idle = b_client(&s.base, b, &body, secs, realtime)?;
        let (cpu0, t0) = (s.cpu_ms(), Instant::now());
        let (n, bad, mut loaded) = match flood {
            Flood::Reqwest => {
                let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
                let task = {
                    let (s, a, body) = (s.clone(), a.to_string(), body.clone());
                    rt.spawn(async move { closed_loop(&s, &a, &body, FLOOD_CONNECTIONS, secs + 1).await })
                };
                tokio::time::sleep(Duration::from_millis(300)).await;
                let loaded = b_client(&s.base, b, &body, secs, realtime);
                let flooded = task.await;
                // Shut down before any error is returned: dropping a runtime inside this one panics.
                rt.shutdown_background();
                let (n, bad, _) = flooded.context("A's flood task")??;
                (n, bad.to_string(), loaded?)
            }
            Flood::Wrk | Flood::WrkIdle | Flood::WrkIdleNoGate => {
                let idle = !matches!(flood, Flood::Wrk);
                let (_dir, mut cmd) = wrk_command(&s.base, a, &body, secs + 1, FLOOD_CONNECTIONS, idle)?;
                let child = cmd
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .context("wrk (and chrt) must be installed: apt-get install wrk")?;
                tokio::time::sleep(Duration::from_millis(300)).await;
                let loaded = b_client(&s.base, b, &body, secs, realtime);
                let out = tokio::task::spawn_blocking(move || child.wait_with_output()).await??;
                let text = String::from_utf8_lossy(&out.stdout);
                let n = text
                    .lines()
                    .find_map(|l| l.trim().split_once(" requests in ").and_then(|(n, _)| n.parse::<u64>().ok()))
                    .with_context(|| format!("wrk said: {text}"))?;
                let bad = wrk_field(&text, "Non-2xx or 3xx responses:");
                let errors = wrk_field(&text, "Socket errors:");
                let bad = match (bad.is_empty(), errors.is_empty()) {
                    (true, true) => "0".to_string(),
                    _ => format!("{bad} {errors}").trim().to_string(),
                };
                (n, bad, loaded?)
            }
        };
        let (cpu, wall) = (s.cpu_ms().saturating_sub(cpu0), t0.elapsed().as_secs_f64());
        let (i50, i99, _) = percentiles(&mut idle);
        let (l50, l99, _) = percentiles(&mut loaded);
        println!(
            "| {}{} | {i50} / {i99} µs | {l50} / {l99} µs | **{:.2}× / {:.2}×** | {:.0} | {bad} | {:.0} % |",
            flood.label(),
            target.label(),
            l50 as f64 / i50.max(1) as f64,
            l99 as f64 / i99.max(1) as f64,
            n as f64 / (secs + 1) as f64,
            cpu as f64 / 10.0 / wall.max(1e-9),
        );
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    let profile = args.profile.as_str();
    let secs = args.seconds;
    let deny = plugin_path("deny_tools", profile);
    let noop = plugin_path("noop", profile);
    let s = Arc::new(Served::start(profile).await?);
    println!("## `hookbox serve` (issue 15): `serve_bench --profile {profile} --seconds {secs}`\n");
    println!("load average at start: {}\n", hookbox_bench::load_average());
    let a = s.tenant("bench-a").await?;
    let deny_manifest = json!({"config": {"tools": ["delete_file"]}});
    let rust_upload = s.install(&a, "deny-tools", &deny, &deny_manifest).await?;
    s.install(&a, "noop", &noop, &json!({})).await?;
    let python = polyglot_path("python_deny_tools");
    let python_upload = if python.exists() {
        let t = s.tenant("bench-py").await?;
        Some(s.install(&t, "deny-tools", &python, &deny_manifest).await?)
    } else {
        None
    };
    // Warm-up: compile caches, connections.
    for plugin in ["noop", "deny-tools"] {
        closed_loop(&s, &a, &evaluate_body(plugin), 4, 1).await?;
    }
    if args.fairness_only {
        return fairness(&s, profile, &a, &deny, &deny_manifest, secs).await;
    }

    println!("### Evaluate latency at 1,000 requests/s (open loop, {secs} s each)\n");
    println!("| policy | requests | failed | p50 | p99 | max | start lateness p99 |\n|---|---|---|---|---|---|---|");
    for plugin in ["noop", "deny-tools"] {
        let (mut lat, mut late, failed) = fixed_rate(&s, &a, &evaluate_body(plugin), 1000, secs).await?;
        let (p50, p99, max) = percentiles(&mut lat);
        let (_, late99, _) = percentiles(&mut late);
        println!(
            "| `/v1/evaluate`, {plugin} | {} | {failed} | {p50} µs | {p99} µs | {max} µs | {late99} µs |",
            lat.len()
        );
    }
    let stdin_hook = repo_root().join("target").join(profile).join("stdin_hook");
    let event = evaluate_body("deny-tools")["event"].to_string();
    let mut spawn_lat = Vec::new();
    let spawn_until = Instant::now() + Duration::from_secs(secs.min(3));
    while Instant::now() < spawn_until {
        let t = Instant::now();
        process_hook(&stdin_hook, &["delete_file"], event.as_bytes())?;
        spawn_lat.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
    }
    let (p50, p99, max) = percentiles(&mut spawn_lat);
    println!(
        "| process per event (`stdin_hook`, the same deny-tools policy), sequential | {} | 0 | {p50} µs | {p99} µs | {max} µs | |",
        spawn_lat.len()
    );

    println!("\n### Evaluate throughput (16 concurrent keep-alive clients, {secs} s)\n");
    println!(
        "The server's CPU is its process's user + system time over the row (10 ms ticks); \
         evaluations/s at 2 cores of it is 2 s of CPU per second over its CPU per evaluation.\n"
    );
    println!(
        "| policy | evaluations/s | non-200 | p50 | p99 | server CPU per evaluation | server CPU share | evaluations/s at 2 server cores |\n|---|---|---|---|---|---|---|---|"
    );
    // (evaluations, wall seconds, server CPU ms) -> the CPU columns.
    let cpu_columns = |n: f64, wall: f64, cpu_ms: u64| {
        let per = cpu_ms as f64 * 1e3 / n.max(1.0);
        format!("{per:.1} µs | {:.0} % | {:.0}", cpu_ms as f64 / 10.0 / wall.max(1e-9), 2e6 / per.max(1e-9))
    };
    for plugin in ["noop", "deny-tools"] {
        let (cpu0, t0) = (s.cpu_ms(), Instant::now());
        let (n, bad, mut lat) = closed_loop(&s, &a, &evaluate_body(plugin), 16, secs).await?;
        let (cpu, wall) = (s.cpu_ms().saturating_sub(cpu0), t0.elapsed().as_secs_f64());
        let (p50, p99, _) = percentiles(&mut lat);
        println!(
            "| {plugin}, driven by reqwest in this process (16 clients) | {:.0} | {bad} | {p50} µs | {p99} µs | {} |",
            n as f64 / secs as f64,
            cpu_columns(n as f64, wall, cpu)
        );
    }
    for plugin in ["noop", "deny-tools"] {
        let (cpu0, t0) = (s.cpu_ms(), Instant::now());
        match wrk(&s.base, &a, &evaluate_body(plugin), secs) {
            Ok((rps, p50, p99)) => {
                let (cpu, wall) = (s.cpu_ms().saturating_sub(cpu0), t0.elapsed().as_secs_f64());
                println!(
                    "| {plugin}, driven by `wrk` (1 thread, 16 connections) | {rps:.0} | | {p50} | {p99} | {} |",
                    cpu_columns(rps * secs as f64, wall, cpu)
                )
            }
            Err(e) => println!("| {plugin}, driven by `wrk` | not measured: {e} | | | | | | |"),
        }
    }
    let mean_spawn = spawn_lat.iter().sum::<u64>() as f64 / spawn_lat.len().max(1) as f64;
    println!("| process per event (sequential; 1/mean) | {:.0} | 0 | | | | | |", 1e6 / mean_spawn);

    println!("\n### Upload to active (upload, validate, compile, trial call, activate; fresh data dir)\n");
    println!("| plugin | time |\n|---|---|");
    println!(
        "| Rust deny-tools ({} KiB) | {:.0} ms |",
        std::fs::metadata(&deny)?.len() / 1024,
        rust_upload.as_secs_f64() * 1e3
    );
    match python_upload {
        Some(t) => println!(
            "| Python deny-tools ({} KiB) | {:.0} ms |",
            std::fs::metadata(&python)?.len() / 1024,
            t.as_secs_f64() * 1e3
        ),
        None => println!("| Python deny-tools | not built (bash scripts/build-polyglot.sh python) |"),
    }

    println!("\n### Memory (the server process's VmRSS)\n");
    let before = s.rss_kib();
    let tenants = 100;
    for i in 0..tenants {
        let k = s.tenant(&format!("idle-{i}")).await?;
        s.install(&k, "deny-tools", &deny, &deny_manifest).await?;
        s.post("/v1/evaluate", &k, &evaluate_body("deny-tools")).await?;
    }
    let after_tenants = s.rss_kib();
    let runs = 50;
    let asker =
        json!({"config": {"before-tool-call": "ask-approval:{tool} needs a person", "only_tool": "create_file"}});
    let r = s.tenant("parked").await?;
    s.install(&r, "asker", &plugin_path("scripted", profile), &asker).await?;
    s.install(&r, "deny-tools", &deny, &json!({"config": {"paths": [".env"]}})).await?;
    for _ in 0..runs {
        let (status, v) = s
            .post("/v1/runs", &r, &json!({"prompt": "Delete the file `.env` and create `test.txt`", "model": "demo"}))
            .await?;
        anyhow::ensure!(status == 201, "run: {v}");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after_runs = s.rss_kib();
    println!("| what | RSS before | RSS after | per item |\n|---|---|---|---|");
    println!(
        "| {tenants} idle tenants, each with deny-tools active and evaluated once | {before} KiB | {after_tenants} KiB | {} KiB |",
        (after_tenants.saturating_sub(before)) / tenants
    );
    println!(
        "| {runs} runs parked on an approval (2 plugins each) | {after_tenants} KiB | {after_runs} KiB | {} KiB |",
        (after_runs.saturating_sub(after_tenants)) / runs
    );

    fairness(&s, profile, &a, &deny, &deny_manifest, secs).await?;
    Ok(())
}
