//! Millions of one-item tasks: `par_iter().with_max_len(1)` over N items (default 4,000,000),
//! each task a few nanoseconds of work, the way a `par_iter` over small items is often written
//! before it is tuned. `cargo parprof --example one_item_tasks` reports
//! `too_fine_granularity`; it is also the worst case of a profiler whose cost follows the job
//! rate (`benches/job_rate_cost.rs`).
//!
//! The global pool has 2 workers (`one_item_tasks [N] [WORKERS]`). Prints `leaves=<n>`: the
//! one-item pieces the iterator ran, counted by the program (`fold` makes one accumulator per
//! piece); the iterator splits by `join` down to them, so the region has 2·(leaves − 1) + 1
//! tasks. Then `work_ns=<n>`: the loop's own wall time, and `cpu_ns=<n>`: the CPU time of every
//! thread of the process meanwhile.

use rayon::prelude::*;
use std::time::Instant;

static LEAVES: parprof_suite::Tally = parprof_suite::Tally::new();

fn main() {
    let args = parprof_suite::DemoArgs::from_env();
    let items = args.number(0, 4_000_000) as u32;
    let workers = args.number(1, 2);
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build_global()
        .expect("the global pool is built once");
    let start = Instant::now();
    let cpu = parprof_suite::process_cpu_ns();
    let sum = (0..items)
        .into_par_iter()
        .with_max_len(1)
        .fold(
            || {
                LEAVES.add();
                0u64
            },
            |acc, x| acc.wrapping_add(u64::from(x).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7),
        )
        .reduce(|| 0, u64::wrapping_add);
    let work_ns = start.elapsed().as_nanos();
    let cpu_ns = parprof_suite::process_cpu_ns() - cpu;
    println!("sum={sum}");
    println!("leaves={}", LEAVES.total());
    println!("work_ns={work_ns} cpu_ns={cpu_ns}");
}
