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

/// The real `cargo parprof <args> -o <out>`, run through `cargo run` from the repository.
pub fn parprof_command(args: &[&str], out: &Path) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(repo_root())
        .args([
            "run",
            "--quiet",
            "--package",
            "cargo-parprof",
            "--bin",
            "cargo-parprof",
            "--",
            "parprof",
        ])
        .arg("-o")
        .arg(out)
        .args(args);
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
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut cmd = parprof_command(args, dir.path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let output = cmd.output().expect("run cargo");
    Run { output, dir }
}
