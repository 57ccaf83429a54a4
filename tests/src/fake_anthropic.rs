//! A loopback fake of the Anthropic Messages API that a real agent (Claude
//! Code) can be pointed at with `ANTHROPIC_BASE_URL`: a scripted queue of
//! assistant turns, each a text or tool calls, answered to `POST
//! /v1/messages` (any query, e.g. `?beta=true`) as Server-Sent Events the way
//! the real API streams them when the request says `"stream": true`
//! (`message_start`, per block `content_block_start` / `content_block_delta`
//! with `text_delta` or `input_json_delta` / `content_block_stop`,
//! `message_delta` with the `stop_reason`, `message_stop`), as one JSON
//! message otherwise. Every request body is recorded so a test can assert
//! what the model was sent (e.g. the `tool_result` that carries a hook's
//! deny reason).
//!
//! `POST /v1/messages/count_tokens` answers a fixed count; anything else
//! answers 404 in the API's error shape. When the script is used up every
//! further request gets the text `done.` with `end_turn`, so an agent that
//! asks more than the test planned ends its turn instead of hanging.
//!
//! Bounded: at most [`MAX_TURNS`] scripted turns, [`MAX_RECORDED`]
//! recorded requests (later ones are counted, not kept), bodies of at most
//! [`MAX_BODY_BYTES`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// The most turns a script may hold.
pub const MAX_TURNS: usize = 256;
/// The most requests kept for [`FakeAnthropic::requests`].
pub const MAX_RECORDED: usize = 512;
/// The largest request body accepted (Claude Code sends about 50 KB).
pub const MAX_BODY_BYTES: usize = 16 << 20;

/// One assistant turn of the script.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// A text answer (`stop_reason: end_turn`).
    Text(String),
    /// Tool calls, `(name, input)` each (`stop_reason: tool_use`); the ids
    /// are `toolu_{turn:02}_{index}`, turn and index counted from 0.
    Tools(Vec<(String, Value)>),
}

impl Turn {
    /// A text answer.
    pub fn text(text: &str) -> Turn {
        Turn::Text(text.to_string())
    }

    /// One call of `name` with `input` (a JSON object).
    pub fn tool(name: &str, input: Value) -> Turn {
        Turn::Tools(vec![(name.to_string(), input)])
    }
}

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The path and query, e.g. `/v1/messages?beta=true`.
    pub uri: String,
    /// The body as JSON (`null` when it was not JSON).
    pub body: Value,
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Turn>,
    served: usize,
    recorded: Vec<Recorded>,
    dropped: usize,
}

/// The running fake; the server stops when this is dropped.
pub struct FakeAnthropic {
    /// `http://127.0.0.1:PORT`, for `ANTHROPIC_BASE_URL`.
    pub base: String,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeAnthropic {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeAnthropic {
    /// Starts the fake on a loopback port with `script` (at most [`MAX_TURNS`] turns).
    pub async fn start(script: Vec<Turn>) -> FakeAnthropic {
        assert!(script.len() <= MAX_TURNS, "a script holds at most {MAX_TURNS} turns");
        let inner = Arc::new(Mutex::new(Inner { script: script.into(), ..Inner::default() }));
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .fallback(not_found)
            .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("local addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeAnthropic { base, inner, task }
    }

    /// Every recorded request, in order of arrival.
    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.lock().expect("lock").recorded.clone()
    }

    /// The bodies of the recorded `POST /v1/messages` requests, in order.
    pub fn message_requests(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r.uri.split('?').next() == Some("/v1/messages"))
            .map(|r| r.body)
            .collect()
    }

    /// How many scripted turns were served (answers past the script not counted).
    pub fn served(&self) -> usize {
        self.inner.lock().expect("lock").served
    }

    /// How many requests were not recorded because [`MAX_RECORDED`] were.
    pub fn dropped(&self) -> usize {
        self.inner.lock().expect("lock").dropped
    }
}

fn record(inner: &Mutex<Inner>, uri: &Uri, body: &[u8]) {
    let mut inner = inner.lock().expect("lock");
    if inner.recorded.len() >= MAX_RECORDED {
        inner.dropped += 1;
        return;
    }
    let body = serde_json::from_slice(body).unwrap_or(Value::Null);
    inner.recorded.push(Recorded { uri: uri.to_string(), body });
}

async fn messages(State(inner): State<Arc<Mutex<Inner>>>, uri: Uri, body: Bytes) -> Response {
    record(&inner, &uri, &body);
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (turn, index) = {
        let mut inner = inner.lock().expect("lock");
        let index = inner.served;
        match inner.script.pop_front() {
            Some(turn) => {
                inner.served += 1;
                (turn, index)
            }
            None => (Turn::text("done."), index),
        }
    };
    let model = request["model"].as_str().unwrap_or("claude-fake").to_string();
    let (content, stop_reason) = match turn {
        Turn::Text(text) => (vec![json!({"type": "text", "text": text})], "end_turn"),
        Turn::Tools(calls) => (
            calls
                .into_iter()
                .enumerate()
                .map(|(i, (name, input))| {
                    json!({"type": "tool_use", "id": format!("toolu_{index:02}_{i}"), "name": name, "input": input})
                })
                .collect(),
            "tool_use",
        ),
    };
    let id = format!("msg_fake_{index:04}");
    let usage =
        json!({"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    if request["stream"] != Value::Bool(true) {
        let message = json!({"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop_reason, "stop_sequence": null, "usage": usage});
        return ([(header::CONTENT_TYPE, "application/json")], message.to_string()).into_response();
    }
    let mut events: Vec<(&str, Value)> = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage}}),
    )];
    for (i, block) in content.iter().enumerate() {
        let (start, delta) = if block["type"] == "text" {
            (json!({"type": "text", "text": ""}), json!({"type": "text_delta", "text": block["text"]}))
        } else {
            (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            )
        };
        events
            .push(("content_block_start", json!({"type": "content_block_start", "index": i, "content_block": start})));
        events.push(("content_block_delta", json!({"type": "content_block_delta", "index": i, "delta": delta})));
        events.push(("content_block_stop", json!({"type": "content_block_stop", "index": i})));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": 5}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let sse: String = events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect();
    ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], sse).into_response()
}

async fn count_tokens(State(inner): State<Arc<Mutex<Inner>>>, uri: Uri, body: Bytes) -> Response {
    record(&inner, &uri, &body);
    ([(header::CONTENT_TYPE, "application/json")], json!({"input_tokens": 10}).to_string()).into_response()
}

async fn not_found(State(inner): State<Arc<Mutex<Inner>>>, uri: Uri, body: Bytes) -> Response {
    record(&inner, &uri, &body);
    let error = json!({"type": "error", "error": {"type": "not_found_error", "message": format!("no route {uri}")}});
    (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "application/json")], error.to_string()).into_response()
}

/// The `tool_result` blocks of a Messages request, in order: `(tool_use_id,
/// content as text, is_error)`. A content list is joined from its text blocks.
pub fn tool_results(request: &Value) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for message in request["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] != "tool_result" {
                continue;
            }
            let content = match &block["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
                _ => String::new(),
            };
            let id = block["tool_use_id"].as_str().unwrap_or_default().to_string();
            out.push((id, content, block["is_error"] == Value::Bool(true)));
        }
    }
    out
}

/// The `tool_result` for `tool_use_id` in `request`, if it has one.
pub fn tool_result(request: &Value, tool_use_id: &str) -> Option<(String, bool)> {
    tool_results(request).into_iter().find(|(id, _, _)| id == tool_use_id).map(|(_, text, err)| (text, err))
}

/// Every text of a Messages request's `messages` (string contents and text
/// blocks of any role, tool results' texts included), for "the model was told X" checks.
pub fn all_texts(request: &Value) -> String {
    let mut out = Vec::new();
    for message in request["messages"].as_array().into_iter().flatten() {
        match &message["content"] {
            Value::String(s) => out.push(s.clone()),
            Value::Array(blocks) => {
                for block in blocks {
                    if let Some(t) = block["text"].as_str() {
                        out.push(t.to_string());
                    }
                    match &block["content"] {
                        Value::String(s) => out.push(s.clone()),
                        Value::Array(parts) => {
                            out.extend(parts.iter().filter_map(|p| p["text"].as_str()).map(String::from))
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    out.join("\n")
}
