//! A response cut off by the token limit may carry a tool call whose
//! arguments were cut too (recorded: Anthropic via Bedrock, stop_reason
//! `max_tokens`, the second tool_use has `input: {}` although its schema
//! requires a field). None of its tool calls is run; the run ends with
//! stop reason `max_tokens`.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;

use hookbox::contract::Event;
use hookbox::providers::Message;
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::HookChain;
use hookbox::{Agent, AgentConfig, StopReason};
use hookbox::{Workspace, workspace_tools};
use hookbox_tests::{notes_workspace, repo_root};

#[tokio::test]
async fn tool_calls_of_a_truncated_response_are_never_run() {
    let ws = notes_workspace();
    let session = repo_root()
        .join("crates/providers/testdata/provider-recordings/04_anthropic_max_tokens_truncated_tool_use.json");
    let provider = Arc::new(ReplayProvider::from_file(session).expect("recording"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let agent = Agent::new(provider.clone(), tools, AgentConfig::default());
    let r = agent.run("What's the weather in SF, and 2+2?", &mut HookChain::default()).await.expect("run");

    assert_eq!(r.stop_reason, StopReason::MaxTokens);
    assert_eq!(r.final_answer.as_deref(), Some("Okay, let's get the weather and do that calculation."));
    assert!(
        !r.events.iter().any(|e| matches!(e, Event::ToolCallStart { .. } | Event::BeforeToolCall { .. })),
        "no tool call is announced or dispatched: {:?}",
        r.events
    );
    // The model-response event still shows what the model emitted.
    let emitted = r.events.iter().find_map(|e| match e {
        Event::ModelResponse { tool_calls, .. } => Some(tool_calls.len()),
        _ => None,
    });
    assert_eq!(emitted, Some(2));
    assert_eq!(provider.requests().len(), 1, "no follow-up request");
    assert!(matches!(r.messages.last(), Some(Message::Assistant { tool_calls, .. }) if tool_calls.is_empty()));
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (435, 100));
}
