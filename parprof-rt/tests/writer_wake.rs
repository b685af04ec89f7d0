//! A thread that fills another quarter of its ring wakes the writer and records how long that
//! took, so that the analysis removes the wake like probe overhead (without the record, the
//! system call's time stayed in the probed calls around it: no calibration sees a cost this
//! rare).
//!
//! One test in this file: the runtime reads `PARPROF_OUT` and `PARPROF_SAMPLING` once per
//! process.
#![cfg(not(feature = "off"))]

use parprof_rt::probe;
use parprof_rt::trace::{BUFFER_WRITER_WOKEN, Chunk, Completeness, EventKind, TraceReader};
use std::hint::black_box;

#[probe]
fn small(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

/// Calls recorded: 400 Ki events, a dozen quarters of a ring.
const CALLS: u64 = 200_000;

#[test]
fn every_wake_of_the_writer_is_recorded_with_its_duration() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: this file's only test runs alone and the runtime has not started yet (it reads
    // the environment when it starts).
    unsafe {
        std::env::set_var("PARPROF_OUT", dir.path());
        std::env::set_var("PARPROF_SAMPLING", "off");
    }
    assert!(parprof_rt::is_enabled());
    black_box((0..CALLS).fold(0, |acc, i| acc ^ small(i)));
    parprof_rt::shutdown();

    let path = dir
        .path()
        .join(parprof_rt::trace_file_name(std::process::id()));
    let mut reader = TraceReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let (mut events_kept, mut exits, mut references) = (0, 0, 0);
    let (mut wakes, mut stalls) = (Vec::new(), 0);
    let mut last_ts = 0;
    while let Some(chunk) = reader.next_chunk().expect("trace is readable") {
        let Chunk::Events { events, .. } = chunk else {
            continue;
        };
        for event in events {
            // A wake is stamped when it begins: it may not land among events stamped later
            // (an in-run reference's, recorded after its round).
            assert!(event.ts >= last_ts, "events out of time order");
            last_ts = event.ts;
            events_kept += 1;
            match event.kind() {
                EventKind::Exit => exits += 1,
                EventKind::SpeedReference => references += 1,
                EventKind::BufferStall if event.flags == BUFFER_WRITER_WOKEN => wakes.push(event),
                EventKind::BufferStall => stalls += 1,
                _ => {}
            }
        }
    }
    assert_eq!(reader.completeness(), Some(&Completeness::Complete));
    assert_eq!(exits, CALLS);
    // The events kept fill at least this many quarters of the ring. A quarter filled by an
    // in-run reference's own events (fewer than a quarter each, left out of the trace) is the
    // reference's, and one filled while the thread waits for room is woken by the wait; the
    // references' events are a few percent of all, so most quarters are the program's.
    let quarters = events_kept / 32_768;
    let woken = wakes.len() as u64 + stalls;
    let said = format!("{woken} wakes and stalls, {references} references, {quarters} quarters");
    assert!(woken + references >= quarters, "{said}");
    assert!(woken >= quarters / 2, "{said}");
    // A wake took some time: a system call when the writer sleeps, an atomic swap otherwise.
    assert!(wakes.iter().all(|w| w.id > 0), "{wakes:?}");
}
