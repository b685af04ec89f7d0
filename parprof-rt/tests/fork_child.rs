//! A program that `fork()`s while recording: the child has no writer thread, so recording
//! stops in it — its probes cost a branch, its exit does not wait — and the parent's trace
//! stays whole. The test re-runs its own binary as the recording program.

use parprof_rt::trace::{Chunk, EventKind, TraceReader};
use std::process::Command;
use std::time::{Duration, Instant};

#[parprof_rt::probe]
fn step(i: u64) -> u64 {
    std::hint::black_box(i.wrapping_mul(31))
}

/// Not a test: the recording program of the test below (run with `--ignored`). Prints how long
/// its forked child took from fork to reaped, in ms.
#[test]
#[ignore = "the recording program of a_forked_child_neither_stalls_nor_breaks_the_trace"]
fn program_that_forks() {
    for i in 0..1000 {
        step(i);
    }
    let started = Instant::now();
    // SAFETY: the child runs probes and exits at once, touching no lock of another thread.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        for i in 0..200_000 {
            step(i);
        }
        // A normal exit: atexit handlers run, as in a program's own child.
        std::process::exit(0);
    }
    let mut status = 0;
    // SAFETY: waiting for the child just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    println!("child_ms={}", started.elapsed().as_millis());
    for i in 0..1000 {
        step(i);
    }
}

#[test]
fn a_forked_child_neither_stalls_nor_breaks_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "program_that_forks",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PARPROF_OUT", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let child_ms: u64 = stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("child_ms=")?.parse().ok())
        .expect("the program printed child_ms");
    assert!(
        Duration::from_millis(child_ms) < Duration::from_secs(1),
        "the forked child took {child_ms} ms"
    );
    // One trace, the parent's, complete, with the parent's 2000 calls and none of the child's.
    let traces: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ppt"))
        .collect();
    assert_eq!(traces.len(), 1, "{traces:?}");
    let mut reader = TraceReader::new(std::fs::File::open(&traces[0]).unwrap()).unwrap();
    let mut calls = 0u64;
    let mut ended = false;
    while let Some(chunk) = reader.next_chunk().unwrap() {
        match chunk {
            Chunk::Events { events, .. } => {
                for e in events {
                    match EventKind::from_u8(e.kind) {
                        Some(EventKind::Enter) => calls += 1,
                        Some(EventKind::Unrecorded) => calls += u64::from(e.aux),
                        _ => {}
                    }
                }
            }
            Chunk::End(_) => ended = true,
            _ => {}
        }
    }
    assert!(ended, "the parent's trace has its end");
    assert_eq!(calls, 2000);
}
