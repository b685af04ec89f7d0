//! `utilization.svg`: work executed vs. slots available over time (method 4), with the
//! parallel regions marked and named (labels staggered on rows where they would overlap),
//! drawn with plotters' SVG backend. The same input gives the same
//! bytes: no fonts are measured (plotters' built-in text size estimate) and nothing random or
//! time-dependent goes into the file.

use super::region_labels::place;
use crate::analysis::Analysis;
use crate::analysis::utilization::{ON_CPU_UNIT, Utilization};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::cmp::Reverse;
use std::collections::HashMap;

const WIDTH: u32 = 1200;
const HEIGHT: u32 = 360;
/// The legend's column, right of the plot: it covers nothing there.
const LEGEND_WIDTH: u32 = 150;
/// Plotters' estimate of a 12 px label's width per character.
const LABEL_CHAR_PX: f64 = 7.0;
const EXECUTED: RGBColor = RGBColor(31, 119, 180);
const AVAILABLE: RGBColor = RGBColor(110, 110, 110);
const REGION: RGBColor = RGBColor(255, 170, 60);
/// Region labels: darker than the bands, to read over the data.
const LABEL: RGBColor = RGBColor(170, 90, 0);
/// Height of a row of region labels, px.
const LABEL_ROW_PX: f64 = 14.0;

/// A parallel region to mark: its name and its span on `CLOCK_MONOTONIC` ns (the time line
/// of [`Utilization::origin_ns`]).
pub type RegionSpan = (String, u64, u64);

/// Most region spans marked, the longest: a region run in a loop would otherwise cover the
/// plot with labels.
const MAX_MARKED_REGIONS: usize = 200;

/// The runs of the parallel regions kept on the timeline, as spans to mark on the plot. Runs
/// of one region less than a period apart are merged: they are one band at the plot's
/// resolution.
pub fn region_spans(analysis: &Analysis, u: &Utilization) -> Vec<RegionSpan> {
    let names: HashMap<u32, &str> = analysis
        .regions
        .iter()
        .map(|r| (r.site, r.name.as_str()))
        .collect();
    let origin = analysis.timeline.origin_monotonic_ns;
    let mut runs: Vec<(u32, u64, u64)> = analysis
        .timeline
        .region_runs
        .iter()
        .map(|r| {
            let start = origin.saturating_add(r.start_ns);
            (r.region, start, start.saturating_add(r.duration_ns))
        })
        .collect();
    runs.sort_unstable();
    let mut merged: Vec<(u32, u64, u64)> = Vec::new();
    for (region, start, end) in runs {
        match merged.last_mut() {
            Some(last) if last.0 == region && start <= last.2.saturating_add(u.period_ns) => {
                last.2 = last.2.max(end);
            }
            _ => merged.push((region, start, end)),
        }
    }
    merged.sort_by_key(|&(region, start, end)| (Reverse(end - start), start, region));
    merged.truncate(MAX_MARKED_REGIONS);
    merged.sort_by_key(|&(region, start, _)| (start, region));
    merged
        .into_iter()
        .map(|(region, start, end)| {
            let name = names
                .get(&region)
                .map_or_else(|| format!("region #{region}"), |n| (*n).to_string());
            (name, start, end)
        })
        .collect()
}

/// The plot as an SVG document.
pub fn utilization_svg(u: &Utilization, regions: &[RegionSpan]) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, u, regions).map_err(|e| anyhow::anyhow!("drawing utilization.svg: {e}"))?;
        root.present()
            .map_err(|e| anyhow::anyhow!("drawing utilization.svg: {e}"))?;
    }
    Ok(svg)
}

/// Figures are shown per period; on-CPU time as a number of CPUs (ns per ns of period).
fn y_of(u: &Utilization, value: f64) -> f64 {
    if u.unit == ON_CPU_UNIT {
        value / u.period_ns.max(1) as f64
    } else {
        value
    }
}

/// A chart over time in ms (x) and the plotted figure (y).
type TimeChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The result of drawing on a backend `DB`: `T`, or the backend's error.
type Drawn<DB, T = ()> = Result<T, DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// A region's band on the plot: (name, left px, right px).
type Band<'a> = (&'a str, f64, f64);

/// ns as ms, the plot's time unit.
fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The plot and its legend: the axes, the regions' bands, the periods, the regions' names.
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    u: &Utilization,
    regions: &[RegionSpan],
) -> Drawn<DB> {
    root.fill(&WHITE)?;
    let (plot_area, legend_area) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
    let end_ms = u
        .periods
        .last()
        .map_or(1.0, |p| ms(p.t_ns + u.period_ns))
        .max(1e-3);
    let y_max = u
        .periods
        .iter()
        .map(|p| y_of(u, p.available.max(p.executed)))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.15;
    let y_label = if u.unit == ON_CPU_UNIT {
        "CPUs busy / available".to_string()
    } else {
        format!("{} per {} µs", u.unit, u.period_ns / 1000)
    };

    let mut chart = ChartBuilder::on(&plot_area)
        .caption("Parallelism over time", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..end_ms, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("time since start (ms)")
        .y_desc(y_label)
        .disable_x_mesh()
        .draw()?;

    // Regions first, under the data; their labels last, over it.
    let bands = draw_region_bands(&mut chart, u, regions, y_max)?;
    draw_periods(&mut chart, u)?;
    draw_region_labels(&mut chart, &bands, y_max)?;
    draw_legend(&legend_area, !regions.is_empty())
}

/// Shades each region's span, full height; returns the bands drawn.
fn draw_region_bands<'r, DB: DrawingBackend>(
    chart: &mut TimeChart<'_, DB>,
    u: &Utilization,
    regions: &'r [RegionSpan],
    y_max: f64,
) -> Drawn<DB, Vec<Band<'r>>> {
    let px_per_ms = px_per_ms(chart);
    let mut bands: Vec<Band<'r>> = Vec::new();
    for (name, start, end) in regions {
        let (a, b) = (
            ms(start.saturating_sub(u.origin_ns)),
            ms(end.saturating_sub(u.origin_ns)),
        );
        if b <= a {
            continue;
        }
        chart.draw_series(std::iter::once(Rectangle::new(
            [(a, 0.0), (b, y_max)],
            REGION.mix(0.15).filled(),
        )))?;
        bands.push((name, a * px_per_ms, b * px_per_ms));
    }
    Ok(bands)
}

/// The CPU time executed (an area) and available (a line), each period as a step: its value
/// holds from its start to its end.
fn draw_periods<DB: DrawingBackend>(chart: &mut TimeChart<'_, DB>, u: &Utilization) -> Drawn<DB> {
    let steps = |value: fn(&crate::analysis::utilization::Period) -> f64| {
        u.periods
            .iter()
            .flat_map(|p| {
                let y = y_of(u, value(p));
                [(ms(p.t_ns), y), (ms(p.t_ns + u.period_ns), y)]
            })
            .collect::<Vec<_>>()
    };
    chart.draw_series(
        AreaSeries::new(steps(|p| p.executed), 0.0, EXECUTED.mix(0.35)).border_style(EXECUTED),
    )?;
    chart.draw_series(LineSeries::new(
        steps(|p| p.available),
        AVAILABLE.stroke_width(2),
    ))?;
    Ok(())
}

/// Names every region band; labels that would overlap go on rows below (the upper half).
fn draw_region_labels<DB: DrawingBackend>(
    chart: &mut TimeChart<'_, DB>,
    bands: &[Band<'_>],
    y_max: f64,
) -> Drawn<DB> {
    let (plot_px, plot_height_px) = chart.plotting_area().dim_in_pixel();
    let px_per_ms = px_per_ms(chart);
    let max_rows = (f64::from(plot_height_px) / 2.0 / LABEL_ROW_PX) as usize;
    let y_per_px = y_max / f64::from(plot_height_px.max(1));
    let text_px = |name: &str| name.chars().count() as f64 * LABEL_CHAR_PX;
    for label in place(bands, f64::from(plot_px), max_rows, text_px) {
        chart.draw_series(std::iter::once(Text::new(
            bands[label.band].0.to_owned(),
            (
                label.x_px / px_per_ms,
                y_max - label.row as f64 * LABEL_ROW_PX * y_per_px,
            ),
            ("sans-serif", 12).into_font().color(&LABEL),
        )))?;
    }
    Ok(())
}

/// Pixels of the plotting area per ms of the run.
fn px_per_ms<DB: DrawingBackend>(chart: &TimeChart<'_, DB>) -> f64 {
    let (plot_px, _) = chart.plotting_area().dim_in_pixel();
    f64::from(plot_px) / chart.x_range().end
}

/// The legend, in its own column right of the plot.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    with_regions: bool,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let font = ("sans-serif", 13).into_font();
    let mut y = 60;
    let mut entry = |label: &str,
                     swatch: &dyn Fn(i32) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>|
     -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        swatch(y)?;
        area.draw(&Text::new(label.to_owned(), (28, y - 7), font.clone()))?;
        y += 24;
        Ok(())
    };
    entry("executed", &|y| {
        area.draw(&Rectangle::new(
            [(6, y - 5), (20, y + 5)],
            EXECUTED.mix(0.6).filled(),
        ))
    })?;
    entry("available", &|y| {
        area.draw(&PathElement::new(
            [(6, y), (20, y)],
            AVAILABLE.stroke_width(2),
        ))
    })?;
    if with_regions {
        entry("parallel region", &|y| {
            area.draw(&Rectangle::new(
                [(6, y - 5), (20, y + 5)],
                REGION.mix(0.3).filled(),
            ))
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::utilization::Period;

    fn sample() -> Utilization {
        let period_ns = 1_000_000;
        Utilization {
            period_ns,
            unit: ON_CPU_UNIT.to_string(),
            origin_ns: 5_000_000,
            cpus: vec![0, 1],
            periods: (0..6)
                .map(|i| Period {
                    t_ns: i * period_ns,
                    executed: if (2..4).contains(&i) { 2e6 } else { 1e6 },
                    available: 2e6,
                    per_cpu: Vec::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn the_plot_is_deterministic_svg_with_regions_and_legend() {
        let regions = vec![("sum_rows".to_string(), 7_000_000, 9_000_000)];
        let a = utilization_svg(&sample(), &regions).unwrap();
        let b = utilization_svg(&sample(), &regions).unwrap();
        assert_eq!(a, b);
        assert!(a.starts_with("<svg") && a.trim_end().ends_with("</svg>"));
        for text in [
            "sum_rows",
            "executed",
            "available",
            "Parallelism over time",
            "CPUs busy",
        ] {
            assert!(a.contains(text), "missing {text}");
        }
    }

    #[test]
    fn regions_close_in_time_are_both_named() {
        let regions = vec![
            ("parallel_next_generation".to_string(), 7_000_000, 7_100_000),
            ("count_alive".to_string(), 7_150_000, 7_200_000),
        ];
        let svg = utilization_svg(&sample(), &regions).unwrap();
        for name in ["parallel_next_generation", "count_alive"] {
            assert!(
                svg.lines().any(|l| l.trim() == name),
                "{name} not named: {svg}"
            );
        }
    }

    #[test]
    fn an_empty_run_still_gives_a_plot() {
        let mut u = sample();
        u.periods.clear();
        u.unit = "instructions".into();
        let svg = utilization_svg(&u, &[("r".into(), 9, 3)]).unwrap();
        assert!(svg.contains("instructions per 1000 µs"));
    }
}
