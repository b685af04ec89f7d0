//! The analysis and the reports on a synthetic trace and synthetic kernel records, with exact
//! figures: the clock is CLOCK_MONOTONIC (one tick = one ns) and the sync points line up, so
//! ticks and kernel nanoseconds are the same numbers.

use cargo_parprof::analysis::diagnosis::Code;
use cargo_parprof::analysis::{
    Analysis, AnalysisOptions, Anomalies, MedianMethod, Note, ProbeSummary, SpanKind,
    TraceCompleteness, TraceNote, WorkerState,
};
use cargo_parprof::pipeline::trace_file::{self, TraceOpenError};
use cargo_parprof::recording::Thresholds;
use cargo_parprof::recording::kernel_records::{
    Capabilities, Capability, CpuSample, Frame, KernelRecords, StackId, StackInterner, SwitchKind,
    SwitchRecord,
};
use cargo_parprof::report;
use parprof_rt::trace::{
    Calibration, Chunk, ChunkEncoder, ClockKind, ClockSync, End, Event, EventKind, Header,
    NO_WORKER, SiteKind, SiteRecord, TaskOrigin, ThreadRecord,
};
use std::path::Path;
use std::sync::Arc;

const MAIN: u32 = 100;
const WORKER: u32 = 101;
const F: u32 = 1;
const G: u32 = 2;

fn site(id: u32, name: &str) -> Chunk {
    Chunk::Site(SiteRecord {
        id,
        kind: SiteKind::Probe,
        name: name.into(),
        file: "src/app.rs".into(),
        line: id,
        caller: String::new(),
        entry: None,
    })
}

/// The trace's chunks, End excluded. The main thread runs the spec's worked example shifted by
/// 10,000 ns: F 10,900 → 11,550 with G 11,200 → 11,500 nested. The worker runs G alone,
/// 20,000 → 20,500, and lost 4 events.
fn chunks() -> Vec<Chunk> {
    vec![
        Chunk::Header(Header {
            pid: MAIN,
            clock: ClockKind::Monotonic,
            ticks_per_ns: 1.0,
            start: ClockSync {
                ticks: 1_000,
                monotonic_ns: 1_000,
                uncertainty_ticks: 10,
            },
            bare_read_ticks: 20,
            calibration: vec![
                Calibration {
                    kind: EventKind::Enter,
                    cost_ticks: 3.0,
                    spread: 0.0,
                    rounds: 21,
                },
                Calibration {
                    kind: EventKind::Exit,
                    cost_ticks: 2.0,
                    spread: 0.0,
                    rounds: 21,
                },
            ],
            program: "target/release/app".into(),
        }),
        site(F, "app::f"),
        site(G, "app::g"),
        Chunk::Thread(ThreadRecord {
            tid: MAIN,
            rayon_index: NO_WORKER,
            pool: 0,
            name: "main".into(),
        }),
        Chunk::Thread(ThreadRecord {
            tid: WORKER,
            rayon_index: 0,
            pool: 0,
            name: "rayon-0".into(),
        }),
        Chunk::Events {
            tid: MAIN,
            events: vec![
                Event::new(10_900, EventKind::Enter, F),
                Event::new(11_200, EventKind::Enter, G),
            ],
        },
        Chunk::Events {
            tid: WORKER,
            events: vec![
                Event::new(20_000, EventKind::Enter, G),
                Event::new(20_500, EventKind::Exit, G),
            ],
        },
        Chunk::Lost {
            tid: WORKER,
            count: 4,
        },
        Chunk::Events {
            tid: MAIN,
            events: vec![
                Event::new(11_500, EventKind::Exit, G),
                Event::new(11_550, EventKind::Exit, F),
            ],
        },
    ]
}

fn end() -> Chunk {
    Chunk::End(End {
        end: ClockSync {
            ticks: 100_000,
            monotonic_ns: 100_000,
            uncertainty_ticks: 10,
        },
        events_written: 6,
        events_lost: 4,
    })
}

fn encode(chunks: &[Chunk]) -> Vec<u8> {
    let mut encoder = ChunkEncoder::new();
    encoder.preamble();
    for chunk in chunks {
        encoder.chunk(chunk);
    }
    let mut bytes = Vec::new();
    encoder.flush_to(&mut bytes).expect("write to a Vec");
    bytes
}

fn frame(function: &str, inlined: bool) -> Frame {
    Frame {
        function: function.into(),
        inlined,
    }
}

fn kernel() -> KernelRecords {
    let switch = |time_ns, kind| SwitchRecord {
        time_ns,
        tid: MAIN,
        cpu: 0,
        kind,
    };
    let sample = |time_ns| CpuSample {
        time_ns,
        tid: MAIN,
        cpu: 0,
        callchain: vec![0x2, 0x1].into(),
    };
    let f = vec![frame("main", false), frame("app::f", false)];
    let g = [f.clone(), vec![frame("app::g", true)]].concat();
    let mut stacks = StackInterner::default();
    let mut stack = |frames: Vec<Frame>| -> StackId { stacks.intern(&frames) };
    KernelRecords {
        capabilities: Capabilities {
            context_switches: Capability::yes(),
            cpu_samples: Capability::yes(),
            switch_stacks: Capability::yes(),
            hardware_counters: Capability::no("no PMU in this virtual machine"),
            ..Capabilities::default()
        },
        switches: vec![
            switch(11_000, SwitchKind::OutPreempted),
            switch(11_190, SwitchKind::In),
            switch(11_225, SwitchKind::OutVoluntary),
            switch(11_411, SwitchKind::In),
        ],
        // The main thread started before the run: no thread was created during it.
        thread_starts: Vec::new(),
        samples: vec![sample(10_950), sample(11_300), sample(11_450)],
        sample_stacks: [f.clone(), g.clone(), f.clone()].map(&mut stack).into(),
        // The stacks where the thread stopped: preempted in `f`, blocked in `g`.
        switch_samples: vec![sample(11_000), sample(11_225)],
        switch_sample_stacks: [f, g].map(&mut stack).into(),
        stacks: Arc::new(stacks.finish()),
        sample_period_ns: 1_000,
        lost_records: 2,
        malformed_records: 1,
        thread_names: vec![(MAIN, "app".into())],
        steal_ns: Some(12_500_000),
        ..KernelRecords::default()
    }
}

fn write_trace(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).expect("write the trace");
}

/// The trace in `dir` opened as the pipeline does, then analysed.
fn analyse(
    dir: &Path,
    kernel: &KernelRecords,
    opts: &AnalysisOptions,
) -> Result<Analysis, TraceOpenError> {
    let trace = trace_file::open(dir, opts)?;
    Ok(cargo_parprof::analysis::analyse(trace, kernel, opts))
}

fn options() -> AnalysisOptions {
    AnalysisOptions {
        child_pid: Some(MAIN),
        ..AnalysisOptions::default()
    }
}

/// The complete trace written as `name` in a new folder, and the analysis of that folder.
fn analyse_complete_trace(name: &str) -> (tempfile::TempDir, Analysis) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut all = chunks();
    all.push(end());
    write_trace(dir.path(), name, &encode(&all));
    let analysis = analyse(dir.path(), &kernel(), &options()).expect("analysis");
    (dir, analysis)
}

fn probe<'a>(analysis: &'a Analysis, name: &str) -> &'a ProbeSummary {
    analysis
        .probes
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("probe {name}"))
}

#[test]
fn complete_trace_gives_exact_figures() {
    let (_dir, analysis) = analyse_complete_trace("trace-100.ppt");

    assert_eq!(analysis.trace.completeness, TraceCompleteness::Complete);
    assert_eq!((analysis.trace.events, analysis.trace.pid), (6, Some(MAIN)));
    let clock = analysis.clock.as_ref().expect("clock info");
    assert_eq!(
        (clock.rate_used, clock.alignment_error_ns),
        ("whole_run", 10.0)
    );
    assert_eq!(analysis.anomalies, Anomalies::default());

    let f = probe(&analysis, "app::f");
    assert_eq!(
        (f.calls, f.elapsed_ns, f.active_ns, f.self_active_ns),
        (1, 650, 266, 155)
    );
    assert_eq!((f.overhead_ns, f.switched_out_ns), (8, 376));
    assert_eq!(
        (f.switched_out_preempted_ns, f.switched_out_voluntary_ns),
        (190, 186)
    );
    assert_eq!(
        (f.min_active_ns, f.median_active_ns, f.max_active_ns),
        (266, 266, 266)
    );
    assert_eq!((f.file.as_str(), f.line), ("src/app.rs", 1));

    let g = probe(&analysis, "app::g");
    assert_eq!(
        (g.calls, g.elapsed_ns, g.active_ns, g.self_active_ns),
        (2, 800, 111 + 497, 111 + 497)
    );
    assert_eq!((g.overhead_ns, g.switched_out_voluntary_ns), (6, 186));
    assert_eq!(
        (g.min_active_ns, g.median_active_ns, g.max_active_ns),
        (111, 304, 497)
    );
    assert_eq!(g.median_method, MedianMethod::Exact);
    // Sorted by self active time.
    assert_eq!(analysis.probes[0].name, "app::g");

    let paths: Vec<(String, u64, u64)> = analysis
        .call_paths
        .iter()
        .map(|p| (p.path.join(";"), p.calls, p.self_active_ns))
        .collect();
    assert_eq!(
        paths,
        [
            ("app::f".into(), 1, 155),
            ("app::f;app::g".into(), 1, 111),
            ("app::g".into(), 1, 497)
        ]
    );
    let outermost = analysis.outermost_calls;
    assert_eq!(
        (outermost.calls, outermost.elapsed_ns, outermost.active_ns),
        (2, 1_150, 763)
    );

    let main = analysis
        .threads
        .iter()
        .find(|t| t.tid == MAIN)
        .expect("main thread");
    assert_eq!(main.name.as_deref(), Some("main"));
    assert_eq!(
        (
            main.on_cpu_ns,
            main.off_cpu_preempted_ns,
            main.off_cpu_voluntary_ns
        ),
        (Some(274), Some(190), Some(186))
    );
    assert_eq!(
        (
            main.switches_voluntary,
            main.switches_preempted,
            main.cpu_samples
        ),
        (Some(1), Some(1), 3)
    );
    assert_eq!((main.first_seen_ns, main.last_seen_ns), (9_900, 10_550));
    let worker = analysis
        .threads
        .iter()
        .find(|t| t.tid == WORKER)
        .expect("worker thread");
    assert_eq!(
        (worker.rayon_index, worker.on_cpu_ns, worker.lost_events),
        (Some(0), Some(500), 4)
    );

    assert_eq!((analysis.lost_events, analysis.lost_kernel_records), (4, 2));
    assert_eq!(analysis.cpu_samples.total, 3);
    assert_eq!(analysis.timeline.origin_monotonic_ns, 1_000);
    let kinds: Vec<(u32, u64, u64, SpanKind)> = analysis
        .timeline
        .spans
        .iter()
        .map(|s| (s.tid, s.start_ns, s.duration_ns, s.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            (
                MAIN,
                9_900,
                650,
                SpanKind::Probe {
                    site: F,
                    active_ns: 266
                }
            ),
            (MAIN, 10_000, 190, SpanKind::Preempted),
            (
                MAIN,
                10_200,
                300,
                SpanKind::Probe {
                    site: G,
                    active_ns: 111
                }
            ),
            (MAIN, 10_225, 186, SpanKind::Blocked),
            (
                WORKER,
                19_000,
                500,
                SpanKind::Probe {
                    site: G,
                    active_ns: 497
                }
            ),
        ]
    );
    let notes = report::notes(&analysis).join("\n");
    assert!(
        notes.contains("Hardware counters were not used (no PMU"),
        "{notes}"
    );
    assert!(
        notes.contains("4 trace events were lost on 1 thread"),
        "{notes}"
    );
    assert!(notes.contains("2 kernel records were lost"), "{notes}");
    assert_eq!(analysis.steal_ns, Some(12_500_000));
    assert!(
        notes.contains("other guests on this machine's CPUs for 12.5 ms"),
        "{notes}"
    );
    assert!(
        notes.contains("1 kernel records could not be decoded"),
        "{notes}"
    );
}

#[test]
fn reports_are_written_as_views_of_the_analysis() {
    let (dir, mut analysis) = analyse_complete_trace("trace-100.ppt");
    analysis.target.name = "app".into();
    analysis.exit.code = Some(0);

    let out = dir.path().join("out");
    let files =
        report::write_all(&analysis, &out, &report::ReportOptions::default()).expect("reports");
    let names: Vec<String> = files
        .iter()
        .map(|p| {
            p.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        names,
        [
            "report.json",
            "report.md",
            "active.folded",
            "active.svg",
            "cpu.folded",
            "cpu.svg",
            "timeline.json",
            "profile.json.gz",
            "offcpu.folded",
            "offcpu.svg",
            "utilization.svg",
            "report.html"
        ]
    );
    for file in &files {
        assert!(
            std::fs::metadata(file).expect("report file").len() > 0,
            "{} is empty",
            file.display()
        );
    }

    let read = |name: &str| std::fs::read_to_string(out.join(name)).expect("report file");
    assert_eq!(
        read("active.folded"),
        "app::f 155\napp::f;app::g 111\napp::g 497\n"
    );
    assert_eq!(
        read("cpu.folded"),
        // The thread's root (its role, `main`), then the stack from the function `main`.
        "main;main;app::f 2\nmain;main;app::f;app::g_[i] 1\n"
    );
    assert!(read("active.svg").contains("app::g"));
    // Switched out 190 ns preempted in `f`, 186 ns blocked in `g` (the thread's role, then
    // the stack from the function `main`).
    assert_eq!(
        read("offcpu.folded"),
        "main;main;app::f;[preempted] 190\nmain;main;app::f;app::g_[i];[blocked] 186\n"
    );
    assert!(read("report.html").contains("Off-CPU time"));
    // The interactive profile: the main thread's three samples with their stacks, and the
    // probe calls as markers.
    let gz = std::fs::File::open(out.join("profile.json.gz")).expect("profile.json.gz");
    let profile: serde_json::Value =
        serde_json::from_reader(flate2::read::GzDecoder::new(gz)).expect("gzip JSON");
    let threads = profile["threads"].as_array().expect("threads");
    let main = threads
        .iter()
        .find(|t| t["tid"].as_str() == Some(MAIN.to_string().as_str()))
        .unwrap_or_else(|| panic!("no thread {MAIN}: {threads:#?}"));
    assert_eq!(main["samples"]["length"], 3, "{main:#}");
    assert_eq!(main["markers"]["length"], 2, "F and G: {main:#}");
    let strings = main["stringArray"].to_string() + &profile["shared"].to_string();
    assert!(
        strings.contains("app::g_[i]") && strings.contains("app::f"),
        "{strings}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&read("report.json")).expect("report.json parses");
    assert_eq!(json["schema"], "parprof-report/1");
    assert_eq!(json["target"]["name"], "app");
    assert_eq!(json["exit"]["code"], 0);
    assert_eq!(json["capabilities"]["context_switches"]["available"], true);
    assert_eq!(
        json["capabilities"]["hardware_counters"]["available"],
        false
    );
    assert_eq!(json["trace"]["completeness"]["state"], "complete");
    assert_eq!(json["lost_events"], 4);
    let thread = &json["threads"][0];
    for field in [
        "tid",
        "name",
        "rayon_index",
        "on_cpu_ns",
        "switches_voluntary",
        "switches_preempted",
    ] {
        assert!(thread.get(field).is_some(), "threads[].{field} missing");
    }
    let f = json["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .find(|p| p["name"] == "app::f")
        .expect("f");
    assert_eq!(f["active_ns"], 266);
    for field in [
        "calls",
        "elapsed_ns",
        "self_active_ns",
        "overhead_ns",
        "switched_out_ns",
        "median_active_ns",
    ] {
        assert!(f.get(field).is_some(), "probes[].{field} missing");
    }
    assert!(json["clock"]["alignment_error_ns"].is_number());

    let timeline: serde_json::Value =
        serde_json::from_str(&read("timeline.json")).expect("timeline.json parses");
    let events = timeline["traceEvents"].as_array().expect("trace events");
    let find = |name: &str| {
        events
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name} event"))
    };
    assert_eq!(find("app::f")["ph"], "X");
    assert_eq!(find("app::f")["ts"], 9.9);
    assert_eq!(find("app::f")["dur"], 0.65);
    assert_eq!(find("preempted")["cat"], "switched_out.preempted");
    assert_eq!(find("blocked")["cat"], "switched_out.blocked");
    assert!(
        events
            .iter()
            .any(|e| e["name"] == "thread_name" && e["args"]["name"] == "rayon-0")
    );

    let markdown = read("report.md");
    assert!(markdown.contains("| `app::g` | 2 |"), "{markdown}");
    let summary = report::terminal::summary(&analysis);
    assert!(
        summary.contains("app::f") && summary.contains("−59.1%"),
        "{summary}"
    );
}

#[test]
fn cut_trace_keeps_what_was_written_and_counts_open_calls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let whole = encode(&chunks());
    // Cut inside the last chunk (the main thread's exits).
    write_trace(dir.path(), "trace-100.ppt", &whole[..whole.len() - 10]);
    let analysis = analyse(dir.path(), &kernel(), &options()).expect("analysis");
    assert!(
        matches!(analysis.trace.completeness, TraceCompleteness::Cut { tail_bytes, .. } if tail_bytes > 0)
    );
    assert_eq!(
        analysis.clock.as_ref().map(|c| c.rate_used),
        Some("startup_calibration")
    );
    assert_eq!(analysis.anomalies.open_at_end, 2);
    let g = probe(&analysis, "app::g");
    assert_eq!((g.calls, g.active_ns), (1, 497));
    assert!(
        analysis
            .notes
            .iter()
            .any(|n| matches!(n, Note::Trace(TraceNote::Cut { .. }))),
        "{:?}",
        analysis.notes
    );
}

#[test]
fn corrupt_chunk_stops_the_analysis_there_without_failing_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut all = chunks();
    all.push(end());
    let mut bytes = encode(&all);
    // Damage the last events chunk (before the End chunk of 48 bytes).
    let at = bytes.len() - 48 - 10;
    bytes[at] ^= 0xff;
    write_trace(dir.path(), "trace-100.ppt", &bytes);
    let analysis = analyse(dir.path(), &kernel(), &options()).expect("analysis");
    match &analysis.trace.completeness {
        TraceCompleteness::Corrupt { error } => assert!(error.contains("checksum"), "{error}"),
        other => panic!("expected a corrupt trace, got {other:?}"),
    }
    // The worker's call came before the damage.
    let g = probe(&analysis, "app::g");
    assert_eq!((g.calls, g.active_ns), (1, 497));
    assert_eq!(analysis.anomalies.open_at_end, 2);
    assert!(
        analysis
            .notes
            .iter()
            .any(|n| matches!(n, Note::Trace(TraceNote::Corrupt { .. }))),
        "{:?}",
        analysis.notes
    );
}

#[test]
fn without_a_trace_kernel_figures_remain() {
    let dir = tempfile::tempdir().expect("temp dir");
    let analysis = analyse(dir.path(), &kernel(), &options()).expect("analysis");
    assert_eq!(analysis.trace.completeness, TraceCompleteness::Absent);
    assert!(analysis.probes.is_empty() && analysis.clock.is_none());
    assert!(
        analysis
            .notes
            .iter()
            .any(|n| matches!(n, Note::Trace(TraceNote::Absent { .. }))),
        "{:?}",
        analysis.notes
    );
    let main = analysis
        .threads
        .iter()
        .find(|t| t.tid == MAIN)
        .expect("main thread from kernel records");
    assert_eq!(main.name.as_deref(), Some("app"));
    // Seen from 10,950 (first sample) to 11,450 (last sample), off the CPU 190 + 186 of that.
    assert_eq!(main.on_cpu_ns, Some(500 - 376));

    let out = dir.path().join("out");
    report::write_all(&analysis, &out, &report::ReportOptions::default()).expect("reports");
    assert_eq!(
        std::fs::read_to_string(out.join("active.folded")).expect("folded"),
        ""
    );
    assert!(
        std::fs::read_to_string(out.join("active.svg"))
            .expect("svg")
            .contains("No probe calls")
    );
    assert_eq!(
        std::fs::read_to_string(out.join("cpu.folded")).expect("folded"),
        // The thread's root (its role, `main`), then the stack from the function `main`.
        "main;main;app::f 2\nmain;main;app::f;app::g_[i] 1\n"
    );
}

#[test]
fn trace_of_another_process_is_used_when_the_childs_is_absent() {
    let (_dir, analysis) = analyse_complete_trace("trace-555.ppt");
    assert_eq!(analysis.probes.len(), 2);
    assert!(
        analysis.notes.iter().any(|n| matches!(
            n,
            Note::Trace(TraceNote::OnlyOther {
                expected_pid: 100,
                ..
            })
        )),
        "{:?}",
        analysis.notes
    );
}

#[test]
fn a_trace_named_after_the_run_but_written_by_another_process_is_not_analysed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut all = chunks();
    all.push(end());
    // Another run's trace (written by process 100) put where process 777's belongs.
    write_trace(dir.path(), "trace-777.ppt", &encode(&all));
    let opts = AnalysisOptions {
        child_pid: Some(777),
        ..AnalysisOptions::default()
    };
    let analysis = analyse(dir.path(), &kernel(), &opts).expect("analysis");
    assert!(analysis.probes.is_empty(), "{:?}", analysis.probes);
    assert!(
        analysis.notes.iter().any(|n| matches!(
            n,
            Note::Trace(TraceNote::OfAnotherProcess {
                written_by: 100,
                run_pid: 777,
                ..
            })
        )),
        "{:?}",
        analysis.notes
    );
}

/// A region of 10 µs on the main thread whose tasks, 100 of 20 ns each, run on the worker
/// 80 ns apart, each taken from its own deque: far too fine.
fn region_chunks() -> Vec<Chunk> {
    const REGION: u32 = 5;
    let task = |ts, kind: EventKind| Event {
        ts,
        id: REGION,
        aux: 0,
        kind: kind as u8,
        flags: TaskOrigin::Local as u8,
    };
    let mut chunks = chunks();
    // The probes' events are not needed here; the header, sites and threads are.
    chunks.retain(|c| !matches!(c, Chunk::Events { .. } | Chunk::Lost { .. }));
    chunks.push(Chunk::Site(SiteRecord {
        id: REGION,
        kind: SiteKind::Region,
        name: "sum_rows".into(),
        file: "src/app.rs".into(),
        line: 40,
        caller: String::new(),
        entry: None,
    }));
    chunks.push(Chunk::Events {
        tid: MAIN,
        events: vec![
            Event::new(10_000, EventKind::RegionBegin, REGION),
            Event::new(20_000, EventKind::RegionEnd, REGION),
        ],
    });
    chunks.push(Chunk::Events {
        tid: WORKER,
        events: (0..100u64)
            .flat_map(|i| {
                let begin = 10_000 + 100 * i + 60;
                [
                    task(begin, EventKind::TaskBegin),
                    task(begin + 20, EventKind::TaskEnd),
                ]
            })
            .collect(),
    });
    chunks.push(end());
    chunks
}

#[test]
fn regions_are_analysed_and_reports_lead_with_their_diagnoses() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_trace(dir.path(), "trace-100.ppt", &encode(&region_chunks()));
    // The region lasts 10 µs: diagnosed only with no minimum region time.
    let opts = AnalysisOptions {
        thresholds: Thresholds {
            min_elapsed_ns: 0,
            ..Thresholds::default()
        },
        ..options()
    };
    let mut analysis = analyse(dir.path(), &kernel(), &opts).expect("analysis");
    analysis.target.name = "app".into();

    assert_eq!(analysis.regions.len(), 1);
    let region = &analysis.regions[0];
    assert_eq!(
        (region.name.as_str(), region.elapsed_ns, region.workers),
        ("sum_rows", 10_000, 1)
    );
    assert_eq!((region.tasks.local, region.tasks.total()), (100, 100));
    assert_eq!(region.state_ns.uc, 100 * 20);
    let codes: Vec<Code> = region.diagnoses.iter().map(|d| d.code).collect();
    assert_eq!(codes, [Code::TooFineGranularity]);

    // The worker's states within the region are on the timeline, which starts at 1,000 ns.
    let timeline = &analysis.timeline;
    assert_eq!(
        timeline
            .region_runs
            .iter()
            .map(|r| (r.region, r.start_ns, r.duration_ns))
            .collect::<Vec<_>>(),
        [(5, 9_000, 10_000)]
    );
    assert!(timeline.worker_states.iter().all(|s| s.tid == WORKER));
    let uc: u64 = timeline
        .worker_states
        .iter()
        .filter(|s| s.state == WorkerState::UserCode)
        .map(|s| s.duration_ns)
        .sum();
    assert_eq!(uc, 100 * 20);

    let out = dir.path().join("out");
    report::write_all(&analysis, &out, &report::ReportOptions::default()).expect("reports");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("json"))
            .expect("report.json is JSON");
    let r = &json["regions"][0];
    assert_eq!(
        (r["tasks"].as_u64(), r["tasks_local"].as_u64()),
        (Some(100), Some(100))
    );
    assert_eq!(r["diagnoses"][0]["code"], "too_fine_granularity");
    assert_eq!(r["state_ns"]["UC"], 2_000);
    assert!(r["transitions"]["UC->LQ"].as_u64() == Some(100), "{r:#}");

    let markdown = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    let first_section = markdown.find("### ").expect("sections");
    assert!(
        markdown[first_section..]
            .starts_with("### Diagnoses\n\n- **`too_fine_granularity`** in region `sum_rows`"),
        "{markdown}"
    );
    let summary = report::terminal::summary(&analysis);
    let diagnoses = summary.find("Diagnoses:").expect("diagnoses first");
    assert!(
        diagnoses < summary.find("No probe calls").expect("probe section"),
        "{summary}"
    );
    assert!(
        summary.contains("region `sum_rows`: too_fine_granularity"),
        "{summary}"
    );

    let timeline: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("timeline.json")).expect("json"))
            .expect("timeline.json is JSON");
    let events = timeline["traceEvents"].as_array().expect("events");
    assert!(
        events
            .iter()
            .any(|e| e["cat"] == "region" && e["name"] == "sum_rows"),
        "the region's run is on the timeline"
    );
    assert!(
        events.iter().any(|e| e["cat"] == "lifecycle"
            && e["name"] == "UC"
            && e["args"]["region"] == "sum_rows"),
        "the worker's states are on the timeline"
    );
}
