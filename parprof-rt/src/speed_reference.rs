//! In-run references of what a probe costs in place, so that the correction follows the
//! machine's speed, and the state of the memory the probes write, during the run.
//!
//! On some machines what an untimed probe call costs in place changes twofold between phases
//! that last from tens of microseconds to a whole run (VMs whose host slows the vCPU at
//! times: arithmetic then runs 1.5× slower and the probe's path 2×), and a start-up
//! calibration sees one phase. So every thread with a hot (sampled) site measures the
//! figure again while the program runs, on that thread: a [`round`] of [`CALLS`] probed and
//! as many unprobed calls of a small function, as calibration measures it at start-up, three
//! times when the thread's first site becomes hot and then about every [`INTERVAL_NS`]. Each
//! reference is an [`EventKind::SpeedReference`] event; the analysis scales the calibrated
//! costs on the thread by the ratio of its recent references to the start-up one, and
//! removes the reference's own time like probe overhead.
//!
//! With every call recorded (`PARPROF_SAMPLING=off`) every thread that records takes them
//! from its first recorded exit on, and the round's probed calls are recorded: a timed pair is
//! what such a run removes. Such a reference says so ([`REFERENCE_TIMED_PAIRS`]): what its
//! pairs cost has a tail the program's pairs share (the writer draining the ring on another
//! CPU), which the analysis follows by the references' mean, not their median. A reference
//! whose own events woke the writer says that too ([`REFERENCE_WOKE_WRITER`]): it holds the
//! wake's system call, which the program's events measure apart, and is left out.
//!
//! Nested in a probed parent, a timed pair cost 2 to 9 ns more than calibrated at start-up,
//! varying from run to run, and the start-up figure alone left +18 % to +85 % of the parent's
//! distortion (project issue 40). In place a timed pair writes its events
//! where the thread's next events go, into ring memory that the writer on another CPU read
//! last, while the writer runs; at start-up there is no writer. The round's events are written
//! through the real path into the ring, and left out of the trace by the writer (their site is
//! calibration's pseudo-site). The references follow what changes during the run; a difference
//! between the program's own pairs and the reference's that stays the same all run they do not
//! see. On this project's VM (2 EPYC cores under KVM) the `nested_probes` parent's pairs cost it
//! 16.7–17.7 ns in place around a 16-round child and 17.5–18.5 around an 8-round one, where the
//! references (a 16-round body) read 15.9–16.3 and the correction removed 15.4–16.9 (`cargo
//! bench --bench nested_correction` prints both figures). Each of these was tried and left the
//! gap as it was: the union of overhead intervals clipping an entry's cost (1 % of it), the
//! writer's encoding (its events left out), the writer's core kept busy (spinning), stores
//! still pending at the end of the probed half (fenced); warming the round's two halves first
//! made the references read less, not more. A pair costs more around a shorter body: how much
//! of its latency the core overlaps with the work around it depends on the program's code,
//! which a reference of one fixed shape does not stand for.
//!
//! The gap matches what a pair costs in long stretches of pairs against short ones: probed
//! against plain blocks of a 16-round body, alternating, timed by `rdtsc` in blocks without a
//! context switch, a pair cost 14.0 ns in blocks of 256 calls, 15.8–17.1 in blocks of 2048 and
//! 16.8–18.5 in blocks of 30 000, whose events fill the core's 1 MiB L2 cache (the
//! `nested_probes` parent makes 120 000 calls in a row; in one of its runs the references read
//! 14.3 ns and the pairs cost the parent 16.4). Yet windows of 256 calls read 15.9 ns both
//! inside a continuous stream of pairs and alternating with plain ones, in another harness:
//! what makes the program's pairs dearer is not settled. Tried against it, 20 runs each:
//! references of 2048 calls narrowed the 16-round parent's gap from 1.4 to 1.0 ns (10 runs of 20
//! within 10 %) at eight times their cost; the start-up pair
//! measured in rounds of 32 Ki calls made calibration uncertain (15 runs said so) and the
//! median error no smaller; a writer that does not preempt the program when woken
//! (`SCHED_BATCH`) left the gap as it was. The writer's wakes (a system call at every quarter of a
//! ring, too rare for medians) are measured where they happen and removed like overhead (the
//! recorder's `wake_writer_measured`; their events are stored in time order). With every call
//! timed, runs of one build with the writer held back (no drain, no wake, a ring that held the
//! whole run) left the 16-round parent +4 to +9 % (5 runs of 6; one +17 %) where the writer
//! running as usual left +8 to +20 % (10 runs) and the writer woken but draining nothing +7 to
//! +12 % (6 runs): the wakes make much of the writer's share, and the 8-round parent kept +42 to
//! +66 % without the writer as with it (its pairs cost more around a shorter body).
//! Events written with non-temporal stores (no cache line to fetch or share with the writer),
//! each published after an `sfence`, as the writer must see them whole: a timed pair then cost
//! the parent 271 ns in place (the fence writes the partial line out at every event); a fence
//! per cache line of events would need the ring's publication rebuilt around it (not tried).
//!
//! A reference costs about 3 µs untimed, 9 µs timed (0.3 % and 0.9 % of a thread's time at
//! one per millisecond). Shorter rounds do not track the probe's cost: 64 calls read 6×
//! slower in a slow phase where the probe in place was 2× slower; 256 calls read within 3 %
//! of it in both phases.
//!
//! The module calls probes from the probe's own path (a reference is taken on a recorded
//! exit): that is what measuring a probe in place means. No reference starts another: the
//! thread's next one is not due while it takes one.
//!
//! [`EventKind::SpeedReference`]: crate::trace::EventKind::SpeedReference

use crate::clock;
use crate::recorder;
use crate::sampling;
use crate::trace::{Event, REFERENCE_TIMED_PAIRS, REFERENCE_WOKE_WRITER};
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

/// Probed calls (and as many unprobed ones) in a reference round.
pub(crate) const CALLS: u64 = 256;
/// The most events a round records (every call recorded), and its reference.
const ROUND_EVENTS: usize = 2 * CALLS as usize + 1;
/// Time between two references on a thread with a hot site.
pub(crate) const INTERVAL_NS: u64 = 1_000_000;
/// References taken back to back when a thread's first site becomes hot, so that the
/// analysis's median of three has its three from the start.
const FIRST_REFERENCES: u32 = 3;

/// [`INTERVAL_NS`] in clock ticks; 0: no references (sampling off, or not configured yet).
static INTERVAL_TICKS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// When the calling thread's next reference is due.
    static NEXT_AT: Cell<u64> = const { Cell::new(0) };
    /// References the calling thread took so far, up to [`FIRST_REFERENCES`].
    static TAKEN: Cell<u32> = const { Cell::new(0) };
}

/// Called once at start-up, after calibration, on the thread that calibrated, with the event
/// clock's rate; `follow`: take references (not with full detail, whose every event reads
/// counters).
pub(crate) fn configure(ticks_per_ns: f64, follow: bool) {
    let ticks = if follow {
        (INTERVAL_NS as f64 * ticks_per_ns).round().max(1.0) as u64
    } else {
        0
    };
    INTERVAL_TICKS.store(ticks, Ordering::Relaxed);
    // Calibration's exits found no interval and put this thread's next reference off for good.
    NEXT_AT.set(0);
}

/// About 5 ns of dependent arithmetic, the work of a small function: the size at which the
/// correction of a probe matters most (a probe costs about as much).
#[inline(always)]
pub(crate) fn small_work(x: u64) -> u64 {
    (0..16).fold(black_box(x), |h, i| {
        (h ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)
    })
}

/// A small function, as a program has them.
#[inline(never)]
pub(crate) fn small_body(x: u64) -> u64 {
    small_work(x)
}

/// One reference round, measured from `began`.
pub(crate) struct Round {
    /// Ticks a probe added to each call, none of them recorded: what an untimed call costs in
    /// place.
    pub per_call: f64,
    /// When the round ended.
    pub ended: u64,
}

/// [`CALLS`] probed calls of [`small_body`] (`probed_small_body`, the probe's own
/// `probe::probed_small_body`: this module is below the probe, whose path calls it), none
/// recorded (all of them when every call is), then as many unprobed ones.
pub(crate) fn round(began: u64, probed_small_body: impl Fn(u64) -> u64) -> Round {
    sampling::calibrate_without_recording();
    black_box((0..CALLS).fold(0, |acc, i| acc ^ probed_small_body(i)));
    let probed_until = clock::now();
    black_box((0..CALLS).fold(0, |acc, i| acc ^ small_body(i)));
    let ended = clock::now();
    sampling::discard_calibration_calls();
    let probed = probed_until.saturating_sub(began) as f64;
    let unprobed = ended.saturating_sub(probed_until) as f64;
    Round {
        per_call: (probed - unprobed) / CALLS as f64,
        ended,
    }
}

/// A recorded call returned at `ts` on this thread, on a hot site or with every call recorded:
/// takes a reference if one is due, with `probed_small_body` (see [`round`]).
#[inline(always)]
pub(crate) fn on_followed_exit(ts: u64, probed_small_body: impl Fn(u64) -> u64) {
    if ts >= NEXT_AT.get() {
        take(probed_small_body);
    }
}

#[cold]
#[inline(never)]
fn take(probed_small_body: impl Fn(u64) -> u64) {
    // Not due again before this one is over: with every call recorded, the round's own exits
    // come back here.
    NEXT_AT.set(u64::MAX);
    let interval = INTERVAL_TICKS.load(Ordering::Relaxed);
    if interval == 0 {
        // Calibration's exits, before the run (`configure` makes the thread due again), or no
        // references in this run.
        return;
    }
    if !recorder::ring_has_room_for(ROUND_EVENTS) {
        // The writer is far behind: with every call recorded, the round could wait for it,
        // and the wait's event would lie inside the reference. Rare: the ring holds 512 rounds.
        NEXT_AT.set(clock::now().saturating_add(interval));
        return;
    }
    let wakes = recorder::calibration_wakes();
    let began = clock::now();
    let round = round(began, probed_small_body);
    let mut flags = 0;
    if sampling::every_call() {
        flags |= REFERENCE_TIMED_PAIRS;
    }
    if recorder::calibration_wakes() != wakes {
        flags |= REFERENCE_WOKE_WRITER;
    }
    let taken = TAKEN.get();
    if taken + 1 < FIRST_REFERENCES {
        TAKEN.set(taken + 1);
        NEXT_AT.set(0);
    } else {
        TAKEN.set(FIRST_REFERENCES);
        NEXT_AT.set(round.ended.saturating_add(interval));
    }
    let took = round.ended.saturating_sub(began).min(u64::from(u32::MAX)) as u32;
    // A negative figure is noise (an interrupt in the unprobed half): the analysis's median
    // of three leaves it out.
    let sixteenths = (round.per_call * 16.0)
        .round()
        .clamp(0.0, f64::from(u16::MAX)) as u16;
    recorder::record_measured(Event::speed_reference(began, took, sixteenths, flags));
}
