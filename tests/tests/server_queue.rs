//! Issue 17, the run queue: a worker drives at most `worker_runs` runs at
//! once. On PostgreSQL a new run it has no room for is queued in the
//! database and started by a worker with room (another one, or this one once
//! a run ends); aborting a queued run ends it at once; queued runs count
//! against the tenant's `parked_runs` quota. On SQLite (one worker) such a
//! run gets 503. The PostgreSQL test runs under `scripts/with-postgres.sh`
//! (skipped without it; a failure with `HOOKBOX_REQUIRE_POSTGRES=1`).

use hookbox_tests::postgres::{
    count_logs, database, install_asker_chain, query_text, run_row, second_worker, sql, status, wait_status,
};
use hookbox_tests::server::{ApiClient, TestServer};
use serde_json::{Value, json};

/// Starts a demo run; returns the answer's status and body.
async fn post_run(api: &ApiClient, key: &str, session: &str) -> (u16, Value) {
    let body = json!({"prompt": hookbox_tests::DEMO_PROMPT, "model": "demo", "session": session});
    let r = api.post("/v1/runs", key, body).await;
    (r.status, r.json)
}

/// Approves the approval run `run` waits for, through `api`.
async fn approve(api: &ApiClient, key: &str, run: &str) {
    let approval = api.wait_approval(key, run).await;
    let id = approval["id"].as_str().unwrap_or_default().replace('/', "%2F");
    let r = api.post(&format!("/v1/approvals/{id}"), key, json!({"decision": "approve"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_no_room_queues_new_runs_for_a_worker_with_room() {
    let Some(url) = database() else { return };
    // Runs waiting for an approval stay in their worker here: they hold its room.
    let mut a = TestServer::start(&format!("database = \"{url}\"\nworker_runs = 1\npark_after_ms = 600000\n")).await;
    let key = a.tenant("acme").await;
    install_asker_chain(&a, &key).await;

    // A's one place is taken by a run waiting for its approval.
    let first = a.start_run(&key, json!({"session": "first"})).await;
    wait_status(&a, &key, &first, "waiting-approval", 20).await;

    // The next ones are queued in the database: no worker has room.
    let (code, body) = post_run(&a, &key, "second").await;
    assert_eq!((code, &body["queued"]), (201, &json!(true)), "{body}");
    let second = body["run_id"].as_str().unwrap_or_default().to_string();
    let (code, body) = post_run(&a, &key, "third").await;
    assert_eq!((code, &body["queued"]), (201, &json!(true)), "{body}");
    let third = body["run_id"].as_str().unwrap_or_default().to_string();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(status(&a, &key, &second).await["status"], "queued", "A has no room to claim it");

    // Steering a queued run: only an abort, which ends it at once.
    let r = a.post(&format!("/v1/runs/{second}/inject"), &key, json!({"text": "hello"})).await;
    assert_eq!(r.status, 409, "{:?}", r.json);
    let r = a.post(&format!("/v1/runs/{third}/abort"), &key, json!({"reason": "not needed"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let done = a.wait_run(&key, &third).await;
    assert_eq!(done["status"], "aborted", "{done}");
    assert!(done["record"].to_string().contains("not needed"), "{done}");
    let events = a.events(&key, &third, None).await;
    let names: Vec<&str> = events.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(names, ["status", "end"], "{events:?}");
    assert_eq!(events[0].2["status"], "queued", "{events:?}");
    assert_eq!(a.post(&format!("/v1/runs/{third}/abort"), &key, json!({"reason": "again"})).await.status, 409);
    // Counted with the runs that ended, as aborted.
    let metrics = a.http.get(format!("{}/metrics", a.base)).bearer_auth(&a.operator).send().await.ok();
    let text = match metrics {
        Some(r) => r.text().await.unwrap_or_default(),
        None => String::new(),
    };
    assert!(text.contains("hookbox_runs_total{tenant=\"acme\",what=\"aborted\"} 1"), "{text}");

    // Queued runs count against parked_runs: with one queued and a quota of
    // one, the next gets 429 and nothing is stored.
    let mut quotas = a.get("/v1/usage", &key).await.json["quotas"].clone();
    quotas["parked_runs"] = json!(1);
    let r = a.call("PUT", "/v1/admin/tenants/acme/quotas", Some(&a.operator.clone()), Some(&quotas)).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let (code, body) = post_run(&a, &key, "over").await;
    assert_eq!((code, &body["quota"]), (429, &json!("parked_runs")), "{body}");
    let stored = query_text(&url, "SELECT count(*)::text FROM runs".to_string());
    assert_eq!(stored.as_deref(), Some("3"), "the refused run is not stored");
    quotas["parked_runs"] = json!(10);
    let r = a.call("PUT", "/v1/admin/tenants/acme/quotas", Some(&a.operator.clone()), Some(&quotas)).await;
    assert_eq!(r.status, 200, "{:?}", r.json);

    // A run waiting in the database for a worker (here a queued one made
    // `resumable`, as an answered parked run is, its checkpoint one of a run
    // that started: the two must agree) takes an abort at once: it is
    // written into its checkpoint, and the worker that takes it ends it.
    let (code, body) = post_run(&a, &key, "fifth").await;
    assert_eq!((code, &body["queued"]), (201, &json!(true)), "{body}");
    let fifth = body["run_id"].as_str().unwrap_or_default().to_string();
    sql(
        &url,
        format!(
            "UPDATE runs SET status = 'resumable', started = TRUE,
                 checkpoint = jsonb_set(checkpoint::jsonb, '{{queued}}', 'false')::TEXT WHERE id = '{fifth}'"
        ),
    );
    let r = a.post(&format!("/v1/runs/{fifth}/abort"), &key, json!({"reason": "waited too long"})).await;
    assert_eq!((r.status, r.json["status"].clone()), (200, json!("aborting")), "{:?}", r.json);
    let stored = query_text(&url, format!("SELECT checkpoint::jsonb ->> 'abort' FROM runs WHERE id = '{fifth}'"));
    assert_eq!(stored.as_deref(), Some("waited too long"));

    // concurrent_runs counts the tenant's runs on every worker: with one,
    // B (which has room and runs nothing) neither claims the queued run nor
    // starts a new one while A's run is live.
    quotas["concurrent_runs"] = json!(1);
    let r = a.call("PUT", "/v1/admin/tenants/acme/quotas", Some(&a.operator.clone()), Some(&quotas)).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let (_dir_b, server_b, b) = second_worker(&a, &format!("database = \"{url}\"\npark_after_ms = 600000\n")).await;
    let (code, body) = post_run(&b, &key, "over-b").await;
    assert_eq!((code, &body["quota"]), (429, &json!("concurrent_runs")), "{body}");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(status(&b, &key, &second).await["status"], "queued", "its tenant runs all it may");

    // With room in the quota, B claims the queued run and runs it; its
    // approval is answered through A; it completes on B while A's run still
    // waits. A stream opened on B while B runs it starts at its first event.
    quotas["concurrent_runs"] = json!(4);
    let r = a.call("PUT", "/v1/admin/tenants/acme/quotas", Some(&a.operator.clone()), Some(&quotas)).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    wait_status(&b, &key, &second, "waiting-approval", 20).await;
    let watcher = {
        let (api, key, run) = (b.clone(), key.clone(), second.clone());
        tokio::spawn(async move { api.events(&key, &run, None).await })
    };
    approve(&a, &key, &second).await;
    let done = b.wait_run(&key, &second).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(count_logs(&done["record"]), ["count=1", "count=2"], "each result committed once: {done}");
    assert_eq!(status(&a, &key, &first).await["status"], "waiting-approval");
    let owners = query_text(
        &url,
        format!(
            "SELECT ((SELECT owner FROM runs WHERE id = '{first}') <> (SELECT owner FROM runs WHERE id = '{second}'))::text"
        ),
    );
    assert_eq!(owners.as_deref(), Some("true"), "the queued run ran on the other worker");
    let done = b.wait_run(&key, &fifth).await;
    assert_eq!(done["status"], "aborted", "{done}");
    assert!(done["record"].to_string().contains("waited too long"), "{done}");
    // Its stream, read on B as it ran and on A after: queued, then running
    // on B, and one end, with ids 1, 2, ...
    let on_b = tokio::time::timeout(std::time::Duration::from_secs(30), watcher)
        .await
        .expect("B's stream ends")
        .expect("watcher");
    for events in [on_b, a.events(&key, &second, None).await] {
        assert_eq!(events[0].2, json!({"status": "queued"}), "{events:?}");
        assert_eq!(events[1].2, json!({"status": "running"}), "{events:?}");
        assert_eq!(events.iter().filter(|e| e.1 == "end").count(), 1, "{events:?}");
        let ids: Vec<i64> = events.iter().map(|e| e.0).collect();
        assert!(ids.iter().copied().eq(1..=i64::try_from(ids.len()).unwrap_or(0)), "ids 1, 2, ...: {ids:?}");
    }
    server_b.shutdown().await;

    // With B gone, a run queued on a full A is started by A once its run ends.
    let (code, body) = post_run(&a, &key, "fourth").await;
    assert_eq!((code, &body["queued"]), (201, &json!(true)), "{body}");
    let fourth = body["run_id"].as_str().unwrap_or_default().to_string();
    approve(&a, &key, &first).await;
    assert_eq!(a.wait_run(&key, &first).await["status"], "completed");
    wait_status(&a, &key, &fourth, "waiting-approval", 20).await;
    approve(&a, &key, &fourth).await;
    let done = a.wait_run(&key, &fourth).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(count_logs(&done["record"]), ["count=1", "count=2"], "{done}");
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_a_run_the_worker_has_no_room_for_gets_503() {
    let mut a = TestServer::start("worker_runs = 1\n").await;
    let key = a.tenant("acme").await;
    install_asker_chain(&a, &key).await;
    let first = a.start_run(&key, json!({"session": "first"})).await;
    let _ = a.wait_approval(&key, &first).await;
    let (code, body) = post_run(&a, &key, "second").await;
    assert_eq!(code, 503, "{body}");
    assert!(body.to_string().contains("worker_runs"), "{body}");
    approve(&a, &key, &first).await;
    assert_eq!(a.wait_run(&key, &first).await["status"], "completed");
    // Its place is free again.
    let (code, body) = post_run(&a, &key, "third").await;
    assert_eq!((code, body.get("queued")), (201, None), "{body}");
    a.shutdown().await;
}

// The store's side: `concurrent_runs` counted over the workers of one
// database (answered runs waiting for a worker keep their places), and
// writes to a parked run compare-and-swapped on its park number.
#[test]
fn admission_counts_every_worker_and_parked_run_writes_are_compare_and_swapped() {
    let Some(url) = database() else { return };
    use hookbox_server::ServerStore;
    fn ok<E: std::fmt::Display>(r: Result<bool, E>) -> bool {
        r.unwrap_or_else(|e| panic!("{e}"))
    }
    let a = hookbox_server::PostgresServerStore::open(&url).unwrap_or_else(|e| panic!("open: {e}"));
    let b = hookbox_server::PostgresServerStore::open(&url).unwrap_or_else(|e| panic!("open: {e}"));
    let quotas = hookbox_server::Quotas { concurrent_runs: 2, ..hookbox_server::Quotas::default() };
    let tenant = a.create_tenant("acme", &quotas).unwrap_or_else(|e| panic!("{e}")).id;
    let run = run_row;
    assert!(ok(a.add_run_within(tenant, &run("a1"), 2)));
    assert!(ok(b.add_run_within(tenant, &run("b1"), 2)));
    assert!(!ok(b.add_run_within(tenant, &run("b2"), 2)), "two live, one on each worker");
    // An answer is queued for another worker's run only while its approval is listed.
    let answer = r#"{"nonce": "n-1", "command": {"kind": "answer", "id": "b1/c1", "answer": {"answer": "approve"}}}"#;
    assert!(!ok(a.add_command(tenant, "b1", answer)), "no such approval waits");
    b.add_approval(tenant, ("b1", hookbox_server::Claim::FIRST), "b1/c1", &json!({"tool": "create_file"}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ok(a.add_command(tenant, "b1", answer)));
    // a1 parks: it no longer counts.
    sql(&url, "UPDATE runs SET status = 'parked', owner = NULL, checkpoint = 'c0', parks = 1 WHERE id = 'a1'".into());
    assert!(ok(a.add_run_within(tenant, &run("a2"), 2)));

    assert!(!ok(a.update_parked("a1", 0, "c1")), "read at an older park");
    assert!(ok(a.update_parked("a1", 1, "c1")));
    assert!(!ok(b.update_parked("a1", 1, "c2")), "read before the first write: refused, to be read again");
    assert!(!ok(b.unpark("a1", 1, "c3")), "so is an answer read before it");
    assert!(ok(b.unpark("a1", 2, "c3")));
    assert!(!ok(a.unpark("a1", 2, "c3")), "answered once");
    assert_eq!(query_text(&url, "SELECT checkpoint FROM runs WHERE id = 'a1'".into()).as_deref(), Some("c3"));

    // a1 answered and waiting for a worker keeps its place: a new run is
    // refused, and a1 is claimed once a place is free.
    a.finish_run("a2", hookbox_server::Claim::FIRST, "completed", None).unwrap_or_else(|e| panic!("{e}"));
    assert!(!ok(a.add_run_within(tenant, &run("a3"), 2)), "b1 live and a1 answered: the quota's two");
    let claimed = b.claim_resumable(None).unwrap_or_else(|e| panic!("{e}")).map(|c| c.run.run_id);
    assert_eq!(claimed.as_deref(), Some("a1"));
    assert!(!ok(a.add_run_within(tenant, &run("a3"), 2)), "b1 and a1 live");
    b.finish_run("b1", hookbox_server::Claim::FIRST, "completed", None).unwrap_or_else(|e| panic!("{e}"));
    assert!(ok(a.add_run_within(tenant, &run("a3"), 2)));

    // Ten tenants at their one place, each with a run queued, ahead of an
    // eleventh tenant's queued run: the claim takes the eleventh's.
    let one = hookbox_server::Quotas { concurrent_runs: 1, ..hookbox_server::Quotas::default() };
    let mut statements = String::new();
    for i in 0..11 {
        let t = a.create_tenant(&format!("t{i}"), &one).unwrap_or_else(|e| panic!("{e}")).id;
        if i < 10 {
            assert!(ok(a.add_run_within(t, &run(&format!("live-{i}")), 1)));
        }
        statements.push_str(&format!(
            "INSERT INTO runs (id, tenant_id, status, model, session, plugins, created_at, checkpoint)
             VALUES ('queued-{i}', {t}, 'queued', 'replay', 's', '[]', 0, '{{}}');"
        ));
    }
    sql(&url, statements);
    let claimed = b.claim_resumable(None).unwrap_or_else(|e| panic!("{e}")).map(|c| c.run.run_id);
    assert_eq!(claimed.as_deref(), Some("queued-10"), "the blocked tenants' runs are passed over");
    let claimed = b.claim_resumable(None).unwrap_or_else(|e| panic!("{e}")).map(|c| c.run.run_id);
    assert_eq!(claimed, None, "every other tenant is at its place");
}

// A row whose status and checkpoint disagree on whether the run started
// (`resumable`, but a checkpoint of a run queued and never started) is
// claimed and fails saying so, rather than being started afresh and given
// back as the other kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_status_and_checkpoint_disagree_fails_when_claimed() {
    let Some(url) = database() else { return };
    let mut a = TestServer::start(&format!("database = \"{url}\"\n")).await;
    let key = a.tenant("acme").await;
    let tenant = query_text(&url, "SELECT id::TEXT FROM tenants WHERE name = 'acme'".into()).unwrap_or_default();
    let checkpoint = json!({
        "spec": {"prompt": "p", "system": null, "model": "demo", "plugins": [], "session_key": "acme:s"},
        "checkpoint": {"run_id": "mismatch", "turn": 1, "responses": [], "tools": [], "imports": {}, "calls": [],
            "approvals": [], "deliveries": [], "begun": {}, "started": [], "pending": {}, "pauses": 0},
        "approval": null, "workspace": [], "abort": null, "paused": false, "counted_usd": 0.0,
        "queued": true, "inbox": []
    });
    sql(
        &url,
        format!(
            "INSERT INTO runs (id, tenant_id, status, model, session, plugins, created_at, checkpoint)
             VALUES ('mismatch', {tenant}, 'resumable', 'demo', 's', '[]', 0, '{checkpoint}')"
        ),
    );
    let done = a.wait_run(&key, "mismatch").await;
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["record"].to_string().contains("says it has not started"), "{done}");
    // Counted with the runs that ended, as failed.
    let metrics = a.http.get(format!("{}/metrics", a.base)).bearer_auth(&a.operator).send().await.ok();
    let text = match metrics {
        Some(r) => r.text().await.unwrap_or_default(),
        None => String::new(),
    };
    assert!(text.contains("hookbox_runs_total{tenant=\"acme\",what=\"failed\"} 1"), "{text}");
    a.shutdown().await;
}
