//! Shared helpers for Hookbox's cross-crate tests (`tests/tests/*.rs`): the
//! paths of the plugins `build.rs` compiled for wasm32-wasip2, the fixture
//! sessions, an in-process CLI driver and workspace builders.
//!
//! This crate only serves tests: a failed precondition (a temp dir that cannot
//! be made) should panic with a message, so `expect` is allowed here.
#![allow(clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/plugins.rs"));

pub mod fake_anthropic;
pub mod postgres;
pub mod server;

/// The repository's root folder.
pub fn repo_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(Path::to_path_buf).unwrap_or_else(|| here.to_path_buf())
}

/// A file in `tests/fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

/// The demo session shipped in `examples/demo/` (recorded OpenAI traffic).
pub fn demo_session() -> PathBuf {
    repo_root().join("examples/demo/session.json")
}

/// Writes an OpenAI chat-completions replay session to `dir/name`: one
/// response per entry, `Some(text)` a final answer, `None` a call of the tool
/// `slow` with `{}`; request `i` (0-based) bills `10 * (i + 1)` input and 3
/// output tokens.
pub fn session_file(dir: &Path, name: &str, responses: &[Option<&str>]) -> PathBuf {
    let bodies: Vec<serde_json::Value> = responses
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let message = match r {
                None => serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": format!("call_slow_{i}"), "type": "function", "function": {"name": "slow", "arguments": "{}"}}]}),
                Some(text) => serde_json::json!({"role": "assistant", "content": text}),
            };
            let finish = if r.is_none() { "tool_calls" } else { "stop" };
            serde_json::json!({"id": format!("c{i}"), "object": "chat.completion", "model": "gpt-4o",
                   "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                   "usage": {"prompt_tokens": 10 * (i + 1), "completion_tokens": 3}})
        })
        .collect();
    let path = dir.join(name);
    let session =
        serde_json::json!({"hookbox_replay": 1, "format": "openai-chat", "model": "gpt-4o", "responses": bodies});
    std::fs::write(&path, session.to_string()).expect("write");
    path
}

/// The demo's prompt.
pub const DEMO_PROMPT: &str = "Delete the file `.env` and create `test.txt`";

/// What one in-process CLI invocation produced.
#[derive(Debug)]
pub struct CliOutput {
    /// The exit code.
    pub code: i32,
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
}

impl CliOutput {
    /// stdout parsed as one JSON object (panics with the output when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr))
    }
}

/// Runs `hookbox ARGS…` in-process.
pub fn cli<S: AsRef<str>>(args: &[S]) -> CliOutput {
    let mut argv = vec!["hookbox".to_string()];
    argv.extend(args.iter().map(|a| a.as_ref().to_string()));
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = hookbox_cli::main_with_args(argv, &mut out, &mut err);
    CliOutput {
        code,
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
    }
}

/// Runs `hookbox ARGS…` in-process with `input` as its terminal input.
pub fn cli_with_input<S: AsRef<str>>(args: &[S], input: &str) -> CliOutput {
    let mut argv = vec!["hookbox".to_string()];
    argv.extend(args.iter().map(|a| a.as_ref().to_string()));
    let mut out = Vec::new();
    let mut err = Vec::new();
    let input: hookbox_cli::Input = Box::new(std::io::Cursor::new(input.as_bytes().to_vec()));
    let code = hookbox_cli::main_with_io(argv, input, &mut out, &mut err);
    CliOutput {
        code,
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
    }
}

/// A temporary workspace holding the demo's files: `.env` and `README.md`.
pub fn demo_workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join(".env"), "API_KEY=sk-demo-not-a-real-key\n").expect("write .env");
    std::fs::write(dir.path().join("README.md"), "demo workspace\n").expect("write README.md");
    dir
}

/// A temporary workspace for the two-roundtrip session: `notes.txt`.
pub fn notes_workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.txt"), "remember the milk\n").expect("write notes.txt");
    dir
}

/// Every file (relative path) and its bytes under `dir`, for "nothing was written" checks.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).expect("inside").to_path_buf();
                out.insert(rel, std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    out
}

/// Plugin config from `key = json` pairs (strings as they are, others as JSON text),
/// the way `hookbox.toml` hands it over.
pub fn config(pairs: &[(&str, serde_json::Value)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| {
            let s = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.to_string(), s)
        })
        .collect()
}

/// Where `scripts/build-polyglot.sh` puts the Python, JavaScript and C plugins:
/// `plugins/polyglot/` beside the Rust plugins' target dir.
pub fn polyglot_dir() -> PathBuf {
    let wasm_debug = Path::new(DENY_TOOLS).parent().expect("plugin dir");
    wasm_debug.ancestors().nth(2).expect("target/plugins").join("polyglot")
}

/// A plugin built by `scripts/build-polyglot.sh` (e.g. `python_deny_tools.wasm`),
/// or `None` when it is missing: the caller then skips its test. The reason is
/// printed on the real stderr (past the test harness's capture). With
/// `HOOKBOX_REQUIRE_POLYGLOT` set (CI), a missing plugin panics instead.
pub fn polyglot_plugin(file: &str) -> Option<PathBuf> {
    let path = polyglot_dir().join(file);
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("HOOKBOX_REQUIRE_POLYGLOT").is_none(),
        "{} is missing and HOOKBOX_REQUIRE_POLYGLOT is set: run scripts/install-toolchains.sh and scripts/build-polyglot.sh",
        path.display()
    );
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "SKIPPED: {} is missing (run scripts/install-toolchains.sh and scripts/build-polyglot.sh; \
             HOOKBOX_REQUIRE_POLYGLOT=1 makes this a failure)\n",
            path.display()
        )
        .as_bytes(),
    );
    None
}

/// A golden trace in `tests/golden/`.
pub fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden").join(name)
}

/// A provider that holds every request until the test releases it
/// ([`Held::release`]), and says on a channel when one is waiting (its
/// number, from 1).
pub struct Held {
    inner: hookbox::providers::replay::ReplayProvider,
    entered: tokio::sync::mpsc::UnboundedSender<usize>,
    release: tokio::sync::Semaphore,
    count: std::sync::atomic::AtomicUsize,
}

impl Held {
    /// Holds the requests to `inner`; the receiver gets each request's number as it waits.
    pub fn new(
        inner: hookbox::providers::replay::ReplayProvider,
    ) -> (std::sync::Arc<Held>, tokio::sync::mpsc::UnboundedReceiver<usize>) {
        let (entered, rx) = tokio::sync::mpsc::unbounded_channel();
        let held = Held { inner, entered, release: tokio::sync::Semaphore::new(0), count: Default::default() };
        (std::sync::Arc::new(held), rx)
    }

    /// Lets one waiting (or the next) request through.
    pub fn release(&self) {
        self.release.add_permits(1);
    }
}

#[async_trait::async_trait]
impl hookbox::providers::ModelProvider for Held {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    async fn complete(
        &self,
        request: &hookbox::providers::ModelRequest,
    ) -> Result<hookbox::providers::ModelResponse, hookbox::providers::ProviderError> {
        let n = self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let _ = self.entered.send(n);
        self.release.acquire().await.expect("semaphore").forget();
        self.inner.complete(request).await
    }
}

/// The number of the next request a [`Held`] provider holds (20 s at most).
pub async fn next_request(rx: &mut tokio::sync::mpsc::UnboundedReceiver<usize>) -> usize {
    tokio::time::timeout(std::time::Duration::from_secs(20), rx.recv()).await.expect("a request comes").expect("open")
}

/// The `content` of each `user` message of an OpenAI chat request or a run
/// record (both hold `messages` with `role` and `content`), in order.
pub fn wire_users(v: &serde_json::Value) -> Vec<String> {
    v["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The assistant message of an OpenAI chat request.
pub fn wire_assistant(request: &serde_json::Value) -> &serde_json::Value {
    request["messages"].as_array().expect("messages").iter().find(|m| m["role"] == "assistant").expect("assistant")
}

/// `(tool_call_id, content)` of each tool result of an OpenAI chat request.
pub fn wire_tool_results(request: &serde_json::Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (m["tool_call_id"].as_str().unwrap_or("").to_string(), m["content"].as_str().unwrap_or("").to_string())
        })
        .collect()
}
