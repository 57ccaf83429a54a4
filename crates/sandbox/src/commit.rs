//! Committing a call's hook state: after a call that succeeded in every way,
//! what it staged with `set-state` is saved as a compare-and-swap on the
//! revision its instance last read or wrote (`crate::state`), waiting for
//! the store at most until the call's deadline. A store that could not be
//! read or written, or a write that lost to another run of the session, is
//! a `state` failure of the call: never a silent drop.

use std::time::Instant;

use hookbox_contract::FailureKind;

use crate::call::CallError;
use crate::hook::WasmHook;
use crate::state::{StateError, StoredState};

impl WasmHook {
    /// Settles the state of a call that succeeded: fails it if its
    /// `get-state` could not read the store, else commits `staged` (if it
    /// staged anything), waiting for the store until `deadline` at most.
    ///
    /// Errors: `invalid-output` for a write over `max_state_bytes`; `state`
    /// for a failed read, a failed save, or a save that conflicts with
    /// another run's (the saved state stays as it was).
    pub(crate) fn commit_state(&mut self, staged: Option<Vec<u8>>, deadline: Instant) -> Result<(), CallError> {
        if let Some(error) = self.live.as_mut().and_then(|l| l.read_error.take()) {
            // The guest saw no state where there may be one: its answer and any write rest on that.
            return Err(CallError {
                kind: FailureKind::State,
                message: format!("get-state could not read the hook state, so nothing is saved: {error}"),
            });
        }
        let Some(data) = staged else { return Ok(()) };
        let cap = self.plugin.options.limits.max_state_bytes;
        let size = u64::try_from(data.len()).unwrap_or(u64::MAX);
        if size > cap {
            return Err(CallError {
                kind: FailureKind::InvalidOutput,
                message: format!("set-state of {size} bytes is over max_state_bytes = {cap}; the saved state stays"),
            });
        }
        let state = StoredState { version: self.plugin.options.version.clone(), data };
        let wait = deadline.saturating_duration_since(Instant::now());
        if let Some(env) = self.env.as_ref().filter(|env| env.replays_call()) {
            // Exactly once: the first execution of this call committed it,
            // unless it was cut off between writing its commit down and making
            // it: then the same swap is made again, and lands only if that one did not.
            let (Some(expected), Some(session)) = (env.pending_commit(), &self.session) else { return Ok(()) };
            return match self.plugin.state.save(session, &self.plugin.name, &state, Some(expected), wait) {
                Ok(revision) => {
                    if let Some(live) = self.live.as_mut() {
                        live.revision = Some(revision);
                    }
                    Ok(())
                }
                // The revision moved: the first execution's commit landed if
                // the entry is one save past it and holds what this call
                // staged; then its instance knew the revision after it. Else
                // another run saved first, and the instance knows only the
                // revision it swapped, so its next save does not overwrite that.
                Err(StateError::Conflict { found, .. }) => {
                    let landed = found == expected.saturating_add(1)
                        && matches!(
                            self.plugin.state.load(session, &self.plugin.name, wait),
                            Ok((Some(saved), at)) if at == found && saved.data == state.data
                        );
                    if let Some(live) = self.live.as_mut() {
                        live.revision = Some(if landed { found } else { expected });
                    }
                    Ok(())
                }
                Err(e) => Err(CallError { kind: FailureKind::State, message: format!("hook state not saved: {e}") }),
            };
        }
        let Some(session) = &self.session else {
            // No run-start seen (a conformance trace without one): keep it for this handler only.
            self.committed = Some(state);
            return Ok(());
        };
        // The revision this instance last saw; none if it never read (a blind write).
        let expected = self.live.as_ref().and_then(|l| l.revision);
        if let Some(env) = &self.env
            && !env.committing(expected)
        {
            env.committed();
            return Err(CallError {
                kind: FailureKind::State,
                message: "hook state not saved: the run's journal could not be written before the commit".into(),
            });
        }
        let saved = self.plugin.state.save(session, &self.plugin.name, &state, expected, wait);
        if let Some(env) = &self.env {
            env.committed();
        }
        match saved {
            Ok(revision) => {
                if let Some(live) = self.live.as_mut() {
                    live.revision = Some(revision);
                }
                Ok(())
            }
            Err(e) => {
                self.conflicted = matches!(e, StateError::Conflict { .. });
                Err(CallError { kind: FailureKind::State, message: format!("hook state not saved: {e}") })
            }
        }
    }
}
