//! `agent_hooks_bench`: what one Claude Code `PreToolUse` hook event costs
//! (issue 16), side by side in one run, for the same policy (deny a path or
//! shell word with a `.env` component):
//!
//! (a) Hookbox's http hook, `POST /v1/claude-code` on a `hookbox serve`
//!     process (the deny-tools plugin, active for the tenant);
//! (b) `hookbox hook --format claude-code --config hookbox.toml` spawned per
//!     event, the way Claude Code runs a command hook (the plugin from a warm
//!     component cache, hook state in a local database);
//! (c) the same check as a Python script hook (`bench/hooks/deny_env.py`);
//! (d) and as a bash hook (`bench/hooks/deny_env.sh`);
//! (e) and, as the floor under any http hook, no hook at all: the event's
//!     bytes over a kept loopback TCP connection to a thread of this
//!     process that answers one byte (no HTTP, no JSON, no policy).
//!
//! Each runs open loop at 1, 10 and 100 events/s (an event is timed from
//! when it was due, so a backlog counts), then as a burst of 50 events at
//! once. The schedule is kept by a thread of its own in `std::thread::sleep`
//! (tens of µs late), not by tokio's 1 ms timer, whose lateness (up to about
//! 1.5 ms) was counted as the hook's until 2026-12-07; how late each event's
//! task started is shown beside its latency. Half the events must be denied
//! and half let through: every answer is checked, and a wrong or missing
//! one is counted. CPU per event is the CPU the hook used: the server
//! process's (its `/proc` times) for (a), the children's (this process's
//! `cutime + cstime`) for the spawned hooks, at the kernel's 10 ms tick
//! (summed over a row, so small per-event figures are averages).
//!
//! Usage: `agent_hooks_bench [--profile debug|release] [--events-per-rate N]`
//! (build first: `scripts/bench-agent-hooks.sh`). Markdown on stdout.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use hookbox_bench::served::{Served, percentiles};
use hookbox_bench::{plugin_path, repo_root};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Parser)]
struct Args {
    /// The build profile of the `hookbox` binary and the plugins.
    #[arg(long, default_value = "debug")]
    profile: String,
    /// Events per fixed-rate row at 10 and 100 events/s (the 1 event/s row has a tenth, at least 5).
    #[arg(long, default_value_t = 200)]
    events_per_rate: usize,
}

/// One way of running the hook.
#[derive(Clone)]
enum Hook {
    Http {
        base: String,
        key: String,
        http: reqwest::Client,
        pid: u32,
    },
    Process {
        program: PathBuf,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// The floor: a length-prefixed frame to [`floor_server`], one byte back,
    /// over connections kept between events.
    Floor {
        addr: std::net::SocketAddr,
        idle: Arc<std::sync::Mutex<Vec<tokio::net::TcpStream>>>,
    },
}

/// The largest frame the floor's server takes, in bytes.
const FLOOR_MAX_FRAME: usize = 64 * 1024;

/// The floor's server: a thread per connection that reads a 4-byte
/// big-endian length and that many bytes (at most [`FLOOR_MAX_FRAME`]), then
/// writes one byte; on a loopback port it returns.
fn floor_server() -> Result<std::net::SocketAddr> {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let _ = conn.set_nodelay(true);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; FLOOR_MAX_FRAME];
                loop {
                    let mut len = [0u8; 4];
                    if conn.read_exact(&mut len).is_err() {
                        return;
                    }
                    let n = u32::from_be_bytes(len) as usize;
                    if n > FLOOR_MAX_FRAME || conn.read_exact(&mut buf[..n]).is_err() || conn.write_all(&[1]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// One event through the floor: true when its byte came back.
async fn floor_ask(
    addr: std::net::SocketAddr,
    idle: &std::sync::Mutex<Vec<tokio::net::TcpStream>>,
    body: &[u8],
) -> bool {
    let kept = idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
    let mut conn = match kept {
        Some(c) => c,
        None => match tokio::net::TcpStream::connect(addr).await {
            Ok(c) => c,
            Err(_) => return false,
        },
    };
    let _ = conn.set_nodelay(true);
    let Ok(len) = u32::try_from(body.len()) else { return false };
    let mut frame = len.to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    let mut answer = [0u8; 1];
    if conn.write_all(&frame).await.is_err() || conn.read_exact(&mut answer).await.is_err() {
        return false;
    }
    idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(conn);
    true
}

/// The i-th event: even ones are denied (.env), odd ones allowed.
fn event(i: usize) -> (Vec<u8>, bool) {
    let denied = i.is_multiple_of(2);
    let path = if denied { "/work/app/.env".to_string() } else { format!("/work/app/notes-{i}.txt") };
    let body = json!({"session_id": format!("bench-{}", i % 8), "transcript_path": "/tmp/t.jsonl", "cwd": "/work/app",
        "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Write",
        "tool_input": {"file_path": path, "content": "x"}, "tool_use_id": format!("toolu_{i}")});
    (body.to_string().into_bytes(), denied)
}

/// True when `answer` is what `denied` calls for.
fn right(answer: &[u8], denied: bool) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(answer) else { return false };
    let decision = &v["hookSpecificOutput"]["permissionDecision"];
    if denied { decision == "deny" } else { v.is_object() && decision.is_null() }
}

/// Asks `hook` about event `i`; true when the answer was right.
async fn ask(hook: &Hook, i: usize) -> bool {
    let (body, denied) = event(i);
    match hook {
        Hook::Http { base, key, http, .. } => {
            let sent = http
                .post(format!("{base}/v1/claude-code"))
                .bearer_auth(key)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await;
            match sent {
                Ok(r) if r.status().is_success() => r.bytes().await.is_ok_and(|b| right(&b, denied)),
                _ => false,
            }
        }
        Hook::Floor { addr, idle } => floor_ask(*addr, idle, &body).await,
        Hook::Process { program, args, env } => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args).envs(env.iter().cloned());
            cmd.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null());
            let Ok(mut child) = cmd.spawn() else { return false };
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(&body).await;
            }
            match child.wait_with_output().await {
                Ok(out) => out.status.success() && right(&out.stdout, denied),
                Err(_) => false,
            }
        }
    }
}

/// CPU seconds used so far by what runs `hook`: the server, or this
/// process's reaped children; NaN for the floor, whose server is threads of
/// this process.
fn cpu_seconds(hook: &Hook) -> f64 {
    let (path, fields) = match hook {
        Hook::Http { pid, .. } => (format!("/proc/{pid}/stat"), (13, 14)),
        Hook::Process { .. } => ("/proc/self/stat".to_string(), (15, 16)),
        Hook::Floor { .. } => return f64::NAN,
    };
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
    let field = |n: usize| rest.get(n - 2).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (field(fields.0) + field(fields.1)) / 100.0
}

/// One row: latencies (µs), start lateness (µs), wrong answers, CPU µs per event.
struct Row {
    latencies: Vec<u64>,
    late: Vec<u64>,
    wrong: usize,
    cpu_us: f64,
}

/// `count` events at `rate`/s (or all at once with `rate` 0), open loop.
async fn row(hook: &Arc<Hook>, rate: u64, count: usize) -> Row {
    let cpu0 = cpu_seconds(hook);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(count);
    // The pacer: each event is released when due, from a thread of its own.
    let (tx, mut due_events) = tokio::sync::mpsc::unbounded_channel();
    let pacer = std::thread::spawn(move || {
        for i in 0..count {
            let due = match 1_000_000_000u64.checked_div(rate) {
                Some(period) => start + Duration::from_nanos(period * i as u64),
                None => start,
            };
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            if tx.send((i, due)).is_err() {
                break;
            }
        }
    });
    while let Some((i, due)) = due_events.recv().await {
        let hook = hook.clone();
        tasks.push(tokio::spawn(async move {
            let late = due.elapsed().as_micros() as u64;
            let ok = ask(&hook, i).await;
            (due.elapsed().as_micros() as u64, late, ok)
        }));
    }
    let _ = pacer.join();
    let mut latencies = Vec::with_capacity(count);
    let mut late = Vec::with_capacity(count);
    let mut wrong = 0;
    for t in tasks {
        match t.await {
            Ok((us, lateness, ok)) => {
                latencies.push(us);
                late.push(lateness);
                wrong += usize::from(!ok);
            }
            Err(_) => wrong += 1,
        }
    }
    let cpu_us = (cpu_seconds(hook) - cpu0) * 1e6 / count.max(1) as f64;
    Row { latencies, late, wrong, cpu_us }
}

/// CPU per event, or a dash when it was not measured (NaN).
fn fmt_cpu(us: f64) -> String {
    if us.is_nan() { "—".into() } else { fmt_us(us.round() as u64) }
}

fn fmt_us(us: u64) -> String {
    if us >= 10_000 { format!("{:.1} ms", us as f64 / 1000.0) } else { format!("{us} µs") }
}

/// The Python interpreter itself (`sys.executable`), not a version manager's shim script.
fn python() -> Result<PathBuf> {
    let out = std::process::Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output()?;
    anyhow::ensure!(out.status.success(), "python3 does not run");
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn write_config(dir: &Path, profile: &str) -> Result<PathBuf> {
    let path = dir.join("hookbox.toml");
    let plugin = plugin_path("deny_tools", profile);
    anyhow::ensure!(plugin.exists(), "{} is not built", plugin.display());
    std::fs::write(
        &path,
        format!(
            "[[plugins]]\nname = \"deny-tools\"\npath = \"{}\"\n[plugins.config]\npaths = [\".env\"]\n",
            plugin.display()
        ),
    )?;
    Ok(path)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    let root = repo_root();
    let hookbox = root.join("target").join(&args.profile).join("hookbox");
    let served = Served::start(&args.profile).await?;
    let key = served.tenant("bench").await?;
    served
        .install(&key, "deny-tools", &plugin_path("deny_tools", &args.profile), &json!({"config": {"paths": [".env"]}}))
        .await?;
    let dir = tempfile::tempdir()?;
    let config = write_config(dir.path(), &args.profile)?;
    let env = vec![
        ("HOOKBOX_CACHE_DIR".to_string(), dir.path().join("cache").display().to_string()),
        ("HOOKBOX_DATA_DIR".to_string(), dir.path().join("data").display().to_string()),
    ];
    let hooks: Vec<(&str, Arc<Hook>)> = vec![
        (
            "(a) http hook, `POST /v1/claude-code`",
            Arc::new(Hook::Http { base: served.base.clone(), key, http: served.http.clone(), pid: served.child.id() }),
        ),
        (
            "(b) `hookbox hook --config`, a process per event",
            Arc::new(Hook::Process {
                program: hookbox.clone(),
                args: ["hook", "--format", "claude-code", "--config"]
                    .map(String::from)
                    .into_iter()
                    .chain([config.display().to_string()])
                    .collect(),
                env,
            }),
        ),
        (
            "(c) Python script hook",
            Arc::new(Hook::Process {
                program: python()?,
                args: vec![root.join("bench/hooks/deny_env.py").display().to_string()],
                env: vec![],
            }),
        ),
        (
            "(d) bash hook",
            Arc::new(Hook::Process {
                program: "bash".into(),
                args: vec![root.join("bench/hooks/deny_env.sh").display().to_string()],
                env: vec![],
            }),
        ),
        (
            "(e) floor: the event's bytes over loopback TCP, one byte back (no HTTP, no hook)",
            Arc::new(Hook::Floor { addr: floor_server()?, idle: Arc::default() }),
        ),
    ];
    // Warm-up: the server's kept chains, the component cache, the page cache.
    for (name, hook) in &hooks {
        for i in 0..4 {
            anyhow::ensure!(ask(hook, i).await, "{name}: wrong answer on warm-up event {i}");
        }
    }
    println!("## Agent hooks: one Claude Code PreToolUse event (issue 16)\n");
    println!("Profile `{}`; load average before: {}.\n", args.profile, hookbox_bench::load_average());
    println!(
        "| hook | load | events | p50 | p99 | max | CPU per event | wrong or missing answers | task start lateness p99 |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut p99s: Vec<(String, &str, u64, f64)> = Vec::new();
    let loads: [(&str, u64, usize); 4] = [
        ("1 event/s", 1, (args.events_per_rate / 10).max(5)),
        ("10 events/s", 10, args.events_per_rate),
        ("100 events/s", 100, args.events_per_rate),
        ("burst of 50 at once", 0, 50),
    ];
    for (load, rate, count) in loads {
        for (name, hook) in &hooks {
            let mut r = row(hook, rate, count).await;
            let (p50, p99, max) = percentiles(&mut r.latencies);
            let (_, late99, _) = percentiles(&mut r.late);
            println!(
                "| {name} | {load} | {count} | {} | {} | {} | {} | {} | {} |",
                fmt_us(p50),
                fmt_us(p99),
                fmt_us(max),
                fmt_cpu(r.cpu_us),
                r.wrong,
                fmt_us(late99)
            );
            p99s.push((load.to_string(), name, p99, r.cpu_us));
        }
    }
    println!("\nRatios (script hook ÷ http hook):\n");
    for (load, _, _) in loads {
        let of = |prefix: &str| p99s.iter().find(|(l, n, _, _)| l == load && n.starts_with(prefix)).map(|r| (r.2, r.3));
        if let (Some(a), Some(c), Some(d), Some(e)) = (of("(a)"), of("(c)"), of("(d)"), of("(e)")) {
            println!(
                "- {load}: p99 {:.0}× (Python), {:.0}× (bash); CPU {:.0}× (Python), {:.0}× (bash); \
                 the floor's p99 {} is {:.0}× under Python's and {:.0}× under bash's",
                c.0 as f64 / a.0.max(1) as f64,
                d.0 as f64 / a.0.max(1) as f64,
                c.1 / a.1.max(1.0),
                d.1 / a.1.max(1.0),
                fmt_us(e.0),
                c.0 as f64 / e.0.max(1) as f64,
                d.0 as f64 / e.0.max(1) as f64,
            );
        }
    }
    let _ = std::fs::remove_dir_all(dir.path()).context("cleanup");
    Ok(())
}
