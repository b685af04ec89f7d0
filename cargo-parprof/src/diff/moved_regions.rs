//! Regions whose call site moved between the sides.
//!
//! An implicit region is named by its call site, line included (`app::sort (src/lib.rs:27,
//! from run)`), so that two loops of one function are two regions. A pull request that only
//! moves lines (a comment or an import above the loop) would then make every such region
//! "vanish" in BASE and "appear" in HEAD: never compared, its regression never seen. So a BASE
//! region is matched to the HEAD region of the same name once the line is left out; where one
//! function holds several of them, they are matched in the order of their lines, and only when
//! both sides have as many (a loop added or removed leaves them to their exact names).

use super::side::Run;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// BASE region name → HEAD region name, for the regions whose line moved.
pub(super) fn base_to_head(base: &[Run], head: &[Run]) -> HashMap<String, String> {
    let (base, head) = (by_site_without_line(base), by_site_without_line(head));
    let mut renamed = HashMap::new();
    for (site, base_names) in &base {
        let Some(head_names) = head.get(site) else {
            continue;
        };
        if base_names.len() != head_names.len() {
            continue;
        }
        for ((_, b), (_, h)) in base_names.iter().zip(head_names) {
            if b != h {
                renamed.insert(b.clone(), h.clone());
            }
        }
    }
    renamed
}

/// The region names of `runs` that carry a line, by their name without it, in line order.
fn by_site_without_line(runs: &[Run]) -> BTreeMap<String, BTreeSet<(u32, String)>> {
    let mut sites: BTreeMap<String, BTreeSet<(u32, String)>> = BTreeMap::new();
    for region in runs
        .iter()
        .flat_map(|r| r.report["regions"].as_array().into_iter().flatten())
    {
        let Some(name) = region["name"].as_str() else {
            continue;
        };
        if let Some((site, line)) = without_line(name) {
            sites
                .entry(site)
                .or_default()
                .insert((line, name.to_owned()));
        }
    }
    sites
}

/// `f (src/lib.rs:27, from g)` → (`f (src/lib.rs, from g)`, 27); `None` for a name without a
/// `(file:line…)` location at its end (a `parallel_region!` name, a region named by type).
fn without_line(name: &str) -> Option<(String, u32)> {
    let open = name.rfind(" (")? + 2;
    let inside = name[open..].strip_suffix(')')?;
    let location = inside.split(", from ").next()?;
    let (file, line) = location.rsplit_once(':')?;
    let line: u32 = line.parse().ok()?;
    let rest = &inside[location.len()..];
    Some((format!("{}{file}{rest})", &name[..open]), line))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::PathBuf;

    fn run(regions: &[&str]) -> Run {
        let regions: Vec<_> = regions.iter().map(|n| json!({ "name": n })).collect();
        Run {
            dir: PathBuf::new(),
            report: json!({ "regions": regions }),
        }
    }

    #[test]
    fn a_line_is_left_out_of_the_site() {
        assert_eq!(
            without_line("app::sort (src/lib.rs:27, from run)"),
            Some(("app::sort (src/lib.rs, from run)".to_owned(), 27))
        );
        assert_eq!(
            without_line("app::sort (src/lib.rs:27)"),
            Some(("app::sort (src/lib.rs)".to_owned(), 27))
        );
        assert_eq!(without_line("tuned"), None);
        assert_eq!(without_line("app::sort (from run)"), None);
    }

    #[test]
    fn regions_whose_lines_moved_are_matched_in_line_order() {
        let base = [run(&[
            "app::sort (src/lib.rs:27, from run)",
            "app::step (src/lib.rs:40)",
            "app::step (src/lib.rs:52)",
            "app::hist (src/lib.rs:60)",
            "tuned",
        ])];
        let head = [run(&[
            "app::sort (src/lib.rs:28, from run)",
            "app::step (src/lib.rs:41)",
            "app::step (src/lib.rs:53)",
            "app::hist (src/lib.rs:61)",
            "app::hist (src/lib.rs:70)",
            "tuned",
        ])];
        let renamed = base_to_head(&base, &head);
        let mut pairs: Vec<_> = renamed.iter().collect();
        pairs.sort();
        assert_eq!(
            pairs,
            [
                (
                    &"app::sort (src/lib.rs:27, from run)".to_owned(),
                    &"app::sort (src/lib.rs:28, from run)".to_owned()
                ),
                (
                    &"app::step (src/lib.rs:40)".to_owned(),
                    &"app::step (src/lib.rs:41)".to_owned()
                ),
                (
                    &"app::step (src/lib.rs:52)".to_owned(),
                    &"app::step (src/lib.rs:53)".to_owned()
                ),
            ],
            "a loop added to `hist` leaves its regions to their exact names"
        );
    }
}
