//! Checkpoints as the server stores them (issue 17): a run's journal at a
//! safe point or a park ([`hookbox::journal::Checkpoint`]), what the run
//! was started with ([`RunSpec`]) and its workspace's files, as one JSON
//! text ([`ParkedRun`]) in `runs.checkpoint`. Written by `crate::park` (a
//! run parked for an approval) and `crate::durable` (a live run at its
//! safe points); read back, untrusted, by `crate::resume`.

use std::path::{Component, Path};

use hookbox::contract::Approval;
use hookbox::journal::{Checkpoint, from_hex, to_hex};
use serde::{Deserialize, Serialize};

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
    /// The approval it waits for (none: a checkpoint of a live run, taken
    /// at a safe point for crash recovery, `crate::durable`).
    #[serde(default)]
    pub approval: Option<Approval>,
    /// Its workspace's files at the park: relative path and bytes as hex
    /// (a folder is a path ending in `/`).
    pub workspace: Vec<(String, String)>,
    /// Set when it was aborted while parked: the resumed run ends aborted.
    pub abort: Option<String>,
    /// True when it parked in a pause (a hook's `pause` directive or the
    /// API's): `POST /v1/runs/{id}/resume` makes it resumable.
    #[serde(default)]
    pub paused: bool,
    /// True when the pause it parked in is the API's alone (no hook asked
    /// for it): its resume counts no hook pause as passed, and the resumed
    /// run, re-executed up to where it paused, goes on from there.
    #[serde(default)]
    pub api_pause: bool,
    /// The run's model spend already counted against its tenant's day (at
    /// its parks), in USD: its end counts only the rest.
    #[serde(default)]
    pub counted_usd: f64,
    /// True for a run queued before it started (`crate::queue`): its
    /// checkpoint is empty and it has no workspace yet; the worker that
    /// claims it starts it afresh.
    #[serde(default)]
    pub queued: bool,
    /// Messages injected while it was parked (or, in a checkpoint of a
    /// resumed run, not yet given to it), in order: the resumed run gets
    /// them once it is past its checkpoint, at its next turn boundary.
    #[serde(default)]
    pub inbox: Vec<String>,
}

/// A stored spend figure read back: a number of USD, 0 or more (anything
/// else, from a corrupt row, reads as 0).
pub fn usd(value: f64) -> f64 {
    if value.is_finite() && value > 0.0 { value } else { 0.0 }
}

/// `parked` as stored, or `None` when it could not resume exactly (a
/// plugin's journal of `journal` was cut) or is over [`MAX_CHECKPOINT_BYTES`].
pub fn encode(parked: &ParkedRun, journal: &hookbox::RunJournal) -> Option<String> {
    if !journal.cut().is_empty() {
        return None;
    }
    serde_json::to_string(parked).ok().filter(|text| text.len() <= MAX_CHECKPOINT_BYTES)
}

/// The files of `dir` as a parked run stores them; `None` when over
/// [`MAX_PARKED_WORKSPACE_BYTES`] or [`MAX_PARKED_WORKSPACE_FILES`] or unreadable.
pub fn snapshot(dir: &Path) -> Option<Vec<(String, String)>> {
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
