//! Ctrl-C (SIGINT) and SIGTERM during `hookbox run --journal J --record R`:
//! the first signal aborts the run at its next safe point, the partial
//! record and journal are written and the command exits 130 (143 for
//! SIGTERM); a second signal exits at once and leaves no temporary file.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use hookbox_tests::{CHANCE, CONFIRM_AFTER_N, DEMO_PROMPT, demo_session, demo_workspace};

/// Starts the `hookbox` process on the demo with `config`, a journal and a
/// record in `dir`; its stderr lines come on the receiver.
fn start(dir: &Path, ws: &Path, config: &Path, extra: &[&str]) -> (Child, Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookbox-under-test"))
        .args(["run", "--model", &format!("replay:{}", demo_session().display())])
        .args(["--workspace", ws.to_str().expect("utf-8"), "--config", config.to_str().expect("utf-8")])
        .args(["--journal", dir.join("run.journal.json").to_str().expect("utf-8")])
        .args(["--record", dir.join("run.record.json").to_str().expect("utf-8")])
        .args(extra)
        .arg(DEMO_PROMPT)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hookbox");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// Waits for a stderr line containing `needle`; returns every line seen.
fn wait_for(rx: &Receiver<String>, needle: &str, seen: &mut Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            let found = line.contains(needle);
            seen.push(line);
            if found {
                return;
            }
        }
    }
    panic!("no `{needle}` on stderr within 60 s:\n{}", seen.join("\n"));
}

fn kill(child: &Child, signal: &str) {
    let status = Command::new("kill").args([signal, &child.id().to_string()]).status().expect("run kill");
    assert!(status.success(), "kill {signal} failed");
}

/// Waits for the process to end (at most `limit`); returns its exit code.
fn wait(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("hookbox did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".hookbox-"))
        .collect()
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

#[test]
fn sigint_aborts_the_run_and_writes_the_partial_record_and_journal() {
    for (signal, code) in [("-INT", 130), ("-TERM", 143)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = demo_workspace();
        // The run pauses at the first tool result and waits for an answer that never comes.
        let config = dir.path().join("hookbox.toml");
        std::fs::write(&config, format!("[[plugins]]\npath = {CONFIRM_AFTER_N:?}\n[plugins.config]\nn = 1\n"))
            .expect("write config");
        let (mut child, rx) = start(dir.path(), ws.path(), &config, &["--confirm"]);
        let mut seen = Vec::new();
        wait_for(&rx, "continue? [y/N]", &mut seen);
        kill(&child, signal);
        assert_eq!(wait(&mut child, Duration::from_secs(30)), Some(code), "{signal}");
        seen.extend(rx.try_iter());
        let stderr = seen.join("\n");
        assert!(stderr.contains("aborting the run at its next safe point"), "{stderr}");
        let journal = json(&dir.path().join("run.journal.json"));
        assert_eq!(journal["format"], "hookbox-journal", "{stderr}");
        assert!(journal["calls"].as_array().is_some_and(|c| !c.is_empty()), "the calls so far are journaled");
        let record = json(&dir.path().join("run.record.json"));
        assert!(record["responses"].as_array().is_some_and(|r| !r.is_empty()), "{record}");
        assert!(temporaries(dir.path()).is_empty(), "temporaries left: {:?}", temporaries(dir.path()));
        drop(child.stdin.take());
    }
}

#[test]
fn a_second_sigint_exits_at_once_and_removes_the_temporaries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    // `chance` sleeps 30 s in its model-response call: no safe point comes for a while.
    let config = dir.path().join("hookbox.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugins]]\npath = {CHANCE:?}\nlimits = {{ deadline_ms = 60000 }}\n\
             [plugins.config]\nsleep_ms = 30000\n"
        ),
    )
    .expect("write config");
    let (mut child, rx) = start(dir.path(), ws.path(), &config, &[]);
    let mut seen = Vec::new();
    wait_for(&rx, "[event] iteration-start", &mut seen);
    std::thread::sleep(Duration::from_millis(1000));
    assert!(!temporaries(dir.path()).is_empty(), "the result files' temporaries exist during the run");
    kill(&child, "-INT");
    wait_for(&rx, "aborting the run at its next safe point", &mut seen);
    let started = Instant::now();
    kill(&child, "-INT");
    assert_eq!(wait(&mut child, Duration::from_secs(10)), Some(130));
    assert!(started.elapsed() < Duration::from_secs(10), "exited at once");
    assert!(temporaries(dir.path()).is_empty(), "temporaries left: {:?}", temporaries(dir.path()));
    assert!(!dir.path().join("run.journal.json").exists() && !dir.path().join("run.record.json").exists());
}
