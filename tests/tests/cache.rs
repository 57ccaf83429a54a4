//! The precompiled-component cache: a second runtime (a second process)
//! loads a component from the cache without compiling it; a corrupt or
//! refused entry is detected and rebuilt, never trusted.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::collections::BTreeMap;

use hookbox::sandbox::HookRuntime;
use hookbox::sandbox::PluginOptions;
use hookbox::sandbox::Source;
use hookbox_tests::DENY_TOOLS;

fn runtime(dir: &std::path::Path) -> HookRuntime {
    HookRuntime::new().expect("runtime").with_cache_dir(dir)
}

fn entry(dir: &std::path::Path, ext: &str) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .expect("cache dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == ext))
        .expect("cache entry")
}

#[test]
fn a_second_runtime_loads_from_the_cache_and_bad_entries_are_rebuilt() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(runtime(dir.path()).warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Compiled);
    assert_eq!(
        runtime(dir.path()).warm(DENY_TOOLS.as_ref()).expect("warm"),
        Source::Cache,
        "no compile the second time"
    );
    runtime(dir.path())
        .load("deny-tools", DENY_TOOLS.as_ref(), BTreeMap::new(), PluginOptions::default())
        .expect("loads from the cache");

    // A flipped byte: the checksum no longer matches, so the entry is rebuilt.
    let artifact = entry(dir.path(), "cwasm");
    let mut bytes = std::fs::read(&artifact).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&artifact, &bytes).expect("corrupt");
    assert_eq!(runtime(dir.path()).warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Compiled);
    assert_eq!(runtime(dir.path()).warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Cache, "repaired");

    // Garbage with a matching checksum: wasmtime refuses it, so it is rebuilt too.
    std::fs::write(&artifact, b"not an artifact").expect("write");
    let sum = hookbox::sandbox::content_hash(b"not an artifact");
    std::fs::write(entry(dir.path(), "blake3"), sum).expect("write");
    assert_eq!(runtime(dir.path()).warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Compiled);
    runtime(dir.path())
        .load("deny-tools", DENY_TOOLS.as_ref(), BTreeMap::new(), PluginOptions::default())
        .expect("still loads");
}
