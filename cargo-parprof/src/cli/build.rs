//! `cargo parprof build`: the profiling executable of a cargo target, and nothing run. Its
//! path is the last line of stdout, for scripts that copy it where the cores are.

use super::options::BuildArgs;
use crate::build::target::{self, BuildOptions, ResolvedTarget, TargetKind, TargetRequest};
use crate::console;
use crate::recording::RayonHooks;
use anyhow::{Context, Result};
use clap::Parser;
use std::path::{Path, PathBuf};

/// `cargo parprof build`: build the profiling executable of a target (rayon-core hooks, frame
/// pointers, symbols kept) and print its path as the last line; run nothing.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "cargo parprof build",
    version,
    after_help = "Record the executable on any Linux machine, no toolchain needed: \
                  `cargo-parprof record -o DIR -- EXE [ARGS]`, then `cargo parprof report DIR` \
                  anywhere."
)]
pub struct BuildCommand {
    #[command(flatten)]
    pub build: BuildArgs,
}

/// A target built for profiling.
pub struct Built {
    pub target: ResolvedTarget,
    pub exe: PathBuf,
    pub rayon_hooks: RayonHooks,
    /// The workspace's target folder (the profiling build is under `parprof/build` in it).
    pub target_dir: PathBuf,
}

impl BuildArgs {
    fn target_request(&self) -> TargetRequest {
        let t = &self.target;
        let kind_and_name = [
            (TargetKind::Bin, &t.bin),
            (TargetKind::Example, &t.example),
            (TargetKind::Bench, &t.bench),
            (TargetKind::Test, &t.test),
        ]
        .into_iter()
        .find_map(|(kind, name)| name.clone().map(|n| (kind, n)));
        TargetRequest {
            kind_and_name,
            package: self.package.clone(),
        }
    }

    fn build_options(&self) -> BuildOptions {
        BuildOptions {
            profile: self.profile.clone(),
            features: self.features.clone(),
            all_features: self.all_features,
            no_default_features: self.no_default_features,
        }
    }
}

/// The workspace's own packages (`cargo metadata --no-deps`), with cargo run from `dir`
/// (default: the current directory) and the manifest `args` name, if any.
pub(super) fn workspace_metadata(
    args: &BuildArgs,
    dir: Option<&Path>,
) -> Result<cargo_metadata::Metadata> {
    let mut metadata_cmd = cargo_metadata::MetadataCommand::new();
    metadata_cmd.no_deps();
    if let Some(dir) = dir {
        metadata_cmd.current_dir(dir);
    }
    if let Some(path) = &args.manifest_path {
        metadata_cmd.manifest_path(path);
    }
    metadata_cmd
        .exec()
        .context("`cargo metadata` failed: is this a cargo project?")
}

/// Resolves the target asked for and builds it for profiling.
pub fn build_target(args: &BuildArgs) -> Result<Built> {
    build_target_in(args, None, None)
}

/// [`build_target`] with cargo run from `dir` (default: the current directory), into the
/// profiling build folder `build_dir` (default: `parprof/build` in the workspace's target
/// folder): a checkout of another commit built beside the work tree's, sharing its artifacts.
pub(super) fn build_target_in(
    args: &BuildArgs,
    dir: Option<&Path>,
    build_dir: Option<&Path>,
) -> Result<Built> {
    let metadata = workspace_metadata(args, dir)?;
    let target = target::resolve(&metadata, &args.target_request())?;
    let target_dir = metadata.target_directory.clone().into_std_path_buf();
    crate::console::note!(
        "parprof: building {} `{}` for profiling",
        target.kind,
        target.name
    );
    let build_dir = build_dir.map_or_else(
        || target_dir.join("parprof").join("build"),
        Path::to_path_buf,
    );
    let (exe, rayon_hooks) =
        target::build_for_profiling(&target, &args.build_options(), &build_dir)?;
    Ok(Built {
        target,
        exe,
        rayon_hooks,
        target_dir,
    })
}

/// Builds the executable, says what a recording of it will hold, and prints its path last.
pub fn build(command: &BuildCommand) -> Result<()> {
    let built = build_target(&command.build)?;
    match &built.rayon_hooks {
        RayonHooks::Hooked { version } => crate::console::note!(
            "parprof: built with hooks in rayon-core {version}: a recording holds the workers' \
             lifecycle"
        ),
        RayonHooks::NoRayon => {
            crate::console::note!("parprof: built; the program does not use rayon")
        }
        RayonHooks::Unavailable { reason } => crate::console::note!(
            "parprof: warning: built without rayon-core hooks, so a recording will have no \
             worker lifecycle: {reason}"
        ),
    }
    let bench_flag = if built.target.kind == TargetKind::Bench {
        " --bench"
    } else {
        ""
    };
    crate::console::note!(
        "parprof: record it (here or on a copy elsewhere) with `cargo-parprof record -o DIR -- \
         {}{bench_flag}`",
        built.exe.display()
    );
    console::result(built.exe.display());
    Ok(())
}
