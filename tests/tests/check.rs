//! `hookbox check`: accepts the example plugins and names the world and
//! version; rejects a core module, a random file, a missing file and a
//! component of another world with exit code 2 and a one-line reason.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use hookbox_tests::{AUDIT_LOG, DENY_TOOLS, OTHER_WORLD, SCRIPTED, TRAP_ON_TOOL, cli};

#[test]
fn accepts_every_example_plugin() {
    for plugin in [DENY_TOOLS, AUDIT_LOG, TRAP_ON_TOOL, SCRIPTED] {
        let out = cli(&["check", plugin]);
        assert_eq!(out.code, 0, "{plugin}: {}", out.stderr);
        assert!(out.stdout.contains("world hookbox:hooks/hook@0.1.0"), "{}", out.stdout);
        assert!(out.stdout.contains("version 0.1.0"), "{}", out.stdout);
        assert!(out.stdout.contains("on-event"), "{}", out.stdout);
    }
}

fn rejected(path: &std::path::Path) -> String {
    let out = cli(&["check", &path.display().to_string()]);
    assert_eq!(out.code, 2, "stdout: {} stderr: {}", out.stdout, out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert_eq!(out.stderr.trim_end().lines().count(), 1, "one line: {}", out.stderr);
    assert!(out.stderr.contains(&path.display().to_string()), "names the file: {}", out.stderr);
    out.stderr
}

#[test]
fn rejects_a_core_module() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("core.wasm");
    // The smallest valid core module: magic and version 1.
    std::fs::write(&path, b"\0asm\x01\x00\x00\x00").expect("write");
    let err = rejected(&path);
    assert!(err.contains("core WebAssembly module, not a component"), "{err}");
}

#[test]
fn rejects_a_random_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("random.wasm");
    std::fs::write(&path, b"#!/bin/sh\necho this is not wasm\n").expect("write");
    let err = rejected(&path);
    assert!(err.contains("not a WebAssembly file"), "{err}");
}

#[test]
fn rejects_a_truncated_component() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("truncated.wasm");
    let bytes = std::fs::read(DENY_TOOLS).expect("read deny-tools");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("write");
    let err = rejected(&path);
    assert!(err.contains("not a valid component"), "{err}");
}

#[test]
fn rejects_a_component_of_another_world() {
    let err = rejected(OTHER_WORLD.as_ref());
    assert!(err.contains("on-event"), "names what is missing: {err}");
}

#[test]
fn rejects_a_missing_file() {
    let err = rejected("/nonexistent/plugin.wasm".as_ref());
    assert!(err.contains("cannot read plugin"), "{err}");
}
