//! Building the target with rayon-core hooks: every rayon task of the program recorded.
//!
//! Why here and this way: rayon's lifecycle events (a job runs, a join's halves, a worker
//! searches or sleeps) happen inside rayon-core, in code the user did not write and cannot
//! annotate. rayon-core has no hook API for them (its start/exit handlers see only thread
//! start and end), and a wrapper around rayon's public functions sees only the calls written
//! where it is applied. But `cargo parprof` runs the build, so it can build the program with
//! its own rayon-core version edited at a few points:
//!
//! 1. find the rayon-core package the program resolves to (`cargo metadata`);
//! 2. copy its sources (from cargo's registry cache, on this machine) into the build folder,
//!    and insert a call into `parprof_rt::rayon_hooks` at each [`HOOK_POINTS`] anchor — a job
//!    is created / runs, a join runs its halves and returns, a thread enters a pool from
//!    outside, a worker starts, a search round fails, a worker sleeps;
//! 3. add `parprof-rt` to the copy's dependencies and build the target with
//!    `--config patch.crates-io.rayon-core.path=<copy>`.
//!
//! Nothing of rayon is in this repository, and the user's code and `Cargo.toml` are unchanged;
//! cargo rewrites `Cargo.lock` for a patched build, so the lock file is restored afterwards,
//! on every way out of the build, a signal included ([`lock_file`]).
//! Each anchor must occur exactly once in the copy, whitespace aside ([`anchor`]: a vendored or
//! patched copy that kept the code takes the hooks); a version whose code differs at a hook
//! point (or that is not in [`SUPPORTED`]) is built unhooked, and the build and the report say
//! which version, where, and what the user can do.

mod anchor;
mod lock_file;

pub use lock_file::LockFileGuard;

use crate::record::hook_marker;
use crate::recording::RayonHooks;
use anyhow::{Context, Result, bail};
use cargo_metadata::{Metadata, Package};
use std::path::{Path, PathBuf};

/// rayon-core versions whose hook points are known (`major.minor`).
pub const SUPPORTED: &[&str] = &["1.12", "1.13"];

/// One edit: `anchor` must occur exactly once in `file`; it is replaced by `replacement`
/// (empty: `#[track_caller]` is inserted before it).
struct HookPoint {
    file: &'static str,
    anchor: &'static str,
    replacement: &'static str,
}

impl HookPoint {
    fn replacement(&self) -> String {
        if self.replacement.is_empty() {
            let indent: String = self.anchor.chars().take_while(|c| *c == ' ').collect();
            format!("{indent}#[track_caller]\n{}", self.anchor)
        } else {
            self.replacement.to_owned()
        }
    }
}

/// `#[track_caller]` on the function whose signature line is `anchor`.
const fn track_caller(file: &'static str, anchor: &'static str) -> HookPoint {
    HookPoint {
        file,
        anchor,
        replacement: "",
    }
}

const HOOK_POINTS: &[HookPoint] = &[
    // Every job carries the tag of the thread that created it…
    HookPoint {
        file: "src/job.rs",
        anchor: "    execute_fn: unsafe fn(*const ()),\n}",
        replacement: "    execute_fn: unsafe fn(*const ()),\n    parprof_tag: ::parprof_rt::rayon_hooks::Tag,\n}",
    },
    HookPoint {
        file: "src/job.rs",
        anchor: "            execute_fn: <T as Job>::execute,\n",
        replacement: "            execute_fn: <T as Job>::execute,\n            parprof_tag: ::parprof_rt::rayon_hooks::Tag::here(),\n",
    },
    // …and running it is a task of that tag's region.
    HookPoint {
        file: "src/job.rs",
        anchor: "    pub(super) unsafe fn execute(self) {\n",
        replacement: "    pub(super) unsafe fn execute(self) {\n        let _parprof_task = ::parprof_rt::rayon_hooks::Task::begin(self.parprof_tag);\n",
    },
    // A FIFO spawn's queue wrapper is not a task: the job it runs is.
    HookPoint {
        file: "src/job.rs",
        anchor: "        self.inner.push(job_ref);\n        JobRef::new(self)\n",
        replacement: "        self.inner.push(job_ref);\n        let mut fifo = JobRef::new(self);\n        fifo.parprof_tag = ::parprof_rt::rayon_hooks::Tag::NONE;\n        fifo\n",
    },
    // A join's first half runs inline…
    HookPoint {
        file: "src/join/mod.rs",
        anchor: "        let status_a = unwind::halt_unwinding(call_a(oper_a, injected));\n",
        replacement: "        let parprof_fork = ::parprof_rt::rayon_hooks::Fork::here();\n        let status_a = {\n            let _parprof_task = parprof_fork.inline_task();\n            unwind::halt_unwinding(call_a(oper_a, injected))\n        };\n",
    },
    // …its second half, popped back, runs without a job…
    HookPoint {
        file: "src/join/mod.rs",
        anchor: "                let result_b = job_b.run_inline(injected);\n",
        replacement: "                let result_b = {\n                    let _parprof_task = parprof_fork.local_task();\n                    job_b.run_inline(injected)\n                };\n                parprof_fork.resume();\n",
    },
    // …and the join returns to its caller.
    HookPoint {
        file: "src/join/mod.rs",
        anchor: "        (result_a, job_b.into_result())\n",
        replacement: "        parprof_fork.resume();\n        (result_a, job_b.into_result())\n",
    },
    // A thread outside every pool enters one: an implicit region when none is current, named
    // after the call site. `#[track_caller]` on the way there carries the user's source
    // location to it for direct calls (`join`, `scope`, `install`); calls made inside rayon
    // (a parallel iterator) are named by the operation's type instead.
    HookPoint {
        file: "src/registry.rs",
        anchor: "        thread_local!(static LOCK_LATCH",
        replacement: "        let _parprof_entry = ::parprof_rt::rayon_hooks::PoolEntry::from_outside(::std::any::type_name::<OP>(), ::std::panic::Location::caller());\n        thread_local!(static LOCK_LATCH",
    },
    track_caller(
        "src/registry.rs",
        "    unsafe fn in_worker_cold<OP, R>(&self, op: OP) -> R\n",
    ),
    track_caller(
        "src/registry.rs",
        "    pub(super) fn in_worker<OP, R>(&self, op: OP) -> R\n",
    ),
    track_caller(
        "src/registry.rs",
        "pub(super) fn in_worker<OP, R>(op: OP) -> R\n",
    ),
    track_caller(
        "src/join/mod.rs",
        "pub fn join<A, B, RA, RB>(oper_a: A, oper_b: B) -> (RA, RB)\n",
    ),
    track_caller(
        "src/join/mod.rs",
        "pub fn join_context<A, B, RA, RB>(oper_a: A, oper_b: B) -> (RA, RB)\n",
    ),
    track_caller(
        "src/scope/mod.rs",
        "pub fn scope<'scope, OP, R>(op: OP) -> R\n",
    ),
    track_caller(
        "src/scope/mod.rs",
        "pub fn scope_fifo<'scope, OP, R>(op: OP) -> R\n",
    ),
    track_caller(
        "src/thread_pool/mod.rs",
        "    pub fn install<OP, R>(&self, op: OP) -> R\n",
    ),
    // A worker of another pool waited for its operation here.
    HookPoint {
        file: "src/registry.rs",
        anchor: "        current_thread.wait_until(&job.latch);\n",
        replacement: "        current_thread.wait_until(&job.latch);\n        ::parprof_rt::rayon_hooks::fork_returned();\n",
    },
    HookPoint {
        file: "src/registry.rs",
        anchor: "    let index = worker_thread.index;\n",
        // The mark of the hooked build, kept in the executable for `record`.
        replacement: "    let index = worker_thread.index;\n    ::parprof_rt::rayon_hooks::worker_started(index, registry as *const Registry as usize);\n    ::core::hint::black_box(crate::PARPROF_BUILD_MARK);\n",
    },
    // A scope's owner waited for its spawned jobs.
    HookPoint {
        file: "src/scope/mod.rs",
        anchor: "        self.job_completed_latch.wait(owner);\n",
        replacement: "        self.job_completed_latch.wait(owner);\n        ::parprof_rt::rayon_hooks::fork_returned();\n",
    },
    HookPoint {
        file: "src/sleep/mod.rs",
        anchor: "    ) {\n        if idle_state.rounds < ROUNDS_UNTIL_SLEEPY {\n",
        replacement: "    ) {\n        ::parprof_rt::rayon_hooks::search_round(idle_state.rounds as u32);\n        if idle_state.rounds < ROUNDS_UNTIL_SLEEPY {\n",
    },
    HookPoint {
        file: "src/sleep/mod.rs",
        anchor: "            *is_blocked = true;\n",
        replacement: "            let _parprof_sleep = ::parprof_rt::rayon_hooks::Sleep::begin();\n            *is_blocked = true;\n",
    },
];

/// A prepared hooked copy: the `--config` values that make cargo build with it.
pub struct HookedBuild {
    pub version: String,
    pub config: Vec<String>,
    /// The lock file cargo rewrites for the patched build.
    pub lock_file: PathBuf,
}

/// Where the hooked copy of rayon-core `version` goes: a folder named as cargo names the
/// registry's (`rayon-core-1.13.0`), so that frames of the copy are named `rayon_core::…`
/// like the original's.
fn hooked_copy_dir(build_dir: &Path, version: &str) -> PathBuf {
    build_dir
        .join("rayon-hooked")
        .join(format!("rayon-core-{version}"))
}

/// Prepares the hooked copy of the target's rayon-core in `build_dir`, or says why not.
pub fn prepare(manifest_path: &Path, build_dir: &Path) -> Result<HookedBuild, RayonHooks> {
    let unavailable = |e: anyhow::Error| RayonHooks::Unavailable {
        reason: format!("{e:#}"),
    };
    let metadata = host_metadata(manifest_path).map_err(unavailable)?;
    let Some(rayon_core) = package(&metadata, "rayon-core") else {
        return Err(RayonHooks::NoRayon);
    };
    let version = rayon_core.version.to_string();
    let runtime = runtime_dependency(&metadata).map_err(unavailable)?;
    let copy = hooked_copy_dir(build_dir, &version);
    hooked_copy(rayon_core, &runtime, &copy).map_err(unavailable)?;
    Ok(HookedBuild {
        config: vec![format!(
            "patch.crates-io.rayon-core.path={}",
            toml_string(&copy.to_string_lossy())
        )],
        version,
        lock_file: metadata
            .workspace_root
            .join("Cargo.lock")
            .into_std_path_buf(),
    })
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
/// one (one runtime in the process), else the one this `cargo parprof` was built from.
fn runtime_dependency(metadata: &Metadata) -> Result<String> {
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
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("../parprof-rt");
    if bundled.join("Cargo.toml").is_file() {
        return Ok(format!(
            "path = {}",
            toml_string(&bundled.canonicalize()?.to_string_lossy())
        ));
    }
    bail!(
        "the program does not depend on parprof-rt and its sources ({}) are gone; add \
         `parprof-rt` to the program's dependencies or reinstall cargo-parprof from its sources",
        bundled.display()
    )
}

/// Copies the package's sources to `copy` with the hooks inserted. Files are written only when
/// their content changes, so that cargo does not rebuild an unchanged copy.
fn hooked_copy(rayon_core: &Package, runtime: &str, copy: &Path) -> Result<()> {
    let version = &rayon_core.version;
    let minor = format!("{}.{}", version.major, version.minor);
    if !SUPPORTED.contains(&minor.as_str()) {
        bail!(
            "rayon-core {version} is not a supported version (supported: {}). To record the \
             worker lifecycle, profile with one of those where your rayon allows it \
             (`cargo update -p rayon-core --precise <version>`)",
            supported_versions()
        );
    }
    let source = rayon_core
        .manifest_path
        .parent()
        .context("rayon-core's manifest has no folder")?
        .as_std_path();
    let mut edited: Vec<(PathBuf, Option<String>)> = Vec::new();
    for file in walk(source)? {
        let relative = file.strip_prefix(source)?.to_path_buf();
        // A binary or unreadable file is copied as it is, below.
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => Some(edit(&relative, text, rayon_core, runtime)?),
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

/// The copy's text of the file `relative` of rayon-core: its hook points, and what the build
/// needs around them.
fn edit(relative: &Path, mut text: String, rayon_core: &Package, runtime: &str) -> Result<String> {
    let name = relative.to_string_lossy().replace('\\', "/");
    for point in HOOK_POINTS.iter().filter(|p| p.file == name) {
        let found = anchor::find_all(&text, point.anchor);
        let [range] = found.as_slice() else {
            bail!(differs_from_release(rayon_core, point, found.len()));
        };
        text = anchor::replace(&text, range.clone(), point.anchor, &point.replacement());
    }
    if name == "src/lib.rs" {
        // Built as a path dependency, its warnings would be shown as if they were the user's.
        text.insert_str(0, "#![allow(warnings)]\n");
        text.push_str(&format!(
            "\n#[doc(hidden)]\npub static PARPROF_BUILD_MARK: &str = \"{}\";\n",
            hook_marker::mark(&rayon_core.version.to_string())
        ));
    }
    if name == "Cargo.toml" {
        text.push_str(&format!(
            "\n# Added by cargo parprof: the hooks' runtime.\n[dependencies.parprof-rt]\n{runtime}\n"
        ));
    }
    Ok(text)
}

/// Why a rayon-core whose code differs at a hook point is built without hooks, and what the
/// user can do about it.
fn differs_from_release(rayon_core: &Package, point: &HookPoint, found: usize) -> String {
    let version = &rayon_core.version;
    let dir = rayon_core
        .manifest_path
        .parent()
        .map_or_else(String::new, |p| p.to_string());
    let origin = match &rayon_core.source {
        Some(source) if !source.is_crates_io() => format!(", from {source}"),
        Some(_) => String::new(),
        None => ", a path dependency".to_owned(),
    };
    format!(
        "rayon-core {version} (sources at {dir}{origin}) differs from the released sources \
         that parprof hooks: the code `{}` occurs {found} times in {} (expected once, \
         whitespace aside). To record the worker lifecycle, profile with a released rayon-core \
         {} (for the profiling build, leave out the `[patch]`, git or vendored source of \
         rayon-core), or report this version to parprof",
        point
            .anchor
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        point.file,
        supported_versions()
    )
}

fn supported_versions() -> String {
    SUPPORTED
        .iter()
        .map(|v| format!("{v}.x"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every file under `dir`, except a lock file (the copy resolves with the program's).
fn walk(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in
            std::fs::read_dir(&d).with_context(|| format!("cannot read {}", d.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path
                .file_name()
                .is_some_and(|n| n != "Cargo.lock" && n != ".cargo-ok")
            {
                files.push(path);
            }
        }
    }
    Ok(files)
}

fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This workspace's own rayon-core (a supported version) takes every hook point.
    #[test]
    fn the_workspace_rayon_core_takes_every_hook_point() {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let dir = tempfile::tempdir().unwrap();
        let hooked = match prepare(&manifest, dir.path()) {
            Ok(hooked) => hooked,
            Err(status) => panic!("not hooked: {status:?}"),
        };
        let copy = hooked_copy_dir(dir.path(), &hooked.version);
        for point in HOOK_POINTS {
            let text = std::fs::read_to_string(copy.join(point.file)).unwrap();
            let replacement = point.replacement();
            assert_eq!(text.matches(&replacement).count(), 1, "{replacement}");
        }
        let manifest = std::fs::read_to_string(copy.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("[dependencies.parprof-rt]"));
        assert!(hooked.config[0].starts_with("patch.crates-io.rayon-core.path="));
    }

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
        hooked_copy(&rayon_core, "path = \"x\"", hooked.path()).unwrap();
        let job = std::fs::read_to_string(hooked.path().join("src/job.rs")).unwrap();
        assert!(job.contains("Task::begin(self.parprof_tag)"), "{job}");
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
                    "execute_fn: unsafe fn(*const ()),",
                    "run: unsafe fn(*const ()),",
                )
            } else {
                text
            }
        });
        let err = hooked_copy(&rayon_core, "path = \"x\"", hooked.path())
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

    #[test]
    fn an_anchor_that_is_missing_makes_the_version_unsupported() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let metadata = host_metadata(&manifest).unwrap();
        let mut rayon_core = package(&metadata, "rayon-core").unwrap().clone();
        rayon_core.version = "1.5.0".parse().unwrap();
        let err = hooked_copy(&rayon_core, "path = \"x\"", dir.path()).unwrap_err();
        assert!(
            format!("{err}").contains("not a supported version"),
            "{err}"
        );
    }
}
