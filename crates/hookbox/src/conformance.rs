//! The conformance kit: golden traces, `hookbox test` and `hookbox run --record-trace`.
//!
//! A **trace** is a JSON Lines file. Each step is one line
//! `{"event": EVENT, "context": CONTEXT, "expect": EXPECT}`, where `EVENT` is
//! an event as the run record's `events` hold it (`{"type":
//! "before-tool-call", "iteration": 1, ...}`), `CONTEXT` (optional; missing
//! fields are 0 or empty) is the event context a WIT 0.2.0 plugin gets with
//! it (`{"run_id": "...", "session_id": "...", "turn": 1, "iteration": 1,
//! "max_iterations": 10, "retries": 0}`) and `EXPECT` is the plugin's answer: a directive as the run record writes
//! one (`{"action": "skip-tool", "value": "..."}`, `{"action": "continue"}`),
//! or `{"failure": KIND}` when the call must fail (`trap`, `out-of-fuel`,
//! `deadline`, `memory`, `invalid-output`, `instantiate`, `state`). An optional first
//! line `{"hookbox_trace": 1, "plugin": NAME, "config": {KEY: VALUE, ...}}`
//! names the plugin the trace was recorded from and the config it ran with
//! (a string value reaches the plugin as it is, any other value as its JSON
//! text, as in `hookbox.toml`). Blank lines are ignored.
//!
//! [`run_trace`] feeds the steps' events, in order, to one [`HookHandler`] (for
//! `hookbox test`, a [`WasmHook`](hookbox_sandbox::WasmHook), exactly as a
//! run does: one instance, replaced by a fresh one after a failure) and
//! compares each answer with its expectation. [`Recorder`] wraps a handler in
//! a run and writes such a trace of what it saw and answered.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::{Value, json};

use hookbox_contract::{Directive, Event, EventContext, EventKind};
use hookbox_sandbox::{FailureKind, HookHandler, HookLog, HookReply};

/// The trace format version written in the header line.
pub const TRACE_FORMAT: u64 = 1;

/// What a step expects of the plugin.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// This directive.
    Directive(Directive),
    /// A failed call of this kind.
    Failure(FailureKind),
}

impl Expect {
    /// The JSON form used in traces: a directive object or `{"failure": KIND}`.
    pub fn to_json(&self) -> Value {
        match self {
            Expect::Directive(d) => serde_json::to_value(d).unwrap_or(Value::Null),
            Expect::Failure(kind) => json!({ "failure": kind.as_str() }),
        }
    }

    fn from_json(value: &Value) -> Result<Expect, String> {
        if let Some(kind) = value.get("failure") {
            return serde_json::from_value::<FailureKind>(kind.clone())
                .map(Expect::Failure)
                .map_err(|e| format!("`expect.failure` is not a failure kind ({e})"));
        }
        serde_json::from_value::<Directive>(value.clone())
            .map(Expect::Directive)
            .map_err(|e| format!("`expect` is not a directive ({e})"))
    }

    /// A one-line description, e.g. `skip-tool "no"` or `failure trap`.
    pub fn describe(&self) -> String {
        match self {
            Expect::Failure(kind) => format!("failure {}", kind.as_str()),
            Expect::Directive(d) => match serde_json::to_value(d).ok().and_then(|v| v.get("value").cloned()) {
                Some(value) => format!("{} {value}", d.action()),
                None => d.action().to_string(),
            },
        }
    }
}

/// One step of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceStep {
    /// The 1-based line number in the file.
    pub line: usize,
    /// The event to feed.
    pub event: Event,
    /// Where it happens (the step's `context`; default when the step has none).
    pub context: EventContext,
    /// What the plugin must answer.
    pub expect: Expect,
}

/// A parsed trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// The plugin named in the header, if any.
    pub plugin: Option<String>,
    /// The config from the header (empty without one), as the plugin receives it.
    pub config: BTreeMap<String, String>,
    /// The steps, in file order.
    pub steps: Vec<TraceStep>,
}

/// A trace that cannot be read: the line and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct TraceError {
    /// The 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// The JSON text a plugin receives for a config value: strings as they are,
/// other values as their JSON text (as `hookbox.toml` values are given).
fn config_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The header's JSON for a config string: the JSON value it is the compact
/// text of, so the trace stays readable, or else the string itself.
fn config_json(raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        // (compared as text: `Value == str` would compare with a JSON string)
        Ok(v) if !v.is_string() && serde_json::to_string(&v).is_ok_and(|text| text == raw) => v,
        _ => Value::String(raw.to_string()),
    }
}

impl Trace {
    /// Parses a trace (see the module docs).
    ///
    /// Errors: a line that is not JSON, a header that is not the first line,
    /// a step without `event` or `expect`, an unknown event type, directive
    /// or failure kind, or a trace with no step.
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut trace = Trace::default();
        let mut seen_line = false;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            if raw.trim().is_empty() {
                continue;
            }
            let bad = |message: String| TraceError { line, message };
            let value: Value = serde_json::from_str(raw).map_err(|e| bad(format!("not JSON: {e}")))?;
            let Some(obj) = value.as_object() else {
                return Err(bad("expected a JSON object".into()));
            };
            if obj.contains_key("hookbox_trace") {
                if seen_line {
                    return Err(bad("the header (`hookbox_trace`) must be the first line".into()));
                }
                seen_line = true;
                match obj.get("hookbox_trace").and_then(Value::as_u64) {
                    Some(TRACE_FORMAT) => {}
                    other => return Err(bad(format!("unsupported trace format {other:?} (this hookbox reads 1)"))),
                }
                trace.plugin = obj.get("plugin").and_then(Value::as_str).map(str::to_owned);
                match obj.get("config") {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(config)) => {
                        trace.config = config.iter().map(|(k, v)| (k.clone(), config_string(v))).collect();
                    }
                    Some(_) => return Err(bad("`config` must be an object".into())),
                }
                continue;
            }
            seen_line = true;
            let event = obj.get("event").ok_or_else(|| bad("no `event`".into()))?;
            let event: Event =
                serde_json::from_value(event.clone()).map_err(|e| bad(format!("`event` is not an event ({e})")))?;
            let context = match obj.get("context") {
                None | Some(Value::Null) => EventContext::default(),
                Some(c) => serde_json::from_value(c.clone())
                    .map_err(|e| bad(format!("`context` is not an event context ({e})")))?,
            };
            let expect = obj.get("expect").ok_or_else(|| bad("no `expect`".into()))?;
            let expect = Expect::from_json(expect).map_err(bad)?;
            trace.steps.push(TraceStep { line, event, context, expect });
        }
        if trace.steps.is_empty() {
            return Err(TraceError { line: text.lines().count().max(1), message: "the trace has no step".into() });
        }
        Ok(trace)
    }

    /// The header line for a trace of `plugin` with `config`.
    pub fn header_json(plugin: &str, config: &BTreeMap<String, String>) -> Value {
        let config: serde_json::Map<String, Value> = config.iter().map(|(k, v)| (k.clone(), config_json(v))).collect();
        json!({ "hookbox_trace": TRACE_FORMAT, "plugin": plugin, "config": config })
    }

    /// One step line: the event (with `iteration`, null where none, as in the
    /// run record), its context and the expectation.
    pub fn step_json(event: &Event, context: &EventContext, expect: &Expect) -> Value {
        let mut event = serde_json::to_value(event).unwrap_or(Value::Null);
        if let Some(obj) = event.as_object_mut() {
            obj.entry("iteration").or_insert(Value::Null);
        }
        let context = serde_json::to_value(context).unwrap_or(Value::Null);
        json!({ "event": event, "context": context, "expect": expect.to_json() })
    }
}

/// What one step produced.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    /// The step's line in the trace.
    pub line: usize,
    /// The event's kind.
    pub event: EventKind,
    /// What the trace expected.
    pub expected: Expect,
    /// What the plugin answered.
    pub got: Expect,
    /// The failure's message when the call failed.
    pub failure_message: Option<String>,
    /// Fuel the call used.
    pub fuel_used: u64,
    /// How long the call took, in microseconds (the first call includes instantiation).
    pub duration_us: u64,
    /// What the plugin logged during the call.
    pub logs: Vec<HookLog>,
}

impl StepResult {
    /// Whether the answer matched the expectation.
    pub fn matches(&self) -> bool {
        self.expected == self.got
    }
}

/// Every step's result, in trace order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// The results.
    pub steps: Vec<StepResult>,
}

impl Report {
    /// The first step whose answer differs from its expectation.
    pub fn first_difference(&self) -> Option<&StepResult> {
        self.steps.iter().find(|s| !s.matches())
    }

    /// How many steps differ.
    pub fn differences(&self) -> usize {
        self.steps.iter().filter(|s| !s.matches()).count()
    }
}

/// Feeds every step's event to `hook`, in order, and compares its answers.
/// Every step runs, also after a difference, so the plugin sees the whole sequence.
pub async fn run_trace(hook: &mut dyn HookHandler, trace: &Trace) -> Report {
    let mut report = Report::default();
    for step in &trace.steps {
        let reply = hook.on_event(&step.event, &step.context).await;
        let (got, failure_message) = match reply.outcome {
            Ok(d) => (Expect::Directive(d), None),
            Err(f) => (Expect::Failure(f.kind), Some(f.message)),
        };
        report.steps.push(StepResult {
            line: step.line,
            event: step.event.kind(),
            expected: step.expect.clone(),
            got,
            failure_message,
            fuel_used: reply.fuel_used,
            duration_us: reply.duration_us,
            logs: reply.logs,
        });
    }
    report
}

/// Where `--record-trace FILE` writes `plugin`'s trace: the plugin's name is
/// inserted before the extension (`run.jsonl` → `run.deny-tools.jsonl`), or
/// `.NAME.jsonl` is appended when `FILE` has none.
pub fn record_path(file: &Path, plugin: &str) -> PathBuf {
    let safe: String =
        plugin.chars().map(|c| if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' }).collect();
    match (file.file_stem(), file.extension()) {
        (Some(stem), Some(ext)) => {
            file.with_file_name(format!("{}.{safe}.{}", stem.to_string_lossy(), ext.to_string_lossy()))
        }
        _ => {
            let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            file.with_file_name(format!("{name}.{safe}.jsonl"))
        }
    }
}

/// A [`HookHandler`] that passes every event to the hook it wraps and writes
/// a trace of what that hook saw and answered (see the module docs), one
/// flushed line per event, so a run that ends early still leaves its trace.
pub struct Recorder {
    inner: Box<dyn HookHandler>,
    out: Option<BufWriter<std::fs::File>>,
    path: PathBuf,
}

impl Recorder {
    /// Creates `path` (truncating it), writes the header and wraps `inner`.
    ///
    /// Errors: the file cannot be created or written.
    pub fn new(
        inner: Box<dyn HookHandler>,
        path: &Path,
        config: &BTreeMap<String, String>,
    ) -> Result<Self, std::io::Error> {
        let file = std::fs::File::create(path)?;
        let mut out = BufWriter::new(file);
        writeln!(out, "{}", Trace::header_json(inner.name(), config)).and_then(|()| out.flush())?;
        Ok(Recorder { inner, out: Some(out), path: path.to_path_buf() })
    }

    /// The file the trace goes to.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[async_trait]
impl HookHandler for Recorder {
    hookbox_sandbox::forward_hook_handler!(inner);

    async fn on_event(&mut self, event: &Event, context: &EventContext) -> HookReply {
        let reply = self.inner.on_event(event, context).await;
        let expect = match &reply.outcome {
            Ok(d) => Expect::Directive(d.clone()),
            Err(f) => Expect::Failure(f.kind),
        };
        if let Some(out) = self.out.as_mut() {
            let line = Trace::step_json(event, context, &expect);
            if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
                // The run goes on; the trace stops here.
                tracing::warn!(plugin = self.inner.name(), "--record-trace: cannot write {}: {e}", self.path.display());
                self.out = None;
            }
        }
        reply
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_header_steps_and_failures() {
        let text = r#"{"hookbox_trace": 1, "plugin": "p", "config": {"paths": [".env"], "message": "m", "n": 2}}

{"event": {"type": "iteration-start", "iteration": 1, "loop_counter": 1}, "expect": {"action": "continue"}}
{"event": {"type": "run-end", "iterations": 1, "usage": {"input_tokens": 1, "output_tokens": 2, "cache_read_tokens": 0, "cache_write_tokens": 0, "cost": 0.5}, "error": null, "iteration": null}, "expect": {"failure": "trap"}}
"#;
        let trace = Trace::parse(text).expect("valid trace");
        assert_eq!(trace.plugin.as_deref(), Some("p"));
        assert_eq!(trace.config["paths"], r#"[".env"]"#);
        assert_eq!(trace.config["message"], "m");
        assert_eq!(trace.config["n"], "2");
        assert_eq!(trace.steps.len(), 2);
        assert_eq!(trace.steps[0].line, 3);
        assert_eq!(trace.steps[0].expect, Expect::Directive(Directive::Continue));
        assert_eq!(trace.steps[1].expect, Expect::Failure(FailureKind::Trap));
    }

    #[test]
    fn bad_lines_name_their_number() {
        let step = r#"{"event": {"type": "iteration-start", "iteration": 1, "loop_counter": 1}, "expect": {"action": "continue"}}"#;
        for (text, line, what) in [
            (format!("{step}\nnot json"), 2, "not JSON"),
            (format!("{step}\n{{\"event\": {{\"type\": \"nope\"}}, \"expect\": {{}}}}"), 2, "not an event"),
            (step.replace("continue", "explode"), 1, "not a directive"),
            (step.replace(r#"{"action": "continue"}"#, r#"{"failure": "boom"}"#), 1, "failure kind"),
            (format!("{step}\n{{\"hookbox_trace\": 1}}"), 2, "first line"),
            ("{\"hookbox_trace\": 2}".to_string(), 1, "unsupported"),
            (String::new(), 1, "no step"),
        ] {
            let err = Trace::parse(&text).expect_err(what);
            assert_eq!(err.line, line, "{what}: {err}");
            assert!(err.to_string().contains(what), "{err}");
        }
    }

    #[test]
    fn steps_and_headers_round_trip() {
        let event = Event::IterationStart { iteration: 2, loop_counter: 3 };
        let expect = Expect::Directive(Directive::SkipTool(Some("no".into())));
        let mut config = BTreeMap::new();
        config.insert("paths".to_string(), r#"[".env","*.pem"]"#.to_string());
        config.insert("spaced".to_string(), r#"[ "a" ]"#.to_string());
        config.insert("word".to_string(), "strict".to_string());
        config.insert("quoted".to_string(), "\"x\"".to_string());
        let context =
            EventContext { run_id: "r".into(), turn: 2, iteration: 2, max_iterations: 5, ..Default::default() };
        let text = format!("{}\n{}\n", Trace::header_json("p", &config), Trace::step_json(&event, &context, &expect));
        let trace = Trace::parse(&text).expect("round trip");
        assert_eq!(trace.config, config, "every config string comes back byte for byte");
        assert_eq!(trace.steps[0].event, event);
        assert_eq!(trace.steps[0].context, context);
        assert_eq!(trace.steps[0].expect, expect);
        // A step without `context` (a trace written before 0.2.0) gets the default one.
        let old = Trace::parse(r#"{"event": {"type": "iteration-start", "iteration": 1, "loop_counter": 1}, "expect": {"action": "continue"}}"#)
            .expect("a step without context");
        assert_eq!(old.steps[0].context, EventContext::default());
        let run_end = Event::RunEnd { iterations: 0, usage: Default::default(), error: None };
        assert!(
            Trace::step_json(&run_end, &EventContext::default(), &Expect::Directive(Directive::Continue))["event"]
                .get("iteration")
                .is_some_and(Value::is_null)
        );
    }

    #[test]
    fn record_paths_insert_the_plugin_name() {
        assert_eq!(record_path(Path::new("t/run.jsonl"), "deny-tools"), Path::new("t/run.deny-tools.jsonl"));
        assert_eq!(record_path(Path::new("run"), "a b"), Path::new("run.a_b.jsonl"));
    }

    #[test]
    fn describe_is_one_line() {
        assert_eq!(Expect::Directive(Directive::Continue).describe(), "continue");
        assert_eq!(Expect::Directive(Directive::SkipTool(Some("x".into()))).describe(), "skip-tool \"x\"");
        assert_eq!(Expect::Failure(FailureKind::OutOfFuel).describe(), "failure out-of-fuel");
    }
}
