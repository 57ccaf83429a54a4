//! The README's "Run as a service" walk-through (issue 15, item 11), run
//! verbatim: the shell block between `<!-- walkthrough:start -->` and
//! `<!-- walkthrough:end -->`, with the `hookbox` binary under test, the
//! plugins `tests/build.rs` built and a free port.

use std::process::Command;
use std::time::{Duration, Instant};

use hookbox_tests::{DENY_TOOLS, repo_root};

fn walkthrough() -> String {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap_or_default();
    let start = readme.find("<!-- walkthrough:start -->").unwrap_or_else(|| panic!("no walkthrough in README.md"));
    let end = readme.find("<!-- walkthrough:end -->").unwrap_or_else(|| panic!("no walkthrough end in README.md"));
    let block = &readme[start..end];
    let body_start = block.find("```sh\n").map(|i| i + 6).unwrap_or_else(|| panic!("no ```sh block"));
    let body_end = block.rfind("```").unwrap_or_else(|| panic!("no block end"));
    block[body_start..body_end].to_string()
}

#[test]
fn the_readme_walkthrough_runs_verbatim() {
    let script = walkthrough();
    assert!(script.contains("hookbox") || script.contains("$HOOKBOX"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"));
    let plugins = std::path::Path::new(DENY_TOOLS).parent().unwrap_or_else(|| panic!("plugin dir"));
    let mut child = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(repo_root())
        .env("HOOKBOX", env!("CARGO_BIN_EXE_hookbox-under-test"))
        .env("PLUGINS", plugins)
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("bash: {e}"));
    let started = Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        if started.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            panic!("the walkthrough did not finish within 180 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the walkthrough failed ({}):\n{stdout}\n{stderr}", out.status);
    assert!(stdout.contains("'directive': 'continue'"), "no trial call: {stdout}");
    assert!(stdout.lines().any(|l| l.trim_end().ends_with("event: end")), "no end event: {stdout}");
    assert!(stdout.lines().any(|l| l.trim() == "completed"), "the run did not complete: {stdout}");
    assert!(stdout.contains("deny-tools: `delete_file` on `.env` is denied"), "{stdout}");
}
