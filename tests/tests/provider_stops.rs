//! Provider stop reasons the loop handles itself: Anthropic `pause_turn`
//! (resend the assistant content and continue, never dispatching the
//! server-side tool locally).

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;

use hookbox::contract::Event;
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::HookChain;
use hookbox::{Agent, AgentConfig, StopReason};
use hookbox::{Workspace, workspace_tools};
use hookbox_tests::notes_workspace;
use serde_json::json;

#[tokio::test]
async fn pause_turn_resends_the_assistant_content_and_continues() {
    let dir = tempfile::tempdir().expect("tempdir");
    let usage = json!({"input_tokens": 50, "output_tokens": 10});
    let session = json!({"hookbox_replay": 1, "format": "anthropic-messages", "model": "claude-sonnet-4-5", "responses": [
        {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "pause_turn",
         "content": [
            {"type": "text", "text": "Let me search."},
            {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "hookbox"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": []}
         ], "usage": usage},
        {"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "end_turn",
         "content": [{"type": "text", "text": "Nothing found."}], "usage": usage}
    ]});
    let file = dir.path().join("pause_turn.json");
    std::fs::write(&file, session.to_string()).expect("write");
    let ws = notes_workspace();
    let provider = Arc::new(ReplayProvider::from_file(&file).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let agent = Agent::new(provider.clone(), tools, AgentConfig::default());
    let r = agent.run("search for hookbox", &mut HookChain::default()).await.expect("run");

    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(r.final_answer.as_deref(), Some("Nothing found."));
    assert!(!r.events.iter().any(|e| matches!(e, Event::BeforeToolCall { .. })), "the server tool is not dispatched");
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1]["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2, "the user turn and the paused assistant turn, nothing in between: {messages:?}");
    assert_eq!(messages[1]["role"], "assistant");
    assert!(messages[1].to_string().contains("server_tool_use"), "resent as it came: {}", messages[1]);
    let completes = r.events.iter().filter(|e| matches!(e, Event::IterationComplete { .. })).count();
    assert_eq!(completes, 1);
    assert_eq!(r.usage.input_tokens, 100, "both requests billed");
}

#[tokio::test]
async fn a_gemini_empty_turn_is_asked_once_more() {
    let dir = tempfile::tempdir().expect("tempdir");
    let body = |text: &str| {
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
               "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 3, "totalTokenCount": 15},
               "modelVersion": "gemini-2.5-flash", "responseId": "r"})
    };
    let session = json!({"hookbox_replay": 1, "format": "gemini", "model": "gemini-2.5-flash",
                         "responses": [body(""), body("Hello there."), body("never asked")]});
    let file = dir.path().join("gemini.json");
    std::fs::write(&file, session.to_string()).expect("write");
    let ws = notes_workspace();
    let provider = Arc::new(ReplayProvider::from_file(&file).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let r = Agent::new(provider.clone(), tools, AgentConfig::default())
        .run("hi", &mut HookChain::default())
        .await
        .expect("run");
    assert_eq!(r.final_answer.as_deref(), Some("Hello there."));
    assert_eq!(provider.requests().len(), 2, "one re-request, not more");
    assert_eq!(r.usage.input_tokens, 24, "both requests billed");
}
