//! Result files (`hookbox run --record FILE`, `--journal FILE`): checked and
//! opened before the run starts, written whole when it ends.
//!
//! A result file is written to a uniquely named temporary file in the target's
//! folder and renamed over the target, so a failed write never leaves half a
//! file and two runs writing the same path never share a temporary file. The
//! target must be a regular file (or not exist yet): a device, pipe or socket
//! is refused, since the rename would replace it. A symbolic link is followed:
//! the file it points to is replaced, the link stays.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Errors preparing a result file; each names the flag and the path.
#[derive(Debug, thiserror::Error)]
#[error("{flag} {path}: {what}")]
pub struct OutputError {
    /// The flag, e.g. `--journal`.
    pub flag: &'static str,
    /// The path as given.
    pub path: PathBuf,
    /// What is wrong.
    pub what: String,
}

/// A result file, opened before the run.
#[derive(Debug)]
pub struct OutputFile {
    flag: &'static str,
    path: PathBuf,
    target: PathBuf,
    tmp: tempfile::NamedTempFile,
}

impl OutputFile {
    /// Checks `path` for `flag` and opens its temporary file. `inputs` are the
    /// files the run reads (what, path): the result may not be one of them, nor
    /// the target of an `other` result file.
    ///
    /// Errors: the folder does not exist or cannot be written; `path` is a
    /// directory, a device, pipe or socket, an input of the run or another
    /// result file.
    pub fn open(
        flag: &'static str,
        path: &Path,
        inputs: &[(String, PathBuf)],
        others: &[&OutputFile],
    ) -> Result<OutputFile, OutputError> {
        let taken: Vec<(&'static str, PathBuf)> = others.iter().map(|o| (o.flag, o.target.clone())).collect();
        let target = check_output(flag, path, inputs, &taken)?;
        let err = |what: String| OutputError { flag, path: path.to_path_buf(), what };
        let dir = target.parent().unwrap_or(Path::new("."));
        let tmp = tempfile::Builder::new()
            .prefix(".hookbox-")
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(|e| err(format!("cannot write in {}: {e}", dir.display())))?;
        Ok(OutputFile { flag, path: path.to_path_buf(), target, tmp })
    }

    /// The file that will be written: `path` resolved (links followed).
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The temporary file the result is written to before the rename (for
    /// a process that must exit without running destructors: remove it first).
    pub fn temporary(&self) -> &Path {
        self.tmp.path()
    }

    /// The path as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The flag it was given with.
    pub fn flag(&self) -> &'static str {
        self.flag
    }

    /// Writes `text` and renames it over the target.
    ///
    /// Errors: the write or the rename failed (the target is untouched then).
    pub fn finish(mut self, text: &str) -> std::io::Result<()> {
        self.tmp.write_all(text.as_bytes())?;
        self.tmp.as_file().sync_all()?;
        self.tmp.persist(&self.target).map(drop).map_err(|e| e.error)
    }
}

/// `path` made absolute with links resolved; for a file that does not exist
/// yet, its folder resolved and its name appended. `None` when even the
/// folder cannot be resolved.
pub fn resolve(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Some(p);
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Some(std::fs::canonicalize(parent).ok()?.join(path.file_name()?))
}

/// True when `a` and `b` are the same file: the same resolved path, or (for
/// files that exist) the same device and inode, as for two hard links.
pub fn same_file(a: &Path, b: &Path) -> bool {
    if resolve(a).is_some_and(|ra| resolve(b).is_some_and(|rb| ra == rb)) {
        return true;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return ma.dev() == mb.dev() && ma.ino() == mb.ino();
        }
    }
    false
}

/// Checks a result file `path` given with `flag`, before anything is written:
/// its folder exists; it is a regular file or does not exist yet; it is none
/// of the run's `inputs` (what, path) and none of the `taken` result files
/// (flag, resolved path), by resolved path or by device and inode. Returns
/// the resolved path.
///
/// Errors: as for [`OutputFile::open`].
pub fn check_output(
    flag: &'static str,
    path: &Path,
    inputs: &[(String, PathBuf)],
    taken: &[(&'static str, PathBuf)],
) -> Result<PathBuf, OutputError> {
    let err = |what: String| OutputError { flag, path: path.to_path_buf(), what };
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(err(format!("the folder {} does not exist", parent.display())));
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Err(err("a directory, not a file".into())),
        Ok(m) if !m.is_file() => {
            return Err(err("not a regular file (a device, pipe or socket): give the path of a file".into()));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(format!("cannot inspect it: {e}"))),
    }
    if path.file_name().is_none() {
        return Err(err("no file name".into()));
    }
    let target = resolve(path).ok_or_else(|| err(format!("cannot resolve its folder {}", parent.display())))?;
    for (what, input) in inputs {
        if same_file(input, &target) {
            return Err(err(format!("is the run's {what}: writing it would destroy it; choose another file")));
        }
    }
    if let Some((other, _)) = taken.iter().find(|(_, t)| same_file(t, &target)) {
        return Err(err(format!("is also {other}'s file: give each its own")));
    }
    Ok(target)
}

/// Writes `text` to `path` through a uniquely named temporary file in the
/// same folder, renamed over `path`: never half a file, never a shared
/// temporary name.
///
/// Errors: the folder cannot be written, or the rename failed.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new().prefix(".hookbox-").suffix(".tmp").tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.persist(path).map(drop).map_err(|e| e.error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_inputs_other_outputs_and_special_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let input = dir.path().join("session.json");
        std::fs::write(&input, "{}").expect("write");
        let inputs = vec![("replay session".to_string(), input.clone())];
        let e = OutputFile::open("--journal", &input, &inputs, &[]).expect_err("an input");
        assert!(e.to_string().contains("is the run's replay session"), "{e}");

        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&input, &link).expect("symlink");
        let e = OutputFile::open("--journal", &link, &inputs, &[]).expect_err("a link to an input");
        assert!(e.to_string().contains("is the run's replay session"), "{e}");

        let out = dir.path().join("out.json");
        let first = OutputFile::open("--record", &out, &inputs, &[]).expect("free");
        let e = OutputFile::open("--journal", &out, &inputs, &[&first]).expect_err("taken");
        assert!(e.to_string().contains("is also --record's file"), "{e}");

        let hard = dir.path().join("hard.json");
        std::fs::hard_link(&input, &hard).expect("hard link");
        let e = OutputFile::open("--journal", &hard, &inputs, &[]).expect_err("a hard link to an input");
        assert!(e.to_string().contains("is the run's replay session"), "{e}");

        let e = OutputFile::open("--journal", Path::new("/dev/null"), &[], &[]).expect_err("a device");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = OutputFile::open("--journal", dir.path(), &[], &[]).expect_err("a dir");
        assert!(e.to_string().contains("a directory"), "{e}");
        let e = OutputFile::open("--journal", &dir.path().join("no/j.json"), &[], &[]).expect_err("no folder");
        assert!(e.to_string().contains("does not exist"), "{e}");
    }

    #[test]
    fn a_link_keeps_pointing_at_the_written_file_and_temporaries_are_unique() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real.json");
        std::fs::write(&real, "old").expect("write");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let a = OutputFile::open("--journal", &link, &[], &[]).expect("open");
        let b = OutputFile::open("--record", &dir.path().join("other.json"), &[], &[]).expect("open");
        assert_ne!(a.tmp.path(), b.tmp.path());
        a.finish("new").expect("finish");
        b.finish("other").expect("finish");
        assert_eq!(std::fs::read_to_string(&real).expect("read"), "new");
        assert!(std::fs::symlink_metadata(&link).expect("link").file_type().is_symlink(), "the link stays a link");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".hookbox-"))
            .collect();
        assert!(left.is_empty(), "no temporary file left behind");
    }
}
