//! Seed 003's points and payloads (issue 14 item 5), host side: skipping a
//! later model call ends the turn; `tool-call-result` carries the call's
//! effective arguments, the whole result when the preview is 0, and whether
//! a reported cost is estimated; `final-answer` carries the response's tool
//! calls and reasoning. The hooks are native (`ScriptedHook`); WASM plugins
//! see these fields and send `skip-model-call` from WIT 0.2.0 on.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;

use async_trait::async_trait;
use hookbox::contract::{Event, EventKind};
use hookbox::providers::replay::ReplayProvider;
use hookbox::providers::{Message, ToolSpec};
use hookbox::sandbox::testing::ScriptedHook;
use hookbox::sandbox::{HookChain, HookHandler};
use hookbox::{Agent, AgentConfig, Directive, StopReason, Tool, ToolOutput, Workspace, workspace_tools};
use hookbox_tests::{DEMO_PROMPT, demo_session, demo_workspace, session_file};
use serde_json::json;

fn chain(hook: ScriptedHook) -> HookChain {
    HookChain::new(vec![Box::new(hook) as Box<dyn HookHandler>])
}

/// Seed 003: "Runs before each model call. Return agents.skip ... to end the
/// turn without calling the model (stop_reason="skipped")" — here at the
/// second model call, after the tools ran.
#[tokio::test]
async fn skipping_a_later_model_call_ends_the_turn_without_calling_the_model() {
    let ws = demo_workspace();
    let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let agent = Agent::new(provider.clone(), tools, AgentConfig::default());
    let hook = ScriptedHook::new("budget")
        .on(EventKind::IterationStart, Directive::Continue)
        .on(EventKind::IterationStart, Directive::SkipModelCall("Enough for today.".into()));
    let r = agent.run(DEMO_PROMPT, &mut chain(hook)).await.expect("run");
    assert_eq!(r.stop_reason, StopReason::Skipped);
    assert_eq!(r.final_answer.as_deref(), Some("Enough for today."));
    assert_eq!(provider.requests().len(), 1, "the follow-up request was never sent");
    assert!(ws.path().join("test.txt").exists(), "the tools of the first response ran");
    assert!(matches!(r.messages.last(), Some(Message::ToolResults { .. })), "the history ends with the tool results");
    assert!(matches!(r.events.last(), Some(Event::RunEnd { .. })), "run-end still fires");
    assert!(!r.events.iter().any(|e| matches!(e, Event::FinalAnswer { .. } | Event::IterationComplete { .. })));
    // Outside iteration-start it is ignored, and recorded as such.
    let agent = Agent::new(
        Arc::new(ReplayProvider::from_file(demo_session()).expect("session")),
        workspace_tools(Arc::new(Workspace::open(demo_workspace().path()).expect("workspace"))),
        AgentConfig::default(),
    );
    let hook = ScriptedHook::new("late").on(EventKind::ModelResponse, Directive::SkipModelCall("no".into()));
    let r = agent.run(DEMO_PROMPT, &mut chain(hook)).await.expect("run");
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert!(r.directives.iter().any(|d| !d.honoured && d.directive.action() == "skip-model-call"));
}

/// A tool that reports an estimated cost.
struct Estimated;

#[async_trait]
impl Tool for Estimated {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "slow".into(),
            description: "estimates its cost".into(),
            parameters: json!({"type": "object"}),
        }
    }
    async fn call(&self, arguments: &serde_json::Value) -> ToolOutput {
        ToolOutput {
            content: format!("ran with {arguments}"),
            success: true,
            reported_cost: Some(0.5),
            cost_estimated: true,
        }
    }
}

/// Seed 000: `result_data` too when `tool_result_preview_chars=0`, and
/// `tool_reported_cost` / `tool_reported_cost_estimated` when the tool
/// reported spend; seed 003: the tool call's (effective) arguments.
#[tokio::test]
async fn tool_call_result_carries_the_effective_arguments_the_whole_result_and_the_cost_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = session_file(dir.path(), "s.json", &[None, Some("done")]);
    let run = |preview: usize| {
        let file = file.clone();
        async move {
            let provider = Arc::new(ReplayProvider::from_file(&file).expect("session"));
            let config = AgentConfig { tool_result_preview_chars: preview, ..AgentConfig::default() };
            let agent = Agent::new(provider, vec![Arc::new(Estimated) as Arc<dyn Tool>], config);
            let hook = ScriptedHook::new("rewrite")
                .on(EventKind::BeforeToolCall, Directive::ReplaceArguments(r#"{"n": 2}"#.into()));
            agent.run("go", &mut chain(hook)).await.expect("run")
        }
    };
    let r = run(0).await;
    let Some(Event::ToolCallResult { arguments, result_data, reported_cost, cost_estimated, result, .. }) =
        r.events.iter().find(|e| matches!(e, Event::ToolCallResult { .. }))
    else {
        panic!("no tool-call-result")
    };
    assert_eq!(arguments, r#"{"n": 2}"#, "the arguments the call ran with");
    assert_eq!(result_data.as_deref(), Some(r#"ran with {"n":2}"#), "the whole result at preview 0");
    assert_eq!(result, r#"ran with {"n":2}"#);
    assert_eq!((*reported_cost, *cost_estimated), (Some(0.5), true));
    let r = run(5).await;
    let Some(Event::ToolCallResult { result_data, result, .. }) =
        r.events.iter().find(|e| matches!(e, Event::ToolCallResult { .. }))
    else {
        panic!("no tool-call-result")
    };
    assert_eq!((result_data, result.as_str()), (&None, "ran w"), "a preview, and no result_data");
}

/// Seed 003's `PostAgentTurn` has the response's `tool_calls` and
/// `reasoning`: a final answer cut by the token limit carries the calls it
/// did not run, and an answer with thinking carries its reasoning.
#[tokio::test]
async fn final_answer_carries_the_responses_tool_calls_and_reasoning() {
    let cut = hookbox_tests::repo_root()
        .join("crates/providers/testdata/provider-recordings/04_anthropic_max_tokens_truncated_tool_use.json");
    let agent =
        Agent::new(Arc::new(ReplayProvider::from_file(&cut).expect("recording")), Vec::new(), AgentConfig::default());
    let r = agent.run("calculate", &mut HookChain::default()).await.expect("run");
    let Some(Event::FinalAnswer { tool_calls, .. }) = r.events.iter().find(|e| matches!(e, Event::FinalAnswer { .. }))
    else {
        panic!("no final-answer")
    };
    assert_eq!(tool_calls.len(), 2, "the two cut calls, not run: {tool_calls:?}");
    assert_eq!(r.stop_reason, StopReason::MaxTokens);

    let dir = tempfile::tempdir().expect("tempdir");
    let thinking = dir.path().join("thinking.json");
    let body = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "thinking", "thinking": "The user wants a greeting.", "signature": "sig"},
                    {"type": "text", "text": "Hello."}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 5}});
    let session =
        json!({"hookbox_replay": 1, "format": "anthropic-messages", "model": "claude-sonnet-4-5", "responses": [body]});
    std::fs::write(&thinking, session.to_string()).expect("write");
    let agent = Agent::new(
        Arc::new(ReplayProvider::from_file(&thinking).expect("session")),
        Vec::new(),
        AgentConfig::default(),
    );
    let r = agent.run("hi", &mut HookChain::default()).await.expect("run");
    let Some(Event::FinalAnswer { reasoning, tool_calls, .. }) =
        r.events.iter().find(|e| matches!(e, Event::FinalAnswer { .. }))
    else {
        panic!("no final-answer")
    };
    assert_eq!(reasoning, "The user wants a greeting.");
    assert!(tool_calls.is_empty());
}
