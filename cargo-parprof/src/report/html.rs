//! `report.html`: one self-contained file (inline CSS and JS, figures embedded, nothing
//! fetched) with the summary, the diagnoses, the figures, and a table of tasks, probes and
//! regions where the user selects one or several and sees the sum of their attributed
//! counters with the sum of their errors (method 3).
//!
//! SVGs without scripts are inlined. SVGs with scripts (inferno's interactive flamegraphs)
//! are embedded as `data:` documents in sandboxed iframes: inlined, their scripts would look
//! up elements by id and take the page's first `<svg>` for their own, and break each other.

use super::counter_cells;
use super::regions::{diagnosed, impact_text};
use super::tables;
use super::wording::{completeness_text, correction_sentence, exit_text, relative_error};
use crate::analysis::Analysis;
use crate::analysis::attribution::ShareKind;
use crate::recording::TargetInfo;
use crate::units::counter_figure;
use serde::Serialize;
use std::fmt::Write as _;

/// What the page shows; the lead maps the analysis into it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HtmlInput {
    pub title: String,
    pub summary_lines: Vec<String>,
    pub diagnoses: Vec<HtmlDiagnosis>,
    /// The tables of `report.md`: regions, probes, threads.
    pub tables: Vec<HtmlTable>,
    /// (title, SVG document).
    pub svgs: Vec<(String, String)>,
    pub items: Vec<HtmlItem>,
}

/// One diagnosis, shown as a card.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HtmlDiagnosis {
    /// e.g. `too_fine_granularity`.
    pub code: String,
    pub region: String,
    pub evidence: String,
    pub impact: String,
    pub advice: String,
}

pub use super::tables::Table as HtmlTable;

/// A task, probe or region with its attributed counters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HtmlItem {
    /// e.g. `task`, `probe`, `region`.
    pub kind: String,
    pub name: String,
    pub counters: Vec<HtmlCounter>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HtmlCounter {
    pub counter: String,
    pub value: f64,
    pub error: f64,
    pub share: ShareKind,
}

/// Id of the `<script type="application/json">` that holds the items.
pub const DATA_ELEMENT_ID: &str = "parprof-data";

/// The page as one HTML document.
pub fn render(input: &HtmlInput) -> String {
    let mut html =
        String::with_capacity(64 * 1024 + input.svgs.iter().map(|s| s.1.len() * 2).sum::<usize>());
    let title = escape(&input.title);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n"
    );

    html.push_str("<section id=\"summary\">\n<h2>Summary</h2>\n<ul>\n");
    for line in &input.summary_lines {
        let _ = writeln!(html, "<li>{}</li>", rich(line));
    }
    html.push_str("</ul>\n</section>\n");

    html.push_str("<section id=\"diagnoses\">\n<h2>Diagnoses</h2>\n");
    if input.diagnoses.is_empty() {
        html.push_str("<p class=\"none\">No diagnosis: nothing exceeded its threshold.</p>\n");
    } else {
        for d in &input.diagnoses {
            let _ = writeln!(
                html,
                "<div class=\"card\"><h3><code>{}</code> in region <code>{}</code></h3>\n\
                 <dl><dt>Evidence</dt><dd>{}</dd><dt>Impact</dt><dd>{}</dd>\
                 <dt>Advice</dt><dd>{}</dd></dl></div>",
                escape(&d.code),
                escape(&d.region),
                rich(&d.evidence),
                rich(&d.impact),
                rich(&d.advice)
            );
        }
    }
    html.push_str("</section>\n");
    for table in &input.tables {
        table_section(&mut html, table);
    }

    html.push_str("<section id=\"figures\">\n<h2>Figures</h2>\n");
    for (i, (caption, svg)) in input.svgs.iter().enumerate() {
        let _ = write!(
            html,
            "<figure class=\"figure\" id=\"figure-{i}\">\n<figcaption>{}</figcaption>\n",
            escape(caption)
        );
        embed_svg(&mut html, caption, svg);
        html.push_str("</figure>\n");
    }
    html.push_str("</section>\n");

    items_section(&mut html, &input.items);

    let _ = write!(
        html,
        "<script type=\"application/json\" id=\"{DATA_ELEMENT_ID}\">{}</script>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
        json_for_script(&input.items)
    );
    html
}

/// The page of a run: `svgs` are the figures to embed, (caption, SVG document).
pub fn input_of(analysis: &Analysis, svgs: Vec<(String, String)>) -> HtmlInput {
    let name = program_name(&analysis.target);
    HtmlInput {
        title: format!("parprof: {name}"),
        summary_lines: summary_lines(analysis, name),
        diagnoses: html_diagnoses(analysis),
        tables: [
            Some(tables::regions(analysis)),
            Some(tables::probes(analysis)),
            tables::slices(analysis),
            Some(tables::threads(analysis)),
        ]
        .into_iter()
        .flatten()
        .collect(),
        svgs,
        items: html_items(analysis),
    }
}

/// The profiled program's name, or "the program" when the run does not say.
fn program_name(target: &TargetInfo) -> &str {
    if target.name.is_empty() {
        "the program"
    } else {
        target.name.as_str()
    }
}

/// The page's opening lines: the run's headline, the overhead correction, the counters' totals
/// and how they were shared, and the notes.
fn summary_lines(analysis: &Analysis, name: &str) -> Vec<String> {
    let target = &analysis.target;
    let mut summary_lines = vec![format!(
        "{name}{}: {}, {} threads, {} probe events, {}",
        if target.kind.is_empty() {
            String::new()
        } else {
            format!(" ({})", target.kind)
        },
        exit_text(&analysis.exit),
        analysis.threads.len(),
        analysis.trace.events,
        completeness_text(&analysis.trace.completeness)
    )];
    summary_lines
        .extend(super::wording::bench_measured(analysis).map(|m| format!("Measured: {m}")));
    summary_lines.extend(correction_sentence(analysis));
    if let Some(c) = &analysis.counters
        && !c.collected.is_empty()
    {
        let totals: Vec<String> = c
            .collected
            .iter()
            .map(|x| format!("{} {}", x.name, counter_figure(&x.name, x.total)))
            .collect();
        summary_lines.push(format!(
            "Counters over the run: {}. Probes and tasks get a {}; regions a {}.",
            totals.join(", "),
            c.work_share.describe(),
            c.region_share.describe()
        ));
    }
    // The notes name the counters that were not measured, with the reason.
    summary_lines.extend(
        super::wording::notes(analysis)
            .iter()
            .map(|n| format!("Note: {n}")),
    );
    summary_lines
}

/// Every region's diagnoses, as the page shows them.
fn html_diagnoses(analysis: &Analysis) -> Vec<HtmlDiagnosis> {
    diagnosed(&analysis.regions)
        .map(|(region, d)| HtmlDiagnosis {
            code: d.code.as_str().to_owned(),
            region: region.name.clone(),
            evidence: d.evidence.summary.clone(),
            impact: impact_text(region, d),
            advice: d.advice.clone(),
        })
        .collect()
}

/// The items counters were attributed to, with their figures, for the selectable table.
fn html_items(analysis: &Analysis) -> Vec<HtmlItem> {
    analysis
        .counters
        .iter()
        .flat_map(|c| &c.items)
        .map(|item| HtmlItem {
            kind: item.kind.label().to_string(),
            name: counter_cells::item_name(item),
            counters: item
                .counters
                .iter()
                .map(|c| HtmlCounter {
                    counter: c.counter.clone(),
                    value: c.value,
                    error: c.error,
                    share: c.share,
                })
                .collect(),
        })
        .collect()
}

/// The selectable table of the items counters were attributed to, with its controls.
fn items_section(html: &mut String, items: &[HtmlItem]) {
    let counters = counter_columns(items);
    let _ = write!(
        html,
        "<section id=\"items\">\n<h2>Tasks, probes and regions</h2>\n\
         <p>Select one or several to see the sum of their attributed counters. Each value is \
         a share of the counter's deltas in the time slices the item was active in; the error \
         is the part of those deltas that went to other items active at the same time, summed. \
         {legend}</p>\n\
         <div class=\"controls\"><input type=\"search\" id=\"filter\" placeholder=\"filter by name or kind\" \
         aria-label=\"filter\"> <label>attributed within <select id=\"max-error\">\
         <option value=\"0.1\">10%</option><option value=\"0.25\">25%</option>\
         <option value=\"0.5\">50%</option><option value=\"all\" selected>any error</option></select></label> \
         <label>for <select id=\"error-counter\"><option value=\"\" selected>every counter</option>{options}</select></label> \
         <label><input type=\"checkbox\" id=\"sum-uncertain\"> sum figures with an error over half of them</label> \
         <button type=\"button\" id=\"clear\">clear selection</button></div>\n\
         <p id=\"shown-count\" class=\"note\" aria-live=\"polite\"></p>\n\
         <div id=\"selection\" aria-live=\"polite\"><p class=\"none\">Nothing selected.</p></div>\n\
         <div class=\"table\"><table id=\"item-table\">\n<thead><tr><th></th><th>kind</th><th>name</th>",
        legend = rich(counter_cells::LEGEND),
        options = counters
            .iter()
            .map(|c| format!("<option value=\"{0}\">{0}</option>", escape(c)))
            .collect::<String>()
    );
    for c in &counters {
        let _ = write!(html, "<th>{}</th>", escape(c));
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for (i, item) in items.iter().enumerate() {
        let _ = write!(
            html,
            "<tr data-index=\"{i}\"><td><input type=\"checkbox\" class=\"pick\" data-index=\"{i}\" \
             aria-label=\"select {name}\"></td><td>{kind}</td><td class=\"name\">{name}</td>",
            name = escape(&item.name),
            kind = escape(&item.kind)
        );
        for c in &counters {
            match item.counters.iter().find(|x| x.counter == *c) {
                Some(x) => counter_cell(html, &item.kind, c, x),
                None => html.push_str("<td class=\"num\">–</td>"),
            }
        }
        html.push_str("</tr>\n");
    }
    if items.is_empty() {
        html.push_str(
            "<tr><td colspan=\"3\" class=\"none\">No counters were attributed.</td></tr>\n",
        );
    }
    html.push_str("</tbody>\n</table></div>\n</section>\n");
}

/// The columns of the items' table: every counter, in the order first met.
fn counter_columns(items: &[HtmlItem]) -> Vec<&str> {
    let mut counters: Vec<&str> = Vec::new();
    for c in items.iter().flat_map(|i| &i.counters) {
        if !counters.contains(&c.counter.as_str()) {
            counters.push(&c.counter);
        }
    }
    counters
}

/// One cell of the items' table: the figure `x` attributed to an item of `kind` for `counter`
/// with its relative error, or a dash and why when the error is too large to trust it; the
/// exact numbers in its title.
fn counter_cell(html: &mut String, kind: &str, counter: &str, x: &HtmlCounter) {
    let numbers = format!(
        "{} ± {} ({})",
        format_number(x.value),
        format_number(x.error),
        x.share.describe()
    );
    let (class, shown) = if counter_cells::trusted(x.value, x.error) {
        (
            "num",
            format!(
                "{} <span class=\"err\">{}</span>",
                counter_figure(counter, x.value),
                relative_error(x.value, x.error).trim()
            ),
        )
    } else {
        (
            "num uncertain",
            format!(
                "— <span class=\"err\">({})</span>",
                escape(&counter_cells::cause(kind, x.value, x.error))
            ),
        )
    };
    let _ = write!(
        html,
        "<td class=\"{class}\" title=\"{numbers}\">{shown}</td>"
    );
}

fn table_section(html: &mut String, table: &HtmlTable) {
    let _ = writeln!(
        html,
        "<section id=\"{}\">\n<h2>{}</h2>",
        escape(&table.id),
        escape(&table.title)
    );
    if table.rows.is_empty() {
        html.push_str("<p class=\"none\">Nothing recorded.</p>\n</section>\n");
        return;
    }
    html.push_str("<div class=\"table\"><table>\n<thead><tr>");
    for h in &table.header {
        let _ = write!(html, "<th>{}</th>", escape(h));
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for row in &table.rows {
        html.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let class = cell_class(i, cell);
            let mut text = rich(cell);
            if class == WORDS {
                // Diagnosis codes break after their underscores rather than inside a word.
                text = text.replace('_', "_<wbr>");
            }
            let _ = write!(html, "<td{class}>{text}</td>");
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody></table></div>\n");
    if let Some(note) = &table.note {
        let _ = writeln!(html, "<p class=\"note\">{}</p>", rich(note));
    }
    html.push_str("</section>\n");
}

/// The class of a table cell of words.
const WORDS: &str = " class=\"words\"";

/// How a cell of a table is laid out: the first column and words (an entry kind, diagnosis
/// codes) to the left, wrapping between words; figures to the right on one line, except lists
/// of figures ("8000737 / 17 / 1 / 8000754"), which wrap between them. Without this a run's
/// regions table was wider than the page at 1400 px, its diagnoses out of sight.
fn cell_class(column: usize, cell: &str) -> &'static str {
    let words = cell
        .chars()
        .next()
        .is_none_or(|c| c.is_alphabetic() || c == '`');
    if column == 0 {
        ""
    } else if words {
        WORDS
    } else if cell.contains(" / ") {
        " class=\"num list\""
    } else {
        " class=\"num\""
    }
}

fn embed_svg(html: &mut String, caption: &str, svg: &str) {
    // Everything before the root element (XML declaration, DOCTYPE) is not HTML.
    let body = svg.find("<svg").map_or(svg, |i| &svg[i..]);
    if !body.contains("<script") {
        html.push_str("<div class=\"svg\">");
        html.push_str(body);
        html.push_str("</div>\n");
        return;
    }
    let height = root_attribute(body, "height")
        .and_then(|h| h.trim_end_matches("px").parse::<f64>().ok())
        .filter(|h| *h > 0.0)
        .unwrap_or(480.0);
    // inferno's flamegraphs resize themselves to their window once loaded; in a frame that
    // is not laid out yet they read a width of 0 and set a negative one (a console error).
    // At their own fixed width they need no resizing.
    let svg = svg.replacen("var fluiddrawing = true;", "var fluiddrawing = false;", 1);
    let _ = writeln!(
        html,
        "<iframe class=\"svg-frame\" sandbox=\"allow-scripts\" title=\"{}\" style=\"height:{}px\" \
         src=\"data:image/svg+xml;base64,{}\"></iframe>",
        escape(caption),
        height.ceil(),
        base64(svg.as_bytes())
    );
}

/// The value of `name="…"` on the root `<svg …>` tag.
fn root_attribute<'a>(svg: &'a str, name: &str) -> Option<&'a str> {
    let tag = &svg[..svg.find('>')?];
    let needle = format!(" {name}=\"");
    let start = tag.find(&needle)? + needle.len();
    let len = tag[start..].find('"')?;
    Some(&tag[start..start + len])
}

/// JSON that cannot end or confuse the `<script>` element it sits in: `<`, `>` and `&` only
/// occur inside JSON strings, where their `\u` escapes mean the same.
fn json_for_script<T: Serialize>(value: &T) -> String {
    let json = serde_json::to_string(value).unwrap_or_else(|_| "[]".to_string());
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// Escaped text with its inline markdown rendered.
fn rich(text: &str) -> String {
    super::inline_markdown::to_html(&escape(text))
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Same rule as `fmt` in the page's script: whole numbers with thousands separators from
/// 100 up, three significant digits below.
fn format_number(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    if v.abs() >= 100.0 {
        let digits = format!("{:.0}", v.abs());
        let mut out = String::new();
        for (i, ch) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(ch);
        }
        if v < 0.0 { format!("-{out}") } else { out }
    } else if v == 0.0 {
        "0".into()
    } else {
        let decimals = (2 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
        let s = format!("{v:.decimals$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

const STYLE: &str = r##"
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem auto; max-width: 1280px; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2rem; }
code { background: #f3f3f3; padding: 0 .3em; border-radius: 3px; }
.none { color: #777; font-style: italic; }
.card { border: 1px solid #e3d3a8; background: #fffaf0; border-radius: 6px; padding: .4rem 1rem; margin: .8rem 0; }
.card h3 { font-size: 1rem; margin: .4rem 0; } .card dt { font-weight: 600; } .card dd { margin: 0 0 .4rem 1rem; }
.table { overflow-x: auto; } .note { color: #555; font-size: .9rem; }
figure { margin: 1rem 0; } figcaption { font-weight: 600; margin-bottom: .4rem; }
.svg { overflow-x: auto; } .svg svg { width: 100%; height: auto; }
.svg-frame { width: 100%; border: 0; }
table { border-collapse: collapse; width: 100%; font-size: .85rem; }
th, td { border-bottom: 1px solid #eee; padding: .25rem .4rem; text-align: left; }
th { position: sticky; top: 0; background: #fafafa; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td.num.list { white-space: normal; }
td.words { overflow-wrap: break-word; }
.err { color: #888; }
/* The cause of a figure drowned in its error is a phrase: it wraps in a narrow column. */
td.uncertain { white-space: normal; font-size: .85em; min-width: 9em; max-width: 14em; }
tr.picked { background: #eef5ff; }
.controls { margin: .5rem 0; display: flex; flex-wrap: wrap; gap: .4rem 1rem; align-items: center; } #filter { width: 20rem; max-width: 100%; }
#selection { margin: .5rem 0 1rem; padding: .5rem .8rem; background: #f7f9fc; border: 1px solid #dde5f0; border-radius: 4px; }
#selection table { width: auto; }
"##;

const SCRIPT: &str = r##"
(function () {
  "use strict";
  var items = JSON.parse(document.getElementById("parprof-data").textContent);
  var picked = new Set();
  // Same rule as the cells (counter_cells.rs): over half its value, a figure is not summed.
  var MAX_SUMMED = 0.5;
  var shareText = {
    equal: "1/n share of each time slice",
    on_cpu_weighted: "share weighted by on-CPU time in each time slice",
    mixed: "on-CPU-weighted share where known, 1/n elsewhere"
  };
  function fmt(v) {
    if (!isFinite(v)) return "\u2013";
    if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en-US");
    if (v === 0) return "0";
    var decimals = Math.min(6, Math.max(0, 2 - Math.floor(Math.log10(Math.abs(v)))));
    return String(Number(v.toFixed(decimals)));
  }
  function relErr(c) {
    if (!isFinite(c.value) || !isFinite(c.error)) return Infinity;
    if (c.error <= 0) return 0;
    if (c.value <= 0) return Infinity;
    return c.error / c.value;
  }
  function maxError() {
    var v = document.getElementById("max-error").value;
    return v === "all" ? Infinity : Number(v);
  }
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }
  function render() {
    var box = document.getElementById("selection");
    box.textContent = "";
    if (picked.size === 0) { box.appendChild(el("p", "Nothing selected.", "none")); return; }
    var all = document.getElementById("sum-uncertain").checked;
    var limit = Math.min(maxError(), all ? Infinity : MAX_SUMMED);
    var totals = new Map();
    var names = [];
    picked.forEach(function (i) {
      var item = items[i];
      names.push(item.kind + " " + item.name);
      item.counters.forEach(function (c) {
        var t = totals.get(c.counter) || { value: 0, error: 0, left: 0, shares: new Set() };
        if (relErr(c) <= limit) { t.value += c.value; t.error += c.error; t.shares.add(c.share); }
        else t.left += 1;
        totals.set(c.counter, t);
      });
    });
    box.appendChild(el("p", "Selected (" + picked.size + "): " + names.join(", ")));
    var table = el("table"); table.id = "selection-totals";
    var head = el("tr");
    ["counter", "sum of values", "sum of errors", "left out (error too large)", "share"].forEach(function (h) { head.appendChild(el("th", h)); });
    table.appendChild(head);
    totals.forEach(function (t, name) {
      var row = el("tr"); row.setAttribute("data-counter", name);
      row.appendChild(el("td", name));
      row.appendChild(el("td", fmt(t.value), "num value"));
      row.appendChild(el("td", "\u00b1 " + fmt(t.error), "num error"));
      row.appendChild(el("td", t.left ? String(t.left) : "none", "num left"));
      var share = t.shares.size === 0 ? "\u2013" : t.shares.size === 1 ? shareText[t.shares.values().next().value] : shareText.mixed;
      row.appendChild(el("td", share));
      table.appendChild(row);
    });
    if (totals.size === 0) box.appendChild(el("p", "No counters for this selection.", "none"));
    else box.appendChild(table);
  }
  // Rows shown: those matching the name filter and attributed within the chosen error.
  function filterRows() {
    var q = document.getElementById("filter").value.toLowerCase();
    var limit = maxError();
    var only = document.getElementById("error-counter").value;
    var rows = document.querySelectorAll("#item-table tbody tr[data-index]");
    var shown = 0;
    rows.forEach(function (row) {
      var item = items[Number(row.getAttribute("data-index"))];
      var hit = !q || (item.kind + " " + item.name).toLowerCase().indexOf(q) >= 0;
      if (hit && limit !== Infinity) {
        var counters = item.counters.filter(function (c) { return !only || c.counter === only; });
        hit = counters.length > 0 && counters.every(function (c) { return relErr(c) <= limit; });
      }
      row.style.display = hit ? "" : "none";
      if (hit) shown += 1;
    });
    document.getElementById("shown-count").textContent =
      shown === rows.length ? "Showing all " + rows.length + " items." : "Showing " + shown + " of " + rows.length + " items.";
  }
  document.querySelectorAll("input.pick").forEach(function (box) {
    box.addEventListener("change", function () {
      var i = Number(box.getAttribute("data-index"));
      if (box.checked) picked.add(i); else picked.delete(i);
      box.closest("tr").classList.toggle("picked", box.checked);
      render();
    });
  });
  document.getElementById("clear").addEventListener("click", function () {
    picked.clear();
    document.querySelectorAll("input.pick").forEach(function (b) { b.checked = false; b.closest("tr").classList.remove("picked"); });
    render();
  });
  document.getElementById("filter").addEventListener("input", filterRows);
  ["max-error", "error-counter"].forEach(function (id) {
    document.getElementById(id).addEventListener("change", function () { filterRows(); render(); });
  });
  document.getElementById("sum-uncertain").addEventListener("change", render);
  filterRows();
  render();
})();
"##;

/// Test support shared by the browser tests: loads `page` in headless Chromium (the
/// system's, or `PARPROF_CHROMIUM`) through `tests/browser/check_report.mjs`
/// (playwright-core), selects the table rows at `selected`, and returns what the driver saw
/// as JSON; with `screenshot`, saves a full-page PNG of it there. Panics when the driver fails. `None`, with a message, when chromium, node or
/// playwright-core is missing (`.ci/install-browser` installs them); under `CI` that panics.
#[doc(hidden)]
pub fn check_in_browser(
    page: &std::path::Path,
    selected: &[usize],
    screenshot: Option<&std::path::Path>,
) -> Option<serde_json::Value> {
    use std::process::Command;
    let browser_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/browser");
    let chromium = std::env::var_os("PARPROF_CHROMIUM")
        .map_or_else(|| "/usr/bin/chromium".into(), std::path::PathBuf::from);
    let mut missing = Vec::new();
    if !chromium.is_file() {
        missing.push(format!("chromium ({})", chromium.display()));
    }
    if !Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        missing.push("node".into());
    }
    let playwright = browser_dir.join("node_modules/playwright-core/package.json");
    if !playwright.is_file() {
        missing.push(format!("playwright-core ({})", playwright.display()));
    }
    if !missing.is_empty() {
        let what = missing.join(", ");
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "the browser check needs {what}: run .ci/install-browser"
        );
        eprintln!(
            "\n==================== SKIPPED ====================\n\
             the browser check of {}: missing {what}.\n\
             Run .ci/install-browser to install them (under CI this fails instead).\n\
             =================================================\n",
            page.display()
        );
        return None;
    }
    let mut driver = Command::new("node");
    driver
        .arg(browser_dir.join("check_report.mjs"))
        .arg(page)
        .args(selected.iter().map(usize::to_string))
        .env("PARPROF_CHROMIUM", &chromium);
    if let Some(png) = screenshot {
        driver.env("PARPROF_SCREENSHOT", png);
    }
    let output = driver.output().expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "driver failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(serde_json::from_str(stdout.trim()).expect("driver JSON"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(kind: &str, name: &str, value: f64, error: f64) -> HtmlItem {
        HtmlItem {
            kind: kind.into(),
            name: name.into(),
            counters: vec![HtmlCounter {
                counter: "page-faults".into(),
                value,
                error,
                share: ShareKind::Equal,
            }],
        }
    }

    #[test]
    fn text_and_data_cannot_break_out_of_their_elements() {
        let input = HtmlInput {
            title: "a <b> & \"c\"".into(),
            summary_lines: vec!["</script><script>alert(1)</script>".into()],
            diagnoses: vec![HtmlDiagnosis {
                code: "code<".into(),
                evidence: "text & more".into(),
                ..HtmlDiagnosis::default()
            }],
            tables: vec![HtmlTable {
                id: "t\"x".into(),
                header: vec!["<th>".into()],
                rows: vec![vec!["</td></table>".into()]],
                ..HtmlTable::default()
            }],
            svgs: Vec::new(),
            items: vec![item("probe", "</script><!-- f<T>", 1.0, 0.5)],
        };
        let html = render(&input);
        assert!(html.contains("<title>a &lt;b&gt; &amp; &quot;c&quot;</title>"));
        assert!(html.contains("&lt;/script&gt;&lt;script&gt;alert(1)"));
        assert!(html.contains("<code>code&lt;</code>") && html.contains("text &amp; more"));
        assert!(
            html.contains("id=\"t&quot;x\"") && html.contains("<td>&lt;/td&gt;&lt;/table&gt;</td>")
        );
        // Exactly the two scripts of the page end with `</script>`.
        assert_eq!(html.matches("</script>").count(), 2);
        assert!(!html.contains("<!-- f"));
        // The embedded JSON still means the same.
        let start = html.find("application/json").unwrap();
        let json = &html[html[start..].find('>').unwrap() + start + 1..];
        let json = &json[..json.find("</script>").unwrap()];
        let back: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(back[0]["name"], "</script><!-- f<T>");
        assert_eq!(back[0]["counters"][0]["share"], "equal");
    }

    #[test]
    fn figures_stay_on_one_line_and_words_and_lists_wrap() {
        let input = HtmlInput {
            tables: vec![HtmlTable {
                id: "regions".into(),
                header: vec!["region".into(), "entry".into(), "tasks".into()],
                rows: vec![vec![
                    "sort (src/lib.rs:3)".into(),
                    "join".into(),
                    "16M".into(),
                ]],
                ..HtmlTable::default()
            }],
            ..HtmlInput::default()
        };
        let html = render(&input);
        assert!(html.contains(
            "<td>sort (src/lib.rs:3)</td><td class=\"words\">join</td><td class=\"num\">16M</td>"
        ));
        assert_eq!(
            cell_class(3, "8000737 / 17 / 1 / 8000754"),
            " class=\"num list\""
        );
        assert_eq!(cell_class(2, "4% ±0"), " class=\"num\"");
        assert_eq!(cell_class(2, "—"), " class=\"num\"");
        assert_eq!(cell_class(9, "too_fine_granularity"), WORDS);
        let codes = HtmlInput {
            tables: vec![HtmlTable {
                header: vec!["region".into(), "diagnoses".into()],
                rows: vec![vec![
                    "r".into(),
                    "too_fine_granularity, load_imbalance".into(),
                ]],
                ..HtmlTable::default()
            }],
            ..HtmlInput::default()
        };
        assert!(render(&codes).contains(
            "<td class=\"words\">too_<wbr>fine_<wbr>granularity, load_<wbr>imbalance</td>"
        ));
    }

    #[test]
    fn svgs_are_inlined_unless_they_carry_scripts() {
        let plain = "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"><rect/></svg>";
        let scripted = "<?xml version=\"1.0\"?><svg width=\"1200\" height=\"358\" xmlns=\"http://www.w3.org/2000/svg\"><script>init()</script></svg>";
        let html = render(&HtmlInput {
            svgs: vec![
                ("plain".into(), plain.into()),
                ("flame".into(), scripted.into()),
            ],
            ..HtmlInput::default()
        });
        assert!(html.contains("<div class=\"svg\"><svg xmlns"));
        assert!(!html.contains("<?xml"));
        assert!(html.contains(&format!(
            "src=\"data:image/svg+xml;base64,{}\"",
            base64(scripted.as_bytes())
        )));
        assert!(html.contains("style=\"height:358px\""));
        assert!(!html.contains("<script>init()"));
    }

    #[test]
    fn flamegraphs_keep_their_own_width_in_frames() {
        let flame =
            "<svg width=\"1200\" height=\"90\"><script>var fluiddrawing = true;</script></svg>";
        let mut html = String::new();
        embed_svg(&mut html, "flame", flame);
        let fixed = flame.replace("true;", "false;");
        assert!(html.contains(&base64(fixed.as_bytes())), "{html}");
    }

    #[test]
    fn numbers_and_base64() {
        assert_eq!(format_number(1234567.4), "1,234,567");
        assert_eq!(format_number(100.0), "100");
        assert_eq!(format_number(-2500.0), "-2,500");
        assert_eq!(format_number(12.345), "12.3");
        assert_eq!(format_number(0.5), "0.5");
        assert_eq!(format_number(0.0), "0");
        assert_eq!(format_number(f64::NAN), "–");
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn the_table_lists_every_item_with_its_counters() {
        let html = render(&HtmlInput {
            items: vec![
                item("task", "t1", 1500.0, 250.0),
                item("region", "r", 3.0, 0.0),
            ],
            ..HtmlInput::default()
        });
        assert!(html.contains("<th>page-faults</th>"));
        assert!(html.contains(">1.5k <span class=\"err\">±17%</span>"));
        assert_eq!(html.matches("class=\"pick\"").count(), 2);
        assert!(html.contains("<option value=\"page-faults\">page-faults</option>"));
    }

    #[test]
    fn figures_drowned_in_their_error_show_its_cause() {
        let html = render(&HtmlInput {
            items: vec![
                item("probe", "p", 10.0, 30.0),
                item("region", "r", 10.0, 6.0),
            ],
            ..HtmlInput::default()
        });
        assert!(!html.contains("±>100%"), "{html}");
        assert!(html.contains(
            "class=\"num uncertain\" title=\"10 ± 30 (1/n share of each time slice)\">— <span class=\"err\">\
             (error &gt; value: shared with other threads)</span>"
        ));
        assert!(html.contains("(error 60%: shared with other regions)"));
    }
}
