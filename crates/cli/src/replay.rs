//! `hookbox replay JOURNAL`: run a journaled run again and compare every hook call.

use std::io::Write;
use std::sync::Arc;

use hookbox::journal::{JournalFile, JournalProvider, RunJournal, compare};
use hookbox::sandbox::{DirMode, RuntimeOptions};
use hookbox::{AgentBuilder, DispatchTrace, Event, Manifest, PluginEntry, RunHandle};

use crate::trace::{trace_lines, wire_name};
use crate::{BadInput, EXIT_RUN_ERROR, ReplayArgs, escape, terminal, tokio_runtime};

/// `hookbox replay JOURNAL`: exit 0 when every hook call decided as recorded,
/// 1 when one differs (the first difference is printed), 2 on bad input.
pub(crate) fn replay(args: &ReplayArgs, stdout: &mut dyn Write, stderr: &mut dyn Write) -> Result<i32, BadInput> {
    let file = JournalFile::load(&args.journal).map_err(|e| BadInput(e.into()))?;
    let manifest = match &args.config {
        Some(path) => {
            crate::paths::check_input("--config", path, Some(crate::paths::MAX_CONFIG_BYTES)).map_err(BadInput)?;
            Manifest::load(path).map_err(|e| BadInput(e.into()))?
        }
        None => journal_manifest(&file, args.trust_journal_grants, stderr),
    };
    // The same bounds as a session's stored conversation and `--session`.
    let session_label = file.session_id.as_deref().unwrap_or("(none)");
    if let Some(id) = &file.session_id {
        hookbox::conversation::check_session_id(id)
            .map_err(|e| BadInput(anyhow::anyhow!("{}: session_id: {e}", args.journal.display())))?;
    }
    hookbox::conversation::encode(session_label, &file.history)
        .map_err(|e| BadInput(anyhow::anyhow!("{}: history: {e}", args.journal.display())))?;
    let journal = RunJournal::replaying(&file);
    let provider = JournalProvider::new(&file, &args.journal).map_err(|e| BadInput(e.into()))?;
    let config_path = args.config.clone();
    let journal_path = args.journal.clone();
    let stripped = args.config.is_none() && !args.trust_journal_grants && file.manifest.plugins.iter().any(has_grants);
    let assembled = AgentBuilder::new(manifest.clone())
        .provider(Arc::new(provider))
        .journal(journal.clone())
        .plugin_source(move |i, entry| match &config_path {
            Some(config) => format!("{} (plugins[{i}])", config.display()),
            None => format!("{} (plugin `{}`, {})", journal_path.display(), entry.display_name(), entry.path.display()),
        })
        .build()
        .map_err(|e| {
            let e = anyhow::Error::from(e);
            BadInput(if stripped {
                e.context("the journal's grants were not used: give --config FILE, or --trust-journal-grants")
            } else {
                e
            })
        })?;
    let mut notes = assembled.notes().to_vec();
    let hashes = assembled.hashes();
    for (name, now) in &hashes {
        match file.plugin_blake3.get(name) {
            Some(then) if then != now => notes.push(format!(
                "plugin `{name}` changed since the recording (blake3 {} → {})",
                then.get(..12).unwrap_or(then),
                now.get(..12).unwrap_or(now)
            )),
            None => notes.push(format!("plugin `{name}` is not in the recording")),
            _ => {}
        }
    }
    for name in file.plugin_blake3.keys() {
        if !manifest.plugins.iter().any(|p| p.display_name() == *name) {
            notes.push(format!("plugin `{name}` of the recording is not loaded"));
        }
    }
    for note in &notes {
        let _ = writeln!(stderr, "[note] {}", escape::line(note));
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut chain = assembled.chain();
    let agent = assembled.into_agent().with_trace(Arc::new(move |event: &Event, trace: &DispatchTrace| {
        for line in trace_lines(event, trace) {
            let _ = tx.send(line);
        }
    }));
    let handle = RunHandle::new();
    terminal::spawn_pause_resumer(handle.clone());
    let rt = tokio_runtime()?;
    let prompt = file.prompt.clone();
    // The turn starts where the recorded one did: its session and the conversation before it.
    let context = hookbox::TurnContext {
        session_id: file.session_id.clone().unwrap_or_default(),
        history: file.history.clone(),
        bus: None,
        turn: file.turn,
    };
    let outcome = rt.block_on(async move { agent.run_with_context(&prompt, &mut chain, handle, context).await });
    while let Ok(line) = rx.try_recv() {
        let _ = writeln!(stderr, "{}", escape::line(&line));
    }
    let (stop, failure) = match &outcome {
        Ok(r) => (r.stop_reason, None),
        Err(e) => (e.report.stop_reason, Some(e.info.to_string())),
    };
    let comparison = compare(&file.calls, &journal.calls());
    let mut divergences = journal.divergences();
    // Approvals: the replay must apply the recorded answers, each to the approval it was given for.
    let replayed = match &outcome {
        Ok(r) => &r.approvals,
        Err(e) => &e.report.approvals,
    };
    let same_approvals = file.approvals.len() == replayed.len()
        && file.approvals.iter().zip(replayed).all(|(a, b)| a.id == b.id && a.answer == b.answer);
    if !same_approvals {
        divergences.push(format!(
            "the approvals differ: the recording answered {} approval(s), the replay applied {} \
             (answers that are missing, changed or given for another approval)",
            file.approvals.len(),
            replayed.len()
        ));
    }
    let same_end = stop == file.stop_reason;
    let same = comparison.same() && divergences.is_empty() && same_end;
    if args.json {
        let report = serde_json::json!({
            "same": same,
            "recorded_calls": comparison.recorded_calls,
            "replayed_calls": comparison.replayed_calls,
            "first_difference": comparison.first_difference,
            "missing_plugins": comparison.missing_plugins,
            "added_plugins": comparison.added_plugins,
            "import_divergences": divergences,
            "recorded_stop_reason": file.stop_reason,
            "replayed_stop_reason": stop,
            "replay_error": failure,
        });
        let _ = writeln!(stdout, "{}", escape::json(&report.to_string()));
    } else {
        let mut lines = Vec::new();
        if let Some(d) = &comparison.first_difference {
            lines.push(format!("differs at {}", d.describe()));
        }
        for plugin in &comparison.missing_plugins {
            lines.push(format!("differs: plugin `{plugin}` has calls in the recording and none in the replay"));
        }
        for plugin in &comparison.added_plugins {
            lines.push(format!("differs: plugin `{plugin}` is not in the recording (its calls are not compared)"));
        }
        if !same_end {
            lines.push(format!(
                "differs: the replay ended with stop reason {}, the recording with {}",
                wire_name(&stop),
                wire_name(&file.stop_reason)
            ));
        }
        lines.extend(divergences.iter().map(|d| format!("differs: {d}")));
        if lines.is_empty() {
            lines.push(format!(
                "the same: {} hook call(s), every directive as recorded (stop reason {})",
                comparison.replayed_calls,
                wire_name(&stop)
            ));
        }
        if let Some(failure) = &failure {
            lines.push(format!("the replayed run raised: {failure}"));
        }
        for line in lines {
            let _ = writeln!(stdout, "replay: {}", escape::line(&line));
        }
    }
    Ok(if same { 0 } else { EXIT_RUN_ERROR })
}

fn has_grants(entry: &PluginEntry) -> bool {
    !entry.dirs.is_empty() || !entry.env.is_empty()
}

/// What `entry`'s grants give it, for the terminal: `dir HOST as GUEST (rw)`, `env NAME`.
fn describe_grants(entry: &PluginEntry) -> String {
    let dirs = entry.dirs.iter().map(|d| {
        let mode = match d.mode {
            DirMode::ReadOnly => "ro",
            DirMode::ReadWrite => "rw",
        };
        format!("dir {} as {} ({mode})", d.host.display(), d.guest)
    });
    let env = entry.env.iter().map(|v| format!("env {v}"));
    dirs.chain(env).collect::<Vec<_>>().join(", ")
}

/// The plugins a replay without `--config` runs: the journal's, with its
/// `dirs` and `env` grants removed unless `trust` (`--trust-journal-grants`).
/// A journal is a file anyone may hand over: its grants could mount `/`
/// read-write or expose `HOME`. Either way, what the grants are is said first.
fn journal_manifest(file: &JournalFile, trust: bool, stderr: &mut dyn Write) -> Manifest {
    let mut manifest = file.manifest.clone();
    for entry in manifest.plugins.iter_mut().filter(|e| has_grants(e)) {
        let line = if trust {
            format!("[note] plugin `{}`: using the journal's grants: {}", entry.display_name(), describe_grants(entry))
        } else {
            let line = format!(
                "[note] plugin `{}`: the journal's grants are not used ({}); give --config FILE for your own, \
                 or --trust-journal-grants to use them",
                entry.display_name(),
                describe_grants(entry)
            );
            entry.dirs.clear();
            entry.env.clear();
            line
        };
        let _ = writeln!(stderr, "{}", escape::line(&line));
    }
    if !trust {
        let (runtime, lowered) = bounded_runtime(manifest.runtime);
        if !lowered.is_empty() {
            let line = format!(
                "[note] the journal's [runtime] asks for more than the defaults; replaying with the defaults for: {} \
                 (give --config FILE, or --trust-journal-grants to use the journal's)",
                lowered.join(", ")
            );
            let _ = writeln!(stderr, "{}", escape::line(&line));
        }
        manifest.runtime = runtime;
    }
    manifest
}

/// A journal's `[runtime]` with every bound the host keeps on itself (how big
/// a component it reads and compiles, the compile worker's memory and time,
/// the largest linear memory, the pool's size) lowered to the default where
/// the journal asks for more: a journal handed over cannot make the host
/// allocate or wait longer than it would by default. Returns the names of
/// the lowered settings.
fn bounded_runtime(asked: RuntimeOptions) -> (RuntimeOptions, Vec<&'static str>) {
    let d = RuntimeOptions::default();
    let mut r = asked;
    let mut lowered = Vec::new();
    let mut cap = |name: &'static str, value: &mut u64, max: u64| {
        if *value > max {
            *value = max;
            lowered.push(name);
        }
    };
    cap("max_component_bytes", &mut r.max_component_bytes, d.max_component_bytes);
    cap("compile_memory_bytes", &mut r.compile_memory_bytes, d.compile_memory_bytes);
    cap("compile_timeout_ms", &mut r.compile_timeout_ms, d.compile_timeout_ms);
    cap("max_memory_bytes", &mut r.max_memory_bytes, d.max_memory_bytes);
    let mut instances = u64::from(r.max_instances);
    cap("max_instances", &mut instances, u64::from(d.max_instances));
    r.max_instances = u32::try_from(instances).unwrap_or(d.max_instances);
    (r, lowered)
}
