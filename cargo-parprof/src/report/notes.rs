//! The analysis's notes in words: the one place each is worded, for every view.

use crate::analysis::{
    CounterNote, JobDetailSampling, LifecycleNote, LossNote, MissingNote, Note, ResolutionNote,
    RunNote, TraceNote,
};
use crate::units::{code_list, human_duration};

/// What `note` says, as one or more sentences for the user.
pub fn describe(note: &Note) -> String {
    match note {
        Note::Trace(n) => trace(n),
        Note::Missing(n) => missing(n),
        Note::Loss(n) => loss(n),
        Note::Resolution(n) => resolution(n),
        Note::Lifecycle(n) => lifecycle(n),
        Note::Counters(n) => counters(n),
        Note::Run(n) => run(n),
    }
}

fn trace(note: &TraceNote) -> String {
    match note {
        TraceNote::Absent { folder } => format!(
            "The program recorded no probes (no trace in {}): only kernel figures and the CPU flamegraph are available.",
            folder.display()
        ),
        TraceNote::OnlyOther {
            expected_pid,
            analysed,
        } => format!(
            "trace-{expected_pid}.ppt is absent; analysed the only trace, {}",
            analysed.display()
        ),
        TraceNote::LargestOfSeveral {
            folder,
            traces,
            expected_pid,
            analysed,
        } => format!(
            "{} holds {traces} traces and not {}; analysed the largest, {}",
            folder.display(),
            expected_pid.map_or_else(|| "a trace".to_owned(), |pid| format!("trace-{pid}.ppt")),
            analysed.display()
        ),
        TraceNote::Empty { path } => format!(
            "The trace {} is empty: the program stopped before recording anything.",
            path.display()
        ),
        TraceNote::OfAnotherProcess {
            path,
            written_by,
            run_pid,
        } => format!(
            "{} was written by process {written_by}, not by the run's program (process {run_pid}): \
             it belongs to another run and was not analysed.",
            path.display()
        ),
        TraceNote::Cut { after_byte } => format!(
            "The trace stops at byte {after_byte} without its end (the program was killed or crashed): \
             calls still open then are not counted, and ticks were converted with the start-up clock calibration."
        ),
        TraceNote::Corrupt { error } => {
            format!("The trace is corrupt ({error}); everything before that point was analysed.")
        }
        TraceNote::BenchPhasesUnread { path, error } => format!(
            "criterion's iteration counts could not be read from {}: {error}; the profile covers \
             the whole run, warm-up included.",
            path.display()
        ),
    }
}

fn missing(note: &MissingNote) -> String {
    let reason = |r: &Option<String>| r.clone().unwrap_or_else(|| "no reason given".to_owned());
    match note {
        MissingNote::ContextSwitches { reason: r } => format!(
            "Times are not corrected for context switches ({}): active time includes switched-out time, \
             and on-CPU time per thread is unknown.",
            reason(r)
        ),
        MissingNote::CpuSamples { reason: r } => format!(
            "No CPU flamegraph: cpu-clock samples were not recorded ({}).",
            reason(r)
        ),
        MissingNote::StackCopies { reason: r } => format!(
            "CPU flamegraph: call chains from frame pointers only, no stack copies ({}); callers of code built \
             without frame pointers (the standard library, libc) may be missing.",
            reason(r)
        ),
        MissingNote::SwitchStacks { reason: r } => format!("{}.", capitalised(&reason(r))),
        MissingNote::HardwareCounters { reason: r } => {
            format!("Hardware counters were not used ({}).", reason(r))
        }
        MissingNote::Utilization { reason } => format!(
            "No utilization over time: it needs context-switch records ({}).",
            reason.as_deref().unwrap_or("not collected")
        ),
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn loss(note: &LossNote) -> String {
    match note {
        LossNote::TraceEvents { events, threads } => format!(
            "{events} trace events were lost on {threads} thread(s) (the runtime's buffers were full): probe figures there may \
             miss calls."
        ),
        LossNote::BufferStalls { count, total_ns } => format!(
            "The program waited {count} times, {:.3} ms in all, for the trace writer to make room; probe times exclude \
             the waits, but the program ran slower.",
            *total_ns as f64 / 1e6
        ),
        LossNote::KernelRecords { records } => format!(
            "{records} kernel records were lost (perf buffers were full): switched-out time may be under-counted."
        ),
        LossNote::StealTime { steal_ns } => format!(
            "The hypervisor ran other guests on this machine's CPUs for {:.1} ms during the run (steal time, \
             all CPUs together): no context switch shows it, so active times may include up to that much.",
            *steal_ns as f64 / 1e6
        ),
        LossNote::MalformedKernelRecords { records } => format!(
            "{records} kernel records could not be decoded and were skipped: switched-out time may be under-counted."
        ),
        LossNote::RecordsCut { after_byte } => format!(
            "The run's records ({}) were cut after byte {after_byte}: kernel records and counters \
             after that point are missing, so times may not be corrected for every context switch.",
            crate::recording::RECORDS_FILE
        ),
    }
}

fn resolution(note: &ResolutionNote) -> String {
    match note {
        ResolutionNote::UnnestedProbeEvents {
            exit_without_entry,
            entry_without_exit,
            open_at_end,
            time_went_backwards,
        } => format!(
            "Probe events that did not nest were left out: {exit_without_entry} exits without entry, \
             {entry_without_exit} entries without exit, {open_at_end} calls open at the end, \
             {time_went_backwards} events out of time order."
        ),
        ResolutionNote::Uncalibrated { kinds } => format!(
            "No overhead calibration for {} events: their cost was not removed.",
            kinds.join(", ")
        ),
        ResolutionNote::TimelineSpansLeftOut {
            max_spans,
            probe_spans,
            switched_out_spans,
        } => format!(
            "The timeline keeps the {max_spans} longest spans: {probe_spans} shorter probe spans and \
             {switched_out_spans} shorter switched-out spans were left out."
        ),
        ResolutionNote::LifecycleSpansLeftOut { kept, left_out } => format!(
            "The timeline keeps the {kept} longest rayon worker-state spans and region runs: {left_out} shorter ones were left out."
        ),
        ResolutionNote::UnsymbolisedSamples { samples } => format!(
            "{samples} cpu samples could not be symbolised: the CPU flamegraph shows their addresses."
        ),
        ResolutionNote::UtilizationPeriodWidened {
            period_ns,
            asked_ns,
            max_periods,
        } => format!(
            "Utilization over time uses periods of {:.3} ms instead of {:.3} ms: the run is longer than {max_periods} periods.",
            *period_ns as f64 / 1e6,
            *asked_ns as f64 / 1e6
        ),
    }
}

fn lifecycle(note: &LifecycleNote) -> String {
    match note {
        LifecycleNote::SearchRoundsEstimated => {
            "Without context-switch records, the failed search rounds (GS->GS) of rayon workers are estimated \
             (GS time ÷ 1 µs per round) and sleeping (W) cannot be told from searching (GS)."
                .to_owned()
        }
        LifecycleNote::JobDetailSampled(sampling) => job_detail_sampled(sampling),
        LifecycleNote::HiddenWait {
            region,
            preempted_searching_ns,
            worker_ns,
        } => format!(
            "Region `{region}`: searching workers were switched out while runnable for {:.1} ms ({:.0}% of worker \
             time): on a machine busy with other programs, rayon's idle workers yield instead of sleeping. \
             That time counts as search (GS), not wait (W), so insufficient parallel slack and load imbalance \
             could not be looked for; profile it on an otherwise idle machine to tell.",
            *preempted_searching_ns as f64 / 1e6,
            100.0 * *preempted_searching_ns as f64 / worker_ns
        ),
        LifecycleNote::OutsideRegions {
            busy_ns,
            samples,
            workers,
        } => format!(
            "Rayon workers ran the program's code for about {} ({samples} cpu-clock samples on {workers} \
             worker{}) while no parallel region was open: that work is in no region's figures \
             or diagnoses (a rayon-core that could not be hooked, or jobs of a region that \
             outlived it).",
            human_duration(*busy_ns),
            if *workers == 1 { "" } else { "s" },
        ),
        LifecycleNote::HooksUnavailable { reason } => format!(
            "rayon's worker lifecycle was not recorded (no tasks, states or diagnoses from hooks): {reason}."
        ),
    }
}

fn job_detail_sampled(s: &JobDetailSampling) -> String {
    let marks = s
        .fewest_marks
        .as_ref()
        .map(|m| {
            format!(
                " ({} marks in region `{}`: a state's share of its worker time is known to about \
                 ±{:.1} points)",
                m.marks,
                m.region,
                100.0 * m.share_uncertainty
            )
        })
        .unwrap_or_default();
    format!(
        "Rayon's per-job detail was sampled: {} of {} tasks ran while their worker's \
         per-job events were paused (a worker writes at most {} of them every {} ms, so that \
         profiling costs follow run time, not the job rate). The program counted those tasks \
         itself, exactly; their state times by a clock marked every {} µs on average{marks} and \
         by one stretch in about {} timed exactly, which also gives their durations. The \
         timeline, the profile's \
         markers and the active flamegraph's task frames show the detail windows only; the \
         counters of the region's tasks are the region's × the workers' user-code share (a \
         task's own counters are known only in the windows).",
        s.counted,
        s.tasks,
        s.window_events,
        s.window_ns / 1_000_000,
        s.mark_every.as_micros(),
        s.timed_every,
    )
}

fn counters(note: &CounterNote) -> String {
    match note {
        CounterNote::NotMeasured { names, reason } => {
            format!("Not measured: {} ({reason}).", code_list(names))
        }
        CounterNote::Multiplexed {
            name,
            running_ns,
            enabled_ns,
        } => format!(
            "Counter `{name}` was multiplexed: it counted {:.1}% of the time and its values were scaled up.",
            100.0 * *running_ns as f64 / (*enabled_ns).max(1) as f64
        ),
        CounterNote::SpillFailed { error } => format!(
            "Counter attribution could not spill spans to a temporary file ({error}): they were kept in memory."
        ),
        CounterNote::ReadBackFailed { error } => format!(
            "Counter attribution could not read back spilled spans ({error}): the figures miss the spans after that point."
        ),
        CounterNote::SpansWithoutStart { spans } => format!(
            "{spans} probe calls, tasks or region runs without a recorded start (their begin events were lost) were \
             left out of the counter attribution."
        ),
    }
}

fn run(note: &RunNote) -> String {
    match note {
        RunNote::SliceResultsMissing { path, error } => format!(
            "Exact per-call counters were asked for, but {} cannot be read ({error}): the program \
             did not start parprof's runtime (no probe, or not linked), or ended before its \
             exit handlers ran.",
            path.display()
        ),
        RunNote::SliceResultsUnreadable { path, error } => format!(
            "The exact per-call counters in {} could not be read: {error}.",
            path.display()
        ),
        RunNote::DivanAsOneProgram => {
            "divan bench profiled as one program: per-benchmark profiling supports criterion benches only."
                .to_owned()
        }
        RunNote::Interrupted => {
            "The run was interrupted (Ctrl-C): the figures cover the part that ran.".to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::RegionMarks;
    use std::path::PathBuf;
    use std::time::Duration;

    #[test]
    fn a_trace_note_names_the_files_and_the_process() {
        let note = Note::Trace(TraceNote::LargestOfSeveral {
            folder: PathBuf::from("/runs/a"),
            traces: 3,
            expected_pid: Some(42),
            analysed: PathBuf::from("/runs/a/trace-7.ppt"),
        });
        assert_eq!(
            describe(&note),
            "/runs/a holds 3 traces and not trace-42.ppt; analysed the largest, /runs/a/trace-7.ppt"
        );
        let unnamed = Note::Trace(TraceNote::LargestOfSeveral {
            folder: PathBuf::from("t"),
            traces: 2,
            expected_pid: None,
            analysed: PathBuf::from("t/trace.ppt"),
        });
        assert!(describe(&unnamed).contains("not a trace;"));
    }

    #[test]
    fn a_missing_record_says_the_kernels_reason_or_that_none_was_given() {
        let refused = Note::Missing(MissingNote::SwitchStacks {
            reason: Some("off-CPU flamegraph not drawn: paranoid 2".to_owned()),
        });
        assert_eq!(
            describe(&refused),
            "Off-CPU flamegraph not drawn: paranoid 2."
        );
        let unknown = Note::Missing(MissingNote::HardwareCounters { reason: None });
        assert_eq!(
            describe(&unknown),
            "Hardware counters were not used (no reason given)."
        );
        let utilization = Note::Missing(MissingNote::Utilization { reason: None });
        assert!(describe(&utilization).ends_with("(not collected)."));
    }

    #[test]
    fn losses_give_their_figures_in_the_units_read() {
        let stalls = Note::Loss(LossNote::BufferStalls {
            count: 3,
            total_ns: 1_234_567,
        });
        assert!(
            describe(&stalls).starts_with("The program waited 3 times, 1.235 ms in all,"),
            "{}",
            describe(&stalls)
        );
        let steal = Note::Loss(LossNote::StealTime {
            steal_ns: 12_500_000,
        });
        assert!(describe(&steal).contains("CPUs for 12.5 ms during the run"));
        let cut = Note::Loss(LossNote::RecordsCut { after_byte: 4096 });
        assert!(
            describe(&cut).starts_with("The run's records (records.ppr) were cut after byte 4096:")
        );
    }

    #[test]
    fn a_hidden_wait_gives_its_time_and_share_of_worker_time() {
        let note = Note::Lifecycle(LifecycleNote::HiddenWait {
            region: "sort".to_owned(),
            preempted_searching_ns: 500_000_000,
            worker_ns: 4e9,
        });
        assert!(
            describe(&note).starts_with(
                "Region `sort`: searching workers were switched out while runnable for 500.0 ms \
                 (12% of worker time):"
            ),
            "{}",
            describe(&note)
        );
    }

    #[test]
    fn sampled_job_detail_gives_the_windows_and_the_fewest_marks() {
        let sampling = JobDetailSampling {
            counted: 900,
            tasks: 1000,
            window_events: 512,
            window_ns: 10_000_000,
            mark_every: Duration::from_micros(250),
            timed_every: 256,
            fewest_marks: Some(RegionMarks {
                region: "r".to_owned(),
                marks: 40,
                share_uncertainty: 0.0321,
            }),
        };
        let text = describe(&Note::Lifecycle(LifecycleNote::JobDetailSampled(
            sampling.clone(),
        )));
        assert!(
            text.starts_with(
                "Rayon's per-job detail was sampled: 900 of 1000 tasks ran while their worker's \
                 per-job events were paused (a worker writes at most 512 of them every 10 ms,"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "marked every 250 µs on average (40 marks in region `r`: a state's share of its \
                 worker time is known to about ±3.2 points) and by one stretch in about 256 timed"
            ),
            "{text}"
        );
        let unmarked = JobDetailSampling {
            fewest_marks: None,
            ..sampling
        };
        let text = describe(&Note::Lifecycle(LifecycleNote::JobDetailSampled(unmarked)));
        assert!(
            text.contains("every 250 µs on average and by one"),
            "{text}"
        );
    }

    #[test]
    fn counter_notes_name_the_counters() {
        let refused = Note::Counters(CounterNote::NotMeasured {
            names: vec!["cycles".to_owned(), "instructions".to_owned()],
            reason: "no PMU".to_owned(),
        });
        assert_eq!(
            describe(&refused),
            "Not measured: `cycles`, `instructions` (no PMU)."
        );
        let multiplexed = Note::Counters(CounterNote::Multiplexed {
            name: "cycles".to_owned(),
            running_ns: 1,
            enabled_ns: 3,
        });
        assert!(describe(&multiplexed).contains("`cycles` was multiplexed: it counted 33.3% of"));
    }

    #[test]
    fn workers_outside_regions_are_counted_in_the_singular_or_plural() {
        let one = Note::Lifecycle(LifecycleNote::OutsideRegions {
            busy_ns: 2_000_000,
            samples: 2,
            workers: 1,
        });
        assert!(
            describe(&one).contains("about 2.00 ms (2 cpu-clock samples on 1 worker)"),
            "{}",
            describe(&one)
        );
        let two = Note::Lifecycle(LifecycleNote::OutsideRegions {
            busy_ns: 2_000_000,
            samples: 2,
            workers: 2,
        });
        assert!(describe(&two).contains("on 2 workers)"));
    }
}
