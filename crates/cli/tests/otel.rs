//! The optional OpenTelemetry exporter (feature `otel`; `scripts/test.sh`
//! runs `cargo test -p hookbox-cli --features otel --test otel`): `hookbox
//! serve` with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a loopback
//! collector exports its request spans as OTLP/HTTP protobuf to
//! `ENDPOINT/v1/traces`, and flushes them when it stops on SIGTERM.

#![cfg(feature = "otel")]
#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the collector received: (request line, body).
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A minimal OTLP/HTTP collector: answers 200 to every request and keeps it.
fn collector() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = format!("http://{}", listener.local_addr().expect("addr"));
    let received: Received = Arc::default();
    let keep = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let keep = keep.clone();
            std::thread::spawn(move || serve(stream, &keep));
        }
    });
    (addr, received)
}

fn serve(stream: TcpStream, keep: &Received) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    // Keep-alive: requests one after another, each with a Content-Length body.
    for _ in 0..1000 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length.min(16 << 20)];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        keep.lock().expect("lock").push((line.trim_end().to_string(), body));
        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// One HTTP/1.1 request on a fresh connection; returns the status line.
fn request(addr: &str, head: &str, body: &str) -> String {
    let Ok(mut s) = TcpStream::connect(addr) else { return String::new() };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let req = format!("{head}\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).expect("write");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines().next().unwrap_or("").to_string()
}

/// Kills the server if the test fails before it stops it.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_exports_its_spans_to_an_otlp_collector_and_flushes_them_at_shutdown() {
    let (endpoint, received) = collector();
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("port");
    let addr = format!("127.0.0.1:{port}");
    let data = tempfile::tempdir().expect("tempdir");
    let operator = format!("hbo_{}", "ab".repeat(32));
    let mut guard = Kill(
        Command::new(env!("CARGO_BIN_EXE_hookbox"))
            .args(["serve", "--listen", &addr, "--data-dir"])
            .arg(data.path())
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .env("HOOKBOX_OPERATOR_KEY", &operator)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start hookbox serve"),
    );
    let child = &mut guard.0;
    let started = Instant::now();
    while !request(&addr, "GET /healthz HTTP/1.1", "").contains("200") {
        assert!(started.elapsed() < Duration::from_secs(30), "the server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let made = request(
        &addr,
        &format!(
            "POST /v1/admin/tenants HTTP/1.1\r\nAuthorization: Bearer {operator}\r\nContent-Type: application/json"
        ),
        r#"{"name": "traced"}"#,
    );
    assert!(made.contains("201"), "{made}");
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let started = Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("the server did not stop within 30 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let got = received.lock().expect("lock").clone();
    let traces: Vec<&(String, Vec<u8>)> = got.iter().filter(|(line, _)| line.starts_with("POST /v1/traces ")).collect();
    assert!(
        !traces.is_empty(),
        "nothing exported; the collector got {:?}; stderr: {stderr}",
        got.iter().map(|g| &g.0).collect::<Vec<_>>()
    );
    let all: Vec<u8> = traces.iter().flat_map(|(_, body)| body.iter().copied()).collect();
    let has = |needle: &str| all.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(has("hookbox"), "no service name in the export");
    assert!(has("request"), "no request span");
    assert!(has("/v1/admin/tenants"), "the request span has no route");
    assert!(!has(&operator), "the operator key was exported");
}
