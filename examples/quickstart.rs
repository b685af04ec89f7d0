//! Quick start: probed functions inside two parallel regions, one well cut and one cut too
//! finely. `cargo parprof --example quickstart` shows both: active times corrected for probe
//! overhead and preemption, each region's worker states, and a `too_fine_granularity`
//! diagnosis with the `with_min_len` that fixes it. Run plainly, it just computes.

use parprof_rt::{parallel_region, probe};
use rayon::prelude::*;

/// The per-row work: the kind of small function people annotate first.
#[probe]
fn hot_kernel(row: &[f32]) -> f32 {
    row.iter().map(|x| x.sqrt() * 1.5 + 0.25).sum()
}

#[probe]
fn make_rows(rows: usize, width: usize) -> Vec<Vec<f32>> {
    (0..rows)
        .map(|r| (0..width).map(|c| ((r * width + c) % 97) as f32).collect())
        .collect()
}

/// Wide rows: each task has thousands of values to sum.
#[probe]
fn sum_wide_rows(rows: &[Vec<f32>]) -> f32 {
    parallel_region!("sum_wide_rows", {
        rows.par_iter().map(|r| hot_kernel(r)).sum::<f32>()
    })
}

/// Narrow rows, one task per row (`with_max_len(1)`): scheduling costs more than the work.
#[probe]
fn sum_narrow_rows(rows: &[Vec<f32>]) -> f32 {
    parallel_region!("sum_narrow_rows", {
        rows.par_iter()
            .with_max_len(1)
            .map(|r| hot_kernel(r))
            .sum::<f32>()
    })
}

fn main() {
    let wide = make_rows(2_000, 4_000);
    let narrow = make_rows(100_000, 4);
    let mut total = 0.0;
    for _ in 0..3 {
        total += sum_wide_rows(&wide);
        total += sum_narrow_rows(&narrow);
    }
    println!("total {total:.1}");
}
