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
//! The first write is the whole checkpoint; later ones append what the
//! journal gained since (`crate::journal_parts`), so a safe point's cost
//! does not grow with the run, until the parts would outgrow the whole.
//!
//! A run is one turn of its session (a checkpoint covers one turn: the
//! server sends no follow-up turns), checkpointed while its workspace and
//! checkpoint fit the caps of a parked run; past that its checkpoint is
//! forgotten, and the run is `interrupted` if its worker dies, as before.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use hookbox::RunJournal;
use hookbox::journal::{SafePoint, SafePointFuture, SafePoints};
use hookbox::providers::record::RecordingProvider;

use crate::checkpoint::{MAX_CHECKPOINT_BYTES, ParkedRun, RunSpec, encode, snapshot};
use crate::journal_parts::{Files, JournalPart, Lengths, MAX_PARTS, MIN_PARTS_BYTES, workspace_hash};
use crate::live::LiveRun;
use crate::store::{Checkpointed, ServerStore};

/// What the store holds of the run's checkpoint, as of the last write.
struct Stored {
    /// The lengths of the journal's lists stored.
    at: Lengths,
    /// [`RunJournal::rewrites`] then: while it stays, the journal only grew.
    rewrites: u64,
    /// The hash of the workspace's files stored.
    workspace: [u8; 32],
    /// The whole checkpoint's length, in bytes.
    base_bytes: usize,
    /// The parts appended since: how many, and their bytes.
    parts: u32,
    parts_bytes: usize,
}

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
    /// False: every safe point writes the whole checkpoint (no parts).
    parts: bool,
    dir: PathBuf,
    /// The workspace's files as of the last tool outcome (tools change it;
    /// hooks do not), with their hash.
    workspace: Mutex<Option<(Arc<Files>, [u8; 32])>>,
    /// Set once the run is no longer checkpointed (over a cap, parked or ended).
    off: AtomicBool,
    /// Set once the stored checkpoint was cleared ([`DurableRun::stop`]).
    cleared: AtomicBool,
    /// The last event of the stream stored with a checkpoint.
    stored_seq: AtomicI64,
    /// One write at a time, in order; what the store holds (`None`: the
    /// next write is whole: the first, or one after a write that failed).
    writing: Mutex<Option<Stored>>,
}

impl DurableRun {
    /// The checkpoint writer of `live`'s run, which started with `spec` and
    /// had `counted_usd` of its model spend counted (at its parks), appending
    /// journal parts when `parts` (else writing it whole each time); set it on
    /// `journal` with [`RunJournal::with_safe_points`].
    pub fn new(
        store: Arc<dyn ServerStore>,
        live: Arc<LiveRun>,
        journal: &Arc<RunJournal>,
        recorder: Arc<RecordingProvider>,
        (spec, counted_usd, parts): (RunSpec, f64, bool),
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
            parts,
            dir,
            workspace: Mutex::new(None),
            off: AtomicBool::new(false),
            cleared: AtomicBool::new(false),
            stored_seq,
            writing: Mutex::new(None),
        })
    }

    /// Stops checkpointing the run and forgets its stored checkpoint (it
    /// went over a cap): blocking.
    pub fn stop(&self) {
        self.off.store(true, Ordering::SeqCst);
        if !self.cleared.swap(true, Ordering::SeqCst) {
            let mut stored = self.writing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *stored = None;
            // A few tries: a checkpoint left stored would resume a turn that ended.
            for attempt in 1..=3 {
                match self.store.save_checkpoint((&self.live.run_id, self.live.claim), Checkpointed::Forget, &[], 0) {
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

    /// [`DurableRun::halt`], then waits for a write in flight (blocking):
    /// once it returns, this run's writer stores nothing more. So a write
    /// delayed in the pool cannot land after the run ended or parked, when
    /// this worker may have claimed the run again (it would pass the owner
    /// check as the new claim's).
    pub fn settle(&self) {
        self.halt();
        drop(self.writing.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    }

    /// Writes the checkpoint now, outside a safe point (an abort or a
    /// message given through the API), if the run is still checkpointed:
    /// blocking.
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
        let mut stored = self.writing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
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
                *cached = snapshot(&self.dir).map(|files| {
                    // Only parts need it: they carry the files only when they changed.
                    let hash = if self.parts { workspace_hash(&files) } else { [0; 32] };
                    (Arc::new(files), hash)
                });
            }
            cached.clone()
        };
        let Some((workspace, workspace_now)) = workspace else {
            drop(stored);
            tracing::info!(run = %self.live.run_id, "no longer checkpointed: its workspace is over the size stored");
            self.stop();
            return true;
        };
        // A part first; if the store refuses it (or fails), the whole checkpoint at once.
        for try_part in [true, false] {
            match self.write_one(&journal, &mut stored, try_part, (&workspace, workspace_now), upto) {
                Written::Yes => return true,
                Written::PartRefused => {}
                Written::No => return false,
                Written::Stop => {
                    drop(stored);
                    self.stop();
                    return true;
                }
            }
        }
        false
    }

    /// One write of [`DurableRun::write`]: a part when `try_part` and the
    /// journal only grew since what is `stored`, else the whole checkpoint.
    fn write_one(
        &self,
        journal: &RunJournal,
        stored: &mut Option<Stored>,
        try_part: bool,
        (workspace, workspace_now): (&Arc<Files>, [u8; 32]),
        upto: i64,
    ) -> Written {
        // Read before the journal and compared after: a plugin's values cut
        // back meanwhile (a resumed run's) make this write whole, and the next.
        let rewrites = journal.rewrites();
        let part = stored
            .as_ref()
            .filter(|s| {
                try_part && self.parts && s.rewrites == rewrites && s.parts < MAX_PARTS && journal.cut().is_empty()
            })
            .and_then(|s| {
                let responses = self.recorder.responses_after(usize::try_from(s.at.responses).ok()?)?;
                // The messages given through the API and not delivered, read
                // with the journal: each is in its deliveries or here, never in both.
                let (inbox, tail) = self.live.inbox_with(|| journal.checkpoint_after(responses, &s.at));
                let tail = tail?;
                if tail.run_id.is_empty() || journal.rewrites() != rewrites {
                    return None;
                }
                let mut at = s.at.clone();
                at.extend(&tail);
                let files = (s.workspace != workspace_now).then(|| workspace.as_ref().clone());
                let abort = self.live.aborted_with();
                let text = serde_json::to_string(&JournalPart::of(s.at.clone(), tail, (abort, inbox, files))).ok()?;
                let bytes = s.parts_bytes.saturating_add(text.len());
                // The parts stay under the whole (or 64 KiB): reading the run back costs at most about twice it.
                (bytes <= s.base_bytes.max(MIN_PARTS_BYTES)
                    && s.base_bytes.saturating_add(bytes) <= MAX_CHECKPOINT_BYTES)
                    .then_some((text, at))
            });
        let (text, at, number) = match part {
            Some((text, at)) => {
                let number = stored.as_ref().map_or(1, |s| s.parts + 1);
                (text, at, Some(number))
            }
            None => {
                let (inbox, checkpoint) = self.live.inbox_with(|| journal.checkpoint(self.recorder.responses()));
                if checkpoint.run_id.is_empty() {
                    // Not started yet: nothing to resume.
                    return Written::Yes;
                }
                let at = checkpoint.lengths();
                let parked = ParkedRun {
                    spec: self.spec.clone(),
                    checkpoint,
                    approval: None,
                    workspace: workspace.as_ref().clone(),
                    // An abort given through the API: a run resumed after a crash ends aborted too.
                    abort: self.live.aborted_with(),
                    paused: false,
                    api_pause: false,
                    counted_usd: self.counted_usd,
                    queued: false,
                    inbox,
                };
                let Some(text) = encode(&parked, journal) else {
                    tracing::info!(run = %self.live.run_id, "no longer checkpointed: over the size stored, or a journal was cut");
                    return Written::Stop;
                };
                (text, at, None)
            }
        };
        let what = match number {
            Some(number) => Checkpointed::Part { number, text: &text },
            None => Checkpointed::Whole(&text),
        };
        let from = self.stored_seq.load(Ordering::SeqCst);
        // Event ids are consecutive: those after `from` up to `upto`.
        let events = self.live.events_after(from, usize::try_from(upto.saturating_sub(from)).unwrap_or(0));
        let seq = events.last().map_or(from, |e| e.seq);
        match self.store.save_checkpoint((&self.live.run_id, self.live.claim), what, &events, seq) {
            Ok(()) => {
                self.stored_seq.store(seq, Ordering::SeqCst);
                *stored = Some(match (stored.take(), number) {
                    (Some(s), Some(number)) => Stored {
                        at,
                        workspace: workspace_now,
                        parts: number,
                        parts_bytes: s.parts_bytes + text.len(),
                        ..s
                    },
                    _ => Stored {
                        at,
                        rewrites,
                        workspace: workspace_now,
                        base_bytes: text.len(),
                        parts: 0,
                        parts_bytes: 0,
                    },
                });
                Written::Yes
            }
            Err(e) => {
                // Whether it landed is not known: the next write is whole.
                *stored = None;
                if number.is_some() && !matches!(e, crate::store::StoreError::Fenced(_)) {
                    tracing::info!(run = %self.live.run_id, "journal part not stored ({e}): the whole checkpoint instead");
                    return Written::PartRefused;
                }
                tracing::warn!(run = %self.live.run_id, "checkpoint not stored: {e}");
                Written::No
            }
        }
    }
}

/// What one write did.
enum Written {
    Yes,
    /// A part was not stored (nothing was): write the whole checkpoint.
    PartRefused,
    No,
    /// Over a cap: the run is no longer checkpointed ([`DurableRun::stop`]).
    Stop,
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
