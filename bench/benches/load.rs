//! Cold load of a plugin with and without the precompiled-component cache
//! (issue 7, item 2).
//!
//! - `load/<plugin>/no-cache`: `HookRuntime::load` on a runtime without a
//!   cache: read, Cranelift compile, import checks, `InstancePre`, the trial
//!   instantiation every load does.
//! - `load/<plugin>/cache`: the same with a warm cache directory: the
//!   component is deserialised instead of compiled.
//! - `load/<plugin>/warm`: `HookRuntime::warm` on the warm cache: read the
//!   `.wasm`, hash it, read and check the artifact, deserialise (no linking,
//!   no instantiation).
//! - `parts/<plugin>/*`: what `warm` is made of, with no Hookbox code:
//!   reading the `.wasm`, its SHA-256 (the cache key), the SHA-256 of an
//!   artifact of the same size (the checksum check).
//!
//! Rust plugins come from `target/plugins/wasm32-wasip2/{debug,release}`;
//! Python, JavaScript and C ones from `target/plugins/polyglot/` when built
//! (the first cached load of each compiles it once, outside the timing).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use criterion::{Criterion, criterion_group, criterion_main};
use hookbox::sandbox::HookRuntime;
use hookbox::sandbox::PluginOptions;
use hookbox_bench::raw::RawEngine;
use hookbox_bench::{deny_config, plugin_path, polyglot_path, repo_root};
use sha2::{Digest, Sha256};

fn config_for(file: &str) -> BTreeMap<String, String> {
    if file.contains("deny") { deny_config() } else { BTreeMap::new() }
}

fn rows(
    c: &mut Criterion,
    label: &str,
    path: &Path,
    cached: &HookRuntime,
    uncached: Option<&HookRuntime>,
) -> anyhow::Result<()> {
    let config = config_for(label);
    let load = |rt: &HookRuntime| rt.load(label, path, config.clone(), PluginOptions::default()).map(drop);
    // Fill the cache (a compile the first time), outside the timing.
    let started = Instant::now();
    load(cached).with_context(|| format!("loading {}", path.display()))?;
    eprintln!(
        "{label}: first cached load {:.1} ms (compiles if the cache was cold)",
        started.elapsed().as_secs_f64() * 1e3
    );

    let mut g = c.benchmark_group(format!("load/{label}"));
    if let Some(uncached) = uncached {
        g.bench_function("no-cache", |b| b.iter(|| load(uncached).is_ok()));
    }
    g.bench_function("cache", |b| b.iter(|| load(cached).is_ok()));
    g.bench_function("warm", |b| b.iter(|| cached.warm(path).is_ok()));
    g.finish();

    let wasm = std::fs::read(path)?;
    let raw = RawEngine::new(false)?;
    let artifact = raw.engine().precompile_component(&wasm)?;
    eprintln!("{label}: component {} bytes, artifact {} bytes", wasm.len(), artifact.len());
    let mut g = c.benchmark_group(format!("parts/{label}"));
    g.bench_function("read-wasm", |b| b.iter(|| std::fs::read(black_box(path)).map(|v| v.len()).ok()));
    g.bench_function("sha256-wasm", |b| b.iter(|| Sha256::digest(black_box(&wasm))));
    g.bench_function("sha256-artifact", |b| b.iter(|| Sha256::digest(black_box(&artifact))));
    g.bench_function("blake3-wasm", |b| b.iter(|| blake3::hash(black_box(&wasm))));
    g.bench_function("blake3-artifact", |b| b.iter(|| blake3::hash(black_box(&artifact))));
    g.finish();
    Ok(())
}

fn all(c: &mut Criterion) -> anyhow::Result<()> {
    let cache_dir = repo_root().join("target/bench-cache");
    let cached = HookRuntime::new()?.with_cache_dir(&cache_dir);
    let uncached = HookRuntime::new()?;
    rows(c, "rust-deny-debug", &plugin_path("deny_tools", "debug"), &cached, Some(&uncached))?;
    let release = plugin_path("deny_tools", "release");
    if release.exists() {
        rows(c, "rust-deny-release", &release, &cached, Some(&uncached))?;
    } else {
        eprintln!("{} not built: rust-deny-release rows skipped", release.display());
    }
    rows(c, "rust-noop-debug", &plugin_path("noop", "debug"), &cached, None)?;
    for (label, file) in [
        ("c-deny", "c_deny_tools"),
        ("js-qjs-deny", "js_qjs_deny_tools"),
        ("js-deny", "js_deny_tools"),
        ("python-deny", "python_deny_tools"),
    ] {
        let path: PathBuf = polyglot_path(file);
        if path.exists() {
            rows(c, label, &path, &cached, None)?;
        } else {
            eprintln!("{} not built (scripts/build-polyglot.sh): {label} rows skipped", path.display());
        }
    }
    Ok(())
}

fn load(c: &mut Criterion) {
    if let Err(e) = all(c) {
        eprintln!("load bench failed: {e:#}");
        std::process::exit(1);
    }
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = load
}
criterion_main!(benches);
