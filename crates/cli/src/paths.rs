//! Path arguments are checked before anything runs: an input is a regular
//! file (a device such as `/dev/zero`, a pipe or a socket is refused) no
//! larger than its cap; a state database is a regular file or does not exist
//! yet; a workspace at a system folder (`/`, `/usr`, `/etc`, `/home`, `$HOME`
//! itself...) needs `--allow-system-workspace`. Result files are checked by
//! [`hookbox::output::check_output`]. Every failure is bad input (exit 2).

use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The largest `--config` file read (1 MiB).
pub(crate) const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// The largest prompt read from `--prompt-file` (4 MiB).
pub(crate) const MAX_PROMPT_BYTES: u64 = 4 << 20;
/// The largest `--model replay:FILE` session (256 MiB).
pub(crate) const MAX_SESSION_BYTES: u64 = 256 << 20;
/// The largest golden trace `hookbox test --trace` reads (64 MiB).
pub(crate) const MAX_TRACE_BYTES: u64 = 64 << 20;
/// The most an `--inbox` file is read at once (16 MiB): a longer line is skipped with a note.
pub(crate) const MAX_INBOX_READ_BYTES: u64 = 16 << 20;

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// Checks that `path` (given with `flag`) is a regular file of at most `cap`
/// bytes. A missing file passes: the reader reports it, naming it.
///
/// Errors: a directory, device, pipe or socket, or a file over `cap`.
pub(crate) fn check_input(flag: &str, path: &Path, cap: Option<u64>) -> anyhow::Result<()> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => anyhow::bail!("{flag} {}: cannot inspect it: {e}", path.display()),
    };
    if meta.is_dir() {
        anyhow::bail!("{flag} {}: a directory, not a file", path.display());
    }
    if !meta.is_file() {
        anyhow::bail!(
            "{flag} {}: not a regular file (a device, pipe or socket): give the path of a file",
            path.display()
        );
    }
    if let Some(cap) = cap.filter(|cap| meta.len() > *cap) {
        anyhow::bail!("{flag} {}: {} bytes, over the cap of {}", path.display(), meta.len(), mib(cap));
    }
    Ok(())
}

/// Reads at most `cap` bytes of `reader` as UTF-8 text.
///
/// Errors: more than `cap` bytes, invalid UTF-8, a read error.
pub(crate) fn read_capped(what: &str, reader: impl std::io::Read, cap: u64) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    reader.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
    if bytes.len() as u64 > cap {
        anyhow::bail!("{what}: more than the cap of {}", mib(cap));
    }
    String::from_utf8(bytes).map_err(|e| anyhow::anyhow!("{what}: not UTF-8 text: {e}"))
}

/// Reads the regular file `path` (given with `flag`), at most `cap` bytes.
///
/// Errors: as [`check_input`] and [`read_capped`], or the file is missing.
pub(crate) fn read_file(flag: &str, path: &Path, cap: u64) -> anyhow::Result<String> {
    check_input(flag, path, Some(cap))?;
    let what = format!("{flag} {}", path.display());
    let file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
    read_capped(&what, file, cap)
}

/// `--state-db FILE`: a regular file, or absent (SQLite creates it). SQLite
/// also writes `FILE-journal` (and `-wal`, `-shm`): those must not be
/// anything but regular files either.
///
/// Errors: the file or a side file exists and is not a regular file.
pub(crate) fn check_state_db(path: &Path) -> anyhow::Result<()> {
    for p in std::iter::once(path.to_path_buf()).chain(state_db_side_files(path)) {
        match std::fs::metadata(&p) {
            Ok(m) if !m.is_file() => anyhow::bail!(
                "--db {}: {} is not a regular file (a directory, device, pipe or socket): give the path of a database file",
                path.display(),
                p.display()
            ),
            _ => {}
        }
    }
    Ok(())
}

/// The files SQLite keeps beside a database: `-journal`, `-wal`, `-shm`.
pub(crate) fn state_db_side_files(path: &Path) -> Vec<PathBuf> {
    ["-journal", "-wal", "-shm"]
        .iter()
        .map(|suffix| {
            let mut name = path.as_os_str().to_os_string();
            name.push(suffix);
            PathBuf::from(name)
        })
        .collect()
}

/// Folders that are never a sensible workspace without saying so: the root,
/// the system's top-level folders, `/home` and the user's home itself.
fn system_folders() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = [
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/home",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/media",
        "/mnt",
        "/opt",
        "/proc",
        "/root",
        "/run",
        "/sbin",
        "/srv",
        "/sys",
        "/tmp",
        "/usr",
        "/usr/bin",
        "/usr/lib",
        "/usr/local",
        "/usr/sbin",
        "/usr/share",
        "/var",
        "/var/lib",
        "/var/tmp",
        "/Users",
        "/System",
        "/Library",
        "/Applications",
        "/private",
        "/private/tmp",
        "/private/var",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        out.push(PathBuf::from(home));
    }
    out.into_iter().filter_map(|p| std::fs::canonicalize(p).ok()).collect()
}

/// `--workspace DIR`: refuses a system folder (see [`system_folders`])
/// unless `allow` (`--allow-system-workspace`). A path that cannot be
/// resolved passes: opening the workspace reports it.
///
/// Errors: the workspace is a system folder and `allow` is false.
pub(crate) fn check_workspace(path: &Path, allow: bool) -> anyhow::Result<()> {
    let Ok(resolved) = std::fs::canonicalize(path) else { return Ok(()) };
    if !allow && system_folders().contains(&resolved) {
        anyhow::bail!(
            "--workspace {}: {} is a system folder; the agent's tools could change or delete anything in it. \
             Give a project folder, or pass --allow-system-workspace to use it anyway",
            path.display(),
            resolved.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_regular_files_under_their_cap() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("p.txt");
        std::fs::write(&file, "hello").expect("write");
        assert_eq!(read_file("--prompt-file", &file, 5).expect("fits"), "hello");
        let e = read_file("--prompt-file", &file, 4).expect_err("over");
        assert!(e.to_string().contains("over the cap"), "{e}");
        let e = read_file("--prompt-file", Path::new("/dev/zero"), 4).expect_err("device");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = check_input("--inbox", dir.path(), None).expect_err("dir");
        assert!(e.to_string().contains("a directory"), "{e}");
        assert!(check_input("--config", &dir.path().join("missing"), Some(1)).is_ok(), "left to the reader");
        let e = read_capped("stdin", std::io::Read::take(std::io::repeat(0), 100), 10).expect_err("capped");
        assert!(e.to_string().contains("more than the cap"), "{e}");
    }

    #[test]
    fn state_db_and_workspace() {
        let e = check_state_db(Path::new("/dev/null")).expect_err("device");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(check_state_db(&dir.path().join("state.db")).is_ok());
        std::fs::create_dir(dir.path().join("state.db-journal")).expect("mkdir");
        assert!(check_state_db(&dir.path().join("state.db")).is_err(), "a side file that is a folder");

        let e = check_workspace(Path::new("/"), false).expect_err("root");
        assert!(e.to_string().contains("--allow-system-workspace"), "{e}");
        assert!(check_workspace(Path::new("/usr/../etc"), false).is_err());
        assert!(check_workspace(Path::new("/"), true).is_ok());
        assert!(check_workspace(dir.path(), false).is_ok());
    }
}
