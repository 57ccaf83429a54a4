//! The agent loop on the live providers, served by a loopback server with the
//! recorded bytes (no test reaches the network), with a native recording hook:
//! the exact tool calls reach the hooks, every call id gets one result in the
//! next request (tool results first), usage is summed per iteration-complete,
//! server-side tools are resent and never dispatched, a 429 is retried with a
//! `request-start` per attempt, a tool result over the cap is cut and marked,
//! and a stream carries the text deltas.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hookbox::RunHandle;
use hookbox::contract::{Directive, Event, EventContext};
use hookbox::providers::http::{Api, HttpOptions, HttpProvider};
use hookbox::sandbox::HookChain;
use hookbox::sandbox::{HookHandler, HookReply};
use hookbox::{Agent, AgentConfig, StreamEvent};
use hookbox::{Tool, ToolOutput};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn recordings() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../providers/testdata/provider-recordings")
}

fn rec(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(recordings().join(name)).expect("read")).expect("json")
}

/// Serves `bodies` in order at `route`, one each.
async fn serve(route: &str, bodies: Vec<(u16, Vec<u8>, &str)>) -> MockServer {
    let server = MockServer::start().await;
    for (status, body, mime) in bodies {
        let mut response = ResponseTemplate::new(status).set_body_raw(body, mime);
        if status == 429 {
            response = response.insert_header("retry-after", "0");
        }
        Mock::given(method("POST")).and(path(route)).respond_with(response).up_to_n_times(1).mount(&server).await;
    }
    server
}

async fn sent(server: &MockServer) -> Vec<Value> {
    server.received_requests().await.expect("recorded").iter().map(|r| r.body_json().expect("json")).collect()
}

fn http(api: Api, uri: &str, model: &str, stream: bool) -> Arc<HttpProvider> {
    let base = if matches!(api, Api::OpenAi | Api::OpenAiResponses) { format!("{uri}/v1") } else { uri.to_string() };
    let options = HttpOptions { base_url: Some(base), api_key: Some("k".into()), stream, ..HttpOptions::default() };
    Arc::new(HttpProvider::with_env(api, model, options, &|_| None).expect("provider"))
}

/// A native hook that records every event it sees.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Event>>>);

#[async_trait]
impl HookHandler for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    async fn on_event(&mut self, event: &Event, _context: &EventContext) -> HookReply {
        self.0.lock().expect("lock").push(event.clone());
        HookReply { outcome: Ok(Directive::Continue), logs: Vec::new(), suspension: None, fuel_used: 0, duration_us: 1 }
    }
}

impl Recorder {
    fn events(&self) -> Vec<Event> {
        self.0.lock().expect("lock").clone()
    }
}

/// A tool that answers with a fixed text (named like the recording's tools).
struct Fixed(&'static str, String);

#[async_trait]
impl Tool for Fixed {
    fn spec(&self) -> hookbox::providers::ToolSpec {
        hookbox::providers::ToolSpec {
            name: self.0.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }
    }
    async fn call(&self, _arguments: &Value) -> ToolOutput {
        ToolOutput::ok(self.1.clone())
    }
}

fn before_tool_calls(events: &[Event]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::BeforeToolCall { call, .. } => Some((call.id.clone(), call.name.clone(), call.arguments.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn anthropic_parallel_calls_reach_the_hooks_and_are_answered_in_one_message() {
    let fixture = rec("02_anthropic_parallel_4_tool_use.json");
    let body = |i: usize| serde_json::to_vec(&fixture["interactions"][i]["response"]["body"]).expect("body");
    let server =
        serve("/v1/messages", vec![(200, body(0), "application/json"), (200, body(1), "application/json")]).await;
    let recorded_calls: Vec<(String, String, String)> = fixture["interactions"][0]["response"]["body"]["content"]
        .as_array()
        .expect("content")
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| {
            (b["id"].as_str().unwrap_or("").into(), b["name"].as_str().unwrap_or("").into(), b["input"].to_string())
        })
        .collect();
    assert_eq!(recorded_calls.len(), 4);
    let names: Vec<&'static str> = vec!["get_weather", "get_time", "get_user", "get_status"];
    let tools: Vec<Arc<dyn Tool>> =
        names.iter().map(|n| Arc::new(Fixed(n, format!("{n} ok"))) as Arc<dyn Tool>).collect();
    let model = fixture["interactions"][0]["request"]["body"]["model"].as_str().unwrap_or("claude-sonnet-4-5");
    let agent = Agent::new(http(Api::Anthropic, &server.uri(), model, false), tools, AgentConfig::default());
    let recorder = Recorder::default();
    let r = agent.run("go", &mut HookChain::new(vec![Box::new(recorder.clone())])).await.expect("run");

    // The hooks saw the exact calls: ids, names, and arguments (as compact JSON).
    let seen = before_tool_calls(&recorder.events());
    let seen_norm: Vec<(String, String, Value)> =
        seen.iter().map(|(i, n, a)| (i.clone(), n.clone(), serde_json::from_str(a).expect("json args"))).collect();
    let want: Vec<(String, String, Value)> =
        recorded_calls.iter().map(|(i, n, a)| (i.clone(), n.clone(), serde_json::from_str(a).expect("json"))).collect();
    assert_eq!(seen_norm, want);
    // The next request answers every call id once, in one user message, tool results first.
    let bodies = sent(&server).await;
    assert_eq!(bodies.len(), 2);
    let last = bodies[1]["messages"].as_array().expect("messages").last().expect("last").clone();
    assert_eq!(last["role"], "user");
    let ids: Vec<&str> =
        last["content"].as_array().expect("blocks").iter().filter_map(|b| b["tool_use_id"].as_str()).collect();
    let want_ids: Vec<&str> = recorded_calls.iter().map(|(i, _, _)| i.as_str()).collect();
    assert_eq!(ids, want_ids);
    assert!(last["content"].as_array().expect("blocks").iter().all(|b| b["type"] == "tool_result"));
    // Usage: both requests, all in the one iteration-complete.
    let usage = |i: usize| &fixture["interactions"][i]["response"]["body"]["usage"];
    let input = usage(0)["input_tokens"].as_u64().unwrap_or(0) + usage(1)["input_tokens"].as_u64().unwrap_or(0);
    assert_eq!(r.usage.input_tokens, input);
    let completes: Vec<u64> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::IterationComplete { usage, .. } => Some(usage.input_tokens),
            _ => None,
        })
        .collect();
    assert_eq!(completes, vec![input]);
}

#[tokio::test]
async fn a_server_side_tool_is_resent_and_never_dispatched_and_the_stream_carries_text_deltas() {
    let sse = |i: usize| {
        std::fs::read(recordings().join(format!("05_anthropic_sse_server_and_client_tool_json_delta.{i}.response.sse")))
            .expect("sse")
    };
    let mime = "text/event-stream; charset=utf-8";
    let server = serve("/v1/messages", vec![(200, sse(0), mime), (200, sse(1), mime)]).await;
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Fixed("get_exchange_rate", "1 USD = 0.92 EUR".into()))];
    let agent = Arc::new(Agent::new(
        http(Api::Anthropic, &server.uri(), "claude-sonnet-4-6", true),
        tools,
        AgentConfig::default(),
    ));
    let recorder = Recorder::default();
    let mut rx = agent.stream(
        "What is the current USD to EUR exchange rate?".into(),
        HookChain::new(vec![Box::new(recorder.clone())]),
        RunHandle::new(),
    );
    let mut text = String::new();
    let mut result = None;
    while let Some(e) = rx.recv().await {
        match e {
            StreamEvent::TextDelta { text: t } => text.push_str(&t),
            StreamEvent::Complete { result: r, .. } => result = Some(r),
            _ => {}
        }
    }
    let result = result.expect("complete");
    assert!(result.error.is_none(), "{:?}", result.error);
    // Only the client tool reached the hooks and ran.
    let calls = before_tool_calls(&recorder.events());
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].1, "get_exchange_rate");
    // The deltas add up to the texts of both responses.
    let final_answer = result.final_answer.clone().unwrap_or_default();
    assert!(!text.is_empty() && text.ends_with(&final_answer), "deltas: {text:?}");
    // The second request resends the server_tool_use block of the first response.
    let bodies = sent(&server).await;
    assert!(bodies[1].to_string().contains("server_tool_use"), "{}", bodies[1]);
}

#[tokio::test]
async fn a_429_is_retried_with_a_request_start_per_attempt() {
    let fixture = rec("08_openai_chat_parallel_tool_calls_nonstream.json");
    let body = |i: usize| serde_json::to_vec(&fixture["interactions"][i]["response"]["body"]).expect("body");
    let limited = br#"{"error": {"message": "Rate limit reached", "type": "requests"}}"#.to_vec();
    let server = serve(
        "/v1/chat/completions",
        vec![
            (429, limited, "application/json"),
            (200, body(0), "application/json"),
            (200, body(1), "application/json"),
        ],
    )
    .await;
    let tools: Vec<Arc<dyn Tool>> =
        vec![Arc::new(Fixed("delete_file", "true".into())), Arc::new(Fixed("create_file", "Success".into()))];
    let config = AgentConfig { emit_request_start: true, ..AgentConfig::default() };
    let agent = Agent::new(http(Api::OpenAi, &server.uri(), "gpt-4o", false), tools, config);
    let recorder = Recorder::default();
    let r = agent.run("go", &mut HookChain::new(vec![Box::new(recorder.clone())])).await.expect("run");
    let starts: Vec<(u32, u32, String)> = recorder
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::RequestStart { request_index, attempt, purpose, .. } => {
                Some((*request_index, *attempt, purpose.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        vec![(1, 1, "initial".to_string()), (2, 2, "initial".to_string()), (3, 1, "follow-up".to_string())]
    );
    assert_eq!(r.requests, 3, "the rate-limited request counts as sent");
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (204, 65), "the 429 billed nothing");
}

#[tokio::test]
async fn a_tool_result_over_the_cap_is_cut_before_it_is_sent_and_hooks_see_it() {
    let fixture = rec("08_openai_chat_parallel_tool_calls_nonstream.json");
    let body = |i: usize| serde_json::to_vec(&fixture["interactions"][i]["response"]["body"]).expect("body");
    let server =
        serve("/v1/chat/completions", vec![(200, body(0), "application/json"), (200, body(1), "application/json")])
            .await;
    let long = "é".repeat(5_000);
    let tools: Vec<Arc<dyn Tool>> =
        vec![Arc::new(Fixed("delete_file", long.clone())), Arc::new(Fixed("create_file", "Success".into()))];
    let config = AgentConfig { max_tool_result_chars: 1_000, ..AgentConfig::default() };
    let agent = Agent::new(http(Api::OpenAi, &server.uri(), "gpt-4o", false), tools, config);
    let recorder = Recorder::default();
    agent.run("go", &mut HookChain::new(vec![Box::new(recorder.clone())])).await.expect("run");
    let truncated: Vec<bool> = recorder
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallResult { truncated, .. } => Some(*truncated),
            _ => None,
        })
        .collect();
    assert_eq!(truncated, vec![true, false]);
    let bodies = sent(&server).await;
    let sent_result = bodies[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .expect("tool message")
        .to_string();
    assert!(sent_result.chars().count() <= 1_000, "{}", sent_result.chars().count());
    assert!(sent_result.contains("truncated"), "the cut is marked");
}

/// A native hook that replaces every tool result with its text.
struct ReplaceResult(String);

#[async_trait]
impl HookHandler for ReplaceResult {
    fn name(&self) -> &str {
        "replacer"
    }
    async fn on_event(&mut self, event: &Event, _context: &EventContext) -> HookReply {
        let directive = match event {
            Event::ToolCallResult { .. } => Directive::ReplaceResult(self.0.clone()),
            _ => Directive::Continue,
        };
        HookReply { outcome: Ok(directive), logs: Vec::new(), suspension: None, fuel_used: 0, duration_us: 1 }
    }
}

#[tokio::test]
async fn a_replaced_result_over_the_cap_is_cut_like_a_tool_result() {
    let fixture = rec("08_openai_chat_parallel_tool_calls_nonstream.json");
    let body = |i: usize| serde_json::to_vec(&fixture["interactions"][i]["response"]["body"]).expect("body");
    let server =
        serve("/v1/chat/completions", vec![(200, body(0), "application/json"), (200, body(1), "application/json")])
            .await;
    let tools: Vec<Arc<dyn Tool>> =
        vec![Arc::new(Fixed("delete_file", "true".into())), Arc::new(Fixed("create_file", "Success".into()))];
    let config = AgentConfig { max_tool_result_chars: 1_000, ..AgentConfig::default() };
    let agent = Agent::new(http(Api::OpenAi, &server.uri(), "gpt-4o", false), tools, config);
    let huge = "é".repeat(50_000);
    let r = agent.run("go", &mut HookChain::new(vec![Box::new(ReplaceResult(huge))])).await.expect("run");
    // What the provider received: cut, with the tool-result marker.
    let bodies = sent(&server).await;
    let sent_results: Vec<String> = bodies[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().expect("content").to_string())
        .collect();
    assert_eq!(sent_results.len(), 2);
    for text in &sent_results {
        assert!(text.chars().count() <= 1_000, "{} chars sent", text.chars().count());
        assert!(text.contains("[truncated: "), "the cut is marked like a tool result's");
    }
    // What the record holds: the same cut text, in the history and the directive list.
    let stored: Vec<&str> = r
        .messages
        .iter()
        .filter_map(|m| match m {
            hookbox::providers::Message::ToolResults { results } => Some(results),
            _ => None,
        })
        .flatten()
        .map(|res| res.content.as_str())
        .collect();
    assert_eq!(stored, sent_results.iter().map(String::as_str).collect::<Vec<_>>());
    let replaced: Vec<&String> = r
        .directives
        .iter()
        .filter_map(|d| match &d.directive {
            Directive::ReplaceResult(text) => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(replaced.len(), 2);
    assert!(replaced.iter().all(|t| t.chars().count() <= 1_000), "the record keeps no more than the cap");
}

/// The events with the per-run values (ids, provider name) blanked.
fn comparable(events: &[Event]) -> Vec<Event> {
    events
        .iter()
        .cloned()
        .map(|e| match e {
            Event::RunStart { model, user_content, .. } => Event::RunStart {
                run_id: String::new(),
                session_id: String::new(),
                model,
                provider: String::new(),
                user_content,
            },
            other => other,
        })
        .collect()
}

#[tokio::test]
async fn a_recorded_live_run_replays_to_the_same_event_trace_and_prices_can_be_overridden() {
    use hookbox::providers::record::RecordingProvider;
    use hookbox::providers::replay::ReplayProvider;

    let fixture = rec("08_openai_chat_parallel_tool_calls_nonstream.json");
    let body = |i: usize| serde_json::to_vec(&fixture["interactions"][i]["response"]["body"]).expect("body");
    let server =
        serve("/v1/chat/completions", vec![(200, body(0), "application/json"), (200, body(1), "application/json")])
            .await;
    let tools = || -> Vec<Arc<dyn Tool>> {
        vec![Arc::new(Fixed("delete_file", "true".into())), Arc::new(Fixed("create_file", "Success".into()))]
    };
    let recorder = Arc::new(RecordingProvider::new(http(Api::OpenAi, &server.uri(), "gpt-4o", false)));
    let mut prices = std::collections::BTreeMap::new();
    prices.insert(
        "gpt-4o".to_string(),
        hookbox::providers::pricing::PriceOverride { input: 1.0, output: 1.0, cache_read: None, cache_write: None },
    );
    let config = AgentConfig { prices, ..AgentConfig::default() };
    let live = Agent::new(recorder.clone(), tools(), config.clone())
        .run("go", &mut HookChain::default())
        .await
        .expect("live run");
    // 204 + 65 tokens at $1 per million each.
    assert!((live.usage.cost - 269.0 / 1_000_000.0).abs() < 1e-12, "{}", live.usage.cost);

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("recorded.json");
    hookbox::output::write_atomically(&file, &recorder.to_text().expect("text")).expect("write");
    let replayed = Agent::new(Arc::new(ReplayProvider::from_file(&file).expect("replay")), tools(), config)
        .run("go", &mut HookChain::default())
        .await
        .expect("replayed run");
    assert_eq!(comparable(&replayed.events), comparable(&live.events));
    assert_eq!(replayed.usage, live.usage);
    assert_eq!(replayed.messages, live.messages);
}

/// A JSON final answer in `api`'s wire format, served after a recording runs out.
fn closing(api: Api, model: &str) -> Vec<u8> {
    let v = match api {
        Api::Anthropic => json!({"id": "msg_close", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1}}),
        Api::OpenAi => json!({"id": "close", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "done"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}}),
        Api::OpenAiResponses => json!({"id": "resp_close", "object": "response", "status": "completed", "model": model,
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}],
            "usage": {"input_tokens": 1, "output_tokens": 1}}),
        Api::Gemini => {
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "done"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1}, "modelVersion": model})
        }
    };
    serde_json::to_vec(&v).expect("json")
}

/// A recording to run: its number, API, route, model, and its responses as (bytes, is SSE).
type Case = (&'static str, Api, &'static str, &'static str, Vec<(Vec<u8>, bool)>);

#[tokio::test]
async fn every_recording_runs_through_the_agent_loop_with_hooks() {
    use hookbox::providers::stream::assemble_bytes;

    // (recording, api, route, model, interactions as (bytes, is_sse)).
    let sse_file = |name: &str| std::fs::read(recordings().join(name)).expect("sse");
    let json_of =
        |name: &str, i: usize| serde_json::to_vec(&rec(name)["interactions"][i]["response"]["body"]).expect("json");
    let cases: Vec<Case> = vec![
        (
            "01",
            Api::Anthropic,
            "/v1/messages",
            "claude-sonnet-4-5",
            vec![(sse_file("01_anthropic_sse_tool_use_no_args.response.sse"), true)],
        ),
        (
            "02",
            Api::Anthropic,
            "/v1/messages",
            "claude-haiku-4-5",
            vec![
                (json_of("02_anthropic_parallel_4_tool_use.json", 0), false),
                (json_of("02_anthropic_parallel_4_tool_use.json", 1), false),
            ],
        ),
        (
            "03",
            Api::Anthropic,
            "/v1/messages",
            "claude-sonnet-4-5",
            vec![
                (json_of("03_anthropic_tool_result_is_error_retry.json", 0), false),
                (json_of("03_anthropic_tool_result_is_error_retry.json", 1), false),
            ],
        ),
        (
            "04",
            Api::Anthropic,
            "/v1/messages",
            "claude-3-sonnet-20240229",
            vec![(json_of("04_anthropic_max_tokens_truncated_tool_use.json", 0), false)],
        ),
        (
            "05",
            Api::Anthropic,
            "/v1/messages",
            "claude-sonnet-4-6",
            vec![
                (sse_file("05_anthropic_sse_server_and_client_tool_json_delta.0.response.sse"), true),
                (sse_file("05_anthropic_sse_server_and_client_tool_json_delta.1.response.sse"), true),
            ],
        ),
        (
            "06",
            Api::Anthropic,
            "/v1/messages",
            "claude-sonnet-4-5",
            vec![(sse_file("06_anthropic_sse_escaped_quotes_split.response.sse"), true)],
        ),
        (
            "07",
            Api::OpenAi,
            "/v1/chat/completions",
            "gpt-4o",
            vec![(sse_file("07_openai_chat_sse_parallel_tool_calls.1.response.sse"), true)],
        ),
        (
            "08",
            Api::OpenAi,
            "/v1/chat/completions",
            "gpt-4o",
            vec![
                (json_of("08_openai_chat_parallel_tool_calls_nonstream.json", 0), false),
                (json_of("08_openai_chat_parallel_tool_calls_nonstream.json", 1), false),
            ],
        ),
        (
            "09",
            Api::OpenAi,
            "/v1/chat/completions",
            "anthropic/claude-sonnet-4.5",
            vec![(json_of("09_openai_compat_tool_call_without_arguments.json", 0), false)],
        ),
        (
            "10",
            Api::OpenAiResponses,
            "/v1/responses",
            "gpt-4o",
            vec![
                (sse_file("10_openai_responses_sse_function_call.0.response.sse"), true),
                (sse_file("10_openai_responses_sse_function_call.1.response.sse"), true),
            ],
        ),
    ];
    for (name, api, route, model, interactions) in cases {
        // What the recorded responses hold, decoded by the same code the provider uses.
        let format = api.wire_format();
        let decoded: Vec<hookbox::providers::ModelResponse> = interactions
            .iter()
            .map(|(bytes, is_sse)| {
                if *is_sse {
                    assemble_bytes(format.stream_assembler(), "test", bytes).expect("assemble")
                } else {
                    format.decode_response(&serde_json::from_slice(bytes).expect("json")).expect("decode")
                }
            })
            .collect();
        let server = MockServer::start().await;
        for (bytes, is_sse) in &interactions {
            let mime = if *is_sse { "text/event-stream" } else { "application/json" };
            Mock::given(method("POST"))
                .and(path(route))
                .respond_with(ResponseTemplate::new(200).set_body_raw(bytes.clone(), mime))
                .up_to_n_times(1)
                .with_priority(1)
                .mount(&server)
                .await;
        }
        Mock::given(method("POST"))
            .and(path(route))
            .respond_with(ResponseTemplate::new(200).set_body_raw(closing(api, model), "application/json"))
            .with_priority(5)
            .mount(&server)
            .await;
        // Every tool the recordings call exists and answers.
        let mut names: Vec<&'static str> = Vec::new();
        for d in &decoded {
            for c in &d.tool_calls {
                if !names.iter().any(|n| *n == c.name) {
                    names.push(Box::leak(c.name.clone().into_boxed_str()));
                }
            }
        }
        let tools: Vec<Arc<dyn Tool>> =
            names.iter().map(|n| Arc::new(Fixed(n, format!("{n} result"))) as Arc<dyn Tool>).collect();
        let stream = interactions.iter().any(|(_, s)| *s);
        let agent = Agent::new(http(api, &server.uri(), model, stream), tools, AgentConfig::default());
        let recorder = Recorder::default();
        let r = agent
            .run("go", &mut HookChain::new(vec![Box::new(recorder.clone())]))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));

        // The hooks saw exactly the recorded tool calls (a response cut by max_tokens runs none).
        let expected: Vec<(String, String, String)> = decoded
            .iter()
            .filter(|d| d.finish_reason != hookbox::providers::FinishReason::Length)
            .flat_map(|d| d.tool_calls.iter().map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone())))
            .collect();
        assert_eq!(before_tool_calls(&recorder.events()), expected, "{name}");
        // Every tool call got exactly one result, in order, in the next request's history.
        let mut pending: Vec<String> = Vec::new();
        for m in &r.messages {
            match m {
                hookbox::providers::Message::Assistant { tool_calls, .. } => {
                    assert!(pending.is_empty(), "{name}: unanswered calls {pending:?}");
                    pending = tool_calls.iter().map(|c| c.id.clone()).collect();
                }
                hookbox::providers::Message::ToolResults { results } => {
                    let ids: Vec<String> = results.iter().map(|t| t.tool_call_id.clone()).collect();
                    assert_eq!(ids, pending, "{name}: one result per call id, in order");
                    pending.clear();
                }
                _ => {}
            }
        }
        // Usage: the recorded responses plus the closing ones (1 token each way).
        let closings = r.requests as usize - decoded.len().min(r.requests as usize);
        let recorded_in: u64 = decoded.iter().take(r.requests as usize).map(|d| d.usage.input_tokens).sum();
        assert_eq!(r.usage.input_tokens, recorded_in + closings as u64, "{name}: usage summed");
        // The requests the provider really sent: tool results first in their message.
        for body in sent(&server).await.iter().skip(1) {
            if api == Api::Anthropic {
                let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
                if let Some(blocks) = last["content"].as_array() {
                    let first_non_result =
                        blocks.iter().position(|b| b["type"] != "tool_result").unwrap_or(blocks.len());
                    assert!(
                        blocks[first_non_result..].iter().all(|b| b["type"] != "tool_result"),
                        "{name}: tool results first"
                    );
                }
            }
        }
    }
}
