//! report.html in a real browser: headless Chromium (the system's, driven by playwright-core
//! from `tests/browser`) loads a report made from synthetic input, and the test checks what
//! a person would see: no console errors, nothing fetched, every figure rendered with a size,
//! and the sums of the selected items' counters with their errors.
//!
//! `.ci/install-browser` installs chromium and playwright-core. Without them the test is
//! skipped with a message, except under `CI`, where it fails.

use cargo_parprof::analysis::attribution::ShareKind;
use cargo_parprof::analysis::utilization::{ON_CPU_UNIT, Period, Utilization};
use cargo_parprof::report::html::{
    HtmlCounter, HtmlDiagnosis, HtmlInput, HtmlItem, HtmlTable, check_in_browser, render,
};
use cargo_parprof::report::plot::utilization_svg;

fn counter(name: &str, value: f64, error: f64, share: ShareKind) -> HtmlCounter {
    HtmlCounter {
        counter: name.into(),
        value,
        error,
        share,
    }
}

fn synthetic_input() -> HtmlInput {
    let period_ns = 1_000_000;
    let utilization = Utilization {
        period_ns,
        unit: ON_CPU_UNIT.into(),
        origin_ns: 0,
        cpus: vec![0, 1],
        periods: (0..20)
            .map(|i| Period {
                t_ns: i * period_ns,
                executed: if (5..15).contains(&i) { 1.8e6 } else { 0.9e6 },
                available: 2e6,
                per_cpu: Vec::new(),
            })
            .collect(),
    };
    let plot = utilization_svg(
        &utilization,
        &[("sum_rows".into(), 5 * period_ns, 15 * period_ns)],
    )
    .expect("plot");
    // A real inferno flamegraph, with its scripts.
    let mut flame = Vec::new();
    inferno::flamegraph::from_lines(
        &mut inferno::flamegraph::Options::default(),
        [
            "main;sum_rows;hot_kernel 700",
            "main;sum_rows;</script> 10",
            "main;setup 300",
        ],
        &mut flame,
    )
    .expect("flamegraph");

    HtmlInput {
        title: "parprof: demo <synthetic>".into(),
        summary_lines: vec!["wall time 20 ms".into(), "2 CPUs used".into()],
        diagnoses: vec![HtmlDiagnosis {
            code: "load_imbalance".into(),
            region: "sum_rows".into(),
            evidence: "workers waited 40% of the region".into(),
            impact: "up to 8 ms".into(),
            advice: "split the largest tasks".into(),
        }],
        tables: vec![HtmlTable {
            id: "regions".into(),
            title: "Parallel regions".into(),
            header: vec!["region".into(), "elapsed".into()],
            rows: vec![vec!["sum_rows".into(), "10 ms".into()]],
            note: None,
        }],
        svgs: vec![
            ("Parallelism over time".into(), plot),
            (
                "Active time".into(),
                String::from_utf8(flame).expect("utf-8"),
            ),
        ],
        items: vec![
            HtmlItem {
                kind: "task".into(),
                name: "sum_rows task 1".into(),
                counters: vec![
                    counter("page-faults", 1500.0, 250.0, ShareKind::Equal),
                    counter("task-clock", 2.5, 0.5, ShareKind::Equal),
                ],
            },
            HtmlItem {
                kind: "probe".into(),
                name: "hot_kernel<f32>".into(),
                counters: vec![counter("page-faults", 7.0, 0.5, ShareKind::Equal)],
            },
            HtmlItem {
                kind: "region".into(),
                name: "sum_rows".into(),
                counters: vec![
                    counter("page-faults", 300.0, 100.0, ShareKind::OnCpuWeighted),
                    counter("task-clock", 4.0, 0.25, ShareKind::OnCpuWeighted),
                ],
            },
            // Drowned in its error: shown as its cause, left out of sums.
            HtmlItem {
                kind: "probe".into(),
                name: "beside_others".into(),
                counters: vec![counter("page-faults", 10.0, 40.0, ShareKind::Equal)],
            },
        ],
    }
}

#[test]
fn report_html_renders_and_sums_the_selected_items() {
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("report.html");
    std::fs::write(&report, render(&synthetic_input())).expect("write report.html");
    let Some(seen) = check_in_browser(&report, &[0, 2, 3], None) else {
        return;
    };

    assert_eq!(seen["consoleErrors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["requests"], serde_json::json!([]), "{seen}");

    let figures = seen["figures"].as_array().expect("figures");
    assert_eq!(figures.len(), 2, "{seen}");
    assert_eq!(figures[0]["kind"], "svg");
    assert_eq!(figures[1]["kind"], "iframe");
    for f in figures {
        assert!(
            f["width"].as_f64() > Some(100.0) && f["height"].as_f64() > Some(100.0),
            "figure not rendered: {f}"
        );
    }
    let frames = seen["frames"].as_array().expect("frames");
    assert_eq!(frames.len(), 1, "{seen}");
    assert_eq!(frames[0]["root"], "svg");
    assert!(frames[0]["width"].as_f64() > Some(100.0), "{seen}");

    assert!(
        seen["before"]
            .as_str()
            .unwrap_or("")
            .contains("Nothing selected")
    );
    let shown = seen["shown"].as_str().unwrap_or("");
    assert!(
        shown.contains("task sum_rows task 1") && shown.contains("region sum_rows"),
        "{shown}"
    );
    // Items 0 and 2: values and errors are summed; item 3's figure, drowned in its error,
    // is left out.
    let totals = &seen["totals"];
    assert_eq!(totals["page-faults"]["value"], "1,800", "{seen}");
    assert_eq!(totals["page-faults"]["left"], "1", "{seen}");
    assert_eq!(totals["task-clock"]["left"], "none", "{seen}");
    let text = seen["text"].as_str().unwrap_or("");
    assert!(
        text.contains("— (error > value: shared with other threads)") && !text.contains("±>100%"),
        "{text}"
    );
    // Within 10%: the one item attributed that well.
    assert_eq!(seen["withinTenPercent"][0]["index"], 1, "{seen}");
    assert_eq!(seen["withinTenPercent"].as_array().map(Vec::len), Some(1));
    assert_eq!(totals["page-faults"]["error"], "± 350");
    assert_eq!(totals["task-clock"]["value"], "6.5");
    assert_eq!(totals["task-clock"]["error"], "± 0.75");
    // Shared in different ways: the page says so.
    assert_eq!(
        totals["page-faults"]["share"],
        "on-CPU-weighted share where known, 1/n elsewhere"
    );
}
