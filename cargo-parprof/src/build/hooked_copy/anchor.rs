//! Finding a hook point's anchor in a hooked crate's sources by its tokens rather than its bytes:
//! a vendored, patched or reformatted copy (other indentation, tabs, CRLF line ends, a line
//! wrapped elsewhere) still takes the hook where its code is the same code.
//!
//! An anchor is cut at whitespace into tokens; the text matches where the same tokens follow
//! each other with any whitespace (at least one character) where the anchor has some, and the
//! match does not start or end inside an identifier. The anchor's own leading and trailing
//! whitespace is not matched.

use std::ops::Range;

/// Every place `anchor` occurs in `text`, whitespace aside.
pub fn find_all(text: &str, anchor: &str) -> Vec<Range<usize>> {
    let tokens: Vec<&str> = anchor.split_whitespace().collect();
    let Some(first) = tokens.first() else {
        return Vec::new();
    };
    text.match_indices(first)
        .filter(|(start, _)| !inside_identifier(text, *start))
        .filter_map(|(start, _)| match_at(text, start, &tokens))
        .filter(|range| !inside_identifier(text, range.end))
        .collect()
}

/// `text` with `range` (where `anchor` was found) replaced by `replacement`, which is written
/// for the anchor as it stands: the anchor's leading and trailing whitespace, which the range
/// does not cover, is left out of it.
pub fn replace(text: &str, range: Range<usize>, anchor: &str, replacement: &str) -> String {
    let lead = &anchor[..anchor.len() - anchor.trim_start().len()];
    let trail = &anchor[anchor.trim_end().len()..];
    let body = replacement.strip_prefix(lead).unwrap_or(replacement);
    let body = body.strip_suffix(trail).unwrap_or(body);
    let mut out = String::with_capacity(text.len() + body.len());
    out.push_str(&text[..range.start]);
    out.push_str(body);
    out.push_str(&text[range.end..]);
    out
}

/// The span of `tokens` starting at `start`, if they all follow.
fn match_at(text: &str, start: usize, tokens: &[&str]) -> Option<Range<usize>> {
    let mut at = start;
    for (i, token) in tokens.iter().enumerate() {
        if i > 0 {
            let rest = &text[at..];
            let skipped = rest.len() - rest.trim_start().len();
            if skipped == 0 {
                return None;
            }
            at += skipped;
        }
        if !text[at..].starts_with(token) {
            return None;
        }
        at += token.len();
    }
    Some(start..at)
}

/// Whether the boundary at byte `at` lies between two identifier characters.
fn inside_identifier(text: &str, at: usize) -> bool {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let before = text[..at].chars().next_back().is_some_and(is_ident);
    let after = text[at..].chars().next().is_some_and(is_ident);
    before && after
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANCHOR: &str = "    let index = worker_thread.index;\n";
    const REPLACEMENT: &str = "    let index = worker_thread.index;\n    hook(index);\n";

    fn hooked(text: &str) -> Option<String> {
        let found = find_all(text, ANCHOR);
        (found.len() == 1).then(|| replace(text, found[0].clone(), ANCHOR, REPLACEMENT))
    }

    #[test]
    fn the_released_text_is_edited_byte_for_byte_as_a_plain_replace() {
        let text = "fn main_loop() {\n    let index = worker_thread.index;\n    run();\n}\n";
        assert_eq!(hooked(text).unwrap(), text.replacen(ANCHOR, REPLACEMENT, 1));
    }

    #[test]
    fn other_whitespace_still_matches() {
        for text in [
            "fn f() {\r\n\tlet index = worker_thread.index;\r\n\trun();\r\n}",
            "fn f() {\n        let  index =\n            worker_thread.index;\n}",
        ] {
            let edited = hooked(text).unwrap_or_else(|| panic!("not found in {text:?}"));
            assert!(
                edited.contains("worker_thread.index;\n    hook(index);"),
                "{edited}"
            );
            assert!(edited.ends_with('}'), "{edited}");
        }
    }

    #[test]
    fn other_code_does_not_match() {
        for text in [
            "let index = worker_thread.index();",
            "let index=worker_thread.index;",
            "outlet index = worker_thread.index;",
            "",
        ] {
            assert!(find_all(text, ANCHOR).is_empty(), "{text:?}");
        }
        let twice = "let index = worker_thread.index;\nlet index = worker_thread.index;";
        assert_eq!(find_all(twice, ANCHOR).len(), 2);
        assert!(find_all("anything", " \n ").is_empty());
        // Nor does the start of a longer identifier.
        assert!(find_all("let x = ab_c;", "let x = ab").is_empty());
        assert_eq!(find_all("let x = ab;", "let x = ab").len(), 1);
    }
}
