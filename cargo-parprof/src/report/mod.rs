//! The reports: each is a view of one [`Analysis`]; none recomputes an analysis. [`write_all`]
//! writes them all into a run folder.

mod callers_note;
mod counter_cells;
pub mod firefox_profile;
pub mod flame_labels;
pub mod flamegraph;
mod frame_names;
pub mod html;
mod inline_markdown;
pub mod json;
pub mod markdown;
mod notes;
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

use crate::analysis::{Analysis, OffCpuStacks};
use anyhow::Context;
use std::collections::HashMap;
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
    let figures = Figures::of(analysis, options)?;
    let mut written = Vec::new();
    let mut page_figures = HashMap::new();
    for view in write_in_parallel(out_dir, figures.views(analysis))? {
        if let Some(svg) = view.page_figure {
            page_figures.insert(view.name, svg);
        }
        written.push(view.path);
    }
    written.push(write_page(analysis, out_dir, page_figures)?);
    Ok(written)
}

/// What more than one view draws from: the folded stacks and the utilization plot.
struct Figures<'a> {
    active: flamegraph::Folded,
    cpu: flamegraph::Folded,
    offcpu: Option<(&'a OffCpuStacks, flamegraph::Folded)>,
    utilization_svg: Option<String>,
}

impl<'a> Figures<'a> {
    fn of(analysis: &'a Analysis, options: &ReportOptions) -> anyhow::Result<Figures<'a>> {
        Ok(Figures {
            active: flamegraph::active_folded(analysis),
            cpu: flamegraph::stacks_folded(&analysis.cpu_samples.stacks, options),
            offcpu: (analysis.offcpu_stacks.as_ref())
                .map(|offcpu| (offcpu, flamegraph::stacks_folded(&offcpu.stacks, options))),
            utilization_svg: match &analysis.utilization {
                Some(u) => Some(plot::utilization_svg(u, &plot::region_spans(analysis, u))?),
                None => None,
            },
        })
    }

    /// The files of the run folder but the page, in their order.
    fn views<'v>(&'v self, analysis: &'v Analysis) -> Vec<View<'v>> {
        let mut views: Vec<View> = vec![
            ("report.json", Box::new(|w| json::write(analysis, w))),
            (
                "report.md",
                Box::new(|w| Ok(w.write_all(markdown::render(analysis).as_bytes())?)),
            ),
            (
                "active.folded",
                Box::new(|w| Ok(flamegraph::write_folded(&self.active, w)?)),
            ),
            (
                "active.svg",
                Box::new(|w| flamegraph::write_active_svg(analysis, &self.active, w)),
            ),
            (
                "cpu.folded",
                Box::new(|w| Ok(flamegraph::write_folded(&self.cpu, w)?)),
            ),
            (
                "cpu.svg",
                Box::new(|w| flamegraph::write_cpu_svg(analysis, &self.cpu, w)),
            ),
            ("timeline.json", Box::new(|w| timeline::write(analysis, w))),
            (
                "profile.json.gz",
                Box::new(|w| firefox_profile::write(analysis, w)),
            ),
        ];
        if let Some((offcpu, folded)) = &self.offcpu {
            views.push((
                "offcpu.folded",
                Box::new(|w| Ok(flamegraph::write_folded(folded, w)?)),
            ));
            views.push((
                "offcpu.svg",
                Box::new(|w| flamegraph::write_offcpu_svg(offcpu, folded, w)),
            ));
        }
        if let Some(svg) = &self.utilization_svg {
            views.push((
                "utilization.svg",
                Box::new(|w| Ok(w.write_all(svg.as_bytes())?)),
            ));
        }
        views
    }
}

/// The figures report.html embeds, in its order, with their captions.
const PAGE_FIGURES: [(&str, &str); 4] = [
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

/// report.html, which embeds the figures just written (`figures`: SVG by file name).
fn write_page(
    analysis: &Analysis,
    out_dir: &Path,
    mut figures: HashMap<&str, String>,
) -> anyhow::Result<PathBuf> {
    let svgs = (PAGE_FIGURES.iter())
        .filter_map(|(file, caption)| Some((caption.to_string(), figures.remove(file)?)))
        .collect();
    let page = html::render(&html::input_of(analysis, svgs));
    write_file(
        out_dir,
        "report.html",
        |w| Ok(w.write_all(page.as_bytes())?),
    )
}

/// A file of the run folder and what writes it.
type View<'a> = (
    &'static str,
    Box<dyn FnOnce(&mut dyn Write) -> anyhow::Result<()> + Send + 'a>,
);

/// The views that take longest on a run with many samples and spans: started first.
const SLOWEST_VIEWS: [&str; 2] = ["profile.json.gz", "timeline.json"];

/// Writes the views on as many threads as the machine has CPUs (they only read the
/// analysis), the slowest first, so that they take about the time of the longest rather than
/// of all together. The files come back in the order given; the first error, in that order,
/// is the one reported.
fn write_in_parallel(out_dir: &Path, views: Vec<View>) -> anyhow::Result<Vec<WrittenView>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut views: Vec<_> = views.into_iter().enumerate().collect();
    views.sort_by_key(|(_, (name, _))| !SLOWEST_VIEWS.contains(name));
    let queue = std::sync::Mutex::new(views.into_iter());
    let mut results: Vec<(usize, anyhow::Result<WrittenView>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                        let Some((at, (name, write))) = next else {
                            return done;
                        };
                        done.push((at, write_view(out_dir, name, write)));
                    }
                })
            })
            .collect();
        (workers.into_iter())
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    results.sort_by_key(|(at, _)| *at);
    results.into_iter().map(|(_, r)| r).collect()
}

/// A view written into the run folder; a figure of the page kept as it was written, so that
/// the page embeds it without reading the file back.
struct WrittenView {
    name: &'static str,
    path: PathBuf,
    page_figure: Option<String>,
}

fn write_view(
    out_dir: &Path,
    name: &'static str,
    write: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>,
) -> anyhow::Result<WrittenView> {
    if !PAGE_FIGURES.iter().any(|(file, _)| *file == name) {
        let path = write_file(out_dir, name, write)?;
        return Ok(WrittenView {
            name,
            path,
            page_figure: None,
        });
    }
    let mut svg = Vec::new();
    write(&mut svg).with_context(|| format!("cannot draw {name}"))?;
    let path = write_file(out_dir, name, |w| Ok(w.write_all(&svg)?))?;
    let svg = String::from_utf8(svg).with_context(|| format!("{name} is not UTF-8"))?;
    Ok(WrittenView {
        name,
        path,
        page_figure: Some(svg),
    })
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
