//! A live stream that stalls after its first bytes, through the agent loop:
//! with a short configured read timeout it fails fast; the loop sends the
//! request again when nothing of it reached the embedder, and gives up (the
//! run raises a provider error) when text was already streamed out.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hookbox::providers::http::{Api, HttpProvider};
use hookbox::sandbox::HookChain;
use hookbox::{Agent, AgentConfig, ModelConfig, RunErrorInfo, RunHandle, StreamEvent};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Reads one request (head and Content-Length body).
async fn read_request(socket: &mut tokio::net::TcpStream) -> bool {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let Ok(n) = socket.read(&mut buf).await else { return false };
        if n == 0 {
            return false;
        }
        request.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&request).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0usize);
            if request.len() >= end + 4 + length {
                return true;
            }
        }
    }
}

/// A loopback Chat Completions server streaming "Hello": the first
/// connection gets the first chunk, then nothing; later ones the whole stream.
async fn stalling_server() -> (String, Arc<AtomicUsize>) {
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"object": "chat.completion.chunk", "model": "gpt-4o", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let first = chunk(json!({"role": "assistant", "content": "Hel"}), Value::Null);
    let rest = chunk(json!({"content": "lo"}), json!("stop")) + "data: [DONE]\n\n";
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let count = Arc::new(AtomicUsize::new(0));
    let counter = count.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            let (first, rest) = (first.clone(), rest.clone());
            tokio::spawn(async move {
                if !read_request(&mut socket).await {
                    return;
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() || socket.write_all(first.as_bytes()).await.is_err()
                {
                    return;
                }
                let _ = socket.flush().await;
                if n == 1 {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    return;
                }
                let _ = socket.write_all(rest.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (format!("http://{addr}/v1"), count)
}

/// An agent on the server with `[model] read_timeout_ms = 300`.
fn agent(url: &str) -> Agent {
    let model = ModelConfig { read_timeout_ms: 300 };
    let options = hookbox::providers::http::HttpOptions { api_key: Some("k".into()), ..model.http_options(Some(url)) };
    let provider = HttpProvider::with_env(Api::OpenAi, "gpt-4o", options, &|_| None).expect("provider");
    Agent::new(Arc::new(provider), Vec::new(), AgentConfig::default())
}

#[tokio::test]
async fn a_stall_after_the_first_bytes_is_retried_when_nothing_reached_the_embedder() {
    let (url, connections) = stalling_server().await;
    let started = Instant::now();
    let r = agent(&url).run("hi", &mut HookChain::default()).await.expect("the retry succeeds");
    assert_eq!(r.final_answer.as_deref(), Some("Hello"));
    assert_eq!((r.requests, connections.load(Ordering::SeqCst)), (2, 2), "one stall, one retry");
    assert!(started.elapsed() < Duration::from_secs(20), "the configured timeout, not 300 s");
}

#[tokio::test]
async fn a_stall_after_text_was_streamed_out_ends_the_run_with_a_provider_error() {
    let (url, connections) = stalling_server().await;
    let mut rx = Arc::new(agent(&url)).stream("hi".into(), HookChain::default(), RunHandle::new());
    let mut text = String::new();
    let mut error = None;
    let complete = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(e) = rx.recv().await {
            match e {
                StreamEvent::TextDelta { text: t } => text.push_str(&t),
                StreamEvent::Complete { result, .. } => error = result.error.clone(),
                _ => {}
            }
        }
    })
    .await;
    assert!(complete.is_ok(), "the stream ends");
    assert_eq!(text, "Hel", "the streamed text is not repeated by a retry");
    match error {
        Some(RunErrorInfo::Provider { message }) => assert!(message.contains("stalled"), "{message}"),
        other => panic!("expected a provider error, got {other:?}"),
    }
    assert_eq!(connections.load(Ordering::SeqCst), 1, "not retried");
}
