//! With recording off (no `PARPROF_OUT`), `parallel_region!` around rayon code behaves
//! exactly like the code alone and carries no region.

use parprof_rt::parallel_region;
use parprof_rt::region::current_region;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

fn regions_and_results() -> Vec<u64> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let v: Vec<u64> = (0..1000).collect();
    let spawned = AtomicU64::new(0);
    let mut out = Vec::new();
    out.push(parallel_region!("sum", {
        v.par_iter().map(|x| x * 2).sum::<u64>()
    }));
    out.push(parallel_region!({
        let (a, b) = rayon::join(
            || v.par_chunks(10).count() as u64,
            || u64::from(current_region()),
        );
        a + b
    }));
    out.push(parallel_region!("pool", {
        pool.install(|| {
            v.par_iter()
                .zip(v.par_iter())
                .map(|(a, b)| a * b)
                .sum::<u64>()
        })
    }));
    parallel_region!("scope", {
        rayon::scope(|s| {
            for _ in 0..10 {
                s.spawn(|_| {
                    spawned.fetch_add(1, Ordering::Relaxed);
                });
            }
        })
    });
    out.push(spawned.load(Ordering::Relaxed));
    out.push(v.par_iter().filter(|&&x| x % 3 == 0).count() as u64);
    // Nested regions, and a `?` that leaves both.
    let nested: Option<u64> = (|| {
        let x = parallel_region!("outer", { parallel_region!("inner", { Some(3u64) })? });
        Some(x + 1)
    })();
    out.push(nested.unwrap_or(0));
    out
}

#[test]
fn regions_change_nothing_when_recording_is_off() {
    // SAFETY: this file's only test; the runtime reads the variable once, on first use below.
    unsafe { std::env::remove_var("PARPROF_OUT") };
    assert!(!parprof_rt::is_enabled());
    let expected_sum_of_squares: u64 = (0..1000u64).map(|x| x * x).sum();
    assert_eq!(
        regions_and_results(),
        vec![999_000, 100, expected_sum_of_squares, 10, 334, 4]
    );
    assert_eq!(current_region(), 0);
}
