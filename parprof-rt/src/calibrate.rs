//! Overhead calibration: what each event type costs the interval that encloses it.
//!
//! Measured warm at start-up through the real recording path: batches of back-to-back events
//! between two clock reads, the median batch divided by its size. Method 1 of the spec
//! subtracts these costs from every enclosing probed interval.

use crate::clock;
use crate::probe::Guard;
use crate::recorder::{self, with_current_ring};
use crate::trace::{Calibration, EventKind};
use std::hint::black_box;

const BATCH: u64 = 256;
const BATCHES: usize = 41;
const CALIBRATION_SITE: u32 = u32::MAX;

pub struct Table {
    pub rows: Vec<Calibration>,
    pub bare_read_pair_ticks: u32,
}

fn median_batch(mut one_batch: impl FnMut()) -> f64 {
    let mut per_event: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let t0 = clock::now();
            one_batch();
            let t1 = clock::now();
            with_current_ring(|r| r.discard());
            t1.saturating_sub(t0) as f64 / BATCH as f64
        })
        .collect();
    per_event.sort_by(f64::total_cmp);
    per_event[BATCHES / 2]
}

pub fn measure() -> Table {
    // Warm the path and the ring's cache lines first.
    for _ in 0..4 {
        median_batch(|| for _ in 0..BATCH { black_box(recorder::record(EventKind::Enter, CALIBRATION_SITE, 0, 0)); });
    }
    let bare = median_batch(|| for _ in 0..BATCH { black_box(clock::now()); });
    let rows = EventKind::ALL
        .iter()
        // A stall's cost is its own measured duration.
        .filter(|&&kind| kind != EventKind::BufferStall)
        .map(|&kind| {
            let cost = match kind {
                // The exit path is the guard's drop, branch included.
                EventKind::Exit => median_batch(|| for _ in 0..BATCH { drop(black_box(Guard::new(CALIBRATION_SITE))); }),
                _ => median_batch(|| for _ in 0..BATCH { black_box(recorder::record(kind, CALIBRATION_SITE, 0, 0)); }),
            };
            Calibration { kind, cost_ticks: cost.round().max(1.0) as u32 }
        })
        .collect();
    Table { rows, bare_read_pair_ticks: (2.0 * bare).round() as u32 }
}
