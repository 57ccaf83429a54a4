//! `loadtest compile`: the wall time and peak memory of compiling one
//! component, in this process or in a compile worker (issue 13, A.4). Run it
//! under `/usr/bin/time -f %M` for the peak: GNU time reports the largest
//! of this process and the worker it waited for.

use std::path::Path;
use std::time::Instant;

use hookbox::sandbox::{CompileWorker, HookRuntime, LoadError, RuntimeOptions};

/// Compiles `component` `rounds` times (no cache) in-process or in `worker`
/// (`PROGRAM compile-worker`) and prints a markdown row per round.
pub fn compile_mode(
    options: RuntimeOptions,
    component: &Path,
    worker: Option<&Path>,
    rounds: usize,
) -> anyhow::Result<()> {
    let worker = worker.map(|w| CompileWorker::new(w, ["compile-worker"]));
    let runtime = HookRuntime::builder().options(options).compile_worker(worker.clone()).build()?;
    let bytes = std::fs::metadata(component)?.len();
    println!("| component | bytes | where | round | compile, s | result |");
    println!("|---|---:|---|---:|---:|---|");
    for round in 1..=rounds.max(1) {
        let started = Instant::now();
        // `inspect` compiles and then describes the component; a component that
        // compiles but does not fit the world (the generated big ones) still
        // measures the compile.
        let result = match runtime.inspect(component) {
            Ok(_) => "compiled, fits the world".to_string(),
            Err(e @ (LoadError::Compile { .. } | LoadError::CompileStopped { .. })) => {
                format!("compile error: {}", first_line(&e.to_string()))
            }
            Err(_) => "compiled, then refused (not a hook)".to_string(),
        };
        println!(
            "| {} | {bytes} | {} | {round} | {:.2} | {result} |",
            component.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            if worker.is_some() { "worker" } else { "in process" },
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().chars().take(160).collect()
}
