//! The real Claude Code CLI (npm `@anthropic-ai/claude-code`, pinned by
//! `scripts/install-agents.sh`), headless (`claude -p`) and fully offline
//! against a loopback fake Anthropic Messages API (`ANTHROPIC_BASE_URL`,
//! src/fake_anthropic.rs), uses Hookbox as its hooks:
//!
//! - as `"type": "http"` hooks posting to `hookbox serve`'s
//!   `POST /v1/claude-code?plugins=NAME` with `Authorization: Bearer
//!   $HOOKBOX_KEY` (interpolated by Claude Code through `allowedEnvVars`);
//! - as command hooks running `hookbox hook --format claude-code --config
//!   hookbox.toml` (and one case through `--url`).
//!
//! Each transport runs the same cases: (a) deny-tools denies a Bash `rm
//! protected.txt` and a Write to `.env` (the file survives / is never made,
//! the model's next request carries the deny reason as an error
//! tool_result) while an unrelated Bash call runs; (b) a `replace-arguments`
//! rewrite of a Bash command is what runs; (c) a `replace-result` at
//! `tool-call-result` is the tool output the model gets; (d) a trapping
//! plugin configured fail-closed blocks the tool.
//!
//! Skipped, with the reason printed, when Claude Code is not installed in
//! target/agents/ (run scripts/install-agents.sh); with
//! `HOOKBOX_REQUIRE_AGENTS=1` a missing Claude Code is a failure instead.
//! The claude processes run one at a time (each is a 400 MB binary), each
//! bounded by a timeout and killed if the test ends first.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hookbox_tests::fake_anthropic::{FakeAnthropic, Turn, all_texts, tool_result};
use hookbox_tests::server::TestServer;
use hookbox_tests::{DENY_TOOLS, SCRIPTED, TRAP_ON_TOOL, repo_root};
use serde_json::{Value, json};

/// The longest one `claude -p` may take (a run takes 2 to 10 s).
const CLAUDE_TIMEOUT: Duration = Duration::from_secs(180);

/// One claude process at a time, across this file's tests.
static ONE_CLAUDE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The installed `claude`, or `None` (the test skips) when it is missing.
fn claude_bin() -> Option<PathBuf> {
    let bin = repo_root().join("target/agents/node/node_modules/.bin/claude");
    if bin.is_file() {
        return Some(bin);
    }
    let required = std::env::var("HOOKBOX_REQUIRE_AGENTS").is_ok_and(|v| !v.is_empty() && v != "0");
    assert!(!required, "{} is missing and HOOKBOX_REQUIRE_AGENTS is set: run scripts/install-agents.sh", bin.display());
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "SKIPPED: Claude Code is not installed ({} is missing; run scripts/install-agents.sh; \
             HOOKBOX_REQUIRE_AGENTS=1 makes this a failure)\n",
            bin.display()
        )
        .as_bytes(),
    );
    None
}

/// A Hookbox plugin as both transports configure it.
struct Plugin {
    name: &'static str,
    path: &'static str,
    config: Value,
    fail: Option<&'static str>,
}

fn deny() -> Plugin {
    Plugin { name: "deny", path: DENY_TOOLS, config: json!({"paths": ["protected.txt", ".env"]}), fail: Some("closed") }
}

fn rewrite() -> Plugin {
    let args = json!({"command": "echo rewritten > out.txt"});
    Plugin {
        name: "rewrite",
        path: SCRIPTED,
        config: json!({"before-tool-call": format!("replace-arguments:{args}"), "only_tool": "Bash"}),
        fail: None,
    }
}

fn replace() -> Plugin {
    Plugin {
        name: "replace",
        path: SCRIPTED,
        config: json!({"tool-call-result": "replace-result:REPLACED-BY-HOOKBOX", "only_tool": "Bash"}),
        fail: None,
    }
}

fn trap() -> Plugin {
    Plugin { name: "trap", path: TRAP_ON_TOOL, config: json!({}), fail: Some("closed") }
}

/// How Claude Code reaches Hookbox.
enum Transport {
    /// http hooks to `hookbox serve` at `base`, the tenant key in `key`.
    Http { base: String, key: String },
    /// Command hooks `hookbox hook --config`: each case writes its hookbox.toml.
    Config { bin: PathBuf },
    /// Command hooks `hookbox hook --url base` with the key in HOOKBOX_API_KEY.
    Url { bin: PathBuf, base: String, key: String },
}

/// The Claude Code events wired to Hookbox (the four it maps onto Hookbox events).
const EVENTS: [&str; 4] = ["UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"];

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A TOML basic string (JSON's string escapes are TOML's).
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("string")
}

/// Writes `dir/hookbox.toml` with `plugin`; returns its path.
fn hookbox_toml(dir: &Path, plugin: &Plugin) -> PathBuf {
    let mut text = format!("[[plugins]]\nname = {}\npath = {}\n", toml_str(plugin.name), toml_str(plugin.path));
    if let Some(fail) = plugin.fail {
        text.push_str(&format!("fail = {}\n", toml_str(fail)));
    }
    text.push_str("[plugins.config]\n");
    for (key, value) in plugin.config.as_object().expect("config object") {
        let value = match value {
            Value::String(s) => toml_str(s),
            other => other.to_string(),
        };
        text.push_str(&format!("{} = {value}\n", toml_str(key)));
    }
    let path = dir.join("hookbox.toml");
    std::fs::write(&path, text).expect("write hookbox.toml");
    path
}

/// The `--settings` file wiring [`EVENTS`] to Hookbox with `plugin`.
fn settings(transport: &Transport, plugin: &Plugin, dir: &Path) -> PathBuf {
    let hook = match transport {
        Transport::Http { base, .. } => json!({
            "type": "http",
            "url": format!("{base}/v1/claude-code?plugins={}", plugin.name),
            "headers": {"Authorization": "Bearer $HOOKBOX_KEY"},
            "allowedEnvVars": ["HOOKBOX_KEY"],
            "timeout": 60,
        }),
        Transport::Config { bin } => {
            let toml = hookbox_toml(dir, plugin);
            let command = format!(
                "{} hook --format claude-code --config {} --db {}",
                sh_quote(&bin.display().to_string()),
                sh_quote(&toml.display().to_string()),
                sh_quote(&dir.join("hook-state.db").display().to_string()),
            );
            json!({"type": "command", "command": command, "timeout": 60})
        }
        Transport::Url { bin, base, .. } => {
            let command = format!(
                "{} hook --format claude-code --url {} --plugins {}",
                sh_quote(&bin.display().to_string()),
                sh_quote(base),
                plugin.name
            );
            json!({"type": "command", "command": command, "timeout": 60})
        }
    };
    let hooks: serde_json::Map<String, Value> =
        EVENTS.iter().map(|e| (e.to_string(), json!([{"matcher": "*", "hooks": [hook.clone()]}]))).collect();
    let path = dir.join("settings.json");
    std::fs::write(&path, json!({"hooks": hooks}).to_string()).expect("write settings");
    path
}

/// A claude process, killed if it is still running when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// What one `claude -p` left behind.
struct Outcome {
    /// `--output-format json`'s object.
    result: Value,
    /// The workspace it ran in.
    ws: PathBuf,
    /// Hook lines of its debug log, for failure messages.
    debug: String,
}

/// One case's temporary folders: `ws` (the workspace, with protected.txt) and `home`.
struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Case {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("ws")).expect("ws");
        std::fs::create_dir_all(dir.path().join("home")).expect("home");
        std::fs::create_dir_all(dir.path().join("tmp")).expect("tmp");
        std::fs::write(dir.path().join("ws/protected.txt"), "keep me\n").expect("protected.txt");
        Case { dir }
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    /// Runs `claude -p PROMPT` in the workspace against `api`, hooks from `settings`.
    async fn claude(&self, bin: &Path, transport: &Transport, api: &FakeAnthropic, settings: &Path) -> Outcome {
        let _one = ONE_CLAUDE.lock().await;
        let d = self.dir.path();
        let (stdout, stderr, debug) = (d.join("claude.out"), d.join("claude.err"), d.join("claude-debug.log"));
        let mut cmd = Command::new(bin);
        cmd.current_dir(self.ws())
            .args(["-p", "Do the task.", "--output-format", "json", "--allowedTools", "Bash", "Write"])
            .arg("--settings")
            .arg(settings)
            .arg("--debug-file")
            .arg(&debug)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", d.join("home"))
            .env("TMPDIR", d.join("tmp"))
            .env("ANTHROPIC_BASE_URL", &api.base)
            .env("ANTHROPIC_API_KEY", "sk-ant-fake-offline")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("HOOKBOX_CACHE_DIR", d.join("cache"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).expect("stdout file"))
            .stderr(std::fs::File::create(&stderr).expect("stderr file"));
        match transport {
            Transport::Http { key, .. } => {
                cmd.env("HOOKBOX_KEY", key);
            }
            Transport::Url { key, .. } => {
                cmd.env("HOOKBOX_API_KEY", key);
            }
            Transport::Config { .. } => {}
        }
        let mut child = Running(cmd.spawn().expect("claude starts"));
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.0.try_wait().expect("wait") {
                break status;
            }
            assert!(started.elapsed() < CLAUDE_TIMEOUT, "claude ran longer than {CLAUDE_TIMEOUT:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let out = std::fs::read_to_string(&stdout).unwrap_or_default();
        let err = std::fs::read_to_string(&stderr).unwrap_or_default();
        let debug: String = std::fs::read_to_string(&debug)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("Hook") || l.contains("ERROR"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(status.success(), "claude failed ({status}):\nstdout: {out}\nstderr: {err}\nhooks:\n{debug}");
        let result: Value = serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("claude's stdout is not JSON ({e}): {out}\nstderr: {err}"));
        Outcome { result, ws: self.ws(), debug }
    }
}

/// (a) deny-tools: `rm protected.txt` and a Write to `.env` are denied, with
/// the reason in the tool_result the model gets next; an unrelated command runs.
async fn case_deny(bin: &Path, t: &Transport) {
    let case = Case::new();
    let settings = settings(t, &deny(), case.dir.path());
    let env_path = case.ws().join(".env");
    let api = FakeAnthropic::start(vec![
        Turn::tool("Bash", json!({"command": "rm protected.txt", "description": "Remove the file"})),
        Turn::tool("Write", json!({"file_path": env_path.display().to_string(), "content": "API_KEY=leaked\n"})),
        Turn::tool("Bash", json!({"command": "echo fine > allowed.txt", "description": "Write a file"})),
        Turn::text("All done."),
    ])
    .await;
    let o = case.claude(bin, t, &api, &settings).await;
    let ctx = format!("result: {}\nhooks:\n{}", o.result, o.debug);
    assert_eq!(std::fs::read_to_string(o.ws.join("protected.txt")).ok().as_deref(), Some("keep me\n"), "{ctx}");
    assert!(!env_path.exists(), ".env was written: {ctx}");
    assert_eq!(std::fs::read_to_string(o.ws.join("allowed.txt")).ok().as_deref(), Some("fine\n"), "{ctx}");
    let requests = api.message_requests();
    assert_eq!(requests.len(), 4, "{ctx}");
    let (text, is_error) = tool_result(&requests[1], "toolu_00_0").expect("the rm's tool_result");
    assert!(is_error, "{text}");
    assert!(text.contains("deny-tools") && text.contains("protected.txt"), "the model got: {text}");
    let (text, is_error) = tool_result(&requests[2], "toolu_01_0").expect("the Write's tool_result");
    assert!(is_error, "{text}");
    assert!(text.contains("deny-tools") && text.contains(".env"), "the model got: {text}");
    let (text, is_error) = tool_result(&requests[3], "toolu_02_0").expect("the echo's tool_result");
    assert!(!is_error, "the allowed command failed: {text}\n{ctx}");
    let denied: Vec<&str> = o.result["permission_denials"]
        .as_array()
        .map(|a| a.iter().filter_map(|d| d["tool_name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(denied, ["Bash", "Write"], "{ctx}");
    assert_eq!(o.result["is_error"], false, "{ctx}");
    assert_eq!(o.result["result"], "All done.", "{ctx}");
}

/// (b) a `replace-arguments` rewrite of the Bash command is what runs.
async fn case_rewrite(bin: &Path, t: &Transport) {
    let case = Case::new();
    let settings = settings(t, &rewrite(), case.dir.path());
    let api = FakeAnthropic::start(vec![
        Turn::tool("Bash", json!({"command": "echo original > out.txt", "description": "Write a file"})),
        Turn::text("All done."),
    ])
    .await;
    let o = case.claude(bin, t, &api, &settings).await;
    let ctx = format!("result: {}\nhooks:\n{}", o.result, o.debug);
    assert_eq!(std::fs::read_to_string(o.ws.join("out.txt")).ok().as_deref(), Some("rewritten\n"), "{ctx}");
    let requests = api.message_requests();
    assert_eq!(requests.len(), 2, "{ctx}");
    let (text, is_error) = tool_result(&requests[1], "toolu_00_0").expect("the tool_result");
    assert!(!is_error, "{text}\n{ctx}");
}

/// (c) a `replace-result` at `tool-call-result` is the Bash output the model
/// gets, and the original output does not reach it.
async fn case_replace_result(bin: &Path, t: &Transport) {
    let case = Case::new();
    let settings = settings(t, &replace(), case.dir.path());
    let api = FakeAnthropic::start(vec![
        Turn::tool("Bash", json!({"command": "echo ORIGINAL-OUTPUT", "description": "Print"})),
        Turn::text("All done."),
    ])
    .await;
    let o = case.claude(bin, t, &api, &settings).await;
    let ctx = format!("result: {}\nhooks:\n{}", o.result, o.debug);
    let requests = api.message_requests();
    assert_eq!(requests.len(), 2, "{ctx}");
    let (text, _) = tool_result(&requests[1], "toolu_00_0").expect("the tool_result");
    let everything = all_texts(&requests[1]);
    assert!(
        everything.contains("REPLACED-BY-HOOKBOX"),
        "the replacement never reached the model:\n{everything}\n{ctx}"
    );
    assert_eq!(text, "REPLACED-BY-HOOKBOX", "the tool_result is not the hook's replacement\n{ctx}");
    assert!(!everything.contains("ORIGINAL-OUTPUT"), "the original output reached the model:\n{everything}\n{ctx}");
}

/// (d) a plugin that traps at `before-tool-call`, configured fail-closed, blocks the tool.
async fn case_trap(bin: &Path, t: &Transport) {
    let case = Case::new();
    let settings = settings(t, &trap(), case.dir.path());
    let api = FakeAnthropic::start(vec![
        Turn::tool("Bash", json!({"command": "echo x > trapped.txt", "description": "Write a file"})),
        Turn::text("All done."),
    ])
    .await;
    let o = case.claude(bin, t, &api, &settings).await;
    let ctx = format!("result: {}\nhooks:\n{}", o.result, o.debug);
    assert!(!o.ws.join("trapped.txt").exists(), "the tool ran past a failed fail-closed guard: {ctx}");
    let requests = api.message_requests();
    assert_eq!(requests.len(), 2, "{ctx}");
    let (text, is_error) = tool_result(&requests[1], "toolu_00_0").expect("the tool_result");
    assert!(is_error, "{text}\n{ctx}");
    assert!(text.contains("fail-closed"), "the model got: {text}\n{ctx}");
}

/// `hookbox serve` with one tenant that has every plugin of the cases installed.
async fn server_with_plugins() -> (TestServer, String) {
    let s = TestServer::start("").await;
    let key = s.tenant("claude-code").await;
    for p in [deny(), rewrite(), replace(), trap()] {
        let mut manifest = json!({"config": p.config});
        if let Some(fail) = p.fail {
            manifest["fail"] = json!(fail);
        }
        s.install(&key, p.name, p.path, manifest).await;
    }
    (s, key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_http_hooks_to_hookbox_serve() {
    let Some(bin) = claude_bin() else { return };
    let (s, key) = server_with_plugins().await;
    let t = Transport::Http { base: s.base.clone(), key };
    case_deny(&bin, &t).await;
    case_rewrite(&bin, &t).await;
    case_trap(&bin, &t).await;
    case_replace_result(&bin, &t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_command_hooks_hookbox_hook_config() {
    let Some(bin) = claude_bin() else { return };
    let t = Transport::Config { bin: PathBuf::from(env!("CARGO_BIN_EXE_hookbox-under-test")) };
    case_deny(&bin, &t).await;
    case_rewrite(&bin, &t).await;
    case_trap(&bin, &t).await;
    case_replace_result(&bin, &t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_command_hooks_hookbox_hook_url() {
    let Some(bin) = claude_bin() else { return };
    let (s, key) = server_with_plugins().await;
    let t = Transport::Url { bin: PathBuf::from(env!("CARGO_BIN_EXE_hookbox-under-test")), base: s.base.clone(), key };
    case_deny(&bin, &t).await;
    case_trap(&bin, &t).await;
}
