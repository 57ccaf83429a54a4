//! `hookbox serve`'s runs, approvals and evaluate (issue 15, items 1, 4–7
//! and 9): the run record as `hookbox run --json` writes it, Server-Sent
//! Events resumed with `Last-Event-ID`, steering, approvals answered over
//! HTTP, run quotas, graceful shutdown keeping the record, hook state
//! across evaluate calls, and the metrics.

use hookbox_tests::server::TestServer;
use hookbox_tests::{DENY_TOOLS, SCRIPTED, STATE_COUNTER};
use serde_json::{Value, json};

const ASKER: &str = "ask-approval:{tool} needs a person";

async fn with_asker(s: &TestServer, key: &str) {
    s.install(key, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    s.install(key, "asker", SCRIPTED, json!({"config": {"before-tool-call": ASKER, "only_tool": "create_file"}})).await;
}

fn approval_path(approval: &Value) -> String {
    format!("/v1/approvals/{}", approval["id"].as_str().unwrap_or_default().replace('/', "%2F"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_has_the_cli_record_and_its_events_stream_resumes_from_any_id() {
    let mut s = TestServer::start("").await;
    let a = s.tenant("acme").await;
    s.install(&a, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let run = s.start_run(&a, json!({})).await;
    let all = s.events(&a, &run, None).await;
    let done = s.wait_run(&a, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    let record = &done["record"];
    assert_eq!(record["run_id"], run, "the record's run id is the API's");
    for key in [
        "run_id",
        "final_answer",
        "stop_reason",
        "iterations",
        "requests",
        "usage",
        "events",
        "directives",
        "hook_failures",
        "hook_logs",
        "plugin_stats",
        "injected_messages",
        "undelivered_injections",
        "messages",
        "approvals",
        "error",
    ] {
        assert!(record.get(key).is_some(), "the record has no `{key}`: {record}");
    }
    assert!(record["events"].as_array().is_some_and(|e| e.iter().all(|e| e.get("iteration").is_some())));
    let skips: Vec<&Value> =
        record["directives"].as_array().into_iter().flatten().filter(|d| d["action"] == "skip-tool").collect();
    assert_eq!(skips.len(), 1, "{}", record["directives"]);
    // The stream: ids 1..n in order, every event of the record, the directive, then `end` with the record.
    let ids: Vec<i64> = all.iter().map(|e| e.0).collect();
    assert_eq!(ids, (1..=i64::try_from(all.len()).unwrap_or(0)).collect::<Vec<_>>());
    let hook_events = all.iter().filter(|e| e.1 == "hook-event").count();
    assert_eq!(Some(hook_events), record["events"].as_array().map(Vec::len));
    assert!(all.iter().any(|e| e.1 == "directive" && e.2["action"] == "skip-tool"));
    let last = all.last().cloned().unwrap_or_default();
    assert_eq!(last.1, "end");
    assert_eq!(last.2["status"], "completed");
    assert_eq!(last.2["record"]["run_id"], run);
    // Resumed after event 5: exactly the rest.
    let rest = s.events(&a, &run, Some(5)).await;
    assert_eq!(rest, all[5..].to_vec());
    // An id past anything (i64::MAX) is answered, not a crash.
    let far = s.events(&a, &run, Some(i64::MAX)).await;
    assert_eq!(far.len(), 1, "{far:?}");
    // After the last id, the run is over: one `end` again, so a client waiting for it stops.
    let again = s.events(&a, &run, Some(i64::try_from(all.len()).unwrap_or(0))).await;
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!((again[0].1.as_str(), again[0].2["status"].clone()), ("end", json!("completed")));
    let r = s
        .http
        .get(format!("{}/v1/runs/{run}/events", s.base))
        .bearer_auth(&a)
        .header("last-event-id", "soon")
        .send()
        .await;
    assert_eq!(r.map(|r| r.status().as_u16()).unwrap_or(0), 400);
    // The run's own workspace: the demo's delete of .env was declined.
    let ws = s.dir.path().join("data/workspaces").join(&run);
    assert!(ws.join(".env").exists() && ws.join("test.txt").exists());
    // Metrics: calls, latency and runs, by tenant and plugin.
    let metrics = s.http.get(format!("{}/metrics", s.base)).bearer_auth(&s.operator).send().await.ok();
    let text = match metrics {
        Some(r) => r.text().await.unwrap_or_default(),
        None => String::new(),
    };
    for needle in [
        "hookbox_hook_calls_total{tenant=\"acme\",plugin=\"deny-tools\"}",
        "hookbox_hook_call_seconds_bucket{le=",
        "hookbox_hook_fuel_total{tenant=\"acme\",plugin=\"deny-tools\"}",
        "hookbox_runs_total{tenant=\"acme\",what=\"completed\"} 1",
    ] {
        assert!(text.contains(needle), "no {needle} in:\n{text}");
    }
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_answered_over_http_and_a_paused_run_resumes() {
    let mut s = TestServer::start("").await;
    let a = s.tenant("acme").await;
    with_asker(&s, &a).await;
    // Deny with a reason: the model gets it, nothing is created.
    let run = s.start_run(&a, json!({})).await;
    let approval = s.wait_approval(&a, &run).await;
    assert_eq!(approval["tool"], "create_file");
    assert_eq!(approval["arguments"]["path"], "test.txt");
    assert_eq!(approval["reasons"][0]["reason"], "create_file needs a person");
    assert_eq!(s.get(&format!("/v1/runs/{run}"), &a).await.json["status"], "waiting-approval");
    // A second server started by mistake with this one's data directory and
    // address stops at the bind, before it opens the store (which would
    // mark this one's runs in flight interrupted).
    let mut twin = s.config.clone();
    twin.listen = s.server.as_ref().map(|r| r.addr()).unwrap_or_else(|| panic!("running"));
    let refused = hookbox_server::Server::start(twin).await.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(refused.contains("bind"), "{refused}");
    // On a free address it stops at the data directory's lock, before the store too.
    let mut twin = s.config.clone();
    twin.listen = "127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}"));
    let refused = hookbox_server::Server::start(twin).await.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(refused.contains("server.lock") && refused.contains("another hookbox serve"), "{refused}");
    let db = rusqlite::Connection::open(s.dir.path().join("data/server.db")).unwrap_or_else(|e| panic!("{e}"));
    let stored: String =
        db.query_row("SELECT status FROM runs WHERE id = ?1", [&run], |r| r.get(0)).unwrap_or_else(|e| panic!("{e}"));
    assert!(["running", "waiting-approval"].contains(&stored.as_str()), "the store was not touched: {stored}");
    let r = s.post(&approval_path(&approval), &a, json!({"decision": "maybe"})).await;
    assert_eq!(r.status, 400);
    let r = s.post(&approval_path(&approval), &a, json!({"decision": "deny", "reason": "not today"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let r = s.post(&approval_path(&approval), &a, json!({"decision": "approve"})).await;
    assert_eq!(r.status, 404, "an approval was answered twice: {:?}", r.json);
    let done = s.wait_run(&a, &run).await;
    assert_eq!(done["record"]["approvals"][0]["answer"], json!({"answer": "deny", "value": "not today"}));
    assert_eq!(done["record"]["approvals"][0]["answered_by"], "host");
    assert!(!s.dir.path().join("data/workspaces").join(&run).join("test.txt").exists());

    // Approve with other arguments, after a pause and an injected message.
    let run = s.start_run(&a, json!({})).await;
    let approval = s.wait_approval(&a, &run).await;
    assert_eq!(s.post(&format!("/v1/runs/{run}/pause"), &a, json!({})).await.status, 200);
    assert_eq!(s.post(&format!("/v1/runs/{run}/inject"), &a, json!({"text": "also: be brief"})).await.status, 200);
    assert_eq!(s.post(&format!("/v1/runs/{run}/inject"), &a, json!({"text": "  "})).await.status, 400);
    let r =
        s.post(&approval_path(&approval), &a, json!({"decision": "approve", "arguments": {"path": "other.txt"}})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let mut status = Value::Null;
    for _ in 0..200 {
        status = s.get(&format!("/v1/runs/{run}"), &a).await.json["status"].clone();
        if status == "paused" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(status, "paused");
    assert_eq!(s.post(&format!("/v1/runs/{run}/resume"), &a, json!({})).await.status, 200);
    let done = s.wait_run(&a, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    let ws = s.dir.path().join("data/workspaces").join(&run);
    assert!(ws.join("other.txt").exists() && !ws.join("test.txt").exists());
    assert_eq!(done["record"]["injected_messages"], json!(["also: be brief"]));
    // A run that ended cannot be steered (409), an unknown one is 404.
    assert_eq!(s.post(&format!("/v1/runs/{run}/pause"), &a, json!({})).await.status, 409);
    assert_eq!(s.post("/v1/runs/nope/pause", &a, json!({})).await.status, 404);

    // Abort while waiting for an approval; before that, more injected messages than a run takes.
    let run = s.start_run(&a, json!({})).await;
    s.wait_approval(&a, &run).await;
    for n in 0..100 {
        let r = s.post(&format!("/v1/runs/{run}/inject"), &a, json!({"text": format!("note {n}")})).await;
        assert_eq!(r.status, 200, "{:?}", r.json);
    }
    let r = s.post(&format!("/v1/runs/{run}/inject"), &a, json!({"text": "one too many"})).await;
    assert_eq!(r.status, 409, "{:?}", r.json);
    assert_eq!(s.post(&format!("/v1/runs/{run}/abort"), &a, json!({"reason": "stop"})).await.status, 200);
    let done = s.wait_run(&a, &run).await;
    assert_eq!(done["status"], "aborted", "{done}");
    assert_eq!(done["record"]["error"]["kind"], "aborted");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_requests_are_checked_and_quotas_answer_429() {
    let mut s = TestServer::start("").await;
    let a = s.tenant("acme").await;
    with_asker(&s, &a).await;
    for (body, status) in [
        (json!({"prompt": "hi", "model": "gpt-5"}), 422),
        (json!({"prompt": " ", "model": "demo"}), 400),
        (json!({"prompt": "hi", "model": "demo", "session": "a\u{1b}b"}), 400),
        (json!({"prompt": "hi", "model": "demo", "plugins": ["nope"]}), 404),
        (json!({"prompt": "hi", "model": "demo", "colour": 1}), 400),
        (json!({"prompt": 3, "model": "demo"}), 400),
        (json!({"prompt": "hi", "model": "demo", "plugins": ["asker", "asker"]}), 400),
    ] {
        let r = s.post("/v1/runs", &a, body.clone()).await;
        assert_eq!(r.status, status, "{body}: {:?}", r.json);
    }
    assert_eq!(s.get("/v1/runs", &a).await.json, json!([]), "a refused run was stored");
    let mut quotas = s.get("/v1/usage", &a).await.json["quotas"].clone();
    let mut bad = quotas.clone();
    bad["spend_per_day_usd"] = json!(-5.0);
    let r = s.call("PUT", "/v1/admin/tenants/acme/quotas", Some(&s.operator.clone()), Some(&bad)).await;
    assert_eq!(r.status, 400, "a negative spend quota was taken: {:?}", r.json);
    quotas["concurrent_runs"] = json!(1);
    assert_eq!(
        s.call("PUT", "/v1/admin/tenants/acme/quotas", Some(&s.operator.clone()), Some(&quotas)).await.status,
        200
    );
    let run = s.start_run(&a, json!({})).await;
    s.wait_approval(&a, &run).await;
    let r = s.post("/v1/runs", &a, json!({"prompt": "hi", "model": "demo"})).await;
    assert_eq!(r.status, 429, "{:?}", r.json);
    assert_eq!(r.json["quota"], "concurrent_runs");
    assert_eq!(r.json["limit"], 1.0);
    // Instances: the chain holds two; a quota of one refuses runs and evaluate calls.
    quotas["concurrent_runs"] = json!(5);
    quotas["live_instances"] = json!(3);
    assert_eq!(
        s.call("PUT", "/v1/admin/tenants/acme/quotas", Some(&s.operator.clone()), Some(&quotas)).await.status,
        200
    );
    let r = s.post("/v1/runs", &a, json!({"prompt": "hi", "model": "demo"})).await;
    assert_eq!(r.json["quota"], "live_instances", "{:?}", r.json);
    let ev = json!({"session_id": "s", "event": {"type": "iteration-start", "iteration": 1, "loop_counter": 1}});
    let r = s.post("/v1/evaluate", &a, ev.clone()).await;
    assert_eq!((r.status, r.json["quota"].clone()), (429, json!("live_instances")), "{:?}", r.json);
    // Once the parked run ends, its instances are free again.
    assert_eq!(s.post(&format!("/v1/runs/{run}/abort"), &a, json!({})).await.status, 200);
    s.wait_run(&a, &run).await;
    let mut ok = 0;
    for _ in 0..100 {
        ok = s.post("/v1/evaluate", &a, ev.clone()).await.status;
        if ok == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(ok, 200);
    let usage = s.get("/v1/usage", &a).await.json;
    assert_eq!(usage["usage"]["concurrent_runs"], 0, "{usage}");
    // The session's evaluate chain keeps its two instances for the next call...
    assert_eq!(usage["usage"]["live_instances"], 2, "{usage}");
    // ...and gives them up when a run needs them.
    let run = s.start_run(&a, json!({})).await;
    s.wait_approval(&a, &run).await;
    assert_eq!(s.get("/v1/usage", &a).await.json["usage"]["live_instances"], 2);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_keeps_the_record_of_a_run_in_flight() {
    let mut s = TestServer::start("").await;
    let a = s.tenant("acme").await;
    with_asker(&s, &a).await;
    let run = s.start_run(&a, json!({})).await;
    s.wait_approval(&a, &run).await;
    s.restart().await;
    let done = s.wait_run(&a, &run).await;
    assert_eq!(done["status"], "interrupted", "{done}");
    assert_eq!(done["record"]["error"]["kind"], "aborted");
    let events = s.events(&a, &run, None).await;
    assert_eq!(events.last().map(|e| e.1.as_str()), Some("end"));
    assert!(events.iter().any(|e| e.1 == "approval"));
    // Keys and plugins outlive the restart.
    assert_eq!(s.get("/v1/plugins", &a).await.json.as_array().map(Vec::len), Some(2));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluate_keeps_hook_state_per_tenant_and_session() {
    let mut s = TestServer::start("").await;
    let a = s.tenant("acme").await;
    let b = s.tenant("globex").await;
    for key in [&a, &b] {
        s.install(key, "state-counter", STATE_COUNTER, json!({})).await;
    }
    let result = json!({"type": "tool-call-result", "iteration": 1, "tool_call_id": "c1", "tool_name": "read_file",
                        "success": true, "result": "ok", "truncated": false, "duration_ms": 1});
    let count = |r: &Value| -> Vec<String> {
        r["logs"].as_array().into_iter().flatten().filter_map(|l| l["message"].as_str().map(String::from)).collect()
    };
    for n in 1..=3 {
        let r = s.post("/v1/evaluate", &a, json!({"session_id": "s1", "event": result})).await;
        assert_eq!(r.status, 200, "{:?}", r.json);
        assert_eq!(count(&r.json), [format!("count={n}")], "{:?}", r.json);
    }
    let r = s.post("/v1/evaluate", &a, json!({"session_id": "s2", "event": result})).await;
    assert_eq!(count(&r.json), ["count=1"], "another session starts empty");
    // Tenant B's session of the same name, and a run-start naming A's session, start empty.
    let r = s.post("/v1/evaluate", &b, json!({"session_id": "s1", "event": result})).await;
    assert_eq!(count(&r.json), ["count=1"], "B read A's state: {:?}", r.json);
    let spoof = json!({"type": "run-start", "run_id": "r", "session_id": "acme:s1", "model": "m", "provider": "p", "user_content": []});
    let r = s.post("/v1/evaluate", &b, json!({"session_id": "mine", "event": spoof})).await;
    assert_eq!(count(&r.json), ["start empty"], "B reached A's session through run-start: {:?}", r.json);
    // Arguments a guard could read otherwise than the loop: 400.
    for args in ["{\"path\":\".env\"}garbage", "[1]", &format!("{{\"a\":{}1{}}}", "[".repeat(200), "]".repeat(200))] {
        let call = json!({"type": "before-tool-call", "iteration": 1, "call": {"id": "c", "name": "delete_file", "arguments": args}});
        let r = s.post("/v1/evaluate", &a, json!({"session_id": "s1", "event": call})).await;
        assert_eq!(r.status, 400, "{args}: {:?}", r.json);
    }
    // Bad events are 400 with the reason.
    let r = s.post("/v1/evaluate", &a, json!({"session_id": "s1", "event": {"type": "launch-missiles"}})).await;
    assert_eq!(r.status, 400);
    assert!(r.json["message"].as_str().unwrap_or("").contains("event"), "{:?}", r.json);
    s.shutdown().await;
}
