//! The workers: `hookbox serve` processes, their API, tenants and plugins.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use hookbox_bench::served::{OPERATOR, POOL_IDLE};
use hookbox_bench::{demo_session, plugin_path, repo_root};
use reqwest::Method;
use serde_json::{Value, json};

use crate::RUN_TIMEOUT;

/// A worker's HTTP API.
#[derive(Clone)]
pub(crate) struct Api {
    pub(crate) base: String,
    pub(crate) http: reqwest::Client,
}

impl Api {
    /// One request; the status and the body as JSON (null when it is not JSON).
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        key: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value)> {
        let mut req = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(key);
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body.to_string());
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    pub(crate) async fn get(&self, path: &str, key: &str) -> Result<(u16, Value)> {
        self.call(Method::GET, path, key, None).await
    }

    pub(crate) async fn post(&self, path: &str, key: &str, body: &Value) -> Result<(u16, Value)> {
        self.call(Method::POST, path, key, Some(body)).await
    }
}

/// A `hookbox serve` process (killed on drop).
pub(crate) struct Worker {
    pub(crate) name: String,
    pub(crate) child: Child,
    pub(crate) api: Api,
    pub(crate) data: PathBuf,
    pub(crate) log: PathBuf,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Worker {
    /// Starts `target/PROFILE/hookbox serve` in `dir` (its config, data and
    /// log there), on `database` (none: the SQLite default), with the key
    /// secret copied from `secret_from` (a data directory) when given.
    pub(crate) async fn start(
        name: &str,
        dir: &Path,
        profile: &str,
        database: Option<&str>,
        secret_from: Option<&Path>,
        extra: &str,
    ) -> Result<Worker> {
        let root = repo_root();
        let data = dir.join("data");
        std::fs::create_dir_all(&data)?;
        let mut models = format!("demo = \"replay:{}\"\n", demo_session().display());
        for k in crate::LONG_SESSIONS {
            let path = crate::sessions::write_long_session(dir, k)?;
            models.push_str(&format!("long{k} = \"replay:{}\"\n", path.display()));
        }
        if let Some(from) = secret_from {
            std::fs::copy(from.join("server.secret"), data.join("server.secret"))
                .context("copy the first worker's server.secret")?;
        }
        let database = database.map(|url| format!("database = \"{url}\"\n")).unwrap_or_default();
        // Places for every run the bench starts, unless the setup sets its own.
        let places = if extra.contains("worker_runs") { "" } else { "worker_runs = 100000\n" };
        let config = format!(
            "data_dir = \"{}\"\nworkspace_template = \"{}\"\n{places}{database}{extra}\n\
             [http]\nmax_requests_per_tenant = 4096\n\
             [default_quotas]\nconcurrent_runs = 100000\nlive_instances = 1000000\n\
             fuel_per_minute = 1000000000000000\nhook_ms_per_minute = 1000000000\nspend_per_day_usd = 1000000.0\nparked_runs = 1000000\n\
             [models]\n{models}",
            data.display(),
            root.join("examples/demo/workspace").display(),
        );
        std::fs::write(dir.join("server.toml"), config)?;
        let log = dir.join("worker.log");
        let port = free_port()?;
        let bin = root.join("target").join(profile).join("hookbox");
        let child = Command::new(&bin)
            .args(["serve", "--config"])
            .arg(dir.join("server.toml"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("HOOKBOX_OPERATOR_KEY", OPERATOR)
            .env("HOOKBOX_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("start {} (build it first)", bin.display()))?;
        let http = reqwest::Client::builder()
            .timeout(RUN_TIMEOUT)
            .pool_max_idle_per_host(512)
            .pool_idle_timeout(POOL_IDLE)
            .build()?;
        let mut worker = Worker {
            name: name.to_string(),
            child,
            api: Api { base: format!("http://127.0.0.1:{port}"), http },
            data,
            log,
        };
        let started = Instant::now();
        loop {
            if worker.api.http.get(format!("{}/healthz", worker.api.base)).send().await.is_ok() {
                return Ok(worker);
            }
            if let Some(status) = worker.child.try_wait()? {
                bail!("{name} exited at start ({status}): {}", tail(&worker.log));
            }
            if started.elapsed() > Duration::from_secs(60) {
                bail!("{name} did not answer /healthz within 60 s: {}", tail(&worker.log));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The worker's resident memory, in KiB.
    pub(crate) fn rss_kib(&self) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))?;
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .context("no VmRSS in /proc/PID/status")
    }

    /// The warnings, errors and panics in the worker's log: (count, the first few).
    pub(crate) fn log_problems(&self) -> (usize, Vec<String>) {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let bad: Vec<&str> =
            text.lines().filter(|l| l.contains(" WARN ") || l.contains(" ERROR ") || l.contains("panicked")).collect();
        let mut first: Vec<String> = Vec::new();
        for line in &bad {
            let line: String = line.chars().take(300).collect();
            if first.len() < 3 && !first.contains(&line) {
                first.push(line);
            }
        }
        (bad.len(), first)
    }
}

/// The last lines of a log file.
pub(crate) fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

/// Workers on one database (none: one worker on SQLite), each in a temporary directory.
pub(crate) struct Cluster {
    pub(crate) workers: Vec<Worker>,
    pub(crate) _dirs: Vec<tempfile::TempDir>,
}

impl Cluster {
    pub(crate) async fn start(profile: &str, database: Option<&str>, n: usize) -> Result<Cluster> {
        Cluster::start_with(profile, database, n, "").await
    }

    /// [`Cluster::start`] with more `server.toml` text for each worker.
    pub(crate) async fn start_with(profile: &str, database: Option<&str>, n: usize, extra: &str) -> Result<Cluster> {
        let mut workers: Vec<Worker> = Vec::new();
        let mut dirs = Vec::new();
        for i in 0..n {
            let dir = tempfile::tempdir()?;
            let secret_from = workers.first().map(|w| w.data.clone());
            let name = format!("worker {}", i + 1);
            workers.push(Worker::start(&name, dir.path(), profile, database, secret_from.as_deref(), extra).await?);
            dirs.push(dir);
        }
        Ok(Cluster { workers, _dirs: dirs })
    }

    /// Every worker's log problems, as markdown lines (empty when none).
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for w in &self.workers {
            let (n, first) = w.log_problems();
            if n > 0 {
                out.push(format!("- {}: {n} warning/error lines in its log, e.g.:", w.name));
                out.extend(first.into_iter().map(|l| format!("  `{}`", l.replace('`', "'"))));
            }
        }
        out
    }
}

/// Makes database `name` on the server of `url` (a `postgres://.../DB` URL); returns its URL.
pub(crate) fn create_database(url: &str, name: &str) -> Result<String> {
    let out = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", &format!("CREATE DATABASE {name}")])
        .stdin(Stdio::null())
        .output()
        .context("run psql (Debian's postgresql-client)")?;
    ensure!(out.status.success(), "CREATE DATABASE {name}: {}", String::from_utf8_lossy(&out.stderr));
    let (server, _) = url.rsplit_once('/').context("HOOKBOX_TEST_POSTGRES is not a URL ending in /DATABASE")?;
    Ok(format!("{server}/{name}"))
}

/// Makes tenant `name` (on any worker of the database); returns its admin key.
pub(crate) async fn tenant(api: &Api, name: &str) -> Result<String> {
    let (status, v) = api.post("/v1/admin/tenants", OPERATOR, &json!({"name": name})).await?;
    ensure!(status == 201, "tenant {name}: {status} {v}");
    v["key"].as_str().map(str::to_string).context("no key in the tenant's answer")
}

/// Uploads the plugin file `file` (of `profile`) as `plugin` and activates it.
pub(crate) async fn install(
    api: &Api,
    key: &str,
    plugin: &str,
    file: &str,
    profile: &str,
    manifest: &Value,
) -> Result<()> {
    let path = plugin_path(file, profile);
    let bytes = std::fs::read(&path).with_context(|| format!("{} (build the plugins first)", path.display()))?;
    let (content_type, body) = hookbox_bench::served::upload_body(manifest, &bytes);
    let resp = api
        .http
        .post(format!("{}/v1/plugins/{plugin}/versions", api.base))
        .bearer_auth(key)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await?;
    let status = resp.status().as_u16();
    let v: Value = serde_json::from_str(&resp.text().await?).unwrap_or(Value::Null);
    ensure!(status == 201, "upload of {plugin}: {status} {v}");
    let version = v["version"].as_i64().with_context(|| format!("upload of {plugin}: {v}"))?;
    let (status, a) = api.post(&format!("/v1/plugins/{plugin}/versions/{version}/activate"), key, &json!({})).await?;
    ensure!(status == 200, "activate {plugin}: {status} {a}");
    Ok(())
}

/// The three-plugin chain of the throughput rows.
pub(crate) const CHAIN: [&str; 3] = ["deny-tools", "state-counter", "audit-log"];

pub(crate) async fn install_chain(api: &Api, key: &str, profile: &str) -> Result<()> {
    install(api, key, "deny-tools", "deny_tools", profile, &json!({"config": {"paths": [".env"]}})).await?;
    install(api, key, "state-counter", "state_counter", profile, &json!({})).await?;
    install(api, key, "audit-log", "audit_log", profile, &json!({})).await
}

/// The plugin that parks a run: it asks for approval before `create_file`.
pub(crate) async fn install_asker(api: &Api, key: &str, profile: &str) -> Result<()> {
    let manifest =
        json!({"config": {"before-tool-call": "ask-approval:{tool} needs a person", "only_tool": "create_file"}});
    install(api, key, "asker", "scripted", profile, &manifest).await
}
