//! Launch and kernel-event collection against real child processes and real kernel records.
//!
//! Children are system binaries (`/bin/sh`, `sleep`) or this test binary itself, re-run with
//! `--exact <helper> --ignored` and `PARPROF_TEST_HELPER` set, so that a Rust child with
//! debug info and known function names needs no separate build. Bounds only, no timings.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cargo_parprof::record::collect::{CollectOptions, SIMULATE_REFUSED_ENV};
use cargo_parprof::record::launch::{RunOutcome, run_and_collect};
use cargo_parprof::recording::kernel_records::{Frame, KernelRecords, SwitchKind};

const HELPER_ENV: &str = "PARPROF_TEST_HELPER";

fn opts() -> CollectOptions {
    CollectOptions {
        simulate_perf_refused: false,
        ..CollectOptions::default()
    }
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

fn sh(script: &str) -> RunOutcome {
    run_and_collect(
        Path::new("/bin/sh"),
        &os(&["-c", script]),
        &[],
        None,
        &opts(),
    )
    .expect("run /bin/sh")
}

/// Re-runs this test binary as the child, running only the ignored helper test `name`.
fn run_helper(name: &str, mode: &str) -> RunOutcome {
    let exe = std::env::current_exe().unwrap();
    let args = os(&[name, "--exact", "--ignored", "--quiet", "--test-threads=1"]);
    let env = [(OsString::from(HELPER_ENV), OsString::from(mode))];
    run_and_collect(&exe, &args, &env, None, &opts()).expect("run helper")
}

/// Where this machine refuses perf_event_open outright there is nothing to check; any other
/// failure to collect is a bug and fails the test.
fn kernel_records_expected(k: &KernelRecords) -> bool {
    let c = &k.capabilities.context_switches;
    if !c.available
        && c.reason
            .as_deref()
            .is_some_and(|r| r.contains("was refused"))
    {
        eprintln!("skipping: {}", c.reason.as_deref().unwrap_or_default());
        return false;
    }
    assert!(
        k.capabilities.context_switches.available,
        "{:?}",
        k.capabilities
    );
    assert!(k.capabilities.cpu_samples.available, "{:?}", k.capabilities);
    true
}

fn assert_sorted(k: &KernelRecords) {
    assert!(k.switches.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
    assert!(k.samples.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
}

#[test]
fn sleeping_shell_blocks_voluntarily() {
    let run = sh("for i in 1 2 3; do sleep 0.01; done");
    assert!(run.exit.success(), "{}", run.exit);
    assert!(!run.interrupted);
    assert!(
        run.wall_ns >= 30_000_000,
        "three 10 ms sleeps took {} ns",
        run.wall_ns
    );
    let k = &run.kernel;
    if !kernel_records_expected(k) {
        return;
    }
    assert_sorted(k);
    // Same clock as the launcher (CLOCK_MONOTONIC); the margin only absorbs the race between
    // the child's exec and the launcher reading the clock.
    let (lo, hi) = (
        run.started_ns - 1_000_000_000,
        run.started_ns + run.wall_ns + 1_000_000_000,
    );
    assert!(
        k.switches.iter().all(|s| (lo..hi).contains(&{ s.time_ns })),
        "records not on CLOCK_MONOTONIC"
    );
    let voluntary = k
        .switches
        .iter()
        .filter(|s| s.tid == run.child_pid && s.kind == SwitchKind::OutVoluntary)
        .count();
    // The shell waits for each `sleep`.
    assert!(
        voluntary >= 3,
        "voluntary switch-outs of the shell: {voluntary}"
    );
    let switched_in = k
        .switches
        .iter()
        .filter(|s| s.kind == SwitchKind::In)
        .count();
    assert!(switched_in >= 3);
    // The `sleep` processes are followed too (inherit).
    let tids: std::collections::BTreeSet<u32> = k.switches.iter().map(|s| s.tid).collect();
    assert!(tids.len() >= 4, "tids seen: {tids:?}");
    let name = k
        .thread_names
        .iter()
        .find(|(t, _)| *t == run.child_pid)
        .map(|(_, n)| n.as_str());
    assert_eq!(name, Some("sh"));
    assert!(
        k.thread_names.iter().any(|(_, n)| n == "sleep"),
        "{:?}",
        k.thread_names
    );
    assert_eq!(k.malformed_records, 0);
}

#[test]
fn busy_child_is_sampled_with_symbolised_stacks() {
    let run = run_helper("helper_child", "spin");
    assert!(run.exit.success(), "{}", run.exit);
    let k = &run.kernel;
    if !kernel_records_expected(k) {
        return;
    }
    assert_sorted(k);
    assert!(!k.samples.is_empty());
    assert!(k.samples.iter().all(|s| !s.callchain.is_empty()));
    assert!(k.sample_period_ns > 0);
    assert_eq!(k.sample_stacks.len(), k.samples.len());
    let stacks: Vec<Vec<&Frame>> = (k.sample_stacks.iter())
        .map(|&id| k.stacks.frames(id))
        .collect();
    let in_spin = stacks
        .iter()
        .filter(|stack| {
            stack
                .iter()
                .any(|f| f.function.contains("spin_for_a_while"))
        })
        .count();
    assert!(
        in_spin >= 1,
        "no sample in spin_for_a_while; stacks: {:?}",
        &stacks[..3.min(stacks.len())]
    );
    // Roots come first: the spin function is called from main, so it is never a stack's
    // first frame.
    assert!(
        stacks.iter().all(|stack| !stack
            .first()
            .is_some_and(|f| f.function.contains("spin_for_a_while"))),
        "a stack starts at its leaf"
    );
    let named = stacks
        .iter()
        .flatten()
        .filter(|f| !f.function.starts_with('['))
        .count();
    assert!(named >= 1);
}

#[test]
fn threads_of_the_child_are_followed_and_named() {
    let run = run_helper("helper_child", "threads");
    assert!(run.exit.success(), "{}", run.exit);
    let k = &run.kernel;
    if !kernel_records_expected(k) {
        return;
    }
    let worker_tids: Vec<u32> = k
        .thread_names
        .iter()
        .filter(|(_, n)| n.starts_with("pp-worker-"))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(worker_tids.len(), 2, "{:?}", k.thread_names);
    for tid in &worker_tids {
        let blocked = k
            .switches
            .iter()
            .filter(|s| s.tid == *tid && s.kind == SwitchKind::OutVoluntary)
            .count();
        assert!(blocked >= 1, "worker {tid} never blocked");
        assert!(
            k.samples.iter().any(|s| s.tid == *tid),
            "worker {tid} never sampled"
        );
    }
}

#[test]
fn child_killed_by_sigkill_still_returns_records() {
    let run = sh("sleep 0.05; kill -9 $$");
    assert_eq!(run.exit.signal, Some(9));
    assert_eq!(run.exit.code, None);
    assert!(run.exit.to_string().contains("SIGKILL"), "{}", run.exit);
    if !kernel_records_expected(&run.kernel) {
        return;
    }
    assert!(run.kernel.switches.iter().any(|s| s.tid == run.child_pid));
}

#[test]
fn missing_executable_is_a_clear_error() {
    let err = run_and_collect(Path::new("/nonexistent/prog"), &[], &[], None, &opts())
        .expect_err("missing path");
    let text = format!("{err:#}");
    assert!(
        text.contains("/nonexistent/prog") && text.contains("no such file"),
        "{text}"
    );

    // A bare name is resolved by exec, so this goes through the whole suspended launch.
    // PATH is set because exec reports EACCES instead when some PATH entry is unreadable.
    let path = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
    let err = run_and_collect(
        Path::new("parprof-no-such-program"),
        &[],
        &path,
        None,
        &opts(),
    )
    .expect_err("missing program");
    let text = format!("{err:#}");
    assert!(text.contains("parprof-no-such-program"), "{text}");
    assert!(text.contains("No such file"), "{text}");
}

#[test]
fn args_env_and_working_dir_reach_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let env = [(OsString::from("PARPROF_OUT"), out.clone().into_os_string())];
    let run = run_and_collect(
        Path::new("/bin/sh"),
        &os(&[
            "-c",
            "mkdir \"$PARPROF_OUT\" && pwd > \"$PARPROF_OUT/cwd\" && exit \"$0\"",
            "7",
        ]),
        &env,
        Some(dir.path()),
        &opts(),
    )
    .unwrap();
    assert_eq!(run.exit.code, Some(7));
    let cwd = std::fs::read_to_string(out.join("cwd")).unwrap();
    assert_eq!(
        PathBuf::from(cwd.trim()).canonicalize().unwrap(),
        dir.path().canonicalize().unwrap()
    );
}

#[test]
fn refused_perf_event_open_degrades_with_a_reason() {
    let opts = CollectOptions {
        simulate_perf_refused: true,
        ..CollectOptions::default()
    };
    let run = run_and_collect(
        Path::new("/bin/sh"),
        &os(&["-c", "sleep 0.01"]),
        &[],
        None,
        &opts,
    )
    .unwrap();
    assert!(run.exit.success());
    let caps = &run.kernel.capabilities;
    for cap in [
        &caps.context_switches,
        &caps.cpu_samples,
        &caps.hardware_counters,
    ] {
        assert!(!cap.available);
    }
    let reason = caps.context_switches.reason.as_deref().unwrap();
    assert!(reason.contains("not corrected"), "{reason}");
    assert!(reason.contains("perf_event_paranoid=2"), "{reason}");
    assert!(reason.contains("current value"), "{reason}");
    assert!(
        caps.cpu_samples
            .reason
            .as_deref()
            .unwrap()
            .contains("EACCES")
    );
    assert!(run.kernel.switches.is_empty() && run.kernel.samples.is_empty());
}

/// The environment variable is read from the profiler's own environment, so the profiler
/// side runs in a subprocess (this binary, helper `helper_profiler`).
#[test]
fn refusal_can_be_simulated_from_the_environment() {
    profiler_helper("refused");
}

#[test]
fn sigint_is_forwarded_and_a_second_one_kills() {
    profiler_helper("sigint");
}

/// Hardware counters are probed; on a machine without a PMU the reason says so.
#[test]
fn hardware_counters_are_probed() {
    let run = sh("true");
    let hw = &run.kernel.capabilities.hardware_counters;
    if !hw.available {
        assert!(
            hw.reason.as_deref().unwrap().contains("instructions"),
            "{hw:?}"
        );
    }
}

fn profiler_helper(mode: &str) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "helper_profiler",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_ENV, mode)
        .env(
            SIMULATE_REFUSED_ENV,
            if mode == "refused" { "1" } else { "0" },
        )
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "helper {mode} failed:\n{text}");
    assert!(
        text.contains(&format!("helper {mode} ok")),
        "helper {mode} did not run:\n{text}"
    );
}

/// Child side: what the profiled program does, chosen by `PARPROF_TEST_HELPER`.
#[test]
#[ignore = "run as a child by the other tests"]
fn helper_child() {
    match std::env::var(HELPER_ENV).as_deref() {
        Ok("spin") => {
            std::hint::black_box(spin_for_a_while(Duration::from_millis(300)));
        }
        Ok("threads") => {
            let workers: Vec<_> = (0..2)
                .map(|i| {
                    std::thread::Builder::new()
                        .name(format!("pp-worker-{i}"))
                        .spawn(|| {
                            for _ in 0..3 {
                                std::hint::black_box(spin_for_a_while(Duration::from_millis(40)));
                                std::thread::sleep(Duration::from_millis(10));
                            }
                        })
                        .unwrap()
                })
                .collect();
            for w in workers {
                w.join().unwrap();
            }
        }
        _ => {}
    }
}

#[inline(never)]
fn spin_for_a_while(d: Duration) -> u64 {
    let start = Instant::now();
    let mut x = 1u64;
    while start.elapsed() < d {
        for i in 0..100_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
    x
}

/// Profiler side, in its own process because it depends on process-wide state (the
/// environment, signals sent to the profiler).
#[test]
#[ignore = "run as a subprocess by the other tests"]
fn helper_profiler() {
    let mode = std::env::var(HELPER_ENV).unwrap_or_default();
    match mode.as_str() {
        "refused" => {
            let run = run_and_collect(
                Path::new("/bin/sh"),
                &os(&["-c", "true"]),
                &[],
                None,
                &CollectOptions::default(),
            )
            .unwrap();
            let reason = run
                .kernel
                .capabilities
                .cpu_samples
                .reason
                .clone()
                .unwrap_or_default();
            assert!(reason.contains(SIMULATE_REFUSED_ENV), "{reason}");
            assert!(!run.kernel.capabilities.context_switches.available);
        }
        "sigint" => {
            // Default SIGINT: the forwarded signal ends the child.
            let run = interrupted_run("", 1);
            assert!(run.interrupted);
            assert_eq!(run.exit.signal, Some(libc::SIGINT), "{}", run.exit);
            // A child that ignores SIGINT is killed by the second one.
            let run = interrupted_run("trap '' INT;", 2);
            assert!(run.interrupted);
            assert_eq!(run.exit.signal, Some(libc::SIGKILL), "{}", run.exit);
        }
        _ => return,
    }
    println!("helper {mode} ok");
}

/// Runs `sh -c "SETUP …; exec sleep 5"` and sends `count` SIGINTs to this (profiler) process
/// once the child has run its setup (a `trap` set after the mark could miss the first signal
/// on a busy machine: the child would end at once, and the next SIGINT reach the profiler with
/// its handler gone). Still being alive afterwards is part of the test.
fn interrupted_run(setup: &str, count: usize) -> RunOutcome {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("started");
    let script = format!("{setup} echo > \"$0\"; exec sleep 5");
    let args = os(&["-c", &script, mark.to_str().unwrap()]);
    std::thread::scope(|s| {
        let run = s.spawn(|| run_and_collect(Path::new("/bin/sh"), &args, &[], None, &opts()));
        let deadline = Instant::now() + Duration::from_secs(20);
        while !mark.exists() {
            assert!(Instant::now() < deadline, "child never started");
            std::thread::sleep(Duration::from_millis(5));
        }
        for _ in 0..count {
            // SAFETY: signalling our own process.
            unsafe { libc::kill(libc::getpid(), libc::SIGINT) };
            std::thread::sleep(Duration::from_millis(20));
        }
        run.join().unwrap().unwrap()
    })
}
