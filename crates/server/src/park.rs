//! Durable pause (issue 17): on a database several workers share, a run
//! that waits for an approval is parked. Its checkpoint (the run journal so
//! far: model responses, tool outcomes, hook import values and calls,
//! approval answers; what it was started with; its workspace's files) is
//! stored with status `parked`, and its task, hooks and instances are
//! dropped: a parked run costs no worker anything. The answer, given on any
//! worker, is written into the checkpoint and makes the run `resumable`; a
//! worker claims it (`FOR UPDATE SKIP LOCKED`) and resumes it by
//! re-executing the checkpoint (the model is not asked again, no tool runs
//! again, hooks get their journaled values and commit no state again), then
//! goes on live (`crate::resume`). Stream subscribers see one stream: the
//! resumed run's events follow the stored ones, and the re-execution adds
//! none. Answers and aborts of parked runs: `crate::steer`.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use hookbox::RunJournal;
use hookbox::contract::Approval;
use hookbox::journal::{Checkpoint, from_hex, to_hex};
use hookbox::providers::record::RecordingProvider;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::live::LiveRun;
use crate::state::AppState;
use crate::store::ServerStore;

/// The most bytes of workspace files a parked run stores; a run whose
/// workspace is larger waits in its process instead.
pub const MAX_PARKED_WORKSPACE_BYTES: u64 = 8 << 20;
/// The most workspace files (and folders) a parked run stores.
pub const MAX_PARKED_WORKSPACE_FILES: usize = 1_000;
/// The largest checkpoint text a worker parks or reads back, in bytes:
/// 32 MiB (reading one back takes several times its size in memory; a
/// larger run waits in its worker).
pub const MAX_CHECKPOINT_BYTES: usize = 32 << 20;

/// What a run was started with: enough to start it again elsewhere.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// The user's prompt.
    pub prompt: String,
    /// The system prompt.
    pub system: Option<String>,
    /// The model's name in the server's allow-list.
    pub model: String,
    /// The chain: each plugin's name and the version the run started with.
    pub plugins: Vec<(String, i64)>,
    /// The stored session id (`TENANT:ID`).
    pub session_key: String,
}

/// A parked run as stored (`runs.checkpoint`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParkedRun {
    /// What it was started with.
    pub spec: RunSpec,
    /// Its journal at the park.
    pub checkpoint: Checkpoint,
    /// The approval it waits for.
    pub approval: Approval,
    /// Its workspace's files at the park: relative path and bytes as hex
    /// (a folder is a path ending in `/`).
    pub workspace: Vec<(String, String)>,
    /// Set when it was aborted while parked: the resumed run ends aborted.
    pub abort: Option<String>,
}

/// What a run that can park keeps: its journal and recording model, what it
/// was started with, and its workspace folder.
pub struct Park {
    /// The run's journal.
    pub journal: Arc<RunJournal>,
    /// The model, recording its responses.
    pub recorder: Arc<RecordingProvider>,
    /// What the run was started with.
    pub spec: RunSpec,
    /// The run's workspace folder.
    pub dir: PathBuf,
}

/// The files of `dir` as a parked run stores them; `None` when over
/// [`MAX_PARKED_WORKSPACE_BYTES`] or [`MAX_PARKED_WORKSPACE_FILES`] or unreadable.
fn snapshot(dir: &Path) -> Option<Vec<(String, String)>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>, bytes: &mut u64) -> Option<()> {
        for entry in std::fs::read_dir(dir).ok()? {
            let entry = entry.ok()?;
            let kind = entry.file_type().ok()?;
            let path = entry.path();
            let rel = path.strip_prefix(root).ok()?.to_str()?.to_string();
            if out.len() >= MAX_PARKED_WORKSPACE_FILES {
                return None;
            }
            if kind.is_dir() {
                out.push((format!("{rel}/"), String::new()));
                walk(root, &path, out, bytes)?;
            } else if kind.is_file() {
                *bytes = bytes.saturating_add(entry.metadata().ok()?.len());
                if *bytes > MAX_PARKED_WORKSPACE_BYTES {
                    return None;
                }
                out.push((rel, to_hex(&std::fs::read(&path).ok()?)));
            }
        }
        Some(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out, &mut 0)?;
    Some(out)
}

/// Writes a parked run's workspace files into `dir` (emptied first).
///
/// Errors: a path that is not a plain relative one, bytes that are not hex, or an I/O error.
pub fn restore(dir: &Path, files: &[(String, String)]) -> Result<(), String> {
    if files.len() > MAX_PARKED_WORKSPACE_FILES {
        return Err(format!("{} workspace files, over {MAX_PARKED_WORKSPACE_FILES}", files.len()));
    }
    let bytes: u64 = files.iter().map(|(_, hex)| u64::try_from(hex.len() / 2).unwrap_or(u64::MAX)).sum();
    if bytes > MAX_PARKED_WORKSPACE_BYTES {
        return Err(format!("{bytes} bytes of workspace files, over {MAX_PARKED_WORKSPACE_BYTES}"));
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| e.to_string())?;
    }
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    for (rel, hex) in files {
        let path = Path::new(rel.trim_end_matches('/'));
        if rel.is_empty() || !path.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(format!("workspace path {:?} is not a plain relative path", rel.escape_debug().to_string()));
        }
        let target = dir.join(path);
        if rel.ends_with('/') {
            std::fs::create_dir_all(&target).map_err(|e| e.to_string())?;
        } else {
            let bytes = from_hex(hex).ok_or("workspace file bytes are not hex")?;
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
            }
            std::fs::write(&target, bytes).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Parks the run `live` waiting for `approval` (`data` as the API shows it):
/// stores its checkpoint and its stream so far. True when it parked (the
/// caller then drops the run); false when it goes on waiting here (a
/// workspace too large to store, a command that arrived, the database
/// failing: each logged).
pub async fn park(state: &Arc<AppState>, live: &Arc<LiveRun>, park: &Park, approval: &Approval, data: &Value) -> bool {
    let dir = park.dir.clone();
    let Ok(Some(workspace)) = tokio::task::spawn_blocking(move || snapshot(&dir)).await else {
        tracing::info!(run = %live.run_id, "not parked: the workspace is over the size a parked run stores");
        return false;
    };
    let parked = ParkedRun {
        spec: park.spec.clone(),
        checkpoint: park.journal.checkpoint(park.recorder.responses()),
        approval: approval.clone(),
        workspace,
        abort: None,
    };
    let Ok(text) = serde_json::to_string(&parked) else { return false };
    if text.len() > MAX_CHECKPOINT_BYTES || !park.journal.cut().is_empty() {
        // Too large to read back, or a plugin's values were cut: it could not resume exactly.
        tracing::info!(run = %live.run_id, "not parked: its checkpoint is over the size or a plugin's journal was cut");
        return false;
    }
    let id = approval.id.clone();
    let handle = &live.handle;
    // Still waiting for this answer, and nothing applied meanwhile that the park would drop.
    let waiting = || handle.approvals().iter().any(|a| a.id == id) && handle.queued() == 0 && !handle.paused();
    if !live.try_park(waiting) {
        return false;
    }
    live.push("status", &json!({"status": "parked", "approval": approval.id}));
    let events = live.events_after(0, usize::MAX);
    let (tenant, rid, data) = (live.tenant, live.run_id.clone(), data.clone());
    let write = move |s: &dyn ServerStore| s.park_run(tenant, &rid, &events, &text, (&id, &data));
    match state.db(write).await {
        Ok(true) => true,
        Ok(false) => {
            live.unpark();
            live.push("status", &json!({"status": "waiting-approval"}));
            false
        }
        Err(e) => {
            // A park whose commit was not acknowledged may have been made: the store says.
            let rid = live.run_id.clone();
            if let Ok(Some(run)) = state.db(move |s| s.run(tenant, &rid)).await
                && matches!(run.status.as_str(), "parked" | "resumable")
            {
                return true;
            }
            tracing::warn!(run = %live.run_id, "not parked, waiting here: {}", e.body.message);
            live.unpark();
            live.push("status", &json!({"status": "waiting-approval"}));
            false
        }
    }
}

/// A stored checkpoint, read back (it is untrusted: size-capped, strictly typed).
pub fn read(text: &str) -> Result<ParkedRun, String> {
    if text.len() > MAX_CHECKPOINT_BYTES {
        return Err(format!("the checkpoint is {} bytes, over {MAX_CHECKPOINT_BYTES}", text.len()));
    }
    serde_json::from_str(text).map_err(|e| format!("the checkpoint cannot be read: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_snapshot_restores_and_refuses_escaping_paths() {
        let from = tempfile::tempdir().expect("dir");
        std::fs::create_dir(from.path().join("sub")).expect("mkdir");
        std::fs::write(from.path().join("sub/a.txt"), b"hello").expect("write");
        std::fs::write(from.path().join("b.bin"), [0u8, 255]).expect("write");
        let files = snapshot(from.path()).expect("snapshot");
        let to = tempfile::tempdir().expect("dir");
        let target = to.path().join("ws");
        restore(&target, &files).expect("restore");
        assert_eq!(std::fs::read(target.join("sub/a.txt")).expect("read"), b"hello");
        assert_eq!(std::fs::read(target.join("b.bin")).expect("read"), [0u8, 255]);
        for bad in ["../x", "/etc/x", "a/../../x", ""] {
            let e = restore(&target, &[(bad.to_string(), "00".to_string())]).expect_err(bad);
            assert!(e.contains("plain relative path"), "{bad}: {e}");
        }
        assert!(!to.path().join("x").exists());
    }
}
