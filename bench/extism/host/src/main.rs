//! `extism-bench PLUGIN.wasm`: the Extism rows of hookbox-bench's dispatch table,
//! printed as markdown. Same event and logic as `benches/dispatch.rs`
//! (`before-tool-call` of `delete_file`, denied by name), fuel 100,000,000 and
//! a 1,000 ms timeout per call like Hookbox's defaults. Each row times batches
//! of calls, 15 batches, and reports the median and the range per call.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::Context;
use extism::{CompiledPlugin, Manifest, Plugin, PluginBuilder, Wasm};

const EVENT: &str = r#"{"type":"before-tool-call","iteration":1,"call":{"id":"call_jYdIdRZHxZTn5bWCq5jlMrJi","name":"delete_file","arguments":"{\"path\": \".env\"}"}}"#;

fn builder(wasm: &[u8]) -> PluginBuilder<'static> {
    // From bytes: `Wasm::file` needs Extism's `register-filesystem` feature.
    let manifest = Manifest::new([Wasm::data(wasm.to_vec())])
        .with_config_key("tools", "[\"delete_file\"]")
        .with_timeout(Duration::from_millis(1000));
    PluginBuilder::new(manifest).with_wasi(false).with_fuel_limit(100_000_000).with_cache_disabled()
}

/// Times `batch` calls of `f`, 15 times; (median, min, max) ns per call.
fn time(batch: u32, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<(f64, f64, f64)> {
    for _ in 0..batch.min(100) {
        f()?;
    }
    let mut per = Vec::new();
    for _ in 0..15 {
        let started = Instant::now();
        for _ in 0..batch {
            f()?;
        }
        per.push(started.elapsed().as_nanos() as f64 / f64::from(batch));
    }
    per.sort_by(f64::total_cmp);
    Ok((per[per.len() / 2], per[0], per[per.len() - 1]))
}

fn row(label: &str, (median, lo, hi): (f64, f64, f64)) {
    println!("| {label} | {:.2} µs | {:.2} – {:.2} µs |", median / 1e3, lo / 1e3, hi / 1e3);
}

fn main() -> anyhow::Result<()> {
    let path = std::env::args().nth(1).context("usage: extism-bench PLUGIN.wasm")?;
    let wasm = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
    let started = Instant::now();
    let compiled = CompiledPlugin::new(builder(&wasm)).context("compiling the plugin")?;
    let compile_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut plugin = Plugin::new_from_compiled(&compiled)?;
    let answer: String = plugin.call("on_event", EVENT)?;
    anyhow::ensure!(answer.contains("skip-tool"), "unexpected answer {answer}");

    println!("| Extism 1.30.0 (wasmtime 43), same process | median per call | range of 15 batches |");
    println!("|---|---:|---|");
    row(
        "native: the same JSON rule in Rust (floor)",
        time(20_000, || {
            let event: serde_json::Value = serde_json::from_str(black_box(EVENT))?;
            let name = event["call"]["name"].as_str().unwrap_or_default();
            let args =
                event["call"]["arguments"].as_str().and_then(|a| serde_json::from_str::<serde_json::Value>(a).ok());
            black_box((args, name == "delete_file", format!("deny-tools: tool `{name}` is denied")));
            Ok(())
        })?,
    );
    row(
        "`on_event` (deny), plugin reused",
        time(5_000, || {
            let out: String = plugin.call("on_event", black_box(EVENT))?;
            black_box(out);
            Ok(())
        })?,
    );
    row(
        "`noop`, plugin reused",
        time(5_000, || {
            let out: String = plugin.call("noop", black_box(EVENT))?;
            black_box(out);
            Ok(())
        })?,
    );
    row(
        "fresh plugin per run (`Plugin::new_from_compiled` + first `on_event` + drop)",
        time(200, || {
            let mut fresh = Plugin::new_from_compiled(&compiled)?;
            let out: String = fresh.call("on_event", black_box(EVENT))?;
            black_box(out);
            Ok(())
        })?,
    );
    println!("\nCompile (`CompiledPlugin::new`, cache disabled): {compile_ms:.1} ms.");
    Ok(())
}
