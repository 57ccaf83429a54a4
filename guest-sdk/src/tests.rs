//! Unit tests of the pure helpers (no host calls: on a native target the
//! host imports are stubs that panic).

use serde::Deserialize;

use crate::config::parse_string_list;
use crate::*;

fn usage() -> Usage {
    Usage { input_tokens: 10, output_tokens: 5, cache_read_tokens: 0, cache_write_tokens: 0, cost_usd: 0.25 }
}

fn call(arguments: &str) -> ToolCall {
    ToolCall { id: "call_1".into(), name: "read_file".into(), arguments: arguments.into() }
}

/// One event of each kind, in firing order.
fn all_events() -> Vec<Event> {
    let text = vec![ContentBlock::Text("hi".into())];
    let tool = ToolCallEvent { iteration: 3, call: call(r#"{"path": "a.txt"}"#) };
    vec![
        Event::RunStart(RunStart {
            run_id: "r".into(),
            session_id: "s".into(),
            model: "m".into(),
            provider: "replay".into(),
            user_content: text.clone(),
        }),
        Event::IterationStart(IterationStart { iteration: 1, loop_counter: 1 }),
        Event::RequestStart(RequestStart {
            request_index: 1,
            iteration: 2,
            attempt: 1,
            purpose: "initial".into(),
            model: "m".into(),
            provider: "replay".into(),
        }),
        Event::ModelResponse(ModelResponse {
            iteration: 2,
            text: "hi".into(),
            content: text.clone(),
            tool_calls: vec![tool.call.clone()],
            reasoning: String::new(),
            finish_reason: FinishReason::ToolCall,
            usage: Some(usage()),
        }),
        Event::ToolCallStart(tool.clone()),
        Event::BeforeToolCall(tool),
        Event::ToolCallResult(ToolCallResult {
            iteration: 4,
            tool_name: "read_file".into(),
            tool_call_id: "call_1".into(),
            result: "ok".into(),
            truncated: false,
            success: true,
            duration_ms: 3,
            reported_cost: None,
            cost_estimated: false,
            arguments: "{}".into(),
            result_data: None,
        }),
        Event::IterationComplete(IterationComplete {
            iteration: 5,
            usage: usage(),
            tools_called: vec!["read_file".into()],
            stop_reason: FinishReason::Stop,
        }),
        Event::FinalAnswer(FinalAnswer {
            text: "hi".into(),
            content: text,
            finish_reason: FinishReason::Stop,
            usage: usage(),
            tool_calls: Vec::new(),
            reasoning: String::new(),
        }),
        Event::RunEnd(RunEnd { iterations: 1, usage: usage(), error: None }),
    ]
}

#[test]
fn event_names_are_kebab_case_in_firing_order() {
    let names: Vec<_> = all_events().iter().map(event_name).collect();
    assert_eq!(names, EVENT_NAMES);
}

#[test]
fn event_iteration_and_tool_name() {
    let iterations: Vec<_> = all_events().iter().map(event_iteration).collect();
    assert_eq!(iterations, [None, Some(1), Some(2), Some(2), Some(3), Some(3), Some(4), Some(5), None, None]);
    let tools: Vec<_> = all_events().iter().map(|e| event_tool_name(e).map(str::to_owned)).collect();
    let read = Some("read_file".to_owned());
    assert_eq!(tools, [None, None, None, None, read.clone(), read.clone(), read, None, None, None]);
}

#[test]
fn names_of_directives_and_finish_reasons() {
    assert_eq!(directive_name(&directive::skip_tool("no")), "skip-tool");
    assert_eq!(directive_name(&Directive::Continue), "continue");
    assert_eq!(directive_name(&directive::replace_user_content("x")), "replace-user-content");
    assert_eq!(finish_reason_name(FinishReason::ToolCall), "tool-call");
    assert_eq!(finish_reason_name(FinishReason::ContentFilter), "content-filter");
}

#[test]
fn directive_constructors() {
    assert_eq!(directive::skip_tool("no"), Directive::SkipTool(Some("no".into())));
    assert_eq!(directive::inject("hey"), Directive::InjectMessage("hey".into()));
    assert_eq!(directive::abort("stop"), Directive::Abort(Some("stop".into())));
    assert_eq!(directive::replace_content("x"), Directive::ReplaceContent(vec![ContentBlock::Text("x".into())]));
    assert_eq!(
        directive::replace_arguments(&serde_json::json!({"path": "b"})),
        Directive::ReplaceArguments(r#"{"path":"b"}"#.into())
    );
}

#[test]
fn content_text_joins_blocks() {
    let blocks = [ContentBlock::Text("a".into()), ContentBlock::Text("b".into())];
    assert_eq!(content_text(&blocks), "ab");
    assert_eq!(content_text(&[]), "");
}

#[derive(Debug, Deserialize, PartialEq)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    limit: Option<u32>,
}

#[test]
fn tool_call_args_parse_typed_and_as_value() {
    let args: ReadArgs = call(r#"{"path": "a.txt", "limit": 3}"#).args().unwrap();
    assert_eq!(args, ReadArgs { path: "a.txt".into(), limit: Some(3) });
    let value = call(r#"{"path": "a.txt"}"#).args_value().unwrap();
    assert_eq!(value["path"], "a.txt");
}

#[test]
fn tool_call_empty_args_read_as_empty_object() {
    assert_eq!(call("").args_value().unwrap(), serde_json::json!({}));
    assert_eq!(call("  ").args_value().unwrap(), serde_json::json!({}));
}

#[test]
fn tool_call_bad_args_are_errors() {
    assert!(call("{not json").args_value().is_err());
    assert!(call(r#"{"limit": 3}"#).args::<ReadArgs>().is_err());
}

#[test]
fn string_lists_from_arrays_single_strings_and_blanks() {
    assert_eq!(parse_string_list(r#"["a", "b"]"#).unwrap(), ["a", "b"]);
    assert_eq!(parse_string_list("delete_file").unwrap(), ["delete_file"]);
    assert_eq!(parse_string_list("[ab]*.txt").unwrap(), ["[ab]*.txt"]);
    assert_eq!(parse_string_list("[]").unwrap(), Vec::<String>::new());
    assert_eq!(parse_string_list("  ").unwrap(), Vec::<String>::new());
    assert!(parse_string_list(r#"["a", 1]"#).is_err());
}

struct Quiet;

impl Hook for Quiet {
    fn new() -> Self {
        Quiet
    }
}

#[test]
fn default_methods_continue_on_every_event() {
    let mut hook = Quiet::new();
    for event in all_events() {
        assert_eq!(hook.on_event(&event), Directive::Continue, "{}", event_name(&event));
    }
}

/// Vetoes every tool and counts the events it saw through `on_event`.
#[derive(Default)]
struct Veto {
    seen: Vec<&'static str>,
}

impl Hook for Veto {
    fn new() -> Self {
        Self::default()
    }

    fn on_event(&mut self, event: &Event) -> Directive {
        self.seen.push(event_name(event));
        dispatch(self, event)
    }

    fn before_tool_call(&mut self, event: &ToolCallEvent) -> Directive {
        directive::skip_tool(format!("no {}", event.call.name))
    }
}

#[test]
fn dispatch_reaches_the_overridden_method_only() {
    let mut hook = Veto::new();
    let directives: Vec<_> = all_events().iter().map(|e| hook.on_event(e)).collect();
    for (event, directive) in all_events().iter().zip(&directives) {
        let expected = match event {
            Event::BeforeToolCall(_) => directive::skip_tool("no read_file"),
            _ => Directive::Continue,
        };
        assert_eq!(directive, &expected, "{}", event_name(event));
    }
    assert_eq!(hook.seen, EVENT_NAMES);
}

#[test]
fn panic_line_is_one_line_with_location() {
    use std::sync::{Arc, Mutex};
    let seen = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&seen);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        *sink.lock().unwrap() = crate::__private::panic_line(info);
    }));
    let result = std::panic::catch_unwind(|| panic!("bad {}\nconfig", "glob"));
    std::panic::set_hook(previous);
    assert!(result.is_err());
    let line = seen.lock().unwrap().clone();
    assert!(line.starts_with("panic at ") && line.contains("tests.rs:"), "{line}");
    assert!(line.ends_with(": bad glob config"), "{line}");
}

/// Seed 003's journaled random "has methods such as random, uniform, choice
/// and shuffle": the helpers over a scripted stream of draws.
#[test]
fn journaled_random_helpers() {
    use crate::journaled::{below, pick, shuffle_with, unit};
    let mut draws = [u64::MAX, 7].into_iter();
    // u64::MAX is in the biased top sliver for n = 10: it is redrawn.
    assert_eq!(below(10, || draws.next().unwrap_or(0)), 7);
    assert_eq!(below(0, || 5), 0);
    assert_eq!(below(1, || u64::MAX), 0, "n = 1 has no biased sliver");
    assert_eq!(unit(0), 0.0);
    assert!(unit(u64::MAX) < 1.0 && unit(u64::MAX) > 0.999_999);
    let items = ["a", "b", "c"];
    assert_eq!(pick(&items, || 4), Some(&"b"));
    assert_eq!(pick::<u8>(&[], || 4), None);
    let mut seq = 0u64;
    let mut v: Vec<u32> = (0..50).collect();
    shuffle_with(&mut v, || {
        seq = seq.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        seq
    });
    let mut sorted = v.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..50).collect::<Vec<_>>(), "a permutation");
    assert_ne!(v, sorted, "and not the identity");
}

/// The directives WIT 0.2.0 added have constructors and names (seed 003's
/// approvals; "skipping a later model call"; seed 000's sub-agent routing).
#[test]
fn the_0_2_0_directives_have_constructors_and_names() {
    assert_eq!(directive::ask_approval("why"), Directive::AskApproval("why".into()));
    assert_eq!(directive::skip_model_call("done"), Directive::SkipModelCall("done".into()));
    assert_eq!(
        directive::post_message("sub", "hi"),
        Directive::PostMessage(crate::Post { to: "sub".into(), text: "hi".into() })
    );
    let names: Vec<_> = [directive::ask_approval(""), directive::skip_model_call(""), directive::post_message("", "")]
        .iter()
        .map(directive_name)
        .collect();
    assert_eq!(names, ["ask-approval", "skip-model-call", "post-message"]);
    assert_eq!(crate::WIT_VERSION, "0.2.0");
}

/// `context()` is the current call's context, and the default outside a call.
#[test]
fn context_is_the_current_events_and_cleared_after_it() {
    assert_eq!(crate::context().turn, 0);
    let cx = crate::EventContext {
        run_id: "r".into(),
        session_id: "s".into(),
        turn: 2,
        iteration: 3,
        max_iterations: 4,
        retries: 1,
    };
    {
        let _guard = crate::__private::set_context(cx.clone());
        assert_eq!(crate::context(), cx);
    }
    assert_eq!(crate::context().run_id, "");
    assert!(cx.last_chance(), "3 + 1 >= 4");
    assert!(!crate::EventContext { retries: 0, ..cx.clone() }.last_chance());
    assert!(!crate::context().last_chance(), "an unknown limit is never the last chance");
}
