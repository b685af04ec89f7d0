//! `profile.json.gz`: the run as an interactive profile for the Firefox Profiler
//! (<https://profiler.firefox.com>, "Load a profile from file"; or `samply load`), written
//! with `fxprof-processed-profile`. One process; a thread per program thread, named by its
//! role, with its cpu-clock samples and their stacks (the stacks of `cpu.folded`: recursion
//! folded, the profiler's frames left out); probe calls, rayon worker states and region runs
//! as markers; work executed and slots available as counter tracks. The profile can be
//! zoomed, a thread filtered, the call tree inverted.

use super::timeline::process_id;
use crate::analysis::{Analysis, SpanKind, ThreadSummary};
use flate2::Compression;
use flate2::write::GzEncoder;
use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, MarkerFieldFlags,
    MarkerFieldFormat, MarkerTiming, Profile, ReferenceTimestamp, SamplingInterval, StackHandle,
    StaticSchemaMarker, StaticSchemaMarkerField, StringHandle, ThreadHandle, Timestamp,
};
use parprof_rt::trace::WRITER_THREAD_NAME as WRITER_THREAD;
use std::collections::HashMap;
use std::io::Write;

/// Writes the profile, gzip-compressed.
pub fn write(analysis: &Analysis, out: &mut dyn Write) -> anyhow::Result<()> {
    let profile = build(analysis);
    let mut gz = GzEncoder::new(out, Compression::fast());
    // serde_json writes a few bytes at a time, and the compressor clears buffers on each
    // write it is handed: unbuffered, that clearing was most of the report's time.
    let mut json = std::io::BufWriter::with_capacity(1 << 16, &mut gz);
    serde_json::to_writer(&mut json, &profile)?;
    json.flush()?;
    drop(json);
    gz.finish()?;
    Ok(())
}

/// Timestamps count from the timeline's origin.
fn at(ns: u64) -> Timestamp {
    Timestamp::from_nanos_since_reference(ns)
}

/// The profile of `analysis`.
pub fn build(analysis: &Analysis) -> Profile {
    let name = if analysis.target.name.is_empty() {
        "profiled program"
    } else {
        analysis.target.name.as_str()
    };
    let period = analysis.cpu_samples.period_ns.max(1);
    let mut profile = Profile::new(
        name,
        // The timeline's origin is on CLOCK_MONOTONIC, which has no date: the profile's
        // times are relative to it.
        ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
        SamplingInterval::from_nanos(period),
    );
    profile.set_product(&format!("{name} (cargo parprof)"));
    let process = profile.add_process(name, process_id(analysis), at(0));
    let threads = Threads::add(&mut profile, process, &analysis.threads);
    add_samples(&mut profile, analysis, &threads, period);
    add_markers(&mut profile, analysis, &threads);
    add_counters(&mut profile, analysis, process);
    profile
}

/// The profile's thread of each program thread (not the profiler's writer).
struct Threads {
    by_tid: HashMap<u32, ThreadHandle>,
    /// Where markers of no thread go (region runs): the main thread, else the first one.
    main: Option<ThreadHandle>,
}

impl Threads {
    fn add(
        profile: &mut Profile,
        process: fxprof_processed_profile::ProcessHandle,
        threads: &[ThreadSummary],
    ) -> Threads {
        let mut by_tid = HashMap::new();
        let mut main = None;
        for t in threads.iter().filter(|t| t.role != WRITER_THREAD) {
            // The Firefox Profiler names a process's main thread after the process: no thread
            // is marked main, so that each keeps its role (`main` too).
            let handle = profile.add_thread(process, t.tid, at(t.first_seen_ns), false);
            profile.set_thread_name(handle, &t.role);
            profile.set_thread_end_time(handle, at(t.last_seen_ns));
            if t.role == "main" || main.is_none() {
                main = Some(handle);
            }
            by_tid.insert(t.tid, handle);
        }
        Threads { by_tid, main }
    }
}

fn add_samples(profile: &mut Profile, analysis: &Analysis, threads: &Threads, period: u64) {
    let samples = &analysis.cpu_samples;
    let mut stacks: HashMap<(ThreadHandle, u32), Option<StackHandle>> = HashMap::new();
    for sample in &samples.timed {
        let Some(&thread) = threads.by_tid.get(&sample.tid) else {
            continue;
        };
        let Some(frames) = samples.stacks.get(sample.stack as usize) else {
            continue;
        };
        let stack = *stacks.entry((thread, sample.stack)).or_insert_with(|| {
            let frames: Vec<FrameInfo> = frames
                .frames
                .iter()
                .map(|f| FrameInfo {
                    frame: Frame::Label(profile.intern_string(f)),
                    category_pair: CategoryHandle::OTHER.into(),
                    flags: FrameFlags::empty(),
                })
                .collect();
            profile.intern_stack_frames(thread, frames.into_iter())
        });
        profile.add_sample(
            thread,
            at(sample.time_ns),
            stack,
            CpuDelta::from_nanos(period),
            1,
        );
    }
}

/// A marker with a name, in a category, and one optional text field.
struct NamedMarker<const KIND: usize> {
    name: StringHandle,
    category: CategoryHandle,
    detail: StringHandle,
}

/// The kinds of [`NamedMarker`]: their type name and the label of their field.
const MARKER_KINDS: [(&str, &str, &str); 3] = [
    (
        "ProbeCall",
        "active",
        "active time (overhead and switched-out time removed)",
    ),
    ("WorkerState", "region", "parallel region"),
    ("RegionRun", "region", "parallel region"),
];

macro_rules! marker_schema {
    ($kind:expr) => {
        impl StaticSchemaMarker for NamedMarker<$kind> {
            const UNIQUE_MARKER_TYPE_NAME: &'static str = MARKER_KINDS[$kind].0;
            const TABLE_LABEL: Option<&'static str> = Some("{marker.name} {marker.data.detail}");
            const TOOLTIP_LABEL: Option<&'static str> = Some("{marker.name} {marker.data.detail}");
            const FIELDS: &'static [StaticSchemaMarkerField] = &[StaticSchemaMarkerField {
                key: "detail",
                label: MARKER_KINDS[$kind].2,
                format: MarkerFieldFormat::String,
                flags: MarkerFieldFlags::SEARCHABLE,
            }];

            fn name(&self, _: &mut Profile) -> StringHandle {
                self.name
            }

            fn category(&self, _: &mut Profile) -> CategoryHandle {
                self.category
            }

            fn string_field_value(&self, _: u32) -> StringHandle {
                self.detail
            }

            fn number_field_value(&self, _: u32) -> f64 {
                0.0
            }
        }
    };
}

const PROBE_CALL: usize = 0;
const WORKER_STATE: usize = 1;
const REGION_RUN: usize = 2;
marker_schema!(0);
marker_schema!(1);
marker_schema!(2);

fn add_markers(profile: &mut Profile, analysis: &Analysis, threads: &Threads) {
    let probes: HashMap<u32, &str> = analysis
        .probes
        .iter()
        .map(|p| (p.site, p.name.as_str()))
        .collect();
    let regions: HashMap<u32, &str> = analysis
        .regions
        .iter()
        .map(|r| (r.site, r.name.as_str()))
        .collect();
    let probe_category = profile.add_category("Probe", CategoryColor::Green);
    let state_category = profile.add_category("Worker state", CategoryColor::Blue);
    let region_category = profile.add_category("Parallel region", CategoryColor::Orange);
    let timeline = &analysis.timeline;
    for span in &timeline.spans {
        let (SpanKind::Probe { site, active_ns }, Some(&thread)) =
            (&span.kind, threads.by_tid.get(&span.tid))
        else {
            continue;
        };
        let name = probes.get(site).copied().unwrap_or("probe");
        let marker = NamedMarker::<PROBE_CALL> {
            name: profile.intern_string(name),
            category: probe_category,
            detail: profile.intern_string(&crate::units::human_duration(*active_ns)),
        };
        let timing =
            MarkerTiming::Interval(at(span.start_ns), at(span.start_ns + span.duration_ns));
        profile.add_marker(thread, timing, marker);
    }
    for span in &timeline.worker_states {
        let Some(&thread) = threads.by_tid.get(&span.tid) else {
            continue;
        };
        let marker = NamedMarker::<WORKER_STATE> {
            name: profile.intern_string(span.state.abbreviation()),
            category: state_category,
            detail: profile.intern_string(regions.get(&span.region).copied().unwrap_or("?")),
        };
        let timing =
            MarkerTiming::Interval(at(span.start_ns), at(span.start_ns + span.duration_ns));
        profile.add_marker(thread, timing, marker);
    }
    let Some(main) = threads.main else { return };
    for run in &timeline.region_runs {
        let name = regions.get(&run.region).copied().unwrap_or("?");
        let marker = NamedMarker::<REGION_RUN> {
            name: profile.intern_string(name),
            category: region_category,
            detail: profile.intern_string(name),
        };
        let timing = MarkerTiming::Interval(at(run.start_ns), at(run.start_ns + run.duration_ns));
        profile.add_marker(main, timing, marker);
    }
}

/// Work executed and slots available per period (method 4), in CPUs' worth of time.
fn add_counters(
    profile: &mut Profile,
    analysis: &Analysis,
    process: fxprof_processed_profile::ProcessHandle,
) {
    let Some(u) = &analysis.utilization else {
        return;
    };
    let origin = analysis.timeline.origin_monotonic_ns;
    let executed = profile.add_counter(
        process,
        "work executed",
        "Utilization",
        "time the program's threads ran, per period",
    );
    let available = profile.add_counter(
        process,
        "slots available",
        "Utilization",
        "CPU time the program could have used, per period",
    );
    for p in &u.periods {
        let t = at((u.origin_ns + p.t_ns).saturating_sub(origin));
        profile.add_counter_sample(executed, t, p.executed, 1);
        profile.add_counter_sample(available, t, p.available, 1);
    }
}
