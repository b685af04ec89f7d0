//! Where a probed function's figure exceeds its probed caller's: the calls under a rayon task
//! ran on other workers while the caller ran, and a caller's inclusive time is its own
//! thread's. The call-path table would otherwise read as an error.

use crate::analysis::CallPathSummary;
use crate::units::human_duration;
use std::collections::{HashMap, HashSet};

/// Call paths the note names, the largest excess first.
const SHOWN: usize = 3;

/// The note, or `None` when every probed call path stays within its caller's time.
/// `probe_names`: the probes' names, which tell their frames from regions' and tasks'.
pub(crate) fn children_beyond_callers_note(
    paths: &[CallPathSummary],
    probe_names: &HashSet<&str>,
) -> Option<String> {
    let active: HashMap<&[String], u64> = paths
        .iter()
        .map(|p| (p.path.as_slice(), p.active_ns))
        .collect();
    // (excess, text), the largest excess first: a recursion gives one per level.
    let mut beyond: Vec<(u64, String)> = paths
        .iter()
        .filter_map(|child| {
            let (last, above) = child.path.split_last()?;
            if !probe_names.contains(last.as_str()) {
                return None;
            }
            let caller_end = above
                .iter()
                .rposition(|f| probe_names.contains(f.as_str()))?;
            let caller = &child.path[..=caller_end];
            let caller_ns = *active.get(caller)?;
            (child.active_ns > caller_ns).then(|| {
                let text = format!(
                    "`{last}` under `{}` ({} against {})",
                    caller[caller_end],
                    human_duration(child.active_ns),
                    human_duration(caller_ns)
                );
                (child.active_ns - caller_ns, text)
            })
        })
        .collect();
    beyond.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let more = beyond.len().saturating_sub(SHOWN);
    let mut shown: Vec<String> = beyond.into_iter().take(SHOWN).map(|(_, t)| t).collect();
    if more > 0 {
        shown.push(format!("{more} more"));
    }
    let beyond = shown;
    (!beyond.is_empty()).then(|| {
        format!(
            "Some probed calls add up to more than their caller: {}. Their calls ran in rayon tasks on \
             other workers while the caller ran; a caller's time is its own thread's, so what ran beside \
             it in parallel can exceed it. Nothing is counted twice.",
            beyond.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(frames: &[&str], active_ns: u64) -> CallPathSummary {
        CallPathSummary {
            path: frames.iter().map(|f| f.to_string()).collect(),
            calls: 1,
            active_ns,
            self_active_ns: active_ns,
        }
    }

    #[test]
    fn a_child_beyond_its_caller_through_tasks_is_explained_once() {
        let probes: HashSet<&str> = ["demo::sort", "demo::partition"].into();
        let paths = [
            path(&["demo::sort"], 390_000_000),
            path(
                &["demo::sort", "[rayon task]", "demo::partition"],
                405_000_000,
            ),
        ];
        let note = children_beyond_callers_note(&paths, &probes).expect("a note");
        assert!(
            note.contains("`demo::partition` under `demo::sort` (405 ms against 390 ms)"),
            "{note}"
        );
        let within = [
            path(&["demo::sort"], 390_000_000),
            path(
                &["demo::sort", "[rayon task]", "demo::partition"],
                300_000_000,
            ),
        ];
        assert_eq!(children_beyond_callers_note(&within, &probes), None);
    }
}
