//! Run workspaces: each run's folder under the data directory
//! (`DATA_DIR/workspaces/NAME`), with the server's workspace template copied
//! in, bounded in files.

use std::path::{Path, PathBuf};

use crate::state::AppState;

/// The most files copied from the workspace template.
const MAX_TEMPLATE_FILES: usize = 10_000;

/// Copies `from` into `to` (regular files and directories; symlinks are skipped).
fn copy_template(from: &Path, to: &Path, budget: &mut usize) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        *budget =
            budget.checked_sub(1).ok_or_else(|| std::io::Error::other("the workspace template has too many files"))?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            std::fs::create_dir(&target)?;
            copy_template(&entry.path(), &target, budget)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Makes a run's workspace folder `name` under the data directory, with
/// the server's workspace template copied in (at most 10,000 files).
///
/// Errors: the folder cannot be made or the template copied.
pub fn make_workspace(state: &AppState, name: &str) -> std::io::Result<PathBuf> {
    let dir = state.data_dir.join("workspaces").join(name);
    std::fs::create_dir_all(&dir)?;
    if let Some(template) = &state.config.workspace_template {
        let mut budget = MAX_TEMPLATE_FILES;
        copy_template(template, &dir, &mut budget)?;
    }
    Ok(dir)
}
