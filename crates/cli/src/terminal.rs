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
/// An approval (a hook's `ask-approval` at `before-tool-call`) is asked the
/// same way, per call: the tool, its arguments and each hook's reason, then
/// `y` approves, a JSON object approves with those arguments, anything else
/// denies.
pub(super) fn spawn_confirm(input: Arc<Mutex<Input>>, handle: RunHandle, out: UnboundedSender<String>) {
    std::thread::spawn(move || {
        while !handle.finished() {
            if let Some(approval) = handle.approvals().into_iter().next() {
                confirm_approval(&input, &handle, &approval, &out);
                continue;
            }
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

/// Characters of a tool call's arguments or a hook's reason shown at the prompt.
const SHOWN_CHARS: usize = 2_000;

/// Asks for one approval on the terminal and answers it.
fn confirm_approval(
    input: &Mutex<Input>,
    handle: &RunHandle,
    approval: &hookbox::Approval,
    out: &UnboundedSender<String>,
) {
    let shown = |s: &str| hookbox::contract::truncate_ellipsis(s, SHOWN_CHARS);
    let _ = out.send(format!(
        "[approval] tool `{}` wants to run with {}",
        shown(&approval.call.name),
        shown(&approval.call.arguments)
    ));
    for r in &approval.reasons {
        let _ = out.send(format!("[approval]   asked by `{}`: {}", shown(&r.plugin), shown(&r.reason)));
    }
    let _ = out.send("[approval] approve? [y/N, or the arguments to run it with as a JSON object]".to_string());
    let line = read_line(input).unwrap_or_default();
    let line = line.trim();
    let answer = match line {
        "y" | "Y" | "yes" => hookbox::ApprovalAnswer::Approve,
        l if l.starts_with('{') => hookbox::ApprovalAnswer::ApproveWithArguments(l.to_string()),
        _ => hookbox::ApprovalAnswer::Deny(Some("Tool call declined at the confirmation prompt.".into())),
    };
    let said = match &answer {
        hookbox::ApprovalAnswer::Approve => "approved".to_string(),
        hookbox::ApprovalAnswer::ApproveWithArguments(a) => format!("approved with {}", shown(a)),
        hookbox::ApprovalAnswer::Deny(_) => "denied".to_string(),
    };
    match handle.answer(&approval.id, answer) {
        Ok(()) => {
            let _ = out.send(format!("[approval] {said}"));
        }
        // Not an object: asked again. Already answered or the run ended: said.
        Err(e) => {
            let _ = out.send(format!("[approval] not applied: {e}"));
        }
    }
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
/// run: abort it with a reason that says so instead of hanging. An approval
/// nobody can answer is denied the same way (the run goes on).
pub(super) fn spawn_unanswerable_pause_guard(handle: RunHandle) {
    std::thread::spawn(move || {
        while !handle.finished() {
            for approval in handle.approvals() {
                let why = "Tool call declined: it needs an approval and nothing can answer it (use --confirm).";
                let _ = handle.answer(&approval.id, hookbox::ApprovalAnswer::Deny(Some(why.into())));
            }
            if handle.paused() {
                handle
                    .abort("the run paused and nothing can resume it: use --confirm, or set [agent] pause_timeout_ms");
                return;
            }
            std::thread::sleep(POLL);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox::contract::EventKind;
    use hookbox::providers::replay::ReplayProvider;
    use hookbox::sandbox::testing::ScriptedHook;
    use hookbox::{Agent, AgentConfig, ApprovalAnswer, Directive, HookChain, HookHandler, Workspace};

    /// `--confirm` asks per call (issue 14 item 2): the tool, its arguments and
    /// the hook's reason, then `n` denies and a JSON object approves with
    /// those arguments.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn confirm_answers_each_approval_on_the_terminal() {
        let ws = tempfile::tempdir().expect("workspace");
        std::fs::write(ws.path().join(".env"), "SECRET=1").expect("write");
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/demo/session.json");
        let provider = Arc::new(ReplayProvider::from_file(&demo).expect("demo session"));
        let tools = hookbox::workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
        let agent = Agent::new(provider, tools, AgentConfig::default());
        let ask = || Directive::AskApproval("touches \u{1b}[2Jfiles".into());
        let guard =
            ScriptedHook::new("guard").on(EventKind::BeforeToolCall, ask()).on(EventKind::BeforeToolCall, ask());
        let mut chain = HookChain::new(vec![Box::new(guard) as Box<dyn HookHandler>]);
        let input: Input = Box::new(std::io::Cursor::new(b"n\n{\"path\": \"ok.txt\"}\n".to_vec()));
        let handle = RunHandle::new();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        spawn_confirm(Arc::new(Mutex::new(input)), handle.clone(), tx);
        let r = agent.run_with_handle("go", &mut chain, handle).await.expect("run");
        let answers: Vec<_> = r.approvals.iter().map(|a| a.answer.clone()).collect();
        assert_eq!(
            answers,
            vec![
                ApprovalAnswer::Deny(Some("Tool call declined at the confirmation prompt.".into())),
                ApprovalAnswer::ApproveWithArguments(r#"{"path": "ok.txt"}"#.into()),
            ]
        );
        assert!(ws.path().join(".env").exists() && ws.path().join("ok.txt").exists());
        let mut lines = Vec::new();
        while let Ok(line) = rx.try_recv() {
            lines.push(line);
        }
        let text = lines.join("\n");
        assert!(text.contains(r#"[approval] tool `delete_file` wants to run with {"path": ".env"}"#), "{text}");
        assert!(text.contains("asked by `guard`: touches"), "{text}");
        // The reason's control characters reach the terminal escaped (the run loop prints through escape::line).
        let printed = crate::escape::line(&text);
        assert!(!printed.contains('\u{1b}'), "{printed}");
    }
}
