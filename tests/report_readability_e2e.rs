//! What a reviewer reads at a glance, on a real run with counters (`cargo parprof --example
//! quickstart`, whose tasks run beside each other so that some attributed figures are drowned
//! in their error):
//! - report.html in Chromium: no markdown backtick and no "±>100%" in the visible text; a
//!   figure whose error exceeds half of it shows its cause and is left out of a selection's
//!   sums; asking for items attributed within 10% leaves only such items;
//! - cpu.svg: a label too long for its box keeps the function's own name (the last path
//!   segment), in the file and once the SVG's script has laid it out in Chromium.

mod common;

use cargo_parprof::report::html::check_in_browser;
use common::{Run, profile_example, repo_root};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const COUNTERS: &str = "task-clock,page-faults,context-switches";

fn run() -> Run {
    profile_example("quickstart", &["--counters", COUNTERS], &[])
}

/// Relative error of a counter of `report.json`'s `counters.items`, as the page computes it.
fn relative(c: &Value) -> f64 {
    let (v, e) = (c["value"].as_f64().unwrap(), c["error"].as_f64().unwrap());
    if e <= 0.0 {
        0.0
    } else if v <= 0.0 {
        f64::INFINITY
    } else {
        e / v
    }
}

#[test]
fn report_html_reads_without_backticks_or_drowned_figures() {
    let run = run();
    let report = run.report();
    let items = report["counters"]["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no counters.items: {report:#}"))
        .clone();
    assert!(!items.is_empty(), "no attributed items: {report:#}");
    // One item with a figure drowned in its error and one whose figures are all good, picked
    // together: the drowned figure is left out of the sum.
    let drowned = items.iter().position(|i| {
        i["counters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| relative(c) > 0.5)
    });
    let mut picked: Vec<usize> = drowned.into_iter().collect();
    picked.extend(items.iter().position(|i| {
        i["counters"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| relative(c) <= 0.5)
    }));

    let md = std::fs::read_to_string(run.path("report.md")).unwrap();
    assert!(!md.contains("±>100%"), "report.md:\n{md}");

    let kept = repo_root().join("target/parprof-test-output");
    std::fs::create_dir_all(&kept).unwrap();
    let Some(seen) = check_in_browser(
        &run.path("report.html"),
        &picked,
        Some(&kept.join("report-readability.png")),
    ) else {
        return;
    };
    assert_eq!(seen["consoleErrors"], serde_json::json!([]), "{seen}");
    let text = seen["text"].as_str().expect("the page's text");
    assert!(text.contains("Tasks, probes and regions"), "{text}");
    assert!(!text.contains('`'), "a backtick is shown:\n{text}");
    assert!(
        !text.contains("±>100%"),
        "a drowned figure is shown:\n{text}"
    );

    if let Some(d) = drowned {
        // The cause is shown in its place, and the sum leaves it out.
        assert!(text.contains("— (error"), "{text}");
        let drowned_counters: Vec<&str> = items[d]["counters"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| relative(c) > 0.5)
            .map(|c| c["counter"].as_str().unwrap())
            .collect();
        for counter in drowned_counters {
            let total = &seen["totals"][counter];
            assert!(
                total["left"].as_str().is_some_and(|l| l != "none"),
                "{counter} summed with its drowned figure: {seen}"
            );
        }
    } else {
        eprintln!("no attributed figure of this run had an error over half of it");
    }

    // Within 10%: exactly the items whose every counter is within 10%.
    let within: Vec<usize> = seen["withinTenPercent"]
        .as_array()
        .expect("the error control")
        .iter()
        .map(|r| r["index"].as_u64().unwrap() as usize)
        .collect();
    let expected: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, i)| {
            i["counters"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| relative(c) <= 0.1)
        })
        .map(|(n, _)| n)
        .collect();
    assert_eq!(within, expected, "{seen}");
    assert!(within.len() < items.len() || drowned.is_none());
}

/// `name` as the flamegraph's label rule keeps it: its own name and what follows (closures).
fn own_name(name: &str) -> &str {
    let mut segments: Vec<&str> = name.split("::").collect();
    while segments.len() > 1 && segments.last().is_some_and(|s| s.starts_with('{')) {
        segments.pop();
    }
    let own = segments.last().copied().unwrap_or(name);
    &name[name.rfind(own).unwrap_or(0)..]
}

/// (name, label) of every frame of an SVG document's text: `<g><title>NAME (…)</title>…
/// <text …>LABEL</text>`.
fn labels(svg: &str) -> Vec<(String, String)> {
    let unescape = |t: &str| {
        t.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&apos;", "'")
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
    };
    svg.split("<g><title>")
        .skip(1)
        .filter_map(|frame| {
            let title = &frame[..frame.find("</title>")?];
            let name = &title[..title.rfind(" (")?];
            let text = &frame[frame.find("<text")?..];
            let label = &text[text.find('>')? + 1..text.find("</text>")?];
            Some((unescape(name), unescape(label)))
        })
        .collect()
}

/// Every shortened label of a path name keeps its own name, whole or cut at its end; at
/// least one lost its middle.
fn check_labels(svg: &str, what: &str) {
    let labels = labels(svg);
    assert!(!labels.is_empty(), "{what}: no frames");
    let mut elided = 0;
    for (name, label) in &labels {
        if label.is_empty() || label == name || !name.contains("::") {
            continue;
        }
        let own = own_name(name);
        assert!(!label.ends_with(".."), "{what}: `{name}` cut as `{label}`");
        let kept_end = label.ends_with(own);
        let kept_start = label
            .strip_suffix('…')
            .is_some_and(|start| own.starts_with(start) && !start.is_empty());
        assert!(
            kept_end || kept_start,
            "{what}: `{name}` labelled `{label}`, without its own name `{own}`"
        );
        elided += usize::from(kept_end && label.contains('…'));
    }
    assert!(elided > 0, "{what}: no label lost its middle: {labels:#?}");
}

#[test]
fn cpu_svg_labels_keep_the_function_name() {
    let run = run();
    let svg = std::fs::read_to_string(run.path("cpu.svg")).unwrap();
    check_labels(&svg, "cpu.svg");

    // As Chromium lays it out: inferno's script sets the labels again on load.
    let chromium = std::env::var_os("PARPROF_CHROMIUM")
        .map_or_else(|| "/usr/bin/chromium".into(), std::path::PathBuf::from);
    if !Path::new(&chromium).is_file() {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "no chromium at {}: run .ci/install-browser",
            chromium.display()
        );
        eprintln!(
            "SKIPPED the browser half: no chromium at {}",
            chromium.display()
        );
        return;
    }
    let out = Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1200,800",
            "--dump-dom",
        ])
        .arg(format!("file://{}", run.path("cpu.svg").display()))
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    check_labels(&dom, "cpu.svg in Chromium");
}
