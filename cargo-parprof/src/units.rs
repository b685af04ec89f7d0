//! Figures for people: three significant digits and a unit (`1.79M`, `812 µs`, `±3%`). Used by
//! the analysis's sentences (diagnosis evidence) and by every report.

/// Names as inline code, comma-separated (`` `a`, `b` ``), for sentences in Markdown.
pub fn code_list(names: &[impl std::fmt::Display]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A count for people: three significant digits with k, M or G (`1.79M`, `812`).
pub fn human_count(n: f64) -> String {
    if !n.is_finite() {
        return "–".to_owned();
    }
    let (value, unit) = match n.abs() {
        a if a >= 1e9 => (n / 1e9, "G"),
        a if a >= 1e6 => (n / 1e6, "M"),
        a if a >= 1e3 => (n / 1e3, "k"),
        // `+ 0.0`: a total that sums to a hair below zero reads 0, not -0.
        _ => return format!("{:.0}", n.round() + 0.0),
    };
    let decimals = if value.abs() >= 100.0 {
        0
    } else if value.abs() >= 10.0 {
        1
    } else {
        2
    };
    let digits = format!("{value:.decimals$}");
    // Round figures read as people write them: `5k`, not `5.00k`.
    let digits = if digits.contains('.') {
        digits.trim_end_matches('0').trim_end_matches('.')
    } else {
        &digits
    };
    format!("{digits}{unit}")
}

/// An error bound for people, relative to its value (`±3%`); nothing where it says nothing: a
/// zero bound, or one larger than the value itself (`±>100%`, the value is not known).
pub fn relative_error(value: f64, error: f64) -> String {
    if error <= 0.0 || !error.is_finite() {
        String::new()
    } else if value <= 0.0 || error >= value {
        " ±>100%".to_owned()
    } else {
        format!(" ±{:.0}%", (error / value * 100.0).max(1.0))
    }
}

/// A duration for people: three significant digits and a unit.
pub fn human_duration(ns: u64) -> String {
    let ns = ns as f64;
    let (value, unit) = if ns < 1e3 {
        return format!("{ns} ns");
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let decimals = if value < 10.0 {
        2
    } else if value < 100.0 {
        1
    } else {
        0
    };
    format!("{value:.decimals$} {unit}")
}

/// A counter's value in its unit: `task-clock` counts nanoseconds, the others events.
pub fn counter_figure(counter: &str, value: f64) -> String {
    if counter == "task-clock" {
        human_duration(value.max(0.0).round() as u64)
    } else {
        human_count(value)
    }
}

/// A counter's value per call: durations for `task-clock`, one decimal below 100 (a mean of
/// 64.3 page faults reads as such).
pub fn per_call_figure(counter: &str, value: f64) -> String {
    if counter != "task-clock" && value.is_finite() && value.abs() < 100.0 {
        format!("{value:.1}")
    } else {
        counter_figure(counter, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_durations_and_error_bounds_read_as_people_write_them() {
        assert_eq!(human_count(812.0), "812");
        assert_eq!(human_count(-0.3), "0");
        assert_eq!(human_count(2_520_766.0), "2.52M");
        assert_eq!(human_count(400_000.0), "400k");
        assert_eq!(human_count(5_000.0), "5k");
        assert_eq!(human_count(1_500.0), "1.5k");
        assert_eq!(human_duration(812), "812 ns");
        assert_eq!(human_duration(16_945_000), "16.9 ms");
        assert_eq!(relative_error(100.0, 3.0), " ±3%");
        assert_eq!(relative_error(1_789_000.0, 47_801_910.0), " ±>100%");
        assert_eq!(relative_error(5.0, 0.0), "");
        assert_eq!(counter_figure("task-clock", 153_438_863.0), "153 ms");
        assert_eq!(counter_figure("page-faults", 11_868.0), "11.9k");
    }
}
