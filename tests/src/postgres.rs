//! Helpers for tests of workers on PostgreSQL (`tests/tests/server_postgres.rs`,
//! `tests/tests/server_park.rs`): a database per test, a second in-process
//! worker, and `hookbox serve` as a process that can be stopped and killed.

use crate::server::{ApiClient, TestServer, test_config};

/// A fresh database of its own for one test (the tests run at once on one
/// server), as a URL; `None` when no server is given.
pub fn database() -> Option<String> {
    match std::env::var("HOOKBOX_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => {
            static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let name = format!("test_{}_{n}", std::process::id());
            let admin = url.clone();
            let create = format!("CREATE DATABASE {name}");
            // The blocking client may not run on a tokio worker: a thread of its own.
            std::thread::spawn(move || {
                let mut client = postgres::Client::connect(&admin, postgres::NoTls)
                    .unwrap_or_else(|e| panic!("{}: {e:?}", "connect"));
                client.batch_execute(&create).unwrap_or_else(|e| panic!("{}: {e:?}", "create the test's database"));
            })
            .join()
            .unwrap_or_else(|e| panic!("{}: {e:?}", "database thread"));
            let (server, _) = url.rsplit_once('/').unwrap_or_else(|| panic!("not a URL ending in /DATABASE: {url}"));
            Some(format!("{server}/{name}"))
        }
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

/// A second worker beside `a`: its own data directory (cache, workspaces),
/// the same database, and the same key secret (keys are keyed hashes).
pub async fn second_worker(
    a: &TestServer,
    extra: &str,
) -> (tempfile::TempDir, hookbox_server::RunningServer, ApiClient) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{}: {e:?}", "tempdir"));
    std::fs::create_dir_all(dir.path().join("data")).unwrap_or_else(|e| panic!("{}: {e:?}", "data dir"));
    std::fs::copy(a.dir.path().join("data/server.secret"), dir.path().join("data/server.secret"))
        .unwrap_or_else(|e| panic!("{}: {e:?}", "secret"));
    let config = test_config(&dir.path().join("data"), extra);
    let server =
        hookbox_server::Server::start(config).await.unwrap_or_else(|e| panic!("{}: {e:?}", "second server starts"));
    assert!(server.operator_key().is_none(), "the database already has an operator key");
    let api = ApiClient::new(format!("http://{}", server.addr()), a.operator.clone());
    (dir, server, api)
}

/// `hookbox serve` as a process on `url`, with a lease of `lease_ms`, its data in `dir`.
pub struct Worker {
    /// The process.
    pub child: std::process::Child,
    /// Its API.
    pub api: ApiClient,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Worker {
    /// Starts `bin` (the test's `env!("CARGO_BIN_EXE_hookbox-under-test")`)
    /// as `hookbox serve`; `extra` is more `server.toml` text.
    pub async fn start(
        bin: &str,
        dir: &std::path::Path,
        url: &str,
        operator: &str,
        lease_ms: u64,
        extra: &str,
    ) -> Worker {
        Worker::start_with_env(bin, dir, url, operator, lease_ms, extra, &[]).await
    }

    /// [`Worker::start`] with more environment variables for the process
    /// (`HOOKBOX_UNDER_TEST_TOOL_DELAY_MS`: see `src/bin/hookbox-under-test.rs`).
    pub async fn start_with_env(
        bin: &str,
        dir: &std::path::Path,
        url: &str,
        operator: &str,
        lease_ms: u64,
        extra: &str,
        env: &[(&str, &str)],
    ) -> Worker {
        let config = test_config(&dir.join("data"), "");
        let toml = format!(
            "data_dir = \"{}\"\nworkspace_template = \"{}\"\ndatabase = \"{url}\"\nworker_lease_ms = {lease_ms}\n{extra}\n[models]\ndemo = \"{}\"\n",
            dir.join("data").display(),
            config.workspace_template.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            config.models["demo"],
        );
        std::fs::create_dir_all(dir.join("data")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join("server.toml"), toml).unwrap_or_else(|e| panic!("{e}"));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("{e}"));
        let child = std::process::Command::new(bin)
            .args(["serve", "--config"])
            .arg(dir.join("server.toml"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("HOOKBOX_OPERATOR_KEY", operator)
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start hookbox serve: {e}"));
        let api = ApiClient::new(format!("http://127.0.0.1:{port}"), operator.to_string());
        let started = std::time::Instant::now();
        while api.http.get(format!("{}/healthz", api.base)).send().await.is_err() {
            assert!(started.elapsed() < std::time::Duration::from_secs(30), "the server did not start");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        Worker { child, api }
    }

    /// Sends it signal `name` (`STOP`, `CONT`, `KILL`).
    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap_or_else(|e| panic!("kill: {e}"));
        assert!(status.success(), "kill -{name}");
    }
}

/// The run as `GET /v1/runs/{id}` shows it.
pub async fn status(api: &ApiClient, key: &str, run: &str) -> serde_json::Value {
    api.get(&format!("/v1/runs/{run}"), key).await.json
}

/// Waits (at most `secs`) until the run's status is `want`.
pub async fn wait_status(api: &ApiClient, key: &str, run: &str, want: &str, secs: u64) -> serde_json::Value {
    let started = std::time::Instant::now();
    loop {
        let got = status(api, key, run).await;
        if got["status"] == want {
            return got;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(secs), "status {want} not reached: {got}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Runs `statement` on the database at `url`.
pub fn sql(url: &str, statement: String) {
    let url = url.to_string();
    std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| panic!("connect: {e}"));
        c.batch_execute(&statement).unwrap_or_else(|e| panic!("{statement}: {e}"));
    })
    .join()
    .unwrap_or_else(|e| panic!("{e:?}"));
}

/// The text of the first column of the first row `query` returns, if any.
pub fn query_text(url: &str, query: String) -> Option<String> {
    let url = url.to_string();
    std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| panic!("connect: {e}"));
        c.query_opt(&query, &[]).unwrap_or_else(|e| panic!("{query}: {e}")).and_then(|r| r.get(0))
    })
    .join()
    .unwrap_or_else(|e| panic!("{e:?}"))
}

/// Installs the chain of the park and queue tests for `key`: `deny-tools`
/// denies `.env`, `asker` asks for approval of `create_file`,
/// `state-counter` counts tool results in its state.
pub async fn install_asker_chain(api: &ApiClient, key: &str) {
    api.install(key, "deny-tools", crate::DENY_TOOLS, serde_json::json!({"config": {"paths": [".env"]}})).await;
    let asker = serde_json::json!({"config": {"before-tool-call": "ask-approval:{tool} needs a person", "only_tool": "create_file"}});
    api.install(key, "asker", crate::SCRIPTED, asker).await;
    api.install(key, "state-counter", crate::STATE_COUNTER, serde_json::json!({})).await;
}

/// The state-counter's `count=N` hook logs of a run's record: one per tool result committed.
pub fn count_logs(record: &serde_json::Value) -> Vec<String> {
    record["hook_logs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["message"].as_str())
        .filter(|m| m.starts_with("count="))
        .map(str::to_string)
        .collect()
}

/// A live run's row `id` as the store tests add it.
pub fn run_row(id: &str) -> hookbox_server::RunRow {
    hookbox_server::RunRow {
        run_id: id.into(),
        status: "running".into(),
        model: "replay".into(),
        session: "s".into(),
        plugins: Vec::new(),
        created_at: 0,
        record: None,
    }
}
