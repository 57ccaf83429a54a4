//! One run: submitted, then waited for until its record is stored.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use serde_json::{Value, json};

use crate::worker::Api;
use crate::{PROMPT, RUN_TIMEOUT};

pub(crate) fn run_body(plugins: &[&str]) -> Value {
    run_body_on("demo", plugins)
}

/// A run of `model` (one of the workers' `[models]`).
pub(crate) fn run_body_on(model: &str, plugins: &[&str]) -> Value {
    json!({"prompt": PROMPT, "model": model, "plugins": plugins})
}

/// `POST /v1/runs`: the run id, or the answer that was not 201.
pub(crate) async fn submit(api: &Api, key: &str, body: &Value) -> Result<String, String> {
    match api.post("/v1/runs", key, body).await {
        Ok((201, v)) => v["run_id"].as_str().map(str::to_string).ok_or_else(|| format!("201 without run_id: {v}")),
        Ok((status, v)) => Err(format!("{status} {}", v["error"]["message"].as_str().unwrap_or(&v.to_string()))),
        Err(e) => Err(format!("request failed: {e}")),
    }
}

/// Waits until the run's record is stored; returns `GET /v1/runs/{id}`'s answer.
/// The run's event stream is read until `end` (the worker pushes it), then
/// the run is polled every 5 ms until its record is stored.
pub(crate) async fn wait_record(api: &Api, key: &str, run: &str) -> Result<Value> {
    let stream = api.http.get(format!("{}/v1/runs/{run}/events", api.base)).bearer_auth(key).send().await;
    if let Ok(mut resp) = stream
        && resp.status().as_u16() == 200
    {
        let mut pending = String::new();
        'read: while let Some(chunk) = resp.chunk().await? {
            pending.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(at) = pending.find('\n') {
                let line: String = pending.drain(..=at).collect();
                if line.strip_prefix("event:").is_some_and(|name| name.trim() == "end") {
                    break 'read;
                }
            }
        }
    }
    poll_record(api, key, run, Duration::from_millis(5)).await
}

/// Polls `GET /v1/runs/{id}` every `every` until the record is there.
pub(crate) async fn poll_record(api: &Api, key: &str, run: &str, every: Duration) -> Result<Value> {
    loop {
        let (status, v) = api.get(&format!("/v1/runs/{run}"), key).await?;
        ensure!(status == 200, "GET /v1/runs/{run}: {status} {v}");
        if !v["record"].is_null() {
            return Ok(v);
        }
        tokio::time::sleep(every).await;
    }
}

/// What became of one run.
#[derive(Default)]
pub(crate) struct Outcome {
    /// Submission to stored record, µs (none when it was refused or never ended).
    pub(crate) latency_us: Option<u64>,
    /// The run's final status, or the refusal.
    pub(crate) status: String,
    /// Hook failures in its record.
    pub(crate) hook_failures: usize,
}

/// Submits one run and waits (at most [`RUN_TIMEOUT`]) for its record.
pub(crate) async fn one_run(api: &Api, key: &str, body: &Value) -> Outcome {
    let started = Instant::now();
    let run = match submit(api, key, body).await {
        Ok(run) => run,
        Err(e) => return Outcome { status: format!("refused: {e}"), ..Outcome::default() },
    };
    match tokio::time::timeout(RUN_TIMEOUT, wait_record(api, key, &run)).await {
        Ok(Ok(v)) => Outcome {
            latency_us: Some(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)),
            status: v["status"].as_str().unwrap_or("?").to_string(),
            hook_failures: v["record"]["hook_failures"].as_array().map_or(0, Vec::len),
        },
        Ok(Err(e)) => Outcome { status: format!("lost: {e}"), ..Outcome::default() },
        Err(_) => Outcome { status: format!("no record within {} s", RUN_TIMEOUT.as_secs()), ..Outcome::default() },
    }
}
