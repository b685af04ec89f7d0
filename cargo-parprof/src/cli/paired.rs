//! `cargo parprof diff --base REV <target>`: a pull request's two commits checked out (BASE in
//! a git worktree under `target/parprof/`, HEAD the work tree or a worktree of its own), built
//! into one profiling build folder, then run alternated, pair by pair, each run recorded as
//! `--repeat`'s are, until the paired rule ([`diff::paired`]) decides every row or the budget
//! is spent.

use super::build::{Built, build_target_in, workspace_metadata};
use super::options::{BuildArgs, DiffArgs, RecordingArgs};
use super::profile::profile_once;
use crate::build::target::TargetKind;
use crate::diff::{self, paired};
use crate::pipeline;
use crate::record::bench_harness::{self, BenchEntry, BenchIndex};
use crate::record::session::{Program, Settings};
use crate::recording::Harness;
use crate::{console, report::FrameView};
use anyhow::{Context, Result, bail};
use clap::Parser;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// BASE's side, HEAD's side, and their comparison.
pub(super) type Compared = (diff::Side, diff::Side, diff::Comparison);

/// A commit checked out in a git worktree of its own, removed when dropped.
struct Worktree {
    repo: PathBuf,
    dir: PathBuf,
}

impl Worktree {
    /// Checks `rev` out in `dir` (replacing a worktree an earlier diff left there).
    fn add(repo: &Path, rev: &str, dir: &Path) -> Result<Worktree> {
        let commit = git(
            repo,
            &["rev-parse", "--verify", &format!("{rev}^{{commit}}")],
        )
        .with_context(|| format!("`{rev}` is not a commit of {}", repo.display()))?;
        let path = dir.to_string_lossy();
        let _ = git(repo, &["worktree", "remove", "--force", &path]);
        if dir.exists() {
            std::fs::remove_dir_all(dir)
                .with_context(|| format!("cannot remove {}", dir.display()))?;
        }
        git(repo, &["worktree", "prune"])?;
        git(
            repo,
            &["worktree", "add", "--detach", "--force", &path, &commit],
        )
        .with_context(|| format!("cannot check `{rev}` out in {}", dir.display()))?;
        crate::console::note!(
            "parprof: {rev} ({}) checked out in {}",
            &commit[..12.min(commit.len())],
            dir.display()
        );
        Ok(Worktree {
            repo: repo.to_path_buf(),
            dir: dir.to_path_buf(),
        })
    }
}

impl Drop for Worktree {
    fn drop(&mut self) {
        let _ = git(
            &self.repo,
            &["worktree", "remove", "--force", &self.dir.to_string_lossy()],
        );
    }
}

/// `git ARGS` in `dir`: its stdout, trimmed.
fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let output = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .context("could not run `git`")?;
    if !output.status.success() {
        bail!(
            "`git {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// One side of the pairs: its build and where its runs go.
struct PairSide {
    label: &'static str,
    built: Built,
    /// The executable, copied out of the shared build folder (the other side's build replaces
    /// the one there).
    exe: PathBuf,
    runs: PathBuf,
}

/// The settings of a run recorded with no option given.
fn default_settings() -> (Settings, FrameView) {
    #[derive(Parser)]
    struct Defaults {
        #[command(flatten)]
        recording: RecordingArgs,
    }
    let recording = Defaults::parse_from(["parprof"]).recording;
    (recording.settings(), recording.frames.view())
}

/// Builds both commits and runs them alternated until every row is decided or the budget is
/// spent; returns both sides and the comparison.
pub(super) fn diff_revisions(args: &DiffArgs, base_rev: &str) -> Result<Compared> {
    // The program's output owns stdout.
    console::summary_to_stderr();
    let here = std::env::current_dir().context("no current directory")?;
    let repo = PathBuf::from(git(&here, &["rev-parse", "--show-toplevel"]).context(
        "`diff --base` checks BASE out with git: run it inside the program's git repository",
    )?);
    let repo = repo.canonicalize().unwrap_or(repo);
    let here = here.canonicalize().unwrap_or(here);
    let within_repo = here.strip_prefix(&repo).unwrap_or(Path::new(""));
    let metadata = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .current_dir(&here)
        .exec()
        .context("`cargo metadata` failed: is this a cargo project?")?;
    let parprof_dir = metadata
        .target_directory
        .into_std_path_buf()
        .join("parprof");
    let worktrees = parprof_dir.join("worktrees");
    let base_tree = Worktree::add(&repo, base_rev, &worktrees.join("base"))?;
    let head_tree = match &args.head_rev {
        Some(rev) => Some(Worktree::add(&repo, rev, &worktrees.join("head"))?),
        None => None,
    };
    // One build folder: BASE's build compiles the dependencies, HEAD's only what changed.
    let build = SharedBuild {
        args,
        repo: &repo,
        within_repo,
        build_dir: parprof_dir.join("build"),
        copies: parprof_dir.join("paired"),
    };
    let base = build.side("BASE", Some(&base_tree.dir))?;
    let head = build.side("HEAD", head_tree.as_ref().map(|t| t.dir.as_path()))?;
    run_pairs(args, &[base, head])
}

/// Builds into one profiling build folder, copying each executable out of it.
struct SharedBuild<'a> {
    args: &'a DiffArgs,
    repo: &'a Path,
    /// The current directory, relative to the repository's root.
    within_repo: &'a Path,
    build_dir: PathBuf,
    copies: PathBuf,
}

impl SharedBuild<'_> {
    /// Builds the target in the worktree `checkout` (default: the work tree), copies its
    /// executable out of the shared folder (the other side's build replaces it there), and
    /// clears the side's runs of an earlier diff.
    fn side(&self, label: &'static str, checkout: Option<&Path>) -> Result<PairSide> {
        crate::console::note!("parprof: building {label}");
        let mut build = self.args.build.clone();
        // A manifest given by its absolute path in the work tree is the checkout's own there.
        if let (Some(tree), Some(path)) = (checkout, &build.manifest_path)
            && let Ok(inside) = path.strip_prefix(self.repo)
        {
            build.manifest_path = Some(tree.join(inside));
        }
        let dir = checkout.map(|tree| tree.join(self.within_repo));
        mark_sources_changed(&build, dir.as_deref())?;
        let built = build_target_in(&build, dir.as_deref(), Some(&self.build_dir))?;
        let folder = self.copies.join(label.to_lowercase());
        std::fs::create_dir_all(&folder)
            .with_context(|| format!("cannot create {}", folder.display()))?;
        let exe = folder.join(&built.target.name);
        std::fs::copy(&built.exe, &exe)
            .with_context(|| format!("cannot copy {}", built.exe.display()))?;
        // Absolute: the runtime writes its trace there from the program's own directory, which
        // for a bench or test is the package root of its checkout.
        let runs = std::path::absolute(&self.args.output)
            .context("no current directory")?
            .join(label.to_lowercase());
        clear_pairs(&runs)?;
        Ok(PairSide {
            label,
            built,
            exe,
            runs,
        })
    }
}

/// Gives the files of the workspace's members in the checkout `dir` the time of now. cargo
/// tells a build's artifacts fresh by their time against the sources', and keys them by the
/// package's path within its workspace, which is the same in both checkouts: without this, the
/// side built second would be taken for the first one's build and not compiled (in the work
/// tree, this makes the next plain `cargo build` compile its members again).
fn mark_sources_changed(build: &BuildArgs, dir: Option<&Path>) -> Result<()> {
    let metadata = workspace_metadata(build, dir)?;
    let target_dir = metadata.target_directory.as_std_path();
    let now = std::time::SystemTime::now();
    for package in metadata.workspace_packages() {
        let root = package.manifest_path.parent().map(|p| p.as_std_path());
        if let Some(root) = root {
            touch_tree(root, target_dir, now);
        }
    }
    Ok(())
}

/// Sets the modification time of the files under `dir` to `now`, leaving out `target_dir`
/// and hidden folders (`.git`); a file that cannot be touched is left as it is.
fn touch_tree(dir: &Path, target_dir: &Path, now: std::time::SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        match entry.file_type() {
            Ok(t) if t.is_dir() && !hidden && path != target_dir && !path.ends_with("target") => {
                touch_tree(&path, target_dir, now)
            }
            Ok(t) if t.is_file() => {
                let _ = std::fs::File::options()
                    .append(true)
                    .open(&path)
                    .and_then(|f| f.set_modified(now));
            }
            _ => {}
        }
    }
}

/// Removes the run folders of an earlier diff from `runs`, and from its benchmarks' folders
/// (nothing else there).
fn clear_pairs(runs: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return Ok(());
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if entry.file_name().to_string_lossy().starts_with(RUN_PREFIX) {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
        } else {
            clear_pairs(&path)?;
        }
    }
    Ok(())
}

/// Run folders, as `--repeat` names them: `run-1`, … Run i of each side is pair i (both sides
/// hold the same names, so they list in the same order).
const RUN_PREFIX: &str = "run-";

/// What each pair runs on each side: the program, or one benchmark of a criterion bench.
struct Unit {
    /// The benchmark's id and folder (relative to the side's).
    benchmark: Option<BenchEntry>,
    args: Vec<OsString>,
    /// Whether BASE and HEAD have it.
    on: [bool; 2],
}

/// The program as one unit, or each benchmark of a criterion bench (those of either side).
fn units(args: &DiffArgs, sides: &[PairSide; 2]) -> Result<Vec<Unit>> {
    let target = &sides[1].built.target;
    if target.harness != Harness::Criterion {
        let mut program_args = args.args.clone();
        if target.kind == TargetKind::Bench {
            // What `cargo bench` passes: criterion and divan run their measurements only then.
            program_args.push(OsString::from("--bench"));
        }
        return Ok(vec![Unit {
            benchmark: None,
            args: program_args,
            on: [true, true],
        }]);
    }
    let lists = sides
        .iter()
        .map(|s| {
            let root = &s.built.target.package_root;
            bench_harness::list_criterion(&s.exe, &args.args, root)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut ids = lists[1].clone();
    ids.extend(lists[0].iter().filter(|id| !lists[1].contains(id)).cloned());
    let seconds = bench_harness::profile_time(args.bench_time);
    let mut units: Vec<Unit> = Vec::new();
    for id in ids {
        let taken: Vec<String> = (units.iter().flat_map(|u| &u.benchmark))
            .map(|b| b.dir.clone())
            .collect();
        units.push(Unit {
            args: bench_harness::criterion_args(&id, seconds),
            on: [lists[0].contains(&id), lists[1].contains(&id)],
            benchmark: Some(BenchEntry {
                dir: bench_harness::folder_name(&id, &taken),
                name: id,
                profile_time_s: Some(seconds),
            }),
        });
    }
    crate::console::note!(
        "parprof: criterion bench with {} benchmark(s), paired benchmark by benchmark",
        units.len()
    );
    Ok(units)
}

/// Runs the pairs, looking at them as [`paired::next_look`] says, until every row is decided,
/// the budget is spent or the looks are all taken; returns both sides and the comparison.
fn run_pairs(args: &DiffArgs, sides: &[PairSide; 2]) -> Result<Compared> {
    let (settings, frames) = default_settings();
    let units = units(args, sides)?;
    let threshold = paired::threshold(args.fail_above.map(|p| p / 100.0));
    let start = Instant::now();
    let (mut pairs, mut looks, mut next) = (0, 0, paired::MIN_PAIRS);
    loop {
        // Both orders as often: the budget is checked before a pair that starts with BASE.
        let out_of_time = |pairs: usize| {
            pairs >= paired::MIN_PAIRS
                && paired::base_first(pairs)
                && start.elapsed().as_secs_f64() >= args.budget
        };
        while pairs < next && !out_of_time(pairs) {
            for unit in &units {
                run_pair(sides, unit, pairs, &settings, frames)?;
            }
            pairs += 1;
        }
        looks += 1;
        let base = load_pairs(sides, 0, &units).context("BASE")?;
        let head = load_pairs(sides, 1, &units).context("HEAD")?;
        let mut comparison = diff::compare(&base, &head)?;
        let noisy = paired::judge(&mut comparison, threshold);
        crate::console::note!(
            "parprof: {pairs} pairs in {:.0} s: {noisy} of {} rows undecided",
            start.elapsed().as_secs_f64(),
            comparison.rows_tested
        );
        if noisy == 0 || pairs < next || looks == paired::MAX_LOOKS {
            comparison.pairing = Some(paired::Pairing {
                pairs,
                looks,
                budget_s: args.budget,
                elapsed_s: start.elapsed().as_secs_f64(),
                threshold,
                level: paired::level(),
            });
            return Ok((base, head, comparison));
        }
        next = paired::next_look(pairs);
    }
}

/// The runs of side `i` so far; for a bench, with its index and combined `report.md` written
/// first, as a profile of the bench writes them.
fn load_pairs(sides: &[PairSide; 2], i: usize, units: &[Unit]) -> Result<diff::Side> {
    let side = &sides[i];
    let index: Vec<BenchEntry> = (units.iter())
        .filter(|u| u.on[i])
        .filter_map(|u| u.benchmark.clone())
        .collect();
    if !index.is_empty() {
        let index = BenchIndex::new(&side.built.target.name, index);
        pipeline::write_bench_summary(&index, &side.runs)?;
    }
    diff::load_side(&side.runs)
}

/// Runs `unit` of pair `pair` (from 0) on both sides that have it, in the pair's order, each
/// recorded into its folder.
fn run_pair(
    sides: &[PairSide; 2],
    unit: &Unit,
    pair: usize,
    settings: &Settings,
    frames: FrameView,
) -> Result<()> {
    let order = if paired::base_first(pair) {
        [0, 1]
    } else {
        [1, 0]
    };
    for side in order.into_iter().filter(|&i| unit.on[i]).map(|i| &sides[i]) {
        let target = &side.built.target;
        let what = unit
            .benchmark
            .as_ref()
            .map_or_else(String::new, |b| format!(", benchmark `{}`", b.name));
        crate::console::note!("parprof: pair {}: {}{what}", pair + 1, side.label);
        let kind = target.kind.to_string();
        let program = Program {
            exe: &side.exe,
            name: &target.name,
            kind: &kind,
            harness: target.harness,
            rayon_hooks: &side.built.rayon_hooks,
            // `cargo bench`/`cargo test` run in the package root; a binary where it is called.
            working_dir: matches!(target.kind, TargetKind::Bench | TargetKind::Test)
                .then_some(target.package_root.as_path()),
        };
        let folder = unit
            .benchmark
            .as_ref()
            .map_or_else(|| side.runs.clone(), |b| side.runs.join(&b.dir));
        let dir = folder.join(format!("{RUN_PREFIX}{}", pair + 1));
        let code = profile_once(&program, settings, frames, &unit.args, &dir)?;
        if code != 0 {
            bail!(
                "{} exited with code {code} in pair {}: a comparison needs both commits to run \
                 ({})",
                side.label,
                pair + 1,
                dir.display()
            );
        }
    }
    Ok(())
}
