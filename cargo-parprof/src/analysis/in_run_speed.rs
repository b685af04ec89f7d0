//! Following the machine's speed during the run: the factor by which method 1's calibrated
//! costs are scaled on each thread.
//!
//! The runtime measures what a probe call costs in place again while the program runs, on
//! each thread with a hot site or, with every call recorded, each thread that records
//! ([`EventKind::SpeedReference`]: an untimed call, or a timed pair when every call is
//! recorded), as its calibration did at start-up (the calibration row of that kind). A
//! thread's factor is taken from its last three references over the start-up one, and a
//! change of the machine's speed takes effect at the second reference after it (the runtime
//! takes its first three back to back):
//!
//! - references of untimed calls: their median. Such a call writes nothing; a reference read
//!   high or low (an interrupt in its probed or its unprobed half, a negative figure written as
//!   0) is left out.
//! - references of timed pairs (every call recorded): their mean. A pair writes its events into
//!   the thread's ring, and while the writer drains the ring on another CPU the writes cost
//!   more, up to twice as much on this project's 2-vCPU VM. The program's own pairs pay that for
//!   the part of the run the writer drains, and references taken during the run read it in
//!   the same part: a median left it out. The same 20 recordings of `nested_probes` (every
//!   call timed, a 5 ns child, quiet VM, 2026-11-28): the parent corrected +9.2 % (median; 15
//!   of 20 within 10 %) by the median, +5.7 % (19 of 20) by the mean.
//!
//! A reference during which the thread was switched out measured the switch, and one whose own
//! events woke the writer holds the wake, which the program's events measure apart: the
//! active-time analysis takes neither. Before a thread's first reference, and on threads
//! without any, the factor is 1: the start-up calibration.
//!
//! [`EventKind::SpeedReference`]: parprof_rt::trace::EventKind::SpeedReference

use super::model::InRunSpeed;

/// A factor outside these bounds is taken as noise. The bounds are wide: an in-run reference
/// disturbed alone is left out by the median of three already, and a start-up calibration
/// disturbed as a whole (its untimed cost and its reference high together) is what the
/// in-run references are there to correct. Bounds of 0.25 and 4 once held every reference of
/// a run at 0.25 while they read less: a parent of 3 M probed calls came out 45 % short.
const FACTOR_BOUNDS: (f64, f64) = (1.0 / 16.0, 16.0);

/// One thread's recent references and the factor they give.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SpeedFollower {
    /// The last three references' factors, newest last (`seen` of them valid).
    last: [f64; 3],
    seen: usize,
    factor: f64,
}

impl Default for SpeedFollower {
    fn default() -> Self {
        SpeedFollower {
            last: [1.0; 3],
            seen: 0,
            factor: 1.0,
        }
    }
}

impl SpeedFollower {
    /// The factor for the thread's events from now on.
    pub(crate) fn factor(&self) -> f64 {
        self.factor
    }

    /// A reference measured `per_call` ticks where the start-up calibration measured
    /// `start_up` (no start-up figure: nothing to follow), of timed pairs or of untimed calls
    /// (see the module's text); returns the reference's own factor.
    pub(crate) fn on_reference(
        &mut self,
        per_call: f64,
        start_up: Option<f64>,
        timed_pairs: bool,
    ) -> Option<f64> {
        let start_up = start_up.filter(|s| *s > 0.0)?;
        let factor = (per_call / start_up).clamp(FACTOR_BOUNDS.0, FACTOR_BOUNDS.1);
        self.last = [self.last[1], self.last[2], factor];
        self.seen = (self.seen + 1).min(3);
        let mut last = self.last;
        let recent = &mut last[3 - self.seen..];
        // Of one or two references the median is their mean.
        self.factor = if timed_pairs || recent.len() < 3 {
            recent.iter().sum::<f64>() / recent.len() as f64
        } else {
            recent.sort_by(f64::total_cmp);
            recent[1]
        };
        Some(factor)
    }
}

/// Factors in buckets of a 32nd of an octave over [`FACTOR_BOUNDS`]: the run's quartiles of
/// its references, whatever their number, to about 2 %.
const BUCKETS_PER_OCTAVE: f64 = 32.0;
const OCTAVES_BELOW_ONE: f64 = 4.0;
const BUCKETS: usize = (2.0 * OCTAVES_BELOW_ONE * BUCKETS_PER_OCTAVE) as usize + 1;

/// How the references' own factors spread over the run.
#[derive(Clone, Copy, Debug)]
struct FactorHistogram {
    counts: [u32; BUCKETS],
    total: u64,
}

impl Default for FactorHistogram {
    fn default() -> Self {
        FactorHistogram {
            counts: [0; BUCKETS],
            total: 0,
        }
    }
}

impl FactorHistogram {
    fn add(&mut self, factor: f64) {
        let at = ((factor.log2() + OCTAVES_BELOW_ONE) * BUCKETS_PER_OCTAVE).round();
        let at = at.clamp(0.0, (BUCKETS - 1) as f64) as usize;
        self.counts[at] = self.counts[at].saturating_add(1);
        self.total += 1;
    }

    /// The factor below which a share `q` of the references lie.
    fn quantile(&self, q: f64) -> f64 {
        let wanted = (q * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        let at = self
            .counts
            .iter()
            .position(|&c| {
                seen += u64::from(c);
                seen >= wanted
            })
            .unwrap_or(BUCKETS - 1);
        (at as f64 / BUCKETS_PER_OCTAVE - OCTAVES_BELOW_ONE).exp2()
    }

    /// Interquartile range over the median.
    fn spread(&self) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        (self.quantile(0.75) - self.quantile(0.25)) / self.quantile(0.5)
    }
}

/// What the run's references did to the overhead removed, summed over threads.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SpeedTotals {
    pub references: u64,
    /// Calibrated overhead removed, as calibrated and as scaled, in sub-ticks.
    pub calibrated: f64,
    pub scaled: f64,
    /// The lowest and highest factor used.
    pub lowest: f64,
    pub highest: f64,
    /// The references' own factors.
    readings: FactorHistogram,
    /// References left out: the thread was switched out while it took them.
    pub switched: u64,
    /// References left out: their own events woke the writer.
    pub woke_writer: u64,
}

impl SpeedTotals {
    /// `sub_ticks` of calibrated overhead scaled by `factor`, counted.
    pub(crate) fn scale(&mut self, sub_ticks: u64, factor: f64) -> u64 {
        let scaled = if factor == 1.0 {
            sub_ticks
        } else {
            (sub_ticks as f64 * factor).round() as u64
        };
        self.calibrated += sub_ticks as f64;
        self.scaled += scaled as f64;
        scaled
    }

    /// A reference read `reading` (its own factor) and gave `factor` from now on.
    pub(crate) fn on_reference(&mut self, reading: f64, factor: f64) {
        self.readings.add(reading);
        if self.references == 0 {
            (self.lowest, self.highest) = (factor, factor);
        }
        self.references += 1;
        self.lowest = self.lowest.min(factor);
        self.highest = self.highest.max(factor);
    }

    /// The summary for the report; `None` when the run took no reference.
    pub(crate) fn summary(&self) -> Option<InRunSpeed> {
        (self.references > 0).then(|| InRunSpeed {
            references: self.references,
            overhead_scale: if self.calibrated > 0.0 {
                self.scaled / self.calibrated
            } else {
                1.0
            },
            lowest_factor: self.lowest,
            highest_factor: self.highest,
            spread: self.readings.spread(),
            switched: self.switched,
            woke_writer: self.woke_writer,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn follow_references(references: &[f64], timed_pairs: bool) -> Vec<f64> {
        let mut follower = SpeedFollower::default();
        references
            .iter()
            .map(|&r| {
                follower.on_reference(r, Some(10.0), timed_pairs);
                follower.factor()
            })
            .collect()
    }

    fn follow(references: &[f64]) -> Vec<f64> {
        follow_references(references, false)
    }

    #[test]
    fn timed_pairs_are_followed_by_the_mean_of_the_last_three() {
        // Start-up 10 ticks; one reference read the writer's draining (35): the factor holds
        // a third of it for three references, as the program's pairs paid it for part of the
        // time.
        assert_eq!(
            follow_references(&[5.0, 5.0, 5.0, 35.0, 5.0, 5.0, 5.0], true),
            [0.5, 0.5, 0.5, 1.5, 1.5, 1.5, 0.5]
        );
        assert_eq!(follow_references(&[5.0, 7.0], true), [0.5, 0.6]);
    }

    #[test]
    fn the_factor_is_the_median_of_the_last_three_references() {
        // Start-up 10 ticks; the run is twice as fast, one reference disturbed (40).
        assert_eq!(
            follow(&[5.0, 5.0, 5.0, 40.0, 5.0]),
            [0.5, 0.5, 0.5, 0.5, 0.5]
        );
        // Two references: their mean; a change of speed takes effect at the second.
        assert_eq!(follow(&[5.0, 7.0]), [0.5, 0.6]);
        assert_eq!(
            follow(&[5.0, 5.0, 5.0, 20.0, 20.0]),
            [0.5, 0.5, 0.5, 0.5, 2.0]
        );
        // A start-up reference 8× too high is followed down; beyond the bounds a factor is
        // noise, held at them, and a negative figure (written as 0) too.
        assert_eq!(follow(&[1.25, 1.25, 1.25]), [0.125, 0.125, 0.125]);
        assert_eq!(follow(&[1000.0, 1000.0, 1000.0]), [16.0, 16.0, 16.0]);
        assert_eq!(follow(&[0.0]), [0.0625]);
    }

    #[test]
    fn each_reference_gives_its_own_factor_within_the_bounds() {
        let mut follower = SpeedFollower::default();
        assert_eq!(follower.on_reference(5.0, Some(10.0), false), Some(0.5));
        assert_eq!(follower.on_reference(1000.0, Some(10.0), false), Some(16.0));
        assert_eq!(follower.on_reference(0.0, Some(10.0), false), Some(0.0625));
    }

    #[test]
    fn without_a_start_up_reference_nothing_is_followed() {
        let mut follower = SpeedFollower::default();
        assert_eq!(follower.on_reference(5.0, None, false), None);
        assert_eq!(follower.on_reference(5.0, Some(0.0), false), None);
        assert_eq!(follower.factor(), 1.0);
    }

    #[test]
    fn the_spread_of_the_references_is_their_interquartile_range_over_their_median() {
        let mut totals = SpeedTotals::default();
        // 100 references: 30 at 0.5, 40 at 1, 30 at 2 (on buckets): quartiles 0.5 and 2.
        for (reading, count) in [(0.5, 30), (1.0, 40), (2.0, 30)] {
            for _ in 0..count {
                totals.on_reference(reading, 1.0);
            }
        }
        assert_eq!(totals.summary().unwrap().spread, 1.5);
        // Steady: within a bucket or two, the spread is a few percent at most.
        let mut steady = SpeedTotals::default();
        for i in 0..99 {
            steady.on_reference(1.0 + 0.01 * f64::from(i % 3), 1.0);
        }
        let spread = steady.summary().unwrap().spread;
        assert!(spread < 0.05, "{spread}");
    }

    #[test]
    fn the_totals_say_how_the_removed_overhead_was_scaled() {
        let mut totals = SpeedTotals::default();
        assert!(totals.summary().is_none());
        assert_eq!(totals.scale(1_000, 1.0), 1_000);
        totals.on_reference(0.5, 0.5);
        assert_eq!(totals.scale(1_000, 0.5), 500);
        totals.on_reference(2.0, 2.0);
        assert_eq!(totals.scale(1_000, 2.0), 2_000);
        let summary = totals.summary().unwrap();
        assert_eq!(summary.references, 2);
        assert!((summary.overhead_scale - 3_500.0 / 3_000.0).abs() < 1e-12);
        assert_eq!((summary.lowest_factor, summary.highest_factor), (0.5, 2.0));
    }
}
