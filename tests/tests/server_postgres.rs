//! Issue 17: `hookbox serve` workers on PostgreSQL. Run under
//! `scripts/with-postgres.sh`, which sets `HOOKBOX_TEST_POSTGRES`; skipped
//! without it (a failure with `HOOKBOX_REQUIRE_POSTGRES=1`). Each test gets
//! a database of its own. Workers on one database answer for the same
//! tenants, keys, plugin versions, hook state and conversations; any worker
//! answers approvals and steers runs of another; a stalled worker's runs
//! are swept and its writes fenced, a killed one's end `interrupted` on the
//! others; a run outlives a restart of PostgreSQL; 1,000 runs spread over
//! three workers each end once with every result and state commit.

use hookbox_tests::postgres::{Worker, database, query_text, second_worker, sql, status, wait_status};
use hookbox_tests::server::{TestServer, test_config};
use hookbox_tests::{DENY_TOOLS, SCRIPTED, STATE_COUNTER};
use serde_json::json;

/// `hookbox serve`, run as a process.
const BIN: &str = env!("CARGO_BIN_EXE_hookbox-under-test");

/// The tests share one PostgreSQL server; the one that restarts it runs alone.
static SERVER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

fn before_tool_call(path: &str) -> serde_json::Value {
    json!({"session_id": "pg-1", "event": {"type": "before-tool-call", "iteration": 1,
        "call": {"id": "c1", "name": "delete_file", "arguments": format!("{{\"path\": \"{path}\"}}")}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_postgres_database_serve_the_same_tenants_and_plugins() {
    let Some(url) = database() else { return };
    let _shared = SERVER.read().await;
    let extra = format!("database = \"{url}\"");
    let mut a = TestServer::start(&extra).await;
    let key = a.tenant("acme").await;
    let plugin = std::fs::read(DENY_TOOLS).expect("plugin built");
    let uploaded = a.upload(&key, "deny-tools", &plugin, &json!({"config": {"paths": [".env"]}})).await;
    assert_eq!(uploaded.status, 201, "{:?}", uploaded.json);

    let (_dir_b, server_b, b) = second_worker(&a, &extra).await;
    // A worker started without their secret is refused (its operator key
    // would revoke theirs, and no key would open it), and changes nothing.
    let stray = tempfile::tempdir().expect("tempdir");
    let refused = hookbox_server::Server::start(test_config(&stray.path().join("data"), &extra)).await;
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("server.secret") && message.contains("other workers"), "{message}");
    assert_eq!(b.get("/v1/admin/tenants", &a.operator.clone()).await.status, 200, "the operator key still opens B");

    // The key made on A opens B; the version uploaded on A is activated on B.
    let r = b.post("/v1/plugins/deny-tools/versions/1/activate", &key, json!({})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let r = b.post("/v1/evaluate", &key, before_tool_call(".env")).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(r.json["verdict"], "skip-tool", "{:?}", r.json);
    let r = a.post("/v1/evaluate", &key, before_tool_call("notes.txt")).await;
    assert_eq!(r.json["verdict"], "continue", "{:?}", r.json);
    let listed = a.get("/v1/plugins", &key).await;
    assert_eq!(listed.json[0]["active"], 1, "{:?}", listed.json);
    // A second upload on B numbers after A's.
    let second = b.upload(&key, "deny-tools", &plugin, &json!({})).await;
    assert_eq!(second.json["version"], 2, "{:?}", second.json);
    // A keeps v1's chain; v2 (denying only `secret.txt`) activated on B
    // reaches A within a second or so, and so does a rollback.
    let second = b.upload(&key, "deny-tools", &plugin, &json!({"config": {"paths": ["secret.txt"]}})).await;
    assert_eq!(second.json["version"], 3, "{:?}", second.json);
    assert_eq!(a.post("/v1/evaluate", &key, before_tool_call(".env")).await.json["verdict"], "skip-tool");
    let r = b.post("/v1/plugins/deny-tools/versions/3/activate", &key, json!({})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let changed = std::time::Instant::now();
    let verdict_on_a = |path: &'static str| {
        let a = a.api.clone();
        let key = key.clone();
        async move { a.post("/v1/evaluate", &key, before_tool_call(path)).await.json["verdict"].clone() }
    };
    while verdict_on_a("secret.txt").await != "skip-tool" {
        assert!(changed.elapsed() < std::time::Duration::from_secs(5), "A still runs v1 5 s after B activated v3");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(verdict_on_a(".env").await, "continue", "A runs v3 beside v1");
    let r = b.post("/v1/plugins/deny-tools/versions/1/activate", &key, json!({})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let changed = std::time::Instant::now();
    while verdict_on_a(".env").await != "skip-tool" {
        assert!(changed.elapsed() < std::time::Duration::from_secs(5), "A still runs v3 5 s after B rolled back");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Another tenant made on B is 404 to acme's key on A; a wrong key is 401 on both.
    let other = b.tenant("bravo").await;
    assert_eq!(a.get("/v1/plugins", &other).await.json, json!([]));
    assert_eq!(a.get("/v1/plugins", "hbk_wrong").await.status, 401);
    assert_eq!(b.get("/v1/plugins", "hbk_wrong").await.status, 401);

    // Everything survives a restart.
    server_b.shutdown().await;
    a.restart().await;
    let r = a.post("/v1/evaluate", &key, before_tool_call(".env")).await;
    assert_eq!(r.json["verdict"], "skip-tool", "{:?}", r.json);
    let versions = a.get("/v1/plugins", &key).await;
    assert_eq!(versions.json[0]["versions"].as_array().map(Vec::len), Some(3), "{:?}", versions.json);
}

// Fuel and hook time per minute hold across workers: a tenant's use on A
// reaches B's count (and `/v1/usage` there) within an exchange or two, and
// B then refuses it with a 429 naming the quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_minute_quotas_count_every_worker() {
    let Some(url) = database() else { return };
    let _shared = SERVER.read().await;
    // Not across a minute's end (the counts start again there).
    let second = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() % 60);
    if second > 40 {
        tokio::time::sleep(std::time::Duration::from_secs(61 - second)).await;
    }
    let extra = format!("database = \"{url}\"");
    let a = TestServer::start(&extra).await;
    let key = a.tenant("acme").await;
    let mut quotas = a.get("/v1/usage", &key).await.json["quotas"].clone();
    quotas["fuel_per_minute"] = json!(1);
    let r = a.call("PUT", "/v1/admin/tenants/acme/quotas", Some(&a.operator.clone()), Some(&quotas)).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    // The upload's trial call is the tenant's first fuel of the minute: on A.
    a.install(&key, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let r = a.post("/v1/evaluate", &key, before_tool_call(".env")).await;
    assert_eq!((r.status, r.json["quota"].clone()), (429, json!("fuel_per_minute")), "{:?}", r.json);
    let on_a = a.get("/v1/usage", &key).await.json["usage"]["fuel_per_minute"].as_u64().unwrap_or(0);
    assert!(on_a > 0);
    // B has used nothing itself, and counts A's use within an exchange or two.
    let (_dir_b, server_b, b) = second_worker(&a, &extra).await;
    let started = std::time::Instant::now();
    loop {
        let on_b = b.get("/v1/usage", &key).await.json["usage"]["fuel_per_minute"].as_u64().unwrap_or(0);
        if on_b == on_a {
            break;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "B counts {on_b} of A's {on_a}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let r = b.post("/v1/evaluate", &key, before_tool_call(".env")).await;
    assert_eq!((r.status, r.json["quota"].clone()), (429, json!("fuel_per_minute")), "{:?}", r.json);
    server_b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_url_that_is_neither_sqlite_nor_postgres_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = test_config(&dir.path().join("data"), "database = \"mysql://x\"");
    let err = hookbox_server::Server::start(config).await.err().expect("refused");
    assert!(err.to_string().contains("neither sqlite:PATH nor a postgres:// URL"), "{err}");
}

#[test]
fn the_postgres_session_store_passes_the_store_checks() {
    let Some(url) = database() else { return };
    let _shared = SERVER.blocking_read();
    let store = hookbox_server::PostgresServerStore::open(&url).expect("open");
    let sessions = store.session_store();
    // Names of their own: the other tests' sessions are `TENANT:ID`.
    hookbox_sandbox::testing::state_store_roundtrip(&sessions);
    hookbox::conversation::conversation_store_roundtrip(&sessions);
    // A second handle on the same database sees what the first saved.
    let again = hookbox_server::PostgresServerStore::open(&url).expect("reopen").session_store();
    let wait = std::time::Duration::from_secs(1);
    assert_eq!(hookbox::sandbox::StateStore::load(&again, "other", "p", wait).expect("load").1, 1);
}

fn logs(r: &serde_json::Value) -> Vec<String> {
    r["logs"].as_array().into_iter().flatten().filter_map(|l| l["message"].as_str().map(String::from)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_share_hook_state_and_conversations() {
    let Some(url) = database() else { return };
    let _shared = SERVER.read().await;
    let extra = format!("database = \"{url}\"");
    let mut a = TestServer::start(&extra).await;
    let key = a.tenant("sessions").await;
    a.install(&key, "state-counter", STATE_COUNTER, json!({})).await;
    let (_dir_b, server_b, b) = second_worker(&a, &extra).await;

    // Evaluate calls of one session, alternating between workers, count on.
    let result = json!({"type": "tool-call-result", "iteration": 1, "tool_call_id": "c1", "tool_name": "read_file",
                        "success": true, "result": "ok", "truncated": false, "duration_ms": 1});
    for n in 1..=4 {
        let worker = if n % 2 == 1 { &a.api } else { &b };
        let r = worker.post("/v1/evaluate", &key, json!({"session_id": "shared", "event": result})).await;
        assert_eq!(r.status, 200, "{:?}", r.json);
        assert_eq!(logs(&r.json), [format!("count={n}")], "call {n}: {:?}", r.json);
    }

    // At once on both workers: each count is written by one call only; a
    // call that lost the race reports a `state` failure and writes nothing.
    let calls = (0..24).map(|i| {
        let worker = if i % 2 == 0 { a.api.clone() } else { b.clone() };
        let (key, result) = (key.clone(), result.clone());
        tokio::spawn(
            async move { worker.post("/v1/evaluate", &key, json!({"session_id": "race", "event": result})).await },
        )
    });
    let (mut counts, mut lost) = (Vec::new(), 0);
    for call in calls.collect::<Vec<_>>() {
        let r = call.await.expect("call");
        assert_eq!(r.status, 200, "{:?}", r.json);
        let failures = r.json["failures"].as_array().map(Vec::len).unwrap_or(0);
        match (logs(&r.json).as_slice(), failures) {
            ([one], 0) => counts.push(one.trim_start_matches("count=").parse::<u32>().expect("a count")),
            _ => {
                assert_eq!(r.json["failures"][0]["kind"], "state", "neither a count nor a conflict: {:?}", r.json);
                lost += 1;
            }
        }
    }
    counts.sort_unstable();
    let saved = u32::try_from(counts.len()).expect("count");
    assert_eq!(counts, (1..=saved).collect::<Vec<_>>(), "a count written twice or skipped ({lost} conflicts)");
    let r = a.post("/v1/evaluate", &key, json!({"session_id": "race", "event": result})).await;
    assert_eq!(logs(&r.json), [format!("count={}", saved + 1)], "{:?}", r.json);

    // A session's second run, on the other worker, goes on from the first's
    // conversation and hook state.
    let first = a.start_run(&key, json!({"session": "conv", "plugins": ["state-counter"]})).await;
    let done = a.wait_run(&key, &first).await;
    assert_eq!(done["status"], "completed", "{done}");
    let second = b.start_run(&key, json!({"session": "conv", "plugins": ["state-counter"]})).await;
    let done = b.wait_run(&key, &second).await;
    assert_eq!(done["status"], "completed", "{done}");
    let record = &done["record"];
    let messages = record["messages"].as_array().map(Vec::len).unwrap_or(0);
    assert_eq!(messages, 8, "the second turn carries the first's four messages: {record}");
    let starts: Vec<&str> = record["hook_logs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["message"].as_str())
        .filter(|m| m.starts_with("start"))
        .collect();
    assert_eq!(starts, ["start count=2 version=1"], "hook state written on A is read on B: {record}");
    server_b.shutdown().await;
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_worker_s_runs_are_resumed_or_interrupted_by_another_and_a_stalled_one_is_fenced() {
    let Some(url) = database() else { return };
    let _shared = SERVER.read().await;
    let (dir_a, dir_b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let operator = format!("hbo_{}", "4c".repeat(32));
    // Runs wait for their approval in their worker here (they do not park).
    let in_process = "park_after_ms = 3600000";
    let a = Worker::start(BIN, dir_a.path(), &url, &operator, 1000, in_process).await;
    std::fs::create_dir_all(dir_b.path().join("data")).expect("data dir");
    std::fs::copy(dir_a.path().join("data/server.secret"), dir_b.path().join("data/server.secret")).expect("secret");
    let b = Worker::start(BIN, dir_b.path(), &url, &operator, 1000, in_process).await;
    let key = a.api.tenant("acme").await;
    a.api.install(&key, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let asker =
        json!({"config": {"before-tool-call": "ask-approval:{tool} needs a person", "only_tool": "create_file"}});
    a.api.install(&key, "asker", SCRIPTED, asker).await;
    let owner = |run: &str| query_text(&url, format!("SELECT owner FROM runs WHERE id = '{run}'"));

    // A stalled worker (SIGSTOP) loses its lease: B's sweep finds the run's
    // checkpoint (its last safe point) and B resumes it, up to its approval
    // again. Woken, A finds its lease lapsed, and the store refuses its
    // writes to that run: the run goes on on B alone, answered from A.
    let first = a.api.start_run(&key, json!({})).await;
    a.api.wait_approval(&key, &first).await;
    let a_owner = owner(&first).expect("owned by A");
    a.signal("STOP");
    let started = std::time::Instant::now();
    while owner(&first).is_none_or(|o| o == a_owner) {
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "B takes the run over");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    wait_status(&b.api, &key, &first, "waiting-approval", 15).await;
    a.signal("CONT");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_ne!(owner(&first), Some(a_owner.clone()), "A, woken, did not take the run back");
    let approval = a.api.wait_approval(&key, &first).await;
    let id = approval["id"].as_str().unwrap_or_default().replace('/', "%2F");
    let r = a.api.post(&format!("/v1/approvals/{id}"), &key, json!({"decision": "approve"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let done = b.api.wait_run(&key, &first).await;
    assert_eq!(done["status"], "completed", "{done}");
    let approvals = done["record"]["approvals"].as_array().cloned().unwrap_or_default();
    assert_eq!(approvals.len(), 1, "asked once in the record: {done}");

    // A run with no checkpoint (here: forgotten), watched from B: B's stream
    // follows it (polling the store), and when A is killed, ends with
    // `interrupted` once A's lease lapses.
    let second = a.api.start_run(&key, json!({})).await;
    a.api.wait_approval(&key, &second).await;
    sql(&url, format!("UPDATE runs SET checkpoint = NULL WHERE id = '{second}'"));
    let watcher = {
        let (api, key, run) = (b.api.clone(), key.clone(), second.clone());
        tokio::spawn(async move { api.events(&key, &run, None).await })
    };
    // Longer than A's one-second flush, so the stream has the approval before the kill.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let killed = std::time::Instant::now();
    a.signal("KILL");
    let events = tokio::time::timeout(std::time::Duration::from_secs(20), watcher)
        .await
        .expect("B's stream ends after A's lease lapses")
        .expect("watcher");
    let took = killed.elapsed();
    assert!(events.iter().any(|e| e.1 == "approval"), "B's stream missed A's events: {events:?}");
    assert!(events.iter().filter(|e| e.1 == "hook-event").count() >= 5, "{events:?}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!((last.1.as_str(), last.2["status"].clone()), ("end", json!("interrupted")), "{events:?}");
    eprintln!("a killed worker's run was marked interrupted on another after {took:?} (lease 1 s)");
    assert_eq!(status(&b.api, &key, &second).await["status"], "interrupted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_approval_outlives_a_restart_of_postgres() {
    let Some(url) = database() else { return };
    let ctl = std::env::var("HOOKBOX_TEST_PG_CTL").expect("scripts/with-postgres.sh sets HOOKBOX_TEST_PG_CTL");
    let _alone = SERVER.write().await;
    let extra = format!("database = \"{url}\"");
    let mut a = TestServer::start(&extra).await;
    let key = a.tenant("acme").await;
    a.install(&key, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let asker =
        json!({"config": {"before-tool-call": "ask-approval:{tool} needs a person", "only_tool": "create_file"}});
    a.install(&key, "asker", SCRIPTED, asker).await;
    a.install(&key, "state-counter", STATE_COUNTER, json!({})).await;
    let run = a.start_run(&key, json!({"session": "through-restart"})).await;
    let approval = a.wait_approval(&key, &run).await;
    // A second worker follows the run by polling the store, through the outage.
    let (_dir_b, server_b, b) = second_worker(&a, &extra).await;
    let mut stream =
        b.http.get(format!("{}/v1/runs/{run}/events", b.base)).bearer_auth(&key).send().await.expect("events");
    assert_eq!(stream.status().as_u16(), 200, "B's stream opens before the outage");
    let watcher = tokio::spawn(async move {
        let mut text = String::new();
        while let Ok(Some(chunk)) = stream.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        hookbox_tests::server::parse_sse(&text)
    });

    // Every connection of the pool breaks; while the database is down a
    // request that needs it is a 503 (try again), and once it is back the
    // next calls open new connections.
    let pg_ctl = |what: &'static str| {
        let ctl = ctl.clone();
        async move {
            let done = tokio::task::spawn_blocking(move || std::process::Command::new(ctl).arg(what).status())
                .await
                .expect("pg_ctl")
                .expect("pg_ctl runs");
            assert!(done.success(), "pg_ctl {what}: {done}");
        }
    };
    pg_ctl("stop").await;
    let down = a.get("/v1/plugins", &key).await;
    assert_eq!((down.status, down.json["error"].clone()), (503, json!("unavailable")), "{:?}", down.json);
    // Alive, but not ready: a load balancer takes it out of rotation.
    let (ready, alive) = (a.get("/readyz", "").await, a.get("/healthz", "").await);
    assert_eq!((ready.status, alive.status), (503, 200), "{:?}", ready.json);
    assert_eq!(ready.json["status"], "database-unavailable");
    // Down for longer than B's stream polls (0.5 s): its reads fail, and it reads again.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    pg_ctl("start").await;

    let id = approval["id"].as_str().unwrap_or_default().replace('/', "%2F");
    let r = a.post(&format!("/v1/approvals/{id}"), &key, json!({"decision": "approve"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(a.get("/readyz", "").await.status, 200, "ready again");
    let done = a.wait_run(&key, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    // Hook state saved after the restart: state-counter counts both tool
    // results (the denied call's result too).
    let record = &done["record"];
    assert_eq!(record["hook_failures"], json!([]), "{record}");
    let counts: Vec<&str> = record["hook_logs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["message"].as_str())
        .filter(|m| m.starts_with("count="))
        .collect();
    assert_eq!(counts, ["count=1", "count=2"], "{record}");
    let events = a.events(&key, &run, None).await;
    assert!(events.iter().any(|e| e.1 == "approval"), "{events:?}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!((last.1.as_str(), last.2["status"].clone()), ("end", json!("completed")), "{events:?}");
    let followed = tokio::time::timeout(std::time::Duration::from_secs(30), watcher)
        .await
        .expect("B's stream ends")
        .expect("watcher");
    assert_eq!(followed, events, "B's stream through the outage differs from A's");
    server_b.shutdown().await;
    // The next run of the session reads the state saved through the restart.
    let next = a.start_run(&key, json!({"session": "through-restart", "plugins": ["state-counter"]})).await;
    let done = a.wait_run(&key, &next).await;
    let logs: Vec<&str> =
        done["record"]["hook_logs"].as_array().into_iter().flatten().filter_map(|l| l["message"].as_str()).collect();
    assert_eq!(logs.first().copied(), Some("start count=2 version=1"), "{logs:?}");
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_worker_answers_approvals_and_steers_runs_of_another() {
    let Some(url) = database() else { return };
    let _shared = SERVER.read().await;
    // Runs wait for their approval in their worker here (tests/tests/server_park.rs parks them).
    let extra = format!("database = \"{url}\"\npark_after_ms = 3600000");
    let mut a = TestServer::start(&extra).await;
    let key = a.tenant("acme").await;
    a.install(&key, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let asker =
        json!({"config": {"before-tool-call": "ask-approval:{tool} needs a person", "only_tool": "create_file"}});
    a.install(&key, "asker", SCRIPTED, asker).await;
    let (_dir_b, server_b, b) = second_worker(&a, &extra).await;

    // A run on A waits for approval: B lists it and answers it.
    let run = a.start_run(&key, json!({})).await;
    let approval = b.wait_approval(&key, &run).await;
    assert_eq!(approval["tool"], "create_file", "{approval}");
    // B sees the run waiting (A stores a run's status with its events).
    wait_status(&b, &key, &run, "waiting-approval", 5).await;
    let bogus = b.post(&format!("/v1/approvals/{run}%2Fnot-a-call"), &key, json!({"decision": "approve"})).await;
    assert_eq!(bogus.status, 404, "{:?}", bogus.json);
    let id = approval["id"].as_str().unwrap_or_default().replace('/', "%2F");
    let r = b.post(&format!("/v1/approvals/{id}"), &key, json!({"decision": "approve"})).await;
    assert_eq!((r.status, r.json["queued"].clone()), (200, json!(true)), "{:?}", r.json);
    let done = b.wait_run(&key, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    let approvals = done["record"]["approvals"].as_array().cloned().unwrap_or_default();
    assert_eq!(approvals.len(), 1, "{done}");
    assert_eq!(approvals[0]["answer"]["answer"], "approve", "{done}");
    assert_eq!(b.get("/v1/approvals", &key).await.json, json!([]), "an answered approval stays listed");

    // Another run on A: B injects a message and aborts it; each is applied on A.
    let run = a.start_run(&key, json!({})).await;
    b.wait_approval(&key, &run).await;
    let r = b.post(&format!("/v1/runs/{run}/pause"), &key, json!({})).await;
    assert_eq!((r.status, r.json["queued"].clone()), (200, json!(true)), "{:?}", r.json);
    wait_status(&b, &key, &run, "paused", 5).await;
    // A command stored twice (an insert made again after a lost connection) is applied once.
    let twice = {
        let (url, run) = (url.clone(), run.clone());
        tokio::task::spawn_blocking(move || {
            use hookbox_server::ServerStore;
            let store = hookbox_server::PostgresServerStore::open(&url).unwrap_or_else(|e| panic!("{e}"));
            let tenant = store.tenant("acme").unwrap_or_else(|e| panic!("{e}")).map(|t| t.id).unwrap_or_default();
            let text = json!({"nonce": "n-1", "command": {"kind": "inject", "text": "stored twice"}}).to_string();
            (0..2).all(|_| store.add_command(tenant, &run, &text).unwrap_or_else(|e| panic!("{e}")))
        })
    };
    assert!(twice.await.expect("store"), "the commands were not queued");
    let r = b.post(&format!("/v1/runs/{run}/inject"), &key, json!({"text": "from worker B"})).await;
    assert_eq!((r.status, r.json["queued"].clone()), (200, json!(true)), "{:?}", r.json);
    let r = b.post(&format!("/v1/runs/{run}/abort"), &key, json!({"reason": "stopped on B"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let done = b.wait_run(&key, &run).await;
    assert_eq!(done["status"], "aborted", "{done}");
    assert!(done["record"].to_string().contains("stopped on B"), "{done}");
    // The injection reached A's run (delivered, or undelivered since it was aborted first).
    let record = done["record"].to_string();
    assert!(record.contains("from worker B"), "{done}");
    assert_eq!(record.matches("stored twice").count(), record.matches("from worker B").count(), "{done}");
    // An ended run can no longer be steered, from either worker; another tenant's is 404.
    assert_eq!(b.post(&format!("/v1/runs/{run}/pause"), &key, json!({})).await.status, 409);
    assert_eq!(a.post(&format!("/v1/runs/{run}/pause"), &key, json!({})).await.status, 409);
    let other = b.tenant("globex").await;
    assert_eq!(b.post(&format!("/v1/runs/{run}/pause"), &other, json!({})).await.status, 404);
    server_b.shutdown().await;
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_s_runs_spread_over_three_workers_each_end_once_with_every_result_and_commit() {
    let Some(url) = database() else { return };
    let _shared = SERVER.read().await;
    let runs: usize = std::env::var("HOOKBOX_TEST_SPREAD_RUNS").ok().and_then(|n| n.parse().ok()).unwrap_or(1000);
    let extra = format!(
        "database = \"{url}\"\n[default_quotas]\nconcurrent_runs = 64\nlive_instances = 1024\nspend_per_day_usd = 1000.0\nhook_ms_per_minute = 100000000\n"
    );
    let mut a = TestServer::start(&extra).await;
    let key = a.tenant("acme").await;
    // Not a test of limits: the tenant's largest deadline (a 1 s one was
    // passed on a loaded machine) and no cap on hook time per minute (twelve
    // runs at once use more than the default 60 s of it per minute).
    let limits = json!({"deadline_ms": 5000});
    // Limits over the defaults are a capability diff: approved, then activated.
    a.install_approved(&key, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}, "limits": limits})).await;
    a.install_approved(&key, "state-counter", STATE_COUNTER, json!({"limits": limits})).await;
    let (_dir_b, server_b, b) = second_worker(&a, &extra).await;
    let (_dir_c, server_c, c) = second_worker(&a, &extra).await;
    let workers = std::sync::Arc::new([a.api.clone(), b, c]);
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(12));
    let tasks: Vec<_> = (0..runs)
        .map(|i| {
            let (workers, gate, key) = (workers.clone(), gate.clone(), key.clone());
            tokio::spawn(async move {
                let _slot = gate.acquire_owned().await.expect("gate");
                // Started on one worker, read back through the next.
                let run = workers[i % 3].start_run(&key, json!({"session": format!("spread-{i}")})).await;
                workers[(i + 1) % 3].wait_run(&key, &run).await
            })
        })
        .collect();
    let mut ids = std::collections::HashSet::new();
    for task in tasks {
        let done = task.await.expect("run task");
        let record = &done["record"];
        assert_eq!(done["status"], "completed", "{done}");
        assert!(ids.insert(done["run_id"].as_str().unwrap_or_default().to_string()), "a run id twice: {done}");
        let logs: Vec<&str> =
            record["hook_logs"].as_array().into_iter().flatten().filter_map(|l| l["message"].as_str()).collect();
        assert_eq!(logs, ["start empty", "count=1", "count=2"], "each result committed once: {record}");
        let results: usize = record["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "tool_results")
            .map(|m| m["results"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(results, 2, "{record}");
        assert_eq!(record["hook_failures"], json!([]), "{record}");
    }
    assert_eq!(ids.len(), runs);
    // Every stream, read through any worker, ends once with `end`.
    for (i, run) in ids.iter().take(10).enumerate() {
        let events = workers[i % 3].events(&key, run, None).await;
        assert_eq!(events.iter().filter(|e| e.1 == "end").count(), 1, "{events:?}");
    }
    server_b.shutdown().await;
    server_c.shutdown().await;
    a.shutdown().await;
}

// After a lapsed lease a worker goes on with the runs the sweep did not take
// (started since, or not swept yet) and aborts only the others; a sweep
// takes a run's pending approvals and queued commands with it.
#[test]
fn a_worker_whose_lease_lapsed_keeps_only_the_runs_no_sweep_took() {
    let Some(url) = database() else { return };
    use hookbox_server::ServerStore;
    let a = hookbox_server::PostgresServerStore::open(&url).unwrap_or_else(|e| panic!("open: {e}"));
    let b = hookbox_server::PostgresServerStore::open(&url).unwrap_or_else(|e| panic!("open: {e}"));
    let tenant = a.create_tenant("acme", &hookbox_server::Quotas::default()).unwrap_or_else(|e| panic!("{e}")).id;
    let run = hookbox_tests::postgres::run_row;
    a.add_run(tenant, &run("swept")).unwrap_or_else(|e| panic!("{e}"));
    a.add_approval(tenant, ("swept", hookbox_server::Claim::FIRST), "swept/c1", &json!({"tool": "create_file"}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(b.add_command(tenant, "swept", "{}").unwrap_or_else(|e| panic!("{e}")));
    // A's lease lapses (1 ms) and B sweeps: A's run is over, with its
    // pending approval and queued command.
    assert!(a.heartbeat(1).unwrap_or_else(|e| panic!("{e}")));
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(b.sweep_dead_workers().unwrap_or_else(|e| panic!("{e}")), 1);
    let left = std::thread::scope(|s| {
        s.spawn(|| {
            let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| panic!("{e}"));
            let q = "SELECT (SELECT count(*) FROM approvals) + (SELECT count(*) FROM run_commands)";
            c.query_one(q, &[]).unwrap_or_else(|e| panic!("{e}")).get::<_, i64>(0)
        })
        .join()
        .unwrap_or_else(|e| panic!("{e:?}"))
    });
    assert_eq!(left, 0, "a swept run's approvals or commands were left behind");
    // A run A starts before it notices, and B's run, are not A's to drop.
    a.add_run(tenant, &run("after")).unwrap_or_else(|e| panic!("{e}"));
    b.add_run(tenant, &run("b-run")).unwrap_or_else(|e| panic!("{e}"));
    assert!(!a.heartbeat(60_000).unwrap_or_else(|e| panic!("{e}")), "the lapsed lease was renewed as if held");
    let ids = ["swept", "after", "b-run"].map(|id| (id.to_string(), hookbox_server::Claim::FIRST));
    assert_eq!(a.still_mine(&ids).unwrap_or_else(|e| panic!("{e}")), ["after"]);
    assert_eq!(b.still_mine(&ids).unwrap_or_else(|e| panic!("{e}")), ["b-run"]);
}
