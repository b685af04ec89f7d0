//! `report.md`: short enough for a pull-request comment.

use super::counter_cells;
use super::regions::{diagnosed, impact_text};
use super::tables::{self, Table};
use super::wording::{TOP_PROBES, completeness_text, correction_sentence, exit_text};
use crate::analysis::Analysis;
use crate::analysis::attributed_counters::{AttributedItem, ItemKind};
use std::fmt::Write;

/// Threads listed (by on-CPU time).
const TOP_THREADS: usize = 8;

/// Text inside a table cell: a pipe would end the cell, a newline the row.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// `table`'s first `limit` rows, names in code, figures right-aligned; then "…and 3 more
/// probes in `report.json`." for the rows left out.
fn write_table(md: &mut String, table: &Table, limit: usize, what: &str) {
    let _ = writeln!(md, "| {} |", table.header.join(" | "));
    let _ = writeln!(
        md,
        "|---|{}",
        "---:|".repeat(table.header.len().saturating_sub(1))
    );
    for row in table.rows.iter().take(limit) {
        let mut cells = row.iter();
        let name = cells
            .next()
            .map(|c| format!("`{}`", cell(c)))
            .unwrap_or_default();
        let figures: Vec<String> = cells.map(|c| cell(c)).collect();
        let _ = writeln!(md, "| {name} | {} |", figures.join(" | "));
    }
    if table.rows.len() > limit {
        let _ = writeln!(
            md,
            "\n…and {} more {what} in `report.json`.",
            table.rows.len() - limit
        );
    }
}

pub fn render(analysis: &Analysis) -> String {
    let mut md = String::new();
    let target = &analysis.target;
    let title = if target.name.is_empty() {
        "(unnamed target)"
    } else {
        target.name.as_str()
    };
    let kind = if target.kind.is_empty() {
        String::new()
    } else {
        format!(" ({})", target.kind)
    };
    // `write!` to a String cannot fail.
    let _ = writeln!(md, "## parprof: `{}`{kind}\n", cell(title));
    let _ = writeln!(
        md,
        "{} · {} threads · {} · {} probe events\n",
        exit_text(&analysis.exit),
        analysis.threads.len(),
        completeness_text(&analysis.trace.completeness),
        analysis.trace.events
    );
    if let Some(measured) = super::wording::bench_measured(analysis) {
        let _ = writeln!(md, "**{BENCH_MEASURED}** {measured}\n");
    }
    write_regions(analysis, &mut md);

    if analysis.probes.is_empty() {
        md.push_str("No probe calls were recorded.\n\n");
    } else {
        let _ = writeln!(md, "### Top probes by self active time\n");
        write_table(&mut md, &tables::probes(analysis), TOP_PROBES, "probes");
        if let Some(sentence) = correction_sentence(analysis) {
            let _ = writeln!(md, "\n**Correction:** {sentence}.");
        }
        md.push('\n');
    }

    if !analysis.threads.is_empty() {
        let _ = writeln!(md, "### Threads\n");
        write_table(&mut md, &tables::threads(analysis), TOP_THREADS, "threads");
        md.push('\n');
    }

    write_counters(analysis, &mut md);
    if let Some(table) = tables::slices(analysis) {
        let _ = writeln!(md, "### {}\n", table.title);
        write_table(&mut md, &table, TOP_SLICE_PROBES, "probes");
        if let Some(note) = &table.note {
            let _ = writeln!(md, "\n{note}");
        }
        md.push('\n');
    }
    let notes = super::wording::notes(analysis);
    if !notes.is_empty() {
        let _ = writeln!(md, "### Not measured, or may be off\n");
        for note in &notes {
            let _ = writeln!(md, "- {}", note.replace('\n', " "));
        }
        md.push('\n');
    }
    let offcpu = if analysis.offcpu_stacks.is_some() {
        ", `offcpu.svg`"
    } else {
        ""
    };
    let _ = writeln!(
        md,
        "Flamegraphs: `active.svg`, `cpu.svg`{offcpu} · utilization: `utilization.svg` · timeline: `timeline.json` (Perfetto UI) · interactive profile: `profile.json.gz` (Firefox Profiler: profiler.firefox.com, \"Load a profile from file\"; or `samply load`) · all of it: `report.html` · data: `report.json`"
    );
    md
}

/// How `report.md` starts what a criterion benchmark measured (the benches' combined report
/// looks for it).
pub const BENCH_MEASURED: &str = "Measured:";

/// Probes listed with their exact per-call counters.
const TOP_SLICE_PROBES: usize = 12;

/// Items listed with their attributed counters (by their value of the first counter).
const TOP_COUNTER_ITEMS: usize = 12;

/// The counters attributed to probes, task groups and regions (method 3), largest first.
fn write_counters(analysis: &Analysis, md: &mut String) {
    let Some(c) = &analysis.counters else {
        return;
    };
    if c.collected.is_empty() || c.items.is_empty() {
        return;
    }
    let _ = writeln!(md, "### Counters attributed\n");
    let _ = writeln!(
        md,
        "Value ± error bound (the part of the deltas shared with other work at the same time). \
         Probes and tasks: {}; regions: {}.\n",
        c.work_share.describe(),
        c.region_share.describe()
    );
    md.push_str("| item |");
    for counter in &c.collected {
        let _ = write!(md, " {} |", cell(&counter.name));
    }
    md.push_str("\n|---|");
    md.push_str(&"---:|".repeat(c.collected.len()));
    md.push('\n');
    let mut items: Vec<_> = c.items.iter().collect();
    let first = |i: &AttributedItem| i.counters.first().map_or(0.0, |x| x.value);
    items.sort_by(|a, b| first(b).total_cmp(&first(a)));
    let mut uncertain = false;
    for item in items.iter().take(TOP_COUNTER_ITEMS) {
        let _ = match item.kind {
            // Named `tasks of <region>` already.
            ItemKind::Tasks => write!(md, "| `{}` |", cell(&counter_cells::item_name(item))),
            kind => write!(md, "| {} `{}` |", kind.label(), cell(&item.name)),
        };
        for x in &item.counters {
            uncertain |= !counter_cells::trusted(x.value, x.error);
            let _ = write!(
                md,
                " {} |",
                cell(&counter_cells::text(
                    item.kind.label(),
                    &x.counter,
                    x.value,
                    x.error
                ))
            );
        }
        md.push('\n');
    }
    if items.len() > TOP_COUNTER_ITEMS {
        let _ = writeln!(
            md,
            "\n…and {} more in `report.json` and `report.html`.",
            items.len() - TOP_COUNTER_ITEMS
        );
    }
    if uncertain {
        let _ = writeln!(md, "\n{}", counter_cells::LEGEND);
    }
    md.push('\n');
}

/// The diagnoses of parallel regions, then a table of the regions; nothing without regions.
fn write_regions(analysis: &Analysis, md: &mut String) {
    if analysis.regions.is_empty() {
        return;
    }
    let _ = writeln!(md, "### Diagnoses\n");
    let mut any = false;
    for (region, d) in diagnosed(&analysis.regions) {
        any = true;
        let _ = writeln!(
            md,
            "- **`{}`** in region `{}`: {}\n  - **Impact:** {}.\n  - **Advice:** {}",
            d.code.as_str(),
            cell(&region.name),
            d.evidence.summary.replace('\n', " "),
            impact_text(region, d),
            d.advice.replace('\n', " ")
        );
    }
    if !any {
        let _ = writeln!(
            md,
            "No parallel-overhead diagnosis in {} parallel region(s).",
            analysis.regions.len()
        );
    }
    let _ = writeln!(md, "\n### Parallel regions\n");
    let table = tables::regions(analysis);
    write_table(md, &table, usize::MAX, "regions");
    if let Some(note) = &table.note {
        let _ = writeln!(md, "\n{note}\n");
    }
}
