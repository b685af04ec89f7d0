//! The summary printed at the end of a run.

use super::regions::{diagnosed, impact_text};
use super::tables;
use super::wording::{
    TOP_PROBES, completeness_text, correction_percent, correction_sentence, exit_text,
    human_duration,
};
use crate::analysis::Analysis;
use crate::units::per_call_figure;
use std::fmt::Write;

/// Longest probe name shown before it is shortened (from the left: the end names the function).
const NAME_WIDTH: usize = 48;

fn shorten(name: &str) -> String {
    let chars = name.chars().count();
    if chars <= NAME_WIDTH {
        name.to_owned()
    } else {
        let tail: String = name.chars().skip(chars - (NAME_WIDTH - 1)).collect();
        format!("…{tail}")
    }
}

/// The terminal summary: the diagnoses of parallel regions and a row per region, then top
/// probes by self active time, how much the correction changed them, and what could not be
/// measured.
pub fn summary(analysis: &Analysis) -> String {
    let mut out = String::new();
    let name = if analysis.target.name.is_empty() {
        "the program"
    } else {
        analysis.target.name.as_str()
    };
    // `write!` to a String cannot fail.
    let _ = writeln!(
        out,
        "parprof: {name}: {}, {} threads, {} probe events, {}",
        exit_text(&analysis.exit),
        analysis.threads.len(),
        analysis.trace.events,
        completeness_text(&analysis.trace.completeness)
    );
    if let Some(measured) = super::wording::bench_measured(analysis) {
        let _ = writeln!(out, "measured: {measured}");
    }
    write_regions(analysis, &mut out);
    if analysis.probes.is_empty() {
        out.push_str("\nNo probe calls were recorded.\n");
    } else {
        let _ = writeln!(out, "\nTop probes by self active time:");
        let _ = writeln!(
            out,
            "  {:>11}  {:>10}  {:>10}  {:>10}  {:>9}  probe",
            "self active", "active", "elapsed", "correction", "calls"
        );
        for p in analysis.probes.iter().take(TOP_PROBES) {
            let _ = writeln!(
                out,
                "  {:>11}  {:>10}  {:>10}  {:>10}  {:>9}  {}",
                human_duration(p.self_active_ns),
                human_duration(p.active_ns),
                human_duration(p.elapsed_ns),
                correction_percent(p.elapsed_ns, p.active_ns),
                p.calls,
                shorten(&p.name)
            );
        }
        if analysis.probes.len() > TOP_PROBES {
            let _ = writeln!(
                out,
                "  … {} more in report.json",
                analysis.probes.len() - TOP_PROBES
            );
        }
        if let Some(sentence) = correction_sentence(analysis) {
            let _ = writeln!(out, "\nCorrection: {sentence}.");
        }
    }
    write_slices(analysis, &mut out);
    let notes = super::wording::notes(analysis);
    if !notes.is_empty() {
        let _ = writeln!(out, "\nNot measured, or may be off:");
        for note in &notes {
            let _ = writeln!(out, "  - {note}");
        }
    }
    out
}

/// Probes with their exact per-call counters (method 5), the most measured first.
fn write_slices(analysis: &Analysis, out: &mut String) {
    let Some(s) = &analysis.slices else { return };
    let _ = writeln!(out, "\nExact per-call counters ({}):", s.mode.label());
    let _ = writeln!(out, "  {}", super::wording::slices_sentence(s));
    for p in s.probes.iter().take(TOP_PROBES) {
        let figures: Vec<String> = s
            .counters
            .iter()
            .filter_map(|c| {
                let mean = p.counters.get(c)?;
                let attributed = p.attributed.get(c).map_or(String::new(), |a| {
                    format!(" (attributed {})", per_call_figure(c, a.value))
                });
                Some(format!("{c} {}{attributed}", per_call_figure(c, *mean)))
            })
            .collect();
        let _ = writeln!(
            out,
            "  {:>9} calls  {}  {}",
            p.calls_observed,
            shorten(&p.name),
            figures.join(", ")
        );
    }
}

/// The diagnoses, each with its region, evidence, impact and advice; then one row per region.
/// Nothing when the program entered no parallel region.
fn write_regions(analysis: &Analysis, out: &mut String) {
    if analysis.regions.is_empty() {
        return;
    }
    let mut diagnoses = diagnosed(&analysis.regions).peekable();
    if diagnoses.peek().is_none() {
        let _ = writeln!(
            out,
            "\nNo parallel-overhead diagnosis in {} parallel region(s).",
            analysis.regions.len()
        );
    } else {
        let _ = writeln!(out, "\nDiagnoses:");
        for (i, (region, d)) in diagnoses.enumerate() {
            let _ = writeln!(
                out,
                "  {}. region `{}`: {}\n     evidence: {}\n     impact:   {}\n     advice:   {}",
                i + 1,
                region.name,
                d.code.as_str(),
                d.evidence.summary,
                impact_text(region, d),
                d.advice
            );
        }
    }
    let _ = writeln!(
        out,
        "\nParallel regions (share of worker time per state; preempted: switched out while runnable, any state, of worker time):"
    );
    write_region_table(&tables::regions(analysis), out);
}

/// The regions' table with its figures in aligned columns, then each region's name and
/// diagnoses (the table's first and last columns) at the end of its line.
fn write_region_table(table: &tables::Table, out: &mut String) {
    let last = table.header.len().saturating_sub(1);
    let width = |i: usize| {
        table
            .rows
            .iter()
            .map(|row| row[i].chars().count())
            .chain([table.header[i].chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (1..last).map(width).collect();
    let line = |cells: &[String]| {
        let figures: Vec<String> = (1..last)
            .zip(&widths)
            .map(|(i, w)| format!("{:>w$}", cells[i]))
            .collect();
        format!("  {}  ", figures.join("  "))
    };
    let _ = writeln!(out, "{}region: diagnoses", line(&table.header));
    for row in &table.rows {
        let _ = writeln!(out, "{}{}: {}", line(row), shorten(&row[0]), row[last]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_keep_their_end() {
        let long = format!("{}::hot_kernel", "a".repeat(60));
        let short = shorten(&long);
        assert_eq!(short.chars().count(), NAME_WIDTH);
        assert!(short.starts_with('…') && short.ends_with("::hot_kernel"));
        assert_eq!(shorten("main"), "main");
    }
}
