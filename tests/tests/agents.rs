//! Issue 16: the agents' hooks. `POST /v1/claude-code` and
//! `/v1/hooks/{format}` answer an agent's hook input with the tenant's
//! chain's decision in that agent's JSON, keeping hook state per agent
//! session; `hookbox hook` does the same as a command hook, locally from a
//! hookbox.toml (state in the local database, across processes) or by
//! asking a server, failing open or closed when it cannot ask. Every
//! recorded real hook input under `tests/fixtures/agent-hooks/` is read.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use hookbox_tests::server::TestServer;
use hookbox_tests::{DENY_TOOLS, SCRIPTED, STATE_COUNTER, TRAP_ON_TOOL, cli_with_input, repo_root};
use serde_json::{Value, json};

fn pre_tool(session: &str, tool: &str, input: Value) -> Value {
    json!({"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp/w", "permission_mode": "default",
           "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input, "tool_use_id": "toolu_01"})
}

fn post_tool(session: &str) -> Value {
    json!({"session_id": session, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"},
           "tool_response": {"stdout": "a", "stderr": "", "interrupted": false}, "tool_use_id": "toolu_02"})
}

async fn raw(s: &TestServer, path: &str, key: Option<&str>, body: &str) -> (u16, Value) {
    let mut req =
        s.http.post(format!("{}{path}", s.base)).header("content-type", "application/json").body(body.to_string());
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("sent: {e}"));
    let status = resp.status().as_u16();
    (status, serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claude_code_endpoint_answers_in_claude_codes_json_and_keeps_state_per_session() {
    let s = TestServer::start("").await;
    let a = s.tenant("acme").await;
    let b = s.tenant("bravo").await;
    s.install(&a, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    s.install(&a, "state-counter", STATE_COUNTER, json!({})).await;
    // A Write to .env is denied with deny-tools' reason; anything else passes with `{}`.
    let denied = s
        .post("/v1/claude-code", &a, pre_tool("cc-1", "Write", json!({"file_path": "/tmp/w/.env", "content": "x"})))
        .await;
    assert_eq!(denied.status, 200, "{:?}", denied.json);
    let out = &denied.json["hookSpecificOutput"];
    assert_eq!(out["hookEventName"], "PreToolUse");
    assert_eq!(out["permissionDecision"], "deny", "{}", denied.json);
    assert!(out["permissionDecisionReason"].as_str().is_some_and(|r| r.contains("deny-tools") && r.contains(".env")));
    let fine =
        s.post("/v1/hooks/claude-code", &a, pre_tool("cc-1", "Write", json!({"file_path": "/tmp/w/ok.txt"}))).await;
    assert_eq!((fine.status, fine.json.clone()), (200, json!({})));
    // Hook state is the session's: two results counted, then seen at the session's next run-start.
    for _ in 0..2 {
        assert_eq!(s.post("/v1/claude-code", &a, post_tool("cc-1")).await.json, json!({}));
    }
    let start = json!({"session_id": "cc-1", "plugins": ["state-counter"],
                       "event": {"type": "run-start", "run_id": "r", "session_id": "x", "model": "m", "provider": "p", "user_content": []}});
    let r = s.post("/v1/evaluate", &a, start).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert!(r.json["logs"].to_string().contains("start count=2"), "{}", r.json["logs"]);
    // Another tenant's chain is its own (empty here); no key is 401.
    let other = s.post("/v1/claude-code", &b, pre_tool("cc-1", "Write", json!({"file_path": ".env"}))).await;
    assert_eq!((other.status, other.json), (200, json!({})));
    let body = pre_tool("cc-1", "Write", json!({})).to_string();
    assert_eq!(raw(&s, "/v1/claude-code", None, &body).await.0, 401);
    assert_eq!(raw(&s, "/v1/claude-code", Some("hbk_wrong"), &body).await.0, 401);
    // Bad input is a 400 naming the field; an unknown agent is a 404.
    let (status, err) = raw(&s, "/v1/claude-code", Some(&a), r#"{"hook_event_name": "PreToolUse"}"#).await;
    assert_eq!(status, 400);
    assert!(err["message"].as_str().is_some_and(|m| m.contains("session_id")), "{err}");
    assert_eq!(raw(&s, "/v1/claude-code", Some(&a), "not json").await.0, 400);
    assert_eq!(raw(&s, "/v1/hooks/nope", Some(&a), &body).await.0, 404);
    assert_eq!(raw(&s, "/v1/claude-code?plugins=", Some(&a), &body).await.0, 400);
    assert_eq!(raw(&s, "/v1/claude-code?plugins=ghost", Some(&a), &body).await.0, 404);
    // ?fail=closed: a chain that cannot be asked is a denial, not an error status the agent lets pass.
    let (status, closed) = raw(&s, "/v1/claude-code?plugins=ghost&fail=closed", Some(&a), &body).await;
    assert_eq!(status, 200, "{closed}");
    assert_eq!(closed["hookSpecificOutput"]["permissionDecision"], "deny", "{closed}");
    assert!(closed.to_string().contains("not_found"), "{closed}");
    assert_eq!(raw(&s, "/v1/claude-code?fail=maybe", Some(&a), &body).await.0, 400);
    // Every format denies through the same chain.
    let gemini = json!({"session_id": "g", "hook_event_name": "BeforeTool", "tool_name": "write_file",
                        "tool_input": {"file_path": ".env", "content": "x"}});
    let r = s.post("/v1/hooks/gemini", &a, gemini).await;
    assert_eq!(r.json["decision"], "deny", "{:?}", r.json);
    let cursor = json!({"conversation_id": "c", "generation_id": "g1", "hook_event_name": "beforeReadFile", "file_path": "/w/.env"});
    let r = s.post("/v1/hooks/cursor", &a, cursor).await;
    assert_eq!(r.json["permission"], "deny", "{:?}", r.json);
    // The OpenAPI document lists the routes.
    let doc = s.get("/openapi.json", &a).await.json;
    assert!(doc["paths"].get("/v1/claude-code").is_some() && doc["paths"].get("/v1/hooks/{format}").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recorded_hook_input_is_read_and_answered() {
    let s = TestServer::start("").await;
    let a = s.tenant("acme").await;
    s.install(&a, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let dir = repo_root().join("tests/fixtures/agent-hooks");
    let mut seen = 0;
    for agent in ["claude-code", "codex", "gemini", "cursor"] {
        let Ok(entries) = std::fs::read_dir(dir.join(agent)) else { continue };
        for entry in entries.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "json")) {
            let body = std::fs::read_to_string(entry.path()).expect("fixture");
            let (status, answer) = raw(&s, &format!("/v1/hooks/{agent}"), Some(&a), &body).await;
            assert_eq!(status, 200, "{}: {answer}", entry.path().display());
            assert!(answer.is_object(), "{}: {answer}", entry.path().display());
            seen += 1;
        }
    }
    assert!(seen >= 4, "only {seen} recorded hook inputs under {}", dir.display());
}

fn write_config(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("hookbox.toml");
    let text = format!(
        r#"[[plugins]]
name = "deny-tools"
path = "{DENY_TOOLS}"
config = {{ paths = [".env"] }}

[[plugins]]
name = "rewriter"
path = "{SCRIPTED}"
config = {{ before-tool-call = 'replace-arguments:{{"command": "echo rewritten"}}', only_tool = "Bash", final-answer = "retry:run the tests first" }}

[[plugins]]
name = "state-counter"
path = "{STATE_COUNTER}"
"#
    );
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("config: {e}"));
    path
}

#[test]
fn the_hook_command_decides_locally_and_keeps_state_across_processes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path());
    let db = dir.path().join("state.db");
    let hook = |format: &str, input: &Value| {
        let args = ["hook", "--format", format, "--config", config.to_str().unwrap(), "--db", db.to_str().unwrap()];
        cli_with_input(&args, &input.to_string())
    };
    let out = hook("claude-code", &pre_tool("s1", "Write", json!({"file_path": ".env"})));
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json()["hookSpecificOutput"]["permissionDecision"], "deny");
    let out = hook("claude-code", &pre_tool("s1", "Bash", json!({"command": "ls"})));
    assert_eq!(out.json()["hookSpecificOutput"]["updatedInput"], json!({"command": "echo rewritten"}), "{out:?}");
    assert!(out.json()["hookSpecificOutput"].get("permissionDecision").is_none(), "a rewrite approves nothing");
    // A trapping guard configured fail-closed blocks; fail-open, it lets the call through.
    for (fail, decision) in [("closed", json!("deny")), ("open", Value::Null)] {
        let trap = dir.path().join(format!("trap-{fail}.toml"));
        std::fs::write(&trap, format!("[[plugins]]\nname = \"trap\"\npath = \"{TRAP_ON_TOOL}\"\nfail = \"{fail}\"\n"))
            .expect("config");
        let args =
            ["hook", "--format", "claude-code", "--config", trap.to_str().unwrap(), "--db", db.to_str().unwrap()];
        let out = cli_with_input(&args, &pre_tool("s1", "Bash", json!({"command": "ls"})).to_string());
        assert_eq!(out.code, 0, "{out:?}");
        assert_eq!(out.json()["hookSpecificOutput"]["permissionDecision"], decision, "{fail}: {out:?}");
        assert!(out.stderr.contains("plugin `trap` failed at before-tool-call (trap)"), "{fail}: {out:?}");
    }
    // Stop: the final-answer's retry keeps Claude Code working.
    let stop = json!({"session_id": "s1", "hook_event_name": "Stop", "stop_hook_active": false});
    assert_eq!(hook("claude-code", &stop).json(), json!({"decision": "block", "reason": "run the tests first"}));
    // State: each process counts into the database.
    for _ in 0..3 {
        assert_eq!(hook("claude-code", &post_tool("s1")).code, 0);
    }
    assert_eq!(hook("claude-code", &post_tool("s2")).code, 0);
    let conn = rusqlite::Connection::open(&db).expect("db");
    let count = |session: &str| -> String {
        let data: Vec<u8> = conn
            .query_row("SELECT data FROM hook_state WHERE session = ?1 AND plugin = 'state-counter'", [session], |r| {
                r.get(0)
            })
            .expect("state row");
        String::from_utf8(data).expect("utf-8")
    };
    assert_eq!(count("s1"), r#"{"count":3}"#);
    assert_eq!(count("s2"), r#"{"count":1}"#);
    // Other agents' formats.
    let gemini = json!({"session_id": "g", "hook_event_name": "BeforeTool", "tool_name": "write_file", "tool_input": {"file_path": ".env"}});
    assert_eq!(hook("gemini", &gemini).json()["decision"], "deny");
    // Events without a counterpart load nothing and answer `{}`.
    let note = json!({"session_id": "s1", "hook_event_name": "Notification", "message": "hi"});
    assert_eq!(hook("claude-code", &note).json(), json!({}));
}

#[test]
fn the_hook_command_fails_open_or_closed_as_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("state.db");
    let missing = dir.path().join("missing.toml");
    let input = pre_tool("s1", "Write", json!({"file_path": ".env"})).to_string();
    let base = ["hook", "--format", "claude-code", "--config", missing.to_str().unwrap(), "--db", db.to_str().unwrap()];
    let open = cli_with_input(&base, &input);
    assert_eq!((open.code, open.stdout.as_str()), (1, ""), "{open:?}");
    assert!(open.stderr.contains("no hook could be asked"), "{open:?}");
    let mut closed_args = base.to_vec();
    closed_args.extend(["--fail", "closed"]);
    let closed = cli_with_input(&closed_args, &input);
    assert_eq!(closed.code, 0, "{closed:?}");
    assert_eq!(closed.json()["hookSpecificOutput"]["permissionDecision"], "deny");
    // Input that is not a hook input: 2 (block) when closed, 1 when open; never echoed raw.
    let bad = cli_with_input(&closed_args, "\u{1b}[2J not json");
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(!bad.stderr.contains('\u{1b}'));
    assert_eq!(cli_with_input(&base, "{}").code, 1);
    let mut with_plugins = base.to_vec();
    with_plugins.extend(["--plugins", "a"]);
    assert_eq!(cli_with_input(&with_plugins, &input).code, 2, "--plugins is for --url");
    let huge = "x".repeat(hookbox_agents_max() + 1);
    assert_eq!(cli_with_input(&closed_args, &huge).code, 2);
}

fn hookbox_agents_max() -> usize {
    4 << 20
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hook_command_asks_a_server() {
    let s = TestServer::start("").await;
    let a = s.tenant("acme").await;
    s.install(&a, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let input = pre_tool("s1", "Write", json!({"file_path": ".env"})).to_string();
    let run = |url: String, key: String, extra: &'static [&'static str], input: String| {
        tokio::task::spawn_blocking(move || {
            let mut child = Command::new(env!("CARGO_BIN_EXE_hookbox-under-test"))
                .args(["hook", "--format", "claude-code", "--url", &url])
                .args(extra)
                .env("HOOKBOX_API_KEY", key)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn");
            child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write");
            child.wait_with_output().expect("output")
        })
    };
    let out = run(s.base.clone(), a.clone(), &[], input.clone()).await.expect("join");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    // A wrong key: the server says 401, so no hook was asked: open passes (exit 1), closed denies.
    let out = run(s.base.clone(), "hbk_wrong".into(), &[], input.clone()).await.expect("join");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
    let out = run("http://127.0.0.1:9".into(), a.clone(), &["--fail", "closed", "--timeout-ms", "2000"], input)
        .await
        .expect("join");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
}
