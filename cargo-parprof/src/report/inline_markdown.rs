//! The inline markdown the report's sentences are written in (`report.md` shows them as they
//! are), rendered for `report.html`: `` `code` `` and `**strong**`. Without it the page showed
//! the backticks literally.

/// `text`, already HTML-escaped (escaping leaves `` ` `` and `*` alone), with each closed
/// pair of backticks a `<code>` and each closed pair of `**` a `<strong>`; an unpaired mark
/// stays as it is.
pub fn to_html(escaped: &str) -> String {
    // `**` inside code is code: strong is looked for between the code elements only.
    let mut out = String::with_capacity(escaped.len() + 32);
    let mut rest = escaped;
    for (open, close) in code_spans(escaped) {
        let start = escaped.len() - rest.len();
        out.push_str(&pairs(&escaped[start..open], "**", "strong"));
        out.push_str("<code>");
        out.push_str(&escaped[open + 1..close]);
        out.push_str("</code>");
        rest = &escaped[close + 1..];
    }
    out.push_str(&pairs(rest, "**", "strong"));
    out
}

/// The byte positions of each closed pair of backticks around non-empty text.
fn code_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find('`').map(|i| from + i) {
        match text[open + 1..].find('`').map(|i| open + 1 + i) {
            Some(close) if close > open + 1 => {
                spans.push((open, close));
                from = close + 1;
            }
            Some(close) => from = close + 1,
            None => break,
        }
    }
    spans
}

/// Every closed pair of `mark` around non-empty text becomes `<tag>…</tag>`.
fn pairs(text: &str, mark: &str, tag: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(open) = rest.find(mark) {
        let after = &rest[open + mark.len()..];
        let Some(close) = after.find(mark).filter(|&c| c > 0) else {
            break;
        };
        let inner = &after[..close];
        out.push_str(&rest[..open]);
        out.push_str(&format!("<{tag}>{inner}</{tag}>"));
        rest = &after[close + mark.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_and_strong_pairs_become_elements_and_lone_marks_stay() {
        assert_eq!(
            to_html("Not measured: `instructions`, **2** of `cycles`"),
            "Not measured: <code>instructions</code>, <strong>2</strong> of <code>cycles</code>"
        );
        assert_eq!(to_html("a ` b"), "a ` b");
        assert_eq!(to_html("``"), "``");
        assert_eq!(to_html("`a**b**c`"), "<code>a**b**c</code>");
        assert_eq!(to_html("x * y"), "x * y");
    }
}
