//! What several views say alike: the notes, the run's exit and trace, the correction in a
//! sentence.

use crate::analysis::slices::{SliceMode, SlicesAnalysis};
use crate::analysis::{Analysis, BenchMeasurement, InRunSpeed, ProbeSummary, TraceCompleteness};
use crate::recording::ExitStatus;
pub(crate) use crate::units::{human_count, human_duration, relative_error};

/// Probes listed in the terminal summary and `report.md` (by self active time).
pub(crate) const TOP_PROBES: usize = 10;

/// The notes every view shows: the analysis's, then those the views word from its figures.
pub fn notes(analysis: &Analysis) -> Vec<String> {
    let mut notes: Vec<String> = analysis.notes.iter().map(super::notes::describe).collect();
    notes.extend(sampled_probes_note(analysis));
    notes.extend(short_calls_note(analysis));
    notes.extend(speed_followed_note(analysis));
    notes.extend(unsteady_calibration_note(analysis));
    notes.extend(slices_in_counters_note(analysis));
    let probe_names = analysis.probes.iter().map(|p| p.name.as_str()).collect();
    notes.extend(super::callers_note::children_beyond_callers_note(
        &analysis.call_paths,
        &probe_names,
    ));
    notes
}

/// A kernel without `inherit_thread` counts a forked process with the program whose counters
/// it inherits, so the program-wide counters of method 3 include the slices' own work.
fn slices_in_counters_note(analysis: &Analysis) -> Option<String> {
    let s = analysis
        .slices
        .as_ref()
        .filter(|s| s.counted_with_program)?;
    analysis
        .counters
        .as_ref()
        .filter(|c| !c.collected.is_empty())?;
    (s.cpu_ns > 0).then(|| {
        format!(
            "The program-wide counters (method 3) also counted the slices' own work ({} of CPU time, \
             with its page faults): the attributed values of probes that ran while slices did are too \
             high by up to that much. A run without --slices gives method 3's figures alone.",
            human_duration(s.cpu_ns)
        )
    })
}

/// Which probes the runtime sampled, once for all of them.
fn sampled_probes_note(analysis: &Analysis) -> Option<String> {
    sampled_probes_sentence(&analysis.probes)
}

fn sampled_probes_sentence(probes: &[ProbeSummary]) -> Option<String> {
    let sampled: Vec<String> = probes
        .iter()
        .filter(|p| p.unrecorded_calls > 0)
        .map(|p| {
            let untimed = format!(
                "{} of {} calls untimed",
                human_count(p.unrecorded_calls as f64),
                human_count(p.calls as f64)
            );
            if p.sampling_uncertainty_ns == 0 {
                format!("{} ({untimed})", p.name)
            } else {
                format!(
                    "{} ({untimed}; ±{} of {} active)",
                    p.name,
                    human_duration(p.sampling_uncertainty_ns),
                    human_duration(p.active_ns)
                )
            }
        })
        .collect();
    (!sampled.is_empty()).then(|| {
        format!(
            "Hot probes were sampled to keep their cost bounded (calls close together on a thread: a sample \
             of them timed, every call counted; `PARPROF_SAMPLING=off` times them all): {}. Their times add the \
             untimed calls as copies of the ones timed as a sample on the same call path, uncertain by the \
             ± given (two standard errors of the sample; a recursion entered less often than every 2 µs has \
             every outermost call timed: its inclusive time is exact), and their per-call figures are of \
             timed calls.",
            sampled.join(", ")
        )
    })
}

/// Probes whose median call is shorter than a probe's entry event costs, once for all of them.
fn short_calls_note(analysis: &Analysis) -> Option<String> {
    let enter = analysis
        .clock
        .as_ref()?
        .calibration
        .iter()
        .find(|c| c.kind == "Enter")?;
    short_calls_sentence(&analysis.probes, enter.cost_ns)
}

/// A timed call's own entry cost is removed from it whole, as calibrated; the part of it that
/// overlapped the function's work in place is removed too, so a call about that short reads
/// shorter than it was, down to 0. The enclosing calls lose the whole cost either way.
fn short_calls_sentence(probes: &[ProbeSummary], enter_ns: f64) -> Option<String> {
    let short: Vec<String> = probes
        .iter()
        .filter(|p| p.calls > p.unrecorded_calls && (p.median_active_ns as f64) < enter_ns)
        .map(|p| {
            format!(
                "{} (median call {})",
                p.name,
                human_duration(p.median_active_ns)
            )
        })
        .collect();
    (!short.is_empty()).then(|| {
        format!(
            "Calls shorter than a probe's entry ({} here) are timed to about that much: the per-call \
             figures of {} are at the correction's resolution and can read short, down to 0 ns. The times \
             of the calls around them are corrected all the same.",
            human_duration(enter_ns.round() as u64),
            short.join(", ")
        )
    })
}

/// A probe is named as uncertain when the overhead removed from it could be off by this share
/// of its active time.
const UNCERTAIN_SHARE: f64 = 0.05;

/// Probes whose removed overhead is uncertain by a noticeable share of their active time,
/// because the machine's speed varied while the probes' cost was calibrated.
fn unsteady_calibration_note(analysis: &Analysis) -> Option<String> {
    let clock = analysis.clock.as_ref()?;
    let followed = clock.in_run_speed.is_some();
    unsteady_calibration_sentence(&analysis.probes, clock.overhead_spread?, followed)
}

/// Following the machine's speed changed the overhead removed by at least this share.
const SPEED_CHANGE_SAID: f64 = 0.15;

/// The probes' cost measured during the run differed from the start-up calibration.
fn speed_followed_note(analysis: &Analysis) -> Option<String> {
    speed_followed_sentence(analysis.clock.as_ref()?.in_run_speed.as_ref()?)
}

fn speed_followed_sentence(speed: &InRunSpeed) -> Option<String> {
    ((speed.overhead_scale - 1.0).abs() >= SPEED_CHANGE_SAID).then(|| {
        format!(
            "The machine ran at another speed than when the probes' cost was calibrated at \
             start-up: {} references taken during the run put that cost at {:.2}× the \
             calibrated one overall ({:.2}× to {:.2}× on a thread), and the overhead removed \
             followed them.",
            speed.references, speed.overhead_scale, speed.lowest_factor, speed.highest_factor
        )
    })
}

fn unsteady_calibration_sentence(
    probes: &[ProbeSummary],
    spread: f64,
    followed: bool,
) -> Option<String> {
    let mut uncertain: Vec<&ProbeSummary> = probes
        .iter()
        .filter(|p| {
            let ns = p.overhead_uncertainty_ns as f64;
            ns > 0.0 && ns >= UNCERTAIN_SHARE * p.active_ns as f64
        })
        .collect();
    uncertain.sort_by_key(|p| std::cmp::Reverse(p.overhead_uncertainty_ns));
    let named: Vec<String> = uncertain
        .iter()
        .take(TOP_PROBES)
        .map(|p| {
            format!(
                "{} (±{} of {} active)",
                p.name,
                human_duration(p.overhead_uncertainty_ns),
                human_duration(p.active_ns)
            )
        })
        .collect();
    (!named.is_empty()).then(|| {
        let cause = if followed {
            format!(
                "Calibration tied the probes' cost to the references that followed the machine's \
                 speed during the run only to within {:.0}% (its standard error), as when a \
                 VM's host takes the CPU away at times",
                spread * 100.0
            )
        } else {
            format!(
                "The probes' own cost varied by {:.0}% (interquartile range) while it was \
                 calibrated at start-up, as when a VM's host takes the CPU away at times",
                spread * 100.0
            )
        };
        format!(
            "{cause}: the overhead removed from {} is uncertain by as much. A run on a steadier \
             machine, or of the same code without the inner probes, gives firmer figures.",
            named.join(", ")
        )
    })
}

/// What the slices covered and how they ended, and how to read their table.
pub(crate) fn slices_sentence(s: &SlicesAnalysis) -> String {
    let coverage = s.coverage.map_or(String::new(), |c| {
        format!(" — {:.1}% of the program's CPU time", c * 100.0)
    });
    let mut text = if s.mode == SliceMode::Full {
        format!(
            "Every probe call was measured in the program itself (counters read at each probe event, {} of CPU time{coverage}).",
            human_duration(s.cpu_ns)
        )
    } else {
        let e = &s.ended_early;
        let mut ended: Vec<String> = [
            (e.blocked, "blocked"),
            (e.timeout, "out of wall time"),
            (e.shared_write, "at a write to memory the program shares"),
            (e.killed, "killed"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, why)| format!("{n} {why}"))
        .collect();
        if e.forbidden_syscall > 0 {
            let names: Vec<String> = s
                .forbidden_syscalls
                .iter()
                .map(|f| format!("{} ×{}", f.name, f.slices))
                .collect();
            ended.push(format!(
                "{} at a system call with effects outside the slice ({})",
                e.forbidden_syscall,
                names.join(", ")
            ));
        }
        let ended = if ended.is_empty() {
            String::new()
        } else {
            format!(", ended early: {}", ended.join(", "))
        };
        format!(
            "{} slices of up to {} of CPU time ran {} in all{coverage}{ended}; forking them and \
             deciding when cost the program {} ({} checkpoints, removed from probe times).",
            s.taken,
            human_duration(s.config.slice_length_ns),
            human_duration(s.cpu_ns),
            human_duration(s.checkpoints.cost_ns),
            s.checkpoints.armed,
        )
    };
    text.push_str(if s.probes.is_empty() {
        " No probe call ran whole inside a slice (slices measure probed functions: add `#[probe]` \
         to the functions to measure, or lengthen the slices with --slice-length)."
    } else {
        " Per call: the mean ± the standard deviation over the calls measured whole; \
         attributed: method 3's estimate per call ± its error bound."
    });
    for u in &s.unavailable {
        text.push_str(&format!(
            " {}: not measured in the slices, {}.",
            u.counter, u.reason
        ));
    }
    text
}

/// How much of `elapsed` the correction removed, as "−12.3%" (empty when nothing elapsed).
pub(crate) fn correction_percent(elapsed_ns: u64, active_ns: u64) -> String {
    if elapsed_ns == 0 {
        return String::new();
    }
    let removed = elapsed_ns.saturating_sub(active_ns) as f64 / elapsed_ns as f64 * 100.0;
    format!("−{removed:.1}%")
}

pub(crate) fn exit_text(exit: &ExitStatus) -> String {
    match (exit.code, exit.signal) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "exit status unknown".to_owned(),
    }
}

pub(crate) fn completeness_text(completeness: &TraceCompleteness) -> &'static str {
    match completeness {
        TraceCompleteness::Complete => "trace complete",
        TraceCompleteness::Cut { .. } => "trace cut",
        TraceCompleteness::Corrupt { .. } => "trace corrupt",
        TraceCompleteness::Absent => "no trace",
    }
}

/// The overall correction over the outermost probe calls, in one sentence (`None` without
/// probe calls).
pub(crate) fn correction_sentence(analysis: &Analysis) -> Option<String> {
    let t = &analysis.outermost_calls;
    (t.calls > 0).then(|| {
        let share = |ns: u64| {
            if t.elapsed_ns == 0 {
                0.0
            } else {
                ns as f64 / t.elapsed_ns as f64 * 100.0
            }
        };
        format!(
            "elapsed {} → active {} ({}) over the outermost probe calls; removed: overhead {:.1}%, \
             preempted {:.1}%, blocked {:.1}% of elapsed",
            human_duration(t.elapsed_ns),
            human_duration(t.active_ns),
            correction_percent(t.elapsed_ns, t.active_ns),
            share(t.overhead_ns),
            share(t.switched_out_preempted_ns),
            share(t.switched_out_voluntary_ns),
        )
    })
}

/// What a criterion benchmark's run measured, as criterion counted it, and what of the profile
/// is kept to its measured batch (`None`: not a hooked criterion benchmark).
pub fn bench_measured(analysis: &Analysis) -> Option<String> {
    analysis.bench.as_ref().map(bench_text)
}

fn bench_text(b: &BenchMeasurement) -> String {
    let phase = |iterations: Option<u64>, ns: Option<u64>| match (iterations, ns) {
        (Some(n), Some(ns)) => format!("{n} iterations in {}", human_duration(ns)),
        (Some(n), None) => format!("{n} iterations"),
        _ => "iterations not recorded".to_owned(),
    };
    let warm_up = phase(b.warm_up_iterations, b.warm_up_ns);
    let Some(measured) = b.measured_iterations else {
        return format!(
            "criterion's warm-up only, {warm_up} (criterion's count): the warm-up filled \
             `--profile-time` and no measured batch ran, so the profile covers the whole run."
        );
    };
    let mut text = format!(
        "criterion's measured batch, {} (criterion's count); criterion's warm-up before it, \
         {warm_up}, is left out of the probes and the CPU samples: {} CPU samples and {} probe \
         calls from outside the batch (warm-up, start-up, exit) were dropped.",
        phase(Some(measured), b.measured_ns),
        b.samples_dropped,
        b.probe_calls_dropped
    );
    if !b.whole_run_views.is_empty() {
        text.push_str(&format!(
            " Still over the whole run, warm-up included: {}.",
            b.whole_run_views.join(", ")
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_benchmark_says_what_criterion_counted_and_what_was_dropped() {
        let mut b = BenchMeasurement {
            warm_up_iterations: Some(1023),
            warm_up_ns: Some(1_040_000_000),
            measured_iterations: Some(1930),
            measured_ns: Some(2_140_000_000),
            measured_begin_ns: Some(1_500_000_000),
            measured_end_ns: Some(3_640_000_000),
            samples_dropped: 878,
            probe_calls_dropped: 1023,
            whole_run_views: vec!["the timeline".into(), "threads".into()],
        };
        let text = bench_text(&b);
        for part in [
            "criterion's measured batch, 1930 iterations in 2.14 s (criterion's count)",
            "warm-up before it, 1023 iterations in 1.04 s",
            "878 CPU samples and 1023 probe calls",
            "Still over the whole run, warm-up included: the timeline, threads.",
        ] {
            assert!(text.contains(part), "`{part}` not in: {text}");
        }
        b.measured_iterations = None;
        b.measured_ns = None;
        let text = bench_text(&b);
        assert!(
            text.starts_with("criterion's warm-up only, 1023 iterations"),
            "{text}"
        );
        assert!(text.contains("no measured batch ran"), "{text}");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(human_duration(0), "0 ns");
        assert_eq!(human_duration(999), "999 ns");
        assert_eq!(human_duration(1_234), "1.23 µs");
        assert_eq!(human_duration(45_600_000), "45.6 ms");
        assert_eq!(human_duration(123_000_000_000), "123 s");
        assert_eq!(correction_percent(1000, 877), "−12.3%");
        assert_eq!(correction_percent(0, 0), "");
    }

    fn probe(name: &str, calls: u64, unrecorded_calls: u64, median_active_ns: u64) -> ProbeSummary {
        ProbeSummary {
            site: 0,
            name: name.to_owned(),
            file: String::new(),
            line: 0,
            calls,
            unrecorded_calls,
            elapsed_ns: 0,
            active_ns: 0,
            self_active_ns: 0,
            overhead_ns: 0,
            overhead_uncertainty_ns: 0,
            sampling_uncertainty_ns: 0,
            switched_out_ns: 0,
            switched_out_preempted_ns: 0,
            switched_out_voluntary_ns: 0,
            min_active_ns: 0,
            median_active_ns,
            max_active_ns: 0,
            median_method: crate::analysis::MedianMethod::Exact,
        }
    }

    #[test]
    fn sampled_probes_are_named_once_with_their_sampling_uncertainty() {
        let probes = [
            ProbeSummary {
                active_ns: 40_000_000,
                sampling_uncertainty_ns: 1_500_000,
                ..probe("kernel", 300_000, 295_000, 0)
            },
            // A recursion whose outermost calls were all timed: nothing estimated.
            probe("quicksort", 282_000, 265_000, 0),
            probe("cold_caller", 3, 0, 19_000),
        ];
        let note = sampled_probes_sentence(&probes).expect("a note");
        assert!(
            note.contains(
                "kernel (295k of 300k calls untimed; ±1.50 ms of 40.0 ms active), quicksort (265k of \
                 282k calls untimed)."
            ),
            "{note}"
        );
        assert!(!note.contains("cold_caller"), "{note}");
        assert_eq!(sampled_probes_sentence(&probes[2..]), None);
    }

    #[test]
    fn calls_shorter_than_a_probe_entry_are_named_once() {
        let probes = [
            probe("kernel", 300, 280, 0),
            probe("leaf", 10, 0, 6),
            probe("outer", 3, 0, 19_000),
            // Every call untimed: no per-call figure to doubt.
            probe("never_timed", 50, 50, 0),
        ];
        let note = short_calls_sentence(&probes, 7.1).expect("a note");
        assert!(
            note.contains("kernel (median call 0 ns), leaf (median call 6 ns) are"),
            "{note}"
        );
        assert!(note.contains("(7 ns here)"), "{note}");
        assert!(
            !note.contains("outer") && !note.contains("never_timed"),
            "{note}"
        );
        assert_eq!(short_calls_sentence(&probes[2..], 7.1), None);
    }

    #[test]
    fn probes_whose_removed_overhead_is_uncertain_are_named_largest_first() {
        // Probes as the analysis gives them for a calibration `spread`.
        let probes_at = |spread: f64| {
            let with = |name, active_ns, overhead_ns: u64| ProbeSummary {
                active_ns,
                overhead_ns,
                overhead_uncertainty_ns: (overhead_ns as f64 * spread) as u64,
                ..probe(name, 1, 0, 0)
            };
            [
                // 20 ms removed at 20 %: ±4 ms of 30 ms active.
                with("parent", 30_000_000, 20_000_000),
                // ±0.2 ms of 10 ms: under 5 %.
                with("light", 10_000_000, 1_000_000),
                with("big", 100_000_000, 40_000_000),
            ]
        };
        let note = unsteady_calibration_sentence(&probes_at(0.2), 0.2, false).expect("a note");
        assert!(note.contains("varied by 20%"), "{note}");
        assert!(
            note.contains(
                "big (±8.00 ms of 100 ms active), parent (±4.00 ms of 30.0 ms active) is"
            ),
            "{note}"
        );
        assert!(!note.contains("light"), "{note}");
        // A steady machine: nothing to say.
        assert_eq!(
            unsteady_calibration_sentence(&probes_at(0.01), 0.01, false),
            None
        );
        // Costs that followed the machine's speed are uncertain by how well they tracked it.
        let followed = unsteady_calibration_sentence(&probes_at(0.2), 0.2, true).expect("a note");
        assert!(
            followed.contains("only to within 20% (its standard error)"),
            "{followed}"
        );
    }

    #[test]
    fn a_run_at_another_speed_than_calibration_is_said_once() {
        let speed = |overhead_scale| InRunSpeed {
            references: 57,
            overhead_scale,
            lowest_factor: 0.5,
            highest_factor: 1.25,
            spread: 0.1,
            switched: 0,
            woke_writer: 0,
        };
        let note = speed_followed_sentence(&speed(0.61)).expect("a note");
        assert!(
            note.contains(
                "57 references taken during the run put that cost at 0.61× the calibrated one \
                 overall (0.50× to 1.25× on a thread)"
            ),
            "{note}"
        );
        // Within 15 % of the calibration: nothing to say.
        assert_eq!(speed_followed_sentence(&speed(1.1)), None);
    }
}
