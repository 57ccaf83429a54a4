//! Issue 13, A.4: an untrusted component is compiled in a child process
//! (`hookbox compile-worker`) with a memory and a time bound, so a component
//! crafted to make the compiler allocate or run without end costs a killed
//! child and a `compile` load error, and the host goes on loading and
//! running plugins.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::collections::BTreeMap;
use std::path::Path;

use hookbox::contract::{Directive, Event, ToolCall};
use hookbox::sandbox::{CompileWorker, DispatchTrace, HookChain, HookHandler, HookRuntime, LoadError, PluginOptions};
use hookbox::sandbox::{RuntimeOptions, Source};
use hookbox_tests::{DENY_TOOLS, config};
use serde_json::json;

fn worker() -> CompileWorker {
    CompileWorker::new(env!("CARGO_BIN_EXE_hookbox-under-test"), ["compile-worker"])
}

fn runtime(options: RuntimeOptions) -> HookRuntime {
    HookRuntime::builder().options(options).compile_worker(Some(worker())).build().expect("runtime")
}

/// A component of one core module holding one function of `body_bytes`
/// bytes of `local.get 0; i32.const 1; i32.add; local.set 0` (the shape of
/// `bench/scripts/big_component.py --shape huge`): slow and memory-hungry
/// to compile, refused afterwards for exporting nothing.
fn heavy_component(dir: &Path, body_bytes: usize) -> std::path::PathBuf {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    fn section(id: u8, payload: &[u8], out: &mut Vec<u8>) {
        out.push(id);
        leb(payload.len(), out);
        out.extend_from_slice(payload);
    }
    let mut code = vec![1, 1, 0x7f]; // locals: one group of one i32
    for _ in 0..body_bytes / 7 {
        code.extend_from_slice(&[0x20, 0x00, 0x41, 0x01, 0x6a, 0x21, 0x00]);
    }
    code.push(0x0b);
    let mut body = Vec::new();
    leb(code.len(), &mut body);
    body.extend_from_slice(&code);
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    section(1, &[1, 0x60, 0, 0], &mut module); // one type: [] -> []
    section(3, &[1, 0], &mut module); // one function of type 0
    let mut codes = vec![1];
    codes.extend_from_slice(&body);
    section(10, &codes, &mut module);
    let mut component = b"\0asm\x0d\0\x01\0".to_vec();
    section(1, &module, &mut component); // one core module section
    let path = dir.join("heavy.wasm");
    std::fs::write(&path, component).expect("write");
    path
}

/// Loads deny-tools and checks it still denies `.env`: the host is fine.
async fn deny_tools_denies(runtime: &HookRuntime) {
    let loaded = runtime
        .load("deny-tools", DENY_TOOLS.as_ref(), config(&[("paths", json!([".env"]))]), PluginOptions::default())
        .expect("deny-tools loads");
    let mut chain = HookChain::new(vec![Box::new(loaded.plugin.hook()) as Box<dyn HookHandler>]);
    let event = Event::BeforeToolCall {
        iteration: 1,
        call: ToolCall { id: "c1".into(), name: "delete_file".into(), arguments: r#"{"path": ".env"}"#.into() },
    };
    let decision =
        chain.dispatch(&event, &hookbox::contract::EventContext::default(), &mut DispatchTrace::default()).await;
    assert!(matches!(decision.terminal, Some(Directive::SkipTool(_))), "{:?}", decision.terminal);
}

#[tokio::test]
async fn a_component_compiled_in_the_worker_loads_runs_and_is_cached() {
    let runtime = runtime(RuntimeOptions::default());
    assert_eq!(runtime.compile_worker(), Some(&worker()));
    deny_tools_denies(&runtime).await;

    // Through the cache: the worker's artifact is stored, a second runtime deserialises it.
    let dir = tempfile::tempdir().expect("tempdir");
    let cached = runtime.clone().with_cache_dir(dir.path());
    assert_eq!(cached.warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Compiled);
    let again = HookRuntime::new().expect("runtime").with_compile_worker(None).with_cache_dir(dir.path());
    assert_eq!(again.warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Cache, "the worker's artifact was cached");
    deny_tools_denies(&again).await;
}

#[tokio::test]
async fn a_compile_over_its_memory_limit_kills_the_worker_not_the_host() {
    let dir = tempfile::tempdir().expect("tempdir");
    // One function of 2 MB: compiling it takes a few hundred MiB.
    let heavy = heavy_component(dir.path(), 2_000_000);
    let runtime = runtime(RuntimeOptions { compile_memory_bytes: 160 << 20, ..RuntimeOptions::default() });
    let err = runtime.load("heavy", &heavy, BTreeMap::new(), PluginOptions::default()).err().expect("refused");
    assert!(matches!(err, LoadError::CompileStopped { .. }), "{err}");
    assert!(err.to_string().contains("compile_memory_bytes"), "names the limit: {err}");
    assert!(!err.to_string().contains("not a valid component"), "the file is valid; a limit stopped it: {err}");
    deny_tools_denies(&runtime).await;

    // With the default limit the same component compiles, and is then refused
    // for what it is (it exports no on-event), not for its cost.
    let roomy = self::runtime(RuntimeOptions::default());
    let err = roomy.load("heavy", &heavy, BTreeMap::new(), PluginOptions::default()).err().expect("refused");
    assert!(
        !matches!(err, LoadError::Compile { .. } | LoadError::CompileStopped { .. }),
        "compiles under the default limits: {err}"
    );
}

#[tokio::test]
async fn a_compile_over_its_time_limit_is_killed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heavy = heavy_component(dir.path(), 2_000_000);
    let runtime = runtime(RuntimeOptions { compile_timeout_ms: 100, ..RuntimeOptions::default() });
    let started = std::time::Instant::now();
    let err = runtime.load("heavy", &heavy, BTreeMap::new(), PluginOptions::default()).err().expect("refused");
    assert!(matches!(err, LoadError::CompileStopped { .. }), "{err}");
    assert!(err.to_string().contains("compile_timeout_ms = 100"), "names the limit: {err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "killed near its limit: {:?}", started.elapsed());
    // The runtime is unharmed; deny-tools (a fast compile) still loads under the same limit.
    let runtime = self::runtime(RuntimeOptions { compile_timeout_ms: 60_000, ..RuntimeOptions::default() });
    deny_tools_denies(&runtime).await;
}

/// A timeout meant as "no limit" (u64::MAX ms) must not wrap the worker's
/// CPU limit to a tiny one (Linux multiplies RLIMIT_CPU by 10^9 unchecked).
#[tokio::test]
async fn a_huge_compile_timeout_does_not_wrap_the_cpu_limit() {
    for ms in [u64::MAX, 18_446_744_073_709_552, 9_223_372_036_854_775_807] {
        deny_tools_denies(&runtime(RuntimeOptions { compile_timeout_ms: ms, ..RuntimeOptions::default() })).await;
    }
}

/// A limit of 0 would stop every compile: refused when the runtime is made.
#[test]
fn zero_compile_limits_are_refused_up_front() {
    for options in [
        RuntimeOptions { compile_timeout_ms: 0, ..RuntimeOptions::default() },
        RuntimeOptions { compile_memory_bytes: 0, ..RuntimeOptions::default() },
    ] {
        let err = HookRuntime::with_options(options).err().expect("refused");
        assert!(err.to_string().contains("must both be at least 1"), "{err}");
    }
}

#[test]
fn a_worker_that_cannot_start_is_a_load_error() {
    let runtime = HookRuntime::builder()
        .compile_worker(Some(CompileWorker::new("/nonexistent/hookbox", ["compile-worker"])))
        .build()
        .expect("runtime");
    let err = runtime.load("d", DENY_TOOLS.as_ref(), BTreeMap::new(), PluginOptions::default()).err().expect("refused");
    assert!(err.to_string().contains("cannot start the compile worker"), "{err}");
}

/// The worker refuses a request it should never get (a component bigger than
/// the request's own max_component_bytes) without compiling it.
#[test]
fn the_worker_checks_its_request() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookbox-under-test"))
        .arg("compile-worker")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let options =
        serde_json::to_value(RuntimeOptions { max_component_bytes: 10, ..RuntimeOptions::default() }).expect("options");
    let header = json!({"options": options, "wasm_bytes": 11, "memory_bytes": 1u64 << 30, "cpu_seconds": 10});
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{header}").expect("write");
    let _ = stdin.write_all(&[0; 11]);
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("over max_component_bytes"));

    let out = Command::new(env!("CARGO_BIN_EXE_hookbox-under-test"))
        .arg("compile-worker")
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3), "an empty request: {out:?}");
}
