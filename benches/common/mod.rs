//! What the benchmarks of the root package share: building an example as `cargo parprof` does,
//! and medians.

#![allow(dead_code)] // each bench uses a different part of this module

use cargo_parprof::build::target::{self, BuildOptions, ResolvedTarget, TargetKind, TargetRequest};
use cargo_parprof::record::collect::CollectOptions;
use cargo_parprof::record::launch::{self, RunOutcome};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Runs `exe` with `args` under the collector, its probes recording into `out` (as
/// `cargo parprof` runs a target), and checks that it exited with 0. Pass options with
/// `symbolize: false` to time the program alone: symbolising comes after it exited.
pub fn run_profiled(
    exe: &Path,
    args: &[&str],
    out: &Path,
    opts: &CollectOptions,
) -> anyhow::Result<RunOutcome> {
    run_profiled_with_env(exe, args, out, opts, Vec::new())
}

/// [`run_profiled`] with more variables in the program's environment.
pub fn run_profiled_with_env(
    exe: &Path,
    args: &[&str],
    out: &Path,
    opts: &CollectOptions,
    mut env: Vec<(OsString, OsString)>,
) -> anyhow::Result<RunOutcome> {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    env.push((OsString::from("PARPROF_OUT"), out.as_os_str().to_owned()));
    let outcome = launch::run_and_collect(exe, &args, &env, None, opts)?;
    anyhow::ensure!(outcome.exit.success(), "{} {}", exe.display(), outcome.exit);
    Ok(outcome)
}

/// Builds one of this repository's examples for profiling, exactly as `cargo parprof` would
/// (with the rayon-core hooks).
pub fn build_example(example: &str, opts: &BuildOptions) -> anyhow::Result<PathBuf> {
    let (target, build_dir) = resolve_example(example)?;
    Ok(target::build_for_profiling(&target, opts, &build_dir)?.0)
}

/// Builds one of this repository's examples as `cargo parprof` does, but without the
/// rayon-core hooks: the uninstrumented baseline. The profiling build writes its executable
/// to the same path, so the baseline is copied beside it (`<name>-unhooked`): a later
/// `build_example` must not replace what a bench runs as plain.
pub fn build_example_unhooked(example: &str, opts: &BuildOptions) -> anyhow::Result<PathBuf> {
    let (target, build_dir) = resolve_example(example)?;
    let built = target::build(&target, opts, &build_dir, None)?;
    let mut name = built.file_name().unwrap_or_default().to_owned();
    name.push("-unhooked");
    let copy = built.with_file_name(name);
    std::fs::copy(&built, &copy)?;
    Ok(copy)
}

/// The example as a cargo target, and the folder `cargo parprof` builds in.
fn resolve_example(example: &str) -> anyhow::Result<(ResolvedTarget, PathBuf)> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let metadata = cargo_metadata::MetadataCommand::new()
        .manifest_path(&manifest)
        .no_deps()
        .exec()?;
    let request = TargetRequest {
        kind_and_name: Some((TargetKind::Example, example.into())),
        package: None,
    };
    let resolved = target::resolve(&metadata, &request)?;
    let build_dir = metadata
        .target_directory
        .as_std_path()
        .join("parprof")
        .join("build");
    Ok((resolved, build_dir))
}

/// Builds the `cargo-parprof` binary (release), as `cargo parprof` does on its first use,
/// and returns its path: the benchmarks that time whole commands run it directly.
pub fn release_profiler() -> anyhow::Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = std::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "-p",
            "cargo-parprof",
            "--bin",
            "cargo-parprof",
        ])
        .current_dir(root)
        .status()?;
    anyhow::ensure!(status.success(), "cannot build cargo-parprof");
    Ok(root.join("target/release/cargo-parprof"))
}

/// Builds one of this repository's examples as its users build it, `cargo build --release`
/// (no hooks, none of the profiling build's flags), and returns its path: the program whose
/// gain a fix is promised.
pub fn users_release_build(example: &str) -> anyhow::Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = std::process::Command::new(env!("CARGO"))
        .args(["build", "--release", "--example", example])
        .current_dir(root)
        .status()?;
    anyhow::ensure!(status.success(), "cannot build the example {example}");
    Ok(root.join("target/release/examples").join(example))
}

/// The size of the files under `dir`, in bytes.
pub fn folder_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
