//! Event order and iteration numbers, checked against CONTRACT.md and seed
//! 000 ("How iterations are numbered"), for a run with no tools and a run
//! with two tool roundtrips. The audit-log plugin's own log shows the guest
//! saw the same sequence the host recorded.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;

use hookbox::contract::Event;
use hookbox::providers::Usage;
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::HookChain;
use hookbox::sandbox::HookRuntime;
use hookbox::sandbox::PluginOptions;
use hookbox::{Agent, AgentConfig, RunResult};
use hookbox::{Workspace, workspace_tools};
use hookbox_tests::{AUDIT_LOG, fixture, notes_workspace};

async fn run_with_audit(session: &str, prompt: &str) -> RunResult {
    let ws = notes_workspace();
    let runtime = HookRuntime::new().expect("runtime");
    let audit = runtime
        .load("audit-log", AUDIT_LOG.as_ref(), Default::default(), PluginOptions::default())
        .expect("audit-log")
        .plugin;
    let provider = Arc::new(ReplayProvider::from_file(fixture(session)).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let agent = Agent::new(provider, tools, AgentConfig::default());
    let mut chain = HookChain::new(vec![Box::new(audit.hook())]);
    agent.run(prompt, &mut chain).await.expect("run completes")
}

/// `(type, iteration)` of every event, iteration 0 where the event has none.
fn sequence(r: &RunResult) -> Vec<(String, u32)> {
    r.events.iter().map(|e| (e.kind().to_string(), e.iteration().unwrap_or(0))).collect()
}

fn seq(items: &[(&str, u32)]) -> Vec<(String, u32)> {
    items.iter().map(|(k, i)| (k.to_string(), *i)).collect()
}

/// The event names the audit-log guest logged, in order.
fn audited(r: &RunResult) -> Vec<String> {
    r.hook_logs
        .iter()
        .filter(|l| l.plugin == "audit-log")
        .filter_map(|l| l.message.split_whitespace().next().map(str::to_string))
        .collect()
}

fn completes(r: &RunResult) -> Vec<(u32, Usage, Vec<String>)> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::IterationComplete { iteration, usage, tools_called, .. } => {
                Some((*iteration, *usage, tools_called.clone()))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_run_with_no_tools_emits_exactly_one_iteration_complete() {
    let r = run_with_audit("no_tools.session.json", "What is the capital of France?").await;
    let expected = seq(&[
        ("run-start", 0),
        ("iteration-start", 1),
        ("model-response", 1),
        ("iteration-complete", 1),
        ("final-answer", 0),
        ("run-end", 0),
    ]);
    assert_eq!(sequence(&r), expected);
    let c = completes(&r);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].0, 1);
    assert!(c[0].2.is_empty(), "no tools called");
    assert_eq!((c[0].1.input_tokens, c[0].1.output_tokens), (20, 8));
    assert_eq!(r.iterations, 1);
    assert_eq!(r.final_answer.as_deref(), Some("Paris is the capital of France."));
    let names: Vec<String> = expected.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(audited(&r), names, "the guest saw every event, in order");
    assert!(matches!(r.events.last(), Some(Event::RunEnd { iterations: 1, error: None, .. })));
}

#[tokio::test]
async fn two_tool_roundtrips_announce_each_iteration_twice() {
    let r = run_with_audit("two_roundtrips.session.json", "What do my notes say?").await;
    let expected = seq(&[
        ("run-start", 0),
        ("iteration-start", 1),
        ("model-response", 1),
        ("tool-call-start", 1),
        ("before-tool-call", 1),
        ("tool-call-result", 1),
        ("iteration-start", 1), // the follow-up request of roundtrip 1
        ("model-response", 1),
        ("iteration-complete", 1),
        ("tool-call-start", 2), // the follow-up asked for more tools: iteration 2
        ("before-tool-call", 2),
        ("tool-call-result", 2),
        ("iteration-start", 2),
        ("model-response", 2),
        ("iteration-complete", 2),
        ("final-answer", 0),
        ("run-end", 0),
    ]);
    assert_eq!(sequence(&r), expected);
    let names: Vec<String> = expected.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(audited(&r), names, "the guest saw every event, in order");

    // loop_counter counts requests: 1, 2, 3.
    let counters: Vec<u32> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::IterationStart { loop_counter, .. } => Some(*loop_counter),
            _ => None,
        })
        .collect();
    assert_eq!(counters, vec![1, 2, 3]);

    // Usage per iteration-complete covers everything billed since the previous one:
    // the first carries requests 1 and 2 (100+150 in, 20+15 out), the second request 3.
    let c = completes(&r);
    assert_eq!(c.len(), 2);
    assert_eq!((c[0].0, c[0].1.input_tokens, c[0].1.output_tokens), (1, 250, 35));
    assert_eq!(c[0].2, vec!["list_dir".to_string()]);
    assert_eq!((c[1].0, c[1].1.input_tokens, c[1].1.output_tokens), (2, 200, 10));
    assert_eq!(c[1].2, vec!["read_file".to_string()]);
    // The events sum to the run's usage.
    assert_eq!(c[0].1.input_tokens + c[1].1.input_tokens, r.usage.input_tokens);
    assert!((c[0].1.cost + c[1].1.cost - r.usage.cost).abs() < 1e-12);
    assert!(r.usage.cost > 0.0, "claude-sonnet-4 is priced");

    assert_eq!(r.iterations, 2);
    assert_eq!(r.requests, 3);
    assert!(matches!(r.events.last(), Some(Event::RunEnd { iterations: 2, .. })));
    // The tools really ran in the workspace: read_file returned the file's text.
    let read = r.events.iter().find_map(|e| match e {
        Event::ToolCallResult { tool_name, result, success, .. } if tool_name == "read_file" => {
            Some((result.clone(), *success))
        }
        _ => None,
    });
    assert_eq!(read, Some(("remember the milk\n".to_string(), true)));
}
