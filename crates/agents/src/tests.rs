//! The mapping, format by format: what each input becomes, and what each
//! decision answers.

use hookbox::{ApprovalReason, Directive, Event};
use serde_json::{Value, json};

use crate::{AgentError, Decision, Format, Point, answer, failure_answer, parse};

fn input(format: Format, v: Value) -> crate::AgentEvent {
    parse(format, v.to_string().as_bytes()).expect("parses")
}

fn pre_tool(format: Format) -> crate::AgentEvent {
    let v = match format {
        Format::Gemini => {
            json!({"hook_event_name": "BeforeTool", "session_id": "s1", "tool_name": "run_shell_command", "tool_input": {"command": "rm .env"}})
        }
        Format::Cursor => {
            json!({"hook_event_name": "beforeShellExecution", "conversation_id": "s1", "command": "rm .env", "cwd": "/w"})
        }
        _ => {
            json!({"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": "Bash", "tool_input": {"command": "rm .env"}, "tool_use_id": "toolu_1", "cwd": "/w"})
        }
    };
    input(format, v)
}

fn skip(reason: &str) -> Decision {
    Decision { terminal: Some(Directive::SkipTool(Some(reason.into()))), ..Decision::default() }
}

#[test]
fn a_claude_code_pre_tool_use_is_a_before_tool_call_with_its_input_as_arguments() {
    let e = pre_tool(Format::ClaudeCode);
    assert_eq!(e.session_id, "s1");
    assert_eq!(e.name, "PreToolUse");
    let [Event::BeforeToolCall { call, .. }] = e.events.as_slice() else { panic!("{:?}", e.events) };
    assert_eq!((call.id.as_str(), call.name.as_str()), ("toolu_1", "Bash"));
    assert_eq!(serde_json::from_str::<Value>(&call.arguments).unwrap(), json!({"command": "rm .env"}));
}

#[test]
fn a_skip_tool_denies_in_every_format_with_its_reason() {
    for format in Format::ALL {
        let r = answer(&pre_tool(format), &skip("no .env"));
        assert_eq!(r.exit_code, 0, "{format}");
        let text = r.json.to_string();
        assert!(text.contains("no .env") && text.contains("deny"), "{format}: {text}");
    }
    let r = answer(&pre_tool(Format::ClaudeCode), &skip("no .env"));
    assert_eq!(
        r.json,
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no .env"}})
    );
}

#[test]
fn continue_never_approves_past_the_agents_own_permissions() {
    let r = answer(&pre_tool(Format::ClaudeCode), &Decision::default());
    assert_eq!(r.json, json!({}));
    for format in Format::ALL {
        let r = answer(&pre_tool(format), &Decision::default());
        assert_eq!(r.json, json!({}), "{format}");
    }
    assert_eq!(answer(&pre_tool(Format::Codex), &Decision::default()).stdout(), "", "Codex wants silence");
    assert_eq!(answer(&pre_tool(Format::ClaudeCode), &Decision::default()).stdout(), "{}\n");
}

#[test]
fn an_approval_request_asks_and_a_rewrite_is_the_updated_input() {
    let d = Decision {
        approvals: vec![ApprovalReason { plugin: "asker".into(), reason: "a person checks rm".into() }],
        replace_arguments: Some(r#"{"command": "echo safe"}"#.into()),
        injections: vec!["be careful".into()],
        ..Decision::default()
    };
    let r = answer(&pre_tool(Format::ClaudeCode), &d);
    let s = &r.json["hookSpecificOutput"];
    assert_eq!(s["permissionDecision"], "ask");
    assert_eq!(s["permissionDecisionReason"], "asker: a person checks rm");
    assert_eq!(s["updatedInput"], json!({"command": "echo safe"}));
    assert_eq!(s["additionalContext"], "be careful");
    let r = answer(&pre_tool(Format::Cursor), &d);
    assert_eq!(r.json["permission"], "ask");
}

#[test]
fn a_rewrite_that_is_not_an_object_is_never_passed_on() {
    let d = Decision { replace_arguments: Some("[1]".into()), ..Decision::default() };
    assert_eq!(answer(&pre_tool(Format::ClaudeCode), &d).json, json!({}));
}

#[test]
fn an_abort_stops_the_agent() {
    let d = Decision { terminal: Some(Directive::Abort(Some("budget".into()))), ..Decision::default() };
    let r = answer(&pre_tool(Format::ClaudeCode), &d);
    assert_eq!(r.json["continue"], false);
    assert_eq!(r.json["stopReason"], "budget");
    assert_eq!(r.json["hookSpecificOutput"]["permissionDecision"], "deny");
}

#[test]
fn a_replaced_result_reaches_the_model_through_block() {
    let e = input(
        Format::ClaudeCode,
        json!({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"},
               "tool_response": {"stdout": "a\nb", "stderr": "", "interrupted": false}, "tool_use_id": "t"}),
    );
    let [Event::ToolCallResult { result, success, arguments, truncated, .. }] = e.events.as_slice() else { panic!() };
    assert!(result.contains("a\\nb") && *success && !truncated);
    assert_eq!(arguments, r#"{"command":"ls"}"#);
    let d = Decision { replace_result: Some("[redacted]".into()), ..Decision::default() };
    let r = answer(&e, &d);
    // In the shell's own output shape, which Claude Code checks a replacement against.
    assert_eq!(
        r.json,
        json!({"hookSpecificOutput": {"hookEventName": "PostToolUse",
               "updatedToolOutput": {"stdout": "[redacted]", "stderr": "", "interrupted": false}}})
    );
    let text = input(
        Format::ClaudeCode,
        json!({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "WebFetch", "tool_response": "page"}),
    );
    assert_eq!(answer(&text, &d).json["hookSpecificOutput"]["updatedToolOutput"], "[redacted]");
    // Another shape cannot be replaced in place: the model is told to use the hook's result.
    let write = input(
        Format::ClaudeCode,
        json!({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Write", "tool_response": {"type": "create"}}),
    );
    let r = answer(&write, &d);
    assert_eq!(r.json["decision"], "block");
    assert!(r.json["reason"].as_str().unwrap().ends_with("[redacted]"));
}

#[test]
fn a_subagents_stop_is_a_session_of_its_own() {
    let e = input(
        Format::ClaudeCode,
        json!({"hook_event_name": "SubagentStop", "session_id": "p", "agent_id": "a1", "stop_hook_active": false}),
    );
    assert_eq!((e.session_id.as_str(), e.point.clone()), ("p/a1", Point::Stop { again: false }));
    let bare = input(Format::ClaudeCode, json!({"hook_event_name": "SubagentStop", "session_id": "p"}));
    assert_eq!(bare.point, Point::Unmapped);
}

#[test]
fn an_mcp_tools_result_is_replaced_in_place() {
    let e = input(
        Format::ClaudeCode,
        json!({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "mcp__db__query", "tool_input": {}, "tool_response": "rows"}),
    );
    let d = Decision { replace_result: Some("none".into()), ..Decision::default() };
    assert_eq!(answer(&e, &d).json["hookSpecificOutput"]["updatedMCPToolOutput"], "none");
}

#[test]
fn a_long_result_is_cut_on_a_character_boundary() {
    let long = "é".repeat(crate::MAX_RESULT_BYTES);
    let e = input(
        Format::ClaudeCode,
        json!({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Read", "tool_response": long}),
    );
    let [Event::ToolCallResult { result, truncated, .. }] = e.events.as_slice() else { panic!() };
    assert!(*truncated && result.len() <= crate::MAX_RESULT_BYTES && result.len() > crate::MAX_RESULT_BYTES - 2);
}

#[test]
fn a_prompt_is_a_run_start_and_a_skip_run_blocks_it() {
    let e =
        input(Format::ClaudeCode, json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "hi"}));
    let [Event::RunStart { session_id, user_content, .. }] = e.events.as_slice() else { panic!() };
    assert_eq!(session_id, "s");
    assert_eq!(hookbox::ContentBlock::join_text(user_content), "hi");
    let d = Decision { terminal: Some(Directive::SkipRun("off topic".into())), ..Decision::default() };
    assert_eq!(answer(&e, &d).json, json!({"decision": "block", "reason": "off topic"}));
    let d = Decision { injections: vec!["note".into()], ..Decision::default() };
    assert_eq!(answer(&e, &d).json["hookSpecificOutput"]["additionalContext"], "note");
    let c =
        input(Format::Cursor, json!({"hook_event_name": "beforeSubmitPrompt", "conversation_id": "s", "prompt": "hi"}));
    let d = Decision { terminal: Some(Directive::Reject("no".into())), ..Decision::default() };
    assert_eq!(answer(&c, &d).json, json!({"continue": false, "user_message": "no"}));
}

#[test]
fn stop_is_a_final_answer_then_run_end_and_a_retry_keeps_the_agent_working() {
    let e = input(
        Format::ClaudeCode,
        json!({"hook_event_name": "Stop", "session_id": "s", "stop_hook_active": true, "last_assistant_message": "done"}),
    );
    assert_eq!(e.point, Point::Stop { again: true });
    assert!(matches!(e.events.as_slice(), [Event::FinalAnswer { text, .. }, Event::RunEnd { .. }] if text == "done"));
    let d = Decision { retry: Some("run the tests first".into()), ..Decision::default() };
    assert_eq!(answer(&e, &d).json, json!({"decision": "block", "reason": "run the tests first"}));
    let g = input(Format::Gemini, json!({"hook_event_name": "AfterAgent", "session_id": "s", "prompt_response": "ok"}));
    assert_eq!(answer(&g, &d).json["decision"], "deny");
    let c = input(Format::Cursor, json!({"hook_event_name": "stop", "conversation_id": "s", "status": "completed"}));
    assert_eq!(answer(&c, &d).json, json!({"followup_message": "run the tests first"}));
}

#[test]
fn events_without_a_counterpart_ask_no_hook_and_answer_nothing() {
    for name in ["SessionStart", "SessionEnd", "Notification", "PreCompact"] {
        let e = input(Format::ClaudeCode, json!({"hook_event_name": name, "session_id": "s"}));
        assert_eq!((e.point.clone(), e.events.len()), (Point::Unmapped, 0), "{name}");
        assert_eq!(answer(&e, &skip("x")).json, json!({}), "{name}");
    }
}

#[test]
fn cursor_tools_are_named_and_mcp_input_may_be_text() {
    let e = input(
        Format::Cursor,
        json!({"hook_event_name": "beforeMCPExecution", "conversation_id": "c", "tool_name": "query", "tool_input": "{\"sql\": \"drop\"}"}),
    );
    assert_eq!(e.point, Point::BeforeTool { tool: "query".into(), input: json!({"sql": "drop"}) });
    let e = input(
        Format::Cursor,
        json!({"hook_event_name": "beforeReadFile", "conversation_id": "c", "file_path": "/w/.env"}),
    );
    assert_eq!(e.point, Point::BeforeTool { tool: "Read".into(), input: json!({"file_path": "/w/.env"}) });
}

#[test]
fn hostile_input_is_refused_with_the_field_named() {
    let bad = [
        (Format::ClaudeCode, "not json".to_string()),
        (Format::ClaudeCode, "[1]".to_string()),
        (Format::ClaudeCode, json!({"hook_event_name": "PreToolUse"}).to_string()),
        (Format::ClaudeCode, json!({"hook_event_name": "PreToolUse", "session_id": ""}).to_string()),
        (Format::ClaudeCode, json!({"hook_event_name": "PreToolUse", "session_id": "a\nb"}).to_string()),
        (Format::ClaudeCode, json!({"hook_event_name": "PreToolUse", "session_id": "x".repeat(129)}).to_string()),
        (
            Format::ClaudeCode,
            json!({"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash", "tool_input": "rm"})
                .to_string(),
        ),
        (Format::ClaudeCode, json!({"hook_event_name": 7, "session_id": "s"}).to_string()),
        (
            Format::Cursor,
            json!({"hook_event_name": "beforeShellExecution", "session_id": "s", "command": "ls"}).to_string(),
        ),
        (Format::Gemini, json!({"hook_event_name": "BeforeTool", "session_id": "s", "tool_input": {}}).to_string()),
    ];
    for (format, text) in bad {
        let e = parse(format, text.as_bytes()).expect_err(&text);
        assert!(matches!(e, AgentError::Json(_) | AgentError::Field { .. }), "{e}");
    }
    let e = "claude\u{1b}[2J".parse::<Format>().expect_err("unknown");
    assert!(!e.to_string().contains('\u{1b}'), "{e}");
}

#[test]
fn a_failure_to_evaluate_fails_open_or_closed_as_asked() {
    let e = pre_tool(Format::ClaudeCode);
    assert_eq!(failure_answer(&e, "server down", false).json, json!({}));
    let r = failure_answer(&e, "server down", true);
    assert_eq!(r.json["hookSpecificOutput"]["permissionDecision"], "deny");
    assert_eq!(r.json["hookSpecificOutput"]["permissionDecisionReason"], "server down");
}

#[test]
fn codex_gets_only_the_keys_each_event_takes() {
    let e = pre_tool(Format::Codex);
    let ask = Decision {
        approvals: vec![ApprovalReason { plugin: "p".into(), reason: "a person".into() }],
        ..Decision::default()
    };
    assert_eq!(answer(&e, &ask).json["hookSpecificOutput"]["permissionDecision"], "deny", "Codex has no ask");
    let abort = Decision { terminal: Some(Directive::Abort(Some("stop".into()))), ..Decision::default() };
    let r = answer(&e, &abort).json;
    assert!(r.get("continue").is_none() && r.get("stopReason").is_none(), "{r}");
    let rewrite = Decision { replace_arguments: Some(r#"{"command": "echo"}"#.into()), ..Decision::default() };
    let r = answer(&e, &rewrite).json;
    assert_eq!(r["hookSpecificOutput"]["permissionDecision"], "allow");
    assert_eq!(r["hookSpecificOutput"]["updatedInput"], json!({"command": "echo"}));
    let post = input(
        Format::Codex,
        json!({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_response": "a"}),
    );
    let replace = Decision { replace_result: Some("[redacted]".into()), ..Decision::default() };
    assert_eq!(answer(&post, &replace).json, json!({"decision": "block", "reason": "[redacted]"}));
}
