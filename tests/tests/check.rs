//! `hookbox check`: accepts the example plugins and names the world and
//! version; rejects a core module, a random file, a missing file, a
//! component of another world and one built against a WIT version the host
//! does not run with exit code 2 and a one-line reason.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::collections::BTreeMap;

use hookbox::sandbox::{HookRuntime, LoadError, PluginOptions, WitVersion};
use hookbox_tests::{
    AUDIT_LOG, DENY_TOOLS, DENY_TOOLS_V0_1_0, FUTURE_VERSION, OTHER_WORLD, SCRIPTED, TRAP_ON_TOOL, cli,
};

#[test]
fn accepts_every_example_plugin() {
    let plugins = [DENY_TOOLS, AUDIT_LOG, TRAP_ON_TOOL, SCRIPTED].map(|p| (p, "0.2.0"));
    for (plugin, version) in plugins.into_iter().chain([(DENY_TOOLS_V0_1_0, "0.1.0")]) {
        let out = cli(&["check", plugin]);
        assert_eq!(out.code, 0, "{plugin}: {}", out.stderr);
        assert!(out.stdout.contains(&format!("world hookbox:hooks/hook@{version}")), "{}", out.stdout);
        assert!(out.stdout.contains(&format!("version {version}")), "{}", out.stdout);
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

#[test]
fn rejects_a_component_of_an_unsupported_wit_version() {
    // Built against hookbox:hooks@0.9.0, importing nothing from the host: its
    // only evidence is the `hookbox:hooks/types@0.9.0` import of its export's types.
    let err = rejected(FUTURE_VERSION.as_ref());
    assert!(err.contains("hookbox:hooks@0.9.0"), "names the version found: {err}");
    assert!(err.contains("supported: 0.1.0, 0.2.0"), "names the versions supported: {err}");
    assert_eq!(hookbox::sandbox::SUPPORTED_WIT_VERSIONS, ["0.1.0", "0.2.0"], "update this test with the list");
}

#[test]
fn the_runtime_loads_each_plugin_with_the_bindings_of_its_declared_version() {
    let runtime = HookRuntime::new().expect("runtime");
    let plugins = [DENY_TOOLS, AUDIT_LOG, TRAP_ON_TOOL, SCRIPTED].map(|p| (p, WitVersion::V0_2_0));
    for (plugin, version) in plugins.into_iter().chain([(DENY_TOOLS_V0_1_0, WitVersion::V0_1_0)]) {
        let loaded = runtime.load("p", plugin.as_ref(), BTreeMap::new(), PluginOptions::default()).expect(plugin);
        assert_eq!(loaded.plugin.wit_version(), version, "{plugin}");
    }
    let bytes = std::fs::read(FUTURE_VERSION).expect("read future-version");
    for result in [
        runtime.load("future", FUTURE_VERSION.as_ref(), BTreeMap::new(), PluginOptions::default()),
        runtime.load_bytes("future", "tenant/future@1", &bytes, BTreeMap::new(), PluginOptions::default()),
    ] {
        match result {
            Err(LoadError::UnsupportedVersion { found, supported, .. }) => {
                assert_eq!(found, "0.9.0");
                assert_eq!(supported, ["0.1.0", "0.2.0"]);
            }
            Err(e) => panic!("expected UnsupportedVersion, got: {e}"),
            Ok(_) => panic!("a 0.9.0 component loaded"),
        }
    }
}
