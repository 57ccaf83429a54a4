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
        let target = match std::fs::canonicalize(path) {
            Ok(t) => t,
            Err(_) => {
                let dir = std::fs::canonicalize(parent).map_err(|e| err(format!("cannot resolve its folder: {e}")))?;
                match path.file_name() {
                    Some(name) => dir.join(name),
                    None => return Err(err("no file name".into())),
                }
            }
        };
        for (what, input) in inputs {
            if std::fs::canonicalize(input).is_ok_and(|i| i == target) {
                return Err(err(format!("is the run's {what}: writing it would destroy it; choose another file")));
            }
        }
        if let Some(other) = others.iter().find(|o| o.target == target) {
            return Err(err(format!("is also {}'s file: give each its own", other.flag)));
        }
        let dir = target.parent().unwrap_or(Path::new("."));
        let tmp = tempfile::Builder::new()
            .prefix(".hookbox-")
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(|e| err(format!("cannot write in {}: {e}", dir.display())))?;
        Ok(OutputFile { flag, path: path.to_path_buf(), target, tmp })
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
