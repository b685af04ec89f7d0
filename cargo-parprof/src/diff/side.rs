//! The two sides of a diff, read from disk: run folders, folders of `--repeat` runs (with
//! their spread summary at the top), or a criterion bench's folder of benchmarks.

use super::report_digest::ReportDigest;
use crate::record::bench_harness::BenchIndex;
use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The schema of the spread's `report.json`.
pub const REPEAT_SCHEMA: &str = "parprof-repeat/1";

/// The schema this comparison reads.
const REPORT_SCHEMA: &str = "parprof-report/1";

/// One run of a side: its folder and its report.
pub struct Run {
    pub dir: PathBuf,
    pub(super) report: ReportDigest,
}

impl Run {
    /// When the run started, in ms since the Unix epoch (`None` for runs recorded before it was
    /// kept).
    fn started_unix_ms(&self) -> Option<f64> {
        self.report.target.started_unix_ms
    }

    /// The iterations of the routine in the measured batch, as criterion counted them.
    pub(super) fn measured_iterations(&self) -> Option<f64> {
        self.report
            .bench
            .as_ref()?
            .measured_iterations
            .filter(|&n| n > 0.0)
    }

    /// The iterations the regions' figures cover: the whole run, warm-up included
    /// (`bench.whole_run_views`); the probes keep to the measured batch.
    pub(super) fn whole_run_iterations(&self) -> Option<f64> {
        let warm_up = (self.report.bench.as_ref())
            .and_then(|b| b.warm_up_iterations)
            .unwrap_or(0.0);
        Some(self.measured_iterations()? + warm_up)
    }
}

/// The runs of one benchmark of a bench, or of a whole program (`name` is `None`).
pub struct Benchmark {
    pub name: Option<String>,
    pub runs: Vec<Run>,
}

/// Every run of one side.
pub struct Side {
    pub path: PathBuf,
    pub program: String,
    /// One entry without a name for a program; one per benchmark for a criterion bench.
    pub benchmarks: Vec<Benchmark>,
}

impl Side {
    /// The runs of benchmark `name` (none if the side does not have it).
    pub(super) fn runs_of(&self, name: Option<&str>) -> &[Run] {
        (self.benchmarks.iter())
            .find(|b| b.name.as_deref() == name)
            .map_or(&[], |b| b.runs.as_slice())
    }

    /// The middle of the times its runs started (the median, ms since the Unix epoch); `None`
    /// when a run does not say.
    pub(super) fn middle_start_ms(&self) -> Option<f64> {
        let starts: Option<Vec<f64>> = (self.benchmarks.iter())
            .flat_map(|b| &b.runs)
            .map(Run::started_unix_ms)
            .collect();
        starts
            .filter(|s| !s.is_empty())
            .map(|s| super::stats::median(&s))
    }

    /// Runs per benchmark (the fewest, should a benchmark have fewer).
    pub fn runs_per_benchmark(&self) -> usize {
        self.benchmarks
            .iter()
            .map(|b| b.runs.len())
            .min()
            .unwrap_or(0)
    }

    /// Every run carries criterion's count of its measured batch.
    pub(super) fn counts_iterations(&self) -> bool {
        (self.benchmarks.iter())
            .flat_map(|b| &b.runs)
            .all(|r| r.measured_iterations().is_some())
    }

    pub(super) fn is_bench(&self) -> bool {
        self.benchmarks.iter().any(|b| b.name.is_some())
    }
}

/// Reads a run folder, a folder whose sub-folders are run folders, or a bench's folder.
pub fn load_side(path: &Path) -> Result<Side> {
    if !path.is_dir() {
        bail!(
            "{} is not a folder: give a run folder of `cargo parprof` (or a folder of them)",
            path.display()
        );
    }
    let Some(index) = BenchIndex::read(path)? else {
        let runs = load_runs(path)?;
        return Ok(Side {
            path: path.to_path_buf(),
            program: program_of(&runs[0]),
            benchmarks: vec![Benchmark { name: None, runs }],
        });
    };
    let mut benchmarks = Vec::new();
    for entry in &index.benchmarks {
        let runs = load_runs(&path.join(&entry.dir))
            .with_context(|| format!("benchmark `{}`", entry.name))?;
        if let Some(other) = runs.iter().find(|r| program_of(r) != index.program) {
            bail!(
                "{} is a run of `{}`, not of the bench `{}`",
                other.dir.display(),
                program_of(other),
                index.program
            );
        }
        benchmarks.push(Benchmark {
            name: Some(entry.name.clone()),
            runs,
        });
    }
    Ok(Side {
        path: path.to_path_buf(),
        program: index.program,
        benchmarks,
    })
}

/// Whether `dir` is one run: it has a `report.json` that is not the spread of `--repeat`.
fn is_run(dir: &Path) -> bool {
    let file = dir.join("report.json");
    if !file.is_file() {
        return false;
    }
    // A summary of runs names its schema first; a run's report never has that one.
    let mut head = Vec::new();
    let _ = std::fs::File::open(&file).and_then(|f| f.take(200).read_to_end(&mut head));
    !String::from_utf8_lossy(&head).contains(REPEAT_SCHEMA)
}

/// The run in `path`, or the runs in its sub-folders, all of one program.
fn load_runs(path: &Path) -> Result<Vec<Run>> {
    let dirs: Vec<PathBuf> = if is_run(path) {
        vec![path.to_path_buf()]
    } else {
        let mut subs: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_run(p))
            .collect();
        subs.sort();
        subs
    };
    if dirs.is_empty() {
        bail!(
            "{} is not a run folder: it has no report.json, nor sub-folders that have one",
            path.display()
        );
    }
    let runs = dirs
        .into_iter()
        .map(load_run)
        .collect::<Result<Vec<Run>>>()?;
    let program = program_of(&runs[0]);
    if let Some(other) = runs.iter().find(|r| program_of(r) != program) {
        bail!(
            "{} holds runs of different programs: `{program}` and `{}` ({})",
            path.display(),
            program_of(other),
            other.dir.display()
        );
    }
    Ok(runs)
}

fn load_run(dir: PathBuf) -> Result<Run> {
    let file = dir.join("report.json");
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let report: Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is damaged (not JSON); profile that run again",
            file.display()
        )
    })?;
    match report["schema"].as_str() {
        Some(REPORT_SCHEMA) => {}
        Some(other) => bail!(
            "{} has schema `{other}`; this parprof reads `{REPORT_SCHEMA}`",
            file.display()
        ),
        None => bail!("{} is not a parprof report (no schema)", file.display()),
    }
    let report = ReportDigest::deserialize(report)
        .with_context(|| format!("{} is damaged; profile that run again", file.display()))?;
    Ok(Run { dir, report })
}

pub(super) fn program_of(run: &Run) -> String {
    match run.report.target.name.as_str() {
        "" => "?".to_owned(),
        name => name.to_owned(),
    }
}
