use super::*;
use crate::model::{ToolResult, ToolSpec};
use crate::wire::tests::recording;

const NAMES: [(&str, &str); 4] = [
    ("toolu_0167cfEnoQaPviGdVXA95zcu", "Alice"),
    ("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "Bob"),
    ("toolu_01XFyAjstT3966qvRynZyVPo", "Charlie"),
    ("toolu_013mnQZbgtK2oe3Mo3XKJsx3", "Daisy"),
];

/// Fixture 02's second request, built from neutral types.
fn fixture_02_turn_2(recorded: &Value) -> ModelRequest {
    let tool = &recorded["tools"][0];
    let answers = [
        "alice is bob's wife",
        "bob is alice's husband",
        "charlie is alice's son",
        "daisy is bob's daughter and charlie's younger sister",
    ];
    ModelRequest {
        model: "claude-haiku-4-5".into(),
        system: Some(recorded["system"].as_str().unwrap().to_owned()),
        messages: vec![
            Message::User { content: "Alice, Bob, Charlie and Daisy are a family. Who is the youngest?".into() },
            Message::Assistant {
                content: "I'll help you find out who is the youngest by retrieving information about each family member. I'll retrieve their entity information to compare their ages.".into(),
                tool_calls: NAMES
                    .iter()
                    .map(|(id, name)| ToolCall {
                        id: (*id).into(),
                        name: "retrieve_entity_info".into(),
                        arguments: format!("{{\"name\": \"{name}\"}}"),
                    })
                    .collect(),
            },
            Message::ToolResults {
                results: NAMES
                    .iter()
                    .zip(answers)
                    .map(|((id, _), answer)| ToolResult {
                        tool_call_id: (*id).into(),
                        name: "retrieve_entity_info".into(),
                        content: answer.into(),
                        is_error: false,
                    })
                    .collect(),
            },
        ],
        tools: vec![ToolSpec {
            name: tool["name"].as_str().unwrap().into(),
            description: tool["description"].as_str().unwrap().into(),
            parameters: tool["input_schema"].clone(),
        }],
    }
}

#[test]
fn encodes_fixture_02_turn_2_exactly() {
    let fixture = recording("02_anthropic_parallel_4_tool_use.json");
    let recorded = &fixture["interactions"][1]["request"]["body"];
    let encoded = encode_request(&fixture_02_turn_2(recorded)).unwrap();
    assert_eq!(encoded["messages"], recorded["messages"]);
    // The whole body, too: model, max_tokens, system, tools, tool_choice, stream.
    assert_eq!(&encoded, recorded);
}

#[test]
fn merges_tool_results_and_injected_user_text() {
    let req = ModelRequest {
        model: "claude-sonnet-4-5".into(),
        system: None,
        messages: vec![
            Message::User { content: "go".into() },
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall { id: "t1".into(), name: "f".into(), arguments: String::new() }],
            },
            Message::ToolResults {
                results: vec![ToolResult {
                    tool_call_id: "t1".into(),
                    name: "f".into(),
                    content: "refused: no".into(),
                    is_error: true,
                }],
            },
            Message::User { content: "Budget almost spent; wrap up.".into() },
        ],
        tools: vec![],
    };
    let encoded = encode_request(&req).unwrap();
    assert!(encoded.get("system").is_none());
    assert!(encoded.get("tools").is_none());
    assert!(encoded.get("tool_choice").is_none());
    assert_eq!(encoded["max_tokens"], json!(4096));
    assert_eq!(
        encoded["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "refused: no", "is_error": true},
                {"type": "text", "text": "Budget almost spent; wrap up."},
            ]},
        ])
    );
}

#[test]
fn tool_results_go_first_in_a_merged_user_message() {
    let req = ModelRequest {
        model: "m".into(),
        system: None,
        messages: vec![
            Message::Assistant {
                content: "calling".into(),
                tool_calls: vec![ToolCall { id: "t1".into(), name: "f".into(), arguments: "{}".into() }],
            },
            Message::User { content: "note".into() },
            Message::ToolResults {
                results: vec![ToolResult {
                    tool_call_id: "t1".into(),
                    name: "f".into(),
                    content: "ok".into(),
                    is_error: false,
                }],
            },
        ],
        tools: vec![],
    };
    let encoded = encode_request(&req).unwrap();
    let user = &encoded["messages"][1]["content"];
    assert_eq!(user[0]["type"], json!("tool_result"));
    assert_eq!(user[1], json!({"type": "text", "text": "note"}));
}

#[test]
fn empty_assistant_turn_is_dropped_and_neighbours_merge() {
    let req = ModelRequest {
        model: "m".into(),
        system: None,
        messages: vec![
            Message::User { content: "a".into() },
            Message::Assistant { content: String::new(), tool_calls: vec![] },
            Message::User { content: "b".into() },
        ],
        tools: vec![],
    };
    let encoded = encode_request(&req).unwrap();
    assert_eq!(
        encoded["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])
    );
}

#[test]
fn invalid_arguments_are_an_encode_error() {
    for (args, what) in [("{\"path\": ", "not valid JSON"), ("[1]", "an array, not a JSON object")] {
        let req = ModelRequest {
            model: "m".into(),
            system: None,
            messages: vec![Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall { id: "t9".into(), name: "f".into(), arguments: args.into() }],
            }],
            tools: vec![],
        };
        match encode_request(&req) {
            Err(ProviderError::Other(msg)) => {
                assert!(msg.contains("t9 (f)"), "{msg}");
                assert!(msg.contains(what), "{msg}");
            }
            other => panic!("expected an error, got {other:?}"),
        }
    }
}

#[test]
fn decodes_fixture_02() {
    let fixture = recording("02_anthropic_parallel_4_tool_use.json");
    let first = decode_response(&fixture["interactions"][0]["response"]["body"]).unwrap();
    assert_eq!(first.model, "claude-haiku-4-5-20251001");
    assert!(first.text.starts_with("I'll help you find out who is the youngest"));
    assert_eq!(first.finish_reason, FinishReason::ToolCall);
    assert_eq!(first.raw_finish_reason, "tool_use");
    assert_eq!(first.tool_calls.len(), 4);
    for (call, (id, name)) in first.tool_calls.iter().zip(NAMES) {
        assert_eq!(call.id, id);
        assert_eq!(call.name, "retrieve_entity_info");
        assert_eq!(call.arguments, format!("{{\"name\":\"{name}\"}}"));
    }
    assert_eq!(first.usage.input_tokens, 423);
    assert_eq!(first.usage.output_tokens, 202);
    let expected = (423.0 * 1.0 + 202.0 * 5.0) / 1e6;
    assert!((first.usage.cost - expected).abs() < 1e-12);

    let second = decode_response(&fixture["interactions"][1]["response"]["body"]).unwrap();
    assert!(second.text.ends_with("youngest among the four family members."));
    assert!(second.tool_calls.is_empty());
    assert_eq!(second.finish_reason, FinishReason::Stop);
    assert_eq!(second.raw_finish_reason, "end_turn");
}

#[test]
fn decodes_fixture_03_with_unknown_fields() {
    let fixture = recording("03_anthropic_tool_result_is_error_retry.json");
    let r = decode_response(&fixture["interactions"][0]["response"]["body"]).unwrap();
    assert_eq!(r.text, "Let me correct that - the parameter should be \"symbol\" instead of \"ticker\".");
    assert_eq!(
        r.tool_calls,
        vec![ToolCall {
            id: "toolu_01GgM32pcJgjKXqUgpjs9XFT".into(),
            name: "stock_lookup".into(),
            arguments: "{\"symbol\":\"AAPL\"}".into(),
        }]
    );
    assert_eq!(r.finish_reason, FinishReason::ToolCall);
    assert_eq!(r.usage.input_tokens, 1122);
    assert_eq!(r.usage.output_tokens, 74);
    // claude-sonnet-4-5-20250929 is priced as claude-sonnet-4.
    assert!((r.usage.cost - (1122.0 * 3.0 + 74.0 * 15.0) / 1e6).abs() < 1e-12);

    let r = decode_response(&fixture["interactions"][1]["response"]["body"]).unwrap();
    assert_eq!(r.text, "The current stock price for AAPL (Apple Inc.) is **$150.00**.");
    assert_eq!(r.finish_reason, FinishReason::Stop);
}

#[test]
fn decodes_fixture_04_max_tokens() {
    let fixture = recording("04_anthropic_max_tokens_truncated_tool_use.json");
    let r = decode_response(&fixture["interactions"][0]["response"]["body"]).unwrap();
    assert_eq!(r.finish_reason, FinishReason::Length);
    assert_eq!(r.raw_finish_reason, "max_tokens");
    assert_eq!(r.text, "Okay, let's get the weather and do that calculation.");
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(r.tool_calls[0].arguments, "{\"location\":\"San Francisco, CA\",\"unit\":\"fahrenheit\"}");
    assert_eq!(r.tool_calls[1].name, "calculate");
    assert_eq!(r.tool_calls[1].arguments, "{}");
    assert_eq!(r.usage.input_tokens, 435);
    assert_eq!(r.usage.output_tokens, 100);
    assert_eq!(r.usage.cache_read_tokens, 0);
    // claude-3-sonnet is not in the table.
    assert_eq!(r.usage.cost, 0.0);
}

#[test]
fn thinking_server_tools_cache_usage_and_stop_reasons() {
    let body = json!({
        "type": "message",
        "model": "claude-sonnet-4-20250514",
        "content": [
            {"type": "thinking", "thinking": "Let me search.", "signature": "sig"},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            {"type": "text", "text": "Found it. "},
            {"type": "redacted_thinking", "data": "..."},
            {"type": "text", "text": "Now saving."},
            {"type": "tool_use", "id": "toolu_1", "name": "create_file", "input": {"path": "a.txt"}},
        ],
        "stop_reason": "tool_use",
        "usage": {
            "input_tokens": 10,
            "output_tokens": 20,
            "cache_read_input_tokens": 1000,
            "cache_creation_input_tokens": 100,
            "server_tool_use": {"web_search_requests": 1},
        },
    });
    let r = decode_response(&body).unwrap();
    assert_eq!(r.reasoning, "Let me search.");
    assert_eq!(r.text, "Found it. Now saving.");
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].id, "toolu_1");
    assert_eq!(r.usage.cache_read_tokens, 1000);
    assert_eq!(r.usage.cache_write_tokens, 100);
    let expected = (10.0 * 3.0 + 20.0 * 15.0 + 1000.0 * 0.30 + 100.0 * 3.75) / 1e6;
    assert!((r.usage.cost - expected).abs() < 1e-12);

    for (raw, want) in [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("tool_use", FinishReason::ToolCall),
        ("max_tokens", FinishReason::Length),
        ("refusal", FinishReason::ContentFilter),
        ("pause_turn", FinishReason::Other),
    ] {
        let body = json!({"type": "message", "content": [], "stop_reason": raw});
        let r = decode_response(&body).unwrap();
        assert_eq!(r.finish_reason, want, "{raw}");
        assert_eq!(r.raw_finish_reason, raw);
    }
}

#[test]
fn error_bodies_and_bad_shapes_are_decode_errors() {
    let cases = [
        (
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            "the body is an error: Overloaded",
        ),
        (json!({"type": "message"}), "no `content` field"),
        (json!({"type": "message", "content": "hi"}), "`content` is a string, not an array"),
        (json!({"type": "completion", "content": []}), "`type` is `completion`, expected `message`"),
        (json!("x"), "the body is a string, not an object"),
        (
            json!({"type": "message", "content": [{"type": "tool_use", "name": "f", "input": {}}]}),
            "`content[0].id` of a tool_use block is missing or not a string",
        ),
    ];
    for (body, want) in cases {
        match decode_response(&body) {
            Err(ProviderError::Decode { provider, what }) => {
                assert_eq!(provider, FORMAT);
                assert_eq!(what, want);
            }
            other => panic!("expected a decode error for {body}, got {other:?}"),
        }
    }
}
