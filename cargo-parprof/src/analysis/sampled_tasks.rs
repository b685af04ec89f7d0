//! The counters of a region's tasks when rayon's per-job detail was sampled. The attribution
//! sees tasks only inside the workers' detail windows (at most 512 per-job events every 10 ms
//! per worker): a worker outside its window is not known to be busy, so a window's tasks
//! would take the deltas of the work around them, and the tasks outside the windows would get
//! nothing. The program counted every task's time, though (the lifecycle's UC state), so the
//! task group takes the region's own figure — its deltas over the region's runs, on every
//! thread — in proportion to the workers' time in user code: the region's figure × its UC
//! share of the workers' time (blocked time in tasks included, as UC holds it). The error bound is the region's
//! error taken so, plus the share's own uncertainty (the marks' clock) applied to the region's
//! figure.

use super::attributed_counters::{AttributedItem, ItemCounter, ItemKind};
use super::lifecycle::RegionReport;

/// Replaces the figures of the task group of every region whose detail was sampled by its
/// region's figures × the region's UC share. Regions without sampling keep the windows'
/// figures, which then cover every task.
pub(crate) fn from_regions(items: &mut [AttributedItem], regions: &[RegionReport]) {
    for region in regions.iter().filter(|r| r.tasks_counted_in_program > 0) {
        let Some(share) = uc_share(region) else {
            continue;
        };
        let Some(region_counters) = items
            .iter()
            .find(|i| i.kind == ItemKind::Region && i.site == region.site)
            .map(|i| i.counters.clone())
        else {
            continue;
        };
        let Some(tasks) = items
            .iter_mut()
            .find(|i| i.kind == ItemKind::Tasks && i.site == region.site)
        else {
            continue;
        };
        for (task, whole) in tasks.counters.iter_mut().zip(&region_counters) {
            *task = share_of(whole, share, region.state_share_uncertainty);
        }
        tasks.from_region_uc_share = Some(share);
    }
}

/// The workers' time in user code (blocked in tasks included) over the time of their four
/// states, as the report's shares are (the hooks' own time is out of both).
fn uc_share(region: &RegionReport) -> Option<f64> {
    let s = &region.state_ns;
    let states = (s.uc + s.lq + s.gs + s.w) as f64;
    (states > 0.0).then(|| s.uc as f64 / states)
}

/// `share` of a region's counter, with the share's uncertainty in the error bound.
fn share_of(region: &ItemCounter, share: f64, share_uncertainty: f64) -> ItemCounter {
    ItemCounter {
        counter: region.counter.clone(),
        value: region.value * share,
        error: region.error * share + region.value * share_uncertainty,
        share: region.share,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::attribution::ShareKind;

    fn counter(value: f64, error: f64) -> ItemCounter {
        ItemCounter {
            counter: "task-clock".into(),
            value,
            error,
            share: ShareKind::Equal,
        }
    }

    fn item(kind: ItemKind, site: u32, value: f64, error: f64) -> AttributedItem {
        AttributedItem {
            kind,
            site,
            name: String::new(),
            spans: 1,
            counters: vec![counter(value, error)],
            from_region_uc_share: None,
        }
    }

    /// 4 workers for 1 s (4 s of worker time): UC 3.2 s (0.2 s of it blocked in tasks), so
    /// the tasks had 80% of it, known to ±1 point. The region's task-clock is 1000 ± 40; the
    /// windows had given its tasks 100 ± 500. Another region, not sampled, keeps its tasks'.
    #[test]
    fn the_tasks_of_a_sampled_region_take_its_user_code_share() {
        use crate::analysis::diagnoses::tests::region;
        use crate::analysis::lifecycle::{TaskCounts, Transitions};
        let mut sampled = region(
            TaskCounts::default(),
            400_000_000,
            400_000_000,
            Transitions::default(),
        );
        sampled.tasks_counted_in_program = 1000;
        sampled.state_share_uncertainty = 0.01;
        sampled.blocked_ns.uc = 200_000_000;
        let mut whole = region(TaskCounts::default(), 0, 0, Transitions::default());
        whole.site = 2;
        let mut items = vec![
            item(ItemKind::Region, 1, 1000.0, 40.0),
            item(ItemKind::Tasks, 1, 100.0, 500.0),
            item(ItemKind::Region, 2, 1000.0, 40.0),
            item(ItemKind::Tasks, 2, 900.0, 10.0),
        ];
        from_regions(&mut items, &[sampled, whole]);
        let tasks = &items[1];
        assert_eq!(tasks.from_region_uc_share, Some(0.8));
        assert!((tasks.counters[0].value - 800.0).abs() < 1e-9);
        // 40 × 0.8 + 1000 × 0.01.
        assert!((tasks.counters[0].error - 42.0).abs() < 1e-9, "{tasks:?}");
        assert_eq!(items[3], item(ItemKind::Tasks, 2, 900.0, 10.0));
    }

    #[test]
    fn a_share_of_the_region_with_its_uncertainty() {
        // Region: 300 ms ± 10 ms; UC 84% of worker time known to ±0.9 points.
        let tasks = share_of(&counter(300e6, 10e6), 0.84, 0.009);
        assert!((tasks.value - 252e6).abs() < 1.0);
        assert!((tasks.error - (8.4e6 + 2.7e6)).abs() < 1.0, "{tasks:?}");
        assert_eq!(tasks.share, ShareKind::Equal);
    }
}
