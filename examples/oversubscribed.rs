//! More busy threads than cores, each calling a probed CPU-bound function.
//!
//! Each thread measures its own CPU time (`CLOCK_THREAD_CPUTIME_ID`) around its calls and the
//! program prints the sum as `thread_cpu_ns=<n>`: under `cargo parprof` the probe's active time
//! should match it, while its elapsed time includes the time threads spent preempted.
//! Usage: `oversubscribed [THREADS] [ITERATIONS]` (default: 3 threads per core, 40 calls each).

use parprof_rt::probe;

#[probe]
fn crunch(seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..2_000_000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x ^= x >> 33;
    }
    x
}

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<u64>().expect("numeric arguments"));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get() as u64);
    let threads = args.next().unwrap_or(3 * cores);
    let iterations = args.next().unwrap_or(40);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("busy-{t}"))
                .spawn(move || {
                    let mut acc = 0u64;
                    let mut cpu = 0u64;
                    for i in 0..iterations {
                        let before = parprof_suite::thread_cpu_ns();
                        acc ^= crunch(t * 1000 + i);
                        cpu += parprof_suite::thread_cpu_ns() - before;
                    }
                    (acc, cpu)
                })
                .expect("spawn")
        })
        .collect();
    let (mut acc, mut cpu) = (0, 0);
    for h in handles {
        let (a, c) = h.join().expect("worker");
        acc ^= a;
        cpu += c;
    }
    println!(
        "threads={threads} calls={} checksum={acc:x}",
        threads * iterations
    );
    println!("thread_cpu_ns={cpu}");
}
