//! `hookbox serve` at the HTTP level (issue 15, items 1 and 10): bad
//! bodies get a clear 4xx in the error shape, slow clients are cut off,
//! one key cannot hold unbounded requests, every answer says how long an
//! idle connection stays open, clients that go away while
//! their evaluate call waits cost the fair gate no slot, and
//! `/openapi.json` describes every route the server answers.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use hookbox_tests::server::TestServer;
use serde_json::{Value, json};

/// Sends raw bytes on a fresh connection and reads what comes back until
/// the server closes it or `within` passes.
fn raw(addr: &str, bytes: &[u8], within: Duration) -> (String, Duration) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect: {e}"));
    stream.set_read_timeout(Some(within)).unwrap_or_else(|e| panic!("{e}"));
    stream.write_all(bytes).unwrap_or_else(|e| panic!("write: {e}"));
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    (String::from_utf8_lossy(&out).into_owned(), started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_get_a_clear_4xx_in_the_error_shape() {
    let mut s = TestServer::start("[http]\nmax_json_bytes = 4096").await;
    let a = s.tenant("acme").await;
    let post_raw = |body: String, content_type: Option<&'static str>| {
        let mut req = s.http.post(format!("{}/v1/admin/tenants", s.base)).bearer_auth(&s.operator).body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        req
    };
    let cases: Vec<(String, Option<&'static str>, u16)> = vec![
        ("{\"name\": ".into(), Some("application/json"), 400),
        ("{\"name\": 7}".into(), Some("application/json"), 400),
        ("{\"name\": \"x\", \"admin\": true}".into(), Some("application/json"), 400),
        ("[]".into(), Some("application/json"), 400),
        (format!("{{\"name\": \"{}\"}}", "a".repeat(8000)), Some("application/json"), 413),
        ("{\"name\": \"x\"}".into(), None, 415),
        ("{\"name\": \"Bad Name\"}".into(), Some("application/json"), 400),
    ];
    for (body, ct, status) in cases {
        let resp = post_raw(body.clone(), ct).send().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(resp.status().as_u16(), status, "{}", &body[..body.len().min(60)]);
        let v: Value = serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or(Value::Null);
        assert!(v["error"].is_string() && v["message"].is_string(), "not the error shape: {v}");
    }
    // Nothing was stored: the only tenant is acme.
    let tenants = s.get("/v1/admin/tenants", &s.operator.clone()).await.json;
    assert_eq!(tenants.as_array().map(Vec::len), Some(1), "{tenants}");
    // Unknown routes and methods.
    assert_eq!(s.get("/v1/nothing", &a).await.status, 404);
    // Every error is the JSON error shape, the framework's own rejections too.
    for (method, path, status) in [
        ("DELETE", "/v1/runs", 405),
        ("GET", "/v1/plugins/x/versions/notanumber", 400),
        ("GET", "/v1/plugins/x/versions/1%00", 400),
    ] {
        let r = s.call(method, path, Some(&a), None).await;
        assert_eq!(r.status, status, "{method} {path}");
        assert!(r.json["error"].is_string() && r.json["message"].is_string(), "{method} {path}: {:?}", r.json);
        assert!(!r.json.to_string().contains("\\u0000"), "a NUL came back: {:?}", r.json);
        if status == 405 {
            assert_eq!(r.json["error"], "method_not_allowed");
        }
    }
    let resp = s
        .http
        .post(format!("{}/v1/plugins/x/versions", s.base))
        .bearer_auth(&a)
        .header("content-type", "multipart/form-data")
        .body("x")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resp.status().as_u16(), 400);
    let v: Value = serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or(Value::Null);
    assert!(v["error"].is_string(), "{v}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_one_key_cannot_hold_unbounded_requests() {
    let extra = "[http]\nheader_timeout_ms = 300\nrequest_timeout_ms = 500\nmax_requests_per_tenant = 2";
    let mut s = TestServer::start(extra).await;
    let a = s.tenant("acme").await;
    let addr = s.base.trim_start_matches("http://").to_string();
    // Headers that never end: the connection is closed after the header timeout.
    let a2 = addr.clone();
    let (_, took) =
        tokio::task::spawn_blocking(move || raw(&a2, b"GET /healthz HTTP/1.1\r\nHost: x\r\n", Duration::from_secs(10)))
            .await
            .unwrap_or_default();
    assert!(took < Duration::from_secs(5), "a stalled header was kept {took:?}");
    // A body that never comes: 408 after the request timeout.
    let head = format!(
        "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {a}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"session"
    );
    let a2 = addr.clone();
    let (reply, took) = tokio::task::spawn_blocking(move || raw(&a2, head.as_bytes(), Duration::from_secs(10)))
        .await
        .unwrap_or_default();
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    // Two slow requests of one key are in flight: a third is 429; another key is served.
    let stalled: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut c = TcpStream::connect(&addr).unwrap_or_else(|e| panic!("{e}"));
            let head = format!(
                "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {a}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
            );
            c.write_all(head.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
            c
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = s.get("/v1/usage", &a).await;
    assert_eq!(r.status, 429, "{:?}", r.json);
    assert_eq!(r.json["error"], "too_many_requests");
    // The limit is the tenant's, not the key's: a fresh key of the same tenant waits too.
    let other = s.tenant("other").await;
    assert_eq!(s.get("/v1/usage", &other).await.status, 200, "another tenant is served");
    assert_eq!(s.get("/v1/admin/tenants", &s.operator.clone()).await.status, 200);
    drop(stalled);
    let mut status = 0;
    for _ in 0..100 {
        status = s.get("/v1/usage", &a).await.status;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, 200, "the key's slots were not given back");
    // A body that trickles in a byte at a time is cut at the request deadline (500 ms), not kept open.
    let head = format!(
        "POST /v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {a}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{"
    );
    let a2 = addr.clone();
    let (reply, took) = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut c = TcpStream::connect(&a2).unwrap_or_else(|e| panic!("{e}"));
        c.set_read_timeout(Some(Duration::from_millis(100))).unwrap_or_else(|e| panic!("{e}"));
        let _ = c.write_all(head.as_bytes());
        let mut out = Vec::new();
        let mut buf = [0u8; 1024];
        while started.elapsed() < Duration::from_secs(10) {
            let _ = c.write_all(b" ");
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
            if !out.is_empty() {
                break;
            }
        }
        (String::from_utf8_lossy(&out).into_owned(), started.elapsed())
    })
    .await
    .unwrap_or_default();
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(took < Duration::from_secs(5), "a trickling body was kept {took:?}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_describes_every_route_and_the_console_is_served() {
    let mut s = TestServer::start("").await;
    let health = s.http.get(format!("{}/healthz", s.base)).send().await.ok();
    assert_eq!(health.map(|r| r.status().as_u16()), Some(200));
    let ready = s.get("/readyz", "").await;
    assert_eq!((ready.status, ready.json["status"].clone()), (200, serde_json::json!("ready")), "{:?}", ready.json);
    let doc: Value = match s.http.get(format!("{}/openapi.json", s.base)).send().await {
        Ok(r) => serde_json::from_str(&r.text().await.unwrap_or_default()).unwrap_or(Value::Null),
        Err(e) => panic!("{e}"),
    };
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")), "{}", doc["openapi"]);
    let routes: &[(&str, &[&str])] = &[
        ("/", &["get"]),
        ("/healthz", &["get"]),
        ("/readyz", &["get"]),
        ("/openapi.json", &["get"]),
        ("/metrics", &["get"]),
        ("/v1/admin/tenants", &["get", "post"]),
        ("/v1/admin/tenants/{name}/quotas", &["put"]),
        ("/v1/keys", &["get", "post"]),
        ("/v1/keys/{id}", &["delete"]),
        ("/v1/usage", &["get"]),
        ("/v1/plugins", &["get"]),
        ("/v1/plugins/{name}/versions", &["post"]),
        ("/v1/plugins/{name}/versions/{version}", &["get"]),
        ("/v1/plugins/{name}/versions/{version}/approve", &["post"]),
        ("/v1/plugins/{name}/versions/{version}/activate", &["post"]),
        ("/v1/plugins/{name}/versions/{version}/shadow", &["post"]),
        ("/v1/plugins/{name}/shadow", &["get", "delete"]),
        ("/v1/runs", &["get", "post"]),
        ("/v1/runs/{id}", &["get"]),
        ("/v1/runs/{id}/events", &["get"]),
        ("/v1/runs/{id}/pause", &["post"]),
        ("/v1/runs/{id}/resume", &["post"]),
        ("/v1/runs/{id}/abort", &["post"]),
        ("/v1/runs/{id}/inject", &["post"]),
        ("/v1/approvals", &["get"]),
        ("/v1/approvals/{id}", &["post"]),
        ("/v1/evaluate", &["post"]),
        ("/v1/hooks/{format}", &["post"]),
        ("/v1/claude-code", &["post"]),
    ];
    let paths = doc["paths"].as_object().cloned().unwrap_or_default();
    assert_eq!(paths.len(), routes.len(), "documented: {:?}", paths.keys().collect::<Vec<_>>());
    for (path, methods) in routes {
        for m in *methods {
            assert!(paths.get(*path).and_then(|p| p.get(*m)).is_some(), "{m} {path} is not documented");
        }
    }
    assert!(doc["components"]["schemas"]["EvaluateRequest"].is_object());
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
    // The console: HTML with a content security policy.
    let resp = s.http.get(format!("{}/", s.base)).send().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resp.status().as_u16(), 200);
    let csp = resp.headers().get("content-security-policy").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    let page = resp.text().await.unwrap_or_default();
    assert!(page.contains("<html") && page.contains("/v1/approvals"), "not the console");
    let _ = json!({});
    s.shutdown().await;
}

/// Clients that go away while their evaluate call waits for a slot of the
/// fair gate (a load generator stopping with requests in flight, a hostile
/// client) cost it no slot: with one slot, a lost one left every later
/// evaluate call waiting until its 408.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_gone_while_their_evaluate_waits_cost_the_gate_no_slot() {
    let extra = "evaluate_slots = 1\n[http]\nmax_requests_per_tenant = 4096\nrequest_timeout_ms = 3000";
    let mut s = TestServer::start(extra).await;
    let a = s.tenant("acme").await;
    s.install(&a, "deny-tools", hookbox_tests::DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let addr = s.base.trim_start_matches("http://").to_string();
    let body = json!({"session_id": "s", "plugins": ["deny-tools"],
        "event": {"type": "iteration-start", "iteration": 1, "loop_counter": 1}})
    .to_string();
    let request = format!(
        "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {a}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    // Four threads, each 150 rounds of 16 connections that send a request and
    // close at once, some right away and some after a few hundred µs: many
    // close just as the slot is handed to their call.
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (addr, request) = (addr.clone(), request.clone());
            std::thread::spawn(move || {
                for round in 0..150u64 {
                    let conns: Vec<TcpStream> = (0..16)
                        .filter_map(|_| {
                            let mut c = TcpStream::connect(&addr).ok()?;
                            c.write_all(request.as_bytes()).ok()?;
                            Some(c)
                        })
                        .collect();
                    std::thread::sleep(Duration::from_micros((round * 37 + t * 101) % 900));
                    drop(conns);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap_or_else(|_| panic!("a client thread panicked"));
    }
    // Every later call is answered (well within the request timeout of 3 s).
    for i in 0..5 {
        let started = Instant::now();
        let r = s.post("/v1/evaluate", &a, serde_json::from_str(&body).unwrap_or_default()).await;
        assert_eq!(r.status, 200, "call {i} after the clients left: {:?}", r.json);
        assert!(started.elapsed() < Duration::from_secs(2), "call {i} waited {:?}", started.elapsed());
    }
    s.shutdown().await;
}

// An idle keep-alive connection is closed after `header_timeout_ms` (hyper
// times the wait for the next request from the last answer), and every
// answer says so in `Keep-Alive`, so a pooled client can drop it first: one
// that sent on it as it closed got a reset (server_postgres's spread test
// did, with a 90 s reqwest pool).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_says_how_long_an_idle_connection_stays_open_and_it_does() {
    let mut s = TestServer::start("[http]\nheader_timeout_ms = 2000").await;
    let a = s.tenant("acme").await;
    for (path, key, status) in [("/healthz", None, 200), ("/v1/usage", Some(&a), 200), ("/v1/nothing", Some(&a), 404)] {
        let mut req = s.http.get(format!("{}{path}", s.base));
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.expect("request");
        assert_eq!(resp.status().as_u16(), status, "{path}");
        let hint = resp.headers().get("keep-alive").and_then(|v| v.to_str().ok()).map(str::to_string);
        assert_eq!(hint.as_deref(), Some("timeout=2"), "{path}");
    }
    // A connection left idle after an answer is closed about then, not kept.
    let addr = s.base.trim_start_matches("http://").to_string();
    let (reply, took) = tokio::task::spawn_blocking(move || {
        raw(&addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", Duration::from_secs(20))
    })
    .await
    .unwrap_or_default();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.to_ascii_lowercase().contains("keep-alive: timeout=2"), "{reply}");
    assert!(took >= Duration::from_millis(1500) && took < Duration::from_secs(15), "closed after {took:?}");
    // Under a second, no hint: it would say 0.
    s.shutdown().await;
    let mut s = TestServer::start("[http]\nheader_timeout_ms = 500").await;
    let resp = s.http.get(format!("{}/healthz", s.base)).send().await.expect("request");
    assert!(resp.headers().get("keep-alive").is_none(), "{:?}", resp.headers());
    s.shutdown().await;
}

/// A keep-alive connection: sends `request`, reads one response (headers
/// and a `Content-Length` body); returns its status line and when it came.
fn exchange(conn: &mut TcpStream, request: &str) -> (String, Instant) {
    conn.write_all(request.as_bytes()).unwrap_or_else(|e| panic!("write: {e}"));
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = conn.read(&mut buf).unwrap_or_else(|e| panic!("read: {e}"));
        assert!(n > 0, "closed before a response: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= len {
                return (head.lines().next().unwrap_or_default().to_string(), Instant::now());
            }
        }
    }
}

/// Read holds (crates/server/src/fair_io.rs), through hyper: while a
/// tenant's calls fill the gate's queue, its clients that hang up while
/// their calls wait are still noticed (their calls leave the queue and
/// never run), its request on a held keep-alive connection is answered,
/// and another tenant's requests are read at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_flood_still_notices_hang_ups_and_answers_its_held_requests() {
    // Two slots: one each while both tenants are active.
    let extra = "evaluate_slots = 2\n[http]\nheader_timeout_ms = 5000\nrequest_timeout_ms = 10000";
    let mut s = TestServer::start(extra).await;
    let (a, b) = (s.tenant("acme").await, s.tenant("other").await);
    // Each before-tool-call of the sleeper holds its slot for its 400 ms deadline.
    let sleeper = json!({"config": {"mode": "sleep"}, "limits": {"deadline_ms": 400}});
    s.install(&a, "sleeper", hookbox_tests::ADVERSARY, sleeper).await;
    s.install(&b, "deny-tools", hookbox_tests::DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let addr = s.base.trim_start_matches("http://").to_string();
    let request = |key: &str, plugin: &str, event: Value| {
        let body = json!({"session_id": "s", "plugins": [plugin], "event": event}).to_string();
        format!(
            "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let quick = |key: &str, plugin: &str| {
        request(key, plugin, json!({"type": "iteration-start", "iteration": 1, "loop_counter": 1}))
    };
    let slow = request(
        &a,
        "sleeper",
        json!({"type": "before-tool-call", "iteration": 1, "call": {"id": "c1", "name": "list_files", "arguments": "{}"}}),
    );
    let connect = || {
        let c = TcpStream::connect(&addr).unwrap_or_else(|e| panic!("connect: {e}"));
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap_or_else(|e| panic!("{e}"));
        c
    };
    // B is active (each tenant's share is one slot); four keep-alive
    // connections of A, each known to be A's by a first quick request.
    let mut other = connect();
    assert!(exchange(&mut other, &quick(&b, "deny-tools")).0.contains("200"));
    let mut conns: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut c = connect();
            let (status, _) = exchange(&mut c, &quick(&a, "sleeper"));
            assert!(status.contains("200"), "{status}");
            c
        })
        .collect();
    // One slow call of A runs, two wait (A's queue is full), and a fourth
    // request, on a connection between requests, is held.
    let started = Instant::now();
    conns[0].write_all(slow.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(Duration::from_millis(50));
    for c in &mut conns[1..3] {
        c.write_all(slow.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    }
    std::thread::sleep(Duration::from_millis(50));
    conns[3].write_all(slow.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    // B's requests are read and answered at once, on its known connection and a fresh one.
    for c in [&mut other, &mut connect()] {
        let sent = Instant::now();
        let (status, at) = exchange(c, &quick(&b, "deny-tools"));
        assert!(status.contains("200"), "{status}");
        assert!(at - sent < Duration::from_millis(300), "tenant B waited {:?} behind A's queue", at - sent);
    }
    // The two waiting clients hang up.
    drop(conns.remove(2));
    drop(conns.remove(1));
    // The held request is answered, after the running call and its own
    // (each ends at its deadline, about 0.5 s with the epoch's tick): about
    // 1 s; had the calls whose clients hung up run too, 2 s.
    let (status, at) = exchange(&mut conns[1], "");
    assert!(status.contains("200"), "the held request got no answer: {status}");
    let took = at - started;
    assert!(took < Duration::from_millis(1600), "answered after {took:?}: the calls whose clients hung up ran");
    s.shutdown().await;
}
