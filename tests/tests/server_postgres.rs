//! Issue 17, first step: `hookbox serve` on PostgreSQL. Run under
//! `scripts/with-postgres.sh`, which sets `HOOKBOX_TEST_POSTGRES`; skipped
//! without it (a failure with `HOOKBOX_REQUIRE_POSTGRES=1`). Two servers on
//! one database answer for the same tenants, keys and plugin versions (a
//! key made on one opens the other; a version uploaded on one is activated
//! and evaluated on the other), and everything survives a restart.

use hookbox_tests::DENY_TOOLS;
use hookbox_tests::server::{ApiClient, TestServer, test_config};
use serde_json::json;

fn database() -> Option<String> {
    match std::env::var("HOOKBOX_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("HOOKBOX_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "HOOKBOX_REQUIRE_POSTGRES=1 but HOOKBOX_TEST_POSTGRES is not set: run under scripts/with-postgres.sh"
            );
            eprintln!("skipped: HOOKBOX_TEST_POSTGRES is not set (run under scripts/with-postgres.sh)");
            None
        }
    }
}

fn before_tool_call(path: &str) -> serde_json::Value {
    json!({"session_id": "pg-1", "event": {"type": "before-tool-call", "iteration": 1,
        "call": {"id": "c1", "name": "delete_file", "arguments": format!("{{\"path\": \"{path}\"}}")}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_postgres_database_serve_the_same_tenants_and_plugins() {
    let Some(url) = database() else { return };
    let extra = format!("database = \"{url}\"");
    let mut a = TestServer::start(&extra).await;
    let key = a.tenant("acme").await;
    let uploaded = a
        .upload(
            &key,
            "deny-tools",
            &std::fs::read(DENY_TOOLS).expect("plugin built"),
            &json!({"config": {"paths": [".env"]}}),
        )
        .await;
    assert_eq!(uploaded.status, 201, "{:?}", uploaded.json);

    // A second worker: its own data directory (cache, workspaces), the same
    // database, and the same key secret (keys are keyed hashes).
    let dir_b = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir_b.path().join("data")).expect("data dir");
    std::fs::copy(a.dir.path().join("data/server.secret"), dir_b.path().join("data/server.secret")).expect("secret");
    let config_b = test_config(&dir_b.path().join("data"), &extra);
    let server_b = hookbox_server::Server::start(config_b).await.expect("second server starts");
    assert!(server_b.operator_key().is_none(), "the database already has an operator key");
    let b = ApiClient::new(format!("http://{}", server_b.addr()), a.operator.clone());

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
    let second = b.upload(&key, "deny-tools", &std::fs::read(DENY_TOOLS).expect("plugin"), &json!({})).await;
    assert_eq!(second.json["version"], 2, "{:?}", second.json);
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
    assert_eq!(versions.json[0]["versions"].as_array().map(Vec::len), Some(2), "{:?}", versions.json);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_url_that_is_neither_sqlite_nor_postgres_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = test_config(&dir.path().join("data"), "database = \"mysql://x\"");
    let err = hookbox_server::Server::start(config).await.err().expect("refused");
    assert!(err.to_string().contains("neither sqlite:PATH nor a postgres:// URL"), "{err}");
}
