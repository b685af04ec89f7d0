//! Overhead calibration: what each event type costs the interval that encloses it.
//!
//! Measured warm at start-up through the real recording path, as medians over batches. Two
//! figures are combined:
//! - back-to-back events of each kind give each kind's cost relative to the others;
//! - probed against unprobed calls of a small body give what a probe pair really adds to the
//!   code around it, through the machine code a probed function runs (two calls into the
//!   runtime). Back-to-back events differ from that: the clock read is not serialising, its
//!   latency overlaps with the work around it, and so do the calls' returns.
//!
//! Each kind's back-to-back cost is scaled by (marginal pair cost ÷ back-to-back pair cost).
//! A call that sampling does not record is measured only the second way, as on a hot site
//! (see [`untimed_call_cost`]). Method 1 of the spec subtracts these costs from every
//! enclosing probed interval.
//!
//! The in-run reference ([`speed_reference`]) is tied to the figure it stands for during the
//! run: the untimed call under sampling, the timed pair when every call is recorded (where a
//! nested parent kept up to a third of its distortion with the start-up figure alone: in place
//! a timed pair cost more, by an amount that varied from run to run).

use crate::clock;
use crate::probe::{self, Guard, probed_small_body};
use crate::recorder::{self, with_current_ring};
use crate::sampling::{self, CALIBRATION_SITE};
use crate::speed_reference::{self, small_body};
use crate::trace::{self, Calibration, EventKind};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Operations in a batch of back-to-back events.
const BATCH: u64 = 256;

/// When an in-place measurement stops: after at least `min` rounds, at the first check (every
/// [`CHECK_EVERY`] rounds) where every figure's median is known within `precision` (its
/// standard error over the median), or where the rounds up to the next check would take the
/// measurement past `budget`; at the latest after `max` rounds.
#[derive(Clone, Copy, Debug)]
struct Rounds {
    min: usize,
    max: usize,
    precision: f64,
    budget: Duration,
}

/// The figures a correction rests on: the timed pair, and under sampling (the default) the untimed
/// call's cost and its ratio to the in-run reference. The nested correction's goal is 10 %, and the
/// overhead removed from a parent with a small probed child is about as large as its own work: a
/// percent. An unsteady machine's spreads of tens of percent take about a hundred rounds for a
/// median known within two or three. The timed pair is a small part of what a hot site removes (one
/// call in [`sampling::HOT_PERIOD`], costing about four untimed ones), yet with it stopped at 11–41
/// rounds the nested-correction benchmark had 8, 9, 8 and 9 runs of 10 within 10 % in four series,
/// against 10, 10, 10 and 9 before: not conclusive, and not worth the few milliseconds it saved on
/// an unsteady machine only.
///
/// The budget bounds start-up on an unsteady machine, where a precision of 1 % is out of reach
/// anyway (a spread of 27 % needs about 600 rounds) and every round runs about twice as long: a
/// hundred rounds of each figure took 20–25 of a profiled program's first milliseconds, 8 % of
/// a 260 ms program; with it, start-up took at most 12 ms in 60 runs against 26 without. Stopped
/// by the budget at 21–41 rounds, a figure's standard error is 4–5.5 % instead of 2.5 %; the
/// report's uncertainty says so (nested-correction benchmark, sampled: 9 and 10 runs of 10
/// within 10 %, the runs said uncertain among the furthest, against 10 and 10 without the
/// budget), and the in-run references follow the machine's speed after start-up in any case. A
/// steady machine is done within it (21 rounds in about 1.5 ms).
const DECISIVE: Rounds = Rounds {
    min: 21,
    max: 101,
    precision: 0.01,
    budget: Duration::from_millis(4),
};
/// Figures whose precision does not reach what is removed, so that start-up stays short: each
/// kind's back-to-back cost (only their proportions are used, scaled to the pair measured in
/// place, which alone sets what a timed pair removes), and the untimed call when every call is
/// timed (there are no untimed calls).
const SECONDARY: Rounds = Rounds {
    min: 11,
    max: 41,
    precision: 0.02,
    budget: Duration::from_millis(1),
};
/// Rounds between two checks of whether the figures are known well enough.
const CHECK_EVERY: usize = 10;

pub struct Table {
    pub rows: Vec<Calibration>,
    pub bare_read_pair_ticks: u32,
}

/// A figure measured over rounds.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Measured {
    median: f64,
    /// The interquartile range over the median: how much the machine's speed varied while the
    /// figure was measured.
    spread: f64,
    /// Rounds that gave the figure; 0: none did (nothing measured).
    rounds: u16,
}

/// Rounds of an in-place measurement of `N` figures, as `rounds` says, the recorded events
/// discarded after each round so that calibration leaves nothing in the trace. A steady
/// machine is done after the first check, so every profiled program starts sooner; an
/// unsteady one runs until its budget or its last round. A round may give no reading of a
/// figure (noise that made it meaningless).
fn measure_until_known<const N: usize>(
    rounds: Rounds,
    mut one_round: impl FnMut() -> [Option<f64>; N],
) -> [Measured; N] {
    let mut readings: [Vec<f64>; N] = std::array::from_fn(|_| Vec::with_capacity(rounds.max));
    let started = Instant::now();
    for round in 1..=rounds.max {
        for (kept, reading) in readings.iter_mut().zip(one_round()) {
            kept.extend(reading);
        }
        with_current_ring(|r| r.discard());
        let check = round >= rounds.min && (round - rounds.min).is_multiple_of(CHECK_EVERY);
        if !check {
            continue;
        }
        if readings.iter().all(|r| known_within(r, rounds.precision)) {
            break;
        }
        let at_next_check = started
            .elapsed()
            .mul_f64((round + CHECK_EVERY) as f64 / round as f64);
        if at_next_check > rounds.budget {
            break;
        }
    }
    readings.map(median_and_spread)
}

/// Whether the median of `readings` is known within `precision`.
fn known_within(readings: &[f64], precision: f64) -> bool {
    let figure = median_and_spread(readings.to_vec());
    figure.rounds > 0
        && trace::median_standard_error(figure.spread, usize::from(figure.rounds)) <= precision
}

/// The median and spread of figures measured in rounds.
fn median_and_spread(mut figures: Vec<f64>) -> Measured {
    if figures.is_empty() {
        return Measured {
            median: 0.0,
            spread: 0.0,
            rounds: 0,
        };
    }
    figures.sort_by(f64::total_cmp);
    let rounds = figures.len();
    let median = figures[rounds / 2];
    let interquartile = figures[rounds * 3 / 4] - figures[rounds / 4];
    Measured {
        median,
        spread: if median > 0.0 {
            interquartile / median
        } else {
            0.0
        },
        rounds: u16::try_from(rounds).unwrap_or(u16::MAX),
    }
}

/// Ticks per operation of `one_batch`, which performs `BATCH` operations.
fn median_batch(mut one_batch: impl FnMut()) -> f64 {
    let [ticks] = measure_until_known(SECONDARY, || {
        let t0 = clock::now();
        one_batch();
        [Some(clock::now().saturating_sub(t0) as f64 / BATCH as f64)]
    });
    ticks.median
}

/// Calls in a round of the timed pair's and the hot site's measurements. Calibration is part
/// of every profiled program's start-up: rounds of 4096 calls took about 30 of the 46 ms a
/// program that returns at once ran under the runtime, 12 % of a 250 ms quicksort.
const ROUND_CALLS: u64 = 2048;

/// What a timed probe pair adds around `small_body`: probed and plain batches alternate, so
/// that both see the same machine state, and the median of their differences is taken.
fn marginal_pair_cost() -> Measured {
    let [cost] = measure_until_known(DECISIVE, || [Some(marginal_pair_round(ROUND_CALLS))]);
    cost
}

/// [`marginal_pair_cost`] with every call recorded, and the in-run reference (see
/// [`speed_reference`]), which then measures timed pairs too, as it reads in the same phases
/// of the machine: the pair's cost, and the reference tied to it (see [`tied_reference`]).
fn timed_pair_and_reference() -> (Measured, Measured) {
    let [pair, ratio] = measure_until_known(DECISIVE, || {
        let pair = marginal_pair_round(ROUND_CALLS);
        let reference = speed_reference::round(clock::now(), probed_small_body).per_call;
        [Some(pair), (reference > 0.0).then(|| pair / reference)]
    });
    (pair, tied_reference(pair, ratio))
}

/// The start-up figure of the in-run reference that stands for `cost`, from the ratio of the
/// cost to the reference measured round by round: medians taken apart can come from different
/// phases where the machine's speed flips between two (seen: 9.8 against 4.7 ns). Its spread
/// and rounds are the ratio's: how well the reference stands for the cost.
fn tied_reference(cost: Measured, ratio: Measured) -> Measured {
    if ratio.rounds == 0 {
        // Every reference round read nothing: noise; the cost itself stands in.
        return cost;
    }
    Measured {
        median: cost.median / ratio.median.max(f64::MIN_POSITIVE),
        ..ratio
    }
}

/// One round of [`marginal_pair_cost`].
fn marginal_pair_round(calls: u64) -> f64 {
    let t0 = clock::now();
    black_box((0..calls).fold(0, |acc, i| acc ^ probed_small_body(i)));
    let t1 = clock::now();
    black_box((0..calls).fold(0, |acc, i| acc ^ small_body(i)));
    let t2 = clock::now();
    let calibrated = t1.saturating_sub(t0) as f64
        - t2.saturating_sub(t1) as f64
        - count_writes_measured() as f64;
    calibrated / calls as f64
}

/// The ticks of the events in the calling thread's ring that the analysis measures instead of
/// taking from calibration: the writing of each count of untimed calls, from the count's stamp
/// to the next event. Drains the ring.
fn count_writes_measured() -> u64 {
    let mut ticks = 0;
    with_current_ring(|ring| {
        ring.drain(|first, second| {
            let mut count_written_at = None;
            for event in first.iter().chain(second) {
                if event.kind() == EventKind::Unrecorded {
                    count_written_at.get_or_insert(event.ts);
                } else if let Some(at) = count_written_at.take() {
                    ticks += event.ts.saturating_sub(at);
                }
            }
        })
    });
    ticks
}

/// What an untimed call of a hot site costs the code around it, given what a timed pair costs
/// (`timed_pair`), with its spread; and the in-run speed reference (see [`speed_reference`]) as
/// it read in the same phases of the machine.
///
/// Measured around `small_body` as the timed pair is, once with no call timed and once with
/// one call in [`sampling::HOT_PERIOD`] timed, as on a hot site. The second costs more per
/// call than the mix of the two kinds measured apart: the timed call of each period takes
/// mispredicted branches. The analysis removes the calibrated timed pair from each timed call
/// and this cost from each untimed one (and measures the writing of their count), so the rest
/// of a period's cost is spread over its untimed calls. The no-timed-call figure is a floor,
/// in case noise made the mix look cheaper.
///
/// Each round measures the three figures one after the other, and the reference is kept as
/// its ratio to the cost within a round ([`tied_reference`]).
fn untimed_call_cost(timed_pair: f64, rounds: Rounds) -> (Measured, Measured) {
    let every_call = sampling::set_every_call(false);
    let period = f64::from(sampling::HOT_PERIOD);
    let [untimed, ratio] = measure_until_known(rounds, || {
        sampling::calibrate_recording(u32::MAX);
        let floor = marginal_pair_round(512);
        sampling::calibrate_recording(sampling::HOT_PERIOD);
        // Longer: only one call in a period is timed, and its cost varies most.
        let hot_site = marginal_pair_round(ROUND_CALLS);
        let untimed = ((hot_site * period - timed_pair) / (period - 1.0)).max(floor);
        let reference = speed_reference::round(clock::now(), probed_small_body).per_call;
        [
            Some(untimed),
            (reference > 0.0).then(|| untimed / reference),
        ]
    });
    sampling::calibrate_recording(1);
    sampling::discard_pending();
    sampling::set_every_call(every_call);
    (untimed, tied_reference(untimed, ratio))
}

/// What each kind of event costs back to back, in batches through the real recording path.
fn back_to_back_costs() -> Vec<(EventKind, f64)> {
    EventKind::ALL
        .iter()
        // A stall's or a checkpoint's cost is its own measured duration.
        // A reference's cost is its own measured duration too; its row is the reference
        // measured here.
        .filter(|&&kind| {
            !matches!(
                kind,
                EventKind::BufferStall | EventKind::SliceCheckpoint | EventKind::SpeedReference
            )
        })
        .map(|&kind| {
            let cost = match kind {
                // The entry and exit paths of `#[probe]`: the sampling decision, the event,
                // the guard's drop.
                EventKind::Enter => median_batch(|| {
                    for _ in 0..BATCH {
                        std::mem::forget(black_box(probe::enter_calibration()));
                    }
                }),
                EventKind::Exit => median_batch(|| {
                    for _ in 0..BATCH {
                        drop(black_box(Guard::new(CALIBRATION_SITE)));
                    }
                }),
                _ => median_batch(|| {
                    for _ in 0..BATCH {
                        black_box(recorder::record(kind, CALIBRATION_SITE, 0, 0));
                    }
                }),
            };
            (kind, cost)
        })
        .collect()
}

/// The calibration table; `every_call`: the program records every call of its probes (no
/// sampling), and no untimed call needs the figure's precision.
pub fn measure(every_call: bool) -> Table {
    // Warm the path and the ring's cache lines first.
    for _ in 0..4 {
        median_batch(|| {
            for _ in 0..BATCH {
                black_box(recorder::record(EventKind::Enter, CALIBRATION_SITE, 0, 0));
            }
        });
    }
    let bare = median_batch(|| {
        for _ in 0..BATCH {
            black_box(clock::now());
        }
    });
    let back_to_back = back_to_back_costs();
    let cost_of = |kind| {
        back_to_back
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0.0, |(_, c)| *c)
    };
    let back_to_back_pair = cost_of(EventKind::Enter) + cost_of(EventKind::Exit);
    // The in-run references measure what the run removes most of: timed pairs when every call
    // is recorded, else untimed calls.
    let (marginal_pair, timed_reference) = if every_call {
        let (pair, reference) = timed_pair_and_reference();
        (pair, Some(reference))
    } else {
        (marginal_pair_cost(), None)
    };
    // Guard against a noisy measurement: the two lie within a factor of two of each other on
    // every machine seen so far.
    let scale = (marginal_pair.median / back_to_back_pair).clamp(0.5, 2.0);
    let untimed_rounds = if every_call { SECONDARY } else { DECISIVE };
    let (untimed, untimed_reference) = untimed_call_cost(back_to_back_pair * scale, untimed_rounds);
    let reference = timed_reference.unwrap_or(untimed_reference);
    let rows = back_to_back
        .iter()
        .map(|&(kind, cost)| {
            let (cost, in_place) = match kind {
                EventKind::Unrecorded => (untimed.median, untimed),
                _ => (cost * scale, marginal_pair),
            };
            (kind, cost, in_place)
        })
        .chain([(EventKind::SpeedReference, reference.median, reference)])
        .map(|(kind, cost, in_place)| Calibration {
            kind,
            cost_ticks: cost.max(1.0),
            spread: in_place.spread,
            rounds: in_place.rounds.max(1),
        })
        .collect();
    Table {
        rows,
        bare_read_pair_ticks: (2.0 * bare).round() as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rounds` without its time budget: what precision alone decides, whatever the test
    /// machine's load.
    const fn without_budget(rounds: Rounds) -> Rounds {
        Rounds {
            budget: Duration::MAX,
            ..rounds
        }
    }

    /// Runs `measure_until_known` on one figure whose round `i` reads `reading(i)`; returns
    /// the figure and how many rounds ran.
    fn measure_one(reading: impl Fn(usize) -> Option<f64>) -> (Measured, usize) {
        let mut ran = 0;
        let [figure] = measure_until_known(without_budget(DECISIVE), || {
            ran += 1;
            [reading(ran)]
        });
        (figure, ran)
    }

    #[test]
    fn a_steady_figure_stops_at_the_first_check() {
        // Readings within ±0.5 %: standard error far below 1 %.
        let (figure, ran) = measure_one(|i| Some(100.0 + (i % 3) as f64 * 0.5));
        assert_eq!(ran, DECISIVE.min);
        assert_eq!(figure.rounds, DECISIVE.min as u16);
        assert_eq!(figure.median, 100.5);
    }

    #[test]
    fn an_unsteady_figure_takes_the_rounds_its_spread_needs() {
        // Readings alternately 110 and 100 (one more 110 after an odd round): median 110,
        // spread 10 ÷ 110, which needs (0.926 × 0.0909 ÷ 0.01)² ≈ 70.8 rounds; checks come at
        // 21, 31, …, so 71 run.
        let (figure, ran) = measure_one(|i| Some(if i % 2 == 0 { 100.0 } else { 110.0 }));
        assert_eq!(ran, 71);
        assert_eq!(figure.rounds, 71);
        assert_eq!(figure.median, 110.0);
        assert!((figure.spread - 1.0 / 11.0).abs() < 1e-12, "{figure:?}");
        // Twice as unsteady: the last round, whatever is known by then.
        let (_, ran) = measure_one(|i| Some(if i % 2 == 0 { 100.0 } else { 120.0 }));
        assert_eq!(ran, DECISIVE.max);
    }

    #[test]
    fn a_secondary_figure_settles_for_less_and_stops_sooner() {
        // The 110/100 figure above within 2 %: (0.926 × 0.0909 ÷ 0.02)² ≈ 17.7 rounds; checks
        // at 11, 21, …, so 21 run.
        let mut ran = 0;
        let [figure] = measure_until_known(without_budget(SECONDARY), || {
            ran += 1;
            [Some(if ran % 2 == 0 { 100.0 } else { 110.0 })]
        });
        assert_eq!((ran, figure.rounds), (21, 21));
        // Twice as unsteady: stopped at its own last round, far sooner than a decisive one.
        let mut ran = 0;
        measure_until_known(without_budget(SECONDARY), || {
            ran += 1;
            [Some(if ran % 2 == 0 { 100.0 } else { 120.0 })]
        });
        assert_eq!(ran, SECONDARY.max);
    }

    #[test]
    fn an_unsteady_figure_stops_when_the_next_rounds_would_pass_the_budget() {
        let rounds = Rounds {
            budget: Duration::from_millis(30),
            ..DECISIVE
        };
        let mut ran = 0;
        let [figure] = measure_until_known(rounds, || {
            ran += 1;
            std::thread::sleep(Duration::from_millis(1));
            [Some(if ran % 2 == 0 { 100.0 } else { 120.0 })]
        });
        // 21 rounds take at least 21 ms, and the next ten would end past 30: stopped at the
        // first check, where precision alone would have run all 101.
        assert_eq!((ran, figure.rounds), (DECISIVE.min, DECISIVE.min as u16));
    }

    #[test]
    fn a_figure_never_read_runs_every_round_and_says_it_measured_nothing() {
        let (figure, ran) = measure_one(|_| None);
        assert_eq!(ran, DECISIVE.max);
        assert_eq!(figure.rounds, 0);
    }

    #[test]
    fn every_figure_must_be_known_before_stopping() {
        let mut ran = 0;
        let [steady, unsteady] = measure_until_known(without_budget(DECISIVE), || {
            ran += 1;
            [Some(5.0), Some(if ran % 2 == 0 { 100.0 } else { 150.0 })]
        });
        assert_eq!(ran, DECISIVE.max);
        assert_eq!((steady.rounds, unsteady.rounds), (101, 101));
    }
}
