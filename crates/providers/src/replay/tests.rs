use super::*;
use crate::model::{FinishReason, Message};
use crate::wire::tests::{recording, recording_path};
use serde_json::json;

fn request(text: &str) -> ModelRequest {
    ModelRequest {
        model: "gpt-4o".into(),
        system: None,
        messages: vec![Message::User { content: text.into() }],
        tools: vec![],
    }
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn shape_error(path: &Path) -> String {
    match ReplayProvider::from_file(path) {
        Err(e @ ReplayError::Shape { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(&path.display().to_string()), "{msg}");
            msg
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
}

#[tokio::test]
async fn plays_fixture_08_directly() {
    let path = recording_path("08_openai_chat_parallel_tool_calls_nonstream.json");
    let p = ReplayProvider::from_file(&path).unwrap();
    assert_eq!(p.name(), "replay");
    assert_eq!(p.model(), "gpt-4o");
    assert_eq!(p.format(), WireFormat::OpenAiChat);
    assert_eq!(p.response_count(), 2);
    assert_eq!(p.note(), None);
    assert_eq!(p.path(), path);

    let first = p.complete(&request("Delete the file `.env` and create `test.txt`")).await.unwrap();
    assert_eq!(first.finish_reason, FinishReason::ToolCall);
    assert_eq!(first.tool_calls.len(), 2);
    assert_eq!(first.tool_calls[0].name, "delete_file");
    assert_eq!(first.tool_calls[1].name, "create_file");
    let second = p.complete(&request("next")).await.unwrap();
    assert_eq!(second.finish_reason, FinishReason::Stop);
    assert_eq!(p.played(), 2);

    let requests = p.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0]["messages"],
        json!([{"role": "user", "content": "Delete the file `.env` and create `test.txt`"}])
    );
    assert_eq!(requests[1]["messages"][0]["content"], json!("next"));
}

#[tokio::test]
async fn plays_anthropic_recording_and_records_anthropic_requests() {
    let p = ReplayProvider::from_file(recording_path("02_anthropic_parallel_4_tool_use.json")).unwrap();
    assert_eq!(p.format(), WireFormat::AnthropicMessages);
    assert_eq!(p.model(), "claude-haiku-4-5");
    let r = p.complete(&request("who?")).await.unwrap();
    assert_eq!(r.tool_calls.len(), 4);
    assert_eq!(p.requests()[0]["messages"], json!([{"role": "user", "content": [{"type": "text", "text": "who?"}]}]));
}

#[test]
fn recording_without_request_model_uses_response_model() {
    // Fixture 04 (Bedrock) names the model only in the URL and the response.
    let p = ReplayProvider::from_file(recording_path("04_anthropic_max_tokens_truncated_tool_use.json")).unwrap();
    assert_eq!(p.model(), "claude-3-sonnet-20240229");
}

#[tokio::test]
async fn loads_a_session_file_and_reports_exhaustion() {
    let fixture = recording("08_openai_chat_parallel_tool_calls_nonstream.json");
    let session = json!({
        "hookbox_replay": 1,
        "format": "openai-chat",
        "model": "gpt-4o",
        "note": "test session",
        "responses": [fixture["interactions"][1]["response"]["body"]],
    });
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "session.json", &session.to_string());
    let p = ReplayProvider::from_file(&path).unwrap();
    assert_eq!(p.note(), Some("test session"));
    assert_eq!(p.model(), "gpt-4o");
    let r = p.complete(&request("hi")).await.unwrap();
    assert!(r.text.starts_with("The file `.env` has been deleted"));

    match p.complete(&request("again")).await {
        Err(e @ ProviderError::ReplayExhausted { .. }) => {
            let ProviderError::ReplayExhausted { path: ref p_path, wanted, available } = e else { unreachable!() };
            assert_eq!(p_path, &path.display().to_string());
            assert_eq!((wanted, available), (2, 1));
            assert!(e.to_string().contains("response #2 but only 1 are recorded"), "{e}");
        }
        other => panic!("expected ReplayExhausted, got {other:?}"),
    }
    // Both requests were recorded, including the one that found no response.
    assert_eq!(p.requests().len(), 2);
}

#[tokio::test]
async fn the_demo_session_plays() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/demo/session.json");
    let p = ReplayProvider::from_file(&path).unwrap();
    assert_eq!(p.format(), WireFormat::OpenAiChat);
    assert_eq!(p.model(), "gpt-4o");
    assert!(p.note().unwrap().contains("pydantic/pydantic-ai"));
    let first = p.complete(&request("x")).await.unwrap();
    let names: Vec<_> = first.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["delete_file", "create_file"]);
    let second = p.complete(&request("y")).await.unwrap();
    assert_eq!(second.finish_reason, FinishReason::Stop);
}

#[tokio::test]
async fn undecodable_response_is_a_decode_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "s.json",
        r#"{"hookbox_replay": 1, "format": "anthropic-messages", "model": "claude-sonnet-4",
            "responses": [{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]}"#,
    );
    let p = ReplayProvider::from_file(&path).unwrap();
    match p.complete(&request("x")).await {
        Err(ProviderError::Decode { provider, what }) => {
            assert_eq!(provider, "anthropic-messages");
            assert_eq!(what, "the body is an error: Overloaded");
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.json");
    match ReplayProvider::from_file(&path) {
        Err(e @ ReplayError::Io { .. }) => {
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("cannot read replay file {}: ", path.display())), "{msg}");
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

#[test]
fn non_json_is_a_json_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "bad.json", "{\"hookbox_replay\": 1,");
    match ReplayProvider::from_file(&path) {
        Err(e @ ReplayError::Json { .. }) => {
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("replay file {} is not valid JSON: ", path.display())), "{msg}");
            assert!(msg.contains("line 1"), "{msg}");
        }
        other => panic!("expected a JSON error, got {other:?}"),
    }
}

#[test]
fn bad_shapes_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            r#"{"hookbox_replay": 1, "format": "cohere", "model": "m", "responses": [{}]}"#,
            "unknown `format` `cohere`: expected `openai-chat` or `anthropic-messages` or `openai-responses` or `gemini`",
        ),
        (
            r#"{"hookbox_replay": 2, "format": "openai-chat", "model": "m", "responses": [{}]}"#,
            "unsupported `hookbox_replay` version 2: this build reads version 1",
        ),
        (
            r#"{"hookbox_replay": 1, "model": "m", "responses": [{}]}"#,
            "no `format` field: expected `openai-chat` or `anthropic-messages` or `openai-responses` or `gemini`",
        ),
        (
            r#"{"hookbox_replay": 1, "format": "openai-chat", "responses": [{}]}"#,
            "no `model` field (the model name, e.g. `gpt-4o`)",
        ),
        (
            r#"{"hookbox_replay": 1, "format": "openai-chat", "model": "m", "responses": []}"#,
            "`responses` is empty: a session needs at least one response",
        ),
        (
            r#"{"hookbox_replay": 1, "format": "openai-chat", "model": "m", "responses": [{}, "x"]}"#,
            "`responses[1]` is a string, not a response body (a JSON object)",
        ),
        (r#"[1, 2]"#, "expected a JSON object, found an array"),
        (
            r#"{"responses": []}"#,
            "neither a hookbox replay session (no `hookbox_replay` field) nor a provider recording (no `interactions` field)",
        ),
        (
            r#"{"interactions": [{"response": {"body": {"result": []}}}]}"#,
            "cannot tell the wire format of `interactions[0].response.body`",
        ),
    ];
    for (i, (text, want)) in cases.into_iter().enumerate() {
        let path = write(&dir, &format!("case{i}.json"), text);
        let msg = shape_error(&path);
        assert!(msg.contains(want), "case {i}: {msg}");
    }
}

/// Issue 14, item 7: every real recording drives a replay, the five
/// streamed ones through the SSE decoder and the stream assemblers.
#[tokio::test]
async fn every_recording_plays_streamed_ones_included() {
    let dir = recording_path("");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 10, "{names:?}");
    for name in &names {
        let p = ReplayProvider::from_file(recording_path(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!p.model().is_empty(), "{name}");
        for i in 0..p.response_count() {
            p.complete(&request("go")).await.unwrap_or_else(|e| panic!("{name} response {i}: {e}"));
        }
        assert_eq!(p.played(), p.response_count(), "{name}");
    }
}

/// A streamed recording replays as the live streaming path decodes it: 07's
/// two parallel calls with arguments cut mid-word; 01's tool call whose
/// input is the empty string (`{}`), from a top-level `response` of `chunks`.
#[tokio::test]
async fn streamed_recordings_play_like_the_live_stream() {
    let p = ReplayProvider::from_file(recording_path("07_openai_chat_sse_parallel_tool_calls.json")).unwrap();
    assert_eq!(p.format(), WireFormat::OpenAiChat);
    let r = p.complete(&request("go")).await.unwrap();
    assert_eq!(r.tool_calls.len(), 2, "{r:?}");
    for call in &r.tool_calls {
        assert!(!call.id.is_empty() && !call.name.is_empty(), "{call:?}");
        serde_json::from_str::<serde_json::Value>(&call.arguments).unwrap_or_else(|e| panic!("{call:?}: {e}"));
    }
    assert_eq!(p.requests().len(), 1, "the request is recorded, encoded as openai-chat");

    let p = ReplayProvider::from_file(recording_path("01_anthropic_sse_tool_use_no_args.json")).unwrap();
    assert_eq!(p.format(), WireFormat::AnthropicMessages);
    assert!(p.model().starts_with("claude"), "{}", p.model());
    let r = p.complete(&request("go")).await.unwrap();
    assert_eq!(r.tool_calls.len(), 1, "{r:?}");
    assert_eq!(r.tool_calls[0].arguments, "{}");
}
