//! A program whose output outlives its reader, for parprof's command-line robustness tests:
//! it prints LINES lines of probed work on stdout, carries on when stdout's reader has gone
//! (`| head -c 5`: each write fails with a broken pipe, which it ignores, as many tools do),
//! and exits with CODE, which `cargo parprof` must pass on as its own.
//!
//! Arguments: `[LINES] [CODE]` (default 20,000 lines, exit code 0).

use parprof_rt::probe;
use std::io::Write;

/// One line's work: a little arithmetic, so that the probe has calls to count.
#[probe]
fn line_value(i: u64) -> u64 {
    (0..200u64).fold(i, |a, b| a.wrapping_mul(31).wrapping_add(b))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let lines: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let code: i32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let mut out = std::io::stdout().lock();
    let mut failed_writes = 0u64;
    for i in 0..lines {
        if writeln!(out, "line {i} value {}", line_value(i)).is_err() {
            failed_writes += 1;
        }
    }
    let _ = out.flush();
    // Ignored like the lines' failures: stderr's reader may be gone too (`2>&1 | head`).
    let _ = writeln!(
        std::io::stderr(),
        "loud_output: {lines} lines, {failed_writes} writes failed, exiting with {code}"
    );
    std::process::exit(code);
}
