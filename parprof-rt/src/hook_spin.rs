//! The measurement build's dearer hooks: `PARPROF_HOOK_SPIN_NS=n` makes every rayon-core hook
//! spin n ns more, after its clock read, so that a test can show that the hooks' own time,
//! measured at start-up (`hook_cost`) and taken out by the analysis, moves no state share.

use crate::clock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The extra spin per hook, in ns.
pub const SPIN_ENV: &str = "PARPROF_HOOK_SPIN_NS";
/// The spin per hook in ticks of the event clock; 0: none.
static SPIN_TICKS: AtomicU64 = AtomicU64::new(0);

/// Reads [`SPIN_ENV`] and sets the spin; returns it in ns (0: none).
pub(crate) fn configure(ticks_per_ns: f64) -> u32 {
    let spin_ns: u32 = std::env::var(SPIN_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    SPIN_TICKS.store(
        (f64::from(spin_ns) * ticks_per_ns).round() as u64,
        Ordering::Relaxed,
    );
    spin_ns
}

/// Spins for the measurement build's extra hook cost, if asked.
#[inline(always)]
pub(crate) fn spin_if_asked() {
    let ticks = SPIN_TICKS.load(Ordering::Relaxed);
    if ticks != 0 {
        spin(ticks);
    }
}

#[cold]
#[inline(never)]
fn spin(ticks: u64) {
    let start = clock::now();
    // No `spin_loop` hint: a pause lasts up to ~40 ns on recent CPUs, past the spin asked.
    while clock::now().wrapping_sub(start) < ticks {}
}
