//! A process killed with SIGKILL mid-run leaves a trace that reads up to its last complete
//! chunk and says it was cut. The test re-runs its own binary as the recording child.

use parprof_rt::trace::{Chunk, Completeness, EventKind, TraceReader};
use std::process::Command;
use std::time::Duration;

#[parprof_rt::probe]
fn tick(i: u64) -> u64 {
    std::hint::black_box(i.wrapping_mul(31))
}

/// Not a test: the child process of the test below (run with `--ignored`).
#[test]
#[ignore = "the recording child of sigkilled_trace_reads_up_to_its_last_complete_chunk"]
fn child_records_forever() {
    let mut i = 0u64;
    loop {
        i = tick(i + 1);
        if i.is_multiple_of(1024) {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

#[test]
fn sigkilled_trace_reads_up_to_its_last_complete_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_records_forever",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PARPROF_OUT", dir.path())
        .spawn()
        .unwrap();
    let trace = dir.path().join(parprof_rt::trace_file_name(child.id()));
    // Wait until the writer has put events on disk, then kill without warning.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&trace).map_or(0, |m| m.len()) < 200_000 {
        assert!(
            std::time::Instant::now() < deadline,
            "the child wrote no trace"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let mut reader = TraceReader::new(std::fs::File::open(&trace).unwrap()).unwrap();
    assert!(
        reader
            .header()
            .calibration
            .iter()
            .all(|c| c.cost_ticks > 0.0)
    );
    let mut enters = 0u64;
    while let Some(chunk) = reader
        .next_chunk()
        .expect("a killed trace is cut, not corrupt")
    {
        if let Chunk::Events { events, .. } = chunk {
            enters += events
                .iter()
                .filter(|e| e.kind() == EventKind::Enter)
                .count() as u64;
        }
    }
    assert!(enters > 1000, "only {enters} entries were readable");
    assert!(matches!(
        reader.completeness(),
        Some(Completeness::Cut { .. })
    ));
}
