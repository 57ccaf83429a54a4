//! A `hookbox serve` started as its own process on a loopback port with a
//! fresh data directory and a JSON client for it ([`Served`]), shared by
//! `serve_bench` and `agent_hooks_bench`; and [`percentiles`].

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::repo_root;

/// The operator key the server is started with.
pub const OPERATOR: &str = "hbo_00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// How long the bench's clients keep an idle connection: under the
/// server's `header_timeout_ms` (10 s), after which it closes an idle
/// connection (a request sent on it as it closes fails with a reset).
pub const POOL_IDLE: Duration = Duration::from_secs(5);

/// A running `hookbox serve` process (killed on drop).
pub struct Served {
    /// The process.
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// A keep-alive client.
    pub http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Served {
    /// Starts `target/PROFILE/hookbox serve` with quotas no benchmark reaches.
    pub async fn start(profile: &str) -> Result<Served> {
        Self::start_with(profile, "").await
    }

    /// [`Served::start`] with `settings`, top-level lines of the server
    /// config (e.g. `evaluate_slots = 1024\n`), before the rest.
    pub async fn start_with(profile: &str, settings: &str) -> Result<Served> {
        let dir = tempfile::tempdir()?;
        let root = repo_root();
        let config = dir.path().join("server.toml");
        let quotas = "[default_quotas]\nconcurrent_runs = 10000\nlive_instances = 100000\nfuel_per_minute = 1000000000000000\nhook_ms_per_minute = 100000000\n";
        std::fs::write(
            &config,
            format!(
                "{settings}data_dir = \"data\"\nworkspace_template = \"{}\"\nworker_runs = 100000\n[http]\nmax_requests_per_tenant = 1024\n{quotas}[models]\ndemo = \"replay:{}\"\n",
                root.join("examples/demo/workspace").display(),
                crate::demo_session().display()
            ),
        )?;
        let port = free_port()?;
        let bin = root.join("target").join(profile).join("hookbox");
        let child = Command::new(&bin)
            .args(["serve", "--config"])
            .arg(&config)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("HOOKBOX_OPERATOR_KEY", OPERATOR)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("start {}", bin.display()))?;
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::builder().pool_max_idle_per_host(256).pool_idle_timeout(POOL_IDLE).build()?;
        let served = Served { child, base, http, _dir: dir };
        for _ in 0..200 {
            if served.http.get(format!("{}/healthz", served.base)).send().await.is_ok() {
                return Ok(served);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        bail!("hookbox serve did not answer within 5 s")
    }

    /// One JSON POST.
    pub async fn post(&self, path: &str, key: &str, body: &Value) -> Result<(u16, Value)> {
        post_with(&self.http, &self.base, path, key, body).await
    }
}

/// One JSON POST with `http` (each client keeps its own connections, on the runtime that made them).
pub async fn post_with(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    key: &str,
    body: &Value,
) -> Result<(u16, Value)> {
    let r = http
        .post(format!("{base}{path}"))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await?;
    let status = r.status().as_u16();
    Ok((status, serde_json::from_str(&r.text().await?).unwrap_or(Value::Null)))
}

impl Served {
    /// Makes tenant `name`; returns its key.
    pub async fn tenant(&self, name: &str) -> Result<String> {
        let (status, v) = self.post("/v1/admin/tenants", OPERATOR, &json!({"name": name})).await?;
        anyhow::ensure!(status == 201, "tenant {name}: {v}");
        Ok(v["key"].as_str().unwrap_or_default().to_string())
    }

    /// Uploads and activates; returns the time both took.
    pub async fn install(&self, key: &str, plugin: &str, path: &Path, manifest: &Value) -> Result<Duration> {
        let bytes = std::fs::read(path).with_context(|| format!("{} (build it first)", path.display()))?;
        let (content_type, body) = upload_body(manifest, &bytes);
        let started = Instant::now();
        let r = self
            .http
            .post(format!("{}/v1/plugins/{plugin}/versions", self.base))
            .bearer_auth(key)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await?;
        let v: Value = serde_json::from_str(&r.text().await?).unwrap_or(Value::Null);
        let version = v["version"].as_i64().with_context(|| format!("upload of {plugin}: {v}"))?;
        let (status, a) =
            self.post(&format!("/v1/plugins/{plugin}/versions/{version}/activate"), key, &json!({})).await?;
        anyhow::ensure!(status == 200, "activate {plugin}: {a}");
        Ok(started.elapsed())
    }

    /// The CPU time the server process has used so far (user + system), in
    /// ms, from `/proc/PID/stat` (in clock ticks of 10 ms: Linux's USER_HZ
    /// is 100); 0 when it cannot be read.
    pub fn cpu_ms(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the command name (which may hold spaces), from `state` (field 3) on.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        // utime and stime are fields 14 and 15: indexes 11 and 12 from `state`.
        (tick(11) + tick(12)) * 10
    }

    /// The server's resident memory, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

/// (p50, p99, max) of `samples`, in µs.
pub fn percentiles(samples: &mut [u64]) -> (u64, u64, u64) {
    samples.sort_unstable();
    let at = |q: f64| samples.get(((samples.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0);
    (at(0.5), at(0.99), samples.last().copied().unwrap_or(0))
}

/// The multipart body of `POST /v1/plugins/{name}/versions`: the manifest
/// entry (JSON) and the component's bytes; returns the content type and the body.
pub fn upload_body(manifest: &Value, component: &[u8]) -> (String, Vec<u8>) {
    let boundary = "hookbox-bench-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"manifest\"\r\n\r\n{manifest}\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"component\"\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(component);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}
