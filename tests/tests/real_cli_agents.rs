//! Issue 16: the REAL Codex CLI and Gemini CLI, headless and offline, with
//! `hookbox hook --format codex|gemini --config hookbox.toml` as their
//! command hook (PreToolUse/PostToolUse, BeforeTool/AfterTool), each pointed
//! at a loopback fake model API (`tests/fakes/fake_model.py`, Python
//! standard library) that scripts one shell tool call and then the text
//! `done`, and records every request so the test sees what the model got.
//!
//! For each CLI: a denied `rm protected.txt` leaves the file and the model
//! gets deny-tools' reason; a rewrite of the arguments is what runs; a
//! replaced tool result is what the model gets (not the original output);
//! a trapping plugin configured fail-closed blocks the tool.
//!
//! The CLIs come from `scripts/install-agents.sh` (pinned versions, under
//! `target/agents/node`). When one is not installed (or python3 is
//! missing) its tests are skipped with the reason printed, unless
//! `HOOKBOX_REQUIRE_AGENTS=1` (CI), where that is a failure.
#![cfg(unix)]
#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hookbox_tests::{DENY_TOOLS, SCRIPTED, TRAP_ON_TOOL, repo_root};
use serde_json::{Value, json};

/// The longest one CLI run may take (it takes 2 to 10 s).
const RUN_TIMEOUT: Duration = Duration::from_secs(240);
/// The longest the fake model API may take to listen.
const FAKE_START_TIMEOUT: Duration = Duration::from_secs(30);
/// The hook's timeout in the CLIs' configs (the first load of a plugin compiles it).
const HOOK_TIMEOUT_SECS: u64 = 120;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Agent {
    Codex,
    Gemini,
}

impl Agent {
    /// The `--format` of `hookbox hook` and the fake API's name.
    fn name(self) -> &'static str {
        match self {
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
        }
    }

    /// The shell tool's name as the hook sees it.
    fn shell_tool(self) -> &'static str {
        match self {
            Agent::Codex => "Bash",
            Agent::Gemini => "run_shell_command",
        }
    }

    /// The installed CLI, or `None` (after printing why) when the test is skipped.
    fn binary(self) -> Option<PathBuf> {
        let bin = repo_root().join("target/agents/node/node_modules/.bin").join(self.name());
        let python = Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
        let missing = if !bin.is_file() {
            format!("{} is not installed ({} is missing: run scripts/install-agents.sh)", self.name(), bin.display())
        } else if !python {
            "python3 (the fake model API) is not on PATH".to_string()
        } else {
            return Some(bin);
        };
        assert!(
            std::env::var_os("HOOKBOX_REQUIRE_AGENTS").is_none_or(|v| v != "1"),
            "{missing}, and HOOKBOX_REQUIRE_AGENTS=1"
        );
        eprintln!("skipped: {missing} (HOOKBOX_REQUIRE_AGENTS=1 makes this a failure)");
        None
    }
}

/// A child process killed (with its process group) when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        kill_group(&mut self.0);
    }
}

fn kill_group(child: &mut Child) {
    // Each child leads its own process group (`process_group(0)`): the CLIs' tools and hooks die with it.
    let group = format!("-{}", child.id());
    let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
    let _ = child.kill();
    let _ = child.wait();
}

/// The fake model API (`tests/fakes/fake_model.py`): listening on a free loopback port.
struct FakeModel {
    port: u16,
    log: PathBuf,
    // Declared before the child: closing the pipe lets the server exit by itself.
    _stdin: ChildStdin,
    _child: Reaped,
}

impl FakeModel {
    fn start(agent: Agent, command: &str, log: &Path) -> FakeModel {
        let script = repo_root().join("tests/fakes/fake_model.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .args([agent.name(), command])
            .arg(log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .expect("start python3 tests/fakes/fake_model.py");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let child = Reaped(child);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(FAKE_START_TIMEOUT).expect("the fake model API did not start in time");
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the fake model API said {line:?}, not `PORT <n>`"));
        FakeModel { port, log: log.to_path_buf(), _stdin: stdin, _child: child }
    }

    /// Every POST body the model received, in order.
    fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["method"] == "POST")
            .map(|e| e["body"].clone())
            .collect()
    }
}

/// The tool results in one request to the model, each as JSON text.
fn tool_results(agent: Agent, request: &Value) -> Vec<String> {
    let empty = Vec::new();
    match agent {
        Agent::Codex => request["input"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter(|i| i["type"].as_str().is_some_and(|t| t.ends_with("_call_output")))
            .map(|i| match &i["output"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect(),
        Agent::Gemini => request["contents"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
            .filter_map(|p| p.get("functionResponse").map(|r| r["response"].to_string()))
            .collect(),
    }
}

/// What one CLI run left behind.
struct Run {
    agent: Agent,
    dir: tempfile::TempDir,
    requests: Vec<Value>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn workspace(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn file(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.workspace().join(name)).ok()
    }

    /// The tool result the model got (from the last request that carries one).
    fn tool_result(&self) -> String {
        let results: Vec<String> =
            self.requests.iter().rev().map(|r| tool_results(self.agent, r)).find(|r| !r.is_empty()).unwrap_or_default();
        assert_eq!(results.len(), 1, "one tool result expected in the model's last request\n{}", self.context());
        results.into_iter().next().unwrap_or_default()
    }

    fn context(&self) -> String {
        let hooks = std::fs::read_to_string(self.dir.path().join("hookbox.toml")).unwrap_or_default();
        format!(
            "{} run: {} model requests\nhookbox.toml:\n{hooks}\nstdout:\n{}\nstderr (tail):\n{}",
            self.agent.name(),
            self.requests.len(),
            self.stdout,
            tail(&self.stderr, 3000)
        )
    }
}

fn tail(s: &str, n: usize) -> &str {
    let start = s.len().saturating_sub(n);
    let start = (start..=s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(s.len());
    &s[start..]
}

/// Runs `agent` once in a fresh workspace holding `protected.txt`: the model
/// asks for the shell running `command`, Hookbox (the plugins of `plugins`,
/// a hookbox.toml fragment) is the hook of the tool events. `None` when skipped.
fn run(agent: Agent, plugins: &str, command: &str) -> Option<Run> {
    let bin = agent.binary()?;
    let dir = tempfile::tempdir().expect("tempdir");
    let (home, ws) = (dir.path().join("home"), dir.path().join("ws"));
    std::fs::create_dir_all(home.join(".gemini")).expect("home");
    std::fs::create_dir_all(&ws).expect("workspace");
    std::fs::write(ws.join("protected.txt"), "keep\n").expect("protected.txt");
    let config = dir.path().join("hookbox.toml");
    std::fs::write(&config, plugins).expect("hookbox.toml");
    let fake = FakeModel::start(agent, command, &dir.path().join("requests.jsonl"));

    // The hook runs through the shell: quote every path (tempdirs hold no `'`).
    let q = |p: &Path| format!("'{}'", p.display());
    let hook = format!(
        "HOOKBOX_CACHE_DIR={} {} hook --format {} --config {} --db {}",
        q(&dir.path().join("cache")),
        q(Path::new(env!("CARGO_BIN_EXE_hookbox-under-test"))),
        agent.name(),
        q(&config),
        q(&dir.path().join("state.db")),
    );
    let mut cmd = Command::new(&bin);
    cmd.current_dir(&ws).env("HOME", &home);
    for var in
        ["GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "OPENAI_API_KEY", "OPENAI_BASE_URL"]
    {
        cmd.env_remove(var);
    }
    match agent {
        Agent::Codex => {
            let codex_home = home.join(".codex");
            std::fs::create_dir_all(&codex_home).expect("CODEX_HOME");
            let toml = format!(
                "model = \"gpt-5-codex\"\nmodel_provider = \"fake\"\napproval_policy = \"never\"\n\
                 sandbox_mode = \"danger-full-access\"\n\n[model_providers.fake]\nname = \"fake\"\n\
                 base_url = \"http://127.0.0.1:{}/v1\"\nenv_key = \"FAKE_API_KEY\"\nwire_api = \"responses\"\n",
                fake.port
            );
            std::fs::write(codex_home.join("config.toml"), toml).expect("config.toml");
            let entry = json!([{"hooks": [{"type": "command", "command": hook, "timeout": HOOK_TIMEOUT_SECS}]}]);
            let hooks = json!({"hooks": {"PreToolUse": entry, "PostToolUse": entry}});
            std::fs::write(codex_home.join("hooks.json"), hooks.to_string()).expect("hooks.json");
            // User hooks run headless only with the trust check bypassed.
            cmd.env("CODEX_HOME", &codex_home).env("FAKE_API_KEY", "dummy").args([
                "exec",
                "--skip-git-repo-check",
                "--dangerously-bypass-hook-trust",
                "run the command",
            ]);
        }
        Agent::Gemini => {
            let entry = json!([{"hooks": [{"type": "command", "command": hook, "name": "hookbox",
                                            "timeout": HOOK_TIMEOUT_SECS * 1000}]}]);
            let settings = json!({
                "hooksConfig": {"enabled": true},
                "hooks": {"BeforeTool": entry, "AfterTool": entry},
                "privacy": {"usageStatisticsEnabled": false},
                "telemetry": {"enabled": false},
                "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
                "general": {"disableAutoUpdate": true},
            });
            std::fs::write(home.join(".gemini/settings.json"), settings.to_string()).expect("settings.json");
            cmd.env("GEMINI_API_KEY", "dummy")
                .env("GOOGLE_GEMINI_BASE_URL", format!("http://127.0.0.1:{}", fake.port))
                .args(["-p", "run the command", "--yolo", "-m", "gemini-2.5-flash"]);
        }
    }
    let (stdout_path, stderr_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let child = cmd
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path).expect("stdout file"))
        .stderr(File::create(&stderr_path).expect("stderr file"))
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
    let mut child = Reaped(child);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("wait") {
            break Some(status);
        }
        if started.elapsed() > RUN_TIMEOUT {
            kill_group(&mut child.0);
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(child); // its tools and hooks too
    let out = Run {
        agent,
        requests: fake.requests(),
        stdout: std::fs::read_to_string(&stdout_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&stderr_path).unwrap_or_default(),
        dir,
    };
    drop(fake);
    eprintln!("{} ran in {:.1?}", agent.name(), started.elapsed());
    match status {
        None => panic!("{} did not finish within {RUN_TIMEOUT:?}\n{}", agent.name(), out.context()),
        Some(s) => assert!(s.success(), "{} exited with {s}\n{}", agent.name(), out.context()),
    }
    assert!(out.requests.len() >= 2, "the model was not asked again after the tool call\n{}", out.context());
    assert_eq!(out.stdout.trim(), "done", "the final answer\n{}", out.context());
    Some(out)
}

fn plugin(name: &str, path: &str, rest: &str) -> String {
    format!("[[plugins]]\nname = \"{name}\"\npath = \"{path}\"\n{rest}\n")
}

/// (a) deny-tools denies `rm protected.txt` (a word of the shell command names a denied path).
fn denied(agent: Agent) {
    let plugins = plugin("deny-tools", DENY_TOOLS, "config = { paths = [\"protected.txt\"] }");
    let Some(run) = run(agent, &plugins, "rm protected.txt") else { return };
    assert_eq!(run.file("protected.txt").as_deref(), Some("keep\n"), "the denied rm ran\n{}", run.context());
    let result = run.tool_result();
    assert!(
        result.contains("deny-tools:") && result.contains("protected.txt") && result.contains("is denied"),
        "the model did not get deny-tools' reason: {result}\n{}",
        run.context()
    );
}

/// (b) A plugin's rewrite of the arguments is what runs.
fn rewritten(agent: Agent) {
    let rest = format!(
        "config = {{ before-tool-call = 'replace-arguments:{{\"command\": \"echo rewritten > out.txt\"}}', only_tool = \"{}\" }}",
        agent.shell_tool()
    );
    let Some(run) = run(agent, &plugin("rewriter", SCRIPTED, &rest), "echo original > out.txt") else { return };
    assert_eq!(run.file("out.txt").as_deref(), Some("rewritten\n"), "the rewrite did not run\n{}", run.context());
}

/// (c) A replaced tool result is what the model gets.
fn result_replaced(agent: Agent) {
    let rest = "config = { tool-call-result = \"replace-result:HOOKBOX-REPLACED\" }";
    // The output `original-output` does not appear in the command's text (which the model's request repeats).
    let command = "printf '%s-%s' original output | tee ran.txt";
    let Some(run) = run(agent, &plugin("replacer", SCRIPTED, rest), command) else { return };
    assert_eq!(run.file("ran.txt").as_deref(), Some("original-output"), "the tool did not run\n{}", run.context());
    let result = run.tool_result();
    assert!(result.contains("HOOKBOX-REPLACED"), "the model did not get the replacement: {result}\n{}", run.context());
    assert!(!result.contains("original-output"), "the model got the original output: {result}\n{}", run.context());
}

/// (d) A plugin that traps, configured fail-closed, blocks the tool.
fn trap_fails_closed(agent: Agent) {
    let Some(run) = run(agent, &plugin("trap", TRAP_ON_TOOL, "fail = \"closed\""), "rm protected.txt") else {
        return;
    };
    assert_eq!(run.file("protected.txt").as_deref(), Some("keep\n"), "the trapped call ran\n{}", run.context());
    let result = run.tool_result();
    assert!(result.contains("fail-closed"), "the model was not told why: {result}\n{}", run.context());
}

#[test]
fn codex_denied_shell_command_does_not_run_and_the_model_gets_the_reason() {
    denied(Agent::Codex);
}

#[test]
fn codex_runs_the_rewritten_arguments() {
    rewritten(Agent::Codex);
}

#[test]
fn codex_model_gets_the_replaced_tool_result() {
    result_replaced(Agent::Codex);
}

#[test]
fn codex_trapping_plugin_fails_closed() {
    trap_fails_closed(Agent::Codex);
}

#[test]
fn gemini_denied_shell_command_does_not_run_and_the_model_gets_the_reason() {
    denied(Agent::Gemini);
}

#[test]
fn gemini_runs_the_rewritten_arguments() {
    rewritten(Agent::Gemini);
}

#[test]
fn gemini_model_gets_the_replaced_tool_result() {
    result_replaced(Agent::Gemini);
}

#[test]
fn gemini_trapping_plugin_fails_closed() {
    trap_fails_closed(Agent::Gemini);
}
