//! The views of a [`Comparison`]: `diff.md` (a pull-request comment), `diff.json`, the
//! terminal headline (the differential flamegraphs are [`super::flame`]'s). Each is made in
//! memory.

use super::compare::{Comparison, DiagnosisChange, Measure, Row, RowKind};
use super::frames::{FrameRow, Frames, Shape};
use super::noise::{self, Verdict};
use super::paired::{self, Pairing};
use crate::units::{code_list, human_duration};
use anyhow::Result;
use serde::Serialize;

/// The schema of `diff.json` (documented in `docs/diff-schema.md`).
pub const DIFF_SCHEMA: &str = "parprof-diff/2";
/// Rows in `diff.md` and on the terminal.
const TOP_ROWS: usize = 20;
/// CPU frames named in `diff.md`.
const TOP_FRAMES: usize = 8;

/// "+98.4%", "−12.0%", "new".
pub fn signed_percent(change: f64) -> String {
    if change.is_infinite() {
        "new".to_owned()
    } else if change >= 0.0 {
        format!("+{:.1}%", change * 100.0)
    } else {
        format!("−{:.1}%", -change * 100.0)
    }
}

pub(super) fn ns(v: f64) -> String {
    human_duration(v.max(0.0).round() as u64)
}

/// A count with a space between groups of three digits: "131 072".
pub fn count(v: f64) -> String {
    // Per-iteration counts can be fractions (a region run every other iteration).
    if v < 100.0 && (v - v.round()).abs() > 0.005 {
        return format!("{v:.2}");
    }
    let digits = (v.max(0.0).round() as u64).to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// A row's name, with its benchmark for a bench (`parse rows › parse_line`).
pub fn row_name(r: &Row) -> String {
    match &r.benchmark {
        Some(b) => format!("{b} › {}", r.name),
        None => r.name.clone(),
    }
}

pub(super) fn kind(k: RowKind) -> &'static str {
    match k {
        RowKind::Probe => "probe",
        RowKind::Region => "region",
    }
}

/// "slower", "noisy: needs 7 runs", "noisy: needs 24 pairs", …
pub fn verdict_text(r: &Row) -> String {
    let (unit, most) = if r.interval.is_some() {
        ("pairs", paired::MAX_PAIRS_ADVISED)
    } else {
        ("runs", noise::MAX_RUNS_ADVISED)
    };
    match (r.verdict, r.runs_needed) {
        (Verdict::Noisy, Some(n)) => format!("noisy: needs {n} {unit}"),
        (Verdict::Noisy, None) => format!("noisy: needs over {most} {unit}"),
        (v, _) => v.as_str().to_owned(),
    }
}

/// A row's noise column: its interval of a paired comparison ("−1.2…+3.4%"), else the
/// relative standard deviation of its runs ("±2.0%").
fn noise_text(r: &Row) -> String {
    interval_or_noise(r.interval, r.noise)
}

fn interval_or_noise(interval: Option<(f64, f64)>, noise: Option<f64>) -> String {
    match (interval, noise) {
        (Some((lo, hi)), _) if lo.is_finite() && hi.is_finite() => {
            let percent = |v: f64| signed_percent(v).trim_end_matches('%').to_owned();
            format!("{}…{}%", percent(lo), percent(hi))
        }
        (_, Some(n)) => format!("±{:.1}%", n * 100.0),
        _ => "–".to_owned(),
    }
}

/// "4 096 → 131 072 calls", or "4 096 calls" when unchanged.
pub fn calls_text(r: &Row) -> String {
    let plural = r.base_calls != 1.0 || r.head_calls != 1.0;
    let unit = match (r.kind, plural) {
        (RowKind::Probe, true) => "calls",
        (RowKind::Probe, false) => "call",
        (RowKind::Region, true) => "runs",
        (RowKind::Region, false) => "run",
    };
    if r.calls_changed {
        format!("{} → {} {unit}", count(r.base_calls), count(r.head_calls))
    } else if r.base_calls == r.head_calls {
        format!("{} {unit}", count(r.head_calls))
    } else {
        format!("{} / {} {unit}", count(r.base_calls), count(r.head_calls))
    }
}

/// The headline: what got slower or faster, by how much, and which counts changed.
pub fn headline(c: &Comparison) -> String {
    let changed: Vec<&Row> = c.rows.iter().filter(|r| r.verdict.is_change()).collect();
    let counts = c
        .rows
        .iter()
        .filter(|r| r.calls_changed && !r.verdict.is_change())
        .count();
    let runs = match &c.pairing {
        Some(p) => format!(
            "{} pairs of runs, BASE and HEAD alternated, in {:.0} s",
            p.pairs, p.elapsed_s
        ),
        None => format!(
            "{} run{} of BASE, {} of HEAD",
            c.base_runs,
            if c.base_runs == 1 { "" } else { "s" },
            c.head_runs
        ),
    };
    let counts = match counts {
        0 => String::new(),
        1 => "; 1 call count changed".to_owned(),
        n => format!("; {n} call counts changed"),
    };
    if changed.is_empty() {
        return format!(
            "`{}`: no probe or region changed beyond noise{counts} ({runs}).",
            c.program
        );
    }
    let parts: Vec<String> = changed
        .iter()
        .take(3)
        .map(|r| {
            let calls = if r.calls_changed {
                format!(", {}", calls_text(r))
            } else {
                String::new()
            };
            format!(
                "{} `{}` {} {} ({} → {}{calls})",
                kind(r.kind),
                row_name(r),
                r.verdict.as_str(),
                signed_percent(r.change),
                ns(r.base_median_ns),
                ns(r.head_median_ns)
            )
        })
        .collect();
    let more = changed.len().saturating_sub(3);
    let more = if more > 0 {
        format!(", and {more} more")
    } else {
        String::new()
    };
    format!(
        "`{}`: {}{more}{counts} ({runs}).",
        c.program,
        parts.join("; ")
    )
}

fn measure_sentence(c: &Comparison) -> &'static str {
    match c.measure {
        Measure::Total => {
            "Probes: active time of all calls (overhead and switched-out time removed); regions: \
             elapsed time of all runs; medians over the runs; calls per run."
        }
        Measure::PerCall => {
            "Per benchmark (criterion's profile mode runs each for a fixed time): probes' active \
             time per call (overhead and switched-out time removed), regions' elapsed time per run; \
             medians over the runs; calls per run of fixed time, so a slower routine has fewer."
        }
        Measure::PerIteration => {
            "Per benchmark, per iteration of the benchmarked routine (criterion's own count of its \
             measured batch): probes' active time of all calls in an iteration (overhead and \
             switched-out time removed), regions' elapsed time of all runs in an iteration; medians \
             over the runs; calls and region runs per iteration, which load does not change."
        }
    }
}

/// The paired rule, in words.
fn paired_sentence(c: &Comparison, p: &Pairing) -> String {
    let undecided = c
        .rows
        .iter()
        .filter(|r| r.verdict == Verdict::Noisy)
        .count();
    let ended = if undecided == 0 {
        "every row was decided".to_owned()
    } else {
        format!(
            "the budget of {:.0} s ended with {undecided} row{} undecided",
            p.budget_s,
            if undecided == 1 { "" } else { "s" }
        )
    };
    format!(
        "Verdicts, pair by pair (BASE and HEAD run alternately, B H then H B, so that the \
         machine's drift cancels in each pair): the mean of each row's log ratios HEAD ÷ BASE is \
         its change, their spread its noise (moderated by a prior of {:.0}% on {} degrees of \
         freedom). `slower`/`faster`: a t-test over the pairs, adjusted for the {} rows tested \
         (Holm) and the looks at the pairs (at most {}), finds a change of at least {:.0}%; \
         `within noise`: the change's interval at that level (the noise column) lies within \
         ±{:.0}%; `noisy: needs N pairs`: neither yet. Pairs were added until {ended} ({} \
         looks); at most a {:.0}% chance of any false verdict in this diff.",
        paired::PAIR_PRIOR_NOISE * 100.0,
        noise::PRIOR_DF,
        c.rows_tested,
        paired::MAX_LOOKS,
        noise::MIN_EFFECT * 100.0,
        p.threshold * 100.0,
        p.looks,
        noise::ALPHA * 100.0,
    )
}

/// The rule, in words.
pub fn noise_sentence(c: &Comparison) -> String {
    if let Some(p) = &c.pairing {
        return paired_sentence(c, p);
    }
    if c.noise_estimate {
        format!(
            "Verdicts: a t-test over the runs of each side (on the logarithm of the figures, the \
             runs' variance moderated by a prior noise of {:.0}% on {} degrees of \
             freedom), adjusted for the {} rows tested (Holm: at most a {:.0}% chance of any false \
             verdict in this diff), and a change of at least {:.0}% and {}× the row's noise (that \
             relative standard deviation). `noisy: needs N runs`: a change of at least {:.0}% that \
             these runs cannot tell from noise; N runs a side would, were it real.",
            noise::PRIOR_NOISE * 100.0,
            noise::PRIOR_DF,
            c.rows_tested,
            noise::ALPHA * 100.0,
            noise::MIN_EFFECT * 100.0,
            noise::NOISE_FACTOR,
            noise::MIN_EFFECT * 100.0,
        )
    } else {
        format!(
            "No noise estimate: one run on a side (`cargo parprof --repeat N` records several); a change \
             of at least {:.0}% is reported as slower or faster.",
            noise::SINGLE_RUN_EFFECT * 100.0
        )
    }
}

fn table(c: &Comparison) -> String {
    let mut md = String::from(
        "| | name | BASE | HEAD | change | calls | noise | verdict |\n\
         |---|---|---:|---:|---:|---:|---:|---|\n",
    );
    for r in c.rows.iter().take(TOP_ROWS) {
        md.push_str(&format!(
            "| {} | `{}` | {} | {} | {} | {} | {} | {} |\n",
            kind(r.kind),
            row_name(r).replace('|', "\\|"),
            ns(r.base_median_ns),
            ns(r.head_median_ns),
            signed_percent(r.change),
            calls_text(r),
            noise_text(r),
            verdict_text(r)
        ));
    }
    if c.rows.len() > TOP_ROWS {
        md.push_str(&format!(
            "\n… and {} more rows in `diff.json`.\n",
            c.rows.len() - TOP_ROWS
        ));
    }
    md
}

fn diagnoses_section(c: &Comparison) -> String {
    if c.diagnoses.is_empty() {
        return String::new();
    }
    let mut md = String::from("\n### Diagnoses\n\n");
    for DiagnosisChange {
        benchmark,
        region,
        code,
        appeared,
    } in &c.diagnoses
    {
        let what = if *appeared { "appeared" } else { "disappeared" };
        let bench = benchmark
            .as_ref()
            .map(|b| format!(" of benchmark `{b}`"))
            .unwrap_or_default();
        md.push_str(&format!("- `{code}` {what} in region `{region}`{bench}\n"));
    }
    md
}

fn calls_section(c: &Comparison) -> String {
    let changed: Vec<&Row> = c.rows.iter().filter(|r| r.calls_changed).collect();
    if changed.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "\n### Call counts changed\n\nA per-call figure means something else when the calls \
         change: read these rows' time with their count.\n\n",
    );
    let per = if c.measure == Measure::PerIteration {
        "per iteration"
    } else {
        "per run"
    };
    for r in changed {
        md.push_str(&format!(
            "- {} `{}`: {} {per} ({})\n",
            kind(r.kind),
            row_name(r),
            calls_text(r),
            signed_percent(noise::relative_change(r.base_calls, r.head_calls))
        ));
    }
    md
}

/// Samples a run, as few as they may be: "0.4", "12", "1 204".
fn samples(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.1}")
    } else {
        count(v)
    }
}

/// "30 → 90 samples": a CPU box's samples a run on each side.
pub fn samples_moved(r: &FrameRow) -> String {
    format!(
        "{} → {} samples",
        samples(r.base_samples),
        samples(r.head_samples)
    )
}

/// How the CPU boxes were judged, in words.
fn frames_rule(frames: &Frames, c: &Comparison) -> String {
    if !frames.judged {
        return "no noise estimate (one run on a side): no change judged, only the boxes that \
                appeared or vanished are marked"
            .to_owned();
    }
    let how = if c.pairing.is_some() {
        "pair by pair"
    } else {
        "over the runs of each side"
    };
    format!(
        "each box's own samples a run judged {how} by the rows' rule, {} boxes of at least {} \
         samples a run tested",
        frames.tested,
        super::frames::MIN_TESTED
    )
}

/// The subtitle of a CPU figure: one line of inferno's (at most about 160 characters at its
/// 1200-pixel width; diff.md says how a box is judged).
pub fn cpu_figure_sentence(frames: &Frames, c: &Comparison, shape: Shape) -> String {
    let (side, mark) = match shape {
        Shape::Head => ("HEAD", "green, dashed: appeared"),
        Shape::Base => ("BASE", "purple, dashed: vanished"),
    };
    let runs = match &c.pairing {
        Some(p) => format!("{} pairs", p.pairs),
        None => format!("{} runs of BASE, {} of HEAD", c.base_runs, c.head_runs),
    };
    let judged = if frames.judged {
        format!(
            "Red/blue: judged slower/faster ({} boxes tested)",
            frames.tested
        )
    } else {
        "One run a side: no change judged".to_owned()
    };
    format!(
        "{side}'s samples a run, all threads, {runs}. {judged}; {mark}; white: not judged changed"
    )
}

/// A CPU box in words: its function, and its caller.
fn frame_cells(r: &FrameRow) -> (String, String) {
    let code = |f: &str| format!("`{}`", f.replace('|', "\\|"));
    let n = r.path.len();
    let leaf = r.path.last().map_or_else(String::new, |f| code(f));
    let caller = if n >= 2 {
        code(&r.path[n - 2])
    } else {
        "–".to_owned()
    };
    (leaf, caller)
}

/// The CPU boxes that moved most, with their change and noise.
fn frames_section(frames: &Frames, c: &Comparison) -> String {
    let mut md = String::from("\n### Where the CPU time moved\n\n");
    let named: Vec<&FrameRow> = frames.named().take(TOP_FRAMES).collect();
    if named.is_empty() {
        md.push_str(&format!(
            "No CPU frame moved beyond noise, appeared or vanished ({}).\n",
            frames_rule(frames, c)
        ));
        return md;
    }
    md.push_str(&format!(
        "The frames of `diff-cpu.svg` that moved most: {}; all threads together, samples a run \
         (a box that appeared or vanished: with its callees).\n\n\
         | frame | called from | BASE | HEAD | change | noise | verdict |\n\
         |---|---|---:|---:|---:|---:|---|\n",
        frames_rule(frames, c)
    ));
    for r in named {
        let (leaf, caller) = frame_cells(r);
        let change = if r.verdict.is_change() {
            signed_percent(r.change)
        } else {
            "–".to_owned()
        };
        md.push_str(&format!(
            "| {leaf} | {caller} | {} | {} | {change} | {} | {} |\n",
            samples(r.base_samples),
            samples(r.head_samples),
            interval_or_noise(r.interval, r.noise),
            r.verdict.as_str()
        ));
    }
    md
}

/// "4.2 minutes", "3.0 hours", "2.5 days".
fn span(seconds: f64) -> String {
    let minutes = seconds / 60.0;
    if minutes < 90.0 {
        format!("{minutes:.1} minutes")
    } else if minutes < 36.0 * 60.0 {
        format!("{:.1} hours", minutes / 60.0)
    } else {
        format!("{:.1} days", minutes / 60.0 / 24.0)
    }
}

/// Of sides recorded far apart: how far, what it means, and what to do instead.
pub fn far_apart_sentence(c: &Comparison) -> Option<String> {
    let seconds = c.far_apart()?;
    Some(format!(
        "BASE and HEAD were recorded {} apart (the middles of their runs' start times; over {:.0} \
         minutes): the noise estimate holds how each side's own runs varied, not how the \
         machine drifted between the sides, and that drift reads as a change. `cargo parprof \
         diff --base REV --bin NAME` (or `--example`, `--bench`) builds both commits and runs \
         them alternated, pair by pair, so that it cancels.",
        span(seconds),
        super::compare::FAR_APART_S / 60.0
    ))
}

/// `diff.md`: short enough for a pull-request comment.
pub fn markdown(c: &Comparison, frames: &Frames, figures: &[&str]) -> String {
    let mut md = format!("## parprof diff\n\n{}\n\n", headline(c));
    md.push_str(&table(c));
    if let Some(apart) = far_apart_sentence(c) {
        md.push_str(&format!("\n**Recorded far apart.** {apart}\n"));
    }
    md.push_str(&format!(
        "\n{} {}\n",
        measure_sentence(c),
        noise_sentence(c)
    ));
    md.push_str(&calls_section(c));
    md.push_str(&diagnoses_section(c));
    md.push_str(&frames_section(frames, c));
    if !figures.is_empty() {
        md.push_str(&format!(
            "\nDifferential flamegraphs (red: judged slower, blue: judged faster, white: not \
             judged changed; the CPU's in HEAD's shape with the frames that appeared, and in \
             BASE's with those that vanished): {}.\n",
            code_list(figures)
        ));
    }
    md
}

#[derive(Serialize)]
struct DiffJson<'a> {
    schema: &'static str,
    headline: String,
    noise_rule: String,
    #[serde(flatten)]
    comparison: &'a Comparison,
    /// The CPU boxes that moved, largest move first.
    cpu_frames: &'a [FrameRow],
    cpu_frames_tested: usize,
}

/// `diff.json`.
pub fn json(c: &Comparison, frames: &Frames) -> Result<String> {
    Ok(serde_json::to_string_pretty(&DiffJson {
        schema: DIFF_SCHEMA,
        headline: headline(c),
        noise_rule: noise_sentence(c),
        comparison: c,
        cpu_frames: &frames.rows,
        cpu_frames_tested: frames.tested,
    })?)
}

/// The terminal: the headline and the top rows.
pub fn terminal(c: &Comparison, frames: &Frames) -> String {
    let mut out = format!("{}\n", headline(c));
    for r in c.rows.iter().take(10) {
        out.push_str(&format!(
            "  {:>6} {:>10} → {:>10} {:>9}  {:<22} {}  ({})\n",
            kind(r.kind),
            ns(r.base_median_ns),
            ns(r.head_median_ns),
            signed_percent(r.change),
            verdict_text(r),
            row_name(r),
            calls_text(r)
        ));
    }
    out.push_str(&format!("{}\n", noise_sentence(c)));
    let moved: Vec<String> = (frames.named().take(3))
        .map(|r| {
            let name = r.path.last().map_or("", String::as_str);
            match r.verdict {
                v if v.is_change() => {
                    format!("`{name}` {} {}", v.as_str(), signed_percent(r.change))
                }
                v => format!("`{name}` {}", v.as_str()),
            }
        })
        .collect();
    if !moved.is_empty() {
        out.push_str(&format!(
            "CPU frames that moved most: {}.\n",
            moved.join("; ")
        ));
    }
    if let Some(apart) = far_apart_sentence(c) {
        out.push_str(&format!("Recorded far apart: {apart}\n"));
    }
    out
}
