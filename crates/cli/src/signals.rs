//! SIGINT and SIGTERM during `hookbox run` (only in the `hookbox` process:
//! see [`crate::handle_signals`]). The first signal aborts the run at its
//! next safe point through its [`hookbox::RunHandle`] (a model request in
//! flight is dropped at once), so the run ends as an
//! aborted run and the partial record and journal are written; the command
//! then exits 130 (SIGINT) or 143 (SIGTERM). A second signal exits at once,
//! after removing the result files' temporaries (nothing is written then).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::signal::unix::{Signal, SignalKind, signal};

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Turns signal handling on for the runs of this process.
pub(crate) fn enable() {
    ENABLED.store(true, Ordering::SeqCst);
}

/// The signals a run listens to: none when handling is off (in-process use,
/// such as tests, keeps the default disposition).
pub(crate) struct Signals {
    streams: Option<(Signal, Signal)>,
    /// The first signal's exit code, once one came.
    pub(crate) interrupted: Option<i32>,
}

impl Signals {
    /// Installs the handlers when handling is on. Must be called within the
    /// tokio runtime.
    ///
    /// Errors: a handler cannot be installed.
    pub(crate) fn install() -> std::io::Result<Signals> {
        let streams = if ENABLED.load(Ordering::SeqCst) {
            Some((signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?))
        } else {
            None
        };
        Ok(Signals { streams, interrupted: None })
    }

    /// The next signal: its name and the exit code it calls for (never
    /// returns when handling is off).
    pub(crate) async fn next(&mut self) -> (&'static str, i32) {
        match &mut self.streams {
            Some((int, term)) => tokio::select! {
                _ = int.recv() => ("SIGINT", 130),
                _ = term.recv() => ("SIGTERM", 143),
            },
            None => std::future::pending().await,
        }
    }
}

/// A second signal: removes `temporaries` and exits with `code` at once.
pub(crate) fn exit_now(temporaries: &[PathBuf], code: i32) -> ! {
    for tmp in temporaries {
        let _ = std::fs::remove_file(tmp);
    }
    std::process::exit(code)
}
