//! The event clock: `rdtsc` where the TSC is invariant, `CLOCK_MONOTONIC` otherwise.

use crate::trace::{ClockKind, ClockSync};
use std::sync::atomic::{AtomicU8, Ordering};

static KIND: AtomicU8 = AtomicU8::new(0);

/// Reads the event clock. Call [`select`] first (the runtime does it at start-up).
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if KIND.load(Ordering::Relaxed) == ClockKind::Tsc as u8 {
        // SAFETY: rdtsc has no preconditions on x86_64; `select` chose it only when invariant.
        return unsafe { core::arch::x86_64::_rdtsc() };
    }
    monotonic_ns()
}

/// Reads `CLOCK_MONOTONIC`, in nanoseconds: the time line of the kernel's perf records.
///
/// ```
/// let (a, b) = (parprof_rt::clock::monotonic_ns(), parprof_rt::clock::monotonic_ns());
/// assert!(b >= a);
/// ```
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The event clock [`select`] chose ([`ClockKind::Monotonic`] before it ran).
pub fn kind() -> ClockKind {
    if KIND.load(Ordering::Relaxed) == ClockKind::Tsc as u8 {
        ClockKind::Tsc
    } else {
        ClockKind::Monotonic
    }
}

/// Chooses the clock once. `PARPROF_CLOCK=monotonic` forces the portable clock.
pub fn select() -> ClockKind {
    let forced_monotonic = std::env::var("PARPROF_CLOCK").is_ok_and(|v| v == "monotonic");
    let kind = if !forced_monotonic && tsc_is_invariant() {
        ClockKind::Tsc
    } else {
        ClockKind::Monotonic
    };
    KIND.store(kind as u8, Ordering::Relaxed);
    kind
}

/// CPUID leaf 0x8000_0007, EDX bit 8 ("invariant TSC"); hypervisors that hide the leaf still
/// report `constant_tsc` and `nonstop_tsc` in /proc/cpuinfo, which mean the same together.
fn tsc_is_invariant() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let max_ext = cpuid(0x8000_0000).eax;
        if max_ext >= 0x8000_0007 && cpuid(0x8000_0007).edx & (1 << 8) != 0 {
            return true;
        }
        if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo")
            && let Some(flags) = info.lines().find(|l| l.starts_with("flags"))
        {
            let has = |f: &str| flags.split_whitespace().any(|w| w == f);
            return has("constant_tsc") && has("nonstop_tsc");
        }
        false
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// CPUID `leaf`. The intrinsic is safe to call on newer compilers and unsafe on the
/// workspace's rust-version (1.88), hence the block either may find unneeded.
#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)]
fn cpuid(leaf: u32) -> core::arch::x86_64::CpuidResult {
    // SAFETY: every x86_64 processor has the CPUID instruction.
    unsafe { core::arch::x86_64::__cpuid(leaf) }
}

/// A sync point taken as the tightest of several (ticks, monotonic, ticks) brackets.
pub fn sync_point() -> ClockSync {
    let mut best = ClockSync {
        ticks: 0,
        monotonic_ns: 0,
        uncertainty_ticks: u32::MAX,
    };
    for _ in 0..32 {
        let before = now();
        let mono = monotonic_ns();
        let after = now();
        let width = after.saturating_sub(before).min(u32::MAX as u64) as u32;
        if width < best.uncertainty_ticks {
            best = ClockSync {
                ticks: before,
                monotonic_ns: mono,
                uncertainty_ticks: width,
            };
        }
    }
    best
}

/// Ticks per nanosecond from the sync point `since` to now, at least `min_interval_ns` apart:
/// the time since `since` counts towards the interval, so whatever ran in between (at start-up,
/// calibration's few milliseconds) spares the busy wait.
pub fn ticks_per_ns_since(since: ClockSync, min_interval_ns: u64) -> f64 {
    if kind() == ClockKind::Monotonic {
        return 1.0;
    }
    while monotonic_ns() < since.monotonic_ns + min_interval_ns {
        std::hint::spin_loop();
    }
    let now = sync_point();
    now.ticks.saturating_sub(since.ticks) as f64
        / now.monotonic_ns.saturating_sub(since.monotonic_ns).max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_since_the_sync_point_counts_towards_the_rates_interval() {
        select();
        let since = sync_point();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let before = monotonic_ns();
        let rate = ticks_per_ns_since(since, 20_000_000);
        // 30 ms have passed already: no waiting for 20 more.
        assert!(monotonic_ns() - before < 20_000_000);
        // The same as a rate measured over longer.
        let longer = ticks_per_ns_since(since, 60_000_000);
        assert!((rate / longer - 1.0).abs() < 1e-3, "{rate} vs {longer}");
    }
}
