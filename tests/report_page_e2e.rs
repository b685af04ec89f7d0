//! report.html of a real run, in the real browser: `cargo parprof --example quickstart`, then
//! headless Chromium (see `cargo-parprof/tests/html_browser.rs` for the driver) checks that
//! every section a person reads is there and shown, its table within the page's width, that
//! the figures fill the page's width without blank space, and keeps a screenshot for a person to look at:
//! `target/parprof-test-output/report.png`.

mod common;

use cargo_parprof::report::html::check_in_browser;
use common::{parprof, repo_root};

#[test]
fn every_section_of_a_real_report_is_shown() {
    let run = parprof(&["--example", "quickstart"], &[]);
    assert!(run.output.status.success(), "stderr:\n{}", run.stderr());
    let kept = repo_root().join("target/parprof-test-output");
    std::fs::create_dir_all(&kept).unwrap();
    let screenshot = kept.join("report.png");
    let Some(seen) = check_in_browser(&run.path("report.html"), &[], Some(&screenshot)) else {
        return;
    };
    eprintln!("screenshot of report.html: {}", screenshot.display());
    assert!(screenshot.is_file(), "no screenshot");

    assert_eq!(seen["consoleErrors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["requests"], serde_json::json!([]), "{seen}");
    let sections = seen["sections"].as_array().expect("sections");
    for id in [
        "summary",
        "diagnoses",
        "regions",
        "probes",
        "threads",
        "figures",
    ] {
        let s = sections
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("no section `{id}`: {sections:#?}"));
        assert!(
            s["visible"] == true && s["height"].as_f64() > Some(30.0),
            "section `{id}` is not shown: {s}"
        );
        // Every column in sight at the page's width (the regions table's diagnoses were
        // reached only by scrolling it sideways).
        assert!(
            s["tableOverflow"].as_f64() <= Some(0.0),
            "section `{id}`'s table is wider than the page: {s}"
        );
    }
    let page_width = sections[0]["width"].as_f64().unwrap();
    let figures = seen["figures"].as_array().expect("figures");
    let captions: Vec<&str> = figures
        .iter()
        .map(|f| f["caption"].as_str().unwrap())
        .collect();
    assert!(
        figures.len() >= 3,
        "utilization, active and cpu: {captions:?}"
    );
    for f in figures {
        let (w, h) = (f["width"].as_f64().unwrap(), f["height"].as_f64().unwrap());
        assert!(
            w >= 0.9 * page_width && h > 100.0,
            "figure not at the page's width ({page_width}): {f}"
        );
    }
    // A flamegraph's frame is as tall as its drawing: no blank screen below it.
    let frames = seen["frames"].as_array().expect("frames");
    let iframes = figures.iter().filter(|f| f["kind"] == "iframe");
    for (frame, figure) in frames.iter().zip(iframes) {
        let (inner, outer) = (
            frame["height"].as_f64().unwrap(),
            figure["height"].as_f64().unwrap(),
        );
        assert!(
            outer <= inner + 40.0,
            "{} px of frame for {inner} px of drawing: {figure}",
            outer
        );
    }
}
