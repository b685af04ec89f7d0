//! The files of a crate folder, as the hooked and carried copies read and prune them.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Every file under `dir`, except a lock file (the copy resolves with the program's).
pub(super) fn walk(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in
            std::fs::read_dir(&d).with_context(|| format!("cannot read {}", d.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path
                .file_name()
                .is_some_and(|n| n != "Cargo.lock" && n != ".cargo-ok")
            {
                files.push(path);
            }
        }
    }
    Ok(files)
}
