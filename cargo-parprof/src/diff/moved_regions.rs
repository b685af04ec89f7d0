//! Regions whose call site moved between the sides.
//!
//! An implicit region is named by its call site, line included (`app::sort (src/lib.rs:27,
//! from run)`), so that two loops of one function are two regions. A pull request that only
//! moves lines (a comment or an import above the loop) would then make every such region
//! "vanish" in BASE and "appear" in HEAD: never compared, its regression never seen. So a BASE
//! region is matched to the HEAD region of the same call site once the line is left out — the
//! same function, file, caller and kind of entry, as `report.json`'s `call_site` and `kind`
//! give them; where one function holds several of them, they are matched in the order of their
//! lines, and only when both sides have as many (a loop added or removed leaves them to their
//! exact names).

use super::report_digest::RegionDigest;
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

/// A call site without its line: function, file, caller, kind of entry.
type SiteWithoutLine = (String, String, String, String);

/// The names of the regions of `runs` that carry a call site with a line, by their call site
/// without it, in line order.
fn by_site_without_line(runs: &[Run]) -> BTreeMap<SiteWithoutLine, BTreeSet<(u32, String)>> {
    let mut sites: BTreeMap<SiteWithoutLine, BTreeSet<(u32, String)>> = BTreeMap::new();
    for region in runs.iter().flat_map(|r| &r.report.regions) {
        if let Some((site, line)) = site_of(region) {
            sites
                .entry(site)
                .or_default()
                .insert((line, region.name.clone()));
        }
    }
    sites
}

/// A region's call site without its line, and the line; `None` for a region without a call
/// site (a `parallel_region!`) or without a line (no debug information).
fn site_of(region: &RegionDigest) -> Option<(SiteWithoutLine, u32)> {
    let call_site = region.call_site.as_ref()?;
    let site = (
        call_site.function.clone(),
        call_site.file.clone(),
        call_site.caller.clone().unwrap_or_default(),
        region.kind.clone().unwrap_or_default(),
    );
    (call_site.line != 0).then_some((site, call_site.line))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::path::PathBuf;

    /// A region as report.json writes it: `function` at `line` of src/lib.rs, called from
    /// `caller`, its name built as the views build it.
    fn region(function: &str, line: u32, caller: Option<&str>) -> Value {
        let name = match caller {
            Some(c) => format!(
                "{function} (src/lib.rs:{line}, from {})",
                c.rsplit("::").next().unwrap_or(c)
            ),
            None => format!("{function} (src/lib.rs:{line})"),
        };
        json!({
            "name": name,
            "elapsed_ns": 1,
            "instances": 1,
            "kind": "iterator",
            "call_site": { "function": function, "file": "src/lib.rs", "line": line, "caller": caller },
        })
    }

    fn run(regions: Vec<Value>) -> Run {
        Run {
            dir: PathBuf::new(),
            report: serde_json::from_value(json!({ "probes": [], "regions": regions })).unwrap(),
        }
    }

    #[test]
    fn a_named_region_or_one_without_a_line_has_no_site_to_move() {
        let digest = |region: Value| serde_json::from_value::<RegionDigest>(region).unwrap();
        let named = json!({ "name": "tuned", "elapsed_ns": 1, "instances": 1, "call_site": null });
        assert_eq!(site_of(&digest(named)), None);
        let no_line = json!({
            "name": "rayon::slice::mergesort::par_mergesort",
            "elapsed_ns": 1,
            "instances": 1,
            "call_site": { "function": "rayon::slice::mergesort::par_mergesort", "file": "", "line": 0, "caller": null },
        });
        assert_eq!(site_of(&digest(no_line)), None);
    }

    #[test]
    fn two_regions_in_one_function_one_line_moved() {
        let base = [run(vec![
            region("app::step", 40, None),
            region("app::step", 52, None),
        ])];
        let head = [run(vec![
            region("app::step", 40, None),
            region("app::step", 53, None),
        ])];
        let renamed = base_to_head(&base, &head);
        assert_eq!(renamed.len(), 1, "{renamed:?}");
        assert_eq!(
            renamed["app::step (src/lib.rs:52)"],
            "app::step (src/lib.rs:53)"
        );
    }

    #[test]
    fn regions_whose_lines_moved_are_matched_in_line_order() {
        let base = [run(vec![
            region("app::sort", 27, Some("app::run")),
            region("app::step", 40, None),
            region("app::step", 52, None),
            region("app::hist", 60, None),
            json!({ "name": "tuned", "elapsed_ns": 1, "instances": 1, "kind": "named", "call_site": null }),
        ])];
        let head = [run(vec![
            region("app::sort", 28, Some("app::run")),
            region("app::step", 41, None),
            region("app::step", 53, None),
            region("app::hist", 61, None),
            region("app::hist", 70, None),
            json!({ "name": "tuned", "elapsed_ns": 1, "instances": 1, "kind": "named", "call_site": null }),
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
        // The same function entered from another caller is another call site.
        let other_caller = [run(vec![region("app::sort", 28, Some("app::main2"))])];
        assert!(base_to_head(&base, &other_caller).is_empty());
    }
}
