//! Recording where the cores are: `cargo parprof build` here, then the executable and
//! `cargo-parprof` copied into an empty folder and recorded there with neither cargo nor rustc
//! in `PATH`, then `cargo parprof report` of the copied run folder — against the same program
//! profiled directly. And what `record` says of executables it cannot record as asked.

mod common;

use common::{Run, codes, only_region, work_codes};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EXAMPLE: &str = "rayon_too_fine";

/// The profiling executable of `example`: the last line `cargo parprof build` printed.
fn build(example: &str) -> PathBuf {
    let output = common::cargo_parprof()
        .args(["build", "--example", example])
        .output()
        .expect("run cargo");
    let (stdout, stderr) = texts(&output);
    assert!(output.status.success(), "stderr:\n{stderr}");
    let exe = PathBuf::from(stdout.lines().last().expect("a path on stdout"));
    assert!(
        exe.is_file(),
        "{} is no file; stdout:\n{stdout}",
        exe.display()
    );
    assert!(stderr.contains("rayon-core"), "{stderr}");
    exe
}

fn texts(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn report_json(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("report.json"))
        .unwrap_or_else(|e| panic!("no report.json in {} ({e})", dir.display()));
    serde_json::from_str(&text).expect("report.json is JSON")
}

/// `cargo-parprof record -o run -- <program>` run in `dir` with only the environment given:
/// `PATH` holds one empty folder, so no cargo and no rustc can be found.
fn record_without_toolchain(dir: &Path, parprof: &Path, program: &str) -> Output {
    let empty_bin = dir.join("empty-bin");
    std::fs::create_dir_all(&empty_bin).expect("a folder for PATH");
    Command::new(parprof)
        .current_dir(dir)
        .env_clear()
        .env("PATH", &empty_bin)
        .env("RAYON_NUM_THREADS", "2")
        .args(["record", "-o", "run", "--", program])
        .output()
        .expect("run the copied cargo-parprof")
}

fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("the copy's folder");
    for entry in std::fs::read_dir(from).expect("the run folder") {
        let entry = entry.expect("an entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

/// The region's lifecycle: its tasks and the share of worker time in each state.
fn assert_lifecycle(region: &Value) {
    assert!(region["tasks"].as_u64().unwrap_or(0) > 1000, "{region:#}");
    assert!(
        codes(region).contains(&"too_fine_granularity".to_owned()),
        "{region:#}"
    );
}

#[test]
fn a_program_built_here_is_recorded_elsewhere_and_reported_as_if_profiled_directly() {
    // Built holding the machine: a build beside the other test's recording takes its cores.
    let (exe, parprof) = {
        let _machine = common::exclusive();
        (build(EXAMPLE), common::parprof_binary())
    };
    let elsewhere = tempfile::tempdir().expect("temporary directory");
    let copied_exe = elsewhere.path().join(EXAMPLE);
    std::fs::copy(&exe, &copied_exe).expect("copy the executable");
    let copied_parprof = elsewhere.path().join("cargo-parprof");
    std::fs::copy(&parprof, &copied_parprof).expect("copy cargo-parprof");

    let recorded = {
        let _machine = common::exclusive();
        record_without_toolchain(elsewhere.path(), &copied_parprof, &format!("./{EXAMPLE}"))
    };
    let (_, stderr) = texts(&recorded);
    assert!(recorded.status.success(), "stderr:\n{stderr}");
    assert!(
        stderr.contains("recording the workers' lifecycle"),
        "{stderr}"
    );
    // The summary is on stderr: the recorded program owns stdout.
    assert!(stderr.contains("too_fine_granularity"), "{stderr}");
    let run = elsewhere.path().join("run");
    let at_record = report_json(&run);
    assert_eq!(
        at_record["rayon_hooks"]["status"], "hooked",
        "{at_record:#}"
    );

    // The run folder, copied back, is reported again figure for figure.
    let back = tempfile::tempdir().expect("temporary directory");
    copy_folder(&run, back.path());
    drop(elsewhere);
    let again = common::cargo_parprof()
        .arg("report")
        .arg(back.path())
        .output()
        .expect("run cargo");
    assert!(again.status.success(), "stderr:\n{}", texts(&again).1);
    let (reported, at_record) = (report_json(back.path()), at_record);
    assert_eq!(
        without_trace_path(&reported),
        without_trace_path(&at_record)
    );
    let region = only_region_of(&reported);
    assert_lifecycle(&region);

    // The same program profiled directly has the same lifecycle and the planted diagnosis.
    // (Two runs of a 45 ms region on 2 cores may differ in a secondary one: a worker woken
    // late once shows as a moment of imbalance.)
    let direct: Run = common::profile_example(EXAMPLE, &[], &[("RAYON_NUM_THREADS", "2")]);
    let direct_region = only_region(&direct);
    assert_lifecycle(&direct_region);
    assert_eq!(direct_region["name"], region["name"]);
    for r in [&direct_region, &region] {
        assert!(
            work_codes(r).contains(&"too_fine_granularity".to_owned()),
            "{r:#}"
        );
    }
}

/// The report without the path its trace was read from (the run folder's, wherever it is),
/// checked to name the same trace file.
fn without_trace_path(report: &Value) -> Value {
    let mut report = report.clone();
    let file = report["trace"]["file"].take();
    let name = Path::new(file.as_str().expect("trace.file")).file_name();
    report["trace"]["file"] = Value::from(name.expect("a file name").to_string_lossy());
    report
}

fn only_region_of(report: &Value) -> Value {
    let regions = report["regions"].as_array().expect("regions[]");
    assert_eq!(regions.len(), 1, "{regions:#?}");
    regions[0].clone()
}

/// `record` with a program that is no program: a clear message, nothing recorded.
#[test]
fn what_cannot_run_is_refused_with_a_clear_message() {
    let parprof = common::parprof_binary();
    let dir = tempfile::tempdir().expect("temporary directory");
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a program").expect("write a text file");
    let cases = [
        ("./missing", "no such file"),
        ("missing-program-of-parprof", "no such program in PATH"),
        ("./notes.txt", "is not executable (mode 644)"),
        (".", "is a folder, not an executable"),
    ];
    for (program, expected) in cases {
        let output = record_without_toolchain(dir.path(), &parprof, program);
        let (_, stderr) = texts(&output);
        assert_eq!(output.status.code(), Some(101), "{program}: {stderr}");
        assert!(stderr.contains(expected), "{program}: {stderr}");
        assert!(
            !dir.path().join("run").exists(),
            "{program} made a run folder"
        );
    }
}

/// A program built by plain cargo is recorded without the lifecycle, and the report says why,
/// once.
#[test]
fn a_program_not_built_by_parprof_is_recorded_without_the_lifecycle() {
    // Built holding the machine: a build beside the other test's recording takes its cores.
    let building = common::exclusive();
    let parprof = common::parprof_binary();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(cargo)
        .current_dir(common::repo_root())
        .args(["build", "--quiet", "--example", EXAMPLE])
        .status()
        .expect("run cargo build");
    assert!(built.success());
    drop(building);
    let plain = parprof.parent().unwrap().join("examples").join(EXAMPLE);
    let dir = tempfile::tempdir().expect("temporary directory");
    let output = {
        let _machine = common::exclusive();
        record_without_toolchain(dir.path(), &parprof, plain.to_str().unwrap())
    };
    let (_, stderr) = texts(&output);
    assert!(output.status.success(), "stderr:\n{stderr}");
    assert!(
        stderr.contains("without rayon's worker lifecycle"),
        "{stderr}"
    );
    let report = report_json(&dir.path().join("run"));
    assert_eq!(report["rayon_hooks"]["status"], "unavailable", "{report:#}");
    let notes: Vec<&str> = report["notes"]
        .as_array()
        .expect("notes[]")
        .iter()
        .filter_map(Value::as_str)
        .filter(|n| n.contains("not built by `cargo parprof build`"))
        .collect();
    assert_eq!(notes.len(), 1, "{report:#}");
    assert!(
        stderr.contains("not built by `cargo parprof build`"),
        "{stderr}"
    );
}
