//! A single-threaded simulation shaped like many command-line tools: each step grows a buffer
//! (fresh pages), computes on it, prints a progress line and appends a line to a log file.
//! What slices are for: `cargo parprof --slices --example step_log -- LOG` gives the exact
//! page faults and CPU time of each probe call, while the program's output stays its own
//! (a slice's writes are dropped: every line appears once on stdout and once in LOG).
//!
//! The truth is counted by the program: the page faults of each `grow_buffer` call
//! (`getrusage(RUSAGE_THREAD)` around it), printed as `faults_per_grow_buffer_x100=<n>`
//! (hundredths of a fault per call), and the number of steps as `steps=<n>`.
//!
//! Arguments: `[LOG] [STEPS]` (default `step_log.txt`, 300 steps of about 3 ms).

use parprof_rt::probe;
use parprof_suite::{spin, thread_minor_faults, touch_fresh_pages};
use std::io::Write;
use std::time::Duration;

/// Fresh pages each step's buffer grows by: one minor fault each.
const PAGES_PER_STEP: usize = 64;

/// Maps and touches the step's new pages.
#[probe]
fn grow_buffer() {
    touch_fresh_pages(PAGES_PER_STEP);
}

/// The step's arithmetic: about 3 ms of CPU.
#[probe]
fn simulate(step: u64) -> u64 {
    spin(Duration::from_millis(3)) ^ step
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let log_path = args.next().unwrap_or_else(|| "step_log.txt".to_owned());
    let steps: u64 = args
        .next()
        .map_or(300, |s| s.parse().expect("a number of steps"));
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
    let mut faults = 0;
    for step in 0..steps {
        let before = thread_minor_faults();
        grow_buffer();
        faults += thread_minor_faults() - before;
        let value = simulate(step);
        println!("step {step} value {}", value % 1000);
        writeln!(log, "step {step} value {}", value % 1000)?;
    }
    println!("steps={steps}");
    println!(
        "faults_per_grow_buffer_x100={}",
        faults * 100 / steps.max(1)
    );
    Ok(())
}
