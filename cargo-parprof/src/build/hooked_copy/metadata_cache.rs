//! `cargo metadata` of the program, kept in the build folder with the files it was read from.
//!
//! Why: resolving the program's packages takes `cargo metadata` a quarter of a second or more
//! on every `cargo parprof`, as long as the freshness check of the build itself, and its answer
//! changes only when the files cargo resolves from do. So the answer is kept beside the
//! fingerprints (CRC-32 of the contents, or absence) of those files: the lock file, the
//! workspace's manifest, every path package's manifest, and cargo's configuration files
//! wherever cargo looks for them. A file that changed, appeared or went makes the next run ask
//! cargo again. An unreadable or outdated cache is asked again too, never an error.

use anyhow::Result;
use cargo_metadata::Metadata;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The cache's file name in the build folder.
pub const FILE: &str = "program-metadata.json";

#[derive(Serialize, Deserialize)]
struct Cached {
    manifest_path: PathBuf,
    inputs: Vec<(PathBuf, Option<u32>)>,
    metadata: Metadata,
}

/// The program's metadata: from the cache at `cache` when every file it was read from is
/// unchanged, else from `ask` (then kept in `cache`).
pub fn read(
    manifest_path: &Path,
    cache: &Path,
    ask: impl FnOnce() -> Result<Metadata>,
) -> Result<Metadata> {
    if let Some(metadata) = cached(manifest_path, cache) {
        return Ok(metadata);
    }
    let metadata = ask()?;
    let entry = Cached {
        manifest_path: manifest_path.to_owned(),
        inputs: inputs(manifest_path, &metadata)
            .into_iter()
            .map(|file| {
                let fingerprint = fingerprint(&file);
                (file, fingerprint)
            })
            .collect(),
        metadata,
    };
    // A cache that cannot be written costs the next run a `cargo metadata`, nothing else.
    if let Ok(json) = serde_json::to_vec(&entry) {
        let _ = std::fs::create_dir_all(cache.parent().unwrap_or(Path::new(".")))
            .and_then(|()| std::fs::write(cache, json));
    }
    Ok(entry.metadata)
}

fn cached(manifest_path: &Path, cache: &Path) -> Option<Metadata> {
    let entry: Cached = serde_json::from_slice(&std::fs::read(cache).ok()?).ok()?;
    let unchanged = entry.manifest_path == manifest_path
        && entry
            .inputs
            .iter()
            .all(|(file, print)| fingerprint(file) == *print);
    unchanged.then_some(entry.metadata)
}

/// The files whose contents decide what `cargo metadata` answers for the program.
fn inputs(manifest_path: &Path, metadata: &Metadata) -> Vec<PathBuf> {
    let root = metadata.workspace_root.as_std_path();
    let mut files = vec![
        manifest_path.to_owned(),
        root.join("Cargo.lock"),
        root.join("Cargo.toml"),
    ];
    files.extend(
        metadata
            .packages
            .iter()
            .filter(|p| p.source.is_none())
            .map(|p| p.manifest_path.clone().into_std_path_buf()),
    );
    // cargo reads its configuration from the folder it runs in and every folder above, and
    // from its home.
    let current = std::env::current_dir().ok();
    let searched = manifest_path
        .parent()
        .into_iter()
        .chain(current.as_deref())
        .flat_map(Path::ancestors)
        .map(|dir| dir.join(".cargo"))
        .chain(cargo_home());
    for dir in searched {
        files.push(dir.join("config.toml"));
        files.push(dir.join("config"));
    }
    files.sort();
    files.dedup();
    files
}

fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")))
}

/// The CRC-32 of a file's contents, `None` when it cannot be read (absent).
fn fingerprint(file: &Path) -> Option<u32> {
    std::fs::read(file)
        .ok()
        .map(|bytes| crc32fast::hash(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A one-package project with no dependencies: `cargo metadata` needs no network.
    fn project(dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), "").unwrap();
        let manifest = dir.join("Cargo.toml");
        std::fs::write(
            &manifest,
            "[package]\nname = \"cached\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        )
        .unwrap();
        manifest
    }

    #[test]
    fn cargo_is_asked_again_only_when_a_file_it_read_changed() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = project(dir.path());
        let cache = dir.path().join("target/parprof").join(FILE);
        let asked = Cell::new(0);
        let read_counting = || {
            read(&manifest, &cache, || {
                asked.set(asked.get() + 1);
                Ok(cargo_metadata::MetadataCommand::new()
                    .manifest_path(&manifest)
                    .exec()?)
            })
            .unwrap()
        };
        let first = read_counting();
        assert_eq!(asked.get(), 1);
        let again = read_counting();
        assert_eq!(asked.get(), 1, "unchanged files: the cache answers");
        assert_eq!(again.packages[0].version.to_string(), "0.1.0");
        assert_eq!(again.workspace_root, first.workspace_root);

        let text = std::fs::read_to_string(&manifest).unwrap();
        std::fs::write(&manifest, text.replace("0.1.0", "0.2.0")).unwrap();
        assert_eq!(read_counting().packages[0].version.to_string(), "0.2.0");
        assert_eq!(asked.get(), 2, "a changed manifest: cargo is asked");

        // A cargo configuration that appears can patch or replace sources.
        std::fs::create_dir_all(dir.path().join(".cargo")).unwrap();
        std::fs::write(dir.path().join(".cargo/config.toml"), "[build]\n").unwrap();
        read_counting();
        assert_eq!(asked.get(), 3, "a new configuration file: cargo is asked");

        std::fs::write(&cache, b"{ damaged").unwrap();
        read_counting();
        assert_eq!(asked.get(), 4, "a damaged cache: cargo is asked");
        read_counting();
        assert_eq!(asked.get(), 4);
    }
}
