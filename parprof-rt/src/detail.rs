//! The detailed instrumentation's per-call measurement: the counter group is read at every
//! probe entry and exit, and each call's deltas are added to its site's sums. Shared by the
//! slices (stats in the shared-memory slot) and `PARPROF_DETAIL=full` (stats on the heap).

use crate::perf_group::{Group, MAX_COUNTERS};
use crate::slice_results::SiteStats;
use crate::trace::EventKind;

/// Sites with an id below this are measured (ids are small and dense, from 1); the table is
/// indexed by id so that a call's update is one index, not a search.
pub(crate) const MAX_SITES: usize = 1024;
/// Nesting depth kept; deeper calls are not measured (their exits are still matched).
const MAX_DEPTH: usize = 64;
/// Back-to-back reads whose smallest delta is taken as what one read costs.
const COST_READS: usize = 32;

/// One site's sums, as the shared-memory slot holds them.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct SiteAcc {
    calls: u64,
    sums: [f64; MAX_COUNTERS],
    squares: [f64; MAX_COUNTERS],
}

/// An open call: its site, the counters at its entry, and the reads made so far.
#[derive(Clone, Copy, Default)]
struct Open {
    site: u32,
    /// False when the entry's read failed: the call is matched but not measured.
    valid: bool,
    values: [u64; MAX_COUNTERS],
    reads: u64,
}

/// The measurement state of one thread.
pub(crate) struct Measure {
    pub(crate) group: Group,
    /// What one read adds to the counters, per column (task-clock: the read's own time).
    read_cost: [u64; MAX_COUNTERS],
    stack: [Open; MAX_DEPTH],
    /// Open calls, including those deeper than `MAX_DEPTH`.
    depth: usize,
    /// Reads made, to know how many fell inside a call.
    reads: u64,
    /// Sites measured are below this (a slice ignores sites its parent had not registered:
    /// their ids are the child's alone, see `recorder::register_site`).
    site_limit: u32,
    /// Points to `MAX_SITES` entries, valid as long as `self`.
    sites: *mut SiteAcc,
    /// One past the highest site id measured.
    used: u32,
}

impl Measure {
    /// # Safety
    /// `sites` points to `MAX_SITES` writable entries that outlive the `Measure` and that
    /// nothing else writes meanwhile.
    pub(crate) unsafe fn new(group: Group, sites: *mut SiteAcc, site_limit: u32) -> Measure {
        let mut m = Measure {
            group,
            read_cost: [0; MAX_COUNTERS],
            stack: [Open::default(); MAX_DEPTH],
            depth: 0,
            reads: 0,
            site_limit: site_limit.min(MAX_SITES as u32),
            sites,
            used: 0,
        };
        m.read_cost = m.measure_read_cost();
        m
    }

    /// The smallest counter deltas of back-to-back reads: between two values taken, the end of
    /// one read and the start of the next, which is what a probe event's read adds.
    fn measure_read_cost(&self) -> [u64; MAX_COUNTERS] {
        let mut cost = [u64::MAX; MAX_COUNTERS];
        let mut previous = [0; MAX_COUNTERS];
        if !self.group.read(&mut previous) {
            return [0; MAX_COUNTERS];
        }
        for _ in 0..COST_READS {
            let mut values = [0; MAX_COUNTERS];
            if !self.group.read(&mut values) {
                continue;
            }
            for i in 0..self.group.len() {
                cost[i] = cost[i].min(values[i].saturating_sub(previous[i]));
            }
            previous = values;
        }
        cost.map(|c| if c == u64::MAX { 0 } else { c })
    }

    /// The group's values now; `None` when the read failed.
    pub(crate) fn read_now(&self) -> Option<[u64; MAX_COUNTERS]> {
        let mut values = [0; MAX_COUNTERS];
        self.group.read(&mut values).then_some(values)
    }

    /// A probe event of `site`: entries open a call, exits close the innermost one and add
    /// its deltas. An exit without its entry (a call open when the slice began) is ignored.
    #[inline]
    pub(crate) fn event(&mut self, kind: EventKind, site: u32) {
        match kind {
            EventKind::Enter => {
                let mut values = [0; MAX_COUNTERS];
                let valid = self.group.read(&mut values);
                self.reads += 1;
                if let Some(open) = self.stack.get_mut(self.depth) {
                    *open = Open {
                        site,
                        valid,
                        values,
                        reads: self.reads,
                    };
                }
                self.depth += 1;
            }
            EventKind::Exit => {
                if self.depth == 0 {
                    return;
                }
                let Some(&open) = self.stack.get(self.depth - 1) else {
                    // Deeper than the stack: not measured.
                    self.depth -= 1;
                    return;
                };
                if open.site != site {
                    // Not the innermost call's exit: a call that was open before the stack
                    // began. Leave the stack as it is.
                    return;
                }
                let mut values = [0; MAX_COUNTERS];
                let valid = self.group.read(&mut values) && open.valid;
                self.reads += 1;
                self.depth -= 1;
                if valid {
                    self.add(&open, &values);
                }
            }
            _ => {}
        }
    }

    fn add(&mut self, open: &Open, values: &[u64; MAX_COUNTERS]) {
        if open.site >= self.site_limit {
            return;
        }
        // Between the entry's value and the exit's: the end of the entry's read and the start
        // of the exit's (one back-to-back read's worth), and every read of the calls inside.
        let reads_inside = self.reads - open.reads;
        // SAFETY: `site_limit` ≤ MAX_SITES, and `new`'s contract.
        let acc = unsafe { &mut *self.sites.add(open.site as usize) };
        acc.calls += 1;
        let n = self.group.len();
        for (i, (value, entry)) in values[..n].iter().zip(&open.values[..n]).enumerate() {
            let cost = self.read_cost[i].saturating_mul(reads_inside);
            let delta = value.saturating_sub(*entry).saturating_sub(cost) as f64;
            acc.sums[i] += delta;
            acc.squares[i] += delta * delta;
        }
        self.used = self.used.max(open.site + 1);
    }

    /// One past the highest site id measured.
    pub(crate) fn used(&self) -> u32 {
        self.used
    }
}

/// The measured sites of a table of `used` entries, for the results file.
///
/// # Safety
/// `sites` points to at least `used` ≤ `MAX_SITES` readable entries.
pub(crate) unsafe fn site_stats(
    sites: *const SiteAcc,
    used: u32,
    columns: usize,
) -> Vec<SiteStats> {
    let columns = columns.min(MAX_COUNTERS);
    (0..used.min(MAX_SITES as u32))
        .filter_map(|site| {
            // SAFETY: the caller's contract.
            let acc = unsafe { *sites.add(site as usize) };
            (acc.calls > 0).then(|| SiteStats {
                site,
                calls: acc.calls,
                sums: acc.sums[..columns].to_vec(),
                sums_of_squares: acc.squares[..columns].to_vec(),
            })
        })
        .collect()
}
