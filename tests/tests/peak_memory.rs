//! The host's peak memory stays bounded while hooks misbehave: first, at
//! default limits, a hook that answers with 400,000 empty content blocks
//! and one that logs empty lines until its fuel runs out (issue 13, cases
//! A.1 and A.2: 1.3 GB and 1.7 GB of host memory before their caps); then a
//! hook that grows memory without end, one that returns a 64 MiB string (its
//! memory cap raised to 128 MiB so it can build it), and one that floods its
//! logs. Measured as the growth of this process's peak resident set
//! (`VmHWM`), in a test binary of its own with one test, phase after phase,
//! so no other test adds to it.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;

use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::HookChain;
use hookbox::sandbox::HookRuntime;
use hookbox::sandbox::{FailureKind, HookHandler};
use hookbox::sandbox::{Limits, PluginOptions};
use hookbox::{Agent, AgentConfig};
use hookbox::{Workspace, workspace_tools};
use hookbox_tests::{ADVERSARY, DEMO_PROMPT, config, demo_session, demo_workspace};
use serde_json::json;

/// Peak resident set size of this process so far, in bytes (Linux `/proc/self/status`).
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib * 1024
}

/// Runs the demo session three times with `plugins`; returns every hook failure as (plugin, kind).
async fn demo_runs(plugins: &[Arc<hookbox::sandbox::WasmPlugin>]) -> Vec<(String, FailureKind)> {
    let mut kinds = Vec::new();
    for _ in 0..3 {
        let ws = demo_workspace();
        let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
        let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
        let hooks: Vec<Box<dyn HookHandler>> =
            plugins.iter().map(|p| Box::new(p.hook()) as Box<dyn HookHandler>).collect();
        let r = Agent::new(provider, tools, AgentConfig::default())
            .run(DEMO_PROMPT, &mut HookChain::new(hooks))
            .await
            .expect("run completes");
        kinds.extend(r.hook_failures.iter().map(|f| (f.plugin.clone(), f.kind)));
    }
    kinds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_peak_memory_stays_bounded_under_memory_hungry_hooks() {
    let runtime = HookRuntime::new().expect("runtime");
    // Phase 1, default limits: empty content blocks and a log flood, after a plain demo run.
    let flood = [
        ("blocks", json!({"mode": "many-blocks", "at": "model-response", "n": 400_000})),
        ("logs", json!({"mode": "log-flood", "at": "model-response"})),
    ];
    let mut plugins = Vec::new();
    for (name, cfg) in &flood {
        let cfg: Vec<(&str, serde_json::Value)> =
            cfg.as_object().expect("object").iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let hookbox::sandbox::LoadedPlugin { plugin: p, .. } =
            runtime.load(name, ADVERSARY.as_ref(), config(&cfg), PluginOptions::default()).expect("load");
        plugins.push(p);
    }
    let plain = demo_runs(&[]).await;
    assert!(plain.is_empty(), "{plain:?}");
    let baseline = peak_rss();
    let kinds = demo_runs(&plugins).await;
    let growth = peak_rss().saturating_sub(baseline);
    eprintln!("peak RSS growth, many blocks and a log flood, 3 runs: {} MiB", growth >> 20);
    assert!(kinds.contains(&("blocks".to_string(), FailureKind::InvalidOutput)), "{kinds:?}");
    assert!(growth < 100 << 20, "peak RSS grew by {} MiB", growth >> 20);

    // Phase 2: memory growth, a 64 MiB output, a big log.
    let modes = [("grow", json!({})), ("big-output", json!({"bytes": 64 << 20})), ("big-log", json!({}))];
    let mut plugins = Vec::new();
    for (mode, extra) in &modes {
        let mut cfg = vec![("mode", json!(mode))];
        if let Some(bytes) = extra.get("bytes") {
            cfg.push(("bytes", bytes.clone()));
        }
        let limits =
            Limits { memory_bytes: if *mode == "big-output" { 128 << 20 } else { 64 << 20 }, ..Limits::default() };
        let options = PluginOptions { limits, ..PluginOptions::default() };
        let hookbox::sandbox::LoadedPlugin { plugin: p, .. } =
            runtime.load(mode, ADVERSARY.as_ref(), config(&cfg), options).expect("load");
        plugins.push(p);
    }
    let baseline = peak_rss();
    let kinds = demo_runs(&plugins).await;
    let growth = peak_rss().saturating_sub(baseline);
    eprintln!("peak RSS growth over 3 runs: {} MiB", growth >> 20);
    assert!(kinds.contains(&("grow".to_string(), FailureKind::Memory)), "{kinds:?}");
    assert!(kinds.contains(&("big-output".to_string(), FailureKind::InvalidOutput)), "{kinds:?}");
    // Bound: one guest memory at its 128 MiB cap plus one lifted 64 MiB string, with slack.
    // Without the caps, `grow` alone would take all the machine's memory.
    assert!(growth < 320 << 20, "peak RSS grew by {} MiB", growth >> 20);
}
