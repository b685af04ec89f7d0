//! Sampling of hot probe sites, so that a probe's cost stays bounded whatever its call rate.
//!
//! On each thread, a site whose calls come faster than one per [`HOT_SPACING_NS`] on average
//! (checked every [`RATE_WINDOW`] calls) is *hot*: only one of its calls in [`HOT_PERIOD`] is
//! recorded there, the others cost a few nanoseconds (no clock read, no event) and are only
//! counted. The counts reach the trace as [`EventKind::Unrecorded`] events, written before the
//! thread's next recorded event, so that they lie inside the call that was innermost while
//! they ran: the analysis counts every call, removes the unrecorded calls' calibrated cost
//! from that call, and scales the timed calls up to the unrecorded ones.
//!
//! Recursion: the calls nested in an activation of the same site are sampled with it. An
//! outermost activation that is recorded makes the site's inclusive time exact (the nested
//! calls' time is inside it, recorded or not); one that is not recorded skips every call
//! nested in it, and those calls are counted apart (a flag on their `Unrecorded` event) so
//! that the analysis does not take them for outermost calls. A site that recursed in its last
//! rate window, with outermost activations further apart than [`HOT_SPACING_NS`], records
//! every outermost activation: they are few and long (a `rayon::join` recursion sorting
//! 400,000 integers six times makes 282,102 calls in 24 outermost activations, the ones its
//! workers start when idle), and estimated from a sample their time would be mostly chance.
//! Recorded calls say whether they were taken as a sample (see `entry_flags`): the analysis
//! estimates unrecorded calls from those alone.
//!
//! `PARPROF_SAMPLING=off` records every call.
//!
//! [`EventKind::Unrecorded`]: crate::trace::EventKind::Unrecorded

use crate::attention;
use std::cell::{Cell, UnsafeCell};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Calls closer together than this, on average, make a site hot.
pub const HOT_SPACING_NS: u64 = 2_000;
/// A hot site records one call in this many. A recorded call costs several untimed ones (two
/// events, each after the counts of the untimed calls before it): with one in 32, a probed
/// 3 M-element quicksort ran 4–20 ms longer than with one in 64 under the runtime (medians 307
/// and 321 ms against 286 and 311, minimums 259 and 262 against 255 and 256, two series of 30
/// alternating runs), and the nested correction was no better (`cargo bench --bench
/// nested_correction`, two series each).
pub const HOT_PERIOD: u32 = 64;
/// Calls of a site between two checks of its rate.
const RATE_WINDOW: u32 = 1024;
/// Site ids at or above this have no sampling state: every call is recorded.
const MAX_SITES: usize = 1 << 16;

/// [`HOT_SPACING_NS`] in clock ticks; 0 turns sampling off.
static HOT_SPACING_TICKS: AtomicU64 = AtomicU64::new(0);
/// Sampling is off for good: every call is recorded, and no per-site state is kept (a third of
/// a recorded pair's cost otherwise).
static EVERY_CALL: AtomicBool = AtomicBool::new(false);
/// With every call recorded, whether recorded exits take the in-run references of the probes'
/// in-place cost (see the `speed_reference` module): yes, but in a slice and with full detail.
static EVERY_CALL_FOLLOWED: AtomicBool = AtomicBool::new(false);

/// Whether every call is to be recorded: `record_all` (full detail: every call is measured), or
/// `PARPROF_SAMPLING=off`.
pub(crate) fn every_call_requested(record_all: bool) -> bool {
    record_all || std::env::var("PARPROF_SAMPLING").is_ok_and(|v| v == "off")
}

/// Turns per-site sampling state off (`true`) or on; returns the previous setting. Set before
/// calibration, which measures recorded calls as the program will make them.
pub(crate) fn set_every_call(every_call: bool) -> bool {
    EVERY_CALL.swap(every_call, Ordering::Relaxed)
}

/// Whether every call is recorded (per-site sampling off).
pub(crate) fn every_call() -> bool {
    EVERY_CALL.load(Ordering::Relaxed)
}

/// Whether, with every call recorded, recorded exits take in-run references (see
/// [`recorded_exit`]). Set before calibration, which measures the exit path the program takes.
pub(crate) fn follow_every_call(follow: bool) {
    EVERY_CALL_FOLLOWED.store(follow, Ordering::Relaxed);
}

/// Called once at start-up, after calibration, with the event clock's rate.
pub(crate) fn configure(ticks_per_ns: f64, every_call: bool) {
    let ticks = if every_call {
        0
    } else {
        (HOT_SPACING_NS as f64 * ticks_per_ns).round().max(1.0) as u64
    };
    HOT_SPACING_TICKS.store(ticks, Ordering::Relaxed);
    set_every_call(every_call);
}

/// A site's sampling state on one thread.
#[derive(Clone, Copy, Debug, Default)]
struct SiteState {
    /// Activations of the site open on this thread, recorded or not.
    depth: u32,
    /// Whether the outermost open activation is recorded.
    outermost_recorded: bool,
    /// Record one call in `period` (0 and 1: every call).
    period: u32,
    /// Calls to skip before the next recorded one.
    skip: u32,
    /// Calls not recorded since they were last written to the trace.
    unrecorded: u32,
    /// Of `unrecorded`, the calls nested in an unrecorded activation of the site.
    unrecorded_nested: u32,
    /// Calls since the rate was last checked, and when (0: not yet).
    window_calls: u32,
    window_start: u64,
    /// Of `window_calls`, the outermost ones.
    window_outermost: u32,
    /// Record every outermost activation (the sampling applies to the calls nested in them):
    /// the site recursed in the last window, and its outermost activations came further
    /// apart than [`HOT_SPACING_NS`].
    record_outermost: bool,
}

impl SiteState {
    fn take_sample(&mut self) -> bool {
        if self.skip == 0 {
            self.skip = self.period.saturating_sub(1);
            true
        } else {
            self.skip -= 1;
            false
        }
    }
}

/// One thread's site states, indexed by site id (ids are small and dense, from 1): a boxed
/// slice, freed by [`SitesOwner`] when the thread exits. Kept as a raw pointer and length in a
/// thread-local without destructor, so that reaching it on the probe's path is one load: a
/// thread-local with a destructor checks whether it is registered at every access.
#[derive(Clone, Copy)]
struct SiteTable {
    ptr: *mut SiteState,
    len: usize,
}

impl SiteTable {
    /// No state yet on this thread.
    const EMPTY: SiteTable = SiteTable {
        ptr: std::ptr::null_mut(),
        len: 0,
    };
    /// The thread is exiting and its states are freed: calls are recorded without sampling.
    const GONE: SiteTable = SiteTable {
        ptr: std::ptr::NonNull::dangling().as_ptr(),
        len: 0,
    };

    /// # Safety
    /// `self` came from [`SiteTable::grow`] and was not freed.
    unsafe fn free(self) {
        // SAFETY: by the caller, `ptr` and `len` are a leaked `Box<[SiteState]>`.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }

    /// A table with room for index `at`, holding the states of `self` (freed).
    fn grow(self, at: usize) -> SiteTable {
        let mut states = vec![SiteState::default(); (at + 1).max(2 * self.len).max(16)];
        if self.len > 0 {
            // SAFETY: a non-empty table came from `grow` and is owned by this thread.
            let old = unsafe { std::slice::from_raw_parts(self.ptr, self.len) };
            states[..self.len].copy_from_slice(old);
            // SAFETY: as above; `old` is not used after this.
            unsafe { self.free() };
        }
        let len = states.len();
        SiteTable {
            ptr: Box::leak(states.into_boxed_slice()).as_mut_ptr(),
            len,
        }
    }
}

/// Frees the calling thread's [`SiteTable`] and pending sites when the thread exits. Its
/// destructor is registered before the recorder's (see [`attach_thread`]), so that it runs
/// after it: the recorder writes the thread's last unrecorded counts first.
struct SitesOwner;

impl Drop for SitesOwner {
    fn drop(&mut self) {
        let table = SITES.replace(SiteTable::GONE);
        if table.len > 0 {
            // SAFETY: the table came from `grow`; GONE is never freed or grown.
            unsafe { table.free() };
        }
        // No count is left to write: the states are gone.
        drop(with_pending_sites(std::mem::take));
        attention::clear(attention::PENDING);
    }
}

/// Registers the calling thread's state for freeing at thread exit. Called when the thread
/// attaches to the recorder, before the recorder registers its own thread-exit work: thread
/// destructors run in the reverse order of their registration.
pub(crate) fn attach_thread() {
    let _ = SITES_OWNER.try_with(|_| ());
}

thread_local! {
    static SITES: Cell<SiteTable> = const { Cell::new(SiteTable::EMPTY) };
    static SITES_OWNER: SitesOwner = const { SitesOwner };
    /// Sites with unrecorded calls not yet in the trace. That it is not empty is the
    /// [`attention::PENDING`] bit: derivable, but every recorded event checks that byte, and
    /// a byte without a destructor costs less to reach than the vector. The vector has no
    /// destructor either, so that it outlives the thread's other destructors (it is freed by
    /// [`SitesOwner`]): at the main thread's exit, the recorder's destructor writes its last
    /// counts, which a vector destroyed first used to lose.
    static PENDING: UnsafeCell<ManuallyDrop<Vec<u32>>> =
        const { UnsafeCell::new(ManuallyDrop::new(Vec::new())) };
}

/// Runs `f` on the calling thread's pending sites; `None` if the thread-local is unreachable.
fn with_pending_sites<R>(f: impl FnOnce(&mut Vec<u32>) -> R) -> Option<R> {
    // SAFETY: only this module reaches the vector, on its own thread, and `f` does not reenter
    // it (the callers' closures touch no thread-local of this module but the site states).
    PENDING.try_with(|p| f(unsafe { &mut *p.get() })).ok()
}

/// Runs `f` on the calling thread's state of `site`; `None` during thread teardown.
#[inline(always)]
fn with_site<R>(site: u32, f: impl FnOnce(&mut SiteState) -> R) -> Option<R> {
    let at = if site == CALIBRATION_SITE {
        0
    } else {
        site as usize
    };
    let table = SITES.get();
    let table = if at < table.len {
        table
    } else {
        grown_table(at)?
    };
    // SAFETY: `at` is in bounds of a live table owned by this thread; the state is only
    // reached through this function, and `f` does not reenter it (it touches no other
    // thread-local of this module).
    Some(f(unsafe { &mut *table.ptr.add(at) }))
}

/// The calling thread's table, grown to hold index `at`; `None` for ids past [`MAX_SITES`]
/// and during thread teardown.
#[cold]
#[inline(never)]
fn grown_table(at: usize) -> Option<SiteTable> {
    let table = SITES.get();
    if at >= MAX_SITES || table.ptr == SiteTable::GONE.ptr {
        return None;
    }
    if table.len == 0 {
        // Reaching the owner registers its destructor; it fails once the thread is exiting.
        SITES_OWNER.try_with(|_| ()).ok()?;
    }
    let table = table.grow(at);
    SITES.set(table);
    Some(table)
}

/// A call of `site` begins: whether to record it. A call not recorded is counted.
#[inline(always)]
pub(crate) fn enter(site: u32) -> bool {
    if EVERY_CALL.load(Ordering::Relaxed) {
        return true;
    }
    let record = with_site(site, |s| {
        s.depth += 1;
        s.window_calls = s.window_calls.saturating_add(1);
        let record = if s.depth == 1 {
            s.window_outermost = s.window_outermost.saturating_add(1);
            let record = s.record_outermost || s.take_sample();
            s.outermost_recorded = record;
            record
        } else if s.outermost_recorded {
            s.take_sample()
        } else {
            s.unrecorded_nested = s.unrecorded_nested.saturating_add(1);
            false
        };
        if !record {
            s.unrecorded = s.unrecorded.saturating_add(1);
        }
        (record, s.unrecorded == 1 && !record)
    });
    match record {
        Some((record, first_unrecorded)) => {
            if first_unrecorded {
                mark_pending(site);
            }
            record
        }
        None => true,
    }
}

/// The flags of a recorded call's [`EventKind::Enter`]: whether its site is sampled on this
/// thread now, so that the analysis estimates unrecorded calls from sampled calls alone.
/// Taken on the timed path only.
///
/// [`EventKind::Enter`]: crate::trace::EventKind::Enter
#[inline(always)]
pub(crate) fn entry_flags(site: u32) -> u8 {
    if EVERY_CALL.load(Ordering::Relaxed) {
        return 0;
    }
    // An outermost activation recorded because every outermost one is (`record_outermost`)
    // is not a sample: it stands for itself alone.
    match with_site(site, |s| {
        s.period > 1 && !(s.depth == 1 && s.record_outermost)
    }) {
        Some(true) => 0,
        _ => crate::trace::ENTER_NOT_SAMPLED,
    }
}

#[cold]
#[inline(never)]
fn mark_pending(site: u32) {
    with_pending_sites(|p| p.push(site));
    attention::set(attention::PENDING);
}

/// A recorded call of `site` returns at `ts`: every [`RATE_WINDOW`] calls its rate decides
/// whether it is hot. Returns whether the thread follows the probes' in-place cost at this exit
/// (in-run references, see the `speed_reference` module): on a hot site (sampled on this
/// thread), and on every exit when every call is recorded ([`follow_every_call`]).
#[inline(always)]
pub(crate) fn recorded_exit(site: u32, ts: u64) -> bool {
    if EVERY_CALL.load(Ordering::Relaxed) {
        return EVERY_CALL_FOLLOWED.load(Ordering::Relaxed);
    }
    with_site(site, |s| {
        s.depth = s.depth.saturating_sub(1);
        if s.window_start == 0 {
            s.window_start = ts;
            s.window_calls = 0;
            s.window_outermost = 0;
        } else if s.window_calls >= RATE_WINDOW {
            let window = ts.saturating_sub(s.window_start);
            let spacing = window / u64::from(s.window_calls);
            let hot_below = HOT_SPACING_TICKS.load(Ordering::Relaxed);
            // 0: sampling is off, or not configured yet (calibration sets its own periods).
            if hot_below != 0 {
                s.period = if spacing < hot_below { HOT_PERIOD } else { 1 };
                let recursed = s.window_outermost < s.window_calls;
                let outermost_spacing = window / u64::from(s.window_outermost.max(1));
                s.record_outermost = recursed && outermost_spacing >= hot_below;
            }
            s.window_start = ts;
            s.window_calls = 0;
            s.window_outermost = 0;
        }
        s.period > 1
    })
    .unwrap_or(false)
}

/// An unrecorded call of `site` returns.
#[inline(always)]
pub(crate) fn exit(site: u32) {
    if EVERY_CALL.load(Ordering::Relaxed) {
        // An activation left untimed before sampling was turned off (a slice) needs no state.
        return;
    }
    with_site(site, |s| s.depth = s.depth.saturating_sub(1));
}

/// In a slice: sampling off from now on, and the calling thread (the only one) records its
/// next call of every site, calls nested in an unrecorded activation included; the counts of
/// unrecorded calls are dropped (a slice writes no trace), and no in-run reference is taken.
pub(crate) fn record_every_call() {
    HOT_SPACING_TICKS.store(0, Ordering::Relaxed);
    set_every_call(true);
    follow_every_call(false);
    with_pending_sites(|p| p.clear());
    attention::clear(attention::PENDING);
}

/// Calibration's pseudo-site, whose state is kept in slot 0 (site ids start at 1).
pub(crate) const CALIBRATION_SITE: u32 = u32::MAX;

/// Makes calibration's pseudo-site record one call in `period` (1: every call; `u32::MAX`:
/// none after the next one).
pub(crate) fn calibrate_recording(period: u32) {
    with_site(CALIBRATION_SITE, |s| {
        *s = SiteState {
            period,
            ..SiteState::default()
        }
    });
}

/// Makes calibration's pseudo-site record none of its calls (an in-place cost reference:
/// every call takes the untimed path).
pub(crate) fn calibrate_without_recording() {
    with_site(CALIBRATION_SITE, |s| {
        *s = SiteState {
            period: u32::MAX,
            skip: u32::MAX,
            ..SiteState::default()
        }
    });
}

/// Forgets the calls calibration did not record.
pub(crate) fn discard_pending() {
    take_pending(|_| {});
}

/// Forgets the unrecorded calls of calibration's pseudo-site alone, keeping the program's
/// (a reference measured while the program runs).
pub(crate) fn discard_calibration_calls() {
    with_site(CALIBRATION_SITE, |s| {
        s.unrecorded = 0;
        s.unrecorded_nested = 0;
    });
    with_pending_sites(|pending| {
        pending.retain(|&site| site != CALIBRATION_SITE);
        if pending.is_empty() {
            attention::clear(attention::PENDING);
        }
    });
}

/// Whether unrecorded calls wait to be written.
#[inline(always)]
pub(crate) fn has_pending() -> bool {
    attention::get() & attention::PENDING != 0
}

/// Counts of unrecorded calls of one site, as written in one [`EventKind::Unrecorded`] event.
///
/// [`EventKind::Unrecorded`]: crate::trace::EventKind::Unrecorded
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UnrecordedCalls {
    pub site: u32,
    pub count: u16,
    /// The calls were nested in an unrecorded activation of the same site.
    pub nested: bool,
}

/// Hands over the calling thread's unrecorded call counts, per site the outermost (or nested
/// in a recorded activation) then the nested in an unrecorded one, with counts of at most
/// `u16::MAX` (a larger count comes in several parts), and resets them.
pub(crate) fn take_pending(mut emit: impl FnMut(UnrecordedCalls)) {
    // `emit` does not reach this module's thread-locals. Drained in place: the vector keeps
    // its allocation for the next period.
    with_pending_sites(|pending| {
        for site in pending.drain(..) {
            let (all, nested) = with_site(site, |s| {
                let nested = std::mem::take(&mut s.unrecorded_nested);
                (std::mem::take(&mut s.unrecorded), nested)
            })
            .unwrap_or((0, 0));
            for (mut count, nested) in [(all.saturating_sub(nested), false), (nested, true)] {
                while count > 0 {
                    let part = count.min(u32::from(u16::MAX));
                    emit(UnrecordedCalls {
                        site,
                        count: part as u16,
                        nested,
                    });
                    count -= part;
                }
            }
        }
    });
    attention::clear(attention::PENDING);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(site: u32, n: u32) -> Vec<bool> {
        (0..n)
            .map(|_| {
                let r = enter(site);
                exit(site);
                r
            })
            .collect()
    }

    /// The pending counts as (site, count), each site's nested calls after its others.
    fn pending() -> Vec<(u32, u16)> {
        pending_with_nesting()
            .into_iter()
            .map(|(s, c, _)| (s, c))
            .collect()
    }

    fn pending_with_nesting() -> Vec<(u32, u16, bool)> {
        let mut out = Vec::new();
        take_pending(|u| out.push((u.site, u.count, u.nested)));
        out
    }

    #[test]
    fn a_hot_site_records_one_call_in_its_period_and_counts_the_others() {
        with_site(7, |s| s.period = 4);
        let recorded = calls(7, 12);
        assert_eq!(recorded.iter().filter(|r| **r).count(), 3);
        assert!(has_pending());
        assert_eq!(pending(), vec![(7, 9)]);
        assert!(!has_pending());
        assert_eq!(pending(), vec![]);
    }

    #[test]
    fn calls_nested_in_an_unrecorded_activation_are_not_recorded() {
        with_site(3, |s| s.period = 2);
        // The first outermost call is recorded, its nested calls sampled: 1 of 2.
        assert!(enter(3));
        let nested: Vec<bool> = (0..4)
            .map(|_| {
                let r = enter(3);
                exit(3);
                r
            })
            .collect();
        exit(3);
        assert_eq!(nested, vec![false, true, false, true]);
        // The next outermost call is skipped, and everything inside it.
        assert!(!enter(3));
        assert!((0..5).all(|_| {
            let r = enter(3);
            exit(3);
            !r
        }));
        exit(3);
        // 2 + 6 unrecorded: the 2 nested in the recorded activation and the skipped outermost
        // call, then the 5 nested in it, apart.
        assert_eq!(
            pending_with_nesting(),
            vec![(3, 2 + 1, false), (3, 5, true)]
        );
    }

    #[test]
    fn a_loop_over_a_sampled_recursion_counts_each_nesting_apart() {
        // A recursion of depth 3 entered 8 times (a loop, or a worker's stolen tasks), one
        // call in 4 recorded. The nested calls of a recorded activation draw from the same
        // sampling turn: here they skip the next 2 calls, so every other outermost activation
        // is recorded, and the 2 calls nested in a skipped one are skipped with it.
        with_site(13, |s| s.period = 4);
        let mut recorded = Vec::new();
        for _ in 0..8 {
            recorded.push(enter(13));
            for _ in 0..2 {
                assert!(!enter(13));
            }
            for _ in 0..3 {
                exit(13);
            }
        }
        assert_eq!(recorded, [true, false].repeat(4));
        // Outermost or nested in a recorded activation: 4 × 2 + 4; nested in a skipped one:
        // 4 × 2, apart.
        assert_eq!(
            pending_with_nesting(),
            vec![(13, 4 * 2 + 4, false), (13, 4 * 2, true)]
        );
    }

    #[test]
    fn forgetting_calibration_calls_keeps_the_programs() {
        with_site(11, |s| s.period = 4);
        calls(11, 4);
        calibrate_without_recording();
        assert!(!enter(CALIBRATION_SITE));
        exit(CALIBRATION_SITE);
        discard_calibration_calls();
        assert!(has_pending());
        assert_eq!(pending(), vec![(11, 3)]);
        // Only calibration calls: nothing left to write, and the attention bit is clear.
        assert!(!enter(CALIBRATION_SITE));
        exit(CALIBRATION_SITE);
        discard_calibration_calls();
        assert!(!has_pending());
    }

    #[test]
    fn large_counts_come_in_parts() {
        with_site(5, |s| {
            s.unrecorded = 70_000;
        });
        mark_pending(5);
        assert_eq!(pending(), vec![(5, 65_535), (5, 4_465)]);
    }

    #[test]
    fn the_rate_makes_a_site_hot_and_cold_again() {
        HOT_SPACING_TICKS.store(100, Ordering::Relaxed);
        assert!(!recorded_exit(9, 1_000));
        with_site(9, |s| s.window_calls = RATE_WINDOW);
        assert!(recorded_exit(9, 1_000 + 50 * u64::from(RATE_WINDOW)));
        assert_eq!(with_site(9, |s| s.period), Some(HOT_PERIOD));
        with_site(9, |s| s.window_calls = RATE_WINDOW);
        assert!(!recorded_exit(9, 1_000 + 500 * u64::from(RATE_WINDOW)));
        assert_eq!(with_site(9, |s| s.period), Some(1));
    }

    #[test]
    fn a_recursion_with_sparse_outermost_activations_records_all_of_them() {
        HOT_SPACING_TICKS.store(100, Ordering::Relaxed);
        let window = u64::from(RATE_WINDOW);
        // A window of a recursion entered twice, its calls hot (50 ticks apart).
        recorded_exit(19, 1_000);
        with_site(19, |s| {
            s.window_calls = RATE_WINDOW;
            s.window_outermost = 2;
        });
        assert!(recorded_exit(19, 1_000 + 50 * window));
        assert_eq!(
            with_site(19, |s| (s.period, s.record_outermost)),
            Some((HOT_PERIOD, true))
        );
        // Every outermost activation is recorded, and stands for itself; the calls nested
        // in it are sampled.
        for _ in 0..3 {
            assert!(enter(19));
            assert_eq!(entry_flags(19), crate::trace::ENTER_NOT_SAMPLED);
            let nested = (0..2 * HOT_PERIOD)
                .filter(|_| {
                    let r = enter(19);
                    exit(19);
                    r
                })
                .count();
            assert_eq!(nested, 2);
            exit(19);
        }
        // A window of the same calls, each outermost (a flat loop): sampled again.
        with_site(19, |s| {
            s.window_calls = RATE_WINDOW;
            s.window_outermost = RATE_WINDOW;
        });
        assert!(recorded_exit(19, 1_000 + 100 * window));
        assert_eq!(with_site(19, |s| s.record_outermost), Some(false));
        // A shallow recursion whose outermost activations are hot too (3 in 4 calls, 67
        // ticks apart): sampled too.
        with_site(19, |s| {
            s.window_calls = RATE_WINDOW;
            s.window_outermost = RATE_WINDOW / 4 * 3;
        });
        assert!(recorded_exit(19, 1_000 + 150 * window));
        assert_eq!(with_site(19, |s| s.record_outermost), Some(false));
        pending();
    }

    #[test]
    fn a_recorded_entry_says_whether_its_site_is_sampled() {
        assert_eq!(entry_flags(17), crate::trace::ENTER_NOT_SAMPLED);
        with_site(17, |s| s.period = HOT_PERIOD);
        assert_eq!(entry_flags(17), 0);
        with_site(17, |s| s.period = 1);
        assert_eq!(entry_flags(17), crate::trace::ENTER_NOT_SAMPLED);
    }
}
