//! `cargo parprof` used as people use command-line tools, end to end: its output piped into a
//! reader that leaves early, several runs at once, a folder reused with `-o`, and Ctrl-C
//! during the profiling build.
//!
//! Checks: a closed stdout ends the run quietly with the program's exit code (and `report`
//! with 0), and so does a closed stderr (a pipe whose reader left, or none at all); the
//! summary is not appended to the program's output; runs started together get folders of
//! their own, each with its own trace and reports; `-o` on an earlier run replaces it whole
//! and refuses a folder holding anything else; after Ctrl-C during the build the crate's
//! `Cargo.lock` is byte for byte what it was.

mod common;

use common::{cargo_parprof, exclusive, parprof_binary, repo_root};
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const EXAMPLE: &str = "loud_output";

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The files of `dir` whose names start with `prefix`.
fn files_starting(dir: &Path, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    names
}

/// The run folder a run's summary names.
fn reported_folder(stderr: &str) -> PathBuf {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("parprof: report written to "))
        .unwrap_or_else(|| panic!("no `report written to` line:\n{stderr}"));
    PathBuf::from(line.trim())
}

/// A run folder as one run leaves it: its records, reports and one trace.
fn assert_one_run(dir: &Path) -> String {
    for file in ["records.ppr", "report.json", "report.md"] {
        assert!(dir.join(file).is_file(), "no {file} in {}", dir.display());
    }
    let traces = files_starting(dir, "trace-");
    assert_eq!(traces.len(), 1, "{}: {traces:?}", dir.display());
    traces[0].clone()
}

fn assert_no_panic(text: &str) {
    assert!(
        !text.contains("panicked") && !text.contains("failed printing"),
        "{text}"
    );
}

#[test]
fn a_closed_stdout_ends_quietly_with_the_programs_exit_code() {
    let _machine = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    // `cargo parprof … | head -c 5`: five bytes read, then the reader is gone while the
    // program still writes.
    let mut child = cargo_parprof()
        .arg("-o")
        .arg(&run)
        .args(["--example", EXAMPLE, "--", "20000", "7"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cargo");
    let mut head = [0u8; 5];
    let mut stdout = child.stdout.take().unwrap();
    stdout
        .read_exact(&mut head)
        .expect("the program's first bytes");
    assert_eq!(&head, b"line ");
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(7), "stderr:\n{text}");
    assert_no_panic(&text);
    assert!(
        text.contains("writes failed"),
        "the program saw the pipe close:\n{text}"
    );
    // The summary went to stderr, and the reports were written all the same.
    assert_eq!(reported_folder(&text), run);
    assert_one_run(&run);

    // `cargo parprof report RUN | true`: the reader is gone before anything is written.
    let mut child = cargo_parprof()
        .arg("report")
        .arg(&run)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cargo");
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr:\n{}",
        stderr(&output)
    );
    assert_no_panic(&stderr(&output));
    assert!(run.join("report.html").is_file());
}

#[test]
fn a_closed_stderr_ends_quietly_with_the_programs_exit_code() {
    let _machine = exclusive();
    let dir = tempfile::tempdir().unwrap();
    // `cargo parprof … 2>&1 | true`: stderr a pipe whose reader is gone before parprof's
    // first line.
    let run = dir.path().join("pipe");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = cargo_parprof()
        .arg("-o")
        .arg(&run)
        .args(["--example", EXAMPLE, "--", "3", "7"])
        .stdout(Stdio::null())
        .stderr(writer)
        .status()
        .expect("run cargo");
    assert_eq!(status.code(), Some(7));
    assert_one_run(&run);

    // `cargo parprof … 2>&-`: no stderr at all.
    let run = dir.path().join("closed");
    let mut command = cargo_parprof();
    command
        .arg("-o")
        .arg(&run)
        .args(["--example", EXAMPLE, "--", "3", "7"])
        .stdout(Stdio::null());
    // SAFETY: close is async-signal-safe and touches no memory.
    unsafe {
        command.pre_exec(|| {
            libc::close(2);
            Ok(())
        });
    }
    assert_eq!(command.status().expect("run cargo").code(), Some(7));
    assert_one_run(&run);
}

#[test]
fn the_summary_is_not_appended_to_the_programs_output() {
    let _machine = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let output = cargo_parprof()
        .arg("-o")
        .arg(dir.path())
        .args(["--example", EXAMPLE, "--", "3"])
        .output()
        .expect("run cargo");
    assert!(output.status.success(), "stderr:\n{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        3,
        "only the program's lines on stdout:\n{stdout}"
    );
    assert!(lines.iter().all(|l| l.starts_with("line ")), "{stdout}");
    assert!(stderr(&output).contains("parprof: report written to"));
}

/// `cargo parprof --example loud_output` into a default folder, started, not waited for.
fn start_default_run() -> Child {
    cargo_parprof()
        // Nothing pruned: the folders of other runs in this target folder are theirs.
        .args(["--keep", "0", "--example", EXAMPLE, "--", "2000"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cargo")
}

#[test]
fn runs_started_together_get_folders_of_their_own() {
    let _machine = exclusive();
    // Built first, so that both runs reach their program within the same second.
    let built = cargo_parprof()
        .args(["build", "--example", EXAMPLE])
        .output()
        .expect("run cargo");
    assert!(built.status.success(), "stderr:\n{}", stderr(&built));
    let runs = [start_default_run(), start_default_run()];
    let folders: Vec<PathBuf> = runs
        .into_iter()
        .map(|run| {
            let output = run.wait_with_output().unwrap();
            assert!(output.status.success(), "stderr:\n{}", stderr(&output));
            reported_folder(&stderr(&output))
        })
        .collect();
    let traces: Vec<String> = folders.iter().map(|dir| assert_one_run(dir)).collect();
    for dir in &folders {
        std::fs::remove_dir_all(dir).unwrap();
    }
    assert_ne!(folders[0], folders[1]);
    assert_ne!(
        traces[0], traces[1],
        "each folder holds its own run's trace"
    );
}

#[test]
fn a_folder_reused_with_o_holds_the_new_run_only_and_nothing_else_is_removed() {
    let _machine = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let profile = || {
        cargo_parprof()
            .arg("-o")
            .arg(&run)
            .args(["--example", EXAMPLE, "--", "2000"])
            .stdout(Stdio::null())
            .output()
            .expect("run cargo")
    };
    let first = profile();
    assert!(first.status.success(), "stderr:\n{}", stderr(&first));
    let first_trace = assert_one_run(&run);
    let second = profile();
    assert!(second.status.success(), "stderr:\n{}", stderr(&second));
    assert!(
        stderr(&second).contains("replacing the earlier run"),
        "{}",
        stderr(&second)
    );
    assert_ne!(
        assert_one_run(&run),
        first_trace,
        "the earlier trace is gone"
    );

    // A file of the user's in the folder: refused, and nothing removed.
    std::fs::write(run.join("notes.txt"), "mine").unwrap();
    let refused = profile();
    let text = stderr(&refused);
    assert!(!refused.status.success(), "{text}");
    assert!(
        text.contains("notes.txt") && text.contains("did not write"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(run.join("notes.txt")).unwrap(),
        "mine"
    );
    assert_one_run(&run);
}

const FIXTURE_MAIN: &str = r#"use rayon::prelude::*;
fn main() {
    let total: u64 = (0..1_000_000u64).into_par_iter().sum();
    println!("total={total}");
}
"#;

/// A crate using rayon, with its lock file resolved as cargo leaves it; returns its manifest.
fn write_fixture(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        common::rayon_crate_manifest("lockfixture"),
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), FIXTURE_MAIN).unwrap();
    // This repository's lock file: the same rayon, already downloaded by its own build;
    // `cargo metadata` then trims it to the crate's own packages, as any cargo command would.
    std::fs::copy(repo_root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let resolved = Command::new(cargo)
        .current_dir(dir)
        .args(["metadata", "--offline", "--format-version", "1"])
        .output()
        .expect("cargo metadata");
    assert!(resolved.status.success(), "{}", stderr(&resolved));
    dir.join("Cargo.toml")
}

/// Starts `cargo parprof` on a fresh crate using rayon, waits until its profiling build has
/// patched `Cargo.lock`, sends `signal` (to the profiler's whole process group, as Ctrl-C at a
/// terminal does, or to the profiler alone), and checks that the lock file is what it was and
/// that the profiler ended by that signal.
fn interrupt_the_build(signal: libc::c_int, whole_group: bool) {
    let _machine = exclusive();
    let exe = parprof_binary();
    let work = tempfile::tempdir().unwrap();
    let manifest = write_fixture(&work.path().join("crate"));
    let lock = work.path().join("crate/Cargo.lock");
    let before = std::fs::read(&lock).unwrap();
    let log = work.path().join("stderr.txt");
    let mut command = Command::new(exe);
    command
        .arg("parprof")
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("-o")
        .arg(work.path().join("run"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        // Its own process group, as a terminal's foreground job.
        .process_group(0);
    // SAFETY: between fork and exec, only signal(2), which is async-signal-safe.
    unsafe {
        // With the signals' default actions, as a terminal's job has them: a test run started
        // in the background by a shell without job control ignores SIGINT, and so would
        // cargo-parprof and cargo, rightly (`nohup`, `&`).
        command.pre_exec(|| {
            for signal in [libc::SIGINT, libc::SIGTERM] {
                libc::signal(signal, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("cargo-parprof");
    let pgid = i32::try_from(child.id()).unwrap();
    // The build is under way once cargo has written the patched lock file.
    let deadline = Instant::now() + Duration::from_secs(300);
    while std::fs::read(&lock).unwrap_or_default() == before {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "ended ({status}) before the build patched Cargo.lock:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(Instant::now() < deadline, "the lock file was never patched");
        std::thread::sleep(Duration::from_millis(20));
    }
    let target = if whole_group { -pgid } else { pgid };
    // SAFETY: kill has no memory-safety preconditions; the process (group) is the child's.
    assert_eq!(unsafe { libc::kill(target, signal) }, 0);
    let signalled = Instant::now();
    let status = child.wait().unwrap();
    // Promptly: not after cargo finished the whole build on its own.
    let took = signalled.elapsed();
    let after = std::fs::read(&lock).unwrap();
    // Compilers cargo left running when signalled alone: they write only into the crate's
    // target folder, which goes with the temporary directory.
    // SAFETY: as above.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        after == before,
        "Cargo.lock was left changed:\n{}\nstderr:\n{text}",
        String::from_utf8_lossy(&after)
    );
    assert_eq!(status.signal(), Some(signal), "{status}; stderr:\n{text}");
    assert!(
        took < Duration::from_secs(30),
        "ended {took:?} after the signal"
    );
    assert_no_panic(&text);
}

#[test]
fn ctrl_c_during_the_profiling_build_leaves_cargo_lock_as_it_was() {
    interrupt_the_build(libc::SIGINT, true);
}

#[test]
fn sigterm_to_the_profiler_alone_during_the_build_leaves_cargo_lock_as_it_was() {
    // cargo is not signalled by anyone else here: the profiler must pass the signal on and
    // wait for cargo before it restores the lock file.
    interrupt_the_build(libc::SIGTERM, false);
}
