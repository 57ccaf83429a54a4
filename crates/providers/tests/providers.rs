//! The live providers against loopback servers: every recording in
//! `crates/providers/testdata/provider-recordings/` served byte for byte (JSON bodies and
//! `.sse` files) through [`HttpProvider`], checking the decoded tool calls,
//! usage and finish reasons and the shape of the requests the provider sent.
//! Also: interleaved fragments, cut streams, 429 with `retry-after` driven
//! through [`RetryPolicy`], max-tokens truncation, empty arguments, and a
//! multibyte character split across HTTP chunks. No test reaches the network.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookbox_providers::http::{Api, HttpOptions, HttpProvider};
use hookbox_providers::retry::RetryPolicy;
use hookbox_providers::{
    Delta, FinishReason, Message, ModelProvider, ModelRequest, ModelResponse, ProviderError, ToolCall, ToolResult,
    ToolSpec, Usage,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "test-key-123";

fn recordings_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/provider-recordings")
}

fn rec(name: &str) -> Value {
    let text = std::fs::read_to_string(recordings_dir().join(name)).expect("read recording");
    serde_json::from_str(&text).expect("recording is JSON")
}

fn sse(name: &str) -> Vec<u8> {
    std::fs::read(recordings_dir().join(name)).expect("read .sse")
}

/// The recorded JSON response body of interaction `i`, as bytes.
fn json_body(recording: &Value, i: usize) -> Vec<u8> {
    serde_json::to_vec(&recording["interactions"][i]["response"]["body"]).expect("serialise")
}

fn provider(api: Api, server_uri: &str, stream: bool) -> HttpProvider {
    let base_url = match api {
        Api::OpenAi | Api::OpenAiResponses => format!("{server_uri}/v1"),
        Api::Anthropic | Api::Gemini => server_uri.to_owned(),
    };
    let model = match api {
        Api::Anthropic => "claude-sonnet-4-5",
        Api::OpenAi | Api::OpenAiResponses => "gpt-4o",
        Api::Gemini => "gemini-2.5-flash",
    };
    let options = HttpOptions { base_url: Some(base_url), api_key: Some(KEY.into()), stream, ..HttpOptions::default() };
    HttpProvider::with_env(api, model, options, &|_| None).expect("provider")
}

fn provider_for_model(api: Api, server_uri: &str, stream: bool, model: &str) -> HttpProvider {
    let base_url = match api {
        Api::OpenAi | Api::OpenAiResponses => format!("{server_uri}/v1"),
        Api::Anthropic | Api::Gemini => server_uri.to_owned(),
    };
    let options = HttpOptions { base_url: Some(base_url), api_key: Some(KEY.into()), stream, ..HttpOptions::default() };
    HttpProvider::with_env(api, model, options, &|_| None).expect("provider")
}

/// Serves `bodies` in order at `route` (one each), with `mime`.
async fn serve(route: &str, bodies: Vec<(Vec<u8>, &str)>) -> MockServer {
    let server = MockServer::start().await;
    for (body, mime) in bodies {
        Mock::given(method("POST"))
            .and(path(route))
            .respond_with(ResponseTemplate::new(200).set_body_raw(body, mime))
            .up_to_n_times(1)
            .expect(1)
            .mount(&server)
            .await;
    }
    server
}

async fn sent_bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .expect("recording enabled")
        .iter()
        .map(|r| r.body_json::<Value>().expect("request body is JSON"))
        .collect()
}

fn user(text: &str) -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system: None,
        messages: vec![Message::User { content: text.into() }],
        tools: vec![],
    }
}

/// Appends the response's turn and one result per call, as the agent does.
fn answer(req: &mut ModelRequest, response: &ModelResponse, results: &[(&str, bool)]) {
    if let Some(native) = response.native.clone() {
        req.messages.push(Message::Native { native });
    }
    req.messages.push(Message::Assistant { content: response.text.clone(), tool_calls: response.tool_calls.clone() });
    assert_eq!(results.len(), response.tool_calls.len(), "one result per call");
    req.messages.push(Message::ToolResults {
        results: response
            .tool_calls
            .iter()
            .zip(results)
            .map(|(c, (content, is_error))| ToolResult {
                tool_call_id: c.id.clone(),
                name: c.name.clone(),
                content: (*content).into(),
                is_error: *is_error,
            })
            .collect(),
    });
}

fn collector() -> (Arc<Mutex<Vec<Delta>>>, impl Fn(Delta) + Send + Sync) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    (seen, move |d| sink.lock().expect("lock").push(d))
}

fn joined_text(deltas: &[Delta]) -> String {
    deltas.iter().filter_map(|d| if let Delta::Text(t) = d { Some(t.as_str()) } else { None }).collect()
}

fn anthropic_tools(recorded: &Value) -> Vec<ToolSpec> {
    recorded["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter(|t| t.get("input_schema").is_some())
        .map(|t| ToolSpec {
            name: t["name"].as_str().expect("name").into(),
            description: t["description"].as_str().unwrap_or_default().into(),
            parameters: t["input_schema"].clone(),
        })
        .collect()
}

fn openai_tools(recorded: &Value) -> Vec<ToolSpec> {
    recorded["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| ToolSpec {
            name: t["function"]["name"].as_str().expect("name").into(),
            description: t["function"]["description"].as_str().unwrap_or_default().into(),
            parameters: t["function"]["parameters"].clone(),
        })
        .collect()
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), arguments: arguments.into() }
}

// --- Anthropic ------------------------------------------------------------

#[tokio::test]
async fn anthropic_01_sse_empty_input_and_headers() {
    let server =
        serve("/v1/messages", vec![(sse("01_anthropic_sse_tool_use_no_args.response.sse"), "text/event-stream")]).await;
    let p = provider(Api::Anthropic, &server.uri(), true);
    let (seen, on_delta) = collector();
    let r = p.complete_streaming(&user("Update the issue list"), &on_delta).await.expect("response");
    assert_eq!(r.tool_calls, vec![call("toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList", "{}")]);
    assert_eq!((r.finish_reason, r.raw_finish_reason.as_str()), (FinishReason::ToolCall, "tool_use"));
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (565, 48));
    assert_eq!(joined_text(&seen.lock().expect("lock")), "I'll update the issue list for you.");

    let requests = server.received_requests().await.expect("recorded");
    let h = &requests[0].headers;
    assert_eq!(h.get("x-api-key").expect("key").to_str().expect("ascii"), KEY);
    assert_eq!(h.get("anthropic-version").expect("version").to_str().expect("ascii"), "2023-06-01");
    assert_eq!(h.get("content-type").expect("type").to_str().expect("ascii"), "application/json");
    let body: Value = requests[0].body_json().expect("json");
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["model"], json!("claude-sonnet-4-5"));
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Update the issue list"}]}])
    );

    // The next request carries the empty input as {}.
    let mut next = user("Update the issue list");
    answer(&mut next, &r, &[("done", false)]);
    let body = hookbox_providers::anthropic::encode_request(&next).expect("encode");
    assert_eq!(body["messages"][1]["content"][1]["input"], json!({}));
}

#[tokio::test]
async fn anthropic_02_parallel_calls_round_trip_matches_the_recording() {
    let fixture = rec("02_anthropic_parallel_4_tool_use.json");
    let server = serve(
        "/v1/messages",
        vec![(json_body(&fixture, 0), "application/json"), (json_body(&fixture, 1), "application/json")],
    )
    .await;
    let p = provider_for_model(Api::Anthropic, &server.uri(), false, "claude-haiku-4-5");
    let recorded_1 = &fixture["interactions"][0]["request"]["body"];
    let mut req = ModelRequest {
        model: "claude-haiku-4-5".into(),
        system: Some(recorded_1["system"].as_str().expect("system").into()),
        messages: vec![Message::User {
            content: recorded_1["messages"][0]["content"][0]["text"].as_str().expect("text").into(),
        }],
        tools: anthropic_tools(recorded_1),
    };
    let first = p.complete(&req).await.expect("first");
    let names: Vec<String> = first.tool_calls.iter().map(|c| c.arguments.clone()).collect();
    assert_eq!(names, ["{\"name\":\"Alice\"}", "{\"name\":\"Bob\"}", "{\"name\":\"Charlie\"}", "{\"name\":\"Daisy\"}"]);
    assert_eq!(first.tool_calls[0].id, "toolu_0167cfEnoQaPviGdVXA95zcu");
    answer(
        &mut req,
        &first,
        &[
            ("alice is bob's wife", false),
            ("bob is alice's husband", false),
            ("charlie is alice's son", false),
            ("daisy is bob's daughter and charlie's younger sister", false),
        ],
    );
    let second = p.complete(&req).await.expect("second");
    assert_eq!(second.finish_reason, FinishReason::Stop);

    let sent = sent_bodies(&server).await;
    // Both requests are the recorded ones, field for field.
    assert_eq!(sent[0], *recorded_1);
    assert_eq!(sent[1], fixture["interactions"][1]["request"]["body"]);
    // Usage summed over the two requests.
    let mut total = Usage::default();
    total.add(&first.usage);
    total.add(&second.usage);
    assert_eq!((total.input_tokens, total.output_tokens), (423 + 771, 202 + 77));
    assert!((total.cost - ((423.0 + 771.0) * 1.0 + (202.0 + 77.0) * 5.0) / 1e6).abs() < 1e-12);
}

#[tokio::test]
async fn anthropic_03_error_result_and_retry_with_unknown_fields() {
    let fixture = rec("03_anthropic_tool_result_is_error_retry.json");
    let server = serve(
        "/v1/messages",
        vec![(json_body(&fixture, 0), "application/json"), (json_body(&fixture, 1), "application/json")],
    )
    .await;
    let p = provider_for_model(Api::Anthropic, &server.uri(), false, "claude-sonnet-4-5");
    let recorded = &fixture["interactions"][0]["request"]["body"];
    // The conversation up to the failed call, from neutral types.
    let mut req = ModelRequest {
        model: "claude-sonnet-4-5".into(),
        system: None,
        messages: vec![
            Message::User { content: "What is the current stock price for AAPL?".into() },
            Message::Assistant {
                content: "Great! I found a tool to look up stock prices. Let me get the current stock price for AAPL."
                    .into(),
                tool_calls: vec![call("toolu_014b9i18P8JdeixyRCGWwgBa", "stock_lookup", "{\"ticker\":\"AAPL\"}")],
            },
            Message::ToolResults {
                results: vec![ToolResult {
                    tool_call_id: "toolu_014b9i18P8JdeixyRCGWwgBa".into(),
                    name: "stock_lookup".into(),
                    content: recorded["messages"][4]["content"][0]["content"].as_str().expect("text").into(),
                    is_error: true,
                }],
            },
        ],
        tools: anthropic_tools(recorded),
    };
    let first = p.complete(&req).await.expect("first");
    assert_eq!(first.tool_calls, vec![call("toolu_01GgM32pcJgjKXqUgpjs9XFT", "stock_lookup", "{\"symbol\":\"AAPL\"}")]);
    assert_eq!((first.usage.input_tokens, first.usage.output_tokens), (1122, 74));
    answer(&mut req, &first, &[("Stock AAPL: $150.00", false)]);
    let second = p.complete(&req).await.expect("second");
    assert_eq!(second.text, "The current stock price for AAPL (Apple Inc.) is **$150.00**.");

    let sent = sent_bodies(&server).await;
    // The error result is sent as the recording has it: is_error true, its call's id.
    assert_eq!(sent[0]["messages"][2], recorded["messages"][4]);
    // The second request: the retried call's result, one per call id, first in its message.
    let last = sent[1]["messages"].as_array().expect("messages").last().expect("last").clone();
    assert_eq!(last["role"], json!("user"));
    assert_eq!(last["content"][0]["type"], json!("tool_result"));
    assert_eq!(last["content"][0]["tool_use_id"], json!("toolu_01GgM32pcJgjKXqUgpjs9XFT"));
    assert_eq!(last["content"].as_array().expect("blocks").len(), 1);
    let recorded_2 = &fixture["interactions"][1]["request"]["body"]["messages"];
    assert_eq!(sent[1]["messages"].as_array().expect("m")[3], recorded_2[5]);
}

#[tokio::test]
async fn anthropic_04_max_tokens_truncated_call() {
    let fixture = rec("04_anthropic_max_tokens_truncated_tool_use.json");
    let server = serve("/v1/messages", vec![(json_body(&fixture, 0), "application/json")]).await;
    let p = provider(Api::Anthropic, &server.uri(), false);
    let r = p.complete(&user("What's the weather in San Francisco and what's 15 * 23?")).await.expect("response");
    assert_eq!((r.finish_reason, r.raw_finish_reason.as_str()), (FinishReason::Length, "max_tokens"));
    assert_eq!(
        r.tool_calls,
        vec![
            call(
                "toolu_bdrk_01FqpV1qX3bJ4bczkdtMhdGz",
                "get_weather",
                "{\"location\":\"San Francisco, CA\",\"unit\":\"fahrenheit\"}"
            ),
            call("toolu_bdrk_01KMAmxrwkK8jh8h6YNQ495y", "calculate", "{}"),
        ]
    );
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (435, 100));
    let tools = anthropic_tools(&fixture["interactions"][0]["request"]["body"]);
    assert_eq!(tools.len(), 3);
}

#[tokio::test]
async fn anthropic_05_server_tool_is_resent_not_dispatched() {
    let fixture = rec("05_anthropic_sse_server_and_client_tool_json_delta.json");
    let server = serve(
        "/v1/messages",
        vec![
            (
                sse("05_anthropic_sse_server_and_client_tool_json_delta.0.response.sse"),
                "text/event-stream; charset=utf-8",
            ),
            (
                sse("05_anthropic_sse_server_and_client_tool_json_delta.1.response.sse"),
                "text/event-stream; charset=utf-8",
            ),
        ],
    )
    .await;
    let p = provider_for_model(Api::Anthropic, &server.uri(), true, "claude-sonnet-4-6");
    let recorded_1 = &fixture["interactions"][0]["request"]["body"];
    let mut req = ModelRequest {
        model: "claude-sonnet-4-6".into(),
        system: None,
        messages: vec![Message::User { content: "What is the current USD to EUR exchange rate?".into() }],
        tools: anthropic_tools(recorded_1),
    };
    let first = p.complete(&req).await.expect("first");
    assert_eq!(
        first.tool_calls,
        vec![call(
            "toolu_01EFn5wTNBYA8Reni8rbmnHT",
            "get_exchange_rate",
            "{\"from_currency\":\"USD\",\"to_currency\":\"EUR\"}"
        )]
    );
    assert!(first.native.is_some());
    answer(&mut req, &first, &[("1 USD = 0.92 EUR", false)]);
    let (seen, on_delta) = collector();
    let second = p.complete_streaming(&req, &on_delta).await.expect("second");
    assert_eq!(joined_text(&seen.lock().expect("lock")), second.text);
    assert_eq!((second.usage.input_tokens, second.usage.output_tokens), (1007, 59));

    let sent = sent_bodies(&server).await;
    let recorded_2 = &fixture["interactions"][1]["request"]["body"];
    // The assistant turn goes back with the server_tool_use and its result block, in order.
    assert_eq!(sent[1]["messages"][1], recorded_2["messages"][1]);
    assert_eq!(sent[1]["messages"][0], recorded_2["messages"][0]);
    let result = &sent[1]["messages"][2]["content"];
    assert_eq!(result.as_array().expect("blocks").len(), 1);
    assert_eq!(result[0]["tool_use_id"], recorded_2["messages"][2]["content"][0]["tool_use_id"]);
    assert_eq!(result[0]["content"], json!("1 USD = 0.92 EUR"));
    for body in &sent {
        assert_eq!(body["stream"], json!(true));
    }
}

#[tokio::test]
async fn anthropic_06_escaped_quotes_split() {
    let server =
        serve("/v1/messages", vec![(sse("06_anthropic_sse_escaped_quotes_split.response.sse"), "text/event-stream")])
            .await;
    let r = provider(Api::Anthropic, &server.uri(), true).complete(&user("update")).await.expect("response");
    assert_eq!(r.tool_calls.len(), 1);
    let args: Value = serde_json::from_str(&r.tool_calls[0].arguments).expect("arguments are JSON");
    assert!(
        args["tasks"][0]["description"].as_str().expect("d").contains(": \"What should I do next after this run?\".")
    );
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (912, 118));
}

// --- OpenAI Chat Completions ----------------------------------------------

#[tokio::test]
async fn openai_07_sse_parallel_calls_and_request_shape() {
    let fixture = rec("07_openai_chat_sse_parallel_tool_calls.json");
    let server = serve(
        "/v1/chat/completions",
        vec![(sse("07_openai_chat_sse_parallel_tool_calls.1.response.sse"), "text/event-stream; charset=utf-8")],
    )
    .await;
    let p = provider(Api::OpenAi, &server.uri(), true);
    let recorded = &fixture["interactions"][0]["request"]["body"];
    let mut req = user("Tell me: the capital of the country; the weather there; the product name");
    req.model = "gpt-4o".into();
    req.tools = openai_tools(recorded);
    req.messages.push(Message::Assistant {
        content: String::new(),
        tool_calls: vec![call("call_rI3WKPYvVwlOgCGRjsPP2hEx", "get_country", "{}")],
    });
    req.messages.push(Message::ToolResults {
        results: vec![ToolResult {
            tool_call_id: "call_rI3WKPYvVwlOgCGRjsPP2hEx".into(),
            name: "get_country".into(),
            content: "Mexico".into(),
            is_error: false,
        }],
    });
    let r = p.complete(&req).await.expect("response");
    assert_eq!(
        r.tool_calls,
        vec![
            call("call_NS4iQj14cDFwc0BnrKqDHavt", "get_weather", "{\"city\": \"Mexico City\"}"),
            call("call_SkGkkGDvHQEEk0CGbnAh2AQw", "get_product_name", "{}"),
        ]
    );
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (417, 44));
    let sent = &sent_bodies(&server).await[0];
    assert_eq!(sent["messages"], recorded["messages"]);
    assert_eq!(sent["stream"], json!(true));
    assert_eq!(sent["stream_options"], recorded["stream_options"]);
    assert_eq!(sent["tools"].as_array().expect("tools").len(), 21);
    let requests = server.received_requests().await.expect("recorded");
    assert_eq!(
        requests[0].headers.get("authorization").expect("auth").to_str().expect("ascii"),
        format!("Bearer {KEY}")
    );
}

#[tokio::test]
async fn openai_08_round_trip_matches_the_recording() {
    let fixture = rec("08_openai_chat_parallel_tool_calls_nonstream.json");
    let server = serve(
        "/v1/chat/completions",
        vec![(json_body(&fixture, 0), "application/json"), (json_body(&fixture, 1), "application/json")],
    )
    .await;
    let p = provider(Api::OpenAi, &server.uri(), false);
    let recorded_1 = &fixture["interactions"][0]["request"]["body"];
    let mut req = ModelRequest {
        model: "gpt-4o".into(),
        system: Some("Just call tools without asking for confirmation.".into()),
        messages: vec![Message::User { content: "Delete the file `.env` and create `test.txt`".into() }],
        tools: openai_tools(recorded_1),
    };
    let first = p.complete(&req).await.expect("first");
    assert_eq!(
        first.tool_calls,
        vec![
            call("call_jYdIdRZHxZTn5bWCq5jlMrJi", "delete_file", "{\"path\": \".env\"}"),
            call("call_TmlTVWQbzrXCZ4jNsCVNbNqu", "create_file", "{\"path\": \"test.txt\"}"),
        ]
    );
    answer(&mut req, &first, &[("true", false), ("Success", false)]);
    let second = p.complete(&req).await.expect("second");
    assert_eq!(second.finish_reason, FinishReason::Stop);
    let sent = sent_bodies(&server).await;
    assert_eq!(sent[0]["messages"], recorded_1["messages"]);
    assert_eq!(sent[1]["messages"], fixture["interactions"][1]["request"]["body"]["messages"]);
    assert_eq!(sent[1]["stream"], json!(false));
    assert_eq!(first.usage.input_tokens + second.usage.input_tokens, 71 + 133);
}

#[tokio::test]
async fn openai_09_missing_arguments_mean_empty_object() {
    let fixture = rec("09_openai_compat_tool_call_without_arguments.json");
    let server = serve("/api/v1/chat/completions", vec![(json_body(&fixture, 0), "application/json")]).await;
    let options = HttpOptions {
        base_url: Some(format!("{}/api/v1", server.uri())),
        api_key: Some(KEY.into()),
        stream: false,
        ..HttpOptions::default()
    };
    let p = HttpProvider::with_env(Api::OpenAi, "anthropic/claude-sonnet-4.5", options, &|_| None).expect("provider");
    let mut req = user("Can you find me any education content?");
    let r = p.complete(&req).await.expect("response");
    assert_eq!(r.tool_calls, vec![call("toolu_vrtx_015QAXScZzRDPttiPoc34AdD", "find_education_content", "{}")]);
    assert_eq!(r.text, "I'll search for education content for you.");
    answer(&mut req, &r, &[("[]", false)]);
    let body = hookbox_providers::openai_chat::encode_request(&req);
    assert_eq!(body["messages"][1]["tool_calls"][0]["function"]["arguments"], json!("{}"));
}

#[tokio::test]
async fn openai_interleaved_parallel_fragments_over_http() {
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"object": "chat.completion.chunk", "model": "gpt-4o", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let frag = |index: u64, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut f = json!({"index": index, "function": {"arguments": args}});
        if let (Some(id), Some(name)) = (id, name) {
            f["id"] = json!(id);
            f["function"]["name"] = json!(name);
        }
        json!({"tool_calls": [f]})
    };
    let body = [
        chunk(frag(0, Some("call_a"), Some("read_file"), ""), Value::Null),
        chunk(frag(1, Some("call_b"), Some("list_dir"), "{\"pa"), Value::Null),
        chunk(frag(0, None, None, "{\"path\":\"a"), Value::Null),
        chunk(frag(1, None, None, "th\":\".\"}"), Value::Null),
        chunk(frag(0, None, None, ".txt\"}"), Value::Null),
        chunk(json!({}), json!("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let server = serve("/v1/chat/completions", vec![(body.into_bytes(), "text/event-stream")]).await;
    let r = provider(Api::OpenAi, &server.uri(), true).complete(&user("go")).await.expect("response");
    assert_eq!(
        r.tool_calls,
        vec![call("call_a", "read_file", "{\"path\":\"a.txt\"}"), call("call_b", "list_dir", "{\"path\":\".\"}")]
    );
    // No usage chunk was sent: zero usage, not an error.
    assert_eq!(r.usage, Usage::default());
}

// --- OpenAI Responses -----------------------------------------------------

#[tokio::test]
async fn responses_10_function_call_round_trip() {
    let fixture = rec("10_openai_responses_sse_function_call.json");
    let server = serve(
        "/v1/responses",
        vec![
            (sse("10_openai_responses_sse_function_call.0.response.sse"), "text/event-stream; charset=utf-8"),
            (sse("10_openai_responses_sse_function_call.1.response.sse"), "text/event-stream; charset=utf-8"),
        ],
    )
    .await;
    let p = provider(Api::OpenAiResponses, &server.uri(), true);
    let recorded_1 = &fixture["interactions"][0]["request"]["body"];
    let mut req = user("What is the capital of France?");
    req.model = "gpt-4o".into();
    req.tools = vec![ToolSpec {
        name: "get_capital".into(),
        description: String::new(),
        parameters: recorded_1["tools"][0]["parameters"].clone(),
    }];
    let first = p.complete(&req).await.expect("first");
    assert_eq!(
        first.tool_calls,
        vec![call("call_kL0PCQV7M2WMoVX8V8OtYSAL", "get_capital", "{\"country\":\"France\"}")]
    );
    assert_eq!((first.usage.input_tokens, first.usage.output_tokens), (255, 16));
    answer(&mut req, &first, &[("Paris", false)]);
    let (seen, on_delta) = collector();
    let second = p.complete_streaming(&req, &on_delta).await.expect("second");
    assert_eq!(second.text, "The capital of France is Paris.");
    assert_eq!(joined_text(&seen.lock().expect("lock")), second.text);

    let sent = sent_bodies(&server).await;
    assert_eq!(sent[0]["input"], recorded_1["input"]);
    assert_eq!(sent[0]["stream"], json!(true));
    assert_eq!(sent[0]["tool_choice"], recorded_1["tool_choice"]);
    // The second request: function_call then function_call_output, sharing one
    // call_id. We send the model's `call_id`; the recording (pydantic-ai) sent
    // the item id `fc_...` there, so the ids are compared apart from the rest.
    let recorded_2 = &fixture["interactions"][1]["request"]["body"]["input"];
    let input = sent[1]["input"].as_array().expect("input").clone();
    assert_eq!(input.len(), 3);
    assert_eq!(input[0], recorded_2[0]);
    let strip = |v: &Value| {
        let mut v = v.clone();
        v.as_object_mut().expect("item").remove("call_id");
        v
    };
    assert_eq!(strip(&input[1]), strip(&recorded_2[1]));
    assert_eq!(strip(&input[2]), strip(&recorded_2[2]));
    assert_eq!(input[1]["call_id"], json!("call_kL0PCQV7M2WMoVX8V8OtYSAL"));
    assert_eq!(input[2]["call_id"], input[1]["call_id"]);
}

// --- Gemini ---------------------------------------------------------------

#[tokio::test]
async fn gemini_streamed_and_plain_calls() {
    let chunks = [
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Checking "}]}, "index": 0}], "usageMetadata": {"promptTokenCount": 50}, "modelVersion": "gemini-2.5-flash", "responseId": "r1"}),
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "é."}, {"functionCall": {"name": "list_dir", "args": {"path": "."}}, "thoughtSignature": "c2ln"}]}, "finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 9}, "modelVersion": "gemini-2.5-flash", "responseId": "r1"}),
    ];
    let body: String = chunks.iter().map(|c| format!("data: {c}\r\n\r\n")).collect();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1beta/models/gemini-2.5-flash:streamGenerateContent"))
        .and(query_param("alt", "sse"))
        .and(header("x-goog-api-key", KEY))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body.into_bytes(), "text/event-stream"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1beta/models/gemini-2.5-flash:generateContent"))
        .and(header("x-goog-api-key", KEY))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            serde_json::to_vec(&json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Done."}]}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 70, "candidatesTokenCount": 2}, "modelVersion": "gemini-2.5-flash"})).expect("json"),
            "application/json",
        ))
        .expect(1)
        .mount(&server)
        .await;
    let streamed = provider(Api::Gemini, &server.uri(), true);
    let mut req = user("list");
    req.tools =
        vec![ToolSpec { name: "list_dir".into(), description: "List.".into(), parameters: json!({"type": "object"}) }];
    let first = streamed.complete(&req).await.expect("first");
    assert_eq!(first.text, "Checking é.");
    assert_eq!(first.tool_calls, vec![call("gemini-call-r1-0", "list_dir", "{\"path\":\".\"}")]);
    assert_eq!(
        (first.finish_reason, first.usage.input_tokens, first.usage.output_tokens),
        (FinishReason::ToolCall, 50, 9)
    );
    answer(&mut req, &first, &[("a.txt", false)]);
    let plain = provider(Api::Gemini, &server.uri(), false);
    let second = plain.complete(&req).await.expect("second");
    assert_eq!((second.text.as_str(), second.finish_reason), ("Done.", FinishReason::Stop));

    let sent = sent_bodies(&server).await;
    assert_eq!(
        sent[1]["contents"],
        json!([
            {"role": "user", "parts": [{"text": "list"}]},
            {"role": "model", "parts": [{"text": "Checking é."}, {"functionCall": {"name": "list_dir", "args": {"path": "."}}, "thoughtSignature": "c2ln"}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "list_dir", "response": {"output": "a.txt"}}}]},
        ])
    );
    assert_eq!(sent[0]["tools"][0]["functionDeclarations"][0]["name"], json!("list_dir"));
}

// --- Failures and retries -------------------------------------------------

#[tokio::test]
async fn stream_cut_before_its_last_event_is_truncated_with_partial_usage() {
    let full = String::from_utf8(sse("01_anthropic_sse_tool_use_no_args.response.sse")).expect("utf-8");
    let cut = full.trim_end().rsplit_once("\n\n").expect("events").0.to_owned() + "\n\n";
    assert!(!cut.contains("message_stop"));
    let server = serve("/v1/messages", vec![(cut.into_bytes(), "text/event-stream")]).await;
    match provider(Api::Anthropic, &server.uri(), true).complete(&user("x")).await {
        Err(ProviderError::Truncated { partial_usage, what, .. }) => {
            assert_eq!((partial_usage.input_tokens, partial_usage.output_tokens), (565, 48));
            assert!(what.contains("message_stop"), "{what}");
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
}

/// A one-shot raw HTTP/1.1 server on loopback: reads the request head and
/// body, answers with `head`, then writes `chunks` one by one (flushed, with a
/// pause between them), then closes the connection.
async fn raw_server(head: String, chunks: Vec<Vec<u8>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else { return };
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        // Read until the head and the Content-Length body are in.
        loop {
            let Ok(n) = socket.read(&mut buf).await else { return };
            if n == 0 {
                return;
            }
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text[..end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                    })
                    .unwrap_or(0);
                if request.len() >= end + 4 + length {
                    break;
                }
            }
        }
        if socket.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for chunk in chunks {
            if socket.write_all(&chunk).await.is_err() || socket.flush().await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = socket.shutdown().await;
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn multibyte_character_split_across_http_chunks_inside_arguments() {
    let events = [
        json!({"type": "message_start", "message": {"model": "claude-sonnet-4-5", "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_x", "name": "create_file", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"日本"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "語.txt\", \"content\": \"🎉\"}"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20}}),
        json!({"type": "message_stop"}),
    ];
    let body: Vec<u8> = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().expect("type")))
        .collect::<String>()
        .into_bytes();
    // Cut inside "日" (3 bytes), inside "🎉" (4 bytes), inside `data:`, and
    // between the two newlines that end an event.
    let at =
        |needle: &[u8], offset: usize| body.windows(needle.len()).position(|w| w == needle).expect("needle") + offset;
    let mut cuts = vec![
        at("日".as_bytes(), 1),
        at("🎉".as_bytes(), 2),
        at(b"event: content_block_stop\ndata:", "event: content_block_stop\nda".len()),
        at(b"\"message_stop\"}\n\n", 16),
    ];
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for cut in cuts {
        chunks.push(body[start..cut].to_vec());
        start = cut;
    }
    chunks.push(body[start..].to_vec());
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n".to_owned();
    let url = raw_server(head, chunks).await;
    let r = provider(Api::Anthropic, &url, true).complete(&user("x")).await.expect("response");
    let args: Value = serde_json::from_str(&r.tool_calls[0].arguments).expect("json");
    assert_eq!(args, json!({"path": "日本語.txt", "content": "🎉"}));
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (10, 20));
}

#[tokio::test]
async fn connection_dropped_mid_stream_is_truncated() {
    let body = sse("07_openai_chat_sse_parallel_tool_calls.1.response.sse");
    let half = body[..body.len() / 2].to_vec();
    // The head promises the whole body; the server closes after half of it.
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let url = raw_server(head, vec![half]).await;
    match provider(Api::OpenAi, &url, true).complete(&user("x")).await {
        Err(ProviderError::Truncated { what, partial_usage, .. }) => {
            assert!(what.contains("reading the stream failed"), "{what}");
            assert_eq!(partial_usage, Usage::default());
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
}

#[tokio::test]
async fn rate_limited_then_success_through_the_retry_policy() {
    let fixture = rec("08_openai_chat_parallel_tool_calls_nonstream.json");
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(429).insert_header("retry-after", "1").set_body_raw(
                r#"{"error": {"message": "Rate limit reached", "type": "requests"}}"#,
                "application/json",
            ),
        )
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(529).set_body_raw(r#"{"type": "error"}"#, "application/json"))
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(json_body(&fixture, 0), "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    let p = provider(Api::OpenAi, &server.uri(), false);
    let policy = RetryPolicy { base_delay: Duration::from_millis(20), ..RetryPolicy::default() };
    let mut rng = StdRng::seed_from_u64(7);
    let mut waits = Vec::new();
    let mut attempt = 1;
    let started = std::time::Instant::now();
    let response = loop {
        match p.complete(&user("go")).await {
            Ok(r) => break r,
            Err(e) => {
                if attempt == 1 {
                    match &e {
                        ProviderError::Http { status, retry_after, body, provider } => {
                            assert_eq!(
                                (*status, *retry_after, *provider),
                                (429, Some(Duration::from_secs(1)), "openai")
                            );
                            assert!(body.contains("Rate limit reached"), "{body}");
                        }
                        other => panic!("expected HTTP 429, got {other:?}"),
                    }
                }
                let wait = policy.retry_delay(&e, attempt, &mut rng).expect("retryable");
                waits.push(wait);
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
        }
    };
    assert_eq!(response.tool_calls.len(), 2);
    assert_eq!(attempt, 3);
    assert_eq!(waits[0], Duration::from_secs(1), "retry-after honoured");
    assert!(waits[1] <= Duration::from_millis(40), "second wait is jittered backoff: {:?}", waits[1]);
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[tokio::test]
async fn client_errors_are_not_retried_and_json_answers_to_streams_decode() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(400).set_body_raw(
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}"#,
            "application/json",
        ))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let fixture = rec("02_anthropic_parallel_4_tool_use.json");
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(json_body(&fixture, 1), "application/json"))
        .mount(&server)
        .await;
    let p = provider(Api::Anthropic, &server.uri(), true);
    let err = p.complete(&user("x")).await.expect_err("400");
    assert!(matches!(err, ProviderError::Http { status: 400, retry_after: None, .. }), "{err:?}");
    assert!(err.to_string().contains("max_tokens: too large"), "{err}");
    assert_eq!(RetryPolicy::default().retry_delay(&err, 1, &mut StdRng::seed_from_u64(1)), None);
    // A server that answers a streamed request with plain JSON is decoded as JSON.
    let r = p.complete(&user("x")).await.expect("json answer");
    assert_eq!(r.finish_reason, FinishReason::Stop);
}

#[tokio::test]
async fn unreachable_server_is_a_retryable_transport_error() {
    // Bind then drop a listener: nothing listens on that port any more.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let err = provider(Api::OpenAi, &format!("http://{addr}"), true).complete(&user("x")).await.expect_err("refused");
    assert!(matches!(err, ProviderError::Transport(_)), "{err:?}");
    assert!(RetryPolicy::default().retry_delay(&err, 1, &mut StdRng::seed_from_u64(1)).is_some());
}

#[test]
fn model_from_spec_accepts_the_live_schemes() {
    let spec_error = |spec: &str| match hookbox_providers::model_from_spec(spec, None) {
        Ok(_) => panic!("{spec} should fail"),
        Err(e) => format!("{e:#}"),
    };
    let msg = spec_error("gemini:");
    assert!(msg.contains("unknown model spec `gemini:`"), "{msg}");
    assert!(msg.contains("openai-responses:MODEL"), "{msg}");
    for (spec, var) in [
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("openai:gpt-4o", "OPENAI_API_KEY"),
        ("openai-responses:gpt-4.1", "OPENAI_API_KEY"),
        ("gemini:gemini-2.5-flash", "GEMINI_API_KEY"),
    ] {
        match hookbox_providers::model_from_spec(spec, Some("http://127.0.0.1:9")) {
            Ok(p) => {
                // The key is set in this environment: the provider is built.
                assert!(std::env::var(var).is_ok_and(|v| !v.trim().is_empty()), "{spec}");
                assert_eq!(p.name(), spec.split_once(':').expect("scheme").0);
                assert_eq!(p.model(), spec.split_once(':').expect("model").1);
            }
            Err(e) => {
                let msg = format!("{e:#}");
                assert!(msg.contains(&format!("{var} is not set")), "{msg}");
                assert!(msg.contains(spec), "{msg}");
            }
        }
    }
}

// --- Stalled streams ------------------------------------------------------

/// Reads one HTTP/1.1 request (head and Content-Length body) from `socket`.
async fn read_request(socket: &mut tokio::net::TcpStream) -> bool {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let Ok(n) = socket.read(&mut buf).await else { return false };
        if n == 0 {
            return false;
        }
        request.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&request).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                return true;
            }
        }
    }
}

/// A loopback SSE server: the first `stalls` connections get the head and
/// `first`, then nothing (the socket stays open); later ones get `first`
/// and `rest` and are closed. Returns the URL and the connection counter.
async fn stalling_server(first: Vec<u8>, rest: Vec<u8>, stalls: usize) -> (String, Arc<Mutex<usize>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let count = Arc::new(Mutex::new(0usize));
    let counter = count.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let n = {
                let mut c = counter.lock().expect("lock");
                *c += 1;
                *c
            };
            let (first, rest) = (first.clone(), rest.clone());
            tokio::spawn(async move {
                if !read_request(&mut socket).await {
                    return;
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() || socket.write_all(&first).await.is_err() {
                    return;
                }
                let _ = socket.flush().await;
                if n <= stalls {
                    // Stall: keep the connection open, send nothing more.
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    return;
                }
                let _ = socket.write_all(&rest).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (format!("http://{addr}"), count)
}

/// A Chat Completions stream answering "Hello", cut after its first chunk.
fn hello_stream() -> (Vec<u8>, Vec<u8>) {
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"object": "chat.completion.chunk", "model": "gpt-4o", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let first = chunk(json!({"role": "assistant", "content": "Hel"}), Value::Null);
    let rest = chunk(json!({"content": "lo"}), json!("stop"))
        + &format!(
            "data: {}\n\ndata: [DONE]\n\n",
            json!({"object": "chat.completion.chunk", "model": "gpt-4o", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
        );
    (first.into_bytes(), rest.into_bytes())
}

fn with_read_timeout(url: &str, read_timeout: Duration) -> HttpProvider {
    let options = HttpOptions {
        base_url: Some(format!("{url}/v1")),
        api_key: Some(KEY.into()),
        read_timeout,
        ..HttpOptions::default()
    };
    HttpProvider::with_env(Api::OpenAi, "gpt-4o", options, &|_| None).expect("provider")
}

#[tokio::test]
async fn a_stream_that_stalls_after_its_first_bytes_fails_at_the_read_timeout_and_is_retryable() {
    let (first, rest) = hello_stream();
    let (url, connections) = stalling_server(first, rest, 1).await;
    let p = with_read_timeout(&url, Duration::from_millis(300));
    let started = std::time::Instant::now();
    let err = p.complete(&user("x")).await.expect_err("stalls");
    assert!(started.elapsed() < Duration::from_secs(10), "fails at the configured timeout, not at 300 s");
    match &err {
        ProviderError::Stalled { idle_ms, delivered, .. } => assert_eq!((*idle_ms, *delivered), (300, false)),
        other => panic!("expected Stalled, got {other:?}"),
    }
    assert!(err.to_string().contains("stalled"), "{err}");
    // Nothing was handed out: the policy retries it, and the next attempt succeeds.
    assert!(RetryPolicy::default().retry_delay(&err, 1, &mut StdRng::seed_from_u64(1)).is_some());
    let r = p.complete(&user("x")).await.expect("second connection answers");
    assert_eq!(r.text, "Hello");
    assert_eq!(*connections.lock().expect("lock"), 2);
}

#[tokio::test]
async fn a_stall_after_text_was_streamed_to_the_caller_is_not_retried() {
    let (first, rest) = hello_stream();
    let (url, _) = stalling_server(first, rest, 1).await;
    let p = with_read_timeout(&url, Duration::from_millis(300));
    let (deltas, on_delta) = collector();
    let err = p.complete_streaming(&user("x"), &on_delta).await.expect_err("stalls");
    assert_eq!(*deltas.lock().expect("lock"), vec![Delta::Text("Hel".into())]);
    assert!(matches!(err, ProviderError::Stalled { delivered: true, .. }), "{err:?}");
    assert!(RetryPolicy::default().retry_delay(&err, 1, &mut StdRng::seed_from_u64(1)).is_none());
}
