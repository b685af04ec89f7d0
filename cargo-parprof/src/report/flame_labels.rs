//! Flamegraph labels that keep the function's own name: a name too long for its box loses its
//! middle (`rayon_demo::…::next_velocity_par`), not its end, and the full name stays in the
//! box's tooltip (`<title>`).
//!
//! inferno cuts labels from one side only, twice: in Rust when it writes the SVG (always from
//! the right) and in the SVG's script each time the drawing is laid out or zoomed (from the
//! side asked for). Both are replaced here on inferno's output: every frame's `<text>` is
//! written again from its `<title>` and its box's width, and the script gets a label function
//! of the same rule. The script reads names from the titles, so search and zoom are unchanged.

/// What inferno's SVG needs to size labels: its defaults, which [`super::flamegraph`] keeps.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    /// Width of the drawing in px.
    pub image_width: f64,
    pub font_size: f64,
    /// A character's average width, in units of the font size.
    pub font_width: f64,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry {
            image_width: 1200.0,
            font_size: 12.0,
            font_width: 0.59,
        }
    }
}

const ELLIPSIS: char = '…';

/// `name` in at most `fit` characters: whole if it fits; else its first path segment and its
/// own name (`crate::…::function`), or its own name alone (`…::function`), or the start of its
/// own name (`function_na…`); names without a path keep their start. Nothing under 3
/// characters: a box that narrow shows no label, as inferno's.
pub fn shorten(name: &str, fit: usize) -> String {
    let len = name.chars().count();
    if len <= fit {
        return name.to_owned();
    }
    if fit < 3 {
        return String::new();
    }
    let segments = top_level_segments(name);
    if segments.len() < 2 {
        return cut_end(name, fit);
    }
    // The function's own name, with the closures and inlining marks that follow it.
    let mut own = segments.len() - 1;
    while own > 0 && is_marker(segments[own]) {
        own -= 1;
    }
    let tail = segments[own..].join("::");
    if own > 0 {
        let candidate = format!("{}::{ELLIPSIS}::{tail}", segments[0]);
        if own > 1 && candidate.chars().count() <= fit {
            return candidate;
        }
        let candidate = format!("{ELLIPSIS}::{tail}");
        if candidate.chars().count() <= fit {
            return candidate;
        }
    }
    cut_end(&tail, fit)
}

/// The first `fit - 1` characters and an ellipsis.
fn cut_end(text: &str, fit: usize) -> String {
    if text.chars().count() <= fit {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(fit.saturating_sub(1)).collect();
    out.push(ELLIPSIS);
    out
}

/// A path segment that names no function of its own: `{closure}`, `{closure#2}`,
/// `{{closure}}`, `{shim:vtable#0}`, or an inlining mark `_[i]`.
fn is_marker(segment: &str) -> bool {
    segment.starts_with('{') || segment == "_[i]"
}

/// `a::b<c::d>::e` → `a`, `b<c::d>`, `e`: separators inside brackets (generic arguments of
/// `--full-names`) do not count.
fn top_level_segments(name: &str) -> Vec<&str> {
    let mut segments = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut previous = ' ';
    let bytes = name.as_bytes();
    for (i, c) in name.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            // `->` of a function type is not a bracket.
            '>' if previous == '-' => {}
            '>' | ')' | ']' => depth = depth.saturating_sub(1),
            // The first colon of `::`; the next segment starts after the second.
            ':' if depth == 0 && i > start && bytes.get(i + 1) == Some(&b':') => {
                segments.push(&name[start..i]);
                start = i + 2;
            }
            _ => {}
        }
        previous = c;
    }
    segments.push(&name[start.min(name.len())..]);
    segments.retain(|s| !s.is_empty());
    segments
}

/// inferno's SVG with every frame's label shortened by [`shorten`], and its script shortening
/// the same way.
pub fn relabel(svg: &str, geometry: Geometry) -> String {
    let mut out = String::with_capacity(svg.len() + SCRIPT.len());
    let char_width_pct = 100.0 * geometry.font_size * geometry.font_width / geometry.image_width;
    let mut rest = svg;
    while let Some(at) = rest.find("<g><title>") {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(end) = rest.find("</g>") else {
            break;
        };
        let frame = &rest[..end];
        out.push_str(&relabel_frame(frame, char_width_pct).unwrap_or_else(|| frame.to_owned()));
        rest = &rest[end..];
    }
    out.push_str(rest);
    // The script's label function goes last in inferno's script: a later declaration of a
    // function replaces the earlier one.
    match out.find("]]></script>") {
        Some(at) => {
            out.insert_str(at, SCRIPT);
            out
        }
        None => out,
    }
}

/// `<g><title>NAME (3 samples, 2.80%)</title><rect … width="2.8037%" …/><text …>LABEL</text>`
/// with LABEL written again; `None` when it is not shaped so.
fn relabel_frame(frame: &str, char_width_pct: f64) -> Option<String> {
    let title_start = "<g><title>".len();
    let title_end = frame.find("</title>")?;
    let title = &frame[title_start..title_end];
    // inferno adds ` (N samples, x%)`; the name itself may contain parentheses.
    let name = &title[..title.rfind(" (").unwrap_or(title.len())];
    let width_at = frame.find(" width=\"")? + " width=\"".len();
    let width_pct: f64 = frame[width_at..]
        .split('%')
        .next()?
        .parse()
        .ok()
        .filter(|w: &f64| w.is_finite())?;
    let text_open = frame.find("<text")?;
    let label_start = text_open + frame[text_open..].find('>')? + 1;
    let label_end = label_start + frame[label_start..].find("</text>")?;
    let fit = (width_pct / char_width_pct).max(0.0) as usize;
    let label = escape(&shorten(&unescape(name), fit));
    Some(format!(
        "{}{label}{}",
        &frame[..label_start],
        &frame[label_end..]
    ))
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// [`shorten`] in the SVG's script, replacing inferno's `update_text` functions. Characters
/// are counted at inferno's average width (its monospace width when the font is monospace).
const SCRIPT: &str = r#"
function parprof_segments(name) {
    var out = [], depth = 0, start = 0, prev = " ";
    for (var i = 0; i < name.length; i++) {
        var c = name[i];
        if (c === "<" || c === "(" || c === "[") depth++;
        else if (c === ">" && prev === "-") {}
        else if (c === ">" || c === ")" || c === "]") depth = Math.max(0, depth - 1);
        else if (c === ":" && depth === 0 && i > start && name[i + 1] === ":") { out.push(name.substring(start, i)); start = i + 2; }
        prev = c;
    }
    out.push(name.substring(Math.min(start, name.length)));
    return out.filter(function (s) { return s.length > 0; });
}
function parprof_cut_end(text, fit) {
    var chars = Array.from(text);
    return chars.length <= fit ? text : chars.slice(0, Math.max(0, fit - 1)).join("") + "\u2026";
}
function parprof_shorten(name, fit) {
    if (Array.from(name).length <= fit) return name;
    if (fit < 3) return "";
    var segs = parprof_segments(name);
    if (segs.length < 2) return parprof_cut_end(name, fit);
    var own = segs.length - 1;
    while (own > 0 && (segs[own][0] === "{" || segs[own] === "_[i]")) own--;
    var tail = segs.slice(own).join("::");
    if (own > 0) {
        var c = segs[0] + "::\u2026::" + tail;
        if (own > 1 && Array.from(c).length <= fit) return c;
        c = "\u2026::" + tail;
        if (Array.from(c).length <= fit) return c;
    }
    return parprof_cut_end(tail, fit);
}
function update_text(e) {
    update_text_for_elements([e]);
}
function update_text_for_elements(elements) {
    var charWidth = known_font_width || fontsize * fontwidth;
    var updates = [];
    for (var i = 0; i < elements.length; i++) {
        var e = elements[i];
        var r = find_child(e, "rect");
        var w = parseFloat(r.attributes.width.value) * frames.attributes.width.value / 100 - 3;
        var name = find_child(e, "title").textContent.replace(/ \([^(]*\)$/, "");
        var x = format_percent(parseFloat(r.attributes.x.value) + (100 * 3 / frames.attributes.width.value));
        updates.push([x, parprof_shorten(name, Math.floor(w / charWidth))]);
    }
    for (var i = 0; i < elements.length; i++) {
        var t = find_child(elements[i], "text");
        t.attributes.x.value = updates[i][0];
        t.textContent = updates[i][1];
    }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_middle_goes_before_the_own_name() {
        let name = "rayon_demo::nbody::next_velocity_par";
        assert_eq!(shorten(name, 60), name);
        assert_eq!(shorten(name, 32), "rayon_demo::…::next_velocity_par");
        assert_eq!(shorten(name, 31), "…::next_velocity_par");
        assert_eq!(shorten(name, 25), "…::next_velocity_par");
        assert_eq!(shorten(name, 10), "next_velo…");
        assert_eq!(shorten(name, 2), "");
        // Closures and inlining marks stay with the function they belong to.
        assert_eq!(
            shorten("rayon_demo::nbody::next_velocity_par::{closure}", 43),
            "rayon_demo::…::next_velocity_par::{closure}"
        );
        assert_eq!(
            shorten("a::b::c::f::{closure#1}", 20),
            "a::…::f::{closure#1}"
        );
        assert_eq!(shorten("a::b::c::f::{closure#1}", 17), "…::f::{closure#1}");
        assert_eq!(shorten("a::b::c::f::{closure#1}", 16), "f::{closure#1}");
        assert_eq!(shorten("a::b::c::f::{closure#1}", 8), "f::{clo…");
    }

    #[test]
    fn names_without_a_path_keep_their_start() {
        assert_eq!(shorten("[rayon: 26 frames]", 10), "[rayon: 2…");
        assert_eq!(shorten("__libc_start_main", 8), "__libc_…");
    }

    #[test]
    fn separators_inside_generic_arguments_do_not_split() {
        assert_eq!(
            top_level_segments("a::Vec<core::x::Y>::f"),
            ["a", "Vec<core::x::Y>", "f"]
        );
        assert_eq!(
            top_level_segments("F<fn() -> a::b>::g"),
            ["F<fn() -> a::b>", "g"]
        );
        // Odd names never panic.
        for odd in ["::", ":::", "a::", "::a", ">>::<<", "é::ü", ""] {
            let _ = shorten(odd, 3);
        }
    }

    #[test]
    fn every_frame_label_is_written_again_and_the_script_replaced() {
        let svg = "<svg><script><![CDATA[function update_text(e) {}]]></script>\
            <svg id=\"frames\"><g><title>rayon_core::registry::WorkerThread::wait_until_out_of_work (31 samples, 28.97%)</title>\
            <rect x=\"0%\" y=\"1\" width=\"20.0000%\" height=\"15\"/><text x=\"0.25%\" y=\"9\">rayon_core::regi..</text></g>\
            <g><title>a&lt;b&gt; (1 samples, 0.9%)</title><rect x=\"0%\" width=\"0.5%\"/><text x=\"0%\">a..</text></g></svg></svg>";
        let out = relabel(svg, Geometry::default());
        // 20% of 1200 px at 7.08 px a character: 33 characters.
        assert!(out.contains(">…::wait_until_out_of_work</text>"), "{out}");
        assert!(out.contains("a&lt;b&gt; (1 samples, 0.9%)</title>"));
        assert!(out.contains("<text x=\"0%\"></text>"), "{out}");
        assert!(out.contains("function parprof_shorten(name, fit)"));
        assert!(out.find("function parprof_shorten").unwrap() < out.find("]]></script>").unwrap());
    }
}
