//! Drop-in hooks for the agents people already run. Claude Code, Codex CLI,
//! Gemini CLI and Cursor call a hook at each point of their own loop with a
//! JSON object (on a spawned process's stdin, or, for Claude Code, also as an
//! HTTP POST) and read JSON and an exit code back. This crate is the
//! translation, and nothing else: [`parse`] maps one agent's hook input onto
//! the Hookbox [`Event`]s a chain is asked about, and [`answer`] maps the
//! chain's [`Decision`] back onto what that agent reads. Pure functions, no
//! I/O: `hookbox serve` (`POST /v1/hooks/{format}`) and `hookbox hook`
//! (a command hook) do the dispatching. `docs/agents.md` is the mapping
//! table, event by event and field by field.
//!
//! Hostile input: the caller bounds the body ([`MAX_INPUT_BYTES`]);
//! serde_json bounds nesting; a tool result is cut to
//! [`MAX_RESULT_BYTES`] before a hook sees it; a session id must be 1 to
//! [`MAX_SESSION_ID_BYTES`] bytes without control characters.

mod claude_code;
mod codex;
mod cursor;
mod gemini;
mod verdict;

use std::fmt;
use std::str::FromStr;

use hookbox::contract::{FinishReason, ToolCall, Usage};
use hookbox::{ContentBlock, Event};
use serde_json::{Map, Value};

pub use hookbox::sandbox::Decision;
pub use verdict::Verdict;

/// The most bytes of one hook input a caller should read (4 MiB).
pub const MAX_INPUT_BYTES: usize = 4 << 20;
/// The most bytes of a tool's result a hook sees (64 KiB, cut on a character boundary).
pub const MAX_RESULT_BYTES: usize = 64 << 10;
/// The most bytes of an agent's session id.
pub const MAX_SESSION_ID_BYTES: usize = 128;

/// An agent whose hook protocol Hookbox speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Claude Code (`hooks` in settings.json: command and http hooks).
    ClaudeCode,
    /// OpenAI's Codex CLI (`hooks` in config, Claude Code's wire format).
    Codex,
    /// Google's Gemini CLI (`hooks` in settings.json).
    Gemini,
    /// Cursor (`.cursor/hooks.json`).
    Cursor,
}

impl Format {
    /// Every format, in the order the docs list them.
    pub const ALL: [Format; 4] = [Format::ClaudeCode, Format::Codex, Format::Gemini, Format::Cursor];

    /// The name used in URLs and on the command line: `claude-code`, `codex`, `gemini`, `cursor`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::Gemini => "gemini",
            Format::Cursor => "cursor",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = AgentError;

    fn from_str(s: &str) -> Result<Self, AgentError> {
        Format::ALL.into_iter().find(|f| f.as_str() == s).ok_or_else(|| {
            AgentError::UnknownFormat(
                s.chars().take(40).flat_map(char::escape_debug).collect::<String>()
                    + "; the formats are claude-code, codex, gemini and cursor",
            )
        })
    }
}

/// Why a hook input could not be mapped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Not a format this crate speaks.
    #[error("unknown hook format {0}")]
    UnknownFormat(String),
    /// The input is not JSON, or not a JSON object.
    #[error("the hook input is not a JSON object: {0}")]
    Json(#[source] serde_json::Error),
    /// A field is missing or has the wrong type.
    #[error("the hook input's `{field}` {problem}")]
    Field {
        /// The field's name.
        field: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
}

/// What kind of point in the agent's loop a hook input stands for; every
/// format's events map onto one of these.
#[derive(Debug, Clone, PartialEq)]
pub enum Point {
    /// A tool is about to run (a veto point): `before-tool-call`.
    BeforeTool {
        /// The tool's name as the agent names it.
        tool: String,
        /// Its input, a JSON object.
        input: Value,
    },
    /// A tool ran: `tool-call-result`.
    AfterTool {
        /// The tool's name.
        tool: String,
        /// The tool's response as the agent sent it (a replacement is given back in its shape).
        response: Value,
    },
    /// The user's prompt, before the agent works on it: `run-start`.
    Prompt,
    /// The agent is about to stop with its answer: `final-answer`, then `run-end`.
    Stop {
        /// True when the agent is already continuing because a stop hook asked it to.
        again: bool,
    },
    /// An event with no Hookbox counterpart: no hook is asked, the answer is empty.
    Unmapped,
}

/// One agent hook input, mapped.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentEvent {
    /// The agent.
    pub format: Format,
    /// The agent's event name as it sent it (e.g. `PreToolUse`).
    pub name: String,
    /// The agent's session (conversation) id: the Hookbox session.
    pub session_id: String,
    /// The point in the loop.
    pub point: Point,
    /// The events to dispatch, in order (empty for [`Point::Unmapped`];
    /// `final-answer` then `run-end` for [`Point::Stop`]).
    pub events: Vec<Event>,
}

/// What the agent gets back: JSON for its stdout (or an HTTP hook's body)
/// and the exit code a command hook ends with.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The JSON object the agent reads (`{}` when nothing changes).
    pub json: Value,
    /// The command hook's exit status: 0, or 2 where the agent's convention
    /// for "blocked" is exit 2 with the reason on stderr.
    pub exit_code: i32,
    /// The text for stderr with exit code 2.
    pub stderr: Option<String>,
    /// True when the agent wants empty stdout rather than `{}` (Codex).
    pub quiet_when_empty: bool,
}

impl Reply {
    fn json(json: Value) -> Self {
        Reply { json, exit_code: 0, stderr: None, quiet_when_empty: false }
    }

    /// What a command hook writes on stdout: the JSON on one line, or
    /// nothing when it is `{}` and the agent wants silence.
    pub fn stdout(&self) -> String {
        if self.quiet_when_empty && self.json.as_object().is_some_and(Map::is_empty) {
            return String::new();
        }
        format!("{}\n", self.json)
    }
}

/// Maps the hook input `input` (the bytes the agent sent) of `format`.
///
/// Errors: [`AgentError::Json`] for bytes that are not a JSON object;
/// [`AgentError::Field`] for a missing or ill-typed session id, event name,
/// tool name or tool input.
pub fn parse(format: Format, input: &[u8]) -> Result<AgentEvent, AgentError> {
    let value: Value = serde_json::from_slice(input).map_err(AgentError::Json)?;
    let Value::Object(obj) = value else {
        return Err(AgentError::Field { field: "(body)", problem: "must be a JSON object" });
    };
    let (name, session_id, point, fields) = match format {
        Format::ClaudeCode | Format::Codex => claude_code::read(&obj)?,
        Format::Gemini => gemini::read(&obj)?,
        Format::Cursor => cursor::read(&obj)?,
    };
    let events = events_of(&point, &session_id, &fields);
    Ok(AgentEvent { format, name, session_id, point, events })
}

/// What the agent's answer is when the chain decided `decision` on `event`.
pub fn answer(event: &AgentEvent, decision: &Decision) -> Reply {
    let verdict = Verdict::of(decision);
    match event.format {
        Format::ClaudeCode => claude_code::answer(event, &verdict),
        Format::Codex => codex::answer(event, &verdict),
        Format::Gemini => gemini::answer(event, &verdict),
        Format::Cursor => cursor::answer(event, &verdict),
    }
}

/// True when `decision` (on an agent event's first Hookbox event) settles
/// the answer: the later events (`run-end` after `final-answer`) are only
/// dispatched, for observers, when it lets the agent stop.
pub fn settles(decision: &Decision) -> bool {
    decision.terminal.is_some() || decision.retry.is_some()
}

/// The answer when no hook could be asked (the server unreachable, a config
/// that does not load): with `fail_closed` a tool is denied and a prompt
/// blocked with `reason`; otherwise the event passes (`{}`, exit 0).
pub fn failure_answer(event: &AgentEvent, reason: &str, fail_closed: bool) -> Reply {
    if !fail_closed || !matches!(event.point, Point::BeforeTool { .. } | Point::Prompt) {
        return Reply::json(Value::Object(Map::new()));
    }
    let terminal = match event.point {
        Point::Prompt => hookbox::Directive::SkipRun(reason.to_string()),
        _ => hookbox::Directive::SkipTool(Some(reason.to_string())),
    };
    answer(event, &Decision { terminal: Some(terminal), ..Decision::default() })
}

/// Fields every format's reader hands over besides the point.
#[derive(Debug, Default)]
struct Fields {
    /// The tool call's id.
    call_id: String,
    /// The tool's result as text (after-tool).
    result: String,
    /// False when the agent reported the tool failed.
    success: bool,
    /// The tool's input as JSON text (after-tool: the arguments it ran with).
    arguments: String,
    /// The user's prompt (prompt) or the agent's last message (stop).
    text: String,
    /// The model name when the agent says.
    model: String,
    /// How long the tool ran, in ms, when the agent says.
    duration_ms: u64,
}

fn events_of(point: &Point, session_id: &str, f: &Fields) -> Vec<Event> {
    match point {
        Point::BeforeTool { tool, input } => vec![Event::BeforeToolCall {
            iteration: 1,
            call: ToolCall { id: f.call_id.clone(), name: tool.clone(), arguments: input.to_string() },
        }],
        Point::AfterTool { tool, .. } => {
            let (result, truncated) = cut(&f.result, MAX_RESULT_BYTES);
            vec![Event::ToolCallResult {
                iteration: 1,
                tool_name: tool.clone(),
                tool_call_id: f.call_id.clone(),
                result: result.to_string(),
                truncated,
                success: f.success,
                duration_ms: f.duration_ms,
                reported_cost: None,
                cost_estimated: false,
                arguments: f.arguments.clone(),
                result_data: None,
            }]
        }
        Point::Prompt => vec![Event::RunStart {
            run_id: session_id.to_string(),
            session_id: session_id.to_string(),
            model: f.model.clone(),
            provider: String::new(),
            user_content: vec![ContentBlock::Text(f.text.clone())],
        }],
        Point::Stop { .. } => vec![
            Event::FinalAnswer {
                text: f.text.clone(),
                content: vec![ContentBlock::Text(f.text.clone())],
                finish_reason: FinishReason::Stop,
                usage: Usage::default(),
                tool_calls: Vec::new(),
                reasoning: String::new(),
            },
            Event::RunEnd { iterations: 1, usage: Usage::default(), error: None },
        ],
        Point::Unmapped => Vec::new(),
    }
}

/// `text` cut to at most `max` bytes on a character boundary, and whether it was cut.
fn cut(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// Sets the answer's `decision` and `reason`.
fn decide(out: &mut Map<String, Value>, decision: &str, reason: &str) {
    out.insert("decision".into(), Value::from(decision));
    out.insert("reason".into(), Value::from(reason));
}

/// The part Claude Code's and Gemini CLI's answers share, `block` being the
/// agent's word for it: a stop at a prompt and a retry at a stop as
/// `decision: block` with the reason, the context as `additionalContext`
/// (not at a stop), a stop elsewhere as `continue: false` with
/// `stopReason`, and `hookSpecificOutput` when it holds anything.
fn finish(
    event: &AgentEvent,
    v: &Verdict,
    block: &str,
    mut out: Map<String, Value>,
    mut specific: Map<String, Value>,
) -> Reply {
    match (&event.point, &v.stop, &v.retry) {
        (Point::Prompt, Some(reason), _) | (Point::Stop { .. }, None, Some(reason)) => decide(&mut out, block, reason),
        _ => {}
    }
    if let (Some(context), false) = (v.context_text(), matches!(event.point, Point::Unmapped | Point::Stop { .. })) {
        specific.insert("additionalContext".into(), Value::from(context));
    }
    if let (Some(reason), false) = (&v.stop, matches!(event.point, Point::Prompt)) {
        out.insert("continue".into(), Value::Bool(false));
        out.insert("stopReason".into(), Value::from(reason.as_str()));
    }
    if !specific.is_empty() {
        specific.insert("hookEventName".into(), Value::from(event.name.as_str()));
        out.insert("hookSpecificOutput".into(), Value::Object(specific));
    }
    Reply::json(Value::Object(out))
}

/// A required string field.
fn string<'a>(obj: &'a Map<String, Value>, field: &'static str) -> Result<&'a str, AgentError> {
    match obj.get(field) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(AgentError::Field { field, problem: "must be a string" }),
        None => Err(AgentError::Field { field, problem: "is missing" }),
    }
}

/// An optional string field ("" when absent or not a string).
fn text(obj: &Map<String, Value>, field: &str) -> String {
    obj.get(field).and_then(Value::as_str).unwrap_or_default().to_string()
}

/// A session id: 1 to [`MAX_SESSION_ID_BYTES`] bytes, no control characters.
fn session(obj: &Map<String, Value>, field: &'static str) -> Result<String, AgentError> {
    let id = string(obj, field)?;
    if id.is_empty() || id.len() > MAX_SESSION_ID_BYTES || id.chars().any(char::is_control) {
        return Err(AgentError::Field { field, problem: "must be 1 to 128 bytes without control characters" });
    }
    Ok(id.to_string())
}

/// A tool's input: a JSON object (`{}` when absent).
fn tool_input(obj: &Map<String, Value>, field: &'static str) -> Result<Value, AgentError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        Some(_) => Err(AgentError::Field { field, problem: "must be a JSON object" }),
    }
}

/// A tool's response as the text a hook reads: a string as it is, anything else as JSON text.
fn response_text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

#[cfg(test)]
mod tests;
