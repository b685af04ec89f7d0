//! `cargo parprof --counters` end to end on the `page_faults` example, whose probed calls and
//! tasks cause known page-fault counts (each thread counts its own with `getrusage`): the
//! figures attributed from the program-wide counter, with their error bounds, must contain
//! the truth.

mod common;

use common::parprof;
use serde_json::Value;

/// Faults the program causes that no probe call, task or region asked for, but that fall into
/// their time windows: the runtime's own (rayon's job allocations, stack growth of the
/// workers, the recorder's bookkeeping). A few dozen in practice.
const RUNTIME_FAULTS_SLACK: f64 = 128.0;

const PROBES: [&str; 4] = [
    "touch_2000_pages",
    "touch_500_pages",
    "touch_1000_pages",
    "touch_250_pages",
];

/// (value, error, share) of `counter` attributed to the item of `kind` named `name`.
fn attributed(report: &Value, kind: &str, name: &str, counter: &str) -> (f64, f64, String) {
    let items = report["counters"]["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no counters.items in report.json: {report:#}"));
    let item = items
        .iter()
        .find(|i| i["kind"] == kind && i["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} `{name}` in counters.items: {items:#?}"));
    let c = item["counters"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["counter"] == counter))
        .unwrap_or_else(|| panic!("no {counter} for {kind} `{name}`: {item:#}"));
    (
        c["value"].as_f64().unwrap(),
        c["error"].as_f64().unwrap(),
        c["share"].as_str().unwrap().to_owned(),
    )
}

fn assert_contains_truth(what: &str, truth: f64, (value, error, share): &(f64, f64, String)) {
    eprintln!("{what}: truth {truth}, attributed {value:.0} ± {error:.0} ({share})");
    assert!(
        (value - truth).abs() <= error + RUNTIME_FAULTS_SLACK,
        "{what}: the truth {truth} lies outside {value:.1} ± {error:.1} (+ {RUNTIME_FAULTS_SLACK} slack)"
    );
    assert!(
        ["equal", "on_cpu_weighted", "mixed"].contains(&share.as_str()),
        "{share}"
    );
}

#[test]
fn attributed_page_faults_contain_the_known_counts() {
    let run = parprof(
        &[
            "--example",
            "page_faults",
            "--counters",
            "page-faults,task-clock,instructions",
        ],
        &[],
    );
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let report = run.report();
    let counters = &report["counters"];
    let collected: Vec<&str> = counters["collected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        collected.contains(&"page-faults") && collected.contains(&"task-clock"),
        "{counters:#}"
    );

    // Each probed call alone, and the four together: the calls begin and end where nothing
    // faults, so every fault in between went to one of them.
    let mut truths = 0.0;
    let mut values = 0.0;
    for probe in PROBES {
        let truth = run.printed(&format!("faults_{probe}")) as f64;
        let figure = attributed(
            &report,
            "probe",
            &format!("page_faults::{probe}"),
            "page-faults",
        );
        assert_contains_truth(probe, truth, &figure);
        truths += truth;
        values += figure.0;
    }
    eprintln!("the four probes: truth {truths}, attributed {values:.0}");
    assert!(
        (values - truths).abs() <= RUNTIME_FAULTS_SLACK,
        "the probes' values add up to {values}, their truth to {truths}"
    );

    let tasks_truth = run.printed("faults_region_tasks") as f64;
    let region = attributed(&report, "region", "touch_in_tasks", "page-faults");
    assert_contains_truth("region touch_in_tasks", tasks_truth, &region);
    let tasks = attributed(&report, "tasks", "tasks of touch_in_tasks", "page-faults");
    assert_contains_truth("tasks of touch_in_tasks", tasks_truth, &tasks);

    // A requested counter the machine lacks is listed with its reason, never shown as 0.
    let unavailable = counters["unavailable"].as_array().unwrap();
    match unavailable.iter().find(|u| u["name"] == "instructions") {
        Some(u) => {
            assert!(!collected.contains(&"instructions"));
            let reason = u["reason"].as_str().unwrap();
            assert!(!reason.is_empty());
            let md = std::fs::read_to_string(run.path("report.md")).unwrap();
            for text in [md.as_str(), run.summary().as_str()] {
                assert!(
                    text.contains("Not measured") && text.contains("`instructions`"),
                    "{text}"
                );
            }
        }
        None => assert!(collected.contains(&"instructions"), "{counters:#}"),
    }

    // Utilization over time: work executed never exceeds the slots available.
    let utilization = &report["utilization"];
    assert_eq!(utilization["period_ns"], 1_000_000);
    let periods = utilization["periods"].as_array().unwrap();
    assert!(!periods.is_empty(), "{utilization:#}");
    let mut executed_total = 0.0;
    for p in periods {
        let (executed, available) = (
            p["executed"].as_f64().unwrap(),
            p["available"].as_f64().unwrap(),
        );
        assert!(
            executed <= available * (1.0 + 1e-9) + 1e-6,
            "period {p}: executed {executed} > available {available}"
        );
        executed_total += executed;
    }
    assert!(executed_total > 0.0);
    assert!(run.path("utilization.svg").is_file());

    // Counter tracks in the Perfetto timeline.
    let timeline = std::fs::read_to_string(run.path("timeline.json")).unwrap();
    let timeline: Value = serde_json::from_str(&timeline).unwrap();
    let tracks = timeline["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "page-faults per ms")
        .count();
    assert!(tracks > 0, "no page-faults counter track in timeline.json");

    // report.html: one file that needs nothing else.
    let html = std::fs::read_to_string(run.path("report.html")).unwrap();
    for reference in ["src=\"http", "href=\"http", "<link", "@import", "url(http"] {
        assert!(
            !html.contains(reference),
            "report.html refers to an outside resource: {reference}"
        );
    }
    for text in [
        "page_faults::touch_2000_pages",
        "tasks of touch_in_tasks",
        "Parallelism over time",
        "parprof-data",
    ] {
        assert!(html.contains(text), "report.html lacks {text}");
    }
    check_in_browser(&run.path("report.html"), &report);
}

/// Loads the real report.html in headless Chromium (see `cargo-parprof/tests/html_browser.rs`
/// and `.ci/install-browser`): no console errors, nothing fetched, every figure rendered, and
/// selecting two probes shows the sum of their page faults that are attributed within half
/// their value, and how many were left out. Skipped with a message when the
/// browser is not installed, except under `CI`.
fn check_in_browser(page: &std::path::Path, report: &Value) {
    let items = report["counters"]["items"].as_array().unwrap();
    let picked = [
        "page_faults::touch_2000_pages",
        "page_faults::touch_500_pages",
    ];
    let indices: Vec<usize> = picked
        .iter()
        .map(|name| items.iter().position(|i| i["name"] == *name).unwrap())
        .collect();
    let Some(seen) = cargo_parprof::report::html::check_in_browser(page, &indices, None) else {
        return;
    };
    assert_eq!(seen["consoleErrors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["requests"], serde_json::json!([]), "{seen}");
    let figures = seen["figures"].as_array().unwrap();
    // Active, cpu and utilization; off-CPU where the kernel allowed switch samples.
    let offcpu = usize::from(report["offcpu"].is_object());
    assert_eq!(figures.len(), 3 + offcpu, "{seen}");
    for f in figures {
        assert!(
            f["width"].as_f64() > Some(100.0) && f["height"].as_f64() > Some(50.0),
            "figure not rendered: {f}"
        );
    }
    // The sum leaves out the figures whose error exceeds half of them, and says how many.
    let figures: Vec<(f64, f64)> = picked
        .iter()
        .map(|name| {
            let (value, error, _) = attributed(report, "probe", name, "page-faults");
            (value, error)
        })
        .collect();
    let trusted = |&&(value, error): &&(f64, f64)| error <= value / 2.0;
    let sum = figures.iter().filter(trusted).fold(0.0, |s, (v, _)| s + v);
    let left_out = figures.iter().filter(|f| !trusted(f)).count();
    let totals = &seen["totals"]["page-faults"];
    let shown = totals["value"]
        .as_str()
        .unwrap_or_default()
        .replace(',', "");
    assert_eq!(shown, format!("{}", sum.round()), "{seen}");
    assert_eq!(totals["left"], left_out.to_string(), "{seen}");
}

/// A recursive `join` down to single elements makes millions of tasks, and rayon's per-job
/// detail is sampled: the counters of the region's tasks cover all of them (the region's
/// figure × the workers' user-code share), not only the detail windows' few percent.
#[test]
fn the_tasks_of_a_sampled_region_cover_every_task() {
    let run = common::profile_example(
        "demo_quicksort",
        &["--counters", "task-clock", "--", "2000000", "1"],
        &[("RAYON_NUM_THREADS", "2")],
    );
    let report = run.report();
    let region = common::only_region(&run);
    let name = region["name"].as_str().expect("a name");
    let counted = region["tasks_counted_in_program"].as_u64().unwrap();
    let tasks = region["tasks"].as_u64().unwrap();
    assert!(
        counted * 2 > tasks,
        "most tasks outside the detail windows: {region:#}"
    );
    let states = &region["state_ns"];
    let worker_ns: f64 = ["UC", "LQ", "GS", "W"]
        .iter()
        .map(|s| states[s].as_f64().unwrap())
        .sum();
    // UC holds the time blocked in tasks too.
    let uc_share = states["UC"].as_f64().unwrap() / worker_ns;
    let (whole, _, _) = attributed(&report, "region", name, "task-clock");
    let (of_tasks, error, _) =
        attributed(&report, "tasks", &format!("tasks of {name}"), "task-clock");
    let expected = whole * uc_share;
    eprintln!(
        "region task-clock {whole:.0} × UC {uc_share:.3} = {expected:.0}; tasks {of_tasks:.0} ± {error:.0}"
    );
    assert!(
        (of_tasks - expected).abs() <= 0.1 * expected,
        "tasks {of_tasks} vs region × UC share {expected}"
    );
    assert!(
        (of_tasks - expected).abs() <= error,
        "the bound covers the difference"
    );
    assert!(
        of_tasks > 0.5 * whole,
        "the tasks used most of the region's CPU"
    );
    assert!(
        run.path("report.md").exists()
            && std::fs::read_to_string(run.path("report.md"))
                .unwrap()
                .contains("per-job detail sampled"),
        "the table says how the figure was taken"
    );
}
