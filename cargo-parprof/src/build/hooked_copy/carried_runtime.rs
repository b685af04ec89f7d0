//! The runtime this subcommand carries: parprof-rt and parprof-macros as it was built with them
//! (embedded by cargo-parprof's build.rs), written into the build folder when a hooked copy
//! needs a runtime and the program has none of its own.
//!
//! Why carried: an installed `cargo parprof` must work wherever the program is, with no checkout
//! of parprof and no network, and the hooks must call exactly the runtime whose traces this
//! subcommand reads.

use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/carried_runtime.rs"));

/// The folder of the build folder's copies that holds the carried crates, by version.
const RUNTIME_FOLDER: &str = "parprof-runtime";

/// Writes the carried crates under `copies` (the build folder's hooked copies) and returns the
/// folder of parprof-rt. A file is written only when its content changes (cargo then rebuilds
/// nothing), and a file the carried version does not have is removed.
pub fn write(copies: &Path) -> Result<PathBuf> {
    let folder = copies.join(RUNTIME_FOLDER);
    for (name, bytes) in FILES {
        let target = folder.join(name);
        if std::fs::read(&target).ok().as_deref() == Some(*bytes) {
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, bytes)
            .with_context(|| format!("cannot write {}", target.display()))?;
    }
    let carried: BTreeSet<PathBuf> = FILES.iter().map(|(name, _)| folder.join(name)).collect();
    for crate_dir in carried_crate_dirs() {
        remove_other_files(&folder.join(crate_dir), &carried)?;
    }
    Ok(folder.join(RUNTIME_DIR))
}

/// The carried crates' folders (`parprof-rt-0.1.0`, `parprof-macros-0.1.0`).
fn carried_crate_dirs() -> BTreeSet<&'static str> {
    FILES
        .iter()
        .filter_map(|(name, _)| name.split('/').next())
        .collect()
}

/// Removes the files under `dir` that are not `kept`: sources an earlier build of the same
/// version carried and this one does not (a removed module).
fn remove_other_files(dir: &Path, kept: &BTreeSet<PathBuf>) -> Result<()> {
    for path in super::files::walk(dir)?
        .into_iter()
        .filter(|p| !kept.contains(p))
    {
        std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The carried runtime is this workspace's parprof-rt: its version, every source file as
    /// it is, and a manifest that stands alone.
    #[test]
    fn the_carried_runtime_is_the_workspace_one() {
        // The workspace's crates share one version.
        assert_eq!(RUNTIME_VERSION, env!("CARGO_PKG_VERSION"));
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../parprof-rt");
        let lib = FILES
            .iter()
            .find(|(name, _)| *name == format!("{RUNTIME_DIR}/src/lib.rs"))
            .expect("lib.rs carried");
        assert_eq!(lib.1, std::fs::read(root.join("src/lib.rs")).unwrap());
        let manifest = FILES
            .iter()
            .find(|(name, _)| *name == format!("{RUNTIME_DIR}/Cargo.toml"))
            .map(|(_, bytes)| String::from_utf8_lossy(bytes).into_owned())
            .unwrap();
        assert!(!manifest.contains("workspace"), "{manifest}");
        assert!(
            manifest.contains("path = \"../parprof-macros-"),
            "{manifest}"
        );
        assert!(!manifest.contains("dev-dependencies"), "{manifest}");
    }

    /// Written twice, the second time changes nothing; a stale file of the same version goes.
    #[test]
    fn writing_again_keeps_the_files_and_removes_stale_ones() {
        let copies = tempfile::tempdir().unwrap();
        let runtime = write(copies.path()).unwrap();
        assert!(runtime.join("Cargo.toml").is_file());
        let lib = runtime.join("src/lib.rs");
        let written = std::fs::metadata(&lib).unwrap().modified().unwrap();
        let stale = runtime.join("src/removed_module.rs");
        std::fs::write(&stale, "").unwrap();
        assert_eq!(write(copies.path()).unwrap(), runtime);
        assert_eq!(
            std::fs::metadata(&lib).unwrap().modified().unwrap(),
            written
        );
        assert!(!stale.exists());
    }
}
