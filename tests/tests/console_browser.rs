//! The operator console (`GET /` of `hookbox serve`, docs/server.md) in a
//! real browser (issue 15): a tenant uploads and activates the `scripted`
//! plugin, which asks a person before `create_file`; the demo run waits for
//! that approval; headless Chromium opens the console, saves the tenant's
//! key, clicks the approval's Approve button and sees the run complete. The
//! run record (through the API) says the host approved it, and the page is
//! saved as `target/console-screenshot.png`.
//!
//! The browser is driven through chromedriver's W3C WebDriver HTTP protocol
//! with reqwest. Without `/usr/bin/chromedriver` and `/usr/bin/chromium`
//! (`scripts/install-browser.sh` installs both) the test prints why and
//! passes, unless `HOOKBOX_REQUIRE_BROWSER=1`. Every wait is bounded.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hookbox_tests::server::TestServer;
use hookbox_tests::{SCRIPTED, repo_root};
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The key of a WebDriver element reference (W3C WebDriver, "Elements").
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long the browser may take to show something (an approval, a status).
const UI_WAIT: Duration = Duration::from_secs(20);
/// How often a wait polls.
const POLL: Duration = Duration::from_millis(200);

/// An HTTP answer: status and body (JSON, or the text as a JSON string when it is not JSON).
async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.timeout(Duration::from_secs(30)).send().await.expect("the request is answered");
    let status = response.status().as_u16();
    let text = response.text().await.expect("the body is read");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// chromedriver and one browser session; dropping it ends the session and kills chromedriver.
struct Browser {
    http: reqwest::Client,
    /// `http://127.0.0.1:PORT`.
    base: String,
    /// `/session/ID`, once made.
    session: Option<String>,
    port: u16,
    driver: Child,
    log: PathBuf,
    /// The browser profile and chromedriver's log; removed after the processes end.
    _dir: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a headless Chromium session.
    async fn start() -> Browser {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let log = dir.path().join("chromedriver.log");
        let out = std::fs::File::create(&log).expect("chromedriver log");
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log handle"))
            .stderr(out)
            .spawn()
            .expect("chromedriver starts");
        let profile = dir.path().join("profile");
        let mut browser = Browser {
            http: reqwest::Client::new(),
            base: format!("http://127.0.0.1:{port}"),
            session: None,
            port,
            driver,
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + UI_WAIT;
        loop {
            let ready = browser.http.get(format!("{}/status", browser.base)).timeout(POLL * 5).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver answers /status within {UI_WAIT:?}{}", browser.log_tail());
            tokio::time::sleep(POLL).await;
        }
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
            "--window-size=1280,900",
        ];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let (status, body) = send(
            browser
                .http
                .post(format!("{}/session", browser.base))
                .header("content-type", "application/json")
                .body(capabilities.to_string()),
        )
        .await;
        let id = body["value"]["sessionId"].as_str().map(str::to_string);
        let id = id.unwrap_or_else(|| panic!("a WebDriver session: {status} {body}{}", browser.log_tail()));
        browser.session = Some(format!("/session/{id}"));
        // A 1280x900 viewport (the window's 900 pixels include the browser's own bars); best effort.
        let viewport = json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false});
        let cdp = json!({"cmd": "Emulation.setDeviceMetricsOverride", "params": viewport});
        if let Err(e) = browser.command(reqwest::Method::POST, "/goog/cdp/execute", Some(cdp)).await {
            eprintln!("the viewport stays the window's: {e}");
        }
        browser
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        format!("\nchromedriver's log ends:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
    }

    /// A WebDriver command on the session: its `value`, or `Err` with the WebDriver error.
    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<Value, String> {
        let session = self.session.as_deref().expect("a session");
        let mut request = self.http.request(method, format!("{}{session}{path}", self.base));
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_string());
        }
        let (status, mut body) = send(request).await;
        let value = body["value"].take();
        if status == 200 { Ok(value) } else { Err(format!("{path}: {status} {value}")) }
    }

    async fn must(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        self.command(method, path, body).await.unwrap_or_else(|e| panic!("WebDriver {e}"))
    }

    /// The element `css` matches now, or the WebDriver error (`no such element`, ...).
    async fn find(&self, css: &str) -> Result<String, String> {
        let found =
            self.command(reqwest::Method::POST, "/element", Some(json!({"using": "css selector", "value": css})));
        let value = found.await?;
        value[ELEMENT_KEY].as_str().map(str::to_string).ok_or_else(|| format!("not an element: {value}"))
    }

    /// Waits (at most `UI_WAIT`) for an element `css` matches.
    async fn wait_for(&self, css: &str) -> String {
        let deadline = Instant::now() + UI_WAIT;
        loop {
            let error = match self.find(css).await {
                Ok(element) => return element,
                Err(e) => e,
            };
            assert!(Instant::now() < deadline, "the console shows `{css}` within {UI_WAIT:?} (last: {error})");
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits (at most `UI_WAIT`) until the text of the element `css` matches is `want`; the
    /// element is looked up again at each poll, since the console may replace it.
    async fn wait_for_text(&self, css: &str, want: &str) {
        let deadline = Instant::now() + UI_WAIT;
        let mut last = String::new();
        loop {
            if let Ok(element) = self.find(css).await
                && let Ok(text) = self.command(reqwest::Method::GET, &format!("/element/{element}/text"), None).await
            {
                last = text.as_str().unwrap_or_default().to_string();
                if last == want {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "`{css}` reads `{want}` within {UI_WAIT:?} (last: `{last}`)");
            tokio::time::sleep(POLL).await;
        }
    }

    /// Clicks the element `css` matches, waiting for it first; retried while it is
    /// replaced between the look-up and the click (a stale element).
    async fn click(&self, css: &str) {
        let deadline = Instant::now() + UI_WAIT;
        loop {
            let element = self.wait_for(css).await;
            match self.command(reqwest::Method::POST, &format!("/element/{element}/click"), Some(json!({}))).await {
                Ok(_) => return,
                Err(e) => assert!(Instant::now() < deadline, "clicking `{css}`: {e}"),
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn type_into(&self, css: &str, text: &str) {
        let element = self.wait_for(css).await;
        self.must(reqwest::Method::POST, &format!("/element/{element}/value"), Some(json!({"text": text}))).await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // End the session (chromedriver quits Chromium), then kill chromedriver. Drop
        // cannot await: a plain blocking HTTP/1.1 request, bounded by socket timeouts.
        if let Some(session) = self.session.take()
            && let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port))
        {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
            let request = format!("DELETE {session} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
            if stream.write_all(request.as_bytes()).is_ok() {
                let _ = stream.read_to_end(&mut Vec::new());
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `s` inside a CSS string in double quotes.
fn css_string(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Standard base64 (RFC 4648, with padding) to bytes.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {:?}", c as char),
    };
    let digits: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, d)| n | (u32::from(*d) << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// Where the screenshot goes: `target/console-screenshot.png` (`$CARGO_TARGET_DIR` if set).
fn screenshot_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo_root().join("target"));
    let target = if target.is_relative() { repo_root().join(target) } else { target };
    target.join("console-screenshot.png")
}

/// True when the browser is there; otherwise prints why the test skips
/// (or fails, with `HOOKBOX_REQUIRE_BROWSER=1`).
fn browser_installed() -> bool {
    let missing: Vec<&str> = [CHROMEDRIVER, CHROMIUM].into_iter().filter(|p| !Path::new(p).exists()).collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!("{} missing: run scripts/install-browser.sh", missing.join(" and "));
    assert!(std::env::var("HOOKBOX_REQUIRE_BROWSER").as_deref() != Ok("1"), "HOOKBOX_REQUIRE_BROWSER=1 but {why}");
    eprintln!("skipping the console browser test: {why}");
    false
}

#[test]
fn base64_decodes_padded_and_unpadded_text() {
    assert_eq!(base64_decode("aG9va2JveA=="), b"hookbox");
    assert_eq!(base64_decode("aG9va2Jv"), b"hookbo");
    assert_eq!(base64_decode("aG9va2JveDo\n="), b"hookbox:");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_answers_an_approval_and_shows_the_run_complete() {
    if !browser_installed() {
        return;
    }
    // The server in-process (the demo session as the model `demo`), a tenant made with the
    // operator key, its plugin (asks a person before `create_file`) and the demo run.
    let mut server = TestServer::start("").await;
    let key = server.tenant("console").await;
    assert!(key.starts_with("hbk_"), "{key}");
    let manifest =
        json!({"config": {"before-tool-call": "ask-approval:{tool} needs a person", "only_tool": "create_file"}});
    server.install(&key, "scripted", SCRIPTED, manifest).await;
    let run_id = server.start_run(&key, json!({"plugins": ["scripted"]})).await;
    let approval = server.wait_approval(&key, &run_id).await;
    assert_eq!(approval["tool"], "create_file", "{approval}");
    let approval_id = approval["id"].as_str().expect("an approval id").to_string();

    // The console: save the key, approve, see the run complete.
    let browser = Browser::start().await;
    browser.must(reqwest::Method::POST, "/url", Some(json!({"url": format!("{}/", server.base)}))).await;
    browser.type_into("#key", &key).await;
    browser.click("#save-key").await;
    browser.click(&format!("[data-testid=\"approve-{}\"]", css_string(&approval_id))).await;
    let status = format!("[data-testid=\"run-status-{}\"]", css_string(&run_id));
    browser.wait_for_text(&status, "completed").await;
    browser.click(&format!("[data-testid=\"run-{}\"]", css_string(&run_id))).await;
    browser.wait_for("#detail .timeline li").await;
    let png = browser.must(reqwest::Method::GET, "/screenshot", None).await;
    let png = base64_decode(png.as_str().expect("a base64 PNG"));
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "the screenshot is a PNG");
    let path = screenshot_path();
    std::fs::create_dir_all(path.parent().expect("target dir")).expect("target dir");
    std::fs::write(&path, &png).expect("write the screenshot");
    eprintln!("console screenshot: {}", path.display());
    drop(browser);

    // The record: the console's click approved the call, as the host.
    let run = server.wait_run(&key, &run_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    let approvals = run["record"]["approvals"].as_array().expect("the record's approvals");
    assert_eq!(approvals.len(), 1, "{run}");
    assert_eq!(approvals[0]["id"], approval_id.as_str(), "{run}");
    assert_eq!(approvals[0]["tool"], "create_file", "{run}");
    assert_eq!(approvals[0]["answer"], json!({"answer": "approve"}), "{run}");
    assert_eq!(approvals[0]["answered_by"], "host", "{run}");
    let pending = server.get("/v1/approvals", &key).await;
    assert_eq!(pending.json, json!([]), "nothing waits any more");
    server.shutdown().await;
}
