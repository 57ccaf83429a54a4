//! `hookbox serve`'s tenancy (issue 15, item 2): every `/v1/` request needs
//! a valid key (401 otherwise), and tenant B gets 404 — never 403, never
//! data — for each of tenant A's objects, route by route.

use hookbox_tests::server::TestServer;
use hookbox_tests::{DENY_TOOLS, SCRIPTED};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_valid_key_get_401_and_admin_routes_are_hidden_from_tenants() {
    let mut s = TestServer::start("").await;
    let a = s.tenant("acme").await;
    let bogus = format!("hbk_{}", "0".repeat(64));
    let operator_as_tenant = format!("hbk_{}", &s.operator[4..]);
    for (key, what) in [
        (None, "no key"),
        (Some("hbk_short"), "a malformed key"),
        (Some(bogus.as_str()), "an unknown key"),
        (Some(operator_as_tenant.as_str()), "the operator's secret with a tenant prefix"),
    ] {
        for (method, path) in [
            ("GET", "/v1/plugins"),
            ("GET", "/v1/runs"),
            ("GET", "/v1/approvals"),
            ("POST", "/v1/evaluate"),
            ("GET", "/v1/admin/tenants"),
            ("GET", "/v1/usage"),
        ] {
            let r = s.call(method, path, key, Some(&json!({}))).await;
            assert_eq!(r.status, 401, "{what} on {method} {path}: {:?}", r.json);
            assert_eq!(r.json["error"], "unauthorized");
        }
    }
    // A header that is not `Bearer KEY`.
    let resp = s.http.get(format!("{}/v1/plugins", s.base)).header("authorization", format!("Basic {a}")).send().await;
    assert_eq!(resp.map(|r| r.status().as_u16()).unwrap_or(0), 401);
    // A tenant key does not learn that the admin routes exist.
    assert_eq!(s.get("/v1/admin/tenants", &a).await.status, 404);
    assert_eq!(s.post("/v1/admin/tenants", &a, json!({"name": "evil"})).await.status, 404);
    let r = s.call("PUT", "/v1/admin/tenants/acme/quotas", Some(&a), Some(&json!({}))).await;
    assert_eq!(r.status, 404);
    // The operator sees tenants; the key is never listed.
    let r = s.get("/v1/admin/tenants", &s.operator.clone()).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json[0]["name"], "acme");
    assert!(!r.json.to_string().contains(&a[4..]), "a key's secret is listed");
    // Keys are stored only as hashes: the database never holds the key.
    let db = std::fs::read(s.dir.path().join("data/server.db")).unwrap_or_default();
    let hay = String::from_utf8_lossy(&db);
    assert!(!hay.contains(&a[4..]) && !hay.contains(&s.operator[4..]), "a key is stored in clear");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_b_gets_404_for_every_one_of_tenant_a_s_objects() {
    let mut s = TestServer::start("").await;
    let a = s.tenant("acme").await;
    let b = s.tenant("globex").await;
    // A's objects: a plugin with an active version, a pending version and a
    // shadow, and a run parked on an approval.
    let manifest =
        json!({"config": {"before-tool-call": "ask-approval:{tool} needs a person", "only_tool": "create_file"}});
    s.install(&a, "asker", SCRIPTED, manifest.clone()).await;
    let v2 = s.upload(&a, "asker", &std::fs::read(SCRIPTED).unwrap_or_default(), &manifest).await;
    assert_eq!(v2.status, 201, "{:?}", v2.json);
    assert_eq!(s.post("/v1/plugins/asker/versions/2/shadow", &a, json!({})).await.status, 200);
    s.install(&a, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let run = s.start_run(&a, json!({"session": "a-private"})).await;
    let approval = s.wait_approval(&a, &run).await;
    let approval_id = approval["id"].as_str().unwrap_or_default().to_string();
    let escaped = approval_id.replace('/', "%2F");

    // B sees none of it in its lists.
    for path in ["/v1/plugins", "/v1/runs", "/v1/approvals"] {
        let r = s.get(path, &b).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.json, json!([]), "B's {path} shows A's objects");
    }
    let steer = json!({});
    let routes: Vec<(&str, String, serde_json::Value)> = vec![
        ("GET", "/v1/plugins/asker/versions/1".into(), steer.clone()),
        ("POST", "/v1/plugins/asker/versions/2/approve".into(), steer.clone()),
        ("POST", "/v1/plugins/asker/versions/1/activate".into(), steer.clone()),
        ("POST", "/v1/plugins/asker/versions/2/shadow".into(), steer.clone()),
        ("GET", "/v1/plugins/asker/shadow".into(), steer.clone()),
        ("DELETE", "/v1/plugins/asker/shadow".into(), steer.clone()),
        ("GET", format!("/v1/runs/{run}"), steer.clone()),
        ("GET", format!("/v1/runs/{run}/events"), steer.clone()),
        ("POST", format!("/v1/runs/{run}/pause"), steer.clone()),
        ("POST", format!("/v1/runs/{run}/resume"), steer.clone()),
        ("POST", format!("/v1/runs/{run}/abort"), steer.clone()),
        ("POST", format!("/v1/runs/{run}/inject"), json!({"text": "from B"})),
        ("POST", format!("/v1/approvals/{approval_id}"), json!({"decision": "approve"})),
        ("POST", format!("/v1/approvals/{escaped}"), json!({"decision": "approve"})),
        (
            "POST",
            "/v1/evaluate".into(),
            json!({"session_id": "s", "plugins": ["deny-tools"], "event": {"type": "iteration-start", "iteration": 1, "loop_counter": 1}}),
        ),
    ];
    for (method, path, body) in &routes {
        let r = s.call(method, path, Some(&b), Some(body)).await;
        assert_eq!(r.status, 404, "B on {method} {path}: {:?}", r.json);
        assert_eq!(r.json["error"], "not_found", "{method} {path}");
        let text = r.json.to_string();
        assert!(!text.contains("asker") && !text.contains(&run), "{method} {path} leaks: {text}");
    }
    // Nothing B did touched A's run or plugin: the approval still waits, the shadow still runs.
    let r = s.get(&format!("/v1/runs/{run}"), &a).await;
    assert_eq!(r.json["status"], "waiting-approval", "{:?}", r.json);
    assert_eq!(s.get("/v1/plugins", &a).await.json[0]["shadow"], 2);
    // A member key of A may not approve diffs or make keys (403: its own tenant's object).
    let member = s.post("/v1/keys", &a, json!({"role": "member"})).await;
    assert_eq!(member.status, 201, "{:?}", member.json);
    let member = member.json["key"].as_str().unwrap_or_default().to_string();
    assert_eq!(s.post("/v1/plugins/asker/versions/2/approve", &member, json!({})).await.status, 403);
    assert_eq!(s.post("/v1/keys", &member, json!({"role": "admin"})).await.status, 403);
    // A answers its own approval; the run finishes.
    let r = s.post(&format!("/v1/approvals/{escaped}"), &a, json!({"decision": "approve"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let done = s.wait_run(&a, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    // B's evaluate on its own session never reads A's hook state: the
    // session a hook's state is keyed by is always the caller's own.
    let spoof = json!({"session_id": "x", "event": {"type": "run-start", "run_id": "r", "session_id": "acme:a-private",
        "model": "m", "provider": "p", "user_content": []}});
    let r = s.post("/v1/evaluate", &b, spoof).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    s.shutdown().await;
}
