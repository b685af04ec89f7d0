//! How well trace ticks line up with the kernel's `CLOCK_MONOTONIC` records.

use super::model::{CalibrationRow, ClockInfo, InRunSpeed, ProbeSummary};
use parprof_rt::trace::{self, ClockKind, End, Header, TickConverter};

/// The end sync point if it can be used for the whole-run rate (the condition under which
/// [`TickConverter::new`] uses it).
pub(crate) fn usable_end<'a>(header: &Header, end: Option<&'a End>) -> Option<&'a End> {
    end.filter(|e| {
        e.end.ticks > header.start.ticks && e.end.monotonic_ns > header.start.monotonic_ns
    })
}

pub(crate) fn clock_info(
    header: &Header,
    end: Option<&End>,
    converter: &TickConverter,
) -> ClockInfo {
    let startup_ns_per_tick = 1.0 / header.ticks_per_ns;
    let start = header.start;
    let start_uncertainty_ns = start.uncertainty_ticks as f64 * startup_ns_per_tick;
    let whole_run = usable_end(header, end).map(|e| {
        let run_ticks_per_ns = 1.0 / converter.ns_per_tick();
        let predicted_end_ns =
            start.monotonic_ns as f64 + (e.end.ticks - start.ticks) as f64 * startup_ns_per_tick;
        (
            run_ticks_per_ns,
            e.end.uncertainty_ticks as f64 * converter.ns_per_tick(),
            (run_ticks_per_ns / header.ticks_per_ns - 1.0) * 1e6,
            predicted_end_ns - e.end.monotonic_ns as f64,
        )
    });
    ClockInfo {
        source: match header.clock {
            ClockKind::Tsc => "tsc",
            ClockKind::Monotonic => "monotonic",
        },
        ticks_per_ns_startup: header.ticks_per_ns,
        ticks_per_ns_run: whole_run.map(|w| w.0),
        rate_used: if whole_run.is_some() {
            "whole_run"
        } else {
            "startup_calibration"
        },
        start_sync_uncertainty_ns: start_uncertainty_ns,
        end_sync_uncertainty_ns: whole_run.map(|w| w.1),
        drift_ppm: whole_run.map(|w| w.2),
        drift_over_run_ns: whole_run.map(|w| w.3),
        alignment_error_ns: whole_run
            .map_or(start_uncertainty_ns, |w| w.1.max(start_uncertainty_ns)),
        bare_read_pair_ns: header.bare_read_ticks as f64 * startup_ns_per_tick,
        calibration: header
            .calibration
            .iter()
            .map(|c| CalibrationRow {
                kind: format!("{:?}", c.kind),
                cost_ticks: c.cost_ticks.round() as u32,
                cost_ns: c.cost_ticks * converter.ns_per_tick(),
                cost_spread: c.spread,
                rounds: c.rounds,
            })
            .collect(),
        overhead_spread: None,
        in_run_speed: None,
    }
}

/// The share by which the overhead removed from probes is uncertain: the calibrated costs'
/// spreads, weighted by what each kind removed in this run (timed calls their entry and exit,
/// untimed calls theirs). One figure for all probes: the mix of kinds inside each probe is not
/// kept, and probes with many nested calls, where the figure matters, have mostly one kind.
///
/// A run whose costs followed the machine's speed (in-run references) is uncertain by how
/// well calibration knew the ratio of the cost to the reference (the standard error of that
/// ratio's median over its rounds), and by how well its references knew the cost during the
/// run (the standard error of their median: they vary as the machine's speed does, and each
/// thread follows its last three), not by how much the speed itself varied.
fn overhead_spread(
    calibration: &[CalibrationRow],
    probes: &[ProbeSummary],
    followed: Option<&InRunSpeed>,
) -> Option<f64> {
    let tracking = calibration
        .iter()
        .find(|c| c.kind == "SpeedReference")
        .zip(followed)
        .map(|(c, run)| {
            let tie = trace::median_standard_error(c.cost_spread, usize::from(c.rounds));
            let references = trace::median_standard_error(
                run.spread,
                usize::try_from(run.references).unwrap_or(usize::MAX),
            );
            tie.hypot(references)
        });
    let row = |kind: &str| {
        calibration
            .iter()
            .find(|c| c.kind == kind)
            .map_or((0.0, 0.0), |c| {
                (c.cost_ns, tracking.unwrap_or(c.cost_spread))
            })
    };
    let (untimed_calls, timed_calls) = probes.iter().fold((0, 0), |(u, t), p| {
        (u + p.unrecorded_calls, t + p.calls - p.unrecorded_calls)
    });
    let weighted = |calls: u64, (cost, spread): (f64, f64)| {
        (calls as f64 * cost, calls as f64 * cost * spread)
    };
    let parts = [
        weighted(timed_calls, row("Enter")),
        weighted(timed_calls, row("Exit")),
        weighted(untimed_calls, row("Unrecorded")),
    ];
    let removed: f64 = parts.iter().map(|p| p.0).sum();
    let uncertain: f64 = parts.iter().map(|p| p.1).sum();
    (removed > 0.0).then(|| uncertain / removed)
}

/// The clock's `overhead_spread` for these probes, and each probe's overhead uncertainty.
pub(crate) fn weigh_overhead_uncertainty(clock: &mut ClockInfo, probes: &mut [ProbeSummary]) {
    clock.overhead_spread =
        overhead_spread(&clock.calibration, probes, clock.in_run_speed.as_ref());
    let spread = clock.overhead_spread.unwrap_or(0.0);
    for p in probes {
        p.overhead_uncertainty_ns = (p.overhead_ns as f64 * spread).round() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::model::InRunSpeed;
    use parprof_rt::trace::ClockSync;

    fn header() -> Header {
        Header {
            pid: 1,
            clock: ClockKind::Tsc,
            ticks_per_ns: 2.0,
            start: ClockSync {
                ticks: 1_000,
                monotonic_ns: 10_000,
                uncertainty_ticks: 40,
            },
            bare_read_ticks: 30,
            calibration: Vec::new(),
            program: String::new(),
        }
    }

    #[test]
    fn whole_run_rate_and_drift_from_the_sync_points() {
        let header = header();
        // 2,000,000 ticks in 1,000,100 ns: the start-up rate (2/ns) puts the end 100 ns early.
        let end = End {
            end: ClockSync {
                ticks: 2_001_000,
                monotonic_ns: 1_010_100,
                uncertainty_ticks: 100,
            },
            ..End::default()
        };
        let converter = TickConverter::new(&header, Some(&end.end));
        let info = clock_info(&header, Some(&end), &converter);
        assert_eq!(info.rate_used, "whole_run");
        assert_eq!(info.start_sync_uncertainty_ns, 20.0);
        assert!((info.end_sync_uncertainty_ns.unwrap() - 50.0).abs() < 0.01);
        assert!((info.drift_over_run_ns.unwrap() + 100.0).abs() < 1e-6);
        assert!((info.drift_ppm.unwrap() + 99.99).abs() < 0.01);
        assert!((info.alignment_error_ns - 50.0).abs() < 0.01);
        assert_eq!(info.bare_read_pair_ns, 15.0);
    }

    #[test]
    fn cut_trace_uses_the_startup_rate_and_says_drift_is_unknown() {
        let header = header();
        let converter = TickConverter::new(&header, None);
        let info = clock_info(&header, None, &converter);
        assert_eq!(info.rate_used, "startup_calibration");
        assert_eq!((info.drift_ppm, info.end_sync_uncertainty_ns), (None, None));
        assert_eq!(info.alignment_error_ns, 20.0);
    }

    fn row(kind: &str, cost_ns: f64, cost_spread: f64, rounds: u16) -> CalibrationRow {
        CalibrationRow {
            kind: kind.to_owned(),
            cost_ticks: 0,
            cost_ns,
            cost_spread,
            rounds,
        }
    }

    #[test]
    fn the_overhead_spread_weighs_each_kind_by_what_it_removed() {
        let mut clock = clock_info(&header(), None, &TickConverter::new(&header(), None));
        clock.calibration = vec![
            row("Enter", 10.0, 0.4, 21),
            row("Exit", 10.0, 0.2, 21),
            row("Unrecorded", 5.0, 0.1, 21),
        ];
        // 10 timed calls remove 200 ns (uncertain by 60), 60 untimed ones 300 ns (by 30).
        let mut probes = [ProbeSummary {
            site: 1,
            name: "hot".into(),
            file: String::new(),
            line: 0,
            calls: 70,
            unrecorded_calls: 60,
            elapsed_ns: 0,
            active_ns: 0,
            self_active_ns: 0,
            overhead_ns: 1_000,
            overhead_uncertainty_ns: 0,
            sampling_uncertainty_ns: 0,
            switched_out_ns: 0,
            switched_out_preempted_ns: 0,
            switched_out_voluntary_ns: 0,
            min_active_ns: 0,
            median_active_ns: 0,
            max_active_ns: 0,
            median_method: crate::analysis::MedianMethod::Exact,
        }];
        weigh_overhead_uncertainty(&mut clock, &mut probes);
        let spread = clock.overhead_spread.unwrap();
        assert!((spread - 90.0 / 500.0).abs() < 1e-12, "{spread}");
        assert_eq!(probes[0].overhead_uncertainty_ns, 180);
        // Costs that followed the machine's speed: for all kinds, the standard error of the
        // ratio that ties the cost to the reference (a spread of 0.5 over 101 rounds: 4.6 %).
        clock.calibration.push(row("SpeedReference", 4.0, 0.5, 101));
        let steady_run = InRunSpeed {
            references: 3,
            overhead_scale: 1.0,
            lowest_factor: 1.0,
            highest_factor: 1.0,
            spread: 0.0,
            switched: 0,
            woke_writer: 0,
        };
        clock.in_run_speed = Some(steady_run.clone());
        weigh_overhead_uncertainty(&mut clock, &mut probes);
        let tracking = 1.25 / 1.35 * 0.5 / 101f64.sqrt();
        assert!((clock.overhead_spread.unwrap() - tracking).abs() < 1e-12);
        assert_eq!(probes[0].overhead_uncertainty_ns, 46);
        // The same spread over a quarter of the rounds: twice as uncertain.
        clock.calibration.last_mut().unwrap().rounds = 25;
        weigh_overhead_uncertainty(&mut clock, &mut probes);
        assert_eq!(probes[0].overhead_uncertainty_ns, 93);
        // References that varied by 0.6 (interquartile range over median) over 36 of them: the
        // median of the run's cost is known within 9.3 %, and the two add as independent
        // errors: √(9.26² + 9.26²) = 13.1 %.
        clock.in_run_speed = Some(InRunSpeed {
            references: 36,
            spread: 0.6,
            ..steady_run
        });
        weigh_overhead_uncertainty(&mut clock, &mut probes);
        let references = 1.25 / 1.35 * 0.6 / 6.0;
        let expected = (1.25 / 1.35 * 0.5 / 5.0f64).hypot(references);
        assert!((clock.overhead_spread.unwrap() - expected).abs() < 1e-12);
        assert_eq!(probes[0].overhead_uncertainty_ns, 131);
        weigh_overhead_uncertainty(&mut clock, &mut []);
        assert_eq!(clock.overhead_spread, None);
    }
}
