//! The reports: each is a view of one [`Analysis`]; none recomputes an analysis. [`write_all`]
//! writes them all into a run folder.

mod callers_note;
mod counter_cells;
pub mod firefox_profile;
mod flame_labels;
pub mod flamegraph;
mod frame_names;
pub mod html;
mod inline_markdown;
pub mod json;
pub mod markdown;
pub mod options;
pub mod plot;
mod plumbing;
mod region_labels;
mod regions;
pub mod tables;
pub mod terminal;
pub mod timeline;
pub mod wording;

pub use options::{FrameView, ReportOptions};
pub use wording::notes;

use crate::analysis::Analysis;
use anyhow::Context;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes every report file into `out_dir` and returns their paths, in a fixed order.
pub fn write_all(
    analysis: &Analysis,
    out_dir: &Path,
    options: &ReportOptions,
) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let active = flamegraph::active_folded(analysis);
    let cpu = flamegraph::stacks_folded(&analysis.cpu_samples.stacks, options);
    let mut written = vec![
        write_file(out_dir, "report.json", |w| json::write(analysis, w))?,
        write_file(out_dir, "report.md", |w| {
            Ok(w.write_all(markdown::render(analysis).as_bytes())?)
        })?,
        write_file(out_dir, "active.folded", |w| {
            Ok(flamegraph::write_folded(&active, w)?)
        })?,
        write_file(out_dir, "active.svg", |w| {
            flamegraph::write_active_svg(analysis, &active, w)
        })?,
        write_file(out_dir, "cpu.folded", |w| {
            Ok(flamegraph::write_folded(&cpu, w)?)
        })?,
        write_file(out_dir, "cpu.svg", |w| {
            flamegraph::write_cpu_svg(analysis, &cpu, w)
        })?,
        write_file(out_dir, "timeline.json", |w| timeline::write(analysis, w))?,
        write_file(out_dir, "profile.json.gz", |w| {
            firefox_profile::write(analysis, w)
        })?,
    ];
    if let Some(offcpu) = &analysis.offcpu_stacks {
        let folded = flamegraph::stacks_folded(&offcpu.stacks, options);
        written.push(write_file(out_dir, "offcpu.folded", |w| {
            Ok(flamegraph::write_folded(&folded, w)?)
        })?);
        written.push(write_file(out_dir, "offcpu.svg", |w| {
            flamegraph::write_offcpu_svg(offcpu, &folded, w)
        })?);
    }
    if let Some(u) = &analysis.utilization {
        let svg = plot::utilization_svg(u, &plot::region_spans(analysis, u))?;
        written.push(write_file(out_dir, "utilization.svg", |w| {
            Ok(w.write_all(svg.as_bytes())?)
        })?);
    }
    // The page embeds the figures just written.
    let figures = [
        (
            "active.svg",
            "Active time per call path of probes (flamegraph)",
        ),
        ("cpu.svg", "CPU samples (flamegraph)"),
        (
            "offcpu.svg",
            "Off-CPU time: where threads waited or were preempted (flamegraph)",
        ),
        (
            "utilization.svg",
            "Parallelism over time: work executed vs. slots available",
        ),
    ];
    let svgs = figures
        .iter()
        .filter(|(file, _)| written.contains(&out_dir.join(file)))
        .filter_map(|(file, caption)| {
            let svg = std::fs::read_to_string(out_dir.join(file)).ok()?;
            Some((caption.to_string(), svg))
        })
        .collect();
    let page = html::render(&html::input_of(analysis, svgs));
    written.push(write_file(out_dir, "report.html", |w| {
        Ok(w.write_all(page.as_bytes())?)
    })?);
    Ok(written)
}

fn write_file(
    out_dir: &Path,
    name: &str,
    write: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>,
) -> anyhow::Result<PathBuf> {
    let path = out_dir.join(name);
    let file = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = BufWriter::new(file);
    write(&mut out)
        .and_then(|()| Ok(out.flush()?))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}
