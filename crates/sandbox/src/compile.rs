//! Compiling untrusted components in a child process with a memory and time
//! bound ([`CompileWorker`]), so a component crafted to make Cranelift
//! allocate without end or compile for minutes costs a killed child, not
//! the host.
//!
//! The worker is a program the embedder ships that calls
//! [`compile_worker_main`] when started as a worker (the `hookbox` binary
//! does so for its hidden `compile-worker` command): the re-exec pattern of
//! browsers' utility processes. The parent writes one request on the
//! worker's stdin (a JSON header line, then the component's bytes); the
//! worker lowers its own limits before reading the component
//! (`RLIMIT_AS` = [`RuntimeOptions::compile_memory_bytes`], `RLIMIT_CPU`
//! from [`RuntimeOptions::compile_timeout_ms`], no core files, killed if the
//! parent dies), compiles with the parent's engine configuration and writes
//! the artifact on stdout. The parent waits at most `compile_timeout_ms`
//! (then kills it), reads at most [`max_artifact_bytes`] and deserialises
//! the artifact; wasmtime checks that it was compiled for this engine.
//!
//! Without a worker (`HookRuntime::compile_worker` is `None`) the
//! runtime compiles in its own process, with no bound but
//! [`RuntimeOptions::max_component_bytes`].

use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::runtime_options::RuntimeOptions;

/// A program that compiles components when started with its arguments
/// (see the module docs): `program args...`, stdin the request, stdout the
/// artifact, stderr the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileWorker {
    /// The program (an absolute path: the worker runs with an empty environment).
    pub program: PathBuf,
    /// Its arguments, e.g. `["compile-worker"]`.
    pub args: Vec<OsString>,
}

impl CompileWorker {
    /// The worker `program args...`.
    pub fn new(program: impl Into<PathBuf>, args: impl IntoIterator<Item = impl Into<OsString>>) -> Self {
        CompileWorker { program: program.into(), args: args.into_iter().map(Into::into).collect() }
    }

    /// This process's own executable started with `args`, for a binary that
    /// calls [`compile_worker_main`] when given them.
    ///
    /// Errors: when the executable's path cannot be found
    /// ([`std::env::current_exe`]).
    pub fn current_exe(args: impl IntoIterator<Item = impl Into<OsString>>) -> std::io::Result<Self> {
        Ok(Self::new(std::env::current_exe()?, args))
    }

    /// Makes `worker` the one every `HookRuntime` created afterwards in
    /// this process compiles with, unless its builder says otherwise
    /// ([`crate::HookRuntimeBuilder::compile_worker`]). The first call wins;
    /// returns `false` if a default was already set.
    pub fn set_process_default(worker: CompileWorker) -> bool {
        PROCESS_DEFAULT.set(worker).is_ok()
    }

    /// The worker set by [`CompileWorker::set_process_default`], if any.
    pub fn process_default() -> Option<&'static CompileWorker> {
        PROCESS_DEFAULT.get()
    }
}

static PROCESS_DEFAULT: OnceLock<CompileWorker> = OnceLock::new();

/// The header line of a request: what to compile and under which limits.
#[derive(Debug, Serialize, Deserialize)]
struct Request {
    /// The parent engine's options (the worker's engine is configured the
    /// same, with pooling off: pooling only reserves address space, and its
    /// artifacts are the same).
    options: RuntimeOptions,
    /// Bytes of the component that follow the header.
    wasm_bytes: u64,
    /// `RLIMIT_AS` for the worker, in bytes.
    memory_bytes: u64,
    /// `RLIMIT_CPU` for the worker, in seconds.
    cpu_seconds: u64,
}

/// The longest header line a worker reads, in bytes.
const MAX_HEADER_BYTES: u64 = 4096;
/// The most stderr the parent keeps from a worker, in bytes.
const MAX_STDERR_BYTES: u64 = 16 * 1024;
/// How often the parent checks whether the worker has exited.
const POLL: Duration = Duration::from_millis(2);
/// The largest `RLIMIT_CPU` a worker sets, in seconds (136 years): Linux
/// multiplies the limit by 10^9 without checking, so a larger value (from a
/// `compile_timeout_ms` meant as "no limit") would wrap to a tiny one.
const MAX_CPU_SECONDS: u64 = 1 << 32;
/// Exit code of a worker whose compile failed (the reason on stderr).
const EXIT_COMPILE_ERROR: i32 = 1;
/// Exit code of a worker that could not read its request or set its limits.
const EXIT_SETUP_ERROR: i32 = 3;

/// The largest artifact the parent accepts for a component of `wasm_len`
/// bytes: 8 times its size plus 16 MiB (artifacts we measured are 0.3–2.1
/// times the component).
pub fn max_artifact_bytes(wasm_len: usize) -> u64 {
    (wasm_len as u64).saturating_mul(8).saturating_add(16 << 20)
}

/// A compile the worker did not finish: a limit stopped it, or the worker
/// failed (as opposed to a component wasmtime refuses). The load error is
/// [`crate::LoadError::CompileStopped`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct CompileStopped(pub(crate) String);

/// Why a worker did not return an artifact: wasmtime's message when the
/// component itself does not compile, else which limit stopped the worker.
fn failure(status: ExitStatus, stderr: &str, options: &RuntimeOptions, timed_out: bool) -> WorkerFailure {
    let stderr = stderr.trim();
    if !timed_out && status.code() == Some(EXIT_COMPILE_ERROR) {
        return WorkerFailure::CompileError(stderr.to_string());
    }
    #[cfg(unix)]
    // SIGXCPU (24): over RLIMIT_CPU; SIGKILL (9): its hard limit.
    let over_cpu = matches!(std::os::unix::process::ExitStatusExt::signal(&status), Some(24 | 9));
    #[cfg(not(unix))]
    let over_cpu = false;
    let out_of_memory = ["memory allocation of", "out of memory", "Cannot allocate"].iter().any(|m| stderr.contains(m));
    WorkerFailure::Stopped(if timed_out {
        format!(
            "compiling did not finish within [runtime] compile_timeout_ms = {} (the compile worker was killed)",
            options.compile_timeout_ms
        )
    } else if over_cpu {
        format!(
            "compiling used more CPU time than [runtime] compile_timeout_ms = {} allows (the compile worker was killed)",
            options.compile_timeout_ms
        )
    } else if out_of_memory {
        format!(
            "compiling needed more memory than [runtime] compile_memory_bytes = {} (the compile worker ran out)",
            options.compile_memory_bytes
        )
    } else {
        let tail: String = stderr.chars().rev().take(512).collect::<Vec<_>>().into_iter().rev().collect();
        format!("the compile worker failed ({status}): {tail}")
    })
}

/// Compiles `wasm` in `worker` under `options`' compile limits and returns
/// the artifact (what [`Engine::precompile_component`] returns).
///
/// Errors: the component's compile error (wasmtime's message), or a
/// [`CompileStopped`] saying what stopped the worker (its memory or time
/// limit, a crash, an artifact over [`max_artifact_bytes`], the program not
/// starting).
pub(crate) fn precompile_in_worker(
    worker: &CompileWorker,
    options: &RuntimeOptions,
    wasm: &[u8],
) -> wasmtime::Result<Vec<u8>> {
    match worker_compile(worker, options, wasm) {
        Ok(artifact) => Ok(artifact),
        Err(WorkerFailure::CompileError(message)) => Err(wasmtime::Error::msg(message)),
        Err(WorkerFailure::Stopped(message)) => Err(wasmtime::Error::new(CompileStopped(message))),
    }
}

/// Why [`worker_compile`] returned no artifact.
enum WorkerFailure {
    /// wasmtime refused the component (its message).
    CompileError(String),
    /// A limit stopped the worker, or the worker failed.
    Stopped(String),
}

impl From<String> for WorkerFailure {
    fn from(message: String) -> Self {
        WorkerFailure::Stopped(message)
    }
}

/// As [`precompile_in_worker`].
fn worker_compile(worker: &CompileWorker, options: &RuntimeOptions, wasm: &[u8]) -> Result<Vec<u8>, WorkerFailure> {
    let timeout = Duration::from_millis(options.compile_timeout_ms.max(1));
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get) as u64;
    let request = Request {
        options: *options,
        wasm_bytes: wasm.len() as u64,
        memory_bytes: options.compile_memory_bytes,
        // The wall-clock timeout is the bound; CPU time (all threads) backs it
        // up if this process dies and cannot kill the worker.
        cpu_seconds: timeout.as_secs().saturating_add(1).saturating_mul(threads).min(MAX_CPU_SECONDS),
    };
    let mut header = serde_json::to_vec(&request).map_err(|e| format!("cannot encode the compile request: {e}"))?;
    header.push(b'\n');
    let mut child = Command::new(&worker.program)
        .args(&worker.args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the compile worker {}: {e}", worker.program.display()))?;
    let (Some(mut stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(WorkerFailure::Stopped("the compile worker's pipes were not opened".into()));
    };
    let cap = max_artifact_bytes(wasm.len());
    let started = Instant::now();
    let (status, timed_out, artifact, err_text) = std::thread::scope(|s| {
        // A worker that dies early closes its stdin: the write then fails, which is fine.
        s.spawn(move || {
            let _ = stdin.write_all(&header).and_then(|()| stdin.write_all(wasm));
        });
        let out = s.spawn(move || {
            let mut buf = Vec::new();
            let read = stdout.take(cap.saturating_add(1)).read_to_end(&mut buf);
            read.map(|_| buf)
        });
        let err = s.spawn(move || {
            let mut buf = Vec::new();
            let _ = stderr.take(MAX_STDERR_BYTES).read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        });
        let mut timed_out = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) if started.elapsed() >= timeout => {
                    timed_out = true;
                    let _ = child.kill();
                    break child.wait();
                }
                Ok(None) => std::thread::sleep(POLL),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Err(e);
                }
            }
        };
        let artifact = out.join().unwrap_or_else(|_| Err(std::io::Error::other("the reader panicked")));
        let err_text = err.join().unwrap_or_default();
        (status, timed_out, artifact, err_text)
    });
    let status = status.map_err(|e| format!("cannot wait for the compile worker: {e}"))?;
    if !status.success() || timed_out {
        return Err(failure(status, &err_text, options, timed_out));
    }
    let artifact = artifact.map_err(|e| format!("cannot read the compile worker's output: {e}"))?;
    if artifact.len() as u64 > cap {
        return Err(format!("the compile worker's artifact is over {cap} bytes").into());
    }
    if artifact.is_empty() {
        return Err(WorkerFailure::Stopped("the compile worker exited without an artifact".into()));
    }
    Ok(artifact)
}

/// Deserialises an artifact this process's own worker just produced.
#[allow(unsafe_code)]
pub(crate) fn deserialize_own(engine: &Engine, artifact: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `Component::deserialize` trusts its bytes to be an artifact that
    // wasmtime produced. These come straight from the pipe of a worker this
    // runtime started (the embedder's own program, given by absolute path),
    // which wrote what `Engine::precompile_component` returned; nothing else
    // can write to that pipe. wasmtime checks the header, its version and the
    // engine's compatibility itself.
    unsafe { Component::deserialize(engine, artifact) }
}

/// The worker's side: reads one request from stdin, lowers its own limits,
/// compiles, writes the artifact to stdout. Returns the process exit code: 0
/// compiled, 1 the component does not compile (wasmtime's message on
/// stderr), 3 the request could not be read or the limits not set (nothing
/// is compiled without them).
pub fn compile_worker_main() -> i32 {
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    if let Err(e) = (&mut stdin).take(MAX_HEADER_BYTES).read_until(b'\n', &mut line) {
        eprintln!("hookbox compile worker: cannot read the request: {e}");
        return EXIT_SETUP_ERROR;
    }
    let request: Request = match serde_json::from_slice(&line) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hookbox compile worker: bad request header: {e}");
            return EXIT_SETUP_ERROR;
        }
    };
    if let Err(e) = limit_self(&request) {
        eprintln!("hookbox compile worker: cannot set its limits: {e}");
        return EXIT_SETUP_ERROR;
    }
    if request.wasm_bytes > request.options.max_component_bytes {
        eprintln!("hookbox compile worker: the component is over max_component_bytes");
        return EXIT_SETUP_ERROR;
    }
    let mut wasm = Vec::new();
    match (&mut stdin).take(request.wasm_bytes).read_to_end(&mut wasm) {
        Ok(n) if n as u64 == request.wasm_bytes => {}
        Ok(n) => {
            eprintln!("hookbox compile worker: the component ended after {n} of {} bytes", request.wasm_bytes);
            return EXIT_SETUP_ERROR;
        }
        Err(e) => {
            eprintln!("hookbox compile worker: cannot read the component: {e}");
            return EXIT_SETUP_ERROR;
        }
    }
    let options = RuntimeOptions { pooling: false, ..request.options };
    let engine =
        match options.config().map_err(|e| e.to_string()).and_then(|c| Engine::new(&c).map_err(|e| format!("{e:#}"))) {
            Ok(engine) => engine,
            Err(e) => {
                eprintln!("hookbox compile worker: cannot create the engine: {e}");
                return EXIT_SETUP_ERROR;
            }
        };
    match engine.precompile_component(&wasm) {
        Ok(artifact) => {
            drop(wasm);
            let mut out = std::io::stdout().lock();
            match out.write_all(&artifact).and_then(|()| out.flush()) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("hookbox compile worker: cannot write the artifact: {e}");
                    EXIT_SETUP_ERROR
                }
            }
        }
        Err(e) => {
            eprintln!("{e:#}");
            EXIT_COMPILE_ERROR
        }
    }
}

/// Lowers this process's address space, CPU time and core file size, and
/// asks to be killed if the parent dies. Never raises a limit.
#[cfg(target_os = "linux")]
fn limit_self(request: &Request) -> std::io::Result<()> {
    use rustix::process::{Resource, Rlimit, getrlimit, set_parent_process_death_signal, setrlimit};
    fn lower(resource: Resource, soft: u64, hard: u64) -> std::io::Result<()> {
        let old = getrlimit(resource);
        let cap = |v: u64| Some(old.maximum.map_or(v, |m| m.min(v)));
        setrlimit(resource, Rlimit { current: cap(soft), maximum: cap(hard) }).map_err(std::io::Error::from)
    }
    set_parent_process_death_signal(Some(rustix::process::Signal::KILL)).map_err(std::io::Error::from)?;
    lower(Resource::Core, 0, 0)?;
    lower(Resource::As, request.memory_bytes, request.memory_bytes)?;
    // SIGXCPU at the soft limit; SIGKILL one second later if it is caught.
    let cpu = request.cpu_seconds.min(MAX_CPU_SECONDS);
    lower(Resource::Cpu, cpu, cpu.saturating_add(1))
}

#[cfg(not(target_os = "linux"))]
fn limit_self(_request: &Request) -> std::io::Result<()> {
    Err(std::io::Error::other("compile workers are only supported on Linux"))
}
