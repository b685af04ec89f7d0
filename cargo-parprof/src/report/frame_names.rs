//! The names flamegraphs show: a frame's path without its generic arguments.
//!
//! Symbols carry generic arguments (`helper<rayon::slice::IterProducer<f64>, …>`), trait
//! qualifications (`<Map<I, F> as Iterator>::fold`) and closure numbers (`{closure#1}`,
//! legacy `{{closure}}`): dozens of characters that end every rayon frame, so a label cut to
//! fit its box showed only `…>>>`. Shown is the path alone — the type's path and the method
//! for a trait method — ending in the function's own name.

/// `rayon_demo::nbody::next_velocity_par::{closure}` for any of its symbol spellings.
pub fn display_name(full: &str) -> String {
    let full = impl_block_as_type(full);
    let without_trait = match full.strip_prefix('<') {
        Some(rest) => qualified_self(rest, 0),
        None => full,
    };
    normalise_closures(&without_generics(&without_trait))
}

/// `core::iter::range::<impl Iterator for core::ops::range::Range<A>>::next` →
/// `core::ops::range::Range<A>::next`: an impl block's path segment stands for its type,
/// which carries its own full path.
fn impl_block_as_type(full: &str) -> String {
    let Some(at) = full.find("<impl ") else {
        return full.to_owned();
    };
    let inside_start = at + "<impl ".len();
    let Some(close) = matching_close(&full[inside_start..]) else {
        return full.to_owned();
    };
    let inside = &full[inside_start..inside_start + close];
    let self_type = top_level_split_after(inside, " for ").unwrap_or(inside);
    let tail = &full[inside_start + close + 1..];
    format!("{self_type}{}", impl_block_as_type(tail))
}

/// Qualified paths inside qualified paths followed this deep.
const MAX_QUALIFIED_NESTING: usize = 8;

/// `A<T> as Trait>::f` (the text after a leading `<`) → `A<T>::f`: the implementing type's
/// path and the method, the trait left out.
fn qualified_self(rest: &str, nesting: usize) -> String {
    let close = matching_close(rest).unwrap_or(rest.len());
    let inside = &rest[..close];
    let tail = rest.get(close + 1..).unwrap_or("");
    let self_type = top_level_split(inside, " as ").unwrap_or(inside);
    // The implementing type may be qualified itself (a type defined in a trait method's body:
    // `<<A as Trait>::f::Callback as Other>::g`): without this, its path would be lost with
    // the brackets.
    // Bounded: real symbols nest a few levels; a name of a thousand `<` must not exhaust the
    // stack.
    match self_type.strip_prefix('<') {
        Some(inner) if nesting < MAX_QUALIFIED_NESTING => {
            format!("{}{tail}", qualified_self(inner, nesting + 1))
        }
        _ => format!("{self_type}{tail}"),
    }
}

/// The index of the `>` that closes a `<` just before `text`, at depth 0.
fn matching_close(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut previous = ' ';
    for (i, c) in text.char_indices() {
        match c {
            '<' => depth += 1,
            // `->` of a function type is not a bracket.
            '>' if previous != '-' => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return Some(i),
            },
            _ => {}
        }
        previous = c;
    }
    None
}

/// The part of `text` before the first `separator` outside angle brackets.
fn top_level_split<'a>(text: &'a str, separator: &str) -> Option<&'a str> {
    let mut depth = 0usize;
    let mut previous = ' ';
    for (i, c) in text.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if previous != '-' => depth = depth.saturating_sub(1),
            _ if depth == 0 && text[i..].starts_with(separator) => return Some(&text[..i]),
            _ => {}
        }
        previous = c;
    }
    None
}

/// The part of `text` after the first `separator` outside angle brackets.
fn top_level_split_after<'a>(text: &'a str, separator: &str) -> Option<&'a str> {
    top_level_split(text, separator).map(|before| &text[before.len() + separator.len()..])
}

/// Every `<…>` removed, with the `::` of a turbofish (`f::<T>`).
fn without_generics(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    let mut previous = ' ';
    for c in text.chars() {
        match c {
            '<' => {
                if depth == 0 && out.ends_with("::") {
                    out.truncate(out.len() - 2);
                }
                depth += 1;
            }
            '>' if previous != '-' && depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        previous = c;
    }
    out
}

/// `{{closure}}` (legacy symbols) and `{closure#3}` (v0 symbols, DWARF) are both `{closure}`.
fn normalise_closures(text: &str) -> String {
    let mut out = text.replace("{{closure}}", "{closure}");
    while let Some(start) = out.find("{closure#") {
        let Some(end) = out[start..].find('}') else {
            break;
        };
        out.replace_range(start..start + end + 1, "{closure}");
    }
    out
}

/// The crate a frame's display name belongs to: its first path segment.
pub fn crate_of(display: &str) -> &str {
    display.split("::").next().unwrap_or(display)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_arguments_and_trait_qualifications_are_left_out() {
        let cases = [
            (
                "rayon::iter::plumbing::bridge_producer_consumer::helper<rayon::slice::IterProducer<f64>, rayon::iter::map::MapConsumer<rayon_demo::nbody::next_velocity_par::{closure_env#1}>>",
                "rayon::iter::plumbing::bridge_producer_consumer::helper",
            ),
            (
                "<rayon::iter::map::MapFolder<C,F> as rayon::iter::plumbing::Folder<T>>::consume",
                "rayon::iter::map::MapFolder::consume",
            ),
            (
                "rayon_demo::nbody::next_velocity_par::{{closure}}",
                "rayon_demo::nbody::next_velocity_par::{closure}",
            ),
            ("demo::step::{closure#12}<u32>", "demo::step::{closure}"),
            (
                "core::iter::Iterator::fold::<u8, fn(u8) -> u8>",
                "core::iter::Iterator::fold",
            ),
            (
                "core::ptr::drop_in_place<alloc::vec::Vec<[u8; 4]>>_[i]",
                "core::ptr::drop_in_place_[i]",
            ),
            ("<&T as core::fmt::Debug>::fmt", "&T::fmt"),
            (
                "<<rayon::iter::len::MaxLen<I> as rayon::iter::IndexedParallelIterator>::with_producer::Callback<CB> as rayon::iter::plumbing::ProducerCallback<T>>::callback_[i]",
                "rayon::iter::len::MaxLen::with_producer::Callback::callback_[i]",
            ),
            (
                "core::iter::range::<impl core::iter::traits::iterator::Iterator for core::ops::range::Range<A>>::next_[i]",
                "core::ops::range::Range::next_[i]",
            ),
            ("core::num::<impl u64>::wrapping_mul", "u64::wrapping_mul"),
            ("<u64>::wrapping_mul_[i]", "u64::wrapping_mul_[i]"),
            ("[libc.so.6]", "[libc.so.6]"),
            ("main", "main"),
        ];
        for (full, shown) in cases {
            assert_eq!(display_name(full), shown, "{full}");
        }
    }

    #[test]
    fn unbalanced_brackets_never_panic() {
        for text in [
            "<",
            ">",
            "<a as",
            "a<b",
            "a>b::c",
            "<<>>",
            "->",
            "{closure#",
            &"<".repeat(100_000),
        ] {
            let _ = display_name(text);
        }
        assert_eq!(crate_of("rayon_core::join::join_context"), "rayon_core");
    }
}
