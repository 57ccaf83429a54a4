//! `--inbox` and `--confirm`: threads that steer the run through its handle.

use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use hookbox::RunHandle;

use crate::Input;
use crate::paths::MAX_INBOX_READ_BYTES;

const POLL: Duration = Duration::from_millis(50);

/// One line of input (lossy UTF-8, without its line end); `None` at the end.
fn read_line(input: &Mutex<Input>) -> Option<String> {
    let mut line = Vec::new();
    let mut guard = input.lock().ok()?;
    match guard.read_until(b'\n', &mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(String::from_utf8_lossy(&line).trim_end_matches(['\n', '\r']).to_string()),
    }
}

/// Queues `line`; a line the run can no longer take is said on stderr, never dropped silently.
fn inject(handle: &RunHandle, line: &str, out: &UnboundedSender<String>) {
    if line.trim().is_empty() {
        return;
    }
    match handle.inject(line) {
        Ok(()) => {
            let _ = out.send(format!("[inbox] queued: {line}"));
        }
        Err(e) => {
            let text = format!("[inbox] not queued ({e}): {line}");
            // After the run the trace channel may be closed: fall back to stderr.
            if out.send(text.clone()).is_err() {
                eprintln!("{}", crate::escape::line(&text));
            }
        }
    }
}

/// A file inbox: the complete lines from `offset` on (lossy UTF-8) and the new offset.
/// A file that shrank (truncated or replaced) is read again from its start.
fn new_lines(path: &Path, offset: u64, out: &UnboundedSender<String>) -> (Vec<String>, u64) {
    let Ok(mut file) = std::fs::File::open(path) else { return (Vec::new(), offset) };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let offset = if len < offset {
        let _ = out.send(format!("[inbox] {} shrank: reading it again from the start", path.display()));
        0
    } else {
        offset
    };
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(offset)).is_err()
        || (&mut file).take(MAX_INBOX_READ_BYTES).read_to_end(&mut bytes).is_err()
    {
        return (Vec::new(), offset);
    }
    let Some(last_newline) = bytes.iter().rposition(|b| *b == b'\n') else {
        if bytes.len() as u64 == MAX_INBOX_READ_BYTES {
            // One line longer than a whole read: said, and skipped to go on with the next.
            let _ = out.send(format!(
                "[inbox] {}: a line longer than {} MiB is skipped",
                path.display(),
                MAX_INBOX_READ_BYTES >> 20
            ));
            return (Vec::new(), offset + MAX_INBOX_READ_BYTES);
        }
        return (Vec::new(), offset);
    };
    let lines = bytes[..last_newline]
        .split(|b| *b == b'\n')
        .map(|l| String::from_utf8_lossy(l).trim_end_matches('\r').to_string())
        .collect();
    (lines, offset + last_newline as u64 + 1)
}

/// Injects what a file inbox holds now, before the run starts (so it cannot
/// race the run), and returns where the watcher goes on from.
pub(super) fn read_inbox_now(path: &Path, handle: &RunHandle, out: &UnboundedSender<String>) -> u64 {
    let (lines, offset) = new_lines(path, 0, out);
    for line in &lines {
        inject(handle, line, out);
    }
    offset
}

/// Injects each new line of `path` (`-`: the input) until the run ends.
pub(super) fn spawn_inbox(
    path: PathBuf,
    start: u64,
    input: Arc<Mutex<Input>>,
    handle: RunHandle,
    out: UnboundedSender<String>,
) {
    std::thread::spawn(move || {
        if path.as_os_str() == "-" {
            while let Some(line) = read_line(&input) {
                inject(&handle, &line, &out);
                if handle.finished() {
                    break;
                }
            }
            return;
        }
        // A file: poll for appended lines (like `tail -F`: a replaced file is reopened).
        let mut offset = start;
        while !handle.finished() {
            let (lines, next) = new_lines(&path, offset, &out);
            offset = next;
            for line in &lines {
                inject(&handle, line, &out);
            }
            std::thread::sleep(POLL);
        }
        // Lines that arrived as the run ended are reported, not lost.
        for line in new_lines(&path, offset, &out).0 {
            inject(&handle, &line, &out);
        }
    });
}

/// When the run pauses, asks on the terminal and resumes or aborts. Each
/// answer is tagged with the pause it was asked for ([`RunHandle::pause_id`]):
/// an answer that comes after that pause already ended (a pause timeout) is
/// dropped with a note, never applied to a later pause.
pub(super) fn spawn_confirm(input: Arc<Mutex<Input>>, handle: RunHandle, out: UnboundedSender<String>) {
    std::thread::spawn(move || {
        while !handle.finished() {
            let Some(pause) = handle.pause_id() else {
                std::thread::sleep(POLL);
                continue;
            };
            let _ = out.send("[confirm] the run is paused: continue? [y/N]".to_string());
            let answer = read_line(&input);
            let yes = answer.as_deref().is_some_and(|a| matches!(a.trim(), "y" | "Y" | "yes"));
            if yes && handle.resume_pause(pause) {
                let _ = out.send("[confirm] resuming".to_string());
            } else if !yes && handle.abort_pause(pause, "declined at the confirmation prompt") {
                let _ = out.send("[confirm] aborting".to_string());
                return;
            } else {
                let _ = out.send("[confirm] the pause that answer was for already ended; it is ignored".to_string());
            }
        }
    });
}

/// A replay has no one to answer a pause: resume every pause at once.
pub(super) fn spawn_pause_resumer(handle: RunHandle) {
    std::thread::spawn(move || {
        while !handle.finished() {
            if handle.paused() {
                handle.resume();
            }
            std::thread::sleep(POLL);
        }
    });
}

/// Without `--confirm` or a pause timeout nothing could resume a paused
/// run: abort it with a reason that says so instead of hanging.
pub(super) fn spawn_unanswerable_pause_guard(handle: RunHandle) {
    std::thread::spawn(move || {
        while !handle.finished() {
            if handle.paused() {
                handle
                    .abort("the run paused and nothing can resume it: use --confirm, or set [agent] pause_timeout_ms");
                return;
            }
            std::thread::sleep(POLL);
        }
    });
}
