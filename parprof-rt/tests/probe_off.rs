//! With the `off` feature a probe compiles to nothing: a zero-sized guard without `Drop`, and
//! no event in the trace even while recording is on.
//! Run by `.ci/run` as `cargo test -p parprof-rt --features off --test probe_off`.
#![cfg(feature = "off")]

use parprof_rt::trace::{Chunk, TraceReader};

#[parprof_rt::probe]
fn probed(x: u64) -> u64 {
    x.wrapping_mul(3)
}

#[test]
fn probes_are_compiled_out() {
    assert_eq!(std::mem::size_of::<parprof_rt::__private::Guard>(), 0);
    assert!(!std::mem::needs_drop::<parprof_rt::__private::Guard>());

    let dir = tempfile::tempdir().unwrap();
    // SAFETY: this file's only test; the runtime reads the variable once, on first use below.
    unsafe { std::env::set_var("PARPROF_OUT", dir.path()) };
    assert!(parprof_rt::is_enabled(), "the runtime itself still records");
    assert_eq!((0..100).map(probed).sum::<u64>(), 3 * 4950);
    parprof_rt::shutdown();

    let file = std::fs::File::open(
        dir.path()
            .join(parprof_rt::trace_file_name(std::process::id())),
    )
    .unwrap();
    let events: usize = TraceReader::new(file)
        .unwrap()
        .map(|chunk| match chunk.unwrap() {
            Chunk::Events { events, .. } => events.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(events, 0);
}
