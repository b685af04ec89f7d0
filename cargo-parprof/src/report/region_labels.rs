//! Where the region labels of `utilization.svg` go: every region named at least once, labels
//! that would overlap staggered on rows below each other instead of left out (two regions
//! close in time otherwise lose a name).

/// A label to draw: which band it names, where its text starts (px from the plot's left) and
/// on which row (0 at the top).
#[derive(Clone, Debug, PartialEq)]
pub struct Placed {
    pub band: usize,
    pub x_px: f64,
    pub row: usize,
}

/// Space kept between two labels on a row, px.
const GAP_PX: f64 = 6.0;

/// Labels for `bands` (name, start px, end px), in time order, on a plot `width_px` wide,
/// each `text_px(name)` wide. A region's first band is always labelled, on the first row where
/// it overlaps no other label (a label past the right edge is moved left to end there); its
/// later bands only when the label fits inside the band on the top row, as a repeated name
/// helps only where it costs no room. At most `max_rows` rows: past them, the row whose last
/// label ends first.
pub fn place(
    bands: &[(&str, f64, f64)],
    width_px: f64,
    max_rows: usize,
    text_px: impl Fn(&str) -> f64,
) -> Vec<Placed> {
    let max_rows = max_rows.max(1);
    // Per row, where its last label ends.
    let mut rows: Vec<f64> = Vec::new();
    let mut named: Vec<&str> = Vec::new();
    let mut placed = Vec::new();
    for (band, &(name, start, end)) in bands.iter().enumerate() {
        let width = text_px(name);
        let x = start.min(width_px - width).max(0.0);
        let free = |row: &f64| *row + GAP_PX <= x;
        if named.contains(&name) {
            let fits_band = end - start >= width;
            if fits_band && rows.first().is_none_or(free) {
                set_row(&mut rows, 0, x + width);
                placed.push(Placed {
                    band,
                    x_px: x,
                    row: 0,
                });
            }
            continue;
        }
        named.push(name);
        let row = match rows.iter().position(free) {
            Some(row) => row,
            None if rows.len() < max_rows => rows.len(),
            None => rows
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .map_or(0, |(row, _)| row),
        };
        set_row(&mut rows, row, x + width);
        placed.push(Placed { band, x_px: x, row });
    }
    placed
}

fn set_row(rows: &mut Vec<f64>, row: usize, end: f64) {
    if row == rows.len() {
        rows.push(end);
    } else {
        rows[row] = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn px(name: &str) -> f64 {
        name.chars().count() as f64 * 7.0
    }

    #[test]
    fn close_regions_are_both_named_on_two_rows() {
        let bands = [
            ("parallel_next_generation", 100.0, 120.0),
            ("count_alive", 125.0, 140.0),
        ];
        let placed = place(&bands, 1000.0, 10, px);
        assert_eq!(
            placed,
            [
                Placed {
                    band: 0,
                    x_px: 100.0,
                    row: 0
                },
                Placed {
                    band: 1,
                    x_px: 125.0,
                    row: 1
                },
            ]
        );
    }

    #[test]
    fn repeated_runs_are_named_again_only_where_there_is_room() {
        let bands = [
            ("step", 0.0, 10.0),
            ("step", 20.0, 30.0),
            ("step", 100.0, 200.0),
        ];
        let placed = place(&bands, 1000.0, 10, px);
        let named: Vec<usize> = placed.iter().map(|p| p.band).collect();
        assert_eq!(named, [0, 2]);
        assert!(placed.iter().all(|p| p.row == 0));
    }

    #[test]
    fn labels_stay_inside_the_plot_and_rows_are_bounded() {
        let bands = [("a_long_region_name", 990.0, 999.0)];
        let placed = place(&bands, 1000.0, 3, px);
        assert_eq!(placed[0].x_px, 1000.0 - px("a_long_region_name"));
        let many: Vec<(String, f64, f64)> = (0..20)
            .map(|i| (format!("region{i}"), 10.0 + i as f64, 11.0 + i as f64))
            .collect();
        let many: Vec<(&str, f64, f64)> =
            many.iter().map(|(n, a, b)| (n.as_str(), *a, *b)).collect();
        let placed = place(&many, 1000.0, 3, px);
        assert_eq!(placed.len(), 20, "every region named");
        assert!(placed.iter().all(|p| p.row < 3));
    }
}
