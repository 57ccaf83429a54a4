//! Steering a run from the terminal: `hookbox run --confirm` asks when the run
//! pauses and resumes or aborts; `--inbox FILE` injects the file's lines into
//! the live run.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use hookbox_tests::{CONFIRM_AFTER_N, DEMO_PROMPT, SCRIPTED, cli_with_input, demo_session, demo_workspace};

fn config_file(dir: &tempfile::TempDir, body: &str) -> String {
    let path = dir.path().join("hookbox.toml");
    std::fs::write(&path, body).expect("write config");
    path.display().to_string()
}

fn run_args(config: &str, ws: &tempfile::TempDir, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "run".to_string(),
        "--model".into(),
        format!("replay:{}", demo_session().display()),
        "--config".into(),
        config.into(),
        "--workspace".into(),
        ws.path().display().to_string(),
        "--json".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(DEMO_PROMPT.into());
    args
}

fn confirm_config(dir: &tempfile::TempDir) -> String {
    config_file(dir, &format!("[[plugins]]\npath = {CONFIRM_AFTER_N:?}\n[plugins.config]\nn = 1\n"))
}

#[test]
fn confirm_resumes_on_yes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let out = cli_with_input(&run_args(&confirm_config(&dir), &ws, &["--confirm"]), "y\nyes\n");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stderr.matches("continue? [y/N]").count(), 2, "one question per tool result: {}", out.stderr);
    assert!(ws.path().join("test.txt").exists(), "both tools ran");
}

#[test]
fn confirm_aborts_on_anything_else() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let out = cli_with_input(&run_args(&confirm_config(&dir), &ws, &["--confirm"]), "n\n");
    assert_eq!(out.code, 1, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["error"]["kind"], "aborted");
    assert_eq!(v["error"]["reason"], "declined at the confirmation prompt");
    assert!(!ws.path().join(".env").exists(), "the first tool ran before the pause");
    assert!(!ws.path().join("test.txt").exists(), "the second never ran");
}

#[test]
fn confirm_with_no_answer_aborts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let out = cli_with_input(&run_args(&confirm_config(&dir), &ws, &["--confirm"]), "");
    assert_eq!(out.code, 1, "{}", out.stderr);
}

#[test]
fn inbox_lines_are_injected_into_the_live_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    // The run pauses at run-start for up to 300 ms (then resumes by itself): time for the
    // inbox thread to pick the line up, so delivery does not depend on scheduling luck.
    let config = config_file(
        &dir,
        &format!(
            "[agent]\npause_timeout_ms = 300\non_pause_timeout = \"resume\"\n[[plugins]]\npath = {SCRIPTED:?}\n[plugins.config]\nrun-start = \"pause\"\n"
        ),
    );
    let inbox = dir.path().join("inbox.txt");
    std::fs::write(&inbox, "only touch test.txt\n").expect("write inbox");
    let out = cli_with_input(&run_args(&config, &ws, &["--inbox", &inbox.display().to_string()]), "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["injected_messages"], serde_json::json!(["only touch test.txt"]), "{}", out.stderr);
    assert!(out.stderr.contains("[inbox] queued: only touch test.txt"));
}

#[test]
fn two_stdin_readers_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let out = cli_with_input(&run_args(&confirm_config(&dir), &ws, &["--confirm", "--inbox", "-"]), "");
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("stdin"), "{}", out.stderr);
}

#[test]
fn inbox_lines_present_before_the_run_are_always_delivered_even_with_invalid_utf8() {
    for _ in 0..5 {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = demo_workspace();
        let config = config_file(&dir, "[agent]\n");
        let inbox = dir.path().join("inbox.txt");
        std::fs::write(&inbox, b"first line\nbad \xff byte\nthird\n").expect("write inbox");
        let out = cli_with_input(&run_args(&config, &ws, &["--inbox", &inbox.display().to_string()]), "");
        assert_eq!(out.code, 0, "{}", out.stderr);
        let v = out.json();
        assert_eq!(
            v["injected_messages"],
            serde_json::json!(["first line", "bad \u{fffd} byte", "third"]),
            "{}",
            out.stderr
        );
    }
}

#[test]
fn a_pause_nothing_can_answer_aborts_with_a_reason_instead_of_hanging() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let config = config_file(
        &dir,
        &format!("[[plugins]]\npath = {SCRIPTED:?}\n[plugins.config]\ntool-call-result = \"pause\"\n"),
    );
    let out = cli_with_input(&run_args(&config, &ws, &[]), "");
    assert_eq!(out.code, 1, "{}", out.stderr);
    let v = out.json();
    assert!(v["error"]["reason"].as_str().is_some_and(|r| r.contains("--confirm")), "{}", v["error"]);
}

/// Terminal input that gives each chunk after its delay (from the read that asks for it).
struct SlowInput {
    chunks: std::collections::VecDeque<(std::time::Duration, Vec<u8>)>,
}

impl std::io::Read for SlowInput {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some((delay, bytes)) = self.chunks.pop_front() else { return Ok(0) };
        std::thread::sleep(delay);
        let n = bytes.len().min(buf.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        if n < bytes.len() {
            self.chunks.push_front((std::time::Duration::ZERO, bytes[n..].to_vec()));
        }
        Ok(n)
    }
}

#[test]
fn an_answer_that_comes_after_a_pause_timeout_is_not_applied_to_the_next_pause() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    // Two pauses (one per tool result), each resumed by a 1 s timeout. The "n" meant
    // for the first pause comes 1.5 s after it was asked: during the second pause.
    let config = config_file(
        &dir,
        &format!(
            "[agent]\npause_timeout_ms = 1000\non_pause_timeout = \"resume\"\n\
             [[plugins]]\npath = {CONFIRM_AFTER_N:?}\n[plugins.config]\nn = 1\n"
        ),
    );
    let input = SlowInput {
        chunks: [
            (std::time::Duration::from_millis(1500), b"n\n".to_vec()),
            (std::time::Duration::ZERO, b"y\n".to_vec()),
        ]
        .into(),
    };
    let mut argv = vec!["hookbox".to_string()];
    argv.extend(run_args(&config, &ws, &["--confirm"]));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = hookbox_cli::main_with_io(argv, Box::new(std::io::BufReader::new(input)), &mut out, &mut err);
    let stderr = String::from_utf8_lossy(&err);
    assert_eq!(code, 0, "the late `n` must not abort the second pause: {stderr}");
    assert!(stderr.contains("[confirm] the pause that answer was for already ended; it is ignored"), "{stderr}");
    assert!(!stderr.contains("[confirm] aborting"), "{stderr}");
    assert!(ws.path().join("test.txt").exists(), "both tools ran");
}
