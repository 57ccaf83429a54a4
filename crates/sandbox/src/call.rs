//! One hook call's mechanics: arming the store with fuel and a deadline,
//! the backstop timeout, classifying what went wrong, draining the captured
//! output into log lines, and validating the directive that came back.

use std::time::{Duration, Instant};

use hookbox_contract::{ContentBlock, Directive, FailureKind, HookLog};
use wasmtime::{Store, Trap};

use crate::ctx::HookCtx;
use crate::output::CappedPipe;

/// How a failed call is classified and described.
pub(crate) struct CallError {
    pub(crate) kind: FailureKind,
    pub(crate) message: String,
}

/// The fuel and deadline one call gets.
#[derive(Clone, Copy)]
pub(crate) struct Allowance {
    pub(crate) fuel: u64,
    pub(crate) deadline: Duration,
}

/// Runs `fut` to completion, or gives up after `limit` (`None`). The timer is
/// armed only if `fut` does not finish at its first poll, so a call that never
/// waits (most hook calls) costs no timer registration.
pub(crate) async fn with_backstop<F: std::future::Future>(fut: F, limit: Duration) -> Option<F::Output> {
    use std::task::Poll;
    let deadline = tokio::time::Instant::now() + limit;
    let mut fut = std::pin::pin!(fut);
    let mut timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Sets the fuel and the wall-clock deadline for the next call.
pub(crate) fn arm(store: &mut Store<HookCtx>, allowance: Allowance) -> wasmtime::Result<()> {
    store.set_fuel(allowance.fuel)?;
    store.data_mut().deadline = Instant::now() + allowance.deadline;
    store.set_epoch_deadline(1);
    Ok(())
}

pub(crate) fn classify(store: &Store<HookCtx>, e: wasmtime::Error) -> CallError {
    let kind = match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => FailureKind::OutOfFuel,
        Some(Trap::Interrupt) => FailureKind::Deadline,
        _ if store.data().limiter.memory_refused => FailureKind::Memory,
        _ => FailureKind::Trap,
    };
    let root = e.root_cause().to_string();
    let top = e.to_string();
    let message = if top == root || top.starts_with("error while executing") { root } else { format!("{top}: {root}") };
    CallError { kind, message }
}

/// Moves this call's pipe output into `logs`, line by line; returns its text.
pub(crate) fn drain_pipe(plugin: &str, stream: &str, pipe: &CappedPipe, logs: &mut Vec<HookLog>) -> String {
    let (bytes, dropped) = pipe.take();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        tracing::info!(plugin, stream, "{line}");
        logs.push(HookLog { plugin: plugin.to_string(), level: stream.to_string(), message: line.to_string() });
    }
    if dropped > 0 {
        logs.push(HookLog {
            plugin: plugin.to_string(),
            level: "warn".into(),
            message: format!("[hookbox] {dropped} bytes of {stream} dropped: over max_log_bytes for this call"),
        });
    }
    text
}

/// Bytes of all strings a directive carries.
pub(crate) fn payload_bytes(d: &Directive) -> u64 {
    let blocks = |b: &[ContentBlock]| -> usize {
        b.iter()
            .map(|c| match c {
                ContentBlock::Text(t) => t.len(),
            })
            .sum()
    };
    let n = match d {
        Directive::Continue | Directive::Pause => 0,
        Directive::SkipTool(m) | Directive::Abort(m) => m.as_ref().map_or(0, String::len),
        Directive::ReplaceArguments(s)
        | Directive::ReplaceResult(s)
        | Directive::InjectMessage(s)
        | Directive::Retry(s)
        | Directive::Reject(s)
        | Directive::SkipRun(s) => s.len(),
        Directive::ReplaceContent(b) | Directive::ReplaceUserContent(b) => blocks(b),
    };
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Rejects directives the host cannot use: over the output cap, or invalid JSON arguments.
pub(crate) fn validate(d: Directive, max_output_bytes: u64) -> Result<Directive, CallError> {
    let size = payload_bytes(&d);
    if size > max_output_bytes {
        return Err(CallError {
            kind: FailureKind::InvalidOutput,
            message: format!("`{}` carries {size} bytes, over max_output_bytes = {max_output_bytes}", d.action()),
        });
    }
    if let Directive::ReplaceArguments(args) = &d {
        match serde_json::from_str::<serde_json::Value>(args) {
            Ok(serde_json::Value::Object(_)) => {}
            Ok(_) => {
                return Err(CallError {
                    kind: FailureKind::InvalidOutput,
                    message: "replace-arguments is valid JSON but not an object".into(),
                });
            }
            Err(e) => {
                return Err(CallError {
                    kind: FailureKind::InvalidOutput,
                    message: format!("replace-arguments is not valid JSON: {e}"),
                });
            }
        }
    }
    Ok(d)
}
