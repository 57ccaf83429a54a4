//! Issue 17, durable pause: on PostgreSQL a run that waits for an approval
//! parks (its checkpoint in the database, no task or instance on any
//! worker), survives the death of the worker that parked it, and is resumed
//! by whichever worker its answer reaches, by re-executing its journal: no
//! tool runs twice, no hook state is committed twice, and its event stream
//! goes on without a repeated event. Run under `scripts/with-postgres.sh`
//! (skipped without it; a failure with `HOOKBOX_REQUIRE_POSTGRES=1`).

use hookbox_tests::postgres::{
    Worker, count_logs, database, install_asker_chain, query_text, second_worker, sql, status, wait_status,
};
use hookbox_tests::server::TestServer;
use hookbox_tests::{DENY_TOOLS, SCRIPTED, STATE_COUNTER};
use serde_json::{Value, json};

/// `hookbox serve`, run as a process.
const BIN: &str = env!("CARGO_BIN_EXE_hookbox-under-test");

/// The state-counter's revision for `session` in the database: one per commit.
fn revisions(url: &str, session: &str) -> i64 {
    let (url, session) = (url.to_string(), format!("acme:{session}"));
    std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| panic!("connect: {e}"));
        c.query_one("SELECT revision FROM hook_state WHERE session = $1 AND plugin = 'state-counter'", &[&session])
            .unwrap_or_else(|e| panic!("revision: {e}"))
            .get(0)
    })
    .join()
    .unwrap_or_else(|e| panic!("{e:?}"))
}

fn tool_results(record: &Value) -> Vec<Value> {
    record["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["results"].as_array())
        .flatten()
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_run_holds_no_worker_outlives_its_killed_worker_and_resumes_on_another() {
    let Some(url) = database() else { return };
    let (dir_a, dir_b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let operator = format!("hbo_{}", "5d".repeat(32));
    let a = Worker::start(BIN, dir_a.path(), &url, &operator, 1000, "").await;
    std::fs::create_dir_all(dir_b.path().join("data")).expect("data dir");
    std::fs::copy(dir_a.path().join("data/server.secret"), dir_b.path().join("data/server.secret")).expect("secret");
    let b = Worker::start(BIN, dir_b.path(), &url, &operator, 1000, "").await;
    let key = a.api.tenant("acme").await;
    install_asker_chain(&a.api, &key).await;

    // The run parks at its approval: listed on every worker, and holding no
    // run slot and no instance on the worker that parked it.
    let run = a.api.start_run(&key, json!({"session": "parked"})).await;
    wait_status(&b.api, &key, &run, "parked", 20).await;
    let approval = b.api.wait_approval(&key, &run).await;
    assert_eq!(approval["tool"], "create_file", "{approval}");
    // Its task ends just after the park is stored: a moment to let it go.
    let started = std::time::Instant::now();
    loop {
        let usage = a.api.get("/v1/usage", &key).await.json;
        let held = (usage["usage"]["concurrent_runs"].clone(), usage["usage"]["live_instances"].clone());
        if held == (json!(0), json!(0)) {
            break;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "a parked run holds nothing: {usage}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(revisions(&url, "parked"), 1, "the first tool result was committed before the park");
    // The model spend so far is counted at the park (a run never answered is paid for too).
    let spent_at_park = a.api.get("/v1/usage", &key).await.json["usage"]["spend_per_day_usd"].as_f64().unwrap_or(0.0);
    assert!(spent_at_park > 0.0, "the first model response's cost is counted at the park");
    let watcher = {
        let (api, key, run) = (b.api.clone(), key.clone(), run.clone());
        tokio::spawn(async move { api.events(&key, &run, None).await })
    };

    // The worker that parked it dies; the run stays parked (nothing of it was there).
    a.signal("KILL");
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(status(&b.api, &key, &run).await["status"], "parked", "a parked run outlives its worker");
    // A parked run takes an answer or an abort, and injected messages (kept
    // in its checkpoint, in order, for the resumed run); not pause or resume.
    for what in ["pause", "resume"] {
        let r = b.api.post(&format!("/v1/runs/{run}/{what}"), &key, json!({})).await;
        assert_eq!(r.status, 409, "{what}: {:?}", r.json);
    }
    for text in ["hello", "and again"] {
        let r = b.api.post(&format!("/v1/runs/{run}/inject"), &key, json!({"text": text})).await;
        assert_eq!((r.status, r.json["parked"].clone()), (200, json!(true)), "{:?}", r.json);
    }
    let stored = query_text(&url, format!("SELECT checkpoint FROM runs WHERE id = '{run}'")).unwrap_or_default();
    assert!(stored.contains("\"inbox\":[\"hello\",\"and again\"]"), "{stored:.300}");
    assert_eq!(status(&b.api, &key, &run).await["status"], "parked", "an injection does not resume it");
    let other = b.api.tenant("globex").await;
    let id = approval["id"].as_str().unwrap_or_default().replace('/', "%2F");
    let r = b.api.post(&format!("/v1/approvals/{id}"), &other, json!({"decision": "approve"})).await;
    assert_eq!(r.status, 404, "another tenant's approval: {:?}", r.json);

    // Answered on B, resumed on B.
    let answered = std::time::Instant::now();
    let r = b.api.post(&format!("/v1/approvals/{id}"), &key, json!({"decision": "approve"})).await;
    assert_eq!((r.status, r.json["resumes"].clone()), (200, json!(true)), "{:?}", r.json);
    let again = b.api.post(&format!("/v1/approvals/{id}"), &key, json!({"decision": "deny"})).await;
    assert_eq!(again.status, 404, "answered once: {:?}", again.json);
    let done = b.api.wait_run(&key, &run).await;
    eprintln!("answer to end of the resumed run: {:?}", answered.elapsed());
    assert_eq!(done["status"], "completed", "{done}");
    let record = &done["record"];
    assert_eq!(record["hook_failures"], json!([]), "{record}");
    let approvals = record["approvals"].as_array().cloned().unwrap_or_default();
    assert_eq!(approvals.len(), 1, "{record}");
    assert_eq!(approvals[0]["answer"]["answer"], "approve", "{record}");
    let results = tool_results(record);
    assert_eq!(results.len(), 2, "one result per tool call: {results:?}");
    assert!(results[0]["content"].as_str().unwrap_or_default().contains(".env"), "deny-tools: {results:?}");
    assert_eq!(results[1]["is_error"], json!(false), "create_file ran once, after the answer: {results:?}");
    assert_eq!(count_logs(record), ["count=1", "count=2"], "{record}");
    assert_eq!(record["injected_messages"], json!(["hello", "and again"]), "delivered once, in order: {record}");
    assert_eq!(revisions(&url, "parked"), 2, "each tool result committed once (the re-executed one not again)");
    // Its end counts only the rest (stored just after its record): the day's spend is its cost, once.
    let cost = record["usage"]["cost"].as_f64().unwrap_or(0.0);
    assert!(cost > spent_at_park, "{cost} {spent_at_park}");
    let started = std::time::Instant::now();
    loop {
        let spent = b.api.get("/v1/usage", &key).await.json["usage"]["spend_per_day_usd"].as_f64().unwrap_or(0.0);
        if (spent - cost).abs() < 1e-9 {
            break;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "spend {spent}, cost {cost}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // B's stream: every event once, in order, across the park and the resume.
    let events = tokio::time::timeout(std::time::Duration::from_secs(30), watcher)
        .await
        .expect("B's stream ends")
        .expect("watcher");
    let ids: Vec<i64> = events.iter().map(|e| e.0).collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "ids in order without a gap or a repeat: {ids:?}");
    let count = |name: &str, kind: Option<&str>| {
        events.iter().filter(|e| e.1 == name && kind.is_none_or(|k| e.2["type"] == k)).count()
    };
    assert_eq!(count("approval", None), 1, "{events:?}");
    assert_eq!(count("hook-event", Some("run-start")), 1, "the re-execution adds no event: {events:?}");
    assert_eq!(count("hook-event", Some("tool-call-result")), 2, "{events:?}");
    let statuses: Vec<&Value> = events.iter().filter(|e| e.1 == "status").map(|e| &e.2["status"]).collect();
    assert!(statuses.contains(&&json!("parked")), "{statuses:?}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!((last.1.as_str(), last.2["status"].clone()), ("end", json!("completed")), "{events:?}");
    assert_eq!(b.api.get("/v1/approvals", &key).await.json, json!([]), "nothing left listed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_run_is_answered_once_and_can_be_aborted() {
    let Some(url) = database() else { return };
    let extra = format!("database = \"{url}\"");
    let mut a = TestServer::start(&extra).await;
    let key = a.tenant("acme").await;
    install_asker_chain(&a, &key).await;
    let (_dir_b, server_b, b) = second_worker(&a, &extra).await;

    // Two answers at once, on two workers: one is taken, the other is 404.
    let run = a.start_run(&key, json!({"session": "twice"})).await;
    wait_status(&b, &key, &run, "parked", 20).await;
    let approval = b.wait_approval(&key, &run).await;
    let id = approval["id"].as_str().unwrap_or_default().replace('/', "%2F");
    let path = format!("/v1/approvals/{id}");
    let (ra, rb) = tokio::join!(
        a.post(&path, &key, json!({"decision": "approve"})),
        b.post(&path, &key, json!({"decision": "deny", "reason": "no"}))
    );
    let mut codes = [ra.status, rb.status];
    codes.sort_unstable();
    assert_eq!(codes, [200, 404], "{:?} {:?}", ra.json, rb.json);
    let done = a.wait_run(&key, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    let approvals = done["record"]["approvals"].as_array().cloned().unwrap_or_default();
    assert_eq!(approvals.len(), 1, "{done}");
    let taken = if ra.status == 200 { "approve" } else { "deny" };
    assert_eq!(approvals[0]["answer"]["answer"], taken, "the answer taken is the one applied: {done}");

    // An abort of a parked run: it resumes only to end aborted, with the reason.
    let run = a.start_run(&key, json!({"session": "aborted"})).await;
    wait_status(&a, &key, &run, "parked", 20).await;
    let r = b.post(&format!("/v1/runs/{run}/abort"), &key, json!({"reason": "stopped while parked"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let done = a.wait_run(&key, &run).await;
    assert_eq!(done["status"], "aborted", "{done}");
    assert!(done["record"].to_string().contains("stopped while parked"), "{done}");
    // Aborted once past its checkpoint: the record keeps what the run did before it parked.
    let results = tool_results(&done["record"]);
    assert_eq!(results.len(), 2, "deny-tools' result kept, create_file not run: {done}");
    assert!(results[0]["content"].as_str().unwrap_or_default().contains(".env"), "{results:?}");
    assert!(results[1]["content"].as_str().unwrap_or_default().contains("aborted"), "{results:?}");
    assert_eq!(done["record"]["error"]["event"], "before-tool-call", "{done}");
    assert_eq!(a.post(&format!("/v1/runs/{run}/abort"), &key, json!({"reason": "again"})).await.status, 409);

    // A checkpoint that cannot be read (a corrupt row): its answer fails the run cleanly.
    let run = a.start_run(&key, json!({"session": "corrupt"})).await;
    wait_status(&a, &key, &run, "parked", 20).await;
    let approval = a.wait_approval(&key, &run).await;
    sql(&url, format!("UPDATE runs SET checkpoint = 'this is {{ not json' WHERE id = '{run}'"));
    let id = approval["id"].as_str().unwrap_or_default().replace('/', "%2F");
    let r = b.post(&format!("/v1/approvals/{id}"), &key, json!({"decision": "approve"})).await;
    assert_eq!(r.status, 422, "{:?}", r.json);
    let done = a.wait_run(&key, &run).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["record"].to_string().contains("checkpoint"), "{done}");
    assert_eq!(b.get("/v1/approvals", &key).await.json, json!([]), "nothing left listed");

    // A checkpoint counting pauses its hooks never asked for (a rewritten row)
    // would keep the resumed run catching up for ever: the run fails instead.
    let run = a.start_run(&key, json!({"session": "pauses"})).await;
    wait_status(&a, &key, &run, "parked", 20).await;
    let approval = a.wait_approval(&key, &run).await;
    sql(
        &url,
        format!("UPDATE runs SET checkpoint = replace(checkpoint, '\"pauses\":0', '\"pauses\":7') WHERE id = '{run}'"),
    );
    let id = approval["id"].as_str().unwrap_or_default().replace('/', "%2F");
    let r = b.post(&format!("/v1/approvals/{id}"), &key, json!({"decision": "approve"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let done = a.wait_run(&key, &run).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["record"].to_string().contains("pauses passed"), "{done}");

    // The parked_runs quota: with one run of the tenant parked, the next one
    // waits for its approval in its worker; once answered, each completes.
    let mut quotas = a.get("/v1/usage", &key).await.json["quotas"].clone();
    quotas["parked_runs"] = json!(1);
    let r = a.call("PUT", "/v1/admin/tenants/acme/quotas", Some(&a.operator.clone()), Some(&quotas)).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let first = a.start_run(&key, json!({"session": "park-one"})).await;
    wait_status(&a, &key, &first, "parked", 20).await;
    let second = a.start_run(&key, json!({"session": "park-two"})).await;
    let waiting = a.wait_approval(&key, &second).await;
    wait_status(&a, &key, &second, "waiting-approval", 20).await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let parked = query_text(&url, "SELECT count(*)::text FROM runs WHERE status = 'parked'".to_string());
    assert_eq!(parked.as_deref(), Some("1"), "one run parked, the quota");
    assert_eq!(status(&a, &key, &second).await["status"], "waiting-approval", "waits in its worker");
    for (run, approval) in [(&first, a.wait_approval(&key, &first).await), (&second, waiting)] {
        let id = approval["id"].as_str().unwrap_or_default().replace('/', "%2F");
        let r = b.post(&format!("/v1/approvals/{id}"), &key, json!({"decision": "approve"})).await;
        assert_eq!(r.status, 200, "{:?}", r.json);
        assert_eq!(a.wait_run(&key, run).await["status"], "completed");
    }

    // A chain larger than the tenant's live_instances quota now: the answered
    // run cannot ever resume, so it fails saying why (it is not put off for ever).
    let run = a.start_run(&key, json!({"session": "over-quota"})).await;
    wait_status(&a, &key, &run, "parked", 20).await;
    let approval = a.wait_approval(&key, &run).await;
    let mut quotas = a.get("/v1/usage", &key).await.json["quotas"].clone();
    quotas["live_instances"] = json!(2);
    let r = a.call("PUT", "/v1/admin/tenants/acme/quotas", Some(&a.operator.clone()), Some(&quotas)).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let id = approval["id"].as_str().unwrap_or_default().replace('/', "%2F");
    let r = b.post(&format!("/v1/approvals/{id}"), &key, json!({"decision": "approve"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let done = a.wait_run(&key, &run).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["record"].to_string().contains("live_instances"), "{done}");
    server_b.shutdown().await;
    a.shutdown().await;
}

/// `text`, injected through the API, was delivered to the run once: in its
/// record's injected messages and in the conversation the model saw.
fn assert_injected_once(record: &Value, text: &str) {
    assert_eq!(record["injected_messages"], json!([text]), "{record}");
    let seen = record["messages"].to_string().matches(text).count();
    assert_eq!(seen, 1, "delivered once: {}", record["messages"]);
}

/// Waits until run `run`'s stored checkpoint (with its journal parts) contains `needle`.
async fn wait_checkpoint(url: &str, run: &str, needle: &str) {
    let started = std::time::Instant::now();
    loop {
        // The whole checkpoint and the journal parts appended to it since.
        let query = format!(
            "SELECT checkpoint || COALESCE((SELECT string_agg(data, '' ORDER BY part) FROM run_journal
                 WHERE run_id = '{run}'), '') FROM runs WHERE id = '{run}'"
        );
        let text = query_text(url, query).unwrap_or_default();
        if text.contains(needle) {
            return;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "checkpoint with {needle}: {text:.300}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A run's whole stored stream, checked: ids 1, 2, ... without a gap or a
/// repeat, one run start and one end; returns the events.
async fn whole_stream(api: &hookbox_tests::server::ApiClient, key: &str, run: &str) -> Vec<(i64, String, Value)> {
    let events = api.events(key, run, None).await;
    let ids: Vec<i64> = events.iter().map(|e| e.0).collect();
    assert!(ids.iter().enumerate().all(|(i, id)| *id == i as i64 + 1), "ids 1.. without a gap or a repeat: {ids:?}");
    let starts = events.iter().filter(|e| e.1 == "hook-event" && e.2["type"] == "run-start").count();
    assert_eq!(starts, 1, "{events:?}");
    assert_eq!(events.iter().filter(|e| e.1 == "end").count(), 1, "{events:?}");
    events
}

/// Crash recovery (issue 17 item 4): a worker killed with SIGKILL while a
/// run is in a tool, and another while a run is in a hook. The surviving
/// worker sweeps their lapsed leases, finds each run's checkpoint (stored
/// at its last safe point) and resumes it there: the tool cut off is not
/// run again (the model gets an "interrupted" error result for it), the
/// hook call is made again, no hook state is committed twice, and each
/// run's stream reads as one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_of_a_worker_killed_in_a_tool_or_a_hook_resume_on_another_from_their_last_safe_point() {
    let Some(url) = database() else { return };
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let operator = format!("hbo_{}", "6e".repeat(32));
    // A: every tool call lasts 20 s (A is killed in it).
    let a = Worker::start_with_env(
        BIN,
        dirs[0].path(),
        &url,
        &operator,
        1000,
        "",
        &[("HOOKBOX_UNDER_TEST_TOOL_DELAY_MS", "20000")],
    )
    .await;
    for d in &dirs[1..] {
        std::fs::create_dir_all(d.path().join("data")).expect("data dir");
        std::fs::copy(dirs[0].path().join("data/server.secret"), d.path().join("data/server.secret")).expect("secret");
    }
    let b = Worker::start(BIN, dirs[1].path(), &url, &operator, 1000, "").await;
    let key = a.api.tenant("acme").await;
    a.api.install(&key, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    a.api.install(&key, "state-counter", STATE_COUNTER, json!({})).await;
    let sleeper = json!({"config": {"mode": "sleep", "at": "tool-call-result"}, "limits": {"deadline_ms": 5000}});
    let bytes = std::fs::read(hookbox_tests::ADVERSARY).expect("plugin built");
    let r = a.api.upload(&key, "sleeper", &bytes, &sleeper).await;
    assert_eq!(r.status, 201, "{:?}", r.json);
    for step in ["approve", "activate"] {
        let r = a.api.post(&format!("/v1/plugins/sleeper/versions/1/{step}"), &key, json!({})).await;
        assert_eq!(r.status, 200, "{step}: {:?}", r.json);
    }

    // In a tool: A runs create_file (its start is journaled) and dies in it.
    let body = json!({"session": "killed-in-tool", "plugins": ["deny-tools", "state-counter"]});
    let run = a.api.start_run(&key, body).await;
    wait_checkpoint(&url, &run, "\"started\":[\"").await;
    // The tool's start was appended to the checkpoint, not written whole: the resume puts it together.
    let parts = query_text(&url, format!("SELECT count(*)::TEXT FROM run_journal WHERE run_id = '{run}'"));
    assert!(parts.as_deref().is_some_and(|n| n != "0"), "{parts:?}");
    // A message injected while the tool runs waits for the next turn
    // boundary; it is written into the checkpoint at once and outlives A.
    let r = a.api.post(&format!("/v1/runs/{run}/inject"), &key, json!({"text": "remember the cake"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    wait_checkpoint(&url, &run, "remember the cake").await;
    a.signal("KILL");
    let done = b.api.wait_run(&key, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_injected_once(&done["record"], "remember the cake");
    let results = tool_results(&done["record"]);
    assert_eq!(results.len(), 2, "one result per tool call: {results:?}");
    assert!(results[0]["content"].as_str().unwrap_or_default().contains(".env"), "deny-tools: {results:?}");
    let cut = results[1]["content"].as_str().unwrap_or_default();
    assert!(cut.starts_with("error: interrupted"), "the tool cut off is not run again: {results:?}");
    assert_eq!(results[1]["is_error"], json!(true), "{results:?}");
    assert_eq!(count_logs(&done["record"]), ["count=1", "count=2"], "{done}");
    assert_eq!(revisions(&url, "killed-in-tool"), 2, "each tool result committed once");
    let events = whole_stream(&b.api, &key, &run).await;
    assert!(events.iter().any(|e| e.1 == "status" && e.2["resumed"] == json!(true)), "{events:?}");

    // In a hook: C commits the first tool result's state, then its sleeper hangs.
    let c = Worker::start(BIN, dirs[2].path(), &url, &operator, 1000, "").await;
    let body = json!({"session": "killed-in-hook", "plugins": ["deny-tools", "state-counter", "sleeper"]});
    let run = c.api.start_run(&key, body).await;
    wait_checkpoint(&url, &run, "\"tools\":[{").await;
    // The sleeper's call has begun once the counter's commit made the journal durable.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(revisions(&url, "killed-in-hook"), 1, "one commit before the kill");
    c.signal("KILL");
    let done = b.api.wait_run(&key, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    let results = tool_results(&done["record"]);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[1]["is_error"], json!(false), "create_file ran once: {results:?}");
    assert_eq!(count_logs(&done["record"]), ["count=1", "count=2"], "{done}");
    assert_eq!(revisions(&url, "killed-in-hook"), 2, "the commit before the kill was not made again");
    let failures = done["record"]["hook_failures"].as_array().cloned().unwrap_or_default();
    assert!(failures.iter().all(|f| f["plugin"] == "sleeper"), "only the sleeper fails (its deadline): {failures:?}");
    whole_stream(&b.api, &key, &run).await;
    assert_eq!(b.api.get("/v1/approvals", &key).await.json, json!([]));

    // An abort taken (200) just before the worker dies is not lost: it is
    // written into the checkpoint at once, and the resumed run ends aborted.
    let d_dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(d_dir.path().join("data")).expect("data dir");
    std::fs::copy(dirs[1].path().join("data/server.secret"), d_dir.path().join("data/server.secret")).expect("secret");
    let delay = [("HOOKBOX_UNDER_TEST_TOOL_DELAY_MS", "20000")];
    let d = Worker::start_with_env(BIN, d_dir.path(), &url, &operator, 1000, "", &delay).await;
    let body = json!({"session": "aborted-then-killed", "plugins": ["deny-tools", "state-counter"]});
    let run = d.api.start_run(&key, body).await;
    wait_checkpoint(&url, &run, "\"started\":[\"").await;
    // The journal parts are lost (as a write whose outcome was not known
    // would leave them): the abort's part does not follow the base, the store
    // refuses it, and the same write stores the whole checkpoint instead.
    let lost = format!(
        "WITH gone AS (DELETE FROM run_journal WHERE run_id = '{run}' RETURNING 1) SELECT count(*)::TEXT FROM gone"
    );
    assert_ne!(query_text(&url, lost).as_deref(), Some("0"), "the tool's start was a part");
    let r = d.api.post(&format!("/v1/runs/{run}/abort"), &key, json!({"reason": "stop it"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    wait_checkpoint(&url, &run, "stop it").await;
    let base = query_text(&url, format!("SELECT checkpoint FROM runs WHERE id = '{run}'")).unwrap_or_default();
    assert!(base.contains("stop it") && base.contains("\"started\":[\""), "written whole: {base:.300}");
    d.signal("KILL");
    let done = b.api.wait_run(&key, &run).await;
    assert_eq!(done["status"], "aborted", "the abort outlived the worker: {done}");
    assert!(done["record"].to_string().contains("stop it"), "{done}");
    whole_stream(&b.api, &key, &run).await;
}

/// A second crash (issue 17 items 3 and 4 together): a run parked on A
/// (A then killed) is answered and resumed on B; B dies in the tool the
/// answer let run; C resumes it from B's last safe point. The tool is not
/// run again (it gets the interrupted result), the approval is not asked
/// again, each hook-state commit is made once, and the stream reads as one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_whose_worker_dies_is_resumed_again_on_a_third() {
    let Some(url) = database() else { return };
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let operator = format!("hbo_{}", "7f".repeat(32));
    let a = Worker::start(BIN, dirs[0].path(), &url, &operator, 1000, "").await;
    for d in &dirs[1..] {
        std::fs::create_dir_all(d.path().join("data")).expect("data dir");
        std::fs::copy(dirs[0].path().join("data/server.secret"), d.path().join("data/server.secret")).expect("secret");
    }
    // B: every tool call lasts 20 s (B is killed in it; C has no delay).
    let delay = [("HOOKBOX_UNDER_TEST_TOOL_DELAY_MS", "20000")];
    let b = Worker::start_with_env(BIN, dirs[1].path(), &url, &operator, 1000, "", &delay).await;
    let key = a.api.tenant("acme").await;
    install_asker_chain(&a.api, &key).await;
    let run = a.api.start_run(&key, json!({"session": "twice"})).await;
    wait_status(&b.api, &key, &run, "parked", 20).await;
    let approval = b.api.wait_approval(&key, &run).await;
    a.signal("KILL");
    // Injected while parked: it waits in the checkpoint's inbox, is given
    // to the run B resumes, and outlives B too (C delivers it, once).
    let r = b.api.post(&format!("/v1/runs/{run}/inject"), &key, json!({"text": "parked note"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);

    // Answered on B, which resumes it and dies in create_file.
    let id = approval["id"].as_str().unwrap_or_default().replace('/', "%2F");
    let r = b.api.post(&format!("/v1/approvals/{id}"), &key, json!({"decision": "approve"})).await;
    assert_eq!((r.status, r.json["resumes"].clone()), (200, json!(true)), "{:?}", r.json);
    wait_checkpoint(&url, &run, "\"started\":[\"").await;
    b.signal("KILL");

    // C takes it over from B's safe point.
    let c = Worker::start(BIN, dirs[2].path(), &url, &operator, 1000, "").await;
    let done = c.api.wait_run(&key, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    let record = &done["record"];
    assert_injected_once(record, "parked note");
    let approvals = record["approvals"].as_array().cloned().unwrap_or_default();
    assert_eq!(approvals.len(), 1, "asked once: {record}");
    let results = tool_results(record);
    assert_eq!(results.len(), 2, "one result per tool call: {results:?}");
    let cut = results[1]["content"].as_str().unwrap_or_default();
    assert!(cut.starts_with("error: interrupted"), "the tool cut off is not run again: {results:?}");
    assert_eq!(count_logs(record), ["count=1", "count=2"], "{record}");
    assert_eq!(revisions(&url, "twice"), 2, "each tool result committed once, over two resumes");
    let events = whole_stream(&c.api, &key, &run).await;
    let parked = events.iter().filter(|e| e.1 == "status" && e.2["status"] == "parked").count();
    assert_eq!(parked, 1, "{events:?}");
    let resumed = events.iter().filter(|e| e.1 == "status" && e.2["resumed"] == json!(true)).count();
    assert_eq!(resumed, 2, "one `resumed` status per resume (the answer's on B, the crash's on C): {events:?}");
    assert_eq!(c.api.get("/v1/approvals", &key).await.json, json!([]));
}

/// Durable pause of a paused run (issue 17 item 3): a run paused by a
/// hook's `pause` directive parks once it waits at its safe point, outlives
/// the worker that parked it, and is resumed on another worker by
/// `POST /v1/runs/{id}/resume`: past its pause (not applied again), without
/// running a tool or committing a hook's state twice, its stream read as
/// one. A run paused through the API alone waits in its worker and is
/// resumed there by a command from the other worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_runs_park_and_are_resumed_on_another_worker_past_their_pause() {
    let Some(url) = database() else { return };
    let (dir_a, dir_b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let operator = format!("hbo_{}", "7f".repeat(32));
    // A: every tool call lasts 3 s.
    let delay = [("HOOKBOX_UNDER_TEST_TOOL_DELAY_MS", "3000")];
    let a = Worker::start_with_env(BIN, dir_a.path(), &url, &operator, 1000, "", &delay).await;
    std::fs::create_dir_all(dir_b.path().join("data")).expect("data dir");
    std::fs::copy(dir_a.path().join("data/server.secret"), dir_b.path().join("data/server.secret")).expect("secret");
    let b = Worker::start(BIN, dir_b.path(), &url, &operator, 1000, "").await;
    let key = a.api.tenant("acme").await;
    a.api.install(&key, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    a.api.install(&key, "state-counter", STATE_COUNTER, json!({})).await;
    let pauser = json!({"config": {"tool-call-result": "pause", "only_tool": "create_file"}});
    a.api.install(&key, "pauser", SCRIPTED, pauser).await;

    // Paused by a hook after create_file's result (the counter committed it first).
    let body = json!({"session": "hook-paused", "plugins": ["deny-tools", "state-counter", "pauser"]});
    let hook_paused = a.api.start_run(&key, body).await;
    wait_status(&b.api, &key, &hook_paused, "parked", 30).await;
    assert_eq!(revisions(&url, "hook-paused"), 2, "both tool results committed before the pause");

    let stored =
        query_text(&url, format!("SELECT checkpoint FROM runs WHERE id = '{hook_paused}'")).unwrap_or_default();
    assert!(stored.contains("\"paused\":true") && stored.contains("\"pauses\":0"), "{stored:.300}");

    // Paused through the API while create_file runs: it pauses at the next
    // safe point (after the tool) and parks there, as in a hook's pause.
    let body = json!({"session": "api-paused", "plugins": ["deny-tools", "state-counter"]});
    let api_paused = a.api.start_run(&key, body).await;
    wait_checkpoint(&url, &api_paused, "\"started\":[\"").await;
    let r = a.api.post(&format!("/v1/runs/{api_paused}/pause"), &key, json!({})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    wait_status(&b.api, &key, &api_paused, "parked", 30).await;
    assert_eq!(revisions(&url, "api-paused"), 2, "both tool results committed before the park");
    let stored = query_text(&url, format!("SELECT checkpoint FROM runs WHERE id = '{api_paused}'")).unwrap_or_default();
    assert!(
        stored.contains("\"paused\":true") && stored.contains("\"api_pause\":true") && stored.contains("\"pauses\":0"),
        "{stored:.300}"
    );

    // Parked runs hold nothing on A, and outlive it.
    let started = std::time::Instant::now();
    loop {
        let usage = a.api.get("/v1/usage", &key).await.json;
        if (usage["usage"]["concurrent_runs"].clone(), usage["usage"]["live_instances"].clone()) == (json!(0), json!(0))
        {
            break;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "parked runs hold nothing: {usage}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    a.signal("KILL");
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    for run in [&hook_paused, &api_paused] {
        assert_eq!(status(&b.api, &key, run).await["status"], "parked", "a parked run outlives its worker");
    }
    // Another tenant cannot resume the run parked in the API's pause; its tenant can, on B.
    let other = b.api.tenant("globex").await;
    let r = b.api.post(&format!("/v1/runs/{api_paused}/resume"), &other, json!({})).await;
    assert_eq!(r.status, 404, "another tenant's run: {:?}", r.json);
    let r = b.api.post(&format!("/v1/runs/{api_paused}/resume"), &key, json!({})).await;
    assert_eq!((r.status, r.json["resumes"].clone()), (200, json!(true)), "{:?}", r.json);
    // A pause of a paused run changes nothing; an injection waits for the resume.
    let r = b.api.post(&format!("/v1/runs/{hook_paused}/pause"), &key, json!({})).await;
    assert_eq!((r.status, r.json["status"].clone()), (200, json!("parked")), "{:?}", r.json);
    let r = b.api.post(&format!("/v1/runs/{hook_paused}/inject"), &key, json!({"text": "hello"})).await;
    assert_eq!((r.status, r.json["parked"].clone()), (200, json!(true)), "{:?}", r.json);
    let r = b.api.post(&format!("/v1/runs/{hook_paused}/resume"), &other, json!({})).await;
    assert_eq!(r.status, 404, "another tenant's run: {:?}", r.json);

    // Resumed on B: it goes on past its pause, to the end.
    let r = b.api.post(&format!("/v1/runs/{hook_paused}/resume"), &key, json!({})).await;
    assert_eq!((r.status, r.json["resumes"].clone()), (200, json!(true)), "{:?}", r.json);
    for (run, session) in [(&hook_paused, "hook-paused"), (&api_paused, "api-paused")] {
        let done = b.api.wait_run(&key, run).await;
        assert_eq!(done["status"], "completed", "{session}: {done}");
        let results = tool_results(&done["record"]);
        assert_eq!(results.len(), 2, "{session}: one result per tool call: {results:?}");
        assert_eq!(results[1]["is_error"], json!(false), "{session}: create_file ran once: {results:?}");
        assert_eq!(count_logs(&done["record"]), ["count=1", "count=2"], "{session}: {done}");
        let injected = if session == "hook-paused" { json!(["hello"]) } else { json!([]) };
        assert_eq!(done["record"]["injected_messages"], injected, "{session}: {done}");
        assert_eq!(revisions(&url, session), 2, "{session}: each tool result committed once");
        let events = whole_stream(&b.api, &key, run).await;
        let parks = events.iter().filter(|e| e.1 == "status" && e.2["status"] == "parked").count();
        assert_eq!(parks, 1, "{session}: parked once: {events:?}");
        let hook_events: Vec<&Value> = events.iter().filter(|e| e.1 == "hook-event").map(|e| &e.2).collect();
        let repeated = hook_events.windows(2).any(|w| w[0] == w[1]);
        assert!(!repeated, "{session}: no event repeated by the re-execution: {events:?}");
        let results = hook_events.iter().filter(|e| e["type"] == "tool-call-result").count();
        assert_eq!(results, 2, "{session}: {events:?}");
        let pauses = events.iter().filter(|e| e.1 == "directive" && e.2["action"] == "pause").count();
        assert_eq!(pauses, usize::from(session == "hook-paused"), "{session}: {events:?}");
    }

    // A run B owns in the database but holds no task of, as a claim whose
    // reply was lost leaves it: B takes it back after a lease (B's sweep of
    // dead workers never would: B lives) and resumes it from its checkpoint,
    // so it parks again in its pause rather than staying `running` for ever.
    let body = json!({"session": "orphan", "plugins": ["deny-tools", "state-counter", "pauser"]});
    let orphan = b.api.start_run(&key, body).await;
    wait_status(&b.api, &key, &orphan, "parked", 30).await;
    sql(&url, format!("UPDATE runs SET status = 'running', owner = (SELECT id FROM workers) WHERE id = '{orphan}'"));
    let started = std::time::Instant::now();
    loop {
        let parks =
            query_text(&url, format!("SELECT parks::text FROM runs WHERE id = '{orphan}' AND status = 'parked'"));
        if parks.as_deref() == Some("2") {
            break;
        }
        let row = || {
            let q =
                format!("SELECT status || ' ' || coalesce(owner, '-') || ' ' || parks FROM runs WHERE id = '{orphan}'");
            (query_text(&url, q), query_text(&url, "SELECT string_agg(id, ',') FROM workers".to_string()))
        };
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "the orphan is taken back: {:?}", row());
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let r = b.api.post(&format!("/v1/runs/{orphan}/resume"), &key, json!({})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let done = b.api.wait_run(&key, &orphan).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(revisions(&url, "orphan"), 2, "each tool result committed once");

    // An abort of a run parked in a hook's pause: resumed past the pause, it
    // ends aborted at its next event, its stream without a repeated event.
    let body = json!({"session": "pause-aborted", "plugins": ["deny-tools", "state-counter", "pauser"]});
    let aborted = b.api.start_run(&key, body).await;
    wait_status(&b.api, &key, &aborted, "parked", 30).await;
    let r = b.api.post(&format!("/v1/runs/{aborted}/abort"), &key, json!({"reason": "not now"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let done = b.api.wait_run(&key, &aborted).await;
    assert_eq!(done["status"], "aborted", "{done}");
    assert!(done["record"].to_string().contains("not now"), "{done}");
    let events = whole_stream(&b.api, &key, &aborted).await;
    let hook_events: Vec<&Value> = events.iter().filter(|e| e.1 == "hook-event").map(|e| &e.2).collect();
    assert!(!hook_events.windows(2).any(|w| w[0] == w[1]), "no event repeated: {events:?}");
    let pauses = events.iter().filter(|e| e.1 == "directive" && e.2["action"] == "pause").count();
    assert_eq!(pauses, 1, "{events:?}");
}
