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
//!    floods the server with 32 concurrent clients.
//!
//! Usage: `serve_bench [--profile debug|release] [--seconds N]` (the
//! `hookbox` binary and the plugins of that profile must be built: see
//! `scripts/bench-serve.sh`). Output: markdown on stdout.

use std::path::PathBuf;
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

/// Drives `/v1/evaluate` with `wrk` (a C load generator, far lighter than
/// this process's reqwest clients): 1 thread, 16 connections, `seconds`.
/// Returns (requests/s, p50, p99) as wrk prints them.
fn wrk(base: &str, key: &str, body: &Value, seconds: u64) -> Result<(f64, String, String)> {
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("post.lua");
    let lua_body = body.to_string().replace('\\', "\\\\").replace('"', "\\\"");
    std::fs::write(
        &script,
        format!(
            "wrk.method = \"POST\"\nwrk.body = \"{lua_body}\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.headers[\"Authorization\"] = \"Bearer {key}\"\n"
        ),
    )?;
    let out = Command::new("wrk")
        .args(["-t1", "-c16", &format!("-d{seconds}s"), "--latency", "-s"])
        .arg(&script)
        .arg(format!("{base}/v1/evaluate"))
        .output()
        .context("wrk is not installed (apt-get install wrk)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(!text.contains("Non-2xx"), "non-2xx answers: {text}");
    let field = |prefix: &str| {
        text.lines().find_map(|l| l.trim().strip_prefix(prefix).map(|v| v.trim().to_string())).unwrap_or_default()
    };
    let rps: f64 = field("Requests/sec:").parse().with_context(|| format!("wrk said: {text}"))?;
    Ok((rps, field("50%"), field("99%")))
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

    println!("\n### Fairness: tenant B's evaluate latency, alone and while tenant A floods (32 clients)\n");
    let b = s.tenant("bench-b").await?;
    s.install(&b, "deny-tools", &deny, &deny_manifest).await?;
    let body = evaluate_body("deny-tools");
    // B's client has an OS thread and runtime of its own, so its requests do not
    // queue behind A's client tasks in this process; A floods from another runtime.
    let b_client = |base: String, b: String, body: Value| {
        std::thread::spawn(move || -> Result<Vec<u64>> {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            rt.block_on(sequential(&base, &b, &body, secs))
        })
    };
    let mut idle =
        b_client(s.base.clone(), b.clone(), body.clone()).join().map_err(|_| anyhow::anyhow!("B's thread"))??;
    let flood_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let flood = {
        let (s, a, body) = (s.clone(), a.clone(), body.clone());
        flood_rt.spawn(async move { closed_loop(&s, &a, &body, 32, secs + 1).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let loaded = b_client(s.base.clone(), b.clone(), body.clone()).join();
    let flooded = flood.await;
    // Shut down before any error is returned: dropping a runtime inside this one panics.
    flood_rt.shutdown_background();
    let mut loaded = loaded.map_err(|_| anyhow::anyhow!("B's thread"))??;
    let (n, bad, _) = flooded.context("A's flood task")??;
    let (i50, i99, _) = percentiles(&mut idle);
    let (l50, l99, _) = percentiles(&mut loaded);
    println!("| B's latency | p50 | p99 |\n|---|---|---|");
    println!("| alone | {i50} µs | {i99} µs |");
    println!("| while A floods ({n} requests, {bad} refused) | {l50} µs | {l99} µs |");
    println!(
        "\nratio under flood: p50 {:.2}×, p99 {:.2}×",
        l50 as f64 / i50.max(1) as f64,
        l99 as f64 / i99.max(1) as f64
    );
    let _ = PathBuf::new();
    Ok(())
}
