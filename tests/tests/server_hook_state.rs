//! Issue 17 item 5, hook-state commits across a park on PostgreSQL: a
//! resumed run's hook saves on the revision its run last saw, even when it
//! saves without reading first; and a run parks only once its detached hook
//! calls have committed, so none is lost with the worker that parked it.
//! Run under `scripts/with-postgres.sh` (skipped without it; a failure with
//! `HOOKBOX_REQUIRE_POSTGRES=1`).

use hookbox_tests::postgres::{Worker, count_logs, database, query_text, sql, wait_status};
use hookbox_tests::{DENY_TOOLS, SCRIPTED, STATE_COUNTER};
use serde_json::{Value, json};

/// `hookbox serve`, run as a process.
const BIN: &str = env!("CARGO_BIN_EXE_hookbox-under-test");

/// `plugin`'s hook-state revision in `session` of tenant `acme` (0: none saved).
fn revision(url: &str, session: &str, plugin: &str) -> i64 {
    let query =
        format!("SELECT revision::TEXT FROM hook_state WHERE session = 'acme:{session}' AND plugin = '{plugin}'");
    query_text(url, query).map_or(0, |r| r.parse().unwrap_or_else(|e| panic!("revision {r}: {e}")))
}

/// Answers the approval `run` waits for (as parked) through `api`: the run is resumed.
async fn approve(api: &hookbox_tests::server::ApiClient, key: &str, run: &str) {
    let approval = api.wait_approval(key, run).await;
    let id = approval["id"].as_str().unwrap_or_default().replace('/', "%2F");
    let r = api.post(&format!("/v1/approvals/{id}"), key, json!({"decision": "approve"})).await;
    assert_eq!((r.status, r.json["resumes"].clone()), (200, json!(true)), "{:?}", r.json);
}

fn failures_of<'a>(record: &'a Value, plugin: &str) -> Vec<&'a Value> {
    record["hook_failures"].as_array().into_iter().flatten().filter(|f| f["plugin"] == plugin).collect()
}

/// Two workers; `deny-tools` denies the demo's `.env` delete, `asker` asks
/// for approval of its `create_file`, so each run parks there, after one
/// tool result. `cached` is `state-counter` reading its state at `run-start`
/// only; `observed` is `state-counter` observe-only, entered at tool results
/// only, waiting 1.5 s before each save (its call runs detached while the
/// run goes on to its approval).
///
/// 1. A run with `cached` parks on A after one save (revision 1). Another
///    run of the session saves meanwhile (revision 2, written here in SQL).
///    Resumed on B, `cached` saves without reading: its save swaps revision 1
///    and loses (a `state` failure), and the other run's state stays.
/// 2. A run with `observed` parks on A only once the detached call's save
///    is made (revision 1 when it shows parked); A is killed at once; B
///    resumes it: each tool result is committed once (revision 2). Before,
///    the run parked with the call still sleeping, the kill lost its save,
///    and the re-executed call did not make it (revision 1, `count=1` twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumed_runs_commit_hook_state_on_the_revision_they_saw_and_park_after_detached_commits() {
    let Some(url) = database() else { return };
    let (dir_a, dir_b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let operator = format!("hbo_{}", "8a".repeat(32));
    let a = Worker::start(BIN, dir_a.path(), &url, &operator, 1000, "").await;
    std::fs::create_dir_all(dir_b.path().join("data")).expect("data dir");
    std::fs::copy(dir_a.path().join("data/server.secret"), dir_b.path().join("data/server.secret")).expect("secret");
    let b = Worker::start(BIN, dir_b.path(), &url, &operator, 1000, "").await;
    let key = a.api.tenant("acme").await;
    a.api.install(&key, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let asker =
        json!({"config": {"before-tool-call": "ask-approval:{tool} needs a person", "only_tool": "create_file"}});
    a.api.install(&key, "asker", SCRIPTED, asker).await;
    a.api.install(&key, "cached", STATE_COUNTER, json!({"config": {"cached": true}})).await;
    let observed = json!({
        "config": {"sleep_ms": 1500}, "observe": true, "events": ["tool-call-result"], "limits": {"deadline_ms": 5000}
    });
    a.api.install_approved(&key, "observed", STATE_COUNTER, observed).await;

    // 1. A save without a read after the resume swaps the revision the run saw.
    let body = json!({"session": "raced", "plugins": ["deny-tools", "asker", "cached"]});
    let run = a.api.start_run(&key, body).await;
    wait_status(&b.api, &key, &run, "parked", 30).await;
    assert_eq!(revision(&url, "raced", "cached"), 1, "one save before the park");
    sql(
        &url,
        "UPDATE hook_state SET data = convert_to('{\"count\":41}', 'UTF8'), version = 'other', revision = 2 \
         WHERE session = 'acme:raced' AND plugin = 'cached'"
            .into(),
    );
    approve(&b.api, &key, &run).await;
    let done = b.api.wait_run(&key, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    let failures = failures_of(&done["record"], "cached");
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["kind"], "state", "{failures:?}");
    let message = failures[0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("revision 1, now 2"), "{message}");
    assert_eq!(revision(&url, "raced", "cached"), 2, "the other run's save stays");
    let version = query_text(&url, "SELECT version FROM hook_state WHERE session = 'acme:raced'".into());
    assert_eq!(version.as_deref(), Some("other"));

    // 2. A park waits for the detached call's save; the kill loses nothing.
    let body = json!({"session": "observed", "plugins": ["deny-tools", "asker", "observed"]});
    let run = a.api.start_run(&key, body).await;
    wait_status(&b.api, &key, &run, "parked", 30).await;
    assert_eq!(revision(&url, "observed", "observed"), 1, "the detached call saved before the park");
    a.signal("KILL");
    approve(&b.api, &key, &run).await;
    let done = b.api.wait_run(&key, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(failures_of(&done["record"], "observed").is_empty(), "{done}");
    assert_eq!(count_logs(&done["record"]), ["count=1", "count=2"], "{done}");
    assert_eq!(revision(&url, "observed", "observed"), 2, "each tool result committed once");
}
