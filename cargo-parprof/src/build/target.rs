//! Which cargo target to profile, and building it for profiling.
//!
//! Resolution follows `cargo run`: `--bin/--example/--bench/--test NAME`, or the package's
//! single (or `default-run`) binary. The build uses an optimised profile with line-table debug
//! info, no stripping and frame pointers, without the user editing their `Cargo.toml`, in a
//! target directory of its own so it does not invalidate the user's normal builds.

use crate::build::hooked_copy::{COPIES_DIR, LockFileGuard, PreparedCopy, Program};
use crate::build::{criterion_hooks, rayon_hooks, rayon_iter_hooks};
use crate::record::bench_harness;
use crate::recording::Harness;
use crate::recording::RayonHooks;
use anyhow::{Context, Result, bail};
use cargo_metadata::{Message, Metadata, Package};
use std::fmt;
use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    Bin,
    Example,
    Bench,
    Test,
}

impl TargetKind {
    fn matches(self, kinds: &[cargo_metadata::TargetKind]) -> bool {
        use cargo_metadata::TargetKind as K;
        kinds.iter().any(|k| {
            matches!(
                (self, k),
                (Self::Bin, K::Bin)
                    | (Self::Example, K::Example)
                    | (Self::Bench, K::Bench)
                    | (Self::Test, K::Test)
            )
        })
    }

    pub fn flag(self) -> &'static str {
        match self {
            Self::Bin => "--bin",
            Self::Example => "--example",
            Self::Bench => "--bench",
            Self::Test => "--test",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Self::Bin => "binary",
            Self::Example => "example",
            Self::Bench => "bench",
            Self::Test => "test",
        }
    }

    /// The profile cargo would use to run this kind optimised.
    pub fn default_profile(self) -> &'static str {
        if self == Self::Bench {
            "bench"
        } else {
            "release"
        }
    }
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.noun())
    }
}

/// A target picked for profiling.
#[derive(Clone, Debug)]
pub struct ResolvedTarget {
    pub package: String,
    pub package_root: PathBuf,
    pub manifest_path: PathBuf,
    pub name: String,
    pub kind: TargetKind,
    /// What runs a bench's measurements ([`Harness::Program`] for other kinds).
    pub harness: Harness,
}

/// What the user asked for on the command line.
#[derive(Clone, Debug, Default)]
pub struct TargetRequest {
    pub kind_and_name: Option<(TargetKind, String)>,
    pub package: Option<String>,
}

/// The target `request` names among the workspace's packages (those of `-p`, if given), or
/// without a name the default binary of the one package it can be.
pub fn resolve(metadata: &Metadata, request: &TargetRequest) -> Result<ResolvedTarget> {
    let candidates = candidate_packages(metadata, request.package.as_deref())?;
    match &request.kind_and_name {
        Some((kind, name)) => named_target(&candidates, *kind, name),
        None => default_target(metadata, &candidates, request.package.is_some()),
    }
}

/// The workspace's members, or only the one named by `-p`.
fn candidate_packages<'a>(
    metadata: &'a Metadata,
    package: Option<&str>,
) -> Result<Vec<&'a Package>> {
    let members = metadata.workspace_packages();
    let Some(name) = package else {
        return Ok(members);
    };
    let found: Vec<&Package> = members
        .iter()
        .copied()
        .filter(|p| p.name.as_str() == name)
        .collect();
    if found.is_empty() {
        let names: Vec<&str> = members.iter().map(|p| p.name.as_str()).collect();
        bail!(
            "package `{name}` is not a member of the workspace{}",
            suggestion(name, &names)
        );
    }
    Ok(found)
}

/// The one target of `kind` called `name` among the candidates' targets.
fn named_target(candidates: &[&Package], kind: TargetKind, name: &str) -> Result<ResolvedTarget> {
    let mut hits = candidates.iter().flat_map(|p| {
        p.targets
            .iter()
            .filter(|t| t.name == *name && kind.matches(&t.kind))
            .map(move |t| (*p, t))
    });
    let Some((package, _)) = hits.next() else {
        let names: Vec<&str> = candidates
            .iter()
            .flat_map(|p| p.targets.iter())
            .filter(|t| kind.matches(&t.kind))
            .map(|t| t.name.as_str())
            .collect();
        bail!(
            "no {kind} target named `{name}`{}\n{}",
            suggestion(name, &names),
            available(kind, &names)
        );
    };
    if let Some((other, _)) = hits.next() {
        bail!(
            "{kind} `{name}` exists in packages `{}` and `{}`; choose one with `-p`",
            package.name,
            other.name
        );
    }
    Ok(resolved(package, name, kind))
}

/// The binary to run when no target is named: of the only candidate, or of the workspace's
/// root package when `-p` was not given; its `default-run`, or its only binary.
fn default_target(
    metadata: &Metadata,
    candidates: &[&Package],
    package_asked: bool,
) -> Result<ResolvedTarget> {
    let package = match (candidates.len(), metadata.root_package()) {
        (1, _) => candidates[0],
        (_, Some(root)) if !package_asked => root,
        _ => {
            let names: Vec<&str> = candidates.iter().map(|p| p.name.as_str()).collect();
            bail!(
                "`cargo parprof` could not determine which package to profile; use `-p` with one of: {}",
                names.join(", ")
            );
        }
    };
    let bins: Vec<&str> = package
        .targets
        .iter()
        .filter(|t| TargetKind::Bin.matches(&t.kind))
        .map(|t| t.name.as_str())
        .collect();
    let name = match (&package.default_run, bins.as_slice()) {
        (Some(default), _) => default.clone(),
        (None, [only]) => only.to_string(),
        _ => bail!(
            "`cargo parprof` could not determine which target of `{}` to profile; choose one:\n{}",
            package.name,
            all_targets(package)
        ),
    };
    Ok(resolved(package, &name, TargetKind::Bin))
}

fn resolved(package: &Package, name: &str, kind: TargetKind) -> ResolvedTarget {
    let manifest_path = package.manifest_path.clone().into_std_path_buf();
    ResolvedTarget {
        package: package.name.to_string(),
        package_root: manifest_path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
        manifest_path,
        name: name.to_owned(),
        kind,
        harness: if kind == TargetKind::Bench {
            bench_harness::detect(package)
        } else {
            Harness::Program
        },
    }
}

fn suggestion(name: &str, choices: &[&str]) -> String {
    choices
        .iter()
        .map(|c| (strsim::levenshtein(name, c), *c))
        .filter(|(d, c)| *d <= 3.max(c.len() / 3))
        .min()
        .map(|(_, c)| format!("\n\n\tDid you mean `{c}`?"))
        .unwrap_or_default()
}

fn available(kind: TargetKind, names: &[&str]) -> String {
    if names.is_empty() {
        format!("no {kind} targets are available")
    } else {
        format!("available {kind} targets:\n    {}", names.join("\n    "))
    }
}

fn all_targets(package: &Package) -> String {
    let mut lines = Vec::new();
    for kind in [
        TargetKind::Bin,
        TargetKind::Example,
        TargetKind::Bench,
        TargetKind::Test,
    ] {
        for t in package.targets.iter().filter(|t| kind.matches(&t.kind)) {
            lines.push(format!("    cargo parprof {} {}", kind.flag(), t.name));
        }
    }
    if lines.is_empty() {
        "    (the package has no runnable targets)".into()
    } else {
        lines.join("\n")
    }
}

/// Build settings from the command line.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    pub profile: Option<String>,
    pub features: Vec<String>,
    pub all_features: bool,
    pub no_default_features: bool,
}

/// The hooked copies a profiling build is given (`--config` values), and the lock file cargo
/// rewrites for them.
pub struct HookedBuild {
    pub config: Vec<String>,
    pub lock_file: PathBuf,
    /// What is hooked, in words (`rayon-core 1.13.0, criterion 0.5.1`).
    pub what: String,
}

/// Builds the target with rayon-core and criterion hooks where their versions take them, else
/// (or when the hooked build fails) as it is, and says which.
pub fn build_for_profiling(
    target: &ResolvedTarget,
    opts: &BuildOptions,
    build_dir: &std::path::Path,
) -> Result<(PathBuf, RayonHooks)> {
    let (hooked, rayon) = prepare_hooks(&target.manifest_path, build_dir)?;
    say_why_first_build_is_long(build_dir, hooked.as_ref());
    let Some(hooked) = hooked else {
        let status = rayon.err().unwrap_or(RayonHooks::NoRayon);
        return Ok((build(target, opts, build_dir, None)?, status));
    };
    match build(target, opts, build_dir, Some(&hooked)) {
        Ok(exe) => Ok((
            exe,
            match rayon {
                Ok(copy) => RayonHooks::Hooked {
                    version: copy.version,
                },
                Err(status) => status,
            },
        )),
        Err(e) => {
            crate::console::note!(
                "parprof: the build with hooks in {} failed; building without them",
                hooked.what
            );
            let exe = build(target, opts, build_dir, None)?;
            let status = match rayon {
                Ok(_) => RayonHooks::Unavailable {
                    reason: format!("the build with hooks in {} failed: {e:#}", hooked.what),
                },
                Err(status) => status,
            };
            Ok((exe, status))
        }
    }
}

/// The hooked build, if any, and rayon-core's status for the recording.
type PreparedHooks = (Option<HookedBuild>, Result<PreparedCopy, RayonHooks>);

/// Prepares the hooked copies of the program's rayon-core and criterion, and says why one that
/// the program uses cannot be hooked. Fails only for a program whose parprof-rt is another
/// version than the one this subcommand carries.
fn prepare_hooks(manifest_path: &Path, build_dir: &Path) -> Result<PreparedHooks> {
    let program = match Program::read(manifest_path, Some(build_dir)) {
        Ok(program) => program,
        Err(e) => {
            let reason = format!("{e:#}");
            crate::console::note!("parprof: building without rayon-core hooks: {reason}");
            return Ok((None, Err(RayonHooks::Unavailable { reason })));
        }
    };
    program.check_runtime()?;
    let rayon = rayon_hooks::prepare(&program, build_dir);
    if let Err(RayonHooks::Unavailable { reason }) = &rayon {
        crate::console::note!("parprof: building without rayon-core hooks: {reason}");
    }
    let criterion = criterion_hooks::prepare(&program, build_dir).unwrap_or_else(|reason| {
        crate::console::note!(
            "parprof: building criterion without parprof's hooks, so the report cannot say how \
             many iterations criterion measured: {reason}"
        );
        None
    });
    // Only beside rayon-core's hooks: the items are counted for the regions those open.
    let rayon_iterators = rayon
        .is_ok()
        .then(|| rayon_iter_hooks::prepare(&program, build_dir))
        .and_then(|prepared| {
            prepared.unwrap_or_else(|reason| {
                crate::console::note!(
                    "parprof: building rayon without parprof's hooks, so the advice counts \
                     tasks, not the parallel iterators' items: {reason}"
                );
                None
            })
        });
    let copies: Vec<(&str, &PreparedCopy)> = [("rayon-core", rayon.as_ref().ok())]
        .into_iter()
        .chain([("rayon", rayon_iterators.as_ref())])
        .chain([("criterion", criterion.as_ref())])
        .filter_map(|(name, copy)| Some((name, copy?)))
        .collect();
    let hooked = (!copies.is_empty()).then(|| HookedBuild {
        config: copies.iter().map(|(_, c)| c.config.clone()).collect(),
        lock_file: program.lock_file(),
        what: copies
            .iter()
            .map(|(name, c)| format!("{name} {}", c.version))
            .collect::<Vec<_>>()
            .join(", "),
    });
    Ok((hooked, rayon))
}

/// The first profiling build of a workspace compiles every dependency again: say so, and why,
/// before cargo's progress starts.
fn say_why_first_build_is_long(build_dir: &Path, hooks: Option<&HookedBuild>) {
    if has_built_before(build_dir) {
        return;
    }
    let hooked = hooks.map_or_else(String::new, |h| {
        format!(", {} with parprof's hooks", h.what)
    });
    crate::console::note!(
        "parprof: first profiling build of this workspace: the program and all its dependencies \
         are compiled into {} with frame pointers, line tables and aligned functions{hooked}. \
         These flags differ from `cargo build --release`'s, so its artifacts cannot be reused, \
         and a folder of its own keeps them valid: this build takes about as long as a clean \
         `cargo build --release`; later ones rebuild only what changed.",
        build_dir.display()
    );
}

/// Whether cargo has built into `build_dir` before: anything there besides the hooked copies,
/// which are made before the build.
fn has_built_before(build_dir: &Path) -> bool {
    std::fs::read_dir(build_dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|e| e.file_name() != COPIES_DIR)
    })
}

/// Builds the target for profiling, with `hooks` when given, and returns its executable.
pub fn build(
    target: &ResolvedTarget,
    opts: &BuildOptions,
    build_dir: &Path,
    hooks: Option<&HookedBuild>,
) -> Result<PathBuf> {
    let mut cmd = cargo_build_command(target, opts, build_dir);
    // Saved (and the ending signals caught) before cargo can touch the lock file.
    let lock_file = match hooks {
        Some(h) => {
            for value in &h.config {
                cmd.arg("--config").arg(value);
            }
            Some(LockFileGuard::save(&h.lock_file)?)
        }
        None => None,
    };
    let mut child = cmd.spawn().context("could not run `cargo build`")?;
    if let Some(lock_file) = &lock_file {
        lock_file.watch(child.id());
    }
    let forward = child.stderr.take().map(|stderr| {
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                crate::console::write_note(line);
            }
        })
    });
    let executable = built_executable(&mut child, target);
    if executable.is_err() {
        // cargo must be gone before the lock file is restored, or it may write it again.
        let _ = child.kill();
    }
    let status = child.wait().context("cargo build did not finish");
    // Its stderr closed with it; a panic there lost lines, not the build.
    let _ = forward.map(std::thread::JoinHandle::join);
    if let Some(lock_file) = &lock_file {
        lock_file.unwatch();
        if let Some(signal) = lock_file.interrupted_by() {
            bail!("the profiling build was interrupted by signal {signal}");
        }
    }
    let (executable, status) = (executable?, status?);
    if !status.success() {
        bail!(
            "building {} `{}` failed ({status})",
            target.kind,
            target.name
        );
    }
    executable.with_context(|| {
        format!(
            "cargo built {} `{}` but reported no executable",
            target.kind, target.name
        )
    })
}

/// `cargo build` of the target with the profiling profile, flags and the user's features,
/// into `build_dir`.
fn cargo_build_command(target: &ResolvedTarget, opts: &BuildOptions, build_dir: &Path) -> Command {
    let profile = opts
        .profile
        .clone()
        .unwrap_or_else(|| target.kind.default_profile().to_owned());
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.arg("build")
        .arg("--message-format=json-render-diagnostics")
        .arg("--manifest-path")
        .arg(&target.manifest_path)
        .args(["--package", &target.package])
        .args([target.kind.flag(), &target.name])
        .args(["--profile", &profile])
        .env("CARGO_TARGET_DIR", build_dir)
        .stdout(Stdio::piped())
        // cargo fails a build whose stderr pipe lost its reader (`cargo parprof … 2>&1 |
        // head`): off a terminal its lines come through us, and stop quietly there.
        .stderr(if std::io::stderr().is_terminal() {
            Stdio::inherit()
        } else {
            Stdio::piped()
        });
    for (key, value) in profiling_config(&profile) {
        cmd.arg("--config").arg(format!("{key}={value}"));
    }
    append_profiling_flags(&mut cmd);
    if !opts.features.is_empty() {
        cmd.arg("--features").arg(opts.features.join(","));
    }
    if opts.all_features {
        cmd.arg("--all-features");
    }
    if opts.no_default_features {
        cmd.arg("--no-default-features");
    }
    cmd
}

/// The target's executable, from cargo's messages until it closes its stdout.
fn built_executable(
    child: &mut std::process::Child,
    target: &ResolvedTarget,
) -> Result<Option<PathBuf>> {
    let stdout = child.stdout.take().context("cargo build has no stdout")?;
    let mut executable = None;
    for message in Message::parse_stream(std::io::BufReader::new(stdout)) {
        if let Message::CompilerArtifact(artifact) =
            message.context("unreadable message from cargo")?
            && artifact.target.name == target.name
            && target.kind.matches(&artifact.target.kind)
            && let Some(exe) = artifact.executable
        {
            executable = Some(exe.into_std_path_buf());
        }
    }
    Ok(executable)
}

/// Symbols and `limited` debug information kept, on top of the user's profile; an explicit
/// `CARGO_PROFILE_<P>_DEBUG` of the user wins. `limited`, not `line-tables-only`: line tables
/// alone name an inlined function by its bare name (`{closure#0}<u32>`, `step<T>`) with no
/// module path, so a frame could only be placed by its source file's folder; `limited` adds
/// each function's linkage name, whose demangled path is the crate's own.
fn profiling_config(profile: &str) -> Vec<(String, &'static str)> {
    let env_name = profile.to_uppercase().replace('-', "_");
    let mut config = vec![(format!("profile.{profile}.strip"), "\"none\"")];
    if std::env::var_os(format!("CARGO_PROFILE_{env_name}_DEBUG")).is_none() {
        config.push((format!("profile.{profile}.debug"), "\"limited\""));
    }
    config
}

/// Flags of the profiling build:
/// - frame pointers make the kernel's user call chains complete;
/// - every function starts on a 64-byte boundary, so that the machine code of a probed
///   function and of the runtime's paths lies the same way whatever else the build holds.
///   What a probe costs in place depended on that placement: on one VM the same probed loop
///   was corrected −2 %, +9 % and +22 % in three builds that differed only in unrelated code
///   (calibration's untimed call 4.1, 5.0 and 3.0 ns); with functions aligned, two such
///   builds gave +0 … +9 % (5.0 ns both times).
const PROFILING_RUSTFLAGS: [&str; 2] = [
    "-Cforce-frame-pointers=yes",
    "-Cllvm-args=-align-all-functions=6",
];

/// Appends [`PROFILING_RUSTFLAGS`]. RUSTFLAGS in the environment replace every configured
/// rustflags, so append there when set; otherwise `--config` arrays are joined with the
/// user's configured `build.rustflags`.
fn append_profiling_flags(cmd: &mut Command) {
    if let Some(encoded) = std::env::var_os("CARGO_ENCODED_RUSTFLAGS").filter(|v| !v.is_empty()) {
        let mut flags = encoded;
        for flag in PROFILING_RUSTFLAGS {
            flags.push("\x1f");
            flags.push(flag);
        }
        cmd.env("CARGO_ENCODED_RUSTFLAGS", flags);
    } else if let Some(plain) = std::env::var_os("RUSTFLAGS").filter(|v| !v.is_empty()) {
        let mut flags = plain;
        for flag in PROFILING_RUSTFLAGS {
            flags.push(" ");
            flags.push(flag);
        }
        cmd.env("RUSTFLAGS", flags);
    } else {
        let quoted: Vec<String> = PROFILING_RUSTFLAGS
            .iter()
            .map(|f| format!("\"{f}\""))
            .collect();
        cmd.arg("--config")
            .arg(format!("build.rustflags=[{}]", quoted.join(", ")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_folder_with_only_the_hooked_copy_has_not_been_built_into() {
        let dir = tempfile::tempdir().unwrap();
        let build_dir = dir.path().join("build");
        assert!(!has_built_before(&build_dir));
        std::fs::create_dir_all(build_dir.join(COPIES_DIR)).unwrap();
        assert!(!has_built_before(&build_dir));
        std::fs::create_dir_all(build_dir.join("release")).unwrap();
        assert!(has_built_before(&build_dir));
    }

    #[test]
    fn suggests_close_names_only() {
        assert!(suggestion("quickstrat", &["quickstart", "rayon_tuned"]).contains("`quickstart`"));
        assert_eq!(suggestion("zzzzzz", &["quickstart"]), "");
    }
}
