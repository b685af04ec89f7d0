//! From a run's records to its reports: analyse, say what only the command line knew, write
//! every view. `cargo parprof` does it right after recording a run; `cargo parprof report`
//! does it again from a saved run folder, with other options if asked, without building or
//! running anything. The pipeline opens the run's trace and feeds it to the analysis
//! ([`trace_file`]), which does no I/O itself.

mod spill_files;
pub mod trace_file;

use crate::analysis::slices;
use crate::analysis::{self, Analysis, AnalysisOptions, LifecycleNote, LossNote, Note, RunNote};
use crate::record::bench_harness::{self, BenchIndex};
use crate::recording::Harness;
use crate::recording::counters::CounterRecords;
use crate::recording::kernel_records::KernelRecords;
use crate::recording::{
    self, Completeness, DetailRequest, Loaded, RayonHooks, RecordedOptions, Recording, RunMeta,
};
use crate::{console, diff, report};
use anyhow::{Context, Result, bail};
use parprof_rt::slice_results::{self, SliceResults};
use std::borrow::Cow;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Analyses the run recorded in `run_dir` (its trace is there) with `options`:
/// [`pass_over_trace`], then [`finish_analysis`].
pub fn analyse(
    recording: &Recording,
    run_dir: &Path,
    options: &RecordedOptions,
) -> Result<Analysis> {
    finish_analysis(pass_over_trace(recording, run_dir, options)?, recording)
}

/// What [`pass_over_trace`] leaves for [`finish_analysis`].
pub struct PassedTrace {
    pass: analysis::TracePass,
    opts: AnalysisOptions,
    slice_results: Option<SliceResults>,
    slice_notes: Vec<Note>,
}

/// The analysis's pass over the trace of the run recorded in `run_dir`, with `options`: it
/// needs no stacks of the samples, which may be symbolised meanwhile.
pub fn pass_over_trace(
    recording: &Recording,
    run_dir: &Path,
    options: &RecordedOptions,
) -> Result<PassedTrace> {
    let opts = AnalysisOptions {
        child_pid: Some(recording.run.child_pid),
        thresholds: options.thresholds.clone(),
        utilization_period_ns: options.utilization_period_ns,
        bench_phases: recording.run.harness == Harness::Criterion,
        ..AnalysisOptions::default()
    };
    let mut slice_notes = Vec::new();
    let slice_results = slice_results(&recording.run, run_dir, &mut slice_notes);
    let kernel = program_records(recording, slice_results.as_ref());
    let input = trace_file::open(run_dir, &opts)?;
    let pass = analysis::pass_over_trace(input, &kernel, &recording.counters, &opts);
    Ok(PassedTrace {
        pass,
        opts,
        slice_results,
        slice_notes,
    })
}

/// The rest of the analysis of `recording` after [`pass_over_trace`], its samples' stacks now
/// there, and what only the command line knew of the run.
pub fn finish_analysis(passed: PassedTrace, recording: &Recording) -> Result<Analysis> {
    let PassedTrace {
        pass,
        opts,
        slice_results,
        slice_notes,
    } = passed;
    let kernel = program_records(recording, slice_results.as_ref());
    let mut analysis = pass.finish(&kernel, &recording.counters, &opts);
    if let Some(failure) = (recording.kernel.stored.as_ref()).and_then(|s| s.0.failure()) {
        bail!("the run's records changed while they were analysed: {failure}");
    }
    describe_run(&mut analysis, &recording.run);
    analysis.notes.extend(slice_notes);
    analysis.slices = slice_results.map(|r| {
        // Where the kernel could not be told to follow threads only, it counted the slices
        // with the program (their switches show it).
        let pids = slice_processes(&r);
        let mut s = slices::analyse(
            &r,
            &analysis.probes,
            &analysis.threads,
            analysis.counters.as_ref(),
        );
        s.counted_with_program =
            (recording.kernel.switch_records()).any(|sw| pids.contains(&{ sw.tid }));
        s
    });
    Ok(analysis)
}

/// The kernel's records of the program: the collector follows the slices' processes like any
/// child, and their records are not the program's.
fn program_records<'a>(
    recording: &'a Recording,
    slice_results: Option<&SliceResults>,
) -> Cow<'a, KernelRecords> {
    match slice_results.map(slice_processes) {
        Some(pids) => Cow::Owned(recording.kernel.without_threads(&pids)),
        None => Cow::Borrowed(&recording.kernel),
    }
}

/// Opens the trace at `trace` (a trace file, or the output folder holding it) and analyses it
/// with the kernel's records and the counters.
pub fn analyse_trace(
    trace: &Path,
    kernel: &KernelRecords,
    counters: &CounterRecords,
    opts: &AnalysisOptions,
) -> Result<Analysis, trace_file::TraceOpenError> {
    let input = trace_file::open(trace, opts)?;
    Ok(analysis::analyse_with_counters(
        input, kernel, counters, opts,
    ))
}

fn slice_processes(results: &SliceResults) -> HashSet<u32> {
    results.slices.iter().filter_map(|s| s.pid).collect()
}

/// The results the runtime wrote for `--slices` or `--detail full`, if asked for; what went
/// wrong reading them is noted (the rest of the analysis stands without them).
fn slice_results(run: &RunMeta, run_dir: &Path, notes: &mut Vec<Note>) -> Option<SliceResults> {
    if run.detail == DetailRequest::Off {
        return None;
    }
    let path = run_dir.join(slice_results::file_name(run.child_pid));
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) => {
            notes.push(Note::Run(RunNote::SliceResultsMissing {
                path,
                error: e.to_string(),
            }));
            return None;
        }
    };
    match slice_results::read(std::io::BufReader::new(file)) {
        Ok(results) => Some(results),
        Err(e) => {
            notes.push(Note::Run(RunNote::SliceResultsUnreadable {
                path,
                error: e.to_string(),
            }));
            None
        }
    }
}

/// What the analysis cannot know of a run: the target, how it was built, how it ended.
fn describe_run(analysis: &mut Analysis, run: &RunMeta) {
    analysis.target = run.target.clone();
    if run.harness == Harness::Divan {
        analysis.notes.push(Note::Run(RunNote::DivanAsOneProgram));
    }
    if let RayonHooks::Unavailable { reason } = &run.rayon_hooks {
        analysis
            .notes
            .push(Note::Lifecycle(LifecycleNote::HooksUnavailable {
                reason: reason.clone(),
            }));
    }
    analysis.rayon_hooks = Some(run.rayon_hooks.clone());
    analysis.exit = run.exit;
    if run.interrupted {
        analysis.notes.push(Note::Run(RunNote::Interrupted));
    }
}

/// Writes every report of `analysis` into `out_dir` and prints the summary.
pub fn write(
    analysis: &Analysis,
    out_dir: &Path,
    options: &RecordedOptions,
    frames: report::FrameView,
) -> Result<()> {
    report::write_all(
        analysis,
        out_dir,
        &report::ReportOptions {
            merge_threads: options.merge_threads,
            frames,
        },
    )?;
    console::summary(report::terminal::summary(analysis));
    console::summary(format_args!(
        "parprof: report written to {}",
        out_dir.display()
    ));
    Ok(())
}

/// What `cargo parprof report` was asked for.
#[derive(Debug, Clone)]
pub struct ReportRequest {
    /// A run folder, a folder of repeated runs, or a criterion bench's folder.
    pub run: PathBuf,
    /// Where the reports go (default: beside the records).
    pub output: Option<PathBuf>,
    /// Analyse cut records up to their last complete part instead of refusing them.
    pub partial: bool,
    /// How the flamegraphs name and fold frames.
    pub frames: report::FrameView,
}

/// `cargo parprof report`: analyses every run under `request.run` again, each with the
/// options it was recorded with changed by `options`, and writes its reports.
pub fn report_saved(
    request: &ReportRequest,
    options: impl Fn(&RecordedOptions) -> RecordedOptions,
) -> Result<()> {
    let root = &request.run;
    let out_root = request.output.as_deref().unwrap_or(root);
    let layout = Layout::of(root)?;
    for run in &layout.runs {
        let (run_dir, out_dir) = (under(root, run), under(out_root, run));
        if layout.runs.len() > 1 {
            crate::console::note!("parprof: {}", run_dir.display());
        }
        let (mut loaded, cut_note) = load(&run_dir, request.partial)?;
        symbolise_saved(&mut loaded, &run_dir);
        let mut recording = loaded.recording;
        recording.release_call_chains();
        crate::record::session::return_freed_memory();
        let options = options(&recording.run.options);
        let mut analysis = analyse(&recording, &run_dir, &options)?;
        analysis.notes.extend(cut_note);
        write(&analysis, &out_dir, &options, request.frames)?;
    }
    if let Some(index) = &layout.bench {
        let report = write_bench_summary(index, out_root)?;
        console::summary(format_args!(
            "parprof: {} benchmarks reported; report written to {}",
            index.benchmarks.len(),
            report.display()
        ));
    } else if layout.runs.len() > 1 {
        console::summary(diff::spread::write_summary(out_root)?);
    }
    Ok(())
}

/// Symbolises the samples of a run saved before they were (the profiler was killed while
/// symbolising them, say), from the files the run mapped, and appends the symbols to its
/// records; a run saved without the mappings (before parprof kept them) stays without stacks.
fn symbolise_saved(loaded: &mut Loaded, run_dir: &Path) {
    let recording = &mut loaded.recording;
    let Some(records_len) = loaded.records_len else {
        return;
    };
    if !recording.needs_symbols() || recording.addresses.side_band.maps.is_empty() {
        return;
    }
    crate::console::note!(
        "parprof: {} has no symbols (saved before its samples were symbolised): symbolising them",
        run_dir.display()
    );
    // Whole and symbolised in the file then: walked from there, as a run saved so.
    if let Err(e) = crate::record::symbolize::symbolize_saved(run_dir, records_len, recording) {
        crate::console::note!("parprof: warning: the symbols were not saved: {e:#}");
    }
}

/// `root/relative`, without a trailing `/` for the root itself.
fn under(root: &Path, relative: &Path) -> PathBuf {
    if relative.as_os_str().is_empty() {
        root.to_path_buf()
    } else {
        root.join(relative)
    }
}

/// The records of `run_dir`, with a note when they were cut and `partial` allows it.
fn load(run_dir: &Path, partial: bool) -> Result<(Loaded, Option<Note>)> {
    let loaded = recording::load(run_dir)?;
    let Completeness::Cut { after_byte, .. } = loaded.completeness else {
        return Ok((loaded, None));
    };
    let path = run_dir.join(recording::RECORDS_FILE);
    if !partial {
        bail!(
            "{} is cut after byte {after_byte} (disk full, or an interrupted copy?): the kernel \
             records and counters after that point are lost and the figures would be off; \
             pass --partial to analyse what is left",
            path.display()
        );
    }
    crate::console::note!(
        "parprof: warning: {} is cut after byte {after_byte}; analysing what is left",
        path.display()
    );
    Ok((
        loaded,
        Some(Note::Loss(LossNote::RecordsCut { after_byte })),
    ))
}

/// The runs under a folder `cargo parprof` wrote.
struct Layout {
    /// Run folders, relative to the root ("" for the root itself).
    runs: Vec<PathBuf>,
    /// A criterion bench's index, when the root is a bench's folder.
    bench: Option<BenchIndex>,
}

impl Layout {
    fn of(root: &Path) -> Result<Layout> {
        if recording::is_run_folder(root) {
            return Ok(Layout {
                runs: vec![PathBuf::new()],
                bench: None,
            });
        }
        let Some(index) = BenchIndex::read(root)? else {
            return Ok(Layout {
                runs: repeated_runs(root)?,
                bench: None,
            });
        };
        let mut runs = Vec::new();
        for entry in &index.benchmarks {
            let dir = Path::new(&entry.dir);
            if recording::is_run_folder(&root.join(dir)) {
                runs.push(dir.to_path_buf());
            } else {
                let repeated = repeated_runs(&root.join(dir))
                    .with_context(|| format!("benchmark `{}`", entry.name))?;
                runs.extend(repeated.into_iter().map(|run| dir.join(run)));
            }
        }
        Ok(Layout {
            runs,
            bench: Some(index),
        })
    }
}

/// The run folders among the sub-folders of `dir` (`--repeat`'s `run-1`, `run-2`, …).
fn repeated_runs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| recording::is_run_folder(&e.path()))
        .map(|e| PathBuf::from(e.file_name()))
        .collect();
    runs.sort();
    if runs.is_empty() {
        bail!(
            "{} is not a run folder of `cargo parprof`: it has no {} (nor sub-folders with one, as \
             `--repeat` writes, nor a criterion bench's benchmarks.json). Runs recorded before \
             parprof saved its records cannot be analysed again: record them anew",
            dir.display(),
            recording::RECORDS_FILE
        );
    }
    Ok(runs)
}

/// A criterion bench's index and its combined `report.md`, at the top of `dir`.
pub fn write_bench_summary(index: &BenchIndex, dir: &Path) -> Result<PathBuf> {
    index.write(dir)?;
    let report = dir.join("report.md");
    std::fs::write(&report, bench_harness::combined_markdown(index, dir))
        .with_context(|| format!("cannot write {}", report.display()))?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::bench_harness::BenchEntry;
    use crate::recording::kernel_records::{SwitchKind, SwitchRecord};

    fn run_folder(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(recording::RECORDS_FILE), b"").unwrap();
    }

    /// A run whose lists are walked from its records is analysed as one whose lists are held.
    #[test]
    fn lists_walked_from_the_file_analyse_as_held_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mut recording = recording::format::tests::example();
        recording.run.options.utilization_period_ns = 1_000;
        let switch = |time_ns, tid, kind| SwitchRecord {
            time_ns,
            tid,
            cpu: 0,
            kind,
        };
        recording.kernel.switches = vec![
            switch(10, 7, SwitchKind::In),
            switch(15, 8, SwitchKind::OutPreempted),
            switch(40, 7, SwitchKind::OutVoluntary),
            switch(45, 8, SwitchKind::In),
        ];
        recording.kernel.switch_samples[0].time_ns = 40;
        recording::save(dir.path(), &recording).unwrap();
        let walked = recording::load(dir.path()).unwrap().recording;
        assert!(walked.kernel.stored.is_some() && walked.kernel.switches.is_empty());
        let options = recording.run.options.clone();
        let held = analyse(&recording, dir.path(), &options).unwrap();
        let json = |a: &Analysis| serde_json::to_string(a).unwrap();
        assert_eq!(
            json(&analyse(&walked, dir.path(), &options).unwrap()),
            json(&held)
        );
        // What the lists give is in it: switches, samples, utilization, off-CPU stacks.
        let thread = held.threads.iter().find(|t| t.tid == 7).unwrap();
        assert_eq!(
            (thread.switches_voluntary, thread.cpu_samples),
            (Some(1), 1)
        );
        assert!(held.utilization.is_some() && held.offcpu_stacks.is_some());
    }

    #[test]
    fn a_run_folder_is_one_run() {
        let root = tempfile::tempdir().unwrap();
        run_folder(root.path());
        let layout = Layout::of(root.path()).unwrap();
        assert_eq!(layout.runs, [PathBuf::new()]);
        assert!(layout.bench.is_none());
    }

    #[test]
    fn repeated_runs_are_the_sub_folders_with_records() {
        let root = tempfile::tempdir().unwrap();
        run_folder(&root.path().join("run-2"));
        run_folder(&root.path().join("run-1"));
        std::fs::create_dir(root.path().join("notes")).unwrap();
        let layout = Layout::of(root.path()).unwrap();
        assert_eq!(
            layout.runs,
            [PathBuf::from("run-1"), PathBuf::from("run-2")]
        );
    }

    #[test]
    fn a_bench_folder_lists_its_benchmarks_runs() {
        let root = tempfile::tempdir().unwrap();
        run_folder(&root.path().join("fast"));
        run_folder(&root.path().join("slow/run-1"));
        run_folder(&root.path().join("slow/run-2"));
        let entry = |name: &str| BenchEntry {
            name: name.into(),
            dir: name.into(),
            profile_time_s: None,
        };
        BenchIndex::new("pair", vec![entry("fast"), entry("slow")])
            .write(root.path())
            .unwrap();
        let layout = Layout::of(root.path()).unwrap();
        assert_eq!(
            layout.runs,
            [
                PathBuf::from("fast"),
                PathBuf::from("slow/run-1"),
                PathBuf::from("slow/run-2")
            ]
        );
        assert_eq!(layout.bench.map(|b| b.program), Some("pair".to_owned()));
    }

    #[test]
    fn a_folder_without_records_says_what_report_reads() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("report.json"), b"{}").unwrap();
        let err = Layout::of(root.path()).err().unwrap().to_string();
        assert!(err.contains("is not a run folder"), "{err}");
        assert!(err.contains("records.ppr"), "{err}");
        assert!(err.contains("--repeat"), "{err}");
    }
}
