//! The folder given with `-o`: a new run replaces an earlier run there whole, so that no trace
//! of the earlier run is read as this one's (nor piles up beside it), and nothing else is ever
//! removed: a folder that holds anything parprof did not write is refused.

use anyhow::{Result, bail};
use std::path::{Path, PathBuf};

/// Files that only parprof writes: their presence makes a folder a run's.
const RECORD_FILES: [&str; 3] = ["records.ppr", "records.ppr.partial", "benchmarks.json"];

/// The reports and figures parprof writes beside the records.
const REPORT_FILES: [&str; 12] = [
    "report.json",
    "report.md",
    "report.html",
    "active.folded",
    "active.svg",
    "cpu.folded",
    "cpu.svg",
    "offcpu.folded",
    "offcpu.svg",
    "utilization.svg",
    "timeline.json",
    "profile.json.gz",
];

/// Sub-folders deep enough for a criterion bench's benchmark of `--repeat` runs
/// (`bench/id/run-1`).
const MAX_DEPTH: usize = 3;

/// Makes `dir` ready for a new run: created when missing, emptied when it holds an earlier run
/// of parprof; refused, with what is in the way, when it holds anything else.
pub fn claim(dir: &Path) -> Result<()> {
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(|e| {
            anyhow::anyhow!("cannot create the output folder {}: {e}", dir.display())
        })?;
        return Ok(());
    }
    if !dir.is_dir() {
        bail!(
            "the output folder {} is a file, not a folder",
            dir.display()
        );
    }
    let mut contents = Contents::default();
    contents.read(dir, 0)?;
    if contents.entries.is_empty() {
        return Ok(());
    }
    if !contents.foreign.is_empty() || !contents.is_run {
        let shown: Vec<String> = contents
            .foreign
            .iter()
            .chain(if contents.is_run {
                None
            } else {
                contents.entries.first()
            })
            .take(5)
            .map(|p| p.strip_prefix(dir).unwrap_or(p).display().to_string())
            .collect();
        bail!(
            "the output folder {} holds files parprof did not write ({}{}): a new run replaces \
             only an earlier run of parprof there. Give a new or empty folder with -o, or move \
             those files away",
            dir.display(),
            shown.join(", "),
            if contents.foreign.len() > shown.len() {
                ", …"
            } else {
                ""
            }
        );
    }
    for entry in &contents.entries {
        let removed = if entry.is_dir() {
            std::fs::remove_dir_all(entry)
        } else {
            std::fs::remove_file(entry)
        };
        removed.map_err(|e| {
            anyhow::anyhow!(
                "cannot remove {} of the earlier run in the output folder: {e}",
                entry.display()
            )
        })?;
    }
    crate::console::note!("parprof: replacing the earlier run in {}", dir.display());
    Ok(())
}

/// What a folder holds, sorted into parprof's files and the others.
#[derive(Default)]
struct Contents {
    /// The top folder's entries (what replacing it removes).
    entries: Vec<PathBuf>,
    /// Files and folders, at any depth, that parprof does not write.
    foreign: Vec<PathBuf>,
    /// A file only parprof writes was seen.
    is_run: bool,
}

impl Contents {
    fn read(&mut self, dir: &Path, depth: usize) -> Result<()> {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| anyhow::anyhow!("cannot read the output folder {}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| anyhow::anyhow!("cannot read {}: {e}", dir.display()))?;
            let path = entry.path();
            if depth == 0 {
                self.entries.push(path.clone());
            }
            // Not followed: a link is never parprof's, and removing it could reach elsewhere.
            let kind = entry.file_type()?;
            let name = entry.file_name();
            let name = name.to_str().unwrap_or("");
            if kind.is_dir() && depth < MAX_DEPTH {
                self.read(&path, depth + 1)?;
            } else if kind.is_file() && RECORD_FILES.contains(&name) {
                self.is_run = true;
            } else if kind.is_file() && (is_trace(name) || REPORT_FILES.contains(&name)) {
                self.is_run |= is_trace(name);
            } else {
                self.foreign.push(path);
            }
        }
        Ok(())
    }
}

/// A file the runtime writes into a run's folder: `trace-<pid>.ppt`, `slices-<pid>.txt`.
fn is_trace(name: &str) -> bool {
    let pid =
        |s: Option<&str>| s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
    pid(name
        .strip_prefix("trace-")
        .and_then(|s| s.strip_suffix(".ppt")))
        || pid(name
            .strip_prefix("slices-")
            .and_then(|s| s.strip_suffix(".txt")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, files: &[&str]) {
        for file in files {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"x").unwrap();
        }
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn missing_and_empty_folders_are_taken_as_they_are() {
        let root = tempfile::tempdir().unwrap();
        let new = root.path().join("a/b");
        claim(&new).unwrap();
        assert!(new.is_dir());
        claim(&new).unwrap();
        assert!(listing(&new).is_empty());
    }

    #[test]
    fn an_earlier_run_is_replaced_whole() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        write(
            dir,
            &[
                "records.ppr",
                "trace-41.ppt",
                "trace-42.ppt",
                "slices-41.txt",
                "report.json",
                "cpu.svg",
                "run-1/records.ppr",
                "run-1/trace-7.ppt",
                "bench-a/run-2/report.md",
            ],
        );
        claim(dir).unwrap();
        assert!(listing(dir).is_empty(), "{:?}", listing(dir));
    }

    #[test]
    fn anything_parprof_did_not_write_is_refused_and_kept() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        write(
            dir,
            &["records.ppr", "trace-1.ppt", "notes.txt", "run-1/data.csv"],
        );
        let err = claim(dir).unwrap_err().to_string();
        assert!(
            err.contains("notes.txt") && err.contains("data.csv"),
            "{err}"
        );
        assert!(err.contains("-o"), "{err}");
        assert_eq!(
            listing(dir),
            ["notes.txt", "records.ppr", "run-1", "trace-1.ppt"]
        );
    }

    #[test]
    fn reports_without_records_are_not_taken_for_a_run() {
        // A user's folder of notes that happens to hold a `report.md`.
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        write(dir, &["report.md"]);
        let err = claim(dir).unwrap_err().to_string();
        assert!(err.contains("report.md"), "{err}");
        assert_eq!(listing(dir), ["report.md"]);
        let file = dir.join("report.md");
        assert!(claim(&file).unwrap_err().to_string().contains("is a file"));
    }

    #[test]
    fn only_the_runtimes_file_names_are_traces() {
        assert!(is_trace("trace-123.ppt") && is_trace("slices-9.txt"));
        for name in [
            "trace-.ppt",
            "trace-12a.ppt",
            "trace-1.ppt.bak",
            "slices-x.txt",
        ] {
            assert!(!is_trace(name), "{name}");
        }
    }
}
