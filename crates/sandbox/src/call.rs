//! One hook call's mechanics: arming the store with fuel and a deadline,
//! the backstop timeout, classifying what went wrong, draining the captured
//! output into log lines. The directive that came back is checked by
//! [`crate::reply`].

use std::time::{Duration, Instant};

use hookbox_contract::{FailureKind, HookLog};
use wasmtime::{Store, Trap};

use crate::ctx::HookCtx;
use crate::log::LogBudget;
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

/// Moves this call's pipe output into `logs`, line by line, each line admitted
/// by `budget`; returns the text (all of it, for a failure's message).
pub(crate) fn drain_pipe(
    plugin: &str,
    stream: &str,
    pipe: &CappedPipe,
    budget: &mut LogBudget,
    logs: &mut Vec<HookLog>,
) -> String {
    let (bytes, dropped) = pipe.take();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if !budget.admit(line.len()) {
            continue;
        }
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
