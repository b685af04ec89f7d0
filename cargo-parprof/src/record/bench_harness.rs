//! Benches profiled per benchmark.
//!
//! A criterion bench, run as `cargo bench` runs it, spends most of its time warming up and
//! computing statistics around the code it measures, and runs every benchmark one after the
//! other: profiled whole, its report mixes them all. Criterion has a mode made for profilers,
//! `--profile-time SECONDS`: it runs one benchmark's routine for that long, warm-up included
//! ([`CRITERION_WARM_UP_S`]), with no analysis. So a criterion bench is profiled as one run per
//! benchmark:
//!
//! 1. [`detect`] the harness from the package's dependencies;
//! 2. [`list_criterion`]: the benchmarks, from the bench's own `--list` (with the filter the
//!    user gave after `--`, so `-- parse` profiles only the benchmarks criterion would run);
//! 3. [`criterion_args`]: each one run alone (`--exact`) in profile mode for
//!    [`profile_time`], into a run folder of its own, named by [`folder_name`];
//! 4. [`BenchIndex`]: `benchmarks.json` at the top of the output folder lists them (what
//!    `cargo parprof diff` pairs benchmark by benchmark), and [`combined_markdown`] makes the
//!    top `report.md` with one section per benchmark.
//!
//! What was measured: the bench is built against criterion with parprof's hooks
//! (`build::criterion_hooks`), which write the warm-up's and the measured batch's iterations,
//! as criterion counts them, into the trace; the analysis keeps the probes and the CPU samples
//! to the measured batch, and each benchmark's report states both counts. Only where criterion
//! could not be hooked does [`measured`] say what the profile time implies instead.
//!
//! A bench without criterion (`harness = false` with its own `main`, or libtest's `#[bench]`)
//! is profiled as one program. divan is detected, but profiled as one program too: its
//! per-benchmark mode is not supported yet, and the run says so.

use crate::recording::Harness;
use anyhow::{Context, Result, bail};
use cargo_metadata::Package;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// The file at the top of a benches' output folder.
pub const INDEX_FILE: &str = "benchmarks.json";
const INDEX_SCHEMA: &str = "parprof-benchmarks/1";

/// The harness of a bench of `package`, from its dependencies (criterion or divan, as a
/// dependency or dev-dependency, possibly renamed).
pub fn detect(package: &Package) -> Harness {
    let uses = |krate: &str| package.dependencies.iter().any(|d| d.name == krate);
    if uses("criterion") {
        Harness::Criterion
    } else if uses("divan") {
        Harness::Divan
    } else {
        Harness::Program
    }
}

/// The benchmarks of a criterion bench, as its `--list` prints them (`<id>: benchmark`),
/// restricted by the filter arguments the user gave.
pub fn list_criterion(
    exe: &Path,
    user_args: &[OsString],
    working_dir: &Path,
) -> Result<Vec<String>> {
    let output = Command::new(exe)
        .args(["--bench", "--list"])
        .args(user_args)
        .current_dir(working_dir)
        .output()
        .with_context(|| format!("cannot run {} --list", exe.display()))?;
    if !output.status.success() {
        bail!(
            "`{} --bench --list` failed ({}): {}",
            exe.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let ids = parse_criterion_list(&String::from_utf8_lossy(&output.stdout));
    if ids.is_empty() {
        bail!(
            "the criterion bench {} lists no benchmark{}",
            exe.display(),
            if user_args.is_empty() {
                String::new()
            } else {
                " that matches the filter given after `--`".to_owned()
            }
        );
    }
    Ok(ids)
}

fn parse_criterion_list(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|line| line.strip_suffix(": benchmark"))
        .map(str::to_owned)
        .collect()
}

/// What criterion 0.5's profile mode measures before the batch it was asked for: it warms up
/// (the routine in batches of 1, 2, 4, … iterations until more than 1 s of it was measured),
/// then runs one batch of `(profile time − warm-up) ÷ mean iteration` iterations, rounded
/// down. The warm-up lasts more than 1 s and at most 2 s plus one iteration; when it ends less
/// than one iteration before the profile time, the batch has 0 iterations and
/// `iter_batched`/`iter_batched_ref` panic ("Batch size must not be zero"). So parprof asks
/// for the warm-up's longest time on top of `--bench-time`.
pub const CRITERION_WARM_UP_S: f64 = 2.0;

/// A profile time at most criterion's shortest warm-up: it measures the warm-up only, and its
/// batch is never run (the fallback when the batch had 0 iterations).
pub const WARM_UP_ONLY_S: f64 = 1.0;

/// The `--profile-time` that gives the measured batch about `bench_time` seconds.
pub fn profile_time(bench_time: f64) -> f64 {
    bench_time + CRITERION_WARM_UP_S
}

/// The arguments that run benchmark `id` alone for `seconds` in criterion's profile mode.
pub fn criterion_args(id: &str, seconds: f64) -> Vec<OsString> {
    [
        "--bench",
        "--profile-time",
        &format!("{seconds}"),
        "--exact",
        id,
    ]
    .map(OsString::from)
    .to_vec()
}

/// What a profile of `profile_time_s` in criterion's profile mode measured, in words, when
/// criterion's own counts are not known (criterion not built with parprof's hooks: the build
/// said why).
pub fn measured(profile_time_s: f64) -> String {
    if profile_time_s <= WARM_UP_ONLY_S {
        return format!(
            "criterion's warm-up only (`--profile-time {profile_time_s}`: the routine in \
             batches of 1, 2, 4, … iterations until 1 s of it was measured; a measured batch \
             would have had 0 iterations)"
        );
    }
    format!(
        "criterion's warm-up (the routine in batches of 1, 2, 4, … iterations until 1 s of it \
         was measured), then one batch filling the rest of `--profile-time {profile_time_s}` \
         (about {:.3} s); both run the same routine, and the profile covers both (criterion \
         was not built with parprof's hooks, so its iteration counts are not known)",
        profile_time_s - CRITERION_WARM_UP_S
    )
}

/// A folder name for a benchmark id (`group/param 10` → `group_param_10`), unique among
/// `taken`.
pub fn folder_name(id: &str, taken: &[String]) -> String {
    let base: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let base = if base.is_empty() {
        "bench".into()
    } else {
        base
    };
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

/// `benchmarks.json`: the benchmarks of one bench and their run folders.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchIndex {
    pub schema: String,
    /// The bench target's name.
    pub program: String,
    pub benchmarks: Vec<BenchEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchEntry {
    /// criterion's benchmark id.
    pub name: String,
    /// Its run folder, relative to the index.
    pub dir: String,
    /// The `--profile-time` it ran with (absent in indexes of older parprof).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_time_s: Option<f64>,
}

impl BenchIndex {
    pub fn new(program: &str, benchmarks: Vec<BenchEntry>) -> Self {
        BenchIndex {
            schema: INDEX_SCHEMA.to_owned(),
            program: program.to_owned(),
            benchmarks,
        }
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(INDEX_FILE);
        std::fs::write(&path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// The index in `dir`, `None` when `dir` is not a benches' output folder.
    pub fn read(dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(INDEX_FILE);
        if !path.exists() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let index: BenchIndex = serde_json::from_str(&text)
            .with_context(|| format!("{} is damaged; profile the bench again", path.display()))?;
        if index.schema != INDEX_SCHEMA {
            bail!(
                "{} has schema `{}`; this parprof reads `{INDEX_SCHEMA}`",
                path.display(),
                index.schema
            );
        }
        if let Some(bad) = index
            .benchmarks
            .iter()
            .find(|b| b.dir.is_empty() || Path::new(&b.dir).components().count() != 1)
        {
            bail!(
                "{} is damaged: `{}` is not a folder name",
                path.display(),
                bad.dir
            );
        }
        Ok(Some(index))
    }
}

/// How a benchmark's `report.md` starts what criterion counted (`report::markdown`'s
/// `BENCH_MEASURED`, in bold).
const MEASURED_IN_REPORT: &str = "**Measured:**";

/// The top `report.md` of a bench: one section per benchmark, each its own `report.md` (of its
/// first run with `--repeat`) with headings one level down and links into its folder.
pub fn combined_markdown(index: &BenchIndex, dir: &Path) -> String {
    let mut md = format!(
        "# parprof: bench `{}`, {} benchmarks\n\nEach benchmark was run alone in criterion's \
         profile mode (`--profile-time`: a warm-up, then one measured batch, no statistics); \
         its files are in its folder.\n",
        index.program,
        index.benchmarks.len()
    );
    for b in &index.benchmarks {
        // With `--repeat`, the benchmark's folder holds the spread and `run-1` the first run.
        let run = [dir.join(&b.dir).join("run-1"), dir.join(&b.dir)]
            .into_iter()
            .find(|d| d.join("report.md").is_file());
        md.push_str(&format!("\n## Benchmark `{}` ({}/)\n\n", b.name, b.dir));
        let text = run
            .as_ref()
            .and_then(|run| std::fs::read_to_string(run.join("report.md")).ok())
            .unwrap_or_default();
        // The report states criterion's own counts when criterion was hooked; else what the
        // profile time implies is said here.
        if let Some(t) = b.profile_time_s
            && !text
                .lines()
                .any(|line| line.starts_with(MEASURED_IN_REPORT))
        {
            md.push_str(&format!("Measured: {}.\n\n", measured(t)));
        }
        let Some(run) = run else {
            md.push_str("No report: this benchmark's run did not finish.\n");
            continue;
        };
        let prefix = run
            .strip_prefix(dir)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        for line in text.lines() {
            if line.starts_with("# ") {
                continue; // the section heading above replaces the report's title
            }
            let line = if line.starts_with('#') {
                format!("#{line}")
            } else {
                line.to_owned()
            };
            md.push_str(&relink(&line, &prefix));
            md.push('\n');
        }
    }
    md
}

/// Markdown links to files of a run folder (`](cpu.svg)`) pointed into `prefix/`.
fn relink(line: &str, prefix: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        out.push_str(&rest[..i + 2]);
        rest = &rest[i + 2..];
        let target = &rest[..rest.find(')').unwrap_or(rest.len())];
        if !target.contains("://") && !target.starts_with('#') && !prefix.is_empty() {
            out.push_str(prefix);
            out.push('/');
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn criterion_lists_benchmarks_one_per_line() {
        let stdout = "Gnuplot not found, using plotters backend\nparse rows: benchmark\n\
                      group/sum 10: benchmark\n";
        assert_eq!(parse_criterion_list(stdout), ["parse rows", "group/sum 10"]);
    }

    #[test]
    fn folder_names_are_safe_and_unique() {
        assert_eq!(folder_name("group/sum 10", &[]), "group_sum_10");
        assert_eq!(folder_name("a/b", &["a_b".into()]), "a_b-2");
        assert_eq!(folder_name("../..", &[]), "_____");
        assert_eq!(folder_name("", &[]), "bench");
    }

    #[test]
    fn links_point_into_the_benchmarks_folder() {
        assert_eq!(
            relink("see [cpu](cpu.svg) and [web](https://x.y/z)", "sum/run-1"),
            "see [cpu](sum/run-1/cpu.svg) and [web](https://x.y/z)"
        );
    }

    #[test]
    fn a_damaged_index_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(BenchIndex::read(dir.path()).unwrap().is_none());
        std::fs::write(dir.path().join(INDEX_FILE), "{\"schema\":").unwrap();
        let err = BenchIndex::read(dir.path()).unwrap_err();
        assert!(format!("{err:#}").contains("damaged"), "{err:#}");
        let escaping = BenchIndex::new(
            "b",
            vec![BenchEntry {
                name: "x".into(),
                dir: "../x".into(),
                profile_time_s: None,
            }],
        );
        escaping.write(dir.path()).unwrap();
        assert!(BenchIndex::read(dir.path()).is_err());
        let good = BenchIndex::new(
            "b",
            vec![BenchEntry {
                name: "x".into(),
                dir: "x".into(),
                profile_time_s: Some(3.0),
            }],
        );
        good.write(dir.path()).unwrap();
        assert_eq!(BenchIndex::read(dir.path()).unwrap(), Some(good));
    }
}
