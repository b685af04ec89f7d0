//! Building the target against copies of some of its dependencies with parprof's hooks
//! inserted: rayon-core (every rayon task recorded, [`crate::build::rayon_hooks`]) and criterion
//! (its warm-up and measured batch counted, [`crate::build::criterion_hooks`]).
//!
//! Why this way: what parprof must see happens inside those crates, in code the user did not
//! write and cannot annotate, and neither crate has a hook API for it. But `cargo parprof` runs
//! the build, so it can build the program with its own copy of the crate, edited at a few
//! points:
//!
//! 1. find the package the program resolves to (`cargo metadata`, [`Program::read`], kept in
//!    the build folder by [`metadata_cache`]);
//! 2. copy its sources (from cargo's registry cache, on this machine) into the build folder,
//!    and insert a call into `parprof_rt` at each of its [`HookPoint`]s;
//! 3. add `parprof-rt` to the copy's dependencies — the program's own, or the one this
//!    subcommand carries ([`carried_runtime`]) — and build the target with
//!    `--config patch.crates-io.<package>.path=<copy>`.
//!
//! Nothing of those crates is in this repository, and the user's code and `Cargo.toml` are
//! unchanged; cargo rewrites `Cargo.lock` for a patched build, so the lock file is restored
//! afterwards, on every way out of the build, a signal included ([`lock_file`]).
//! Each anchor must occur exactly once in the copy, whitespace aside ([`anchor`]: a vendored or
//! patched copy that kept the code takes the hooks); a version whose code differs at a hook
//! point (or that is not among the crate's supported ones) is built unhooked, and the build
//! and the report say which version, where, and what the user can do.

mod anchor;
mod carried_runtime;
mod files;
mod lock_file;
mod metadata_cache;

pub use lock_file::LockFileGuard;

use anyhow::{Context, Result, bail};
use cargo_metadata::{Metadata, Package};
use files::walk;
use std::path::{Path, PathBuf};

/// The folder of the build folder that holds the hooked copies.
pub const COPIES_DIR: &str = "hooked-crates";

/// One edit: `anchor` must occur exactly once in `file`; it is replaced by `replacement`
/// (empty: `#[track_caller]` is inserted before it).
pub struct HookPoint {
    pub file: &'static str,
    pub anchor: &'static str,
    pub replacement: &'static str,
}

impl HookPoint {
    pub fn replacement(&self) -> String {
        if self.replacement.is_empty() {
            let indent: String = self.anchor.chars().take_while(|c| *c == ' ').collect();
            format!("{indent}#[track_caller]\n{}", self.anchor)
        } else {
            self.replacement.to_owned()
        }
    }
}

/// `#[track_caller]` on the function whose signature line is `anchor`.
pub const fn track_caller(file: &'static str, anchor: &'static str) -> HookPoint {
    HookPoint {
        file,
        anchor,
        replacement: "",
    }
}

/// A dependency that parprof builds with hooks, and where they go.
pub struct HookedCrate {
    /// The package's name (`rayon-core`).
    pub package: &'static str,
    /// The versions whose hook points are known (`major.minor`).
    pub supported: &'static [&'static str],
    pub hook_points: &'static [HookPoint],
    /// What the hooks give the user, for the messages: "record the worker lifecycle".
    pub purpose: &'static str,
    /// Items appended to the copy's `src/lib.rs`, given the package's version.
    pub lib_items: fn(&str) -> String,
}

impl HookedCrate {
    fn supported_versions(&self) -> String {
        self.supported
            .iter()
            .map(|v| format!("{v}.x"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A prepared hooked copy: the `--config` value that makes cargo build with it.
#[derive(Clone, Debug)]
pub struct PreparedCopy {
    pub version: String,
    pub config: String,
}

/// The program's packages, read once for every hooked crate.
pub struct Program {
    metadata: Metadata,
}

impl Program {
    /// The packages of the program at `manifest_path` that are built on this machine; with a
    /// build folder, kept there until a file they were read from changes.
    pub fn read(manifest_path: &Path, build_dir: Option<&Path>) -> Result<Program> {
        let metadata = match build_dir {
            Some(dir) => {
                metadata_cache::read(manifest_path, &dir.join(metadata_cache::FILE), || {
                    host_metadata(manifest_path)
                })?
            }
            None => host_metadata(manifest_path)?,
        };
        Ok(Program { metadata })
    }

    /// The lock file cargo rewrites for a patched build.
    pub fn lock_file(&self) -> PathBuf {
        self.metadata
            .workspace_root
            .join("Cargo.lock")
            .into_std_path_buf()
    }

    /// Refuses a program whose own parprof-rt is not the version this subcommand carries: one
    /// runtime runs in the process, the program's, and its hooks and trace are that version's.
    pub fn check_runtime(&self) -> Result<()> {
        match package(&self.metadata, "parprof-rt") {
            Some(rt) if rt.version.to_string() != carried_runtime::RUNTIME_VERSION => bail!(
                "the program depends on parprof-rt {program}, and this cargo-parprof {own} \
                 carries parprof-rt {carried}: the program's runtime writes the trace, so both must \
                 be one version. Depend on parprof-rt {carried} (`parprof-rt = \"={carried}\"` in \
                 the program's Cargo.toml), or install the cargo-parprof of parprof-rt {program} \
                 (`cargo install cargo-parprof --version {program}`)",
                program = rt.version,
                own = env!("CARGO_PKG_VERSION"),
                carried = carried_runtime::RUNTIME_VERSION,
            ),
            _ => Ok(()),
        }
    }

    /// Prepares the hooked copy of `krate` in `build_dir`: `Ok(None)` when the program does not
    /// use it, `Err` with the reason, in words for the user, when it cannot be hooked.
    pub fn prepare(
        &self,
        krate: &HookedCrate,
        build_dir: &Path,
    ) -> Result<Option<PreparedCopy>, String> {
        let Some(package) = package(&self.metadata, krate.package) else {
            return Ok(None);
        };
        let version = package.version.to_string();
        let copy = copy_dir(build_dir, krate.package, &version);
        runtime_dependency(&self.metadata, build_dir)
            .and_then(|runtime| hooked_copy(krate, package, &runtime, &copy))
            .map_err(|e| format!("{e:#}"))?;
        Ok(Some(PreparedCopy {
            config: format!(
                "patch.crates-io.{}.path={}",
                krate.package,
                toml_string(&copy.to_string_lossy())
            ),
            version,
        }))
    }
}

/// [`HookedCrate::lib_items`] of a crate whose copy needs no items of its own.
pub fn no_lib_items(_version: &str) -> String {
    String::new()
}

/// The hooked copy of this workspace's own `krate` (a supported version), prepared in `dir`:
/// every hook point is taken exactly once, parprof-rt is a dependency of the copy, and cargo is
/// patched to it. Returns the copy's folder and its version, for the crate's own checks.
#[cfg(test)]
pub fn assert_workspace_copy_is_hooked(krate: &HookedCrate, dir: &Path) -> (PathBuf, String) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let program = Program::read(&manifest, None).unwrap();
    let hooked = match program.prepare(krate, dir) {
        Ok(Some(hooked)) => hooked,
        other => panic!("{} not hooked: {other:?}", krate.package),
    };
    let copy = copy_dir(dir, krate.package, &hooked.version);
    for point in krate.hook_points {
        let text = std::fs::read_to_string(copy.join(point.file)).unwrap();
        let replacement = point.replacement();
        assert_eq!(text.matches(&replacement).count(), 1, "{replacement}");
    }
    let copy_manifest = std::fs::read_to_string(copy.join("Cargo.toml")).unwrap();
    assert!(copy_manifest.contains("[dependencies.parprof-rt]"));
    let patch = format!("patch.crates-io.{}.path=", krate.package);
    assert!(hooked.config.starts_with(&patch), "{}", hooked.config);
    (copy, hooked.version)
}

/// Where the hooked copy of `package` `version` goes: a folder named as cargo names the
/// registry's (`rayon-core-1.13.0`), so that frames of the copy are named after the crate
/// (`rayon_core::…`) like the original's.
pub fn copy_dir(build_dir: &Path, package: &str, version: &str) -> PathBuf {
    build_dir
        .join(COPIES_DIR)
        .join(format!("{package}-{version}"))
}

/// The packages of the program that are built on this machine. Unfiltered, `cargo metadata`
/// needs every package of the lock file, those of other platforms too (`windows-sys`, a crate
/// used only on `spirv`), and fails offline when cargo never had to download them.
fn host_metadata(manifest_path: &Path) -> Result<Metadata> {
    let host = host_triple(manifest_path)?;
    cargo_metadata::MetadataCommand::new()
        .manifest_path(manifest_path)
        .other_options(vec!["--filter-platform".to_owned(), host])
        .exec()
        .context("`cargo metadata` failed")
}

/// The host triple of the compiler cargo uses for the program (its toolchain file honoured).
fn host_triple(manifest_path: &Path) -> Result<String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let mut command = std::process::Command::new(rustc);
    command.arg("-vV");
    if let Some(dir) = manifest_path.parent().filter(|d| d.is_dir()) {
        command.current_dir(dir);
    }
    let output = command.output().context("could not run `rustc -vV`")?;
    if !output.status.success() {
        bail!(
            "`rustc -vV` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(|host| host.trim().to_owned())
        .context("`rustc -vV` did not say its host")
}

fn package<'a>(metadata: &'a Metadata, name: &str) -> Option<&'a Package> {
    metadata.packages.iter().find(|p| p.name.as_str() == name)
}

/// The `parprof-rt` dependency line for the copy: the program's own `parprof-rt` when it has
/// one (one runtime in the process), else the one this `cargo parprof` carries, written into
/// the build folder.
fn runtime_dependency(metadata: &Metadata, build_dir: &Path) -> Result<String> {
    if let Some(rt) = package(metadata, "parprof-rt") {
        return Ok(match &rt.source {
            None => format!(
                "path = {}",
                toml_string(
                    &rt.manifest_path
                        .parent()
                        .map_or_else(String::new, |p| p.to_string())
                )
            ),
            Some(_) => format!("version = \"={}\"", rt.version),
        });
    }
    let carried = carried_runtime::write(&build_dir.join(COPIES_DIR))?;
    Ok(format!(
        "path = {}",
        toml_string(&carried.to_string_lossy())
    ))
}

/// Copies the package's sources to `copy` with the hooks inserted. Files are written only when
/// their content changes, so that cargo does not rebuild an unchanged copy.
fn hooked_copy(krate: &HookedCrate, package: &Package, runtime: &str, copy: &Path) -> Result<()> {
    let version = &package.version;
    let minor = format!("{}.{}", version.major, version.minor);
    if !krate.supported.contains(&minor.as_str()) {
        bail!(
            "{} {version} is not a supported version (supported: {}). To {}, profile with one \
             of those where your dependencies allow it (`cargo update -p {} --precise \
             <version>`)",
            krate.package,
            krate.supported_versions(),
            krate.purpose,
            krate.package
        );
    }
    let source = package
        .manifest_path
        .parent()
        .with_context(|| format!("{}'s manifest has no folder", krate.package))?
        .as_std_path();
    let mut edited: Vec<(PathBuf, Option<String>)> = Vec::new();
    for file in walk(source)? {
        let relative = file.strip_prefix(source)?.to_path_buf();
        // A binary or unreadable file is copied as it is, below.
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => Some(edit(krate, &relative, text, package, runtime)?),
            Err(_) => None,
        };
        edited.push((relative, text));
    }
    for (relative, text) in edited {
        let target = copy.join(&relative);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        match text {
            None => {
                std::fs::copy(source.join(&relative), &target)?;
            }
            Some(text) if std::fs::read_to_string(&target).ok().as_deref() != Some(&text) => {
                std::fs::write(&target, text)
                    .with_context(|| format!("cannot write {}", target.display()))?;
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// The copy's text of the file `relative` of the package: its hook points, and what the build
/// needs around them.
fn edit(
    krate: &HookedCrate,
    relative: &Path,
    mut text: String,
    package: &Package,
    runtime: &str,
) -> Result<String> {
    let name = relative.to_string_lossy().replace('\\', "/");
    for point in krate.hook_points.iter().filter(|p| p.file == name) {
        let found = anchor::find_all(&text, point.anchor);
        let [range] = found.as_slice() else {
            bail!(differs_from_release(krate, package, point, found.len()));
        };
        text = anchor::replace(&text, range.clone(), point.anchor, &point.replacement());
    }
    if name == "src/lib.rs" {
        // Built as a path dependency, its warnings would be shown as if they were the user's.
        text.insert_str(0, "#![allow(warnings)]\n");
        text.push_str(&(krate.lib_items)(&package.version.to_string()));
    }
    if name == "Cargo.toml" {
        text.push_str(&format!(
            "\n# Added by cargo parprof: the hooks' runtime.\n[dependencies.parprof-rt]\n{runtime}\n"
        ));
    }
    Ok(text)
}

/// Why a package whose code differs at a hook point is built without hooks, and what the user
/// can do about it.
fn differs_from_release(
    krate: &HookedCrate,
    package: &Package,
    point: &HookPoint,
    found: usize,
) -> String {
    let (name, version) = (krate.package, &package.version);
    let dir = package
        .manifest_path
        .parent()
        .map_or_else(String::new, |p| p.to_string());
    let origin = match &package.source {
        Some(source) if !source.is_crates_io() => format!(", from {source}"),
        Some(_) => String::new(),
        None => ", a path dependency".to_owned(),
    };
    format!(
        "{name} {version} (sources at {dir}{origin}) differs from the released sources \
         that parprof hooks: the code `{}` occurs {found} times in {} (expected once, \
         whitespace aside). To {}, profile with a released {name} {} (for the profiling \
         build, leave out the `[patch]`, git or vendored source of {name}), or report this \
         version to parprof",
        point
            .anchor
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        point.file,
        krate.purpose,
        krate.supported_versions()
    )
}

fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::rayon_hooks::RAYON_CORE;
    use crate::record::hook_marker;

    /// The lock file of this workspace holds Windows-only packages (through `clap` and
    /// others): they are not listed, so `cargo metadata` needs no download for them.
    #[test]
    fn the_metadata_lists_only_packages_of_this_machine() {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let lock = std::fs::read_to_string(manifest.with_file_name("Cargo.lock")).unwrap();
        assert!(lock.contains("name = \"windows-sys\""), "the premise");
        let metadata = host_metadata(&manifest).unwrap();
        assert!(package(&metadata, "rayon-core").is_some());
        let windows: Vec<&str> = metadata
            .packages
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| name.starts_with("windows"))
            .collect();
        assert!(windows.is_empty(), "{windows:?}");
    }

    /// A copy of this workspace's rayon-core sources, each text file changed by `change`, as
    /// a package whose manifest is the copy's.
    fn changed_rayon_core(dir: &Path, change: impl Fn(&str, String) -> String) -> Package {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let metadata = host_metadata(&manifest).unwrap();
        let mut rayon_core = package(&metadata, "rayon-core").unwrap().clone();
        let source = rayon_core
            .manifest_path
            .parent()
            .unwrap()
            .as_std_path()
            .to_owned();
        for file in walk(&source).unwrap() {
            let relative = file.strip_prefix(&source).unwrap();
            let target = dir.join(relative);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            match std::fs::read_to_string(&file) {
                Ok(text) => {
                    let name = relative.to_string_lossy().into_owned();
                    std::fs::write(&target, change(&name, text)).unwrap();
                }
                Err(_) => drop(std::fs::copy(&file, &target).unwrap()),
            }
        }
        rayon_core.manifest_path =
            cargo_metadata::camino::Utf8PathBuf::from_path_buf(dir.join("Cargo.toml")).unwrap();
        rayon_core.source = None;
        rayon_core
    }

    /// A vendored copy with CRLF line ends and tabs for indentation takes every hook.
    #[test]
    fn a_copy_that_differs_only_in_whitespace_takes_every_hook() {
        let (sources, hooked) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let rayon_core = changed_rayon_core(sources.path(), |name, text| {
            if name.ends_with(".rs") {
                text.replace("    ", "\t").replace('\n', "\r\n")
            } else {
                text
            }
        });
        hooked_copy(&RAYON_CORE, &rayon_core, "path = \"x\"", hooked.path()).unwrap();
        let job = std::fs::read_to_string(hooked.path().join("src/job.rs")).unwrap();
        assert!(job.contains("Task::begin(this.parprof_tag)"), "{job}");
        let lib = std::fs::read_to_string(hooked.path().join("src/lib.rs")).unwrap();
        let mark = hook_marker::mark(&rayon_core.version.to_string());
        assert!(lib.contains(&mark), "{lib}");
    }

    /// A patched copy whose code changed at a hook point is refused with the version, where its
    /// sources are, what differs, and what to do.
    #[test]
    fn a_copy_whose_code_differs_names_the_version_and_the_way_out() {
        let (sources, hooked) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let rayon_core = changed_rayon_core(sources.path(), |name, text| {
            if name == "src/job.rs" {
                text.replace(
                    "result: UnsafeCell<JobResult<R>>,",
                    "outcome: UnsafeCell<JobResult<R>>,",
                )
            } else {
                text
            }
        });
        let err = hooked_copy(&RAYON_CORE, &rayon_core, "path = \"x\"", hooked.path())
            .unwrap_err()
            .to_string();
        let version = rayon_core.version.to_string();
        for expected in [
            format!(
                "rayon-core {version} (sources at {}",
                sources.path().display()
            ),
            "a path dependency".to_owned(),
            "occurs 0 times in src/job.rs".to_owned(),
            "profile with a released rayon-core 1.12.x, 1.13.x".to_owned(),
        ] {
            assert!(err.contains(&expected), "`{expected}` not in: {err}");
        }
    }

    /// A program whose parprof-rt is another version than the carried one is refused, with
    /// both versions named.
    #[test]
    fn a_program_with_another_runtime_version_is_refused_naming_both() {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let mut metadata = host_metadata(&manifest).unwrap();
        let program = Program {
            metadata: metadata.clone(),
        };
        program.check_runtime().unwrap();
        let rt = metadata
            .packages
            .iter_mut()
            .find(|p| p.name.as_str() == "parprof-rt")
            .unwrap();
        rt.version = "9.8.7".parse().unwrap();
        let err = Program { metadata }
            .check_runtime()
            .unwrap_err()
            .to_string();
        for expected in [
            "the program depends on parprof-rt 9.8.7".to_owned(),
            format!("carries parprof-rt {}", carried_runtime::RUNTIME_VERSION),
            "--version 9.8.7".to_owned(),
        ] {
            assert!(err.contains(&expected), "`{expected}` not in: {err}");
        }
    }

    #[test]
    fn an_anchor_that_is_missing_makes_the_version_unsupported() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let metadata = host_metadata(&manifest).unwrap();
        let mut rayon_core = package(&metadata, "rayon-core").unwrap().clone();
        rayon_core.version = "1.5.0".parse().unwrap();
        let err = hooked_copy(&RAYON_CORE, &rayon_core, "path = \"x\"", dir.path()).unwrap_err();
        assert!(
            format!("{err}").contains("not a supported version"),
            "{err}"
        );
    }
}
