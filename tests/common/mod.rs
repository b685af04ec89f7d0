//! Runs the real `cargo parprof` (through `cargo run`, as the repository's alias does) on the
//! example programs of this repository, and reads what it wrote.

#![allow(dead_code)] // each test file uses a different part of this module

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Run {
    pub output: Output,
    pub dir: tempfile::TempDir,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// parprof's own summary: on stderr, since the profiled program owns stdout.
    pub fn summary(&self) -> String {
        self.stderr()
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    pub fn report(&self) -> Value {
        let text = std::fs::read_to_string(self.path("report.json"))
            .unwrap_or_else(|e| panic!("no report.json ({e}); stderr:\n{}", self.stderr()));
        serde_json::from_str(&text).expect("report.json is JSON")
    }

    /// A `key=value` figure the example printed itself.
    pub fn printed(&self, key: &str) -> u64 {
        let prefix = format!("{key}=");
        self.stdout()
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&prefix)?.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "the example printed no `{key}=`; stdout:\n{}",
                    self.stdout()
                )
            })
    }

    pub fn probe(&self, name: &str) -> Value {
        let report = self.report();
        report["probes"]
            .as_array()
            .and_then(|probes| {
                probes
                    .iter()
                    .find(|p| p["name"].as_str() == Some(name))
                    .cloned()
            })
            .unwrap_or_else(|| panic!("no probe `{name}` in report.json: {report:#}"))
    }
}

pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The real `cargo parprof`, run through `cargo run` from the repository; arguments to add.
pub fn cargo_parprof() -> Command {
    cargo_run_parprof(&[])
}

/// [`cargo_parprof`] built with optimisations, as users install it, for figures that the
/// collector's own work on the other CPU disturbs: an unoptimised collector unwinding the
/// samples' stack copies takes most of that CPU.
pub fn cargo_parprof_release() -> Command {
    cargo_run_parprof(&["--release"])
}

fn cargo_run_parprof(profile: &[&str]) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(repo_root())
        .args(["run", "--quiet"])
        .args(profile)
        .args([
            "--package",
            "cargo-parprof",
            "--bin",
            "cargo-parprof",
            "--",
            "parprof",
        ]);
    cmd
}

/// The `cargo-parprof` executable of this repository, built: for tests that signal the
/// profiler itself, which `cargo run` would stand between.
pub fn parprof_binary() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(repo_root())
        .args([
            "build",
            "--quiet",
            "--package",
            "cargo-parprof",
            "--bin",
            "cargo-parprof",
            "--message-format",
            "json",
        ])
        .output()
        .expect("cargo build");
    assert!(output.status.success(), "{output:?}");
    cargo_metadata::Message::parse_stream(&output.stdout[..])
        .filter_map(Result::ok)
        .find_map(|m| match m {
            cargo_metadata::Message::CompilerArtifact(a) => a.executable,
            _ => None,
        })
        .expect("the cargo-parprof executable")
        .into_std_path_buf()
}

/// The real `cargo parprof <args> -o <out>`.
pub fn parprof_command(args: &[&str], out: &Path) -> Command {
    let mut cmd = cargo_parprof();
    cmd.arg("-o").arg(out).args(args);
    cmd
}

/// Held while a test profiles: the figures the tests check (active against CPU time,
/// diagnoses that depend on idle workers) need the machine's 2 cores, not a share of them
/// with the other tests of the same file.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    MACHINE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `cargo parprof <args>` with its output folder in a fresh temporary directory, holding the
/// machine.
pub fn parprof(args: &[&str], env: &[(&str, &str)]) -> Run {
    let _machine = exclusive();
    parprof_while_holding(args, env)
}

/// [`parprof`] for a caller that already holds [`exclusive`].
pub fn parprof_while_holding(args: &[&str], env: &[(&str, &str)]) -> Run {
    run_parprof(cargo_parprof(), args, env)
}

/// `parprof` (a [`cargo_parprof`] command) with `args`, its output folder in a fresh temporary
/// directory.
pub fn run_parprof(mut parprof: Command, args: &[&str], env: &[(&str, &str)]) -> Run {
    let dir = tempfile::tempdir().expect("temporary directory");
    parprof.arg("-o").arg(dir.path()).args(args);
    for (k, v) in env {
        parprof.env(k, v);
    }
    let output = parprof.output().expect("run cargo");
    Run { output, dir }
}

/// `cargo parprof --example <example> <flags>` with `env`, which must succeed.
pub fn profile_example(example: &str, flags: &[&str], env: &[(&str, &str)]) -> Run {
    let mut args = vec!["--example", example];
    args.extend_from_slice(flags);
    let run = parprof(&args, env);
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    run
}

/// The parallel regions of the run's report.
pub fn regions(run: &Run) -> Vec<Value> {
    let report = run.report();
    report["regions"].as_array().expect("regions[]").clone()
}

/// The only region of the run's report.
pub fn only_region(run: &Run) -> Value {
    let regions = regions(run);
    assert_eq!(regions.len(), 1, "{regions:#?}");
    regions[0].clone()
}

/// The codes of the region's diagnoses.
pub fn codes(region: &Value) -> Vec<String> {
    region["diagnoses"]
        .as_array()
        .expect("diagnoses[]")
        .iter()
        .map(|d| d["code"].as_str().expect("a code").to_owned())
        .collect()
}

/// The codes of the diagnoses about the program's work, leaving out `oversubscription`, which
/// is about the machine: it is right whenever other programs take the CPUs while a test runs
/// (another test binary building, other work on the machine).
pub fn work_codes(region: &Value) -> Vec<String> {
    codes(region)
        .into_iter()
        .filter(|c| c != "oversubscription")
        .collect()
}

/// A task count of the region: `tasks`, or `tasks_<origin>`.
pub fn task_count(region: &Value, field: &str) -> u64 {
    region[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no `{field}`: {region:#}"))
}

/// The region's tasks are the sum of their origins.
pub fn assert_origins_add_up(region: &Value) {
    let by_origin: u64 = ["local", "stolen", "injected", "inline"]
        .iter()
        .map(|o| task_count(region, &format!("tasks_{o}")))
        .sum();
    assert_eq!(task_count(region, "tasks"), by_origin, "{region:#}");
}

/// The diagnosis's evidence is beyond its threshold: above it, or below it for the metrics
/// that decide when too small (tasks per run per worker).
pub fn assert_beyond_threshold(d: &Value) {
    let (value, threshold) = (
        d["evidence"]["value"].as_f64().expect("a value"),
        d["threshold"].as_f64().expect("a threshold"),
    );
    let beyond = if d["evidence"]["metric"] == "tasks_per_run_per_worker" {
        value < threshold
    } else {
        value > threshold
    };
    assert!(beyond, "{d:#}");
}

/// The diagnosis `code` of `region`, checked for the fields every diagnosis carries.
pub fn diagnosis(region: &Value, code: &str) -> Value {
    let d = region["diagnoses"]
        .as_array()
        .and_then(|ds| ds.iter().find(|d| d["code"] == code))
        .unwrap_or_else(|| panic!("no `{code}` diagnosis: {region:#}"))
        .clone();
    for field in ["threshold", "advice"] {
        assert!(!d[field].is_null(), "{field} missing: {d:#}");
    }
    assert!(d["evidence"]["value"].is_number(), "{d:#}");
    assert!(d["evidence"]["summary"].as_str().is_some(), "{d:#}");
    assert!(d["impact"]["time_lost_ns"].as_u64().unwrap() > 0, "{d:#}");
    assert!(
        d["impact"]["speedup_if_fixed"].as_f64().unwrap() > 1.0,
        "{d:#}"
    );
    d
}

/// CPU-bound shell loops, `per_cpu` for each CPU, for as long as this lives: a machine whose
/// CPUs other programs keep busy.
pub struct BusyMachine(Vec<std::process::Child>);

impl BusyMachine {
    pub fn start(per_cpu: usize) -> BusyMachine {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        BusyMachine(
            (0..per_cpu * cpus)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdin(std::process::Stdio::null())
                        .spawn()
                        .expect("start a busy loop")
                })
                .collect(),
        )
    }
}

impl Drop for BusyMachine {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The manifest of a fixture crate `name` that depends on rayon, a workspace of its own.
pub fn rayon_crate_manifest(name: &str) -> String {
    format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nrayon = \"1.10\"\n\n[workspace]\n"
    )
}

/// `git ARGS` in `repo` (with a committer identity of its own), which must succeed: its
/// standard output, trimmed.
pub fn git(repo: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .current_dir(repo)
        .args([
            "-c",
            "user.name=parprof test",
            "-c",
            "user.email=test@parprof.invalid",
        ])
        .args(args)
        .output()
        .expect("git");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}
