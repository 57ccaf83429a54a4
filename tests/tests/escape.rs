//! What the host prints is escaped: a plugin's name, its directive values and
//! failure messages reach the terminal trace with every control character
//! rendered visibly (`\x1b`, `\r`, `\u{202e}`), so a plugin cannot clear the
//! screen, erase its tag or print a line that looks like the host's.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use hookbox_tests::{DEMO_PROMPT, SCRIPTED, cli, demo_session, demo_workspace};

/// A character a terminal would act on: C0 (except the line ends the host
/// writes), DEL, C1, the bidi controls.
fn raw_control(c: char) -> bool {
    (c < ' ' && c != '\n')
        || ('\u{7f}'..='\u{9f}').contains(&c)
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

#[test]
fn hostile_plugin_names_and_directive_values_reach_the_trace_escaped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let config = dir.path().join("hookbox.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugins]]\nname = \"evil\\u001b[2J\\u202e\"\npath = {SCRIPTED:?}\n[plugins.config]\n\
             before-tool-call = \"skip-tool:\\r[directive] deny-tools -> continue\\u001b[0m\"\n\
             final-answer = \"replace-content:answer\\r\\u001b[1Aforged\\u009b\"\n"
        ),
    )
    .expect("write config");
    let args = [
        "run".to_string(),
        "--model".into(),
        format!("replay:{}", demo_session().display()),
        "--config".into(),
        config.display().to_string(),
        "--workspace".into(),
        ws.path().display().to_string(),
        DEMO_PROMPT.into(),
    ];
    let out = cli(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.chars().any(raw_control), "stderr holds a raw control character: {:?}", out.stderr);
    assert!(!out.stdout.chars().any(raw_control), "stdout holds a raw control character: {:?}", out.stdout);
    assert!(out.stderr.contains("evil\\x1b[2J\\u{202e}"), "the name, escaped: {}", out.stderr);
    // A directive value is printed as JSON, whose own escapes make it safe.
    assert!(
        out.stderr.contains("\\r[directive] deny-tools -> continue\\u001b[0m"),
        "the value, escaped: {}",
        out.stderr
    );
    assert_eq!(out.stdout.trim_end(), "answer\\r\\x1b[1Aforged\\u{9b}", "the answer, escaped");
    assert!(
        !out.stderr.lines().any(|l| l.starts_with("[directive]") || l.starts_with("  [directive] deny-tools")),
        "no forged line: {}",
        out.stderr
    );
}

#[test]
fn json_output_escapes_c1_and_bidi_and_stays_the_same_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = demo_workspace();
    let config = dir.path().join("hookbox.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugins]]\npath = {SCRIPTED:?}\n[plugins.config]\nfinal-answer = \"replace-content:a\\u009bb\\u202ec\"\n"
        ),
    )
    .expect("write config");
    let args = [
        "run".to_string(),
        "--model".into(),
        format!("replay:{}", demo_session().display()),
        "--config".into(),
        config.display().to_string(),
        "--workspace".into(),
        ws.path().display().to_string(),
        "--json".into(),
        DEMO_PROMPT.into(),
    ];
    let out = cli(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.chars().any(raw_control), "{:?}", out.stdout);
    assert_eq!(out.json()["final_answer"], "a\u{9b}b\u{202e}c");
}

/// Host logs (`HOOKBOX_LOG`) carry paths and messages from config, journals
/// and plugins: each record reaches the terminal escaped, one line each.
#[test]
fn host_logs_are_escaped_too() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    // A cache directory others may write is refused with a warning naming it.
    let cache = dir.path().join("cache\u{1b}[2J\rforged");
    std::fs::create_dir(&cache).expect("mkdir");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookbox-under-test"))
        .args(["check", hookbox_tests::DENY_TOOLS])
        .env("HOOKBOX_LOG", "warn")
        .env("HOOKBOX_CACHE_DIR", &cache)
        .output()
        .expect("run hookbox");
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    assert!(stderr.contains("component cache is off") && stderr.contains("cache\\x1b[2J\\rforged"), "{stderr}");
    assert!(!stderr.chars().any(raw_control), "nothing raw: {stderr:?}");
}
