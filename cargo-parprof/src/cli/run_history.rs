//! The run folders `cargo parprof` makes by itself under `target/parprof/`
//! (`<target>-<YYYYMMDD>-<HHMMSS>-<pid>`): named uniquely and created atomically, so that
//! runs started at the same time never share one, and the oldest removed beyond `--keep N`,
//! so that repeated runs do not pile up gigabytes. Folders given with `-o` are never touched.

use crate::record::output_dir;
use anyhow::Context;
use chrono::Local;
use std::io;
use std::path::{Path, PathBuf};

/// Tries of a name taken already (the same process, or a reused pid, in the same second)
/// before giving up.
const MAX_TRIES: u32 = 1000;

/// Creates the default folder of a new run of `target` under `parprof_dir` and returns it.
/// The name holds the time, this process's id and, when that is taken, a counter; the folder
/// is made with `create_dir`, which fails when it exists, so no two runs get the same one.
pub fn new_run_dir(parprof_dir: &Path, target: &str) -> io::Result<PathBuf> {
    std::fs::create_dir_all(parprof_dir)?;
    let base = format!(
        "{target}-{}-{}",
        Local::now().format("%Y%m%d-%H%M%S"),
        std::process::id()
    );
    for n in 1..=MAX_TRIES {
        let name = if n == 1 {
            base.clone()
        } else {
            format!("{base}.{n}")
        };
        let dir = parprof_dir.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{MAX_TRIES} run folders named {base} exist already in {}",
            parprof_dir.display()
        ),
    ))
}

/// The sort key of a default run folder's name: its time stamp, then what makes it unique
/// (`quickstart-20261123-062728-4242.2` → `20261123-062728`, `4242.2`; the names of earlier
/// versions have no unique part). `None` for any other name.
fn stamp(name: &str) -> Option<(&str, &str)> {
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let unique_part = |s: &str| {
        let (pid, n) = s.split_once('.').unwrap_or((s, "0"));
        !pid.is_empty()
            && !n.is_empty()
            && (pid.bytes().chain(n.bytes())).all(|b| b.is_ascii_digit())
    };
    let at_end = |name: &str| -> Option<usize> {
        let start = name.len().checked_sub(15)?;
        let stamp = name.get(start..)?;
        let (date, time) = stamp.split_once('-')?;
        let before = &name[..start];
        (digits(date, 8) && digits(time, 6) && before.ends_with('-') && before.len() > 1)
            .then_some(start)
    };
    if let Some(start) = at_end(name) {
        return Some((&name[start..], ""));
    }
    let (rest, unique) = name.rsplit_once('-')?;
    let start = at_end(rest).filter(|_| unique_part(unique))?;
    Some((&rest[start..], unique))
}

/// Removes the oldest default run folders of `parprof_dir` beyond the `keep` newest (all kept
/// when `keep` is 0); returns the folders removed.
pub fn prune(parprof_dir: &Path, keep: usize) -> io::Result<Vec<PathBuf>> {
    if keep == 0 {
        return Ok(Vec::new());
    }
    let mut runs: Vec<((String, u64, u64), PathBuf)> = std::fs::read_dir(parprof_dir)?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (stamp, unique) = stamp(&name)?;
            let (pid, n) = unique.split_once('.').unwrap_or((unique, "0"));
            let key = (
                stamp.to_owned(),
                pid.parse().unwrap_or(0),
                n.parse().unwrap_or(0),
            );
            Some((key, e.path()))
        })
        .collect();
    runs.sort_by(|a, b| b.cmp(a));
    let old: Vec<PathBuf> = runs.into_iter().skip(keep).map(|(_, p)| p).collect();
    for dir in &old {
        std::fs::remove_dir_all(dir)?;
    }
    Ok(old)
}

/// The folder a new run writes into: `output` (an earlier run there replaced), or a new
/// folder of its own under `parprof_dir`.
pub(super) fn output_folder(
    output: Option<&Path>,
    parprof_dir: &Path,
    name: &str,
) -> anyhow::Result<PathBuf> {
    match output {
        Some(dir) => {
            output_dir::claim(dir)?;
            Ok(dir.to_path_buf())
        }
        None => new_run_dir(parprof_dir, name)
            .with_context(|| format!("cannot create a run folder in {}", parprof_dir.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_default_run_folders_have_a_stamp() {
        assert_eq!(
            stamp("quickstart-20261123-062728"),
            Some(("20261123-062728", ""))
        );
        assert_eq!(
            stamp("a-b-20261123-062728-4242"),
            Some(("20261123-062728", "4242"))
        );
        assert_eq!(
            stamp("a-20261123-062728-4242.3"),
            Some(("20261123-062728", "4242.3"))
        );
        assert_eq!(stamp("build"), None);
        assert_eq!(stamp("-20261123-062728"), None);
        assert_eq!(stamp("-20261123-062728-1"), None);
        assert_eq!(stamp("x-2026112-0627281"), None);
        assert_eq!(stamp("x-20261123_062728"), None);
        assert_eq!(stamp("x-20261123-062728-"), None);
        assert_eq!(stamp("x-20261123-062728-12.x"), None);
        assert_eq!(stamp("x-20261123-062728-notes"), None);
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

    #[test]
    fn new_folders_of_one_second_are_distinct_and_ordered() {
        let dir = tempfile::tempdir().unwrap();
        let made: Vec<PathBuf> = (0..5)
            .map(|_| new_run_dir(&dir.path().join("parprof"), "demo").unwrap())
            .collect();
        for (i, a) in made.iter().enumerate() {
            assert!(a.is_dir());
            assert!(made[i + 1..].iter().all(|b| b != a), "{made:?}");
            let name = a.file_name().unwrap().to_str().unwrap();
            assert!(stamp(name).is_some(), "{name} is a default run folder");
        }
        // The newest kept: the counter orders folders of the same second and process.
        let removed = prune(&dir.path().join("parprof"), 1).unwrap();
        assert_eq!(removed.len(), 4);
        assert!(made[4].is_dir() && !made[3].exists(), "{removed:?}");
    }
}
