//! `report.md`: short enough for a pull-request comment.

use super::regions::{codes, diagnosed, impact_text, state_percents, task_origins};
use super::{
    TOP_PROBES, completeness_text, correction_percent, correction_sentence, exit_text,
    human_duration,
};
use crate::analysis::Analysis;
use crate::analysis::attributed_counters::{AttributedItem, ItemKind};
use std::fmt::Write;

/// Threads listed (by on-CPU time).
const TOP_THREADS: usize = 8;

/// Text inside a table cell: a pipe would end the cell, a newline the row.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// "…and 3 more probes in `report.json`." after a table that shows `shown` of `total` rows.
fn write_more(md: &mut String, total: usize, shown: usize, what: &str) {
    if total > shown {
        let _ = writeln!(md, "\n…and {} more {what}.", total - shown);
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
    write_regions(analysis, &mut md);

    if analysis.probes.is_empty() {
        md.push_str("No probe calls were recorded.\n\n");
    } else {
        let _ = writeln!(md, "### Top probes by self active time\n");
        md.push_str(
            "| probe | calls | self active | active | elapsed | correction | median call |\n",
        );
        md.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
        for p in analysis.probes.iter().take(TOP_PROBES) {
            let _ = writeln!(
                md,
                "| `{}` | {} | {} | {} | {} | {} | {} |",
                cell(&p.name),
                p.calls,
                human_duration(p.self_active_ns),
                human_duration(p.active_ns),
                human_duration(p.elapsed_ns),
                correction_percent(p.elapsed_ns, p.active_ns),
                human_duration(p.median_active_ns),
            );
        }
        write_more(
            &mut md,
            analysis.probes.len(),
            TOP_PROBES,
            "probes in `report.json`",
        );
        if let Some(sentence) = correction_sentence(analysis) {
            let _ = writeln!(md, "\n**Correction:** {sentence}.");
        }
        md.push('\n');
    }

    let mut threads: Vec<_> = analysis.threads.iter().collect();
    threads.sort_by(|a, b| b.on_cpu_ns.cmp(&a.on_cpu_ns).then(a.tid.cmp(&b.tid)));
    if !threads.is_empty() {
        let _ = writeln!(md, "### Threads\n");
        md.push_str("| thread | on CPU | preempted | blocked | switches (vol./preempt.) |\n");
        md.push_str("|---|---:|---:|---:|---:|\n");
        let unknown = || "?".to_owned();
        for t in threads.iter().take(TOP_THREADS) {
            let name = t.name.as_deref().unwrap_or("");
            let _ = writeln!(
                md,
                "| {} `{}` | {} | {} | {} | {} |",
                t.tid,
                cell(name),
                t.on_cpu_ns.map_or_else(unknown, human_duration),
                t.off_cpu_preempted_ns.map_or_else(unknown, human_duration),
                t.off_cpu_voluntary_ns.map_or_else(unknown, human_duration),
                match (t.switches_voluntary, t.switches_preempted) {
                    (Some(v), Some(p)) => format!("{v} / {p}"),
                    _ => unknown(),
                },
            );
        }
        write_more(
            &mut md,
            threads.len(),
            TOP_THREADS,
            "threads in `report.json`",
        );
        md.push('\n');
    }

    write_counters(analysis, &mut md);
    if !analysis.notes.is_empty() {
        let _ = writeln!(md, "### Not measured, or may be off\n");
        for note in &analysis.notes {
            let _ = writeln!(md, "- {}", note.replace('\n', " "));
        }
        md.push('\n');
    }
    md.push_str("Flamegraphs: `active.svg`, `cpu.svg` · utilization: `utilization.svg` · timeline: `timeline.json` (Perfetto UI) · all of it: `report.html` · data: `report.json`\n");
    md
}

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
    for item in items.iter().take(TOP_COUNTER_ITEMS) {
        let _ = match item.kind {
            // Named `tasks of <region>` already.
            ItemKind::Tasks => write!(md, "| `{}` |", cell(&item.name)),
            kind => write!(md, "| {} `{}` |", kind.label(), cell(&item.name)),
        };
        for x in &item.counters {
            let _ = write!(md, " {:.0} ± {:.0} |", x.value, x.error);
        }
        md.push('\n');
    }
    write_more(
        md,
        items.len(),
        TOP_COUNTER_ITEMS,
        "in `report.json` and `report.html`",
    );
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
    md.push_str(
        "| region | runs | elapsed | workers | tasks | local / stolen / injected / inline | median task | UC | LQ | GS | W | diagnoses |\n",
    );
    md.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for r in &analysis.regions {
        let [uc, lq, gs, w] = state_percents(r);
        let _ = writeln!(
            md,
            "| `{}` | {} | {} | {} | {} | {} | {} | {uc} | {lq} | {gs} | {w} | {} |",
            cell(&r.name),
            r.instances,
            human_duration(r.elapsed_ns),
            r.workers,
            r.tasks.total(),
            task_origins(r),
            human_duration(r.task_ns.median),
            codes(r)
        );
    }
    md.push_str(
        "\nUC, LQ, GS, W: share of the workers' time running tasks, looking in their own deque, searching other \
         deques, asleep.\n\n",
    );
}
