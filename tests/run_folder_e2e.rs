//! Record once, analyse many: `cargo parprof report` on run folders the real `cargo parprof`
//! recorded, without building or running anything.

mod common;

use common::{cargo_parprof, codes, parprof};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

fn report(run: &Path, flags: &[&str]) -> Output {
    cargo_parprof()
        .arg("report")
        .arg(run)
        .args(flags)
        .output()
        .expect("run cargo")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn report_json(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("report.json"))
        .unwrap_or_else(|e| panic!("no report.json in {} ({e})", dir.display()));
    serde_json::from_str(&text).expect("report.json is JSON")
}

fn all_codes(report: &Value) -> Vec<String> {
    report["regions"]
        .as_array()
        .expect("regions[]")
        .iter()
        .flat_map(codes)
        .collect()
}

/// A copy of a run folder whose records are changed by `damage`.
fn damaged_copy(run: &Path, damage: impl FnOnce(&mut Vec<u8>)) -> tempfile::TempDir {
    let copy = tempfile::tempdir().expect("temporary directory");
    for entry in std::fs::read_dir(run).expect("the run folder") {
        let entry = entry.expect("an entry");
        std::fs::copy(entry.path(), copy.path().join(entry.file_name())).expect("copy");
    }
    let records = copy.path().join("records.ppr");
    let mut bytes = std::fs::read(&records).expect("records.ppr");
    damage(&mut bytes);
    std::fs::write(&records, bytes).expect("write records.ppr");
    copy
}

/// `quickstart` recorded twice (`--repeat 2`), and once more when the first run's finely cut
/// region misses `too_fine_granularity`, which the thresholds check below needs to turn off. That
/// region lasts about 11 ms with a dozen CPU samples in its tasks: with fewer than ten its
/// scheduler's share is not told, and LQ + GS alone read 8–36 % of its worker time (12 quiet
/// recordings, 2026-11-28: one of them 8 %, under the 10 % gate). Missed twice in a row fails.
fn quickstart_twice() -> common::Run {
    let record = || {
        let run = parprof(&["--example", "quickstart", "--repeat", "2"], &[]);
        assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
        run
    };
    let run = record();
    let first = report_json(&run.path("run-1"));
    if all_codes(&first)
        .iter()
        .any(|c| c == "too_fine_granularity")
    {
        return run;
    }
    eprintln!(
        "quickstart: no `too_fine_granularity` in the first run (machine busy?), recording again"
    );
    record()
}

#[test]
fn saved_runs_are_reported_again_figure_for_figure_and_with_other_thresholds() {
    let run = quickstart_twice();
    let (run_1, run_2) = (run.path("run-1"), run.path("run-2"));
    let recorded = [report_json(&run_1), report_json(&run_2)];
    // The runs' spread, saved beside them.
    let spread = report_json(run.dir.path());
    assert_eq!(spread["schema"], "parprof-repeat/1", "{spread:#}");
    assert_eq!(spread["runs"], 2, "{spread:#}");

    // The folder of repeated runs, reported elsewhere: every run as recorded.
    let out = tempfile::tempdir().expect("temporary directory");
    let again = report(run.dir.path(), &["-o", out.path().to_str().unwrap()]);
    assert!(again.status.success(), "stderr:\n{}", stderr(&again));
    for (name, recorded) in ["run-1", "run-2"].iter().zip(&recorded) {
        assert_eq!(&report_json(&out.path().join(name)), recorded, "{name}");
        assert!(out.path().join(name).join("cpu.svg").is_file());
    }
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("Spread over 2 runs"),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );

    // One run, in place: its reports are rewritten with the same figures.
    let in_place = report(&run_2, &[]);
    assert!(in_place.status.success(), "stderr:\n{}", stderr(&in_place));
    assert_eq!(report_json(&run_2), recorded[1]);

    // Other thresholds change the diagnoses, and nothing else is measured anew.
    let diagnosed = all_codes(&recorded[0]);
    assert!(
        diagnosed.iter().any(|c| c == "too_fine_granularity"),
        "quickstart's finely cut region is too fine: {:#}",
        recorded[0]["regions"]
    );
    for flags in [
        ["--min-region-elapsed", "1000s"],
        ["--active-overhead-threshold", "1000"],
    ] {
        let out = tempfile::tempdir().expect("temporary directory");
        let mut args = vec!["-o", out.path().to_str().unwrap()];
        args.extend(flags);
        let changed = report(&run_1, &args);
        assert!(changed.status.success(), "stderr:\n{}", stderr(&changed));
        let changed = report_json(out.path());
        let codes = all_codes(&changed);
        assert!(
            !codes.iter().any(|c| c == "too_fine_granularity"),
            "{flags:?}: {codes:?}"
        );
        assert_ne!(codes, diagnosed, "{flags:?}");
        assert_eq!(changed["probes"], recorded[0]["probes"], "{flags:?}");
        assert_eq!(changed["threads"], recorded[0]["threads"], "{flags:?}");
    }

    damaged_runs_are_refused_with_a_clear_error(&run_1);
}

fn damaged_runs_are_refused_with_a_clear_error(run: &Path) {
    // A flipped byte in the middle of the records.
    let flipped = damaged_copy(run, |bytes| {
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x5a;
    });
    let out = report(flipped.path(), &[]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    // Almost surely a checksum mismatch; a flip in a part's length may read as a cut file.
    assert!(
        err.contains("corrupt run records") || err.contains("is cut after byte"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    // Cut records (before their end part: a cut in the symbols after it only makes `report`
    // symbolise the samples again): refused unless --partial, which analyses what is left
    // and says so.
    let records_len = cargo_parprof::recording::load(run)
        .expect("the records")
        .records_len
        .expect("version 2 records") as usize;
    let cut = damaged_copy(run, |bytes| bytes.truncate(records_len * 2 / 3));
    let out = report(cut.path(), &[]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("is cut after byte") && err.contains("--partial"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let partial = report(cut.path(), &["--partial"]);
    assert!(partial.status.success(), "stderr:\n{}", stderr(&partial));
    let notes = report_json(cut.path())["notes"].to_string();
    assert!(notes.contains("were cut after byte"), "{notes}");

    // Records cut inside their first part: nothing to analyse.
    let empty = damaged_copy(run, |bytes| bytes.truncate(20));
    let out = report(empty.path(), &["--partial"]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("end before their first part"), "{err}");

    // A folder without records.
    let none = tempfile::tempdir().expect("temporary directory");
    let out = report(none.path(), &[]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("is not a run folder"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The profiling executable of `example`: the last line `cargo parprof build` printed.
fn build(example: &str) -> std::path::PathBuf {
    let output = cargo_parprof()
        .args(["build", "--example", example])
        .output()
        .expect("run cargo");
    assert!(output.status.success(), "stderr:\n{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    std::path::PathBuf::from(stdout.lines().last().expect("a path on stdout"))
}

/// Polls `found` every millisecond for up to a minute.
fn wait_for<T>(what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Some(it) = found() {
            return it;
        }
        assert!(std::time::Instant::now() < deadline, "no {what} after 60 s");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The pid of the program recorded into `dir`, from its trace's name (`trace-<pid>.ppt`).
fn traced_pid(dir: &Path) -> Option<i32> {
    std::fs::read_dir(dir).ok()?.find_map(|e| {
        let name = e.ok()?.file_name().into_string().ok()?;
        name.strip_prefix("trace-")?
            .strip_suffix(".ppt")?
            .parse()
            .ok()
    })
}

/// A program killed mid-run, then the profiler killed as soon as the records were saved
/// (before its symbols were appended, which takes it a while): `report` symbolises the samples
/// from the mappings saved with them and appends the symbols.
#[test]
fn a_run_saved_before_its_symbols_is_symbolised_by_report() {
    use cargo_parprof::recording;
    // Held while building too: a build beside another test's recording takes its cores.
    let _machine = common::exclusive();
    let exe = build("long_run");
    let run = tempfile::tempdir().expect("temporary directory");
    let mut profiler = std::process::Command::new(common::parprof_binary())
        .arg("record")
        .arg("-o")
        .arg(run.path())
        .arg("--")
        .arg(&exe)
        .arg("30")
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("cargo-parprof record");
    let pid = wait_for("trace", || traced_pid(run.path()));
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: kill(2) with a pid and a signal number; the pid is the profiled program's.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let records = run.path().join(recording::RECORDS_FILE);
    wait_for("records", || records.is_file().then_some(()));
    profiler.kill().expect("kill the profiler");
    profiler.wait().expect("wait for the profiler");

    let loaded = recording::load(run.path()).expect("the records");
    assert_eq!(loaded.completeness, recording::Completeness::Complete);
    let records_len = loaded.records_len.expect("version 2 records");
    if !loaded.recording.needs_symbols() {
        // The profiler appended the symbols before it was killed: cut them off, and a byte
        // into them, as an append cut short leaves the file.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&records)
            .unwrap();
        file.set_len(records_len + 1).unwrap();
    }
    let unsymbolised = recording::load(run.path()).expect("the records");
    assert!(unsymbolised.recording.needs_symbols());
    assert!(!unsymbolised.recording.kernel.samples.is_empty());
    assert_eq!(unsymbolised.recording.run.exit.signal, Some(libc::SIGKILL));

    let out = tempfile::tempdir().expect("temporary directory");
    let out_flags = ["-o", out.path().to_str().expect("a UTF-8 path")];
    let reported = report(run.path(), &out_flags);
    assert!(reported.status.success(), "stderr:\n{}", stderr(&reported));
    assert!(
        stderr(&reported).contains("symbolising them"),
        "{}",
        stderr(&reported)
    );
    let cpu = std::fs::read_to_string(out.path().join("cpu.folded")).expect("cpu.folded");
    assert!(cpu.contains("long_run::"), "{cpu}");
    // Whole and symbolised now: `load` leaves the long lists in the file, to be walked.
    let walked = recording::load(run.path()).expect("the records");
    assert!(walked.recording.kernel.stored.is_some());
    let file = std::fs::File::open(&records).expect("the records");
    let symbolised = recording::format::read(std::io::BufReader::new(file)).expect("the records");
    assert!(!symbolised.recording.needs_symbols());
    assert_eq!(symbolised.recording.kernel, {
        let mut k = unsymbolised.recording.kernel.clone();
        k.stacks = symbolised.recording.kernel.stacks.clone();
        k.sample_stacks = symbolised.recording.kernel.sample_stacks.clone();
        k.switch_sample_stacks = symbolised.recording.kernel.switch_sample_stacks.clone();
        k
    });
    // A second report reads the symbols saved.
    let again = report(run.path(), &out_flags);
    assert!(again.status.success(), "stderr:\n{}", stderr(&again));
    assert!(
        !stderr(&again).contains("symbolising them"),
        "{}",
        stderr(&again)
    );
    let cpu_again = std::fs::read_to_string(out.path().join("cpu.folded")).expect("cpu.folded");
    assert_eq!(cpu_again, cpu);
}
