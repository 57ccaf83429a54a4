//! Crash recovery (issue 17): on a store that parks runs, a live run's
//! journal is stored at every safe point ([`hookbox::journal::SafePoint`]:
//! after each model response, just before each tool call runs, after each
//! tool outcome, and just before a hook call commits its state), with its
//! workspace's files and its stream up to there. If its worker dies, the
//! sweep of another worker finds the run with a checkpoint and makes it
//! `resumable`, and a worker resumes it from there (`crate::resume`), as it
//! resumes a parked run: the model is not asked again for a journaled
//! response, no journaled tool runs again, a hook call journaled as begun
//! does not commit its state again, and a tool call journaled as started
//! without an outcome gets an "interrupted" error result instead of running
//! twice.
//!
//! A run is checkpointed in its first turn only (a checkpoint covers one),
//! while its workspace and checkpoint fit the caps of a parked run; past
//! that its checkpoint is forgotten, and the run is `interrupted` if its
//! worker dies, as before.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use hookbox::RunJournal;
use hookbox::journal::{SafePoint, SafePointFuture, SafePoints};
use hookbox::providers::record::RecordingProvider;

use crate::checkpoint::{ParkedRun, RunSpec, encode, snapshot};
use crate::live::LiveRun;
use crate::store::ServerStore;

/// Writes one live run's checkpoint at its safe points.
pub struct DurableRun {
    store: Arc<dyn ServerStore>,
    live: Arc<LiveRun>,
    /// Weak: the journal holds this.
    journal: Weak<RunJournal>,
    recorder: Arc<RecordingProvider>,
    spec: RunSpec,
    /// Its model spend counted already (at its parks), in USD, carried into each checkpoint.
    counted_usd: f64,
    dir: PathBuf,
    /// The workspace's files as of the last tool outcome (tools change it; hooks do not).
    workspace: Mutex<Option<Vec<(String, String)>>>,
    /// Set once the run is no longer checkpointed (past its first turn, or over a cap).
    off: AtomicBool,
    /// Set once the stored checkpoint was cleared ([`DurableRun::stop`]).
    cleared: AtomicBool,
    /// The last event of the stream stored with a checkpoint.
    stored_seq: AtomicI64,
    /// One write at a time, in order.
    writing: Mutex<()>,
}

impl DurableRun {
    /// The checkpoint writer of `live`'s run, which started with `spec` and
    /// had `counted_usd` of its model spend counted (at its parks); set it on
    /// `journal` with [`RunJournal::with_safe_points`].
    pub fn new(
        store: Arc<dyn ServerStore>,
        live: Arc<LiveRun>,
        journal: &Arc<RunJournal>,
        recorder: Arc<RecordingProvider>,
        (spec, counted_usd): (RunSpec, f64),
        dir: PathBuf,
    ) -> Arc<Self> {
        // What the store holds of the stream: up to the claim's last event (a resumed run).
        let stored_seq = AtomicI64::new(live.base());
        Arc::new(DurableRun {
            store,
            live,
            journal: Arc::downgrade(journal),
            recorder,
            spec,
            counted_usd,
            dir,
            workspace: Mutex::new(None),
            off: AtomicBool::new(false),
            cleared: AtomicBool::new(false),
            stored_seq,
            writing: Mutex::new(()),
        })
    }

    /// Stops checkpointing the run and forgets its stored checkpoint (its
    /// first turn ended, or it went over a cap): blocking.
    pub fn stop(&self) {
        self.off.store(true, Ordering::SeqCst);
        if !self.cleared.swap(true, Ordering::SeqCst) {
            let _guard = self.writing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // A few tries: a checkpoint left stored would resume a turn that ended.
            for attempt in 1..=3 {
                match self.store.save_checkpoint(&self.live.run_id, None, &[], 0) {
                    Ok(()) => return,
                    Err(crate::store::StoreError::Fenced(_)) => return,
                    Err(e) if attempt == 3 => {
                        tracing::warn!(run = %self.live.run_id, "a checkpoint of the run stays stored: {e}");
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(250 * attempt)),
                }
            }
        }
    }

    /// Stops checkpointing the run, leaving what is stored (it parked, or it ends).
    pub fn halt(&self) {
        self.off.store(true, Ordering::SeqCst);
    }

    /// True once [`DurableRun::stop`] cleared the stored checkpoint.
    pub fn stopped(&self) -> bool {
        self.cleared.load(Ordering::SeqCst)
    }

    /// Writes the checkpoint now, outside a safe point (an abort given
    /// through the API), if the run is still checkpointed: blocking.
    pub fn write_now(&self) {
        self.write(false);
    }

    /// Writes the checkpoint (blocking); `fresh_workspace` takes the
    /// workspace's files anew. True when it is stored (or the run is no
    /// longer checkpointed: nothing to store).
    fn write(&self, fresh_workspace: bool) -> bool {
        if self.off.load(Ordering::SeqCst) {
            return true;
        }
        let Some(journal) = self.journal.upgrade() else { return true };
        let _guard = self.writing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.off.load(Ordering::SeqCst) {
            // Stopped while this write waited.
            return true;
        }
        // The stream up to here is what the journal below covers (events pushed
        // meanwhile are after the safe point: a resumed run makes them again).
        let upto = self.live.last_seq();
        let workspace = {
            let mut cached = self.workspace.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if fresh_workspace || cached.is_none() {
                *cached = snapshot(&self.dir);
            }
            cached.clone()
        };
        let Some(workspace) = workspace else {
            drop(_guard);
            tracing::info!(run = %self.live.run_id, "no longer checkpointed: its workspace is over the size stored");
            self.stop();
            return true;
        };
        let checkpoint = journal.checkpoint(self.recorder.responses());
        if checkpoint.run_id.is_empty() {
            // Not started yet: nothing to resume.
            return true;
        }
        // An abort given through the API: a run resumed after a crash ends aborted too.
        let abort = self.live.aborted_with();
        let parked = ParkedRun {
            spec: self.spec.clone(),
            checkpoint,
            approval: None,
            workspace,
            abort,
            paused: false,
            counted_usd: self.counted_usd,
            queued: false,
            inbox: self.live.inbox_after_resume(),
        };
        let Some(text) = encode(&parked, &journal) else {
            drop(_guard);
            tracing::info!(run = %self.live.run_id, "no longer checkpointed: over the size stored, or a journal was cut");
            self.stop();
            return true;
        };
        let from = self.stored_seq.load(Ordering::SeqCst);
        // Event ids are consecutive: those after `from` up to `upto`.
        let events = self.live.events_after(from, usize::try_from(upto.saturating_sub(from)).unwrap_or(0));
        let seq = events.last().map_or(from, |e| e.seq);
        match self.store.save_checkpoint(&self.live.run_id, Some(&text), &events, seq) {
            Ok(()) => {
                self.stored_seq.store(seq, Ordering::SeqCst);
                true
            }
            Err(e) => {
                tracing::warn!(run = %self.live.run_id, "checkpoint not stored: {e}");
                false
            }
        }
    }
}

/// The run's safe points, written as they come.
pub struct SafePointsOf(pub Arc<DurableRun>);

impl SafePoints for SafePointsOf {
    fn reached(&self, at: SafePoint<'_>) -> SafePointFuture {
        let run = self.0.clone();
        let fresh = matches!(at, SafePoint::ToolDone(_));
        Box::pin(async move { tokio::task::spawn_blocking(move || run.write(fresh)).await.unwrap_or(false) })
    }

    fn committing(&self, _plugin: &str) -> bool {
        // Inside the hook call, before its commit: the call blocks on this as on the commit.
        self.0.write(false)
    }
}
