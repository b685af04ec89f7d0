//! The run folders `cargo parprof` makes by itself under `target/parprof/`
//! (`<target>-<YYYYMMDD>-<HHMMSS>`): named, and the oldest removed beyond `--keep N`, so that
//! repeated runs do not pile up gigabytes. Folders given with `-o` are never touched.

use chrono::Local;
use std::io;
use std::path::{Path, PathBuf};

/// The default folder of a new run of `target`.
pub fn new_run_dir(parprof_dir: &Path, target: &str) -> PathBuf {
    parprof_dir.join(format!("{target}-{}", Local::now().format("%Y%m%d-%H%M%S")))
}

/// The time stamp of a default run folder's name (`quickstart-20261123-062728` →
/// `20261123-062728`), `None` for any other name.
fn stamp(name: &str) -> Option<&str> {
    let stamp = name.get(name.len().checked_sub(15)?..)?;
    let (date, time) = stamp.split_once('-')?;
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let before = &name[..name.len() - 15];
    (digits(date, 8) && digits(time, 6) && before.ends_with('-') && before.len() > 1)
        .then_some(stamp)
}

/// Removes the oldest default run folders of `parprof_dir` beyond the `keep` newest (all kept
/// when `keep` is 0); returns the folders removed.
pub fn prune(parprof_dir: &Path, keep: usize) -> io::Result<Vec<PathBuf>> {
    if keep == 0 {
        return Ok(Vec::new());
    }
    let mut runs: Vec<(String, PathBuf)> = std::fs::read_dir(parprof_dir)?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            Some((stamp(&name)?.to_owned(), e.path()))
        })
        .collect();
    runs.sort_by(|a, b| b.cmp(a));
    let old: Vec<PathBuf> = runs.into_iter().skip(keep).map(|(_, p)| p).collect();
    for dir in &old {
        std::fs::remove_dir_all(dir)?;
    }
    Ok(old)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_default_run_folders_have_a_stamp() {
        assert_eq!(stamp("quickstart-20261123-062728"), Some("20261123-062728"));
        assert_eq!(stamp("a-b-20261123-062728"), Some("20261123-062728"));
        assert_eq!(stamp("build"), None);
        assert_eq!(stamp("-20261123-062728"), None);
        assert_eq!(stamp("x-2026112-0627281"), None);
        assert_eq!(stamp("x-20261123_062728"), None);
    }

    #[test]
    fn the_oldest_runs_beyond_keep_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "a-20261120-100000",
            "b-20261121-100000",
            "a-20261122-100000",
            "build",
        ] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
        }
        std::fs::write(dir.path().join("x-20261101-100000"), "a file").unwrap();
        let removed = prune(dir.path(), 2).unwrap();
        assert_eq!(removed, [dir.path().join("a-20261120-100000")]);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "a-20261122-100000",
                "b-20261121-100000",
                "build",
                "x-20261101-100000"
            ]
        );
        assert!(prune(dir.path(), 0).unwrap().is_empty());
    }
}
