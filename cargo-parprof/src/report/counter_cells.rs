//! A counter attributed to an item (method 3), as a cell of a table: its value with the
//! relative error, or — where the error bound exceeds half the value — the bound's cause in
//! place of a figure nobody should read. Such figures are also left out of sums. `report.json`
//! keeps every number.
//!
//! An attributed figure's error is, by construction, the part of its time slices' deltas that
//! went to other work running at the same time (other threads' probes and tasks for a probe or
//! a region's tasks; other regions for a region). So a large bound always has the same cause:
//! the item ran beside other work, and a program-wide counter cannot tell whose delta it was.

use crate::analysis::attributed_counters::AttributedItem;
use crate::units::{counter_figure, relative_error};

/// An item's name as the tables show it: the task group of a region whose per-job detail was
/// sampled says that its figures are the region's × the workers' user-code share.
pub fn item_name(item: &AttributedItem) -> String {
    match item.from_region_uc_share {
        Some(share) => format!(
            "{} (region × UC {:.0}%: per-job detail sampled)",
            item.name,
            share * 100.0
        ),
        None => item.name.clone(),
    }
}

/// Errors above this share of the value make a figure unusable: shown as its cause, left out
/// of sums. Also the page's default when it sums a selection.
pub const MAX_RELATIVE_ERROR: f64 = 0.5;

/// The error relative to the value: 0 without error, infinite for a value of 0 (or below)
/// with some error, or for numbers that are not finite.
pub fn relative(value: f64, error: f64) -> f64 {
    if !value.is_finite() || !error.is_finite() {
        f64::INFINITY
    } else if error <= 0.0 {
        0.0
    } else if value <= 0.0 {
        f64::INFINITY
    } else {
        error / value
    }
}

/// Whether the figure is known well enough to be shown and summed.
pub fn trusted(value: f64, error: f64) -> bool {
    relative(value, error) <= MAX_RELATIVE_ERROR
}

/// Why the figure is not shown, for an item of `kind` (`probe`, `tasks`, `region`): the
/// bound's size, then what it is made of.
pub fn cause(kind: &str, value: f64, error: f64) -> String {
    let size = match relative(value, error) {
        r if r >= 1.0 => "error > value".to_owned(),
        r => format!("error {:.0}%", r * 100.0),
    };
    let competitors = if kind == "region" {
        "shared with other regions"
    } else {
        "shared with other threads"
    };
    format!("{size}: {competitors}")
}

/// The cell's text: `1.5k ±17%`, or `— (error > value: shared with other threads)`.
pub fn text(kind: &str, counter: &str, value: f64, error: f64) -> String {
    if trusted(value, error) {
        format!(
            "{}{}",
            counter_figure(counter, value),
            relative_error(value, error)
        )
    } else {
        format!("— ({})", cause(kind, value, error))
    }
}

/// The sentence under a table of such cells.
pub const LEGEND: &str = "— marks a figure whose error bound exceeds half of it, with the bound's \
     cause; it is left out of sums (`report.json` keeps its numbers).";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_within_half_their_value_are_shown() {
        assert_eq!(text("probe", "page-faults", 1500.0, 250.0), "1.5k ±17%");
        assert_eq!(text("probe", "page-faults", 3.0, 0.0), "3");
        assert_eq!(text("probe", "page-faults", 0.0, 0.0), "0");
        assert!(trusted(10.0, 5.0));
    }

    #[test]
    fn larger_errors_show_their_cause_instead() {
        assert_eq!(
            text("probe", "page-faults", 10.0, 6.2),
            "— (error 62%: shared with other threads)"
        );
        assert_eq!(
            text("region", "page-faults", 10.0, 30.0),
            "— (error > value: shared with other regions)"
        );
        assert_eq!(
            text("tasks", "page-faults", 0.0, 1.0),
            "— (error > value: shared with other threads)"
        );
        for (v, e) in [(f64::NAN, 1.0), (1.0, f64::INFINITY), (-1.0, 2.0)] {
            assert!(!trusted(v, e), "{v} ± {e}");
            assert!(!text("probe", "x", v, e).contains("±>100%"));
        }
    }
}
