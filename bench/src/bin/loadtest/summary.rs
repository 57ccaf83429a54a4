//! `summary`: criterion's results as ratio tables for BENCHMARKS.md.

#[allow(clippy::wildcard_imports)]
use super::*;

// summary

/// One criterion result: its id and the median and mean time per iteration, in ns.
struct Row {
    id: String,
    median: f64,
    mean: f64,
    lo: f64,
    hi: f64,
}

fn read_rows(dir: &Path, out: &mut Vec<Row>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.is_dir() {
            continue;
        }
        let bench = path.join("new/benchmark.json");
        let est = path.join("new/estimates.json");
        if bench.exists() && est.exists() {
            let b: serde_json::Value = serde_json::from_slice(&std::fs::read(&bench)?)?;
            let e: serde_json::Value = serde_json::from_slice(&std::fs::read(&est)?)?;
            let num = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
            out.push(Row {
                id: b["full_id"].as_str().unwrap_or("?").to_string(),
                median: num(&e["median"]["point_estimate"]),
                mean: num(&e["mean"]["point_estimate"]),
                lo: num(&e["median"]["confidence_interval"]["lower_bound"]),
                hi: num(&e["median"]["confidence_interval"]["upper_bound"]),
            });
        } else {
            read_rows(&path, out)?;
        }
    }
    Ok(())
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

pub(super) fn summary(dir: &Path) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    read_rows(dir, &mut rows).with_context(|| format!("reading {}", dir.display()))?;
    if rows.is_empty() {
        bail!("no criterion results in {}", dir.display());
    }
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    let get = |id: &str| rows.iter().find(|r| r.id == id).map(|r| r.median);
    println!("| benchmark | median | 95 % CI of the median | mean | × `deny/native` | × `deny/raw-async` |");
    println!("|---|---:|---|---:|---:|---:|");
    let native = get("deny/native");
    let raw_async = get("deny/raw-async");
    for r in &rows {
        let ratio = |base: Option<f64>| base.map_or("–".into(), |b| format!("{:.1}", r.median / b));
        println!(
            "| `{}` | {} | {} – {} | {} | {} | {} |",
            r.id,
            fmt_ns(r.median),
            fmt_ns(r.lo),
            fmt_ns(r.hi),
            fmt_ns(r.mean),
            ratio(native),
            ratio(raw_async)
        );
    }
    println!();
    println!("| goal | measured | met? |");
    println!("|---|---|---|");
    let goal = |name: &str, value: Option<String>, met: Option<bool>| {
        let met = match met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "not measured",
        };
        println!("| {name} | {} | {met} |", value.unwrap_or_else(|| "–".into()));
    };
    for (plugin, label) in [("deny", "deny-tools"), ("noop", "noop")] {
        for raw in ["raw-async", "raw-sync"] {
            let r = get(&format!("{plugin}/hookbox-hook")).zip(get(&format!("{plugin}/{raw}")));
            goal(
                &format!("Hookbox dispatch ≤ 1.5× raw wasmtime ({label}, vs `{raw}`)"),
                r.map(|(h, w)| format!("{} vs {}: {:.2}×", fmt_ns(h), fmt_ns(w), h / w)),
                r.map(|(h, w)| h / w <= 1.5),
            );
        }
    }
    for (plugin, label) in [("noop", "noop"), ("deny", "deny-tools")] {
        let f = get(&format!("{plugin}/hookbox-fresh"));
        goal(
            &format!("fresh instance per run ≤ 20 µs ({label}: new hook + first event + drop)"),
            f.map(fmt_ns),
            f.map(|f| f <= 20_000.0),
        );
    }
    for (baseline, label) in [("deny/hookbox-hook", "reused instance"), ("deny/hookbox-fresh", "fresh instance")] {
        for process in ["deny/process", "deny/process-sh"] {
            let r = get(process).zip(get(baseline));
            goal(
                &format!("≥ 1000× faster than process-per-event (`{process}` vs Hookbox, {label})"),
                r.map(|(p, h)| format!("{} vs {}: {:.0}×", fmt_ns(p), fmt_ns(h), p / h)),
                r.map(|(p, h)| p / h >= 1000.0),
            );
        }
    }
    let noop = get("noop/hookbox-hook");
    goal(
        "≥ 300,000 hook calls/s/core, no-op plugin (1 / `noop/hookbox-hook`)",
        noop.map(|n| format!("{:.0} calls/s ({})", 1e9 / n, fmt_ns(n))),
        noop.map(|n| 1e9 / n >= 300_000.0),
    );
    for (id, label, limit_ms) in [
        ("load/rust-deny-debug/cache", "Rust deny-tools (debug) from the cache < 1 ms", 1.0),
        ("load/rust-deny-release/cache", "Rust deny-tools (release) from the cache < 1 ms", 1.0),
        ("load/python-deny/cache", "Python deny-tools from the cache < 100 ms", 100.0),
        ("load/js-deny/cache", "JavaScript (StarlingMonkey) deny-tools from the cache < 100 ms", 100.0),
        ("load/js-qjs-deny/cache", "JavaScript (QuickJS) deny-tools from the cache < 100 ms", 100.0),
    ] {
        let v = get(id);
        goal(label, v.map(fmt_ns), v.map(|v| v / 1e6 < limit_ms));
    }
    Ok(())
}
