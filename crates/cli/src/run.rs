//! `hookbox run`: assemble the agent (through [`hookbox::AgentBuilder`]), run it with
//! the terminal trace, write the record, journal and traces asked for.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use hookbox::conformance::{Recorder, record_path};
use hookbox::journal::{JOURNAL_FORMAT, JOURNAL_VERSION, JournalFile, MAX_PLUGIN_ENTRIES, RunJournal};
use hookbox::output::{OutputFile, check_output};
use hookbox::providers::model_from_spec_with;
use hookbox::providers::record::RecordingProvider;
use hookbox::{
    Agent, AgentBuilder, DispatchTrace, Event, HookChain, HookHandler, Manifest, PluginEntry, RunHandle,
    SqliteStateStore, Workspace, plugin_name_from_path, workspace_tools,
};

use crate::session::{self, Runner};
use crate::signals::Signals;
use crate::trace::{record_json, summary, trace_lines};
use crate::{BadInput, EXIT_RUN_ERROR, Input, RunArgs, escape, is_stdin, paths, read_prompt, terminal, tokio_runtime};

/// Everything a run needs, validated before anything runs.
struct Prepared {
    agent: Agent,
    chain: HookChain,
    notes: Vec<String>,
    recorder: Option<Arc<RecordingProvider>>,
    journal: Option<JournalContext>,
    /// `--record FILE`, checked and opened.
    record_file: Option<OutputFile>,
    /// `--journal FILE`, checked and opened.
    journal_out: Option<OutputFile>,
    /// Where sessions are kept (`--db`, or the default with `--session`).
    store: Option<Arc<SqliteStateStore>>,
    /// `[session]` with the flags applied.
    options: hookbox::SessionOptions,
}

/// `--journal`: the run's journal and what the file needs besides it.
struct JournalContext {
    journal: Arc<RunJournal>,
    manifest: Manifest,
    provider: String,
    model: String,
    /// Each plugin's BLAKE3 hash, of the file as loaded.
    hashes: BTreeMap<String, String>,
}

fn prepare(args: &RunArgs) -> anyhow::Result<Prepared> {
    let mut manifest = match &args.config {
        Some(path) => {
            paths::check_input("--config", path, Some(paths::MAX_CONFIG_BYTES))?;
            Manifest::load(path)?
        }
        None => Manifest::default(),
    };
    if let Some(system) = &args.system {
        manifest.agent.system = Some(system.clone());
    }
    for path in &args.plugins {
        manifest.plugins.push(PluginEntry {
            name: Some(plugin_name_from_path(path)),
            path: path.clone(),
            config: BTreeMap::new(),
            ..PluginEntry::with_defaults(path.clone())
        });
    }
    // Plugin files are checked (kind, `[runtime] max_component_bytes`) by the runtime that loads them.
    if let Some(session) = args.model.strip_prefix("replay:").filter(|s| !s.is_empty()) {
        paths::check_input("--model replay:", Path::new(session), Some(paths::MAX_SESSION_BYTES))?;
    }
    let db = session::database(args)?;
    let inputs = run_inputs(args, &manifest, db.as_deref());
    let mut provider = model_from_spec_with(&args.model, manifest.model.http_options(args.base_url.as_deref()))?;
    let (provider_name, model_name) = (provider.name().to_string(), provider.model().to_string());
    // A journal holds the model's responses, so it records them like --record.
    let recorder =
        (args.record.is_some() || args.journal.is_some()).then(|| Arc::new(RecordingProvider::new(provider.clone())));
    if let Some(r) = &recorder {
        provider = r.clone();
    }
    let workspace =
        Workspace::open(&args.workspace).with_context(|| format!("--workspace {}", args.workspace.display()))?;
    let from_config = manifest.plugins.len() - args.plugins.len();
    let config_path = args.config.clone();
    let mut builder = AgentBuilder::new(manifest.clone())
        .provider(provider)
        .tools(workspace_tools(Arc::new(workspace)))
        .plugin_source(move |i, entry| match &config_path {
            Some(config) if i < from_config => format!("{} (plugins[{i}])", config.display()),
            _ => format!("--plugin {}", entry.path.display()),
        });
    let store = match &db {
        Some(db) => Some(session::open(args, db)?),
        None => None,
    };
    if let Some(store) = &store {
        builder = builder.state_store(store.clone());
    }
    let options = session::options(args, &manifest);
    if args.journal.is_some() && options.late_injection_policy == hookbox::LateInjectionPolicy::NewTurn {
        anyhow::bail!(
            "--journal records one turn, and late_injection_policy = new_turn may run several: \
             give --late-injection-policy surface to journal this run"
        );
    }
    let journal = args.journal.as_ref().map(|_| RunJournal::recording());
    if let Some(journal) = &journal {
        builder = builder.journal(journal.clone());
    }
    let assembled = builder.build()?;
    // Result files are checked and opened once everything loaded: a path that
    // cannot be written, or that is one of the run's own inputs, is bad input.
    let record_file = match &args.record {
        Some(path) => Some(OutputFile::open("--record", path, &inputs, &[])?),
        None => None,
    };
    let journal_out = match &args.journal {
        Some(path) => Some(OutputFile::open("--journal", path, &inputs, &record_file.iter().collect::<Vec<_>>())?),
        None => None,
    };
    let mut notes = assembled.notes().to_vec();
    if !manifest.routing.allow.is_empty() {
        notes.push(
            "[routing] is not used by `hookbox run`: it runs one session, on no message bus (routing is for embedders)"
                .into(),
        );
    }
    let mut hooks = assembled.hooks();
    if let Some(file) = &args.record_trace {
        let taken: Vec<(&'static str, PathBuf)> =
            record_file.iter().chain(&journal_out).map(|o| (o.flag(), o.target().to_path_buf())).collect();
        hooks = record_traces(hooks, file, &manifest, &inputs, taken, &mut notes)?;
    }
    let chain = assembled.chain_of(hooks);
    let hashes = assembled.hashes();
    let agent = assembled.into_agent();
    let journal =
        journal.map(|journal| JournalContext { journal, manifest, provider: provider_name, model: model_name, hashes });
    Ok(Prepared { agent, chain, notes, recorder, journal, record_file, journal_out, store, options })
}

/// The files the run reads (what, path), which no result file may overwrite:
/// the config, the replay session, the plugins, the prompt and inbox files,
/// the state database and the files SQLite keeps beside it.
fn run_inputs(args: &RunArgs, manifest: &Manifest, db: Option<&Path>) -> Vec<(String, PathBuf)> {
    let mut inputs: Vec<(String, PathBuf)> = Vec::new();
    if let Some(config) = &args.config {
        inputs.push(("--config file".into(), config.clone()));
    }
    if let Some(session) = args.model.strip_prefix("replay:") {
        inputs.push(("replay session (--model)".into(), PathBuf::from(session)));
    }
    for entry in &manifest.plugins {
        inputs.push((format!("plugin `{}`", entry.display_name()), entry.path.clone()));
    }
    for (what, path) in [("--prompt-file", &args.prompt_file), ("--inbox", &args.inbox)] {
        if let Some(path) = path.as_ref().filter(|p| p.as_os_str() != "-") {
            inputs.push((format!("{what} file"), path.clone()));
        }
    }
    if let Some(db) = db {
        inputs.push(("session database (--db)".into(), db.to_path_buf()));
        for side in paths::state_db_side_files(db) {
            inputs.push(("session database's SQLite side file".into(), side));
        }
    }
    inputs
}

/// `--record-trace FILE`: wraps every hook in a [`Recorder`],
/// once all of them loaded (a run that fails to start writes no trace).
fn record_traces(
    hooks: Vec<Box<dyn HookHandler>>,
    file: &Path,
    manifest: &Manifest,
    inputs: &[(String, PathBuf)],
    mut taken: Vec<(&'static str, PathBuf)>,
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<Box<dyn HookHandler>>> {
    match std::fs::metadata(file) {
        Ok(m) if m.is_dir() => anyhow::bail!("--record-trace {}: a directory, not a file", file.display()),
        Ok(m) if !m.is_file() => anyhow::bail!(
            "--record-trace {}: not a regular file (a device, pipe or socket): give the path of a file",
            file.display()
        ),
        _ => {}
    }
    // Every trace file is checked before any is created.
    let mut files = Vec::new();
    for hook in &hooks {
        let path = record_path(file, hook.name());
        let target = check_output("--record-trace", &path, inputs, &taken)?;
        taken.push(("--record-trace", target));
        files.push(path);
    }
    let mut out: Vec<Box<dyn HookHandler>> = Vec::new();
    for ((hook, entry), path) in hooks.into_iter().zip(&manifest.plugins).zip(files) {
        let recorder = Recorder::new(hook, &path, &entry.config_strings())
            .with_context(|| format!("--record-trace: cannot write {}", path.display()))?;
        notes.push(format!("plugin `{}`: recording its trace to {}", recorder.name(), path.display()));
        out.push(Box::new(recorder));
    }
    Ok(out)
}

pub(crate) fn run(
    args: RunArgs,
    input: Input,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<i32, BadInput> {
    let stdin_users = [args.inbox.as_deref() == Some(Path::new("-")), args.confirm, is_stdin(&args.prompt_file)];
    if stdin_users.iter().filter(|u| **u).count() > 1 {
        return Err(BadInput(anyhow::anyhow!(
            "--confirm, --inbox - and --prompt-file - all read stdin: use at most one of them"
        )));
    }
    if let Some(inbox) = args.inbox.as_deref().filter(|p| *p != Path::new("-")) {
        if !inbox.exists() {
            return Err(BadInput(anyhow::anyhow!("--inbox {}: no such file", inbox.display())));
        }
        // A pipe is read once and its lines are gone: the watcher could not
        // promise them; stdin can.
        paths::check_input("--inbox", inbox, None).map_err(|e| {
            BadInput(anyhow::anyhow!("{e} (to read a pipe, give `--inbox -` and redirect it to stdin)"))
        })?;
    }
    paths::check_workspace(&args.workspace, args.allow_system_workspace).map_err(BadInput)?;
    if args.session.as_deref().is_some_and(|s| s.trim().is_empty()) {
        return Err(BadInput(anyhow::anyhow!("--session: the session id is empty")));
    }
    let prompt = read_prompt(&args).map_err(BadInput)?;
    if prompt.trim().is_empty() {
        return Err(BadInput(anyhow::anyhow!("the prompt is empty")));
    }
    let prepared = prepare(&args).map_err(BadInput)?;
    let rt = tokio_runtime()?;
    let Prepared { agent, chain, mut notes, recorder, journal, record_file, journal_out, store, options } = prepared;
    let journal_prompt = prompt.clone();
    if args.state_db.is_some() && args.session.is_none() {
        notes.push(
            "--db without --session: this run's state is saved under a fresh session id that no later run will use"
                .into(),
        );
    }
    let pause_can_end = agent.config().pause_timeout_ms.is_some();
    for note in &notes {
        let _ = writeln!(stderr, "[note] {}", escape::line(note));
    }
    // The trace is printed as events fire: the run is a task, lines come back on a channel.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let trace_tx = tx.clone();
    let agent = Arc::new(agent.with_trace(Arc::new(move |event: &Event, trace: &DispatchTrace| {
        for line in trace_lines(event, trace) {
            let _ = trace_tx.send(line);
        }
    })));
    let runner = Runner::new(agent, chain, args.session.as_deref(), store, options).map_err(BadInput)?;
    let history = runner.history();
    let handle = RunHandle::new();
    let input = Arc::new(std::sync::Mutex::new(input));
    if let Some(inbox) = &args.inbox {
        let start = if inbox.as_os_str() == "-" { 0 } else { terminal::read_inbox_now(inbox, &handle, &tx) };
        terminal::spawn_inbox(inbox.clone(), start, input.clone(), handle.clone(), tx.clone());
    }
    if args.confirm {
        terminal::spawn_confirm(input, handle.clone(), tx.clone());
    } else if !pause_can_end {
        terminal::spawn_unanswerable_pause_guard(handle.clone());
    }
    drop(tx);
    // SIGINT/SIGTERM (in the `hookbox` process): the first aborts the run at its
    // next safe point, the second exits at once without the temporaries.
    let temporaries: Vec<PathBuf> =
        record_file.iter().chain(&journal_out).map(|o| o.temporary().to_path_buf()).collect();
    let mut signals = {
        let _entered = rt.enter();
        Signals::install().map_err(|e| BadInput(anyhow::anyhow!("cannot handle signals: {e}")))?
    };
    let abort = handle.clone();
    let outcome = rt.block_on(async {
        let mut task = tokio::spawn(async move { runner.run(&prompt, handle).await });
        loop {
            tokio::select! {
                Some(line) = rx.recv() => {
                    let _ = writeln!(stderr, "{}", escape::line(&line));
                }
                (name, code) = signals.next() => {
                    if signals.interrupted.is_some() {
                        let _ = writeln!(stderr, "[signal] {name} again: exiting now; no record or journal is written");
                        let _ = stderr.flush();
                        crate::signals::exit_now(&temporaries, code);
                    }
                    signals.interrupted = Some(code);
                    abort.abort(format!("interrupted by {name}"));
                    let _ = writeln!(
                        stderr,
                        "[signal] {name}: aborting the run at its next safe point; the partial record and journal \
                         are written (send it again to exit at once)"
                    );
                }
                done = &mut task => {
                    while let Ok(line) = rx.try_recv() {
                        let _ = writeln!(stderr, "{}", escape::line(&line));
                    }
                    break done;
                }
            }
        }
    });
    let outcome = outcome.map_err(|e| BadInput(anyhow::anyhow!("the run task failed: {e}")))?;
    // A result file that cannot be written fails the command (exit 1), though the run completed.
    let mut lost_output = false;
    if let (Some(recorder), Some(out)) = (&recorder, record_file) {
        let path = out.path().to_path_buf();
        match recorder.to_text().and_then(|text| out.finish(&text)) {
            Ok(()) => {
                let line = format!("[record] {} response(s) written to {}", recorder.len(), path.display());
                let _ = writeln!(stderr, "{}", escape::line(&line));
            }
            Err(e) => {
                lost_output = true;
                let line = format!("hookbox: error: --record {}: {e}", path.display());
                let _ = writeln!(stderr, "{}", escape::line(&line));
            }
        }
    }
    if let (Some(ctx), Some(recorder), Some(out)) = (&journal, &recorder, journal_out) {
        // A journaled run has one turn (new_turn is refused with --journal).
        let stop = outcome.records.last().map_or(hookbox::StopReason::Error, |r| r.stop_reason);
        let file = journal_file(ctx, recorder, (journal_prompt, history), args.session.clone(), stop);
        let path = out.path().to_path_buf();
        match file.to_text().and_then(|text| out.finish(&text)) {
            Ok(()) => {
                let imports: usize = file.imports.values().map(Vec::len).sum();
                let line = format!(
                    "[journal] {} hook call(s), {imports} import value(s), {} tool result(s) written to {}",
                    file.calls.len(),
                    file.tools.len(),
                    path.display()
                );
                let _ = writeln!(stderr, "{}", escape::line(&line));
                for (plugin, dropped) in &file.imports_cut {
                    let line = format!(
                        "[journal] plugin `{plugin}`: {dropped} import value(s) past the cap of {MAX_PLUGIN_ENTRIES} not written; its replay cannot be exact"
                    );
                    let _ = writeln!(stderr, "{}", escape::line(&line));
                }
            }
            Err(e) => {
                lost_output = true;
                let line = format!("hookbox: error: --journal {}: {e}", path.display());
                let _ = writeln!(stderr, "{}", escape::line(&line));
            }
        }
    }
    let code = match &outcome.failure {
        None => 0,
        Some(failure) => {
            let _ = writeln!(stderr, "hookbox: run failed: {}", escape::line(failure));
            EXIT_RUN_ERROR
        }
    };
    let code = if lost_output && code == 0 { EXIT_RUN_ERROR } else { code };
    let code = signals.interrupted.unwrap_or(code);
    // One record per turn: follow-up turns (new_turn) print theirs after the first's.
    let turns = outcome.records.len();
    for (i, record) in outcome.records.iter().enumerate() {
        if turns > 1 {
            let _ = writeln!(stderr, "[turn {}/{turns}]", i + 1);
        }
        summary(record, stderr);
        if args.json {
            let mut json = record_json(record);
            // The record of a turn whose session save failed says so (stdout
            // consumers may not read stderr or the exit code).
            if let (Some(why), true, Some(obj)) = (&outcome.not_saved, i + 1 == turns, json.as_object_mut()) {
                obj.insert("session_not_saved".into(), serde_json::Value::String(why.clone()));
            }
            let _ = writeln!(stdout, "{}", escape::json(&json.to_string()));
        } else if let Some(answer) = &record.final_answer {
            let _ = writeln!(stdout, "{}", escape::text(answer));
        }
    }
    Ok(code)
}

/// The journal file of a finished run.
fn journal_file(
    ctx: &JournalContext,
    recorder: &RecordingProvider,
    (prompt, history): (String, Vec<hookbox::providers::Message>),
    session_id: Option<String>,
    stop_reason: hookbox::StopReason,
) -> JournalFile {
    let mut manifest = ctx.manifest.clone();
    // Absolute paths, so the journal replays from any folder.
    for entry in &mut manifest.plugins {
        if let Ok(path) = std::fs::canonicalize(&entry.path) {
            entry.path = path;
        }
        for dir in &mut entry.dirs {
            if let Ok(path) = std::fs::canonicalize(&dir.host) {
                dir.host = path;
            }
        }
    }
    JournalFile {
        format: JOURNAL_FORMAT.to_string(),
        version: JOURNAL_VERSION,
        hookbox_version: env!("CARGO_PKG_VERSION").to_string(),
        run_id: ctx.journal.run_id(String::new()),
        turn: ctx.journal.turn(1),
        session_id,
        prompt,
        history,
        provider: ctx.provider.clone(),
        model: ctx.model.clone(),
        manifest,
        plugin_blake3: ctx.hashes.clone(),
        responses: recorder.session(),
        tools: ctx.journal.tools(),
        imports: ctx.journal.imports(),
        imports_cut: ctx.journal.cut(),
        calls: ctx.journal.calls(),
        approvals: ctx.journal.approvals(),
        stop_reason,
    }
}
