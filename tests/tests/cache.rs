//! The precompiled-component cache: a second runtime (a second process)
//! loads a component from the cache without compiling it; a corrupt,
//! swapped or refused entry is detected and rebuilt, never trusted; a cache
//! directory or key others can reach is not used; no plugin may be granted
//! the cache's or the state database's directory.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::collections::BTreeMap;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use hookbox::SqliteStateStore;
use hookbox::sandbox::HookRuntime;
use hookbox::sandbox::PluginOptions;
use hookbox::sandbox::Source;
use hookbox::sandbox::{DirGrant, DirMode, Grants};
use hookbox_tests::{AUDIT_LOG, DENY_TOOLS};

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

    // Garbage with a valid MAC (made here with the cache's own key, which
    // only this user can read): wasmtime refuses it, so it is rebuilt too.
    std::fs::write(&artifact, b"not an artifact").expect("write");
    let key_name = artifact.file_stem().expect("stem").to_str().expect("utf-8").to_string();
    std::fs::write(entry(dir.path(), "mac"), mac(dir.path(), &key_name, b"not an artifact")).expect("write");
    assert_eq!(runtime(dir.path()).warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Compiled);
    runtime(dir.path())
        .load("deny-tools", DENY_TOOLS.as_ref(), BTreeMap::new(), PluginOptions::default())
        .expect("still loads");
}

/// The MAC the cache writes beside an artifact (keyed BLAKE3 over a context
/// string, the entry key's length and bytes, and the artifact), hex.
fn mac(dir: &Path, key: &str, artifact: &[u8]) -> String {
    let secret: [u8; 32] = std::fs::read(dir.join("cache.key")).expect("key").try_into().expect("32 bytes");
    let mut h = blake3::Hasher::new_keyed(&secret);
    h.update(b"hookbox component cache entry v1\0");
    h.update(&(key.len() as u64).to_le_bytes());
    h.update(key.as_bytes());
    h.update(artifact);
    h.finalize().to_hex().to_string()
}

/// The files of the entry for the component at `wasm`: (artifact, MAC).
fn files_of(dir: &Path, wasm: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let hash = hookbox::sandbox::content_hash(&std::fs::read(wasm).expect("wasm"));
    let artifact = std::fs::read_dir(dir)
        .expect("cache dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "cwasm")
                && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&hash))
        })
        .expect("entry");
    let mac = artifact.with_extension("mac");
    (artifact, mac)
}

#[test]
fn an_entry_copied_over_another_key_is_discarded_and_recompiled() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(runtime(dir.path()).warm(AUDIT_LOG.as_ref()).expect("warm"), Source::Compiled);
    assert_eq!(runtime(dir.path()).warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Compiled);
    let (other_artifact, other_mac) = files_of(dir.path(), AUDIT_LOG);
    let (deny_artifact, deny_mac) = files_of(dir.path(), DENY_TOOLS);
    let deny_bytes = std::fs::read(&deny_artifact).expect("read");
    // The attack: audit-log's (valid) artifact and MAC under deny-tools' key.
    std::fs::copy(&other_artifact, &deny_artifact).expect("copy");
    std::fs::copy(&other_mac, &deny_mac).expect("copy");
    assert_eq!(
        runtime(dir.path()).warm(DENY_TOOLS.as_ref()).expect("warm"),
        Source::Compiled,
        "the swapped entry must not be deserialized"
    );
    assert_eq!(std::fs::read(&deny_artifact).expect("read"), deny_bytes, "deny-tools' own code is back");
    assert_ne!(std::fs::read(&deny_artifact).expect("read"), std::fs::read(&other_artifact).expect("read"));
    assert_eq!(runtime(dir.path()).warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Cache);
    assert_eq!(
        runtime(dir.path()).warm(AUDIT_LOG.as_ref()).expect("warm"),
        Source::Cache,
        "audit-log's entry is intact"
    );
}

#[test]
fn a_cache_dir_writable_by_others_or_an_exposed_key_is_not_used() {
    let base = tempfile::tempdir().expect("tempdir");
    let open = base.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let rt = runtime(&open);
    assert!(
        rt.notes().iter().any(|n| n.contains("component cache is off") && n.contains("writable by group or others")),
        "{:?}",
        rt.notes()
    );
    assert_eq!(rt.warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Compiled);
    assert_eq!(runtime(&open).warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Compiled, "nothing cached");
    assert_eq!(std::fs::read_dir(&open).expect("dir").count(), 0, "nothing written, not even a key");

    // A new cache directory is made 0700 with a 0600 key.
    let fresh = base.path().join("a/b/cache");
    assert_eq!(runtime(&fresh).warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Compiled);
    let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&fresh), 0o700);
    assert_eq!(mode(&fresh.join("cache.key")), 0o600);
    // A key others can read is refused: the cache is off, its entries unused.
    std::fs::set_permissions(fresh.join("cache.key"), std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let rt = runtime(&fresh);
    assert!(rt.notes().iter().any(|n| n.contains("readable or writable by group or others")), "{:?}", rt.notes());
    assert_eq!(rt.warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Compiled);
}

#[test]
fn a_dirs_grant_covering_the_cache_or_the_state_database_is_refused() {
    let base = tempfile::tempdir().expect("tempdir");
    let cache = base.path().join("cache");
    let state_dir = base.path().join("state");
    std::fs::create_dir_all(cache.join("inside")).expect("mkdir");
    std::fs::create_dir(&state_dir).expect("mkdir");
    let store = SqliteStateStore::open(&state_dir.join("state.db")).expect("open");
    let rt = runtime(&cache).with_state_store(Arc::new(store));
    let load = |host: &Path| {
        let grants = Grants {
            env: Vec::new(),
            dirs: vec![DirGrant { host: host.to_path_buf(), guest: "/data".into(), mode: DirMode::ReadOnly }],
        };
        rt.load(
            "deny-tools",
            DENY_TOOLS.as_ref(),
            BTreeMap::new(),
            PluginOptions { grants, ..PluginOptions::default() },
        )
    };
    for (host, what) in [
        (base.path().to_path_buf(), "the component cache"),
        (cache.clone(), "the component cache"),
        (cache.join("inside"), "the component cache"),
        (cache.join("inside/.."), "the component cache"),
        (state_dir.clone(), "the hook state database's directory"),
    ] {
        let err = load(&host).err().unwrap_or_else(|| panic!("a grant of {} loaded", host.display())).to_string();
        assert!(err.contains(what) && err.contains("lies inside"), "{}: {err}", host.display());
    }
    let elsewhere = base.path().join("data");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    load(&elsewhere).expect("a grant beside them loads");
}

/// Checksum files of earlier cache layouts (`.blake3`, `.sha256`) are
/// deleted when the cache is opened; an old artifact without a MAC is
/// recompiled, never trusted.
#[test]
fn legacy_checksum_files_are_removed_and_their_artifacts_not_trusted() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(runtime(dir.path()).warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Compiled);
    let artifact = entry(dir.path(), "cwasm");
    let mac_file = entry(dir.path(), "mac");
    // The entry as the BLAKE3 layout left it: an artifact and a checksum, no MAC.
    std::fs::remove_file(&mac_file).expect("remove mac");
    let legacy = artifact.with_extension("blake3");
    std::fs::write(&legacy, blake3::hash(&std::fs::read(&artifact).expect("read")).to_hex().as_str()).expect("write");
    let older = dir.path().join("0123-4567.sha256");
    std::fs::write(&older, "00").expect("write");
    assert_eq!(runtime(dir.path()).warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Compiled, "no MAC: recompiled");
    assert!(!legacy.exists() && !older.exists(), "legacy checksum files are gone");
    assert!(mac_file.exists(), "the entry has a MAC again");
    assert_eq!(runtime(dir.path()).warm(DENY_TOOLS.as_ref()).expect("warm"), Source::Cache);
}
