//! The inject-message contract (seed 000, "the three-state contract"): a
//! queued message is delivered at the next turn boundary, or reported
//! undelivered when the run ends first, or attached to the error the run
//! raised. Never lost, never counted twice. And `abort` ends the run with
//! its reason and partial usage.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;

use hookbox::contract::Event;
use hookbox::providers::Message;
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::HookChain;
use hookbox::sandbox::HookRuntime;
use hookbox::sandbox::PluginOptions;
use hookbox::{Agent, AgentConfig, RunErrorInfo};
use hookbox::{Workspace, workspace_tools};
use hookbox_tests::{SCRIPTED, config, fixture, notes_workspace};
use serde_json::json;

struct Setup {
    agent: Agent,
    chain: HookChain,
    provider: Arc<ReplayProvider>,
    _ws: tempfile::TempDir,
}

fn scripted(session: &str, script: &[(&str, serde_json::Value)]) -> Setup {
    let ws = notes_workspace();
    let runtime = HookRuntime::new().expect("runtime");
    let plugin =
        runtime.load("scripted", SCRIPTED.as_ref(), config(script), PluginOptions::default()).expect("scripted").plugin;
    let provider = Arc::new(ReplayProvider::from_file(fixture(session)).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let agent = Agent::new(provider.clone(), tools, AgentConfig::default());
    Setup { agent, chain: HookChain::new(vec![Box::new(plugin.hook())]), provider, _ws: ws }
}

#[tokio::test]
async fn an_injection_at_the_last_boundary_is_reported_undelivered_not_lost() {
    // iteration-complete fires at every roundtrip's end; only the first is followed by a drain.
    let mut s =
        scripted("two_roundtrips.session.json", &[("iteration-complete", json!("inject-message:note {iteration}"))]);
    let r = s.agent.run("What do my notes say?", &mut s.chain).await.expect("run");
    assert_eq!(r.injected_messages, vec!["note 1".to_string()]);
    assert_eq!(r.undelivered_injections, vec!["note 2".to_string()]);
    // Delivered means the model saw it: the third request carries it as a user message
    // after the tool results, and no request carries the undelivered one.
    let requests = s.provider.requests();
    assert_eq!(requests.len(), 3);
    let third = requests[2].to_string();
    assert!(third.contains("note 1"), "{third}");
    assert!(requests.iter().all(|q| !q.to_string().contains("note 2")));
    let user_texts: Vec<&str> = r
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(user_texts, vec!["What do my notes say?", "note 1"]);
}

#[tokio::test]
async fn an_injection_in_a_run_without_tools_has_no_boundary_left() {
    let mut s = scripted("no_tools.session.json", &[("model-response", json!("inject-message:too late"))]);
    let r = s.agent.run("Capital of France?", &mut s.chain).await.expect("run");
    assert!(r.injected_messages.is_empty());
    assert_eq!(r.undelivered_injections, vec!["too late".to_string()]);
}

#[tokio::test]
async fn an_injection_at_run_start_is_delivered_before_the_first_request() {
    let mut s = scripted("no_tools.session.json", &[("run-start", json!("inject-message:be brief"))]);
    let r = s.agent.run("Capital of France?", &mut s.chain).await.expect("run");
    assert_eq!(r.injected_messages, vec!["be brief".to_string()]);
    assert!(r.undelivered_injections.is_empty());
    assert!(s.provider.requests()[0].to_string().contains("be brief"));
}

#[tokio::test]
async fn abort_ends_the_run_with_reason_partial_usage_and_attached_injections() {
    let mut s = scripted(
        "two_roundtrips.session.json",
        &[
            ("tool-call-result", json!("inject-message:queued {iteration}")),
            ("iteration-complete", json!("abort:budget exceeded")),
        ],
    );
    let err = s.agent.run("What do my notes say?", &mut s.chain).await.expect_err("the run is aborted");
    match &err.info {
        RunErrorInfo::Aborted { reason, plugin, event } => {
            assert_eq!(reason.as_deref(), Some("budget exceeded"));
            assert_eq!(plugin.as_deref(), Some("scripted"));
            assert_eq!(event.as_deref(), Some("iteration-complete"));
        }
        other => panic!("expected an abort, got {other:?}"),
    }
    let report = &err.report;
    // Aborted at the first iteration-complete: two requests were billed (100+150 in, 20+15 out).
    assert_eq!((report.usage.input_tokens, report.usage.output_tokens), (250, 35));
    assert_eq!(report.requests, 2);
    assert_eq!(report.iterations, 1);
    assert!(report.usage.cost > 0.0);
    // "queued 1" was delivered before request 2; nothing else was queued.
    assert_eq!(report.injected_messages, vec!["queued 1".to_string()]);
    assert!(report.undelivered_injections.is_empty());
    // run-end does not fire on an error.
    assert!(!report.events.iter().any(|e| matches!(e, Event::RunEnd { .. })));
    assert!(report.error.is_some());
    assert_eq!(s.provider.requests().len(), 2, "no request after the abort");
}

#[tokio::test]
async fn abort_at_before_tool_call_keeps_the_queue_on_the_error_and_runs_no_tool() {
    let mut s = scripted(
        "two_roundtrips.session.json",
        &[("tool-call-start", json!("inject-message:pending")), ("before-tool-call", json!("abort"))],
    );
    let err = s.agent.run("What do my notes say?", &mut s.chain).await.expect_err("aborted");
    assert!(matches!(err.info, RunErrorInfo::Aborted { reason: None, .. }));
    assert_eq!(err.report.undelivered_injections, vec!["pending".to_string()]);
    assert!(err.report.injected_messages.is_empty());
    assert_eq!(err.report.iterations, 0, "no iteration completed");
    assert_eq!(err.report.usage.input_tokens, 100, "partial usage: the one request sent");
    assert!(!err.report.events.iter().any(|e| matches!(e, Event::ToolCallResult { .. })), "the tool never ran");
    // The history still answers the call the model made.
    let answered = err
        .report
        .messages
        .iter()
        .any(|m| matches!(m, Message::ToolResults { results } if results.len() == 1 && results[0].is_error));
    assert!(answered, "{:?}", err.report.messages);
}

#[tokio::test]
async fn directives_outside_their_column_are_ignored_with_a_note() {
    let mut s = scripted(
        "two_roundtrips.session.json",
        &[("tool-call-start", json!("skip-tool:nope")), ("run-end", json!("pause"))],
    );
    let r = s.agent.run("What do my notes say?", &mut s.chain).await.expect("run");
    // skip-tool at tool-call-start is ignored: both tools ran.
    let ran: Vec<bool> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallResult { success, .. } => Some(*success),
            _ => None,
        })
        .collect();
    assert_eq!(ran, vec![true, true]);
    let ignored: Vec<_> = r.directives.iter().filter(|d| !d.honoured).collect();
    assert_eq!(ignored.len(), 3, "2 skip-tools and a pause at run-end: {:?}", r.directives);
    assert!(ignored.iter().all(|d| d.note.as_deref().is_some_and(|n| n.contains("not valid"))));
    assert!(r.undelivered_injections.is_empty() && r.injected_messages.is_empty());
}

/// Seed 000: "`inject_message` is valid anywhere". At `final-answer` and
/// `run-end` the text is queued; no turn boundary follows, so it is reported
/// undelivered, in order, never lost.
#[tokio::test]
async fn an_injection_at_final_answer_or_run_end_is_reported_undelivered() {
    let mut s = scripted(
        "two_roundtrips.session.json",
        &[("final-answer", json!("inject-message:at final")), ("run-end", json!("inject-message:at end"))],
    );
    let r = s.agent.run("What do my notes say?", &mut s.chain).await.expect("run");
    assert!(r.injected_messages.is_empty());
    assert_eq!(r.undelivered_injections, vec!["at final".to_string(), "at end".to_string()]);
    assert!(r.directives.iter().all(|d| d.honoured), "{:?}", r.directives);
}

/// Seed 000, `inject_message`: "empty text raises". A plugin's blank
/// injection is an `invalid-output` failure, never an empty user message.
#[tokio::test]
async fn a_plugins_blank_injection_is_an_invalid_output_failure() {
    let mut s = scripted("two_roundtrips.session.json", &[("iteration-start", json!("inject-message: "))]);
    let r = s.agent.run("What do my notes say?", &mut s.chain).await.expect("run");
    assert!(r.injected_messages.is_empty() && r.undelivered_injections.is_empty());
    assert!(!r.hook_failures.is_empty(), "{:?}", r.hook_failures);
    assert!(r.hook_failures.iter().all(|f| f.kind == hookbox::sandbox::FailureKind::InvalidOutput));
    let requests = s.provider.requests();
    assert!(requests.iter().all(|q| !q.to_string().contains(r#""content":" ""#)), "no blank user message sent");
}
