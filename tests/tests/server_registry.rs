//! `hookbox serve`'s plugin registry (issue 15, item 3): an upload's report
//! and what a hostile upload gets (a clear 4xx, nothing stored), the
//! capability diff and its approval, atomic activation (hot reload: runs
//! in flight finish on their versions), rollback, shadow versions, and the
//! plugin storage quota.

use hookbox_tests::server::TestServer;
use hookbox_tests::{DENY_TOOLS, NET_ESCAPE, OTHER_WORLD, SCRIPTED, TRAP_ON_TOOL};
use serde_json::{Value, json};

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e} (built by tests/build.rs)"))
}

fn before_tool_call(tool: &str, path: &str) -> Value {
    json!({"type": "before-tool-call", "iteration": 1,
           "call": {"id": "call_1", "name": tool, "arguments": json!({"path": path}).to_string()}})
}

async fn verdict(s: &TestServer, key: &str, tool: &str, path: &str) -> Value {
    let r = s.post("/v1/evaluate", key, json!({"session_id": "s", "event": before_tool_call(tool, path)})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    r.json
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_reports_the_component_and_a_hostile_one_is_refused_with_nothing_stored() {
    let mut s = TestServer::start("grantable_env = [\"HOOKBOX_TEST_GRANT\"]\n[http]\nmax_upload_bytes = 8000000").await;
    let a = s.tenant("acme").await;
    let bytes = read(DENY_TOOLS);
    let r = s.upload(&a, "deny-tools", &bytes, &json!({"config": {"paths": [".env"]}})).await;
    assert_eq!(r.status, 201, "{:?}", r.json);
    let v = &r.json;
    assert_eq!(v["version"], 1);
    assert_eq!(v["status"], "ready", "no grant asked: nothing to approve");
    assert_eq!(v["blake3"], blake3::hash(&bytes).to_hex().to_string());
    assert_eq!(v["bytes"], bytes.len());
    assert_eq!(v["report"]["world"], "hookbox:hooks/hook@0.2.0");
    assert_eq!(v["report"]["wit_version"], "0.2.0");
    assert!(v["report"]["imports"].as_array().is_some_and(|i| !i.is_empty()));
    assert!(v["report"]["trial"]["fuel_used"].as_u64().is_some_and(|f| f > 0), "{}", v["report"]["trial"]);
    assert_eq!(v["report"]["trial"]["outcome"]["directive"], "continue");
    assert_eq!(v["report"]["diff"]["against"], Value::Null);

    // Hostile or broken uploads: each a clear 4xx, none stored.
    let core_module = b"\0asm\x01\0\0\0".to_vec();
    let cases: Vec<(&str, Vec<u8>, Value, u16, &str)> = vec![
        (
            "random bytes",
            (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect(),
            json!({}),
            422,
            "does not load",
        ),
        ("a core module", core_module, json!({}), 422, "does not load"),
        ("another world", read(OTHER_WORLD), json!({}), 422, "does not load"),
        ("a socket import", read(NET_ESCAPE), json!({}), 422, "does not load"),
        ("an unknown manifest key", bytes.clone(), json!({"colour": "red"}), 400, "unknown field"),
        ("a wrong manifest type", bytes.clone(), json!({"config": 3}), 400, "manifest"),
        (
            "fuel over the tenant's maximum",
            bytes.clone(),
            json!({"limits": {"fuel": 1_000_000_000_000u64}}),
            422,
            "max_fuel_per_call",
        ),
        ("an env grant the server does not give", bytes.clone(), json!({"env": ["HOME"]}), 422, "not a variable"),
        (
            "log bytes over the server's maximum",
            bytes.clone(),
            json!({"limits": {"max_log_bytes": u64::MAX}}),
            422,
            "max_log_bytes",
        ),
        (
            "run log records over the maximum",
            bytes.clone(),
            json!({"limits": {"run_log_records": 1u64 << 40}}),
            422,
            "run_log_records",
        ),
        (
            "output blocks over the maximum",
            bytes.clone(),
            json!({"limits": {"max_output_blocks": 1_000_000}}),
            422,
            "max_output_blocks",
        ),
        (
            "state bytes over the maximum",
            bytes.clone(),
            json!({"limits": {"max_state_bytes": 1u64 << 40}}),
            422,
            "max_state_bytes",
        ),
    ];
    for (what, component, manifest, status, says) in cases {
        let r = s.upload(&a, "bad", &component, &manifest).await;
        assert_eq!(r.status, status, "{what}: {:?}", r.json);
        assert!(r.json["message"].as_str().unwrap_or("").contains(says), "{what}: {:?}", r.json);
    }
    // An upload over max_upload_bytes is refused before its body is read
    // (curl sends `Expect: 100-continue` for a large body and gets the 413 at once).
    let addr = s.base.trim_start_matches("http://").to_string();
    let head = format!(
        "POST /v1/plugins/big/versions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {a}\r\n\
         Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 9000000\r\nExpect: 100-continue\r\n\r\n"
    );
    let reply = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
        c.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap_or_else(|e| panic!("{e}"));
        c.write_all(head.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let mut buf = vec![0u8; 4096];
        let n = c.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    })
    .await
    .unwrap_or_default();
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    for (name, status) in [("Bad Name", 400), ("-x", 400)] {
        let r = s.upload(&a, &name.replace(' ', "%20"), &bytes, &json!({})).await;
        assert_eq!(r.status, status, "plugin name {name}: {:?}", r.json);
    }
    // A multipart body without a component, and one with a stray part.
    let resp = s
        .http
        .post(format!("{}/v1/plugins/x/versions", s.base))
        .bearer_auth(&a)
        .header("content-type", "multipart/form-data; boundary=b")
        .body("--b\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nhi\r\n--b--\r\n")
        .send()
        .await;
    assert_eq!(resp.map(|r| r.status().as_u16()).unwrap_or(0), 400);
    let resp =
        s.http.post(format!("{}/v1/plugins/x/versions", s.base)).bearer_auth(&a).body("not multipart").send().await;
    assert_eq!(resp.map(|r| r.status().as_u16()).unwrap_or(0), 400);
    let plugins = s.get("/v1/plugins", &a).await.json;
    assert_eq!(plugins.as_array().map(Vec::len), Some(1), "a refused upload was stored: {plugins}");
    assert_eq!(s.get("/v1/usage", &a).await.json["usage"]["plugin_storage_bytes"], bytes.len());
    // Refused components that compiled left nothing in the component cache: deny-tools' artifact only.
    let artifacts = std::fs::read_dir(s.dir.path().join("data/cache"))
        .map(|d| d.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "cwasm")).count())
        .unwrap_or(0);
    assert_eq!(artifacts, 1, "refused uploads left compiled artifacts");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_capabilities_wait_for_an_admin_and_activation_is_atomic_with_rollback() {
    let mut s = TestServer::start("grantable_env = [\"HOOKBOX_TEST_GRANT\"]").await;
    let a = s.tenant("acme").await;
    let bytes = read(DENY_TOOLS);
    s.install(&a, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"], "message": "v1"}})).await;
    // v2 asks for an env grant v1 did not have: pending until approved.
    let v2 = s
        .upload(
            &a,
            "deny-tools",
            &bytes,
            &json!({"config": {"paths": ["test.txt"], "message": "v2"}, "env": ["HOOKBOX_TEST_GRANT"]}),
        )
        .await;
    assert_eq!(v2.json["status"], "pending", "{:?}", v2.json);
    assert_eq!(v2.json["report"]["diff"]["new_grants"], json!(["env:HOOKBOX_TEST_GRANT"]));
    assert_eq!(v2.json["report"]["diff"]["against"], 1);
    let r = s.post("/v1/plugins/deny-tools/versions/2/activate", &a, json!({})).await;
    assert_eq!(r.status, 409, "a pending version was activated: {:?}", r.json);
    assert_eq!(verdict(&s, &a, "delete_file", ".env").await["verdict"], "skip-tool");
    // v3 raises a limit: also pending, the diff says which.
    let v3 = s.upload(&a, "deny-tools", &bytes, &json!({"limits": {"fuel": 900_000_000}})).await;
    assert_eq!(v3.json["status"], "pending");
    let raised = &v3.json["report"]["diff"]["changed_limits"];
    assert!(
        raised.as_array().is_some_and(|l| l.iter().any(|c| c["limit"] == "fuel" && c["raised"] == true)),
        "{raised}"
    );
    // The admin approves v2's diff; it activates.
    assert_eq!(s.post("/v1/plugins/deny-tools/versions/2/approve", &a, json!({})).await.status, 200);
    assert_eq!(s.post("/v1/plugins/deny-tools/versions/2/approve", &a, json!({})).await.status, 409);
    assert_eq!(s.post("/v1/plugins/deny-tools/versions/2/activate", &a, json!({})).await.status, 200);
    let now = verdict(&s, &a, "delete_file", "test.txt").await;
    assert_eq!(now["verdict"], "skip-tool", "{now}");
    assert!(now["terminal"].to_string().contains("v2"), "{now}");
    assert_eq!(verdict(&s, &a, "delete_file", ".env").await["verdict"], "continue");
    // Uploads of one tenant run one at a time: concurrent ones are 429 (none is half-stored).
    let empty = json!({});
    let (r1, r2, r3) = tokio::join!(
        s.upload(&a, "c1", &bytes, &empty),
        s.upload(&a, "c2", &bytes, &empty),
        s.upload(&a, "c3", &bytes, &empty)
    );
    let statuses = [r1.status, r2.status, r3.status];
    assert!(statuses.contains(&201) && statuses.contains(&429), "{statuses:?}");
    for r in [&r1, &r2, &r3] {
        assert!(r.status == 201 || r.json["error"] == "too_many_requests", "{:?}", r.json);
    }
    // Rollback: version 1 again.
    assert_eq!(s.post("/v1/plugins/deny-tools/versions/1/activate", &a, json!({})).await.status, 200);
    assert_eq!(verdict(&s, &a, "delete_file", ".env").await["verdict"], "skip-tool");
    let list = s.get("/v1/plugins", &a).await.json;
    let deny = list.as_array().and_then(|l| l.iter().find(|p| p["name"] == "deny-tools")).cloned().unwrap_or_default();
    let statuses: Vec<&str> =
        deny["versions"].as_array().into_iter().flatten().filter_map(|v| v["status"].as_str()).collect();
    assert_eq!(statuses, ["active", "inactive", "pending"], "{list}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_finishes_on_the_versions_it_started_with() {
    let mut s = TestServer::start("").await;
    let a = s.tenant("acme").await;
    s.install(&a, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"], "message": "v1"}})).await;
    let asker =
        json!({"config": {"before-tool-call": "ask-approval:{tool} needs a person", "only_tool": "create_file"}});
    s.install(&a, "asker", SCRIPTED, asker).await;
    let run = s.start_run(&a, json!({})).await;
    let approval = s.wait_approval(&a, &run).await;
    // While the run waits, v2 (which denies test.txt) becomes active.
    s.install(&a, "deny-tools", DENY_TOOLS, json!({"config": {"paths": ["test.txt"], "message": "v2"}})).await;
    let id = approval["id"].as_str().unwrap_or_default().replace('/', "%2F");
    assert_eq!(s.post(&format!("/v1/approvals/{id}"), &a, json!({"decision": "approve"})).await.status, 200);
    let done = s.wait_run(&a, &run).await;
    let record = &done["record"];
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["plugins"], json!(["asker@1", "deny-tools@1"]));
    // The approved create ran after v2 was active: v1 (the run's) let it through.
    let text = record["directives"].to_string();
    assert!(text.contains("v1") && !text.contains("v2"), "{text}");
    let created = record["events"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e["type"] == "tool-call-result" && e["tool_name"] == "create_file" && e["success"] == true);
    assert!(created, "{}", record["events"]);
    // A new evaluate uses v2.
    assert!(verdict(&s, &a, "create_file", "test.txt").await["terminal"].to_string().contains("v2"));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_version_sees_live_events_and_its_disagreements_and_failures_are_recorded() {
    let mut s = TestServer::start("").await;
    let a = s.tenant("acme").await;
    s.install(&a, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let v2 = s.upload(&a, "deny-tools", &read(DENY_TOOLS), &json!({"config": {"paths": ["test.txt"]}})).await;
    assert_eq!(v2.json["status"], "ready");
    assert_eq!(s.post("/v1/plugins/deny-tools/versions/1/shadow", &a, json!({})).await.status, 409);
    assert_eq!(s.post("/v1/plugins/deny-tools/versions/2/shadow", &a, json!({})).await.status, 200);
    // The active version decides.
    assert_eq!(verdict(&s, &a, "delete_file", ".env").await["verdict"], "skip-tool");
    assert_eq!(verdict(&s, &a, "create_file", "test.txt").await["verdict"], "continue");
    assert_eq!(verdict(&s, &a, "read_file", "notes.md").await["verdict"], "continue");
    // A run's events are shadowed too.
    let run = s.start_run(&a, json!({})).await;
    assert_eq!(s.wait_run(&a, &run).await["status"], "completed");
    let mut shadow = Value::Null;
    for _ in 0..100 {
        shadow = s.get("/v1/plugins/deny-tools/shadow", &a).await.json;
        if shadow["summary"]["disagreements"].as_u64() >= Some(4) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(shadow["shadow"], 2);
    // .env and test.txt, by evaluate and by the run: four disagreements; notes.md agrees.
    assert_eq!(shadow["summary"]["disagreements"], 4, "{shadow}");
    assert!(shadow["summary"]["calls"].as_u64() > Some(4), "{shadow}");
    let first =
        shadow["records"].as_array().and_then(|r| r.iter().find(|r| r["agree"] == false)).cloned().unwrap_or_default();
    assert!(first["active"].is_string() && first["shadow"].is_string() && first["fuel_delta"].is_i64(), "{first}");
    // A shadow that traps: recorded as a failure, the active version still decides.
    s.install(&a, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let trap = s.upload(&a, "deny-tools", &read(TRAP_ON_TOOL), &json!({})).await;
    let v = trap.json["version"].as_i64().unwrap_or_default();
    assert_eq!(s.post(&format!("/v1/plugins/deny-tools/versions/{v}/shadow"), &a, json!({})).await.status, 200);
    assert_eq!(verdict(&s, &a, "delete_file", ".env").await["verdict"], "skip-tool");
    let mut failures = 0;
    for _ in 0..100 {
        failures =
            s.get("/v1/plugins/deny-tools/shadow", &a).await.json["summary"]["shadow_failures"].as_u64().unwrap_or(0);
        if failures > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(failures, 1);
    let r = s.call("DELETE", "/v1/plugins/deny-tools/shadow", Some(&a), None).await;
    assert_eq!(r.status, 200);
    assert_eq!(s.get("/v1/plugins", &a).await.json[0]["shadow"], Value::Null);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_over_the_plugin_storage_quota_is_429_and_says_which_quota() {
    let mut s = TestServer::start("").await;
    let a = s.tenant("acme").await;
    let bytes = read(DENY_TOOLS);
    let mut quotas = s.get("/v1/usage", &a).await.json["quotas"].clone();
    quotas["plugin_storage_bytes"] = json!(bytes.len() + 10);
    let r = s.call("PUT", "/v1/admin/tenants/acme/quotas", Some(&s.operator.clone()), Some(&quotas)).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(s.upload(&a, "one", &bytes, &json!({})).await.status, 201);
    let r = s.upload(&a, "two", &bytes, &json!({})).await;
    assert_eq!(r.status, 429, "{:?}", r.json);
    assert_eq!(r.json["error"], "quota");
    assert_eq!(r.json["quota"], "plugin_storage_bytes");
    // Metrics name every tenant and plugin: the operator key only.
    let metrics = s.http.get(format!("{}/metrics", s.base)).send().await.map(|r| r.status().as_u16());
    assert_eq!(metrics.unwrap_or(0), 401);
    assert_eq!(s.get("/metrics", &a).await.status, 404, "a tenant key read the metrics");
    let text = s.http.get(format!("{}/metrics", s.base)).bearer_auth(&s.operator).send().await.ok();
    let text = match text {
        Some(r) => r.text().await.unwrap_or_default(),
        None => String::new(),
    };
    assert!(text.contains("hookbox_quota_rejections_total{tenant=\"acme\",what=\"plugin_storage_bytes\"} 1"), "{text}");
    s.shutdown().await;
}
