//! The rewrite and control directives (seed 003 through CONTRACT.md):
//! retry at model-response and final-answer (bounded by max_iterations),
//! replace-arguments / skip-tool history rules, replace-result,
//! replace-user-content, skip-run, replace-content, and the example plugins
//! structured-output, redact-secrets and budget-guard.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hookbox::contract::Event;
use hookbox::providers::Message;
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::HookChain;
use hookbox::sandbox::HookHandler;
use hookbox::sandbox::HookRuntime;
use hookbox::sandbox::PluginOptions;
use hookbox::{Agent, AgentConfig, RunErrorInfo, StopReason};
use hookbox::{Workspace, workspace_tools};
use hookbox_tests::{
    BUDGET_GUARD, DEMO_PROMPT, REDACT_SECRETS, SCRIPTED, STRUCTURED_OUTPUT, config, demo_session, demo_workspace,
    fixture, wire_assistant, wire_tool_results,
};
use serde_json::json;

/// A plugin to load: name, component path, config pairs.
type PluginSpec<'a> = (&'a str, &'a str, Vec<(&'a str, serde_json::Value)>);

fn chain(plugins: &[PluginSpec<'_>]) -> HookChain {
    let runtime = HookRuntime::new().expect("runtime");
    let hooks = plugins
        .iter()
        .map(|(name, path, cfg)| {
            let hookbox::sandbox::LoadedPlugin { plugin: p, .. } = runtime
                .load(name, path.as_ref(), config(cfg), PluginOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            Box::new(p.hook()) as Box<dyn HookHandler>
        })
        .collect();
    HookChain::new(hooks)
}

fn agent(session: &Path, ws: &Path, config: AgentConfig) -> (Agent, Arc<ReplayProvider>) {
    let provider = Arc::new(ReplayProvider::from_file(session).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws).expect("workspace")));
    (Agent::new(provider.clone(), tools, config), provider)
}

/// An OpenAI session whose responses are plain texts.
fn texts_session(dir: &Path, texts: &[&str]) -> PathBuf {
    let bodies: Vec<_> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            json!({"id": format!("c{i}"), "object": "chat.completion", "model": "gpt-4o",
                   "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": t}}],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
        })
        .collect();
    let path = dir.join("texts.json");
    let s = json!({"hookbox_replay": 1, "format": "openai-chat", "model": "gpt-4o", "responses": bodies});
    std::fs::write(&path, s.to_string()).expect("write");
    path
}

#[tokio::test]
async fn a_hook_that_keeps_retrying_cannot_loop_for_ever() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let session = texts_session(dir.path(), &["a", "b", "c", "d", "e", "f"]);
    let (agent, provider) = agent(&session, ws.path(), AgentConfig { max_iterations: 3, ..AgentConfig::default() });
    let mut hooks = chain(&[("scripted", SCRIPTED, vec![("model-response", json!("retry:try again"))])]);
    let err = agent.run("hi", &mut hooks).await.expect_err("the iteration limit stops the retries");
    assert!(matches!(err.info, RunErrorInfo::MaxIterations { limit: 3, retries: 3 }), "{err}");
    // Seed 003: a retried call still counts; the error says the retries did it.
    assert!(err.to_string().contains("hooks asked for 3 retries, and each counts toward the limit"), "{err}");
    assert_eq!(provider.requests().len(), 3, "iteration 1 plus two retries");
    // Each retry dropped the response and sent the feedback.
    let last = provider.requests()[2].to_string();
    assert_eq!(last.matches("try again").count(), 2, "{last}");
    assert!(!last.contains("\"a\""), "the dropped responses are not in the history: {last}");
}

#[tokio::test]
async fn structured_output_asks_for_a_correction_then_accepts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let session = texts_session(dir.path(), &["The city is Paris.", "```json\n{\"city\": \"Paris\"}\n```"]);
    let (agent, provider) = agent(&session, ws.path(), AgentConfig::default());
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let mut hooks = chain(&[("structured-output", STRUCTURED_OUTPUT, vec![("schema", schema)])]);
    let r = agent.run("Which city?", &mut hooks).await.expect("run");
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(r.final_answer.as_deref(), Some("```json\n{\"city\": \"Paris\"}\n```"));
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].to_string().contains("JSON Schema"), "schema_in_prompt");
    assert!(requests[1].to_string().contains("does not match"), "the correction carries the errors");
    let finals = r.events.iter().filter(|e| matches!(e, Event::FinalAnswer { .. })).count();
    assert_eq!(finals, 2, "the dropped answer and the accepted one");
    let completes = r.events.iter().filter(|e| matches!(e, Event::IterationComplete { .. })).count();
    assert_eq!(completes, 1, "a run without tools still emits exactly one iteration-complete");
    assert!(r.directives.iter().any(|d| d.directive.action() == "retry" && d.honoured));
}

/// Seed 003: at its limit, with `on_limit` "reject", the hook "raises
/// ValueError, which fails the turn": the run ends with an error, not a
/// successful rejected answer.
#[tokio::test]
async fn structured_output_fails_the_run_at_its_limit_when_told_to_reject() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let session = texts_session(dir.path(), &["nope", "still nope", "never"]);
    let (agent, provider) = agent(&session, ws.path(), AgentConfig::default());
    let schema = json!({"type": "object", "required": ["city"]});
    let cfg = vec![("schema", schema), ("max_retries", json!(1)), ("on_limit", json!("reject"))];
    let err = agent
        .run("Which city?", &mut chain(&[("structured-output", STRUCTURED_OUTPUT, cfg)]))
        .await
        .expect_err("the turn fails");
    assert!(
        matches!(&err.info, RunErrorInfo::Aborted { reason: Some(r), plugin: Some(p), .. }
            if r.contains("after 1 correction") && p == "structured-output"),
        "{err}"
    );
    assert_eq!(provider.requests().len(), 2);
}

/// Seed 003 (StructuredOutput): at the agent's `max_iterations` the hook
/// accepts the last answer — it reads the limit from the event context
/// (WIT 0.2.0) — instead of asking for a correction that would fail the run
/// with max-iterations and lose the answer; with `on_limit = "reject"` the
/// turn fails with the hook's error instead.
#[tokio::test]
async fn structured_output_accepts_the_last_answer_at_max_iterations() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let session = texts_session(dir.path(), &["nope", "still nope", "never"]);
    let schema = json!({"type": "object", "required": ["city"]});
    // max_retries 5 would ask for more corrections than max_iterations = 2 allows.
    let config = AgentConfig { max_iterations: 2, ..AgentConfig::default() };
    let (agent, provider) = agent(&session, ws.path(), config.clone());
    let cfg = vec![("schema", schema.clone()), ("max_retries", json!(5))];
    let r = agent.run("Which city?", &mut chain(&[("structured-output", STRUCTURED_OUTPUT, cfg)])).await.expect("run");
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(r.final_answer.as_deref(), Some("still nope"), "the last answer the run could get");
    assert_eq!(provider.requests().len(), 2, "one correction: iteration 1 + 1 retry = max_iterations");

    let (agent, provider) = self::agent(&session, ws.path(), config);
    let cfg = vec![("schema", schema), ("max_retries", json!(5)), ("on_limit", json!("reject"))];
    let err = agent
        .run("Which city?", &mut chain(&[("structured-output", STRUCTURED_OUTPUT, cfg)]))
        .await
        .expect_err("the turn fails");
    assert!(
        matches!(&err.info, RunErrorInfo::Aborted { reason: Some(r), .. } if r.contains("max_iterations leaves no room")),
        "{err}"
    );
    assert_eq!(provider.requests().len(), 2);
}

/// Seed 003: "Set enabled to False to let answers through unchecked." And a
/// config key the plugin does not know (a typo) is refused, not ignored.
#[tokio::test]
async fn structured_output_can_be_disabled_and_refuses_unknown_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let session = texts_session(dir.path(), &["not JSON at all"]);
    let schema = json!({"type": "object", "required": ["city"]});
    let (agent, provider) = agent(&session, ws.path(), AgentConfig::default());
    let cfg = vec![("schema", schema.clone()), ("enabled", json!(false))];
    let r = agent.run("Which city?", &mut chain(&[("structured-output", STRUCTURED_OUTPUT, cfg)])).await.expect("run");
    assert_eq!(r.final_answer.as_deref(), Some("not JSON at all"), "unchecked");
    assert!(r.directives.is_empty() && r.hook_failures.is_empty(), "{:?} {:?}", r.directives, r.hook_failures);
    assert!(!provider.requests()[0].to_string().contains("JSON Schema"), "no schema in the prompt when disabled");

    let (agent, _) = self::agent(&session, ws.path(), AgentConfig::default());
    let cfg = vec![("schema", schema), ("enable", json!(false))];
    let r = agent.run("Which city?", &mut chain(&[("structured-output", STRUCTURED_OUTPUT, cfg)])).await.expect("run");
    assert!(
        r.hook_failures.iter().any(|f| f.message.contains("unknown config key `enable`")),
        "a misconfigured plugin fails visibly: {:?}",
        r.hook_failures
    );
}

#[tokio::test]
async fn budget_guard_aborts_before_the_tools_run() {
    let ws = demo_workspace();
    let (agent, provider) = agent(&demo_session(), ws.path(), AgentConfig::default());
    // The first response costs $0.0006375 (71 in, 46 out at gpt-4o prices).
    let mut hooks = chain(&[("budget-guard", BUDGET_GUARD, vec![("max_cost_usd", json!(0.0005))])]);
    let err = agent.run(DEMO_PROMPT, &mut hooks).await.expect_err("over budget");
    assert!(matches!(&err.info, RunErrorInfo::Aborted { reason: Some(r), .. } if r.contains("budget")), "{err}");
    assert!(ws.path().join(".env").exists() && !ws.path().join("test.txt").exists(), "no tool ran");
    assert_eq!(provider.requests().len(), 1);
    assert!((err.report.usage.cost - 0.0006375).abs() < 1e-9, "partial cost: {}", err.report.usage.cost);
}

#[tokio::test]
async fn redact_secrets_keeps_keys_from_the_model() {
    let ws = tempfile::tempdir().expect("tempdir");
    std::fs::write(ws.path().join("notes.txt"), "remember the milk\nOPENAI_API_KEY=sk-live-abcdefghijklmnop1234\n")
        .expect("write");
    let (agent, provider) = agent(&fixture("two_roundtrips.session.json"), ws.path(), AgentConfig::default());
    let mut hooks = chain(&[("redact-secrets", REDACT_SECRETS, vec![])]);
    let r = agent.run("What do my notes say?", &mut hooks).await.expect("run");
    let third = provider.requests()[2].to_string();
    assert!(!third.contains("sk-live-abcdefghijklmnop1234"), "{third}");
    assert!(third.contains(r#"OPENAI_API_KEY=\"[REDACTED]\""#), "{third}");
    assert!(third.contains("remember the milk"), "the rest of the result is kept");
    assert!(r.hook_logs.iter().any(|l| l.message.contains("redacted 1 secret")));
}

#[tokio::test]
async fn replace_arguments_runs_the_tool_with_them_and_the_history_shows_them() {
    let ws = demo_workspace();
    let (agent, provider) = agent(&demo_session(), ws.path(), AgentConfig::default());
    let cfg = vec![
        ("before-tool-call", json!("replace-arguments:{\"path\": \"other.txt\"}")),
        ("only_tool", json!("create_file")),
    ];
    let r = agent.run(DEMO_PROMPT, &mut chain(&[("scripted", SCRIPTED, cfg)])).await.expect("run");
    assert!(ws.path().join("other.txt").exists() && !ws.path().join("test.txt").exists());
    let second = &provider.requests()[1];
    let calls = &wire_assistant(second)["tool_calls"];
    assert_eq!(
        calls[1]["function"]["arguments"], "{\"path\": \"other.txt\"}",
        "the history shows the hook's arguments"
    );
    assert_eq!(calls[0]["function"]["arguments"], "{\"path\": \".env\"}", "the other call keeps the model's");
    assert!(r.hook_failures.is_empty());
}

/// Seed 003: "The history's tool call entry shows the arguments the hook
/// set; a skipped call keeps the model's." With two hooks, the first
/// rewriting the arguments and the second skipping the call, the history
/// keeps the model's arguments (issue 14 item 5).
#[tokio::test]
async fn a_call_skipped_after_an_earlier_hook_rewrote_it_keeps_the_models_arguments() {
    let ws = demo_workspace();
    let (agent, provider) = agent(&demo_session(), ws.path(), AgentConfig::default());
    let rewrite = vec![("before-tool-call", json!("replace-arguments:{\"path\": \"other.txt\"}"))];
    let skip = vec![("before-tool-call", json!("skip-tool:not now")), ("only_tool", json!("create_file"))];
    let r = agent
        .run(DEMO_PROMPT, &mut chain(&[("rewrite", SCRIPTED, rewrite), ("skip", SCRIPTED, skip)]))
        .await
        .expect("run");
    let second = &provider.requests()[1];
    let calls = &wire_assistant(second)["tool_calls"];
    assert_eq!(calls[1]["function"]["arguments"], "{\"path\": \"test.txt\"}", "the skipped call keeps the model's");
    assert_eq!(calls[0]["function"]["arguments"], "{\"path\": \"other.txt\"}", "the call that ran shows the rewrite");
    assert!(!ws.path().join("test.txt").exists() && !ws.path().join("other.txt").exists(), "create_file was skipped");
    assert!(r.hook_failures.is_empty(), "{:?}", r.hook_failures);
}

#[tokio::test]
async fn skip_tool_keeps_the_models_arguments_and_replace_result_changes_what_the_model_gets() {
    let ws = demo_workspace();
    let (agent, provider) = agent(&demo_session(), ws.path(), AgentConfig::default());
    let cfg = vec![
        ("before-tool-call", json!("skip-tool:not now")),
        ("tool-call-result", json!("replace-result:hidden {tool}")),
    ];
    agent.run(DEMO_PROMPT, &mut chain(&[("scripted", SCRIPTED, cfg)])).await.expect("run");
    let second = &provider.requests()[1];
    assert_eq!(wire_assistant(second)["tool_calls"][0]["function"]["arguments"], "{\"path\": \".env\"}");
    let results = wire_tool_results(second);
    assert_eq!(results[0].1, "hidden delete_file");
    assert_eq!(results[1].1, "hidden create_file");
}

#[tokio::test]
async fn skip_run_ends_before_any_model_call() {
    let ws = demo_workspace();
    let (agent, provider) = agent(&demo_session(), ws.path(), AgentConfig::default());
    let r = agent
        .run(DEMO_PROMPT, &mut chain(&[("scripted", SCRIPTED, vec![("run-start", json!("skip-run:not today"))])]))
        .await
        .expect("run");
    assert_eq!(r.stop_reason, StopReason::Skipped);
    assert_eq!(r.final_answer.as_deref(), Some("not today"));
    assert!(provider.requests().is_empty());
}

#[tokio::test]
async fn replace_user_content_and_replace_content_rewrite_the_conversation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let session = texts_session(dir.path(), &["original answer"]);
    let (agent, provider) = agent(&session, ws.path(), AgentConfig::default());
    let cfg = vec![
        ("run-start", json!("replace-user-content:rewritten prompt")),
        ("final-answer", json!("replace-content:rewritten answer")),
    ];
    let r = agent.run("original prompt", &mut chain(&[("scripted", SCRIPTED, cfg)])).await.expect("run");
    let first = provider.requests()[0].to_string();
    assert!(first.contains("rewritten prompt") && !first.contains("original prompt"), "{first}");
    assert_eq!(r.final_answer.as_deref(), Some("rewritten answer"));
    assert!(matches!(r.messages.last(), Some(Message::Assistant { content, .. }) if content == "rewritten answer"));
}
