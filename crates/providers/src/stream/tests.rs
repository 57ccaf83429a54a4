//! Stream assembler tests: every recorded stream, re-chunked at every byte
//! boundary and at random multi-chunk splits, gives the same response;
//! streams cut anywhere before their final event are `Truncated`.

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::{Value, json};

use super::*;
use crate::WireFormat;
use crate::model::{FinishReason, Message, ModelRequest, ToolCall, ToolResult};
use crate::sse::SseDecoder;
use crate::sse::tests::random_cuts;
use crate::wire::tests::{recording, recording_path};
use crate::{anthropic, gemini, openai_responses};

/// Streams `bytes` cut at `cuts` through a fresh assembler of `format`;
/// returns the result and every delta.
fn run(format: WireFormat, bytes: &[u8], cuts: &[usize]) -> (Result<ModelResponse, ProviderError>, Vec<Delta>) {
    let mut decoder = SseDecoder::new();
    let mut assembler = format.stream_assembler();
    let mut deltas = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        for event in decoder.feed(&bytes[start..cut]).unwrap() {
            match assembler.push(&event) {
                Ok(d) => deltas.extend(d),
                Err(e) => return (Err(e), deltas),
            }
        }
        start = cut;
    }
    (assembler.finish(), deltas)
}

fn whole(format: WireFormat, bytes: &[u8]) -> ModelResponse {
    run(format, bytes, &[]).0.unwrap()
}

fn text_of(deltas: &[Delta]) -> (String, String) {
    let mut text = String::new();
    let mut thinking = String::new();
    for d in deltas {
        match d {
            Delta::Text(t) => text.push_str(t),
            Delta::Thinking(t) => thinking.push_str(t),
        }
    }
    (text, thinking)
}

/// Every recorded stream with its format.
fn recorded() -> Vec<(&'static str, WireFormat)> {
    vec![
        ("01_anthropic_sse_tool_use_no_args.response.sse", WireFormat::AnthropicMessages),
        ("05_anthropic_sse_server_and_client_tool_json_delta.0.response.sse", WireFormat::AnthropicMessages),
        ("05_anthropic_sse_server_and_client_tool_json_delta.1.response.sse", WireFormat::AnthropicMessages),
        ("06_anthropic_sse_escaped_quotes_split.response.sse", WireFormat::AnthropicMessages),
        ("07_openai_chat_sse_parallel_tool_calls.1.response.sse", WireFormat::OpenAiChat),
        ("10_openai_responses_sse_function_call.0.response.sse", WireFormat::OpenAiResponses),
        ("10_openai_responses_sse_function_call.1.response.sse", WireFormat::OpenAiResponses),
    ]
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(recording_path(name)).unwrap()
}

#[test]
fn every_recorded_stream_is_covered() {
    let mut names: Vec<String> = crate::sse::tests::recorded_streams().into_iter().map(|(n, _)| n).collect();
    names.sort();
    let mut covered: Vec<String> = recorded().into_iter().map(|(n, _)| n.to_owned()).collect();
    covered.sort();
    assert_eq!(names, covered);
}

#[test]
fn fixture_01_empty_input_json_is_an_empty_object() {
    let bytes = read("01_anthropic_sse_tool_use_no_args.response.sse");
    let (r, deltas) = run(WireFormat::AnthropicMessages, &bytes, &[]);
    let r = r.unwrap();
    assert_eq!(r.text, "I'll update the issue list for you.");
    assert_eq!(text_of(&deltas), (r.text.clone(), String::new()));
    assert_eq!(
        r.tool_calls,
        vec![ToolCall {
            id: "toolu_01QE1WLsSVp5hy5Q3GmGTmjP".into(),
            name: "updateIssueList".into(),
            arguments: "{}".into()
        }]
    );
    assert_eq!((r.finish_reason, r.raw_finish_reason.as_str()), (FinishReason::ToolCall, "tool_use"));
    // message_delta's cumulative usage overrides message_start's.
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (565, 48));
    assert!((r.usage.cost - (565.0 * 3.0 + 48.0 * 15.0) / 1e6).abs() < 1e-12);
    assert_eq!(r.model, "claude-sonnet-4-5-20250929");
    assert!(r.native.is_none());
}

#[test]
fn fixture_05_server_tool_stays_data_and_the_next_request_matches_the_recording() {
    let first = whole(
        WireFormat::AnthropicMessages,
        &read("05_anthropic_sse_server_and_client_tool_json_delta.0.response.sse"),
    );
    assert_eq!(
        first.tool_calls,
        vec![ToolCall {
            id: "toolu_01EFn5wTNBYA8Reni8rbmnHT".into(),
            name: "get_exchange_rate".into(),
            arguments: "{\"from_currency\":\"USD\",\"to_currency\":\"EUR\"}".into(),
        }],
        "the server-side tool_search call is never a tool call"
    );
    assert_eq!(
        first.text,
        "Let me search for a tool that can provide current exchange rate information.I found the right tool! Let me fetch the current USD to EUR exchange rate for you."
    );
    assert_eq!((first.usage.input_tokens, first.usage.output_tokens), (1591, 175));
    assert_eq!(first.finish_reason, FinishReason::ToolCall);
    let native = first.native.clone().expect("server tool blocks are kept");
    let kinds: Vec<&str> = native.blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["text", "server_tool_use", "tool_search_tool_result", "text", "tool_use"]);
    assert_eq!(native.blocks[1]["input"], json!({"query": "USD EUR exchange rate currency conversion"}));

    // The second request, as the agent builds it, matches the recorded one.
    let fixture = recording("05_anthropic_sse_server_and_client_tool_json_delta.json");
    let recorded = &fixture["interactions"][1]["request"]["body"];
    let request = ModelRequest {
        model: "claude-sonnet-4-6".into(),
        system: None,
        messages: vec![
            Message::User { content: "What is the current USD to EUR exchange rate?".into() },
            Message::Native { native },
            Message::Assistant { content: first.text.clone(), tool_calls: first.tool_calls.clone() },
            Message::ToolResults {
                results: vec![ToolResult {
                    tool_call_id: "toolu_01EFn5wTNBYA8Reni8rbmnHT".into(),
                    name: "get_exchange_rate".into(),
                    content: "1 USD = 0.92 EUR".into(),
                    is_error: false,
                }],
            },
        ],
        tools: vec![],
    };
    let encoded = anthropic::encode_request(&request).unwrap();
    assert_eq!(encoded["messages"].as_array().unwrap()[..2], recorded["messages"].as_array().unwrap()[..2]);
    // The recording sent the tool result as a list of text blocks; we send
    // the equivalent string form.
    let result = &encoded["messages"][2]["content"][0];
    let want = &recorded["messages"][2]["content"][0];
    assert_eq!(result["tool_use_id"], want["tool_use_id"]);
    assert_eq!(result["is_error"], want["is_error"]);
    assert_eq!(result["content"], want["content"][0]["text"]);

    let second = whole(
        WireFormat::AnthropicMessages,
        &read("05_anthropic_sse_server_and_client_tool_json_delta.1.response.sse"),
    );
    assert_eq!((second.finish_reason, second.raw_finish_reason.as_str()), (FinishReason::Stop, "end_turn"));
    assert!(second.text.starts_with("The current exchange rate is **1 USD = 0.92 EUR**."));
    assert_eq!((second.usage.input_tokens, second.usage.output_tokens), (1007, 59));
}

#[test]
fn fixture_06_escaped_quotes_split_across_pieces() {
    let r = whole(WireFormat::AnthropicMessages, &read("06_anthropic_sse_escaped_quotes_split.response.sse"));
    assert_eq!(r.tool_calls.len(), 1);
    let call = &r.tool_calls[0];
    assert_eq!((call.id.as_str(), call.name.as_str()), ("toolu_01Cr31vcGoeeRgi3Eo5Ds8qN", "website_update"));
    let args: Value = serde_json::from_str(&call.arguments).unwrap();
    assert_eq!(args["website_path"], json!("/home/user/pace-landing"));
    assert_eq!(
        args["tasks"][0]["description"],
        json!(
            "Today you post every run to Strava, but Strava does not answer the question: \"What should I do next after this run?\". It is a great log, but it is not adaptive."
        )
    );
    assert_eq!(args["tasks"][0]["passes"], json!(false));
    assert_eq!(r.text, "");
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (912, 118));
}

#[test]
fn fixture_07_parallel_calls_by_index_and_usage_only_chunk() {
    let (r, deltas) = run(WireFormat::OpenAiChat, &read("07_openai_chat_sse_parallel_tool_calls.1.response.sse"), &[]);
    let r = r.unwrap();
    assert_eq!(
        r.tool_calls,
        vec![
            ToolCall {
                id: "call_NS4iQj14cDFwc0BnrKqDHavt".into(),
                name: "get_weather".into(),
                arguments: "{\"city\": \"Mexico City\"}".into(),
            },
            ToolCall {
                id: "call_SkGkkGDvHQEEk0CGbnAh2AQw".into(),
                name: "get_product_name".into(),
                arguments: "{}".into()
            },
        ]
    );
    assert!(deltas.is_empty());
    assert_eq!((r.finish_reason, r.raw_finish_reason.as_str()), (FinishReason::ToolCall, "tool_calls"));
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens, r.usage.cache_read_tokens), (417, 44, 0));
    assert!((r.usage.cost - (417.0 * 2.5 + 44.0 * 10.0) / 1e6).abs() < 1e-12);
    assert_eq!(r.model, "gpt-4o-2024-08-06");
    assert_eq!(r.text, "");
}

#[test]
fn fixture_10_streams_equal_the_completed_response_object() {
    for name in
        ["10_openai_responses_sse_function_call.0.response.sse", "10_openai_responses_sse_function_call.1.response.sse"]
    {
        let bytes = read(name);
        let (streamed, deltas) = run(WireFormat::OpenAiResponses, &bytes, &[]);
        let streamed = streamed.unwrap();
        // The last event, response.completed, carries the whole response: the
        // non-streaming decoder must agree with the assembled one.
        let events = crate::sse::decode_all(&bytes).unwrap();
        let completed: Value = serde_json::from_str(&events.last().unwrap().data).unwrap();
        assert_eq!(streamed, openai_responses::decode_response(&completed["response"]).unwrap(), "{name}");
        assert_eq!(text_of(&deltas).0, streamed.text);
    }
    let first = whole(WireFormat::OpenAiResponses, &read("10_openai_responses_sse_function_call.0.response.sse"));
    assert_eq!(first.tool_calls[0].id, "call_kL0PCQV7M2WMoVX8V8OtYSAL");
    assert_eq!(first.tool_calls[0].arguments, "{\"country\":\"France\"}");
    let second = whole(WireFormat::OpenAiResponses, &read("10_openai_responses_sse_function_call.1.response.sse"));
    assert_eq!(second.text, "The capital of France is Paris.");
    assert_eq!(
        (second.finish_reason, second.usage.input_tokens, second.usage.output_tokens),
        (FinishReason::Stop, 278, 9)
    );
}

#[test]
fn every_recording_at_every_two_chunk_split_gives_the_same_response() {
    for (name, format) in recorded() {
        let bytes = read(name);
        let (want, want_deltas) = run(format, &bytes, &[]);
        let want = want.unwrap();
        let want_text = text_of(&want_deltas);
        for cut in 0..=bytes.len() {
            let (got, deltas) = run(format, &bytes, &[cut]);
            assert_eq!(got.unwrap(), want, "{name} cut at {cut}");
            assert_eq!(text_of(&deltas), want_text, "{name} cut at {cut}");
        }
    }
}

#[test]
fn every_recording_at_random_multi_chunk_splits_gives_the_same_response() {
    let mut rng = StdRng::seed_from_u64(0x5EED_0007);
    for (name, format) in recorded() {
        let bytes = read(name);
        let want = whole(format, &bytes);
        for _ in 0..200 {
            let cuts = random_cuts(&mut rng, bytes.len(), 64);
            assert_eq!(run(format, &bytes, &cuts).0.unwrap(), want, "{name} cut at {cuts:?}");
        }
    }
}

/// The byte offset just after the final event's terminating blank line.
fn end_of_last_event(bytes: &[u8]) -> usize {
    let text = std::str::from_utf8(bytes).unwrap();
    let trimmed = text.trim_end_matches('\n');
    trimmed.len() + 2.min(text.len() - trimmed.len())
}

#[test]
fn every_recording_cut_anywhere_before_its_final_event_is_truncated() {
    for (name, format) in recorded() {
        let bytes = read(name);
        let end = end_of_last_event(&bytes);
        // The last event is only complete once its blank line arrived.
        for len in 0..end {
            match run(format, &bytes[..len], &[]).0 {
                Err(ProviderError::Truncated { .. }) => {}
                other => panic!("{name} cut to {len} bytes: expected Truncated, got {other:?}"),
            }
        }
        assert!(run(format, &bytes[..end], &[]).0.is_ok(), "{name}");
    }
}

fn truncated_usage(format: WireFormat, bytes: &[u8]) -> Usage {
    match run(format, bytes, &[]).0 {
        Err(ProviderError::Truncated { partial_usage, .. }) => partial_usage,
        other => panic!("expected Truncated, got {other:?}"),
    }
}

/// `bytes` without its last `n` events.
fn drop_last_events(bytes: &[u8], n: usize) -> Vec<u8> {
    let text = std::str::from_utf8(bytes).unwrap();
    let events: Vec<&str> = text.split_inclusive("\n\n").collect();
    events[..events.len() - n].concat().into_bytes()
}

#[test]
fn truncation_carries_the_usage_reported_so_far() {
    let a = read("01_anthropic_sse_tool_use_no_args.response.sse");
    // Cut before message_stop: message_delta's usage is in.
    let u = truncated_usage(WireFormat::AnthropicMessages, &drop_last_events(&a, 1));
    assert_eq!((u.input_tokens, u.output_tokens), (565, 48));
    assert!(u.cost > 0.0);
    // Cut before message_delta: only message_start's.
    let u = truncated_usage(WireFormat::AnthropicMessages, &drop_last_events(&a, 2));
    assert_eq!((u.input_tokens, u.output_tokens), (565, 7));

    let c = read("07_openai_chat_sse_parallel_tool_calls.1.response.sse");
    let u = truncated_usage(WireFormat::OpenAiChat, &drop_last_events(&c, 1));
    assert_eq!((u.input_tokens, u.output_tokens), (417, 44));
    let u = truncated_usage(WireFormat::OpenAiChat, &drop_last_events(&c, 2));
    assert_eq!(u, Usage::default());

    let r = read("10_openai_responses_sse_function_call.0.response.sse");
    let u = truncated_usage(WireFormat::OpenAiResponses, &drop_last_events(&r, 1));
    assert_eq!(u, Usage::default());
}

fn sse(events: &[(&str, Value)]) -> Vec<u8> {
    let mut out = String::new();
    for (name, data) in events {
        if !name.is_empty() {
            out.push_str(&format!("event: {name}\n"));
        }
        out.push_str(&format!("data: {data}\n\n"));
    }
    out.into_bytes()
}

fn chat_chunk(delta: Value, finish: Value) -> (&'static str, Value) {
    (
        "",
        json!({"object": "chat.completion.chunk", "model": "gpt-4o", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
    )
}

fn frag(index: u64, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
    let mut function = json!({"arguments": args});
    if let Some(name) = name {
        function["name"] = json!(name);
    }
    let mut f = json!({"index": index, "function": function});
    if let Some(id) = id {
        f["id"] = json!(id);
        f["type"] = json!("function");
    }
    json!({"tool_calls": [f]})
}

#[test]
fn chat_interleaved_parallel_fragments_stay_separate() {
    let mut events = vec![
        chat_chunk(json!({"role": "assistant", "content": "Sure: "}), Value::Null),
        chat_chunk(frag(0, Some("call_a"), Some("read_file"), ""), Value::Null),
        chat_chunk(frag(1, Some("call_b"), Some("list_dir"), "{\"pa"), Value::Null),
        chat_chunk(frag(0, None, None, "{\"path\": \"a"), Value::Null),
        chat_chunk(frag(1, None, None, "th\": \".\"}"), Value::Null),
        chat_chunk(frag(0, None, None, ".txt\"}"), Value::Null),
        chat_chunk(frag(2, Some("call_c"), Some("noop"), ""), Value::Null),
        chat_chunk(json!({"content": "done"}), Value::Null),
        chat_chunk(json!({}), json!("tool_calls")),
        (
            "",
            json!({"object": "chat.completion.chunk", "model": "gpt-4o", "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 4}}}),
        ),
    ];
    events.push(("", Value::Null));
    let mut bytes = sse(&events[..events.len() - 1]);
    bytes.extend_from_slice(b"data: [DONE]\n\n");
    let (r, deltas) = run(WireFormat::OpenAiChat, &bytes, &[]);
    let r = r.unwrap();
    assert_eq!(
        r.tool_calls,
        vec![
            ToolCall { id: "call_a".into(), name: "read_file".into(), arguments: "{\"path\": \"a.txt\"}".into() },
            ToolCall { id: "call_b".into(), name: "list_dir".into(), arguments: "{\"path\": \".\"}".into() },
            ToolCall { id: "call_c".into(), name: "noop".into(), arguments: "{}".into() },
        ]
    );
    assert_eq!(r.text, "Sure: done");
    assert_eq!(deltas, vec![Delta::Text("Sure: ".into()), Delta::Text("done".into())]);
    assert_eq!((r.usage.input_tokens, r.usage.cache_read_tokens, r.usage.output_tokens), (6, 4, 5));
    for cut in 0..=bytes.len() {
        assert_eq!(run(WireFormat::OpenAiChat, &bytes, &[cut]).0.unwrap(), r, "cut at {cut}");
    }
}

#[test]
fn chat_fragments_without_index_and_reasoning() {
    let bytes = [
        sse(&[
            chat_chunk(json!({"reasoning_content": "hmm"}), Value::Null),
            chat_chunk(
                json!({"tool_calls": [{"id": "c1", "function": {"name": "a", "arguments": "{\"x\":"}}]}),
                Value::Null,
            ),
            chat_chunk(json!({"tool_calls": [{"function": {"arguments": "1}"}}]}), Value::Null),
            chat_chunk(
                json!({"tool_calls": [{"id": "c2", "function": {"name": "b", "arguments": {"y": 2}}}]}),
                Value::Null,
            ),
            chat_chunk(json!({}), json!("tool_calls")),
        ]),
        b"data: [DONE]\n\n".to_vec(),
    ]
    .concat();
    let (r, deltas) = run(WireFormat::OpenAiChat, &bytes, &[]);
    let r = r.unwrap();
    assert_eq!(r.reasoning, "hmm");
    assert_eq!(deltas, vec![Delta::Thinking("hmm".into())]);
    assert_eq!(
        r.tool_calls,
        vec![
            ToolCall { id: "c1".into(), name: "a".into(), arguments: "{\"x\":1}".into() },
            ToolCall { id: "c2".into(), name: "b".into(), arguments: "{\"y\":2}".into() },
        ]
    );
}

fn anthropic_stream(blocks: &[(Value, Vec<Value>)], stop_reason: &str) -> Vec<u8> {
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "usage": {"input_tokens": 50, "output_tokens": 1, "cache_read_input_tokens": 10}}}),
    )];
    for (i, (start, deltas)) in blocks.iter().enumerate() {
        events
            .push(("content_block_start", json!({"type": "content_block_start", "index": i, "content_block": start})));
        events.push(("ping", json!({"type": "ping"})));
        for d in deltas {
            events.push(("content_block_delta", json!({"type": "content_block_delta", "index": i, "delta": d})));
        }
        events.push(("content_block_stop", json!({"type": "content_block_stop", "index": i})));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 100}}),
    ));
    events.push(("future_event", json!({"type": "future_event", "x": 1})));
    events.push(("message_stop", json!({"type": "message_stop"})));
    sse(&events)
}

fn json_delta(piece: &str) -> Value {
    json!({"type": "input_json_delta", "partial_json": piece})
}

#[test]
fn anthropic_multibyte_character_split_inside_streamed_arguments() {
    // "日本" and "é" split between two input_json_delta pieces: each piece is
    // valid JSON string text, the characters are whole in each SSE line; the
    // byte-level cuts below also split the UTF-8 sequences themselves.
    let bytes = anthropic_stream(
        &[
            (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                vec![
                    json!({"type": "thinking_delta", "thinking": "Plan: "}),
                    json!({"type": "thinking_delta", "thinking": "write ✓"}),
                    json!({"type": "signature_delta", "signature": "sig=="}),
                ],
            ),
            (
                json!({"type": "text", "text": ""}),
                vec![json!({"type": "text_delta", "text": "Écrit "}), json!({"type": "text_delta", "text": "日本"})],
            ),
            (
                json!({"type": "tool_use", "id": "toolu_1", "name": "create_file", "input": {}}),
                vec![
                    json_delta(""),
                    json_delta("{\"path\": \"日"),
                    json_delta("本.txt\", \"content\": \"caf"),
                    json_delta("é 🎉\"}"),
                ],
            ),
        ],
        "tool_use",
    );
    let (r, deltas) = run(WireFormat::AnthropicMessages, &bytes, &[]);
    let r = r.unwrap();
    assert_eq!(r.tool_calls.len(), 1);
    let args: Value = serde_json::from_str(&r.tool_calls[0].arguments).unwrap();
    assert_eq!(args, json!({"path": "日本.txt", "content": "café 🎉"}));
    assert_eq!(r.text, "Écrit 日本");
    assert_eq!(r.reasoning, "Plan: write ✓");
    assert_eq!(text_of(&deltas), (r.text.clone(), r.reasoning.clone()));
    // Thinking blocks (with their signature) are kept for sending back.
    let native = r.native.clone().unwrap();
    assert_eq!(native.blocks[0], json!({"type": "thinking", "thinking": "Plan: write ✓", "signature": "sig=="}));
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens, r.usage.cache_read_tokens), (50, 100, 10));
    for cut in 0..=bytes.len() {
        assert_eq!(run(WireFormat::AnthropicMessages, &bytes, &[cut]).0.unwrap(), r, "cut at {cut}");
    }
}

#[test]
fn anthropic_max_tokens_truncated_call_and_empty_input() {
    let bytes = anthropic_stream(
        &[
            (
                json!({"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {}}),
                vec![json_delta("{\"location\": \"SF\"}")],
            ),
            (json!({"type": "tool_use", "id": "toolu_b", "name": "calculate", "input": {}}), vec![]),
        ],
        "max_tokens",
    );
    let r = whole(WireFormat::AnthropicMessages, &bytes);
    assert_eq!((r.finish_reason, r.raw_finish_reason.as_str()), (FinishReason::Length, "max_tokens"));
    assert_eq!(r.tool_calls[1], ToolCall { id: "toolu_b".into(), name: "calculate".into(), arguments: "{}".into() });
}

#[test]
fn anthropic_error_events_and_bad_data() {
    let mut bytes = sse(&[(
        "message_start",
        json!({"type": "message_start", "message": {"model": "claude-haiku-4-5", "content": [], "usage": {"input_tokens": 9, "output_tokens": 1}}}),
    )]);
    bytes.extend(sse(&[(
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )]));
    match run(WireFormat::AnthropicMessages, &bytes, &[]).0 {
        Err(ProviderError::StreamError { kind, status, message, partial_usage, .. }) => {
            assert_eq!((kind.as_str(), status, message.as_str()), ("overloaded_error", Some(529), "Overloaded"));
            assert_eq!(partial_usage.input_tokens, 9);
        }
        other => panic!("expected a stream error, got {other:?}"),
    }
    let bad =
        sse(&[("content_block_delta", json!({"type": "content_block_delta", "index": 3, "delta": json_delta("{")}))]);
    assert!(matches!(run(WireFormat::AnthropicMessages, &bad, &[]).0, Err(ProviderError::Decode { .. })));
    let broken = b"event: message_start\ndata: {not json\n\n";
    assert!(matches!(run(WireFormat::AnthropicMessages, broken, &[]).0, Err(ProviderError::Decode { .. })));
    let bad_input = anthropic_stream(
        &[(json!({"type": "tool_use", "id": "t", "name": "f", "input": {}}), vec![json_delta("{\"a\": ")])],
        "tool_use",
    );
    match run(WireFormat::AnthropicMessages, &bad_input, &[]).0 {
        Err(ProviderError::Decode { what, .. }) => {
            assert!(what.contains("content block 0 is not valid JSON"), "{what}")
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
}

#[test]
fn responses_interleaved_function_calls_by_item_id() {
    let created = json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-4.1", "status": "in_progress", "output": [], "usage": null}});
    let add = |i: u64, id: &str, call: &str, name: &str| json!({"type": "response.output_item.added", "output_index": i, "item": {"type": "function_call", "id": id, "call_id": call, "name": name, "arguments": "", "status": "in_progress"}});
    let delta =
        |id: &str, d: &str| json!({"type": "response.function_call_arguments.delta", "item_id": id, "delta": d});
    let events = vec![
        ("response.created", created),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        ),
        (
            "response.reasoning_summary_text.delta",
            json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": "Two files."}),
        ),
        ("response.output_item.added", add(1, "fc_1", "call_1", "read_file")),
        ("response.output_item.added", add(2, "fc_2", "call_2", "noop")),
        ("response.function_call_arguments.delta", delta("fc_1", "{\"path\":")),
        ("response.function_call_arguments.delta", delta("fc_1", "\"é.txt\"}")),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {"id": "resp_1", "model": "gpt-4.1", "status": "completed", "output": [], "usage": {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 12}}}),
        ),
    ];
    let bytes = sse(&events);
    let (r, deltas) = run(WireFormat::OpenAiResponses, &bytes, &[]);
    let r = r.unwrap();
    assert_eq!(
        r.tool_calls,
        vec![
            ToolCall { id: "call_1".into(), name: "read_file".into(), arguments: "{\"path\":\"é.txt\"}".into() },
            ToolCall { id: "call_2".into(), name: "noop".into(), arguments: "{}".into() },
        ]
    );
    assert_eq!(r.reasoning, "Two files.");
    assert_eq!(deltas, vec![Delta::Thinking("Two files.".into())]);
    assert_eq!((r.finish_reason, r.usage.input_tokens, r.usage.output_tokens), (FinishReason::ToolCall, 30, 12));
    for cut in 0..=bytes.len() {
        assert_eq!(run(WireFormat::OpenAiResponses, &bytes, &[cut]).0.unwrap(), r, "cut at {cut}");
    }

    let incomplete = sse(&[(
        "response.incomplete",
        json!({"type": "response.incomplete", "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": [], "usage": {"input_tokens": 1, "output_tokens": 2}}}),
    )]);
    assert_eq!(whole(WireFormat::OpenAiResponses, &incomplete).finish_reason, FinishReason::Length);
    let failed = sse(&[(
        "response.failed",
        json!({"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}, "output": []}}),
    )]);
    match run(WireFormat::OpenAiResponses, &failed, &[]).0 {
        Err(ProviderError::StreamError { kind, status, .. }) => {
            assert_eq!((kind.as_str(), status), ("server_error", Some(500)))
        }
        other => panic!("expected a stream error, got {other:?}"),
    }
    let orphan =
        sse(&[("x", json!({"type": "response.function_call_arguments.delta", "item_id": "nope", "delta": "{"}))]);
    assert!(matches!(run(WireFormat::OpenAiResponses, &orphan, &[]).0, Err(ProviderError::Decode { .. })));
}

fn gemini_chunks() -> Vec<u8> {
    let chunk = |parts: Value, finish: Option<&str>, usage: Value| {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if let Some(f) = finish {
            candidate["finishReason"] = json!(f);
        }
        (
            "",
            json!({"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-2.5-flash", "responseId": "resp-abc"}),
        )
    };
    sse(&[
        chunk(json!([{"text": "Thinking about ", "thought": true}]), None, json!({"promptTokenCount": 120})),
        chunk(json!([{"text": "it.", "thought": true}]), None, json!({"promptTokenCount": 120})),
        chunk(json!([{"text": "Checking "}]), None, json!({"promptTokenCount": 120})),
        chunk(json!([{"text": "both."}]), None, json!({"promptTokenCount": 120, "candidatesTokenCount": 3})),
        chunk(
            json!([{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2ln"}, {"functionCall": {"name": "get_time"}}]),
            Some("STOP"),
            json!({"promptTokenCount": 120, "candidatesTokenCount": 30, "thoughtsTokenCount": 12, "cachedContentTokenCount": 20}),
        ),
    ])
}

#[test]
fn gemini_stream_equals_the_non_streaming_body() {
    let bytes = gemini_chunks();
    let (r, deltas) = run(WireFormat::Gemini, &bytes, &[]);
    let r = r.unwrap();
    let mut expected_body = gemini::tests::two_calls_body();
    expected_body["candidates"][0]["content"]["parts"]
        .as_array_mut()
        .unwrap()
        .insert(0, json!({"text": "Thinking about it.", "thought": true}));
    let mut expected = gemini::decode_response(&expected_body).unwrap();
    // The streamed usage has no totalTokenCount; the rest is identical.
    expected.usage = r.usage;
    assert_eq!(r, expected);
    assert_eq!(r.tool_calls[0].id, "gemini-call-resp-abc-0");
    assert_eq!(r.reasoning, "Thinking about it.");
    assert_eq!(text_of(&deltas), ("Checking both.".into(), "Thinking about it.".into()));
    assert_eq!((r.usage.input_tokens, r.usage.cache_read_tokens, r.usage.output_tokens), (100, 20, 42));
    for cut in 0..=bytes.len() {
        assert_eq!(run(WireFormat::Gemini, &bytes, &[cut]).0.unwrap(), r, "cut at {cut}");
    }
    // Without the last chunk (the one with finishReason): truncated, with usage so far.
    match run(WireFormat::Gemini, &drop_last_events(&bytes, 1), &[]).0 {
        Err(ProviderError::Truncated { partial_usage, .. }) => {
            assert_eq!((partial_usage.input_tokens, partial_usage.output_tokens), (120, 3));
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
    let error = sse(&[("", json!({"error": {"code": 503, "status": "UNAVAILABLE", "message": "overloaded"}}))]);
    match run(WireFormat::Gemini, &error, &[]).0 {
        Err(ProviderError::StreamError { status, kind, .. }) => {
            assert_eq!((status, kind.as_str()), (Some(503), "UNAVAILABLE"))
        }
        other => panic!("expected a stream error, got {other:?}"),
    }
    let blocked = sse(&[("", json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}))]);
    assert_eq!(whole(WireFormat::Gemini, &blocked).finish_reason, FinishReason::ContentFilter);
}

/// Random bytes and random mutations of the recordings never panic any
/// assembler (the bounded stand-in for the fuzz targets in `fuzz/`).
#[test]
fn random_input_never_panics_any_assembler() {
    use rand::RngExt;
    let mut rng = StdRng::seed_from_u64(0xF022_0001);
    let mut corpus: Vec<Vec<u8>> = recorded().into_iter().map(|(n, _)| read(n)).collect();
    corpus.push(gemini_chunks());
    for i in 0..3000 {
        let base = &corpus[i % corpus.len()];
        let mut bytes = base.clone();
        for _ in 0..rng.random_range(1..8) {
            if bytes.is_empty() {
                break;
            }
            let at = rng.random_range(0..bytes.len());
            match rng.random_range(0..4) {
                0 => bytes[at] = rng.random(),
                1 => {
                    bytes.remove(at);
                }
                2 => bytes.insert(at, b"{}[]\":,\n0a\\"[rng.random_range(0..11)]),
                _ => bytes.truncate(at),
            }
        }
        for format in WireFormat::ALL {
            let cuts = random_cuts(&mut rng, bytes.len(), 4);
            let _ = run(format, &bytes, &cuts);
        }
    }
}

/// The decode error of a stream, or a panic naming what came instead.
fn decode_error_of(format: WireFormat, bytes: &[u8]) -> String {
    match run(format, bytes, &[]).0 {
        Err(ProviderError::Decode { what, .. }) => what,
        other => panic!("expected a decode error, got {other:?}"),
    }
}

#[test]
fn chat_call_without_id_or_name_or_with_non_string_arguments_is_refused() {
    let stream = |fragment: Value| {
        [
            sse(&[
                chat_chunk(json!({"tool_calls": [fragment]}), Value::Null),
                chat_chunk(json!({}), json!("tool_calls")),
            ]),
            b"data: [DONE]\n\n".to_vec(),
        ]
        .concat()
    };
    // The same shapes the non-streamed decoder refuses: no id, no name.
    let no_id = stream(json!({"index": 0, "function": {"name": "read_file", "arguments": "{}"}}));
    assert!(decode_error_of(WireFormat::OpenAiChat, &no_id).contains("`tool_calls[0].id`"));
    let no_name = stream(json!({"index": 0, "id": "call_1", "function": {"arguments": "{}"}}));
    assert!(decode_error_of(WireFormat::OpenAiChat, &no_name).contains("`tool_calls[0].function.name`"));
    let empty_name = stream(json!({"index": 0, "id": "call_1", "function": {"name": "", "arguments": "{}"}}));
    assert!(decode_error_of(WireFormat::OpenAiChat, &empty_name).contains("function.name"));
    // A number is not arguments (the non-streamed decoder says the same).
    let numeric = stream(json!({"index": 0, "id": "call_1", "function": {"name": "read_file", "arguments": 5}}));
    let what = decode_error_of(WireFormat::OpenAiChat, &numeric);
    assert!(what.contains("function.arguments") && what.contains("number"), "{what}");
    let body = json!({"choices": [{"finish_reason": "tool_calls", "message": {"tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": 5}}]}}]});
    assert!(matches!(crate::openai_chat::decode_response(&body), Err(ProviderError::Decode { .. })));
    // Null arguments stay `{}`, as in the non-streamed decoder.
    let null = stream(json!({"index": 0, "id": "call_1", "function": {"name": "noop", "arguments": null}}));
    assert_eq!(whole(WireFormat::OpenAiChat, &null).tool_calls[0].arguments, "{}");
}

#[test]
fn anthropic_call_with_non_object_input_or_non_string_pieces_is_refused() {
    let start = |input: Value| json!({"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": input});
    let numeric_piece = anthropic_stream(
        &[(start(json!({})), vec![json!({"type": "input_json_delta", "partial_json": 5})])],
        "tool_use",
    );
    assert!(decode_error_of(WireFormat::AnthropicMessages, &numeric_piece).contains("partial_json"));
    let numeric_input = anthropic_stream(&[(start(json!(5)), vec![])], "tool_use");
    assert!(decode_error_of(WireFormat::AnthropicMessages, &numeric_input).contains("input"));
    let parsed_to_number = anthropic_stream(&[(start(json!({})), vec![json_delta("5")])], "tool_use");
    assert!(decode_error_of(WireFormat::AnthropicMessages, &parsed_to_number).contains("not an object"));
    let no_id =
        anthropic_stream(&[(json!({"type": "tool_use", "name": "read_file", "input": {}}), vec![])], "tool_use");
    assert!(decode_error_of(WireFormat::AnthropicMessages, &no_id).contains(".id`"));
}

#[test]
fn responses_call_with_non_string_arguments_is_refused() {
    let completed = json!({"type": "response.completed", "response": {"status": "completed", "output": [], "usage": {"input_tokens": 1, "output_tokens": 1}}});
    let added = |item: Value| {
        ("response.output_item.added", json!({"type": "response.output_item.added", "output_index": 0, "item": item}))
    };
    let call =
        json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read_file", "arguments": ""});
    let numeric_delta = sse(&[
        added(call.clone()),
        (
            "response.function_call_arguments.delta",
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": 5}),
        ),
        ("response.completed", completed.clone()),
    ]);
    assert!(decode_error_of(WireFormat::OpenAiResponses, &numeric_delta).contains("number"));
    let numeric_done = sse(&[
        added(call),
        (
            "response.function_call_arguments.done",
            json!({"type": "response.function_call_arguments.done", "item_id": "fc_1", "arguments": 5}),
        ),
        ("response.completed", completed.clone()),
    ]);
    assert!(decode_error_of(WireFormat::OpenAiResponses, &numeric_done).contains("arguments"));
    let no_call_id = sse(&[
        added(json!({"type": "function_call", "id": "fc_1", "name": "read_file", "arguments": "{}"})),
        ("response.completed", completed),
    ]);
    assert!(decode_error_of(WireFormat::OpenAiResponses, &no_call_id).contains("call_id"));
}

#[test]
fn gemini_call_with_non_object_args_or_no_name_is_refused() {
    let chunk = |part: Value| {
        sse(&[(
            "",
            json!({"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}]}),
        )])
    };
    assert!(
        decode_error_of(WireFormat::Gemini, &chunk(json!({"functionCall": {"name": "f", "args": 5}}))).contains("args")
    );
    assert!(decode_error_of(WireFormat::Gemini, &chunk(json!({"functionCall": {"args": {}}}))).contains("name"));
}
