//! The lifecycle the program counted itself, joined to the one rebuilt from events.
//!
//! A worker writes per-job events in bounded windows (the runtime's `lifecycle_totals`); between
//! a pause and the next resume ([`EventKind::Detail`]) it counts user-code time, gaps by how
//! they ended, search rounds, sleeps and task durations, and the writer saves the counts as
//! cumulative [`LifecycleTotals`] chunks. The counts are the sums this module's parent makes
//! of folded gaps (gaps without switch records or region windows), so they are added where
//! those sums go: user code, transitions and folded gaps along the region's chain, tasks to
//! the region itself, durations to the region's distributions. The program's counts and the
//! events never cover the same stretch: the stretch a resume's first event ends was counted by
//! the program, and a task begun before a resume is timed by it.

use super::state::{Frame, RegionAcc, Sum, ThreadState};
use crate::analysis::id_map::IdMap;
use crate::analysis::offcpu::OffCpuIndex;
use parprof_rt::trace::{
    DETAIL_FRAME, DETAIL_PAUSE, DETAIL_RESUME, Event, EventKind, GapSum, LifecycleTotals,
    TaskOrigin, duration_bucket_midpoint,
};
use std::collections::HashMap;

fn add_sum(to: &mut Sum, s: GapSum) {
    to.count += s.count;
    to.ticks += s.ticks;
}

/// A thread's detail pauses, resumes, or tells a frame open at the resume.
pub(super) fn on_detail(t: &mut ThreadState, event: &Event) {
    match event.flags {
        DETAIL_PAUSE => {
            if !t.paused {
                t.paused_since = event.ts;
            }
            t.paused = true;
            t.frames.clear();
            t.untracked_frames = 0;
            t.in_uc = false;
            t.search = Default::default();
        }
        DETAIL_RESUME => {
            if t.paused {
                t.paused_stretches.push((t.paused_since, event.ts));
            }
            t.paused = false;
            t.since = event.ts.max(t.since);
            t.in_uc = false;
            t.gap_after_task = false;
            t.search = Default::default();
            // aux 1: a gap starts here (the thread goes to sleep), the trace's to place.
            t.fresh = event.aux == 0;
        }
        DETAIL_FRAME => {
            t.push(Frame {
                region: event.id,
                begin: event.ts,
                task: event.aux & 1 == 1,
                partial: true,
                nested: 0,
                nested_switched_out: 0,
            });
            // In the frame's code, unless the window opened as the thread went to sleep: it is
            // in a gap then (a join waiting for its stolen half sleeps inside its task).
            t.in_uc = t.fresh;
        }
        _ => {}
    }
}

/// A region begins or ends on a paused thread: its run is kept, the thread's stretches are
/// the program's to count.
pub(super) fn on_paused_region(
    t: &mut ThreadState,
    regions: &mut IdMap<u32, RegionAcc>,
    event: &Event,
    kind: EventKind,
) {
    let region = event.id;
    if kind == EventKind::RegionBegin {
        t.open_regions.push((region, event.ts));
        t.acc(region).ran_region_code = true;
    } else if let Some(at) = t.open_regions.iter().rposition(|(r, _)| *r == region) {
        let (_, begin) = t.open_regions.remove(at);
        regions
            .entry(region)
            .or_default()
            .windows
            .push((begin, event.ts.max(begin)));
    }
}

/// Adds the program's counts (the last snapshot of each thread in each region) to the threads
/// and regions, before they are classified; `parents` maps a region to the one that entered it,
/// `offcpu` gives the time the longest tasks' threads were switched out.
pub(super) fn merge_program_totals(
    all: HashMap<(u32, u32), LifecycleTotals>,
    threads: &mut IdMap<u32, ThreadState>,
    regions: &mut IdMap<u32, RegionAcc>,
    parents: &IdMap<u32, u32>,
    offcpu: &OffCpuIndex,
) {
    for totals in all.into_values() {
        // Region 0 is no region: a search left by no task.
        if totals.region == 0 {
            continue;
        }
        let region = regions.entry(totals.region).or_default();
        let items = &mut region.iterator_items;
        items.iterators += totals.iterators;
        items.items += totals.iterator_items;
        items.nested_iterators += totals.nested_iterators;
        items.nested_items += totals.nested_iterator_items;
        let t = threads.entry(totals.tid).or_default();
        region.longest_own = region.longest_own.max(longest_running(&totals, offcpu));
        merge_one(&totals, t, region, parents);
    }
}

/// The own time of the longest task the program counted, less the time its thread was
/// switched out from its begin to its end. Exact for a task that ran no nested task; for one
/// that did, the nested tasks' switched-out time is taken out too (their time is not known
/// apart), so it is at most that much short.
fn longest_running(c: &LifecycleTotals, offcpu: &OffCpuIndex) -> u64 {
    let begin = c.max_task_end.saturating_sub(c.max_task_span_ticks);
    let switched_out = offcpu.within(c.tid, begin, c.max_task_end).total();
    c.max_task_ticks.saturating_sub(switched_out)
}

/// Adds one snapshot to its thread (along the region's chain) and to its region.
fn merge_one(
    c: &LifecycleTotals,
    t: &mut ThreadState,
    region: &mut RegionAcc,
    parents: &IdMap<u32, u32>,
) {
    t.for_chain(parents, c.region, |a| {
        a.uc += c.user_code_ticks;
        a.counted_uc += c.user_code_ticks;
        a.transitions.uc_uc += c.bypasses;
        a.transitions.uc_lq += c.task_ends;
        add_sum(&mut a.folded.local, c.local_gaps);
        add_sum(&mut a.folded.steal, c.steal_gaps);
        for &(bits, s) in &c.resume_gaps {
            add_sum(&mut a.folded.resume[usize::from(bits)], s);
        }
        a.folded.idle_ticks += c.idle_ticks;
        a.folded.rounds += c.search_rounds;
        a.folded.idle_episodes += c.idle_episodes;
    });
    let acc = t.acc(c.region);
    for (origin, &n) in c.tasks.iter().enumerate() {
        let Some(origin) = TaskOrigin::from_u8(origin as u8) else {
            continue;
        };
        acc.tasks.add(origin, n);
        region.tasks.add(origin, n);
        region.counted_in_program += n;
    }
    if c.user_code_ticks > 0 || c.tasks.iter().any(|&n| n > 0) {
        acc.ran_region_code = true;
    }
    let resumes: u64 = c.resume_gaps.iter().map(|(_, s)| s.ticks).sum();
    let marked = c.user_code_ticks + c.local_gaps.ticks + c.steal_gaps.ticks + resumes;
    // No spacing: every stretch was timed (traces before version 9).
    if let Some(marks) = marked.checked_div(c.mark_spacing_ticks) {
        region.marked_ticks += marked;
        region.marks += marks;
    }
    for &(bucket, n) in &c.task_durations {
        let midpoint = duration_bucket_midpoint(usize::from(bucket));
        region
            .durations
            .record_counted(midpoint, n, c.min_task_ticks, c.max_task_ticks);
    }
    for &(bucket, n) in &c.local_gap_lengths {
        let midpoint = duration_bucket_midpoint(usize::from(bucket));
        region
            .local_gaps
            .record_counted(midpoint, n, midpoint, midpoint);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parprof_rt::trace::EventKind;

    fn detail(ts: u64, flags: u8, id: u32, aux: u16) -> Event {
        Event {
            ts,
            id,
            aux,
            kind: EventKind::Detail as u8,
            flags,
        }
    }

    #[test]
    fn a_window_opened_to_sleep_starts_in_a_gap_inside_its_frames() {
        // A join waiting for its stolen half goes to sleep inside its task: the frame is open,
        // the thread in a gap.
        let mut t = ThreadState::default();
        on_detail(&mut t, &detail(10, DETAIL_PAUSE, 0, 0));
        on_detail(&mut t, &detail(20, DETAIL_RESUME, 0, 1));
        on_detail(&mut t, &detail(20, DETAIL_FRAME, 7, 1));
        assert_eq!(t.frames.len(), 1);
        assert!(!t.in_uc);
        // A window opened at a task begin: in the frame's code.
        let mut t = ThreadState::default();
        on_detail(&mut t, &detail(10, DETAIL_PAUSE, 0, 0));
        on_detail(&mut t, &detail(20, DETAIL_RESUME, 0, 0));
        on_detail(&mut t, &detail(20, DETAIL_FRAME, 7, 1));
        assert!(t.in_uc);
    }
}
