//! A `hookbox serve` started in-process for a test ([`TestServer`]), with a
//! small HTTP client that speaks its API: JSON requests, multipart
//! uploads, and Server-Sent Events read until the run's `end`.

use std::path::Path;
use std::time::Duration;

use hookbox_server::{RunningServer, Server, ServerConfig};
use serde_json::{Value, json};

/// A server on a loopback port with its own data directory, the `demo`
/// model (the demo's recorded session) and the demo workspace as template.
/// It dereferences to its [`ApiClient`].
pub struct TestServer {
    /// The running server (`None` once shut down).
    pub server: Option<RunningServer>,
    /// The data directory (removed on drop).
    pub dir: tempfile::TempDir,
    /// The config it was started with.
    pub config: ServerConfig,
    /// A client of its API.
    pub api: ApiClient,
}

/// A client of a `hookbox serve` API (in this process or another).
#[derive(Clone)]
pub struct ApiClient {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The operator key.
    pub operator: String,
    /// The HTTP client.
    pub http: reqwest::Client,
}

impl std::ops::Deref for TestServer {
    type Target = ApiClient;

    fn deref(&self) -> &ApiClient {
        &self.api
    }
}

/// A status and a JSON body (null when the body is not JSON).
#[derive(Debug, Clone)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The body as JSON.
    pub json: Value,
}

/// The server config the tests use, with `extra` TOML appended.
pub fn test_config(data_dir: &Path, extra: &str) -> ServerConfig {
    let root = crate::repo_root();
    let text = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\nworkspace_template = \"{}\"\n{extra}\n[models]\ndemo = \"replay:{}\"\n",
        data_dir.display(),
        root.join("examples/demo/workspace").display(),
        crate::demo_session().display(),
    );
    ServerConfig::from_toml(&text, &root).expect("test server config")
}

/// How long [`ApiClient::new`] keeps an idle connection: half the server's
/// default `header_timeout_ms` (10 s).
const POOL_IDLE: Duration = Duration::from_secs(5);

/// The pool idle time for a server with `config`: half its header timeout,
/// at most [`POOL_IDLE`].
fn pool_idle(config: &ServerConfig) -> Duration {
    POOL_IDLE.min(Duration::from_millis(config.http.header_timeout_ms / 2))
}

impl TestServer {
    /// Starts a server with the test config plus `extra` TOML (top-level keys
    /// first, e.g. `max_iterations = 3`, then tables such as `[http]`).
    pub async fn start(extra: &str) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = test_config(&dir.path().join("data"), extra);
        Self::start_with(config, dir).await
    }

    /// Starts a server with `config` whose data directory is in `dir`.
    pub async fn start_with(config: ServerConfig, dir: tempfile::TempDir) -> TestServer {
        let server = Server::start(config.clone()).await.expect("server starts");
        let base = format!("http://{}", server.addr());
        let operator = server.operator_key().expect("a first start makes the operator key").to_string();
        let api = ApiClient::with_idle(base, operator, pool_idle(&config));
        TestServer { server: Some(server), dir, config, api }
    }

    /// Shuts the server down gracefully and starts it again on the same data
    /// directory (and a new port).
    pub async fn restart(&mut self) {
        self.shutdown().await;
        let server = Server::start(self.config.clone()).await.expect("server restarts");
        self.api.base = format!("http://{}", server.addr());
        self.server = Some(server);
    }

    /// Shuts the server down gracefully.
    pub async fn shutdown(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
    }
}

impl ApiClient {
    /// A client of the server at `base` (`http://127.0.0.1:PORT`) whose operator key is `operator`.
    pub fn new(base: String, operator: String) -> ApiClient {
        Self::with_idle(base, operator, POOL_IDLE)
    }

    /// [`ApiClient::new`] whose pool drops a connection idle for `idle`:
    /// under the server's `header_timeout_ms`, after which the server closes
    /// it (a request sent on it as it closes fails with a reset).
    pub fn with_idle(base: String, operator: String, idle: Duration) -> ApiClient {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .pool_idle_timeout(idle)
            .build()
            .expect("client");
        ApiClient { base, operator, http }
    }

    /// Sends `method path` with `key` and an optional JSON body.
    pub async fn call(&self, method: &str, path: &str, key: Option<&str>, body: Option<&Value>) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body.to_string());
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        Reply { status, json: serde_json::from_str(&text).unwrap_or(Value::Null) }
    }

    /// `GET path` with `key`.
    pub async fn get(&self, path: &str, key: &str) -> Reply {
        self.call("GET", path, Some(key), None).await
    }

    /// `POST path` with `key` and a JSON body.
    pub async fn post(&self, path: &str, key: &str, body: Value) -> Reply {
        self.call("POST", path, Some(key), Some(&body)).await
    }

    /// Makes tenant `name`; returns its admin key.
    pub async fn tenant(&self, name: &str) -> String {
        let r = self.post("/v1/admin/tenants", &self.operator.clone(), json!({"name": name})).await;
        assert_eq!(r.status, 201, "{:?}", r.json);
        r.json["key"].as_str().expect("key").to_string()
    }

    /// Uploads `component` as a version of `plugin` with `manifest`.
    pub async fn upload(&self, key: &str, plugin: &str, component: &[u8], manifest: &Value) -> Reply {
        let boundary = "hookbox-test-boundary-7d1e";
        let mut body = Vec::new();
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"manifest\"\r\nContent-Type: application/json\r\n\r\n{manifest}\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"component\"; filename=\"p.wasm\"\r\nContent-Type: application/wasm\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(component);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let resp = self
            .http
            .post(format!("{}/v1/plugins/{plugin}/versions", self.base))
            .bearer_auth(key)
            .header("content-type", format!("multipart/form-data; boundary={boundary}"))
            .body(body)
            .send()
            .await
            .expect("upload sent");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        Reply { status, json: serde_json::from_str(&text).unwrap_or(Value::Null) }
    }

    /// Uploads the plugin file at `path` and activates it; returns its version number.
    pub async fn install(&self, key: &str, plugin: &str, path: &str, manifest: Value) -> i64 {
        let bytes = std::fs::read(path).expect("plugin built");
        let r = self.upload(key, plugin, &bytes, &manifest).await;
        assert_eq!(r.status, 201, "{:?}", r.json);
        let version = r.json["version"].as_i64().expect("version");
        let r = self.post(&format!("/v1/plugins/{plugin}/versions/{version}/activate"), key, json!({})).await;
        assert_eq!(r.status, 200, "{:?}", r.json);
        version
    }

    /// [`ApiClient::install`] of a version whose capability diff needs a
    /// tenant admin's approval (limits over the defaults, new grants):
    /// uploads, approves and activates it; returns its version number.
    pub async fn install_approved(&self, key: &str, plugin: &str, path: &str, manifest: Value) -> i64 {
        let bytes = std::fs::read(path).expect("plugin built");
        let r = self.upload(key, plugin, &bytes, &manifest).await;
        assert_eq!(r.status, 201, "{:?}", r.json);
        let version = r.json["version"].as_i64().expect("version");
        for step in ["approve", "activate"] {
            let r = self.post(&format!("/v1/plugins/{plugin}/versions/{version}/{step}"), key, json!({})).await;
            assert_eq!(r.status, 200, "{step}: {:?}", r.json);
        }
        version
    }

    /// Starts a run of the demo prompt on the `demo` model; returns its id.
    pub async fn start_run(&self, key: &str, extra: Value) -> String {
        let mut body = json!({"prompt": crate::DEMO_PROMPT, "model": "demo"});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        let r = self.post("/v1/runs", key, body).await;
        assert_eq!(r.status, 201, "{:?}", r.json);
        r.json["run_id"].as_str().expect("run_id").to_string()
    }

    /// Waits (at most 30 s) until the run is no longer running; returns it.
    pub async fn wait_run(&self, key: &str, run: &str) -> Value {
        for _ in 0..600 {
            let r = self.get(&format!("/v1/runs/{run}"), key).await;
            assert_eq!(r.status, 200, "{:?}", r.json);
            if !r.json["record"].is_null() {
                return r.json;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("run {run} did not end within 30 s");
    }

    /// Waits (at most 30 s) for the run's first pending approval.
    pub async fn wait_approval(&self, key: &str, run: &str) -> Value {
        for _ in 0..600 {
            let r = self.get("/v1/approvals", key).await;
            if let Some(a) = r.json.as_array().and_then(|a| a.iter().find(|a| a["run_id"] == run)) {
                return a.clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no approval of run {run} within 30 s");
    }

    /// Reads the run's events (`(id, name, data)`) until `end`, after `last_event_id`.
    pub async fn events(&self, key: &str, run: &str, last_event_id: Option<i64>) -> Vec<(i64, String, Value)> {
        let mut req = self.http.get(format!("{}/v1/runs/{run}/events", self.base)).bearer_auth(key);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id.to_string());
        }
        let mut resp = req.send().await.expect("events");
        assert_eq!(resp.status().as_u16(), 200);
        let mut text = String::new();
        while let Ok(Some(chunk)) = resp.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        parse_sse(&text)
    }
}

/// Parses SSE text into (id, event, data as JSON) messages.
pub fn parse_sse(text: &str) -> Vec<(i64, String, Value)> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let (mut id, mut name, mut data) = (None, String::new(), String::new());
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id:") {
                id = v.trim().parse().ok();
            } else if let Some(v) = line.strip_prefix("event:") {
                name = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        if let Some(id) = id {
            out.push((id, name, serde_json::from_str(&data).unwrap_or(Value::Null)));
        }
    }
    out
}
