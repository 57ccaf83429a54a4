//! `hookbox test PLUGIN --trace TRACE.jsonl`: feeds a golden trace to one
//! plugin and prints a row per event, then PASS or FAIL.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use hookbox::conformance::{Trace, run_trace};
use hookbox::sandbox::PluginOptions;
use hookbox::{Manifest, plugin_name_from_path};

use crate::escape;

/// `hookbox test`: check a plugin against a golden trace.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The plugin component.
    pub plugin: PathBuf,
    /// The golden trace (JSON Lines: `{"event": ..., "expect": ...}` per line).
    #[arg(long, value_name = "TRACE.jsonl")]
    pub trace: PathBuf,
    /// The plugin's config instead of the trace header's: a hookbox.toml (its
    /// [[plugins]] entry for this plugin: config, limits, grants) or a bare
    /// TOML table of config keys.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print what the plugin logged under each event.
    #[arg(long)]
    pub logs: bool,
}

/// The config and options `hookbox test` loads the plugin with.
fn test_setup(args: &TestArgs, trace: &Trace) -> anyhow::Result<(String, BTreeMap<String, String>, PluginOptions)> {
    let file_name = plugin_name_from_path(&args.plugin);
    let name = trace.plugin.clone().unwrap_or(file_name.clone());
    let Some(path) = &args.config else {
        return Ok((name, trace.config.clone(), PluginOptions::default()));
    };
    let text = crate::paths::read_file("--config", path, crate::paths::MAX_CONFIG_BYTES)?;
    let table: toml::Table = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("--config {}: {}", path.display(), e.to_string().trim().replace('\n', " ")))?;
    if !table.contains_key("plugins") && !table.contains_key("agent") {
        // A bare config table.
        let config = table
            .iter()
            .map(|(k, v)| {
                let s = match v {
                    toml::Value::String(s) => s.clone(),
                    other => serde_json::to_string(other).unwrap_or_default(),
                };
                (k.clone(), s)
            })
            .collect();
        return Ok((name, config, PluginOptions::default()));
    }
    let manifest = Manifest::load(path).with_context(|| format!("--config {}", path.display()))?;
    let entry = match manifest.plugins.as_slice() {
        [only] => only,
        entries => {
            entries.iter().find(|e| e.display_name() == name || e.display_name() == file_name).ok_or_else(|| {
                anyhow::anyhow!(
                    "--config {}: no [[plugins]] entry named `{name}` or `{file_name}` (there are {})",
                    path.display(),
                    entries.len()
                )
            })?
        }
    };
    Ok((entry.display_name(), entry.config_strings(), entry.options()))
}

/// Runs `hookbox test` (see [`TestArgs`]): a table of every event with its
/// fuel, time and result on `stdout`, then `PASS` or the first difference.
/// Returns the exit code: 0 when every answer matches, 1 otherwise.
///
/// Errors (exit 2 in the CLI): an unreadable or malformed trace or config, a
/// plugin that does not load.
pub fn test_command(args: &TestArgs, stdout: &mut dyn std::io::Write) -> anyhow::Result<i32> {
    let text = crate::paths::read_file("--trace", &args.trace, crate::paths::MAX_TRACE_BYTES)?;
    let trace = Trace::parse(&text).with_context(|| format!("--trace {}", args.trace.display()))?;
    let (name, config, options) = test_setup(args, &trace)?;
    let limits = options.limits;
    let runtime = crate::cli_runtime(hookbox::sandbox::RuntimeOptions::default())?;
    let started = std::time::Instant::now();
    let hookbox::sandbox::LoadedPlugin { plugin, notes } = runtime.load(&name, &args.plugin, config, options)?;
    let load_ms = started.elapsed().as_millis();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the tokio runtime: {e}"))?;
    let mut hook = plugin.hook();
    let report = rt.block_on(run_trace(&mut hook, &trace));

    // Every line goes through `escape::line` on its way out; fields that may
    // hold line breaks (describe(), messages, logs) are escaped before, so a
    // plugin cannot start a line of its own.
    let mut buf = String::new();
    let out = &mut buf;
    let _ = writeln!(
        out,
        "hookbox test: {} (plugin `{}`) against {} ({} events)",
        escape::line(&args.plugin.display().to_string()),
        escape::line(&name),
        escape::line(&args.trace.display().to_string()),
        trace.steps.len()
    );
    for note in notes {
        let _ = writeln!(out, "[note] {}", escape::line(&note));
    }
    let _ = writeln!(
        out,
        "loaded in {load_ms} ms (compile, link, trial instantiation); the first call includes instantiation"
    );
    let _ = writeln!(out, "{:>5}  {:<18} {:>11} {:>9}  result", "line", "event", "fuel", "µs");
    for s in &report.steps {
        let result = if s.matches() {
            format!("ok    {}", escape::line(&s.got.describe()))
        } else {
            format!("DIFF  expected {}, got {}", escape::line(&s.expected.describe()), escape::line(&s.got.describe()))
        };
        let _ = writeln!(
            out,
            "{:>5}  {:<18} {:>11} {:>9}  {}",
            s.line,
            s.event.as_str(),
            s.fuel_used,
            s.duration_us,
            result
        );
        if let Some(message) = &s.failure_message {
            let _ =
                writeln!(out, "{:>7}failure: {}", "", escape::line(hookbox::contract::truncate_chars(message, 300)));
        }
        if args.logs {
            for log in &s.logs {
                let _ = writeln!(out, "{:>7}[{}] {}", "", log.level, escape::line(&log.message));
            }
        }
    }
    let fuel: u64 = report.steps.iter().map(|s| s.fuel_used).sum();
    let time: u64 = report.steps.iter().map(|s| s.duration_us).sum();
    let max_fuel = report.steps.iter().map(|s| s.fuel_used).max().unwrap_or(0);
    let max_time = report.steps.iter().map(|s| s.duration_us).max().unwrap_or(0);
    let mut steady: Vec<u64> = report.steps.iter().skip(1).map(|s| s.duration_us).collect();
    steady.sort_unstable();
    let median = steady.get(steady.len() / 2).copied().unwrap_or(max_time);
    let _ = writeln!(
        out,
        "total: {} events, fuel {fuel} (max {max_fuel} = {:.3}% of the per-call limit {}), time {time} µs \
         (max {max_time} µs = {:.2}% of the {} ms deadline; median after the first call {median} µs)",
        report.steps.len(),
        percent(max_fuel, limits.fuel),
        limits.fuel,
        percent(max_time, limits.deadline_ms.saturating_mul(1000)),
        limits.deadline_ms
    );
    let code = match report.first_difference() {
        None => {
            let _ = writeln!(out, "PASS: all {} answers match", report.steps.len());
            0
        }
        Some(first) => {
            let _ = writeln!(
                out,
                "FAIL: {} of {} answers differ; first difference at line {} ({}): expected {}, got {}",
                report.differences(),
                report.steps.len(),
                first.line,
                first.event.as_str(),
                escape::line(&first.expected.to_json().to_string()),
                escape::line(&first.got.to_json().to_string())
            );
            1
        }
    };
    for line in buf.lines() {
        let _ = writeln!(stdout, "{}", escape::line(line));
    }
    Ok(code)
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 * 100.0 / whole as f64 }
}
