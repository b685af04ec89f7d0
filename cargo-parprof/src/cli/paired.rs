//! `cargo parprof diff --base REV <target>`: a pull request's two commits checked out (BASE in
//! a git worktree under `target/parprof/`, HEAD the work tree or a worktree of its own), built
//! into one profiling build folder, then run alternated, pair by pair, each run recorded as
//! `--repeat`'s are, until the paired rule ([`diff::paired`]) decides every row or the budget
//! is spent.

use super::build::{Built, build_target_in};
use super::options::RecordingArgs;
use super::profile::profile_once;
use super::{DiffArgs, write_comparison};
use crate::build::target::TargetKind;
use crate::diff::{self, paired};
use crate::record::session::{Program, Settings};
use crate::recording::Harness;
use crate::{console, report::FrameView};
use anyhow::{Context, Result, bail};
use clap::Parser;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

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

/// Builds both commits, runs them alternated until every row is decided or the budget is
/// spent, and writes the comparison; returns the exit code.
pub(super) fn diff_revisions(args: &DiffArgs, base_rev: &str) -> Result<i32> {
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
    if head.built.target.harness == Harness::Criterion {
        bail!(
            "`diff --base` does not pair criterion benches yet: profile each commit with \
             `cargo parprof --repeat N --bench NAME` and compare the folders with `cargo parprof \
             diff BASE HEAD`"
        );
    }
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
        let built = build_target_in(&build, dir.as_deref(), Some(&self.build_dir))?;
        let folder = self.copies.join(label.to_lowercase());
        std::fs::create_dir_all(&folder)
            .with_context(|| format!("cannot create {}", folder.display()))?;
        let exe = folder.join(&built.target.name);
        std::fs::copy(&built.exe, &exe)
            .with_context(|| format!("cannot copy {}", built.exe.display()))?;
        let runs = self.args.output.join(label.to_lowercase());
        clear_pairs(&runs)?;
        Ok(PairSide {
            label,
            built,
            exe,
            runs,
        })
    }
}

/// Removes the pair folders of an earlier diff from `runs` (and nothing else there).
fn clear_pairs(runs: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return Ok(());
    };
    for entry in entries.filter_map(Result::ok) {
        if entry.file_name().to_string_lossy().starts_with(PAIR_PREFIX) {
            std::fs::remove_dir_all(entry.path())
                .with_context(|| format!("cannot remove {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Pair folders: `pair-001`, … (numbered to sort in order, so that run i of each side is
/// pair i).
const PAIR_PREFIX: &str = "pair-";

/// Runs the pairs, looking at them as [`paired::next_look`] says, until every row is decided,
/// the budget is spent or the looks are all taken; writes the comparison.
fn run_pairs(args: &DiffArgs, sides: &[PairSide; 2]) -> Result<i32> {
    let (settings, frames) = default_settings();
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
            run_pair(args, sides, pairs, &settings, frames)?;
            pairs += 1;
        }
        looks += 1;
        let base = diff::load_side(&sides[0].runs).context("BASE")?;
        let head = diff::load_side(&sides[1].runs).context("HEAD")?;
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
            return write_comparison(&head, &comparison, args);
        }
        next = paired::next_look(pairs);
    }
}

/// Runs pair `pair` (from 0): both sides, in the pair's order, each recorded into its folder.
fn run_pair(
    args: &DiffArgs,
    sides: &[PairSide; 2],
    pair: usize,
    settings: &Settings,
    frames: FrameView,
) -> Result<()> {
    let order = if paired::base_first(pair) {
        [&sides[0], &sides[1]]
    } else {
        [&sides[1], &sides[0]]
    };
    for side in order {
        crate::console::note!("parprof: pair {}: {}", pair + 1, side.label);
        let target = &side.built.target;
        let kind = target.kind.to_string();
        let mut program_args = args.args.clone();
        if target.kind == TargetKind::Bench {
            // What `cargo bench` passes.
            program_args.push(OsString::from("--bench"));
        }
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
        let dir = side.runs.join(format!("{PAIR_PREFIX}{:03}", pair + 1));
        let code = profile_once(&program, settings, frames, &program_args, &dir)?;
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
