//! What the benchmarks of the root package share: building an example as `cargo parprof` does,
//! and medians.

use cargo_parprof::target::{self, BuildOptions, TargetKind, TargetRequest};
use std::path::{Path, PathBuf};

/// Builds one of this repository's examples for profiling, exactly as `cargo parprof` would.
pub fn build_example(example: &str, opts: &BuildOptions) -> anyhow::Result<PathBuf> {
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
    target::build(&resolved, opts, &build_dir)
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
