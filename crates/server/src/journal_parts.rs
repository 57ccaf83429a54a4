//! The append-only journal of a live run (issue 17). At each safe point a
//! live run on PostgreSQL appends what its journal gained since the safe
//! point before ([`JournalPart`], a row of `run_journal`) instead of
//! writing its whole checkpoint again, so a safe point costs about the
//! same at a run's 100th tool call as at its first. A whole checkpoint
//! (`runs.checkpoint`, the base) is written at the run's first safe point,
//! after a write that failed, when a plugin's journal was cut back (a
//! resumed run whose plugin asked otherwise than its checkpoint), and when
//! the parts would outgrow the base (or 64 KiB, for a small base: so
//! reading a run back costs at most about twice its checkpoint). A worker that resumes the run applies the
//! parts to the base in order ([`compose`]), each checked against the
//! lengths it says it extends: a part that does not follow its base fails
//! the resume rather than resuming it wrong.

use std::collections::BTreeMap;

use hookbox::contract::{ApprovalRecord, CallRecord};
pub use hookbox::journal::Lengths;
use hookbox::journal::{Checkpoint, ImportValue, ToolRecord};
use hookbox::providers::ModelResponse;
use serde::{Deserialize, Serialize};

use crate::checkpoint::{MAX_CHECKPOINT_BYTES, ParkedRun, read};

/// A workspace's files: relative path and bytes as hex (a folder: a path ending in `/`).
pub type Files = Vec<(String, String)>;

/// The parts after one base may together be as large as the base, or
/// this many bytes (64 KiB) for a small one: past it the next safe point
/// writes the whole checkpoint again.
pub const MIN_PARTS_BYTES: usize = 64 << 10;

/// The most parts stored after one base: past it the next safe point
/// writes the whole checkpoint again.
pub const MAX_PARTS: u32 = 64;

/// What a run's journal gained between two safe points: the entries added
/// to each list (after [`JournalPart::at`]) and the new values of its
/// small fields, which replace the old.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalPart {
    /// The lengths of the checkpoint this part extends.
    pub at: Lengths,
    /// Model responses added.
    pub responses: Vec<ModelResponse>,
    /// Tool outcomes added.
    pub tools: Vec<ToolRecord>,
    /// Import values added, per plugin.
    pub imports: BTreeMap<String, Vec<ImportValue>>,
    /// Hook calls added.
    pub calls: Vec<CallRecord>,
    /// Approval answers added.
    pub approvals: Vec<ApprovalRecord>,
    /// Deliveries added.
    pub deliveries: Vec<(u64, Vec<String>)>,
    /// Tool calls started, added.
    pub started: Vec<String>,
    /// The run's id (the base's: a part of another run is refused).
    pub run_id: String,
    /// The run's turn.
    pub turn: u32,
    /// Each plugin's calls begun.
    pub begun: BTreeMap<String, u64>,
    /// Each plugin's commits written down and not known to have returned.
    pub pending: BTreeMap<String, Vec<(u64, Option<u64>)>>,
    /// Each plugin's state revision its instance knew.
    #[serde(default)]
    pub revisions: BTreeMap<String, u64>,
    /// Hook pauses passed.
    pub pauses: u64,
    /// Set once the run was aborted (it stays so: a part without it keeps the base's).
    pub abort: Option<String>,
    /// The messages injected not yet given to the run.
    pub inbox: Vec<String>,
    /// The workspace's files, when they changed since the checkpoint before.
    pub workspace: Option<Files>,
}

impl JournalPart {
    /// The part that extends a checkpoint of lengths `at` by `tail` (from
    /// `hookbox::RunJournal::checkpoint_after`: its lists hold only what
    /// came after `at`), with the run's `abort`, `inbox` and, when they
    /// changed, its `workspace` files.
    pub fn of(
        at: Lengths,
        tail: Checkpoint,
        (abort, inbox, workspace): (Option<String>, Vec<String>, Option<Files>),
    ) -> Self {
        // Every field named: one added to `Checkpoint` must be added here.
        let Checkpoint {
            run_id,
            turn,
            responses,
            tools,
            imports,
            calls,
            approvals,
            deliveries,
            begun,
            started,
            pending,
            revisions,
            pauses,
            events: _,
        } = tail;
        let imports = imports.into_iter().filter(|(_, values)| !values.is_empty()).collect();
        JournalPart {
            at,
            responses,
            tools,
            imports,
            calls,
            approvals,
            deliveries,
            started,
            run_id,
            turn,
            begun,
            pending,
            revisions,
            pauses,
            abort,
            inbox,
            workspace,
        }
    }

    /// Applies this part to `run`, whose checkpoint must have the lengths it extends.
    ///
    /// Errors: `run`'s lengths are not [`JournalPart::at`], or it is another run's.
    pub fn apply(self, run: &mut ParkedRun) -> Result<(), String> {
        let JournalPart {
            at,
            responses,
            tools,
            imports,
            calls,
            approvals,
            deliveries,
            started,
            run_id,
            turn,
            begun,
            pending,
            revisions,
            pauses,
            abort,
            inbox,
            workspace,
        } = self;
        let cp = &mut run.checkpoint;
        if run_id != cp.run_id {
            return Err("a journal part of another run".into());
        }
        let have = cp.lengths();
        if have != at {
            return Err(format!("a journal part extends {at:?}, but the checkpoint before it has {have:?}"));
        }
        cp.responses.extend(responses);
        cp.tools.extend(tools);
        for (plugin, values) in imports {
            cp.imports.entry(plugin).or_default().extend(values);
        }
        cp.calls.extend(calls);
        cp.approvals.extend(approvals);
        cp.deliveries.extend(deliveries);
        cp.started.extend(started);
        (cp.turn, cp.begun, cp.pending, cp.revisions, cp.pauses) = (turn, begun, pending, revisions, pauses);
        if abort.is_some() {
            run.abort = abort;
        }
        run.inbox = inbox;
        if let Some(workspace) = workspace {
            run.workspace = workspace;
        }
        Ok(())
    }
}

/// A run's checkpoint as stored whole (`base`, the text of a
/// [`ParkedRun`]) with its `parts` (texts of [`JournalPart`], in order)
/// applied: the text of the checkpoint at its last safe point.
///
/// Errors: the base or a part cannot be read, a part does not follow the
/// one before, or the result is over [`MAX_CHECKPOINT_BYTES`].
pub fn compose(base: &str, parts: &[String]) -> Result<String, String> {
    if parts.is_empty() {
        return Ok(base.to_string());
    }
    if parts.len() > usize::try_from(MAX_PARTS).unwrap_or(usize::MAX) {
        return Err(format!("{} journal parts, over {MAX_PARTS}", parts.len()));
    }
    let mut run = read(base)?;
    for (n, text) in parts.iter().enumerate() {
        if text.len() > MAX_CHECKPOINT_BYTES {
            return Err(format!("journal part {} is {} bytes, over {MAX_CHECKPOINT_BYTES}", n + 1, text.len()));
        }
        let part: JournalPart =
            serde_json::from_str(text).map_err(|e| format!("journal part {} cannot be read: {e}", n + 1))?;
        part.apply(&mut run).map_err(|e| format!("journal part {}: {e}", n + 1))?;
    }
    let text = serde_json::to_string(&run).map_err(|e| e.to_string())?;
    if text.len() > MAX_CHECKPOINT_BYTES {
        return Err(format!(
            "the checkpoint with its journal parts is {} bytes, over {MAX_CHECKPOINT_BYTES}",
            text.len()
        ));
    }
    Ok(text)
}

/// A hash of a workspace's files (to tell whether they changed).
pub fn workspace_hash(files: &[(String, String)]) -> [u8; 32] {
    let len = |bytes: &[u8]| u64::try_from(bytes.len()).unwrap_or(u64::MAX).to_le_bytes();
    let mut hasher = blake3::Hasher::new();
    for (path, hex) in files {
        hasher.update(&len(path.as_bytes()));
        hasher.update(path.as_bytes());
        hasher.update(&len(hex.as_bytes()));
        hasher.update(hex.as_bytes());
    }
    *hasher.finalize().as_bytes()
}

#[cfg(test)]
#[path = "journal_parts_tests.rs"]
mod tests;
