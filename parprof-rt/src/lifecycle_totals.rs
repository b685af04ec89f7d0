//! The rayon lifecycle counted in the program, so that what profiling costs follows run time and
//! threads, not the number of rayon jobs.
//!
//! Every rayon-core hook (a task's begin and end, a fork's return, a failed search round, a
//! sleep) and every region begin and end passes through a thread's [`Tracker`]. A thread writes
//! per-job events ("detail") in windows: at most [`WINDOW_EVENTS`] every [`WINDOW_NS`]. Past
//! that, or when its buffer is half full (the writer fell behind: the program never waits for
//! it), it writes a pause ([`EventKind::Detail`]) and from then on counts what the analysis
//! would have summed from the events — user-code time, the gaps between tasks by how they
//! ended, the hooks' failed rounds and sleeps, task durations in log buckets — in counters per
//! (thread, region). The next window opens at the first task begin or fork return once the
//! period has passed, with one event per frame open then, so the analysis takes over exactly
//! where the counters stop. Region begins and ends are always written: they bound the
//! regions' runs.
//!
//! A thread updates its own counters only, with plain loads and stores of atomics (no locked
//! instruction); the writer thread snapshots the ones that changed every
//! [`SNAPSHOT_EVERY`] and at exit as cumulative [`LifecycleTotals`] chunks, so a program that is
//! killed keeps its last snapshot. Memory: one set of counters (about 9 KiB) per thread and
//! region it worked for.

use crate::clock;
use crate::recorder;
use crate::trace::{
    Chunk, DETAIL_FRAME, DETAIL_PAUSE, DETAIL_RESUME, DURATION_BUCKETS, Event, EventKind, GapSum,
    LifecycleTotals, TaskOrigin, duration_bucket,
};
use std::cell::UnsafeCell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Length of a detail window.
pub const WINDOW_NS: u64 = 10_000_000;
/// Per-job events a thread writes per window, at most: 51,200 a second.
pub const WINDOW_EVENTS: u32 = 512;
/// Windows a thread opens early per window length, at most, at a task of another region
/// than the one it paused in (see [`Tracker::paused_region`]), and the events each writes.
const EARLY_WINDOWS: u32 = 16;
const EARLY_WINDOW_EVENTS: u32 = 32;
/// How often the writer snapshots the counters that changed.
pub const SNAPSHOT_EVERY: Duration = Duration::from_millis(100);

/// `PARPROF_RAYON_DETAIL=all` writes every job's events (no windows): a cost that follows the
/// job rate, for comparing the two on one program.
pub const DETAIL_ENV: &str = "PARPROF_RAYON_DETAIL";

/// Failed search rounds after which a paused thread is taken as idle (see
/// [`Tracker::on_hook`]): not the first, which most steals end.
const IDLE_ROUNDS: u32 = 2;
/// [`Tracker::paused_region`] of a thread that paused outside every region.
const NO_REGION: u32 = u32::MAX;
/// [`WINDOW_NS`] in clock ticks, set at start-up.
static WINDOW_TICKS: AtomicU64 = AtomicU64::new(WINDOW_NS);
/// [`WINDOW_EVENTS`], or no limit with [`DETAIL_ENV`]`=all`.
static EVENTS_PER_WINDOW: AtomicU32 = AtomicU32::new(WINDOW_EVENTS);

/// Sets the window length in ticks of the event clock, and the events per window.
pub(crate) fn configure(ticks_per_ns: f64) {
    let ticks = (WINDOW_NS as f64 * ticks_per_ns).max(1.0) as u64;
    WINDOW_TICKS.store(ticks, Ordering::Relaxed);
    if std::env::var_os(DETAIL_ENV).is_some_and(|v| v == "all") {
        EVENTS_PER_WINDOW.store(u32::MAX, Ordering::Relaxed);
    }
}

/// A counter that only its thread adds to: a load and a store, no locked instruction; the
/// writer reads it at any time.
#[derive(Default)]
struct Count(AtomicU64);

impl Count {
    #[inline(always)]
    fn add(&self, v: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(v),
            Ordering::Relaxed,
        );
    }
    #[inline(always)]
    fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Default)]
struct Sum {
    count: Count,
    ticks: Count,
}

impl Sum {
    #[inline(always)]
    fn add(&self, ticks: u64) {
        self.count.add(1);
        self.ticks.add(ticks);
    }
    fn get(&self) -> GapSum {
        GapSum {
            count: self.count.get(),
            ticks: self.ticks.get(),
        }
    }
}

/// What one thread did in one region while its detail was paused. See [`LifecycleTotals`].
struct Counters {
    tid: u32,
    region: u32,
    user_code: Count,
    bypasses: Count,
    task_ends: Count,
    tasks: [Count; 4],
    local: Sum,
    steal: Sum,
    resume: [Sum; 65],
    idle: Count,
    rounds: Count,
    idle_episodes: Count,
    durations: [Count; DURATION_BUCKETS],
    local_gap_lengths: [Count; DURATION_BUCKETS],
    min_task: Count,
    max_task: Count,
    /// When the longest task ended and how long it lasted begin to end: the analysis takes
    /// out the time its thread was switched out then (see [`LifecycleTotals::max_task_end`]).
    max_task_end: Count,
    max_task_span: Count,
}

impl Counters {
    fn new(tid: u32, region: u32) -> Counters {
        Counters {
            tid,
            region,
            user_code: Count::default(),
            bypasses: Count::default(),
            task_ends: Count::default(),
            tasks: Default::default(),
            local: Sum::default(),
            steal: Sum::default(),
            resume: std::array::from_fn(|_| Sum::default()),
            idle: Count::default(),
            rounds: Count::default(),
            idle_episodes: Count::default(),
            durations: std::array::from_fn(|_| Count::default()),
            local_gap_lengths: std::array::from_fn(|_| Count::default()),
            min_task: Count(AtomicU64::new(u64::MAX)),
            max_task: Count::default(),
            max_task_end: Count::default(),
            max_task_span: Count::default(),
        }
    }

    /// A task's own time: counted in the histogram (and the shortest) when it is a `leaf`, a
    /// piece of work that ran no nested task (the split tasks of a recursion do little of
    /// their own and would make the median theirs); the longest is over every task, kept with
    /// when it ended (`end`) and its time from begin to end (`span`).
    fn task_duration(&self, ticks: u64, leaf: bool, end: u64, span: u64) {
        if leaf {
            self.durations[duration_bucket(ticks)].add(1);
            if ticks < self.min_task.get() {
                self.min_task.set(ticks);
            }
        }
        if ticks > self.max_task.get() {
            self.max_task.set(ticks);
            self.max_task_end.set(end);
            self.max_task_span.set(span);
        }
    }

    fn totals(&self) -> LifecycleTotals {
        let buckets = |counts: &[Count]| -> Vec<(u16, u64)> {
            (counts.iter().enumerate())
                .filter_map(|(b, c)| Some((b as u16, c.get())).filter(|(_, n)| *n > 0))
                .collect()
        };
        let task_durations = buckets(&self.durations);
        LifecycleTotals {
            tid: self.tid,
            region: self.region,
            user_code_ticks: self.user_code.get(),
            bypasses: self.bypasses.get(),
            task_ends: self.task_ends.get(),
            tasks: std::array::from_fn(|i| self.tasks[i].get()),
            local_gaps: self.local.get(),
            steal_gaps: self.steal.get(),
            resume_gaps: (self.resume.iter().enumerate())
                .map(|(bits, s)| (bits as u8, s.get()))
                .filter(|(_, s)| s.count > 0)
                .collect(),
            idle_ticks: self.idle.get(),
            search_rounds: self.rounds.get(),
            idle_episodes: self.idle_episodes.get(),
            min_task_ticks: if task_durations.is_empty() {
                0
            } else {
                self.min_task.get()
            },
            max_task_ticks: self.max_task.get(),
            max_task_end: self.max_task_end.get(),
            max_task_span_ticks: self.max_task_span.get(),
            task_durations,
            local_gap_lengths: buckets(&self.local_gap_lengths),
        }
    }
}

/// Every thread's counters, with the totals the writer wrote of them last. Never shrinks: a
/// thread's counters outlive it until the final snapshot.
static COUNTERS: Mutex<Vec<(&'static Counters, LifecycleTotals)>> = Mutex::new(Vec::new());

/// Hands the counters that changed since the last call to `write`, as totals chunks. The
/// writer compares them itself, so that the hooks store nothing but the counts.
pub(crate) fn snapshot_changed(mut write: impl FnMut(Chunk)) {
    let mut all = COUNTERS.lock().unwrap_or_else(|e| e.into_inner());
    for (counters, written) in all.iter_mut() {
        let totals = counters.totals();
        if totals != *written {
            *written = totals.clone();
            write(Chunk::LifecycleTotals(totals));
        }
    }
}

/// A task or region body open on a thread.
#[derive(Clone, Copy, Debug)]
struct Frame {
    region: u32,
    begin: u64,
    task: bool,
    /// Time of the tasks that ran nested in this one (a join's halves, work taken while
    /// waiting in it): a task's own time is its duration less theirs.
    nested: u64,
}

/// How the current stretch of a thread (user code or a gap) ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Close {
    Begin(TaskOrigin),
    Resume,
    TaskEnd,
    RegionBegin,
    RegionEnd,
}

/// Frames written at a resume, at most: deeper ones (not a practical case) are left out.
const MAX_RESUMED_FRAMES: usize = 256;

/// One thread's lifecycle state: the same rules as the analysis's (user code from a task's
/// begin or a fork's return to a task's end; a gap classified by the event that ends it),
/// kept whether or not the thread writes detail, so that it can stop or resume at any event.
struct Tracker {
    detail: bool,
    /// Start of the current detail window, and the events written in it.
    window_start: u64,
    window_events: u32,
    /// When the current detail window opened: tasks begun before it have no begin in the
    /// analysis, so their durations are counted here.
    resumed_at: u64,
    started: bool,
    in_uc: bool,
    /// Start of the current stretch (user code or gap).
    since: u64,
    rounds: u32,
    sleeps: u32,
    idle_from: Option<u64>,
    frames: Vec<Frame>,
    /// The region of the last task that ended: where a search it left is counted.
    last_region: u32,
    /// The region of the innermost frame when detail paused ([`NO_REGION`] for none): the
    /// analysis keeps the frames of the pause, and the probe calls made while paused go under
    /// them. A task of another region opens a window early, so that those calls are not put
    /// under a region they are not in.
    paused_region: u32,
    /// Windows opened early since the last one opened on time.
    early_windows: u32,
    /// The counters of each region this thread worked for, the last one used first.
    counters: Vec<(u32, &'static Counters)>,
}

thread_local! {
    static TRACKER: UnsafeCell<Tracker> = const { UnsafeCell::new(Tracker::new()) };
}

/// A rayon-core hook on the calling thread: written as an event while the thread's detail
/// window is open, counted otherwise. False when nothing is recorded (recording is off, or
/// the thread is past its exit).
#[inline(always)]
pub(crate) fn hook(kind: EventKind, region: u32, aux: u16, flags: u8) -> bool {
    TRACKER
        .try_with(|t| {
            // SAFETY: the tracker is this thread's alone and no reference to it outlives a call;
            // hooks do not run inside one another.
            let t = unsafe { &mut *t.get() };
            t.on_hook(kind, region, aux, flags)
        })
        .unwrap_or(false)
}

impl Tracker {
    const fn new() -> Tracker {
        Tracker {
            detail: true,
            window_start: 0,
            window_events: 0,
            resumed_at: 0,
            started: false,
            in_uc: false,
            since: 0,
            rounds: 0,
            sleeps: 0,
            idle_from: None,
            frames: Vec::new(),
            last_region: 0,
            paused_region: NO_REGION,
            early_windows: 0,
            counters: Vec::new(),
        }
    }

    #[inline(always)]
    fn on_hook(&mut self, kind: EventKind, region: u32, aux: u16, flags: u8) -> bool {
        // Region begins and ends bound the regions' runs: always written.
        let always = matches!(kind, EventKind::RegionBegin | EventKind::RegionEnd);
        if self.detail || always {
            let Some(ts) = recorder::stamp(kind, region, aux, flags) else {
                return false;
            };
            self.apply(ts, kind, region, flags, !self.detail);
            if self.detail {
                self.window_events += 1;
                if self.window_events >= EVENTS_PER_WINDOW.load(Ordering::Relaxed)
                    || !recorder::ring_has_room()
                {
                    self.pause(ts);
                }
            }
            return true;
        }
        if !recorder::is_on() {
            return false;
        }
        let ts = clock::now().max(self.since);
        let idling = kind == EventKind::SleepBegin
            || (kind == EventKind::SearchRound && self.rounds == IDLE_ROUNDS);
        if idling {
            // The counts of the calls this thread did not record are written once it idles:
            // it may write nothing more before the program ends.
            recorder::flush_unrecorded(ts);
        }
        let resumes_here = matches!(
            kind,
            EventKind::TaskBegin | EventKind::TaskResume | EventKind::SleepBegin
        );
        if resumes_here {
            let on_time =
                ts.wrapping_sub(self.window_start) >= WINDOW_TICKS.load(Ordering::Relaxed);
            let early = !on_time
                && kind == EventKind::TaskBegin
                && region != self.paused_region
                && self.early_windows < EARLY_WINDOWS;
            if (on_time || early) && recorder::ring_has_room() {
                return self.resume(ts, kind, region, aux, flags, early);
            }
        }
        self.apply(ts, kind, region, flags, true);
        true
    }

    /// Stops writing detail after the event stamped `ts`.
    #[cold]
    fn pause(&mut self, ts: u64) {
        self.detail = false;
        self.paused_region = self.frames.last().map_or(NO_REGION, |f| f.region);
        recorder::record_measured(Event {
            ts,
            id: 0,
            aux: 0,
            kind: EventKind::Detail as u8,
            flags: DETAIL_PAUSE,
        });
    }

    /// Opens a detail window at a task begin or fork return (the stretch it ends is counted
    /// here), or at a sleep (the search so far is counted here, the analysis sees the rest of
    /// the gap, the idle part): the frames open now are written, then the event itself. An
    /// `early` window, opened to place the task in its region, is short and leaves the window
    /// length's start where it was.
    #[cold]
    fn resume(
        &mut self,
        ts: u64,
        kind: EventKind,
        region: u32,
        aux: u16,
        flags: u8,
        early: bool,
    ) -> bool {
        let into_sleep = kind == EventKind::SleepBegin;
        let close = if into_sleep {
            // A search so far: it will end with a task from elsewhere, or the run's end.
            Close::Begin(TaskOrigin::Stolen)
        } else {
            close_of(kind, flags)
        };
        let counted_region = if into_sleep { self.last_region } else { region };
        self.close(ts, close, counted_region, true);
        let detail = |id: u32, aux: u16, flags: u8| {
            recorder::record_measured(Event {
                ts,
                id,
                aux,
                kind: EventKind::Detail as u8,
                flags,
            })
        };
        detail(0, u16::from(into_sleep), DETAIL_RESUME);
        let skipped = self.frames.len().saturating_sub(MAX_RESUMED_FRAMES);
        for frame in &self.frames[skipped..] {
            detail(frame.region, u16::from(frame.task), DETAIL_FRAME);
        }
        self.detail = true;
        let written = 1 + (self.frames.len() - skipped) as u32;
        if early {
            self.early_windows += 1;
            let limit = EVENTS_PER_WINDOW.load(Ordering::Relaxed);
            self.window_events = limit.saturating_sub(EARLY_WINDOW_EVENTS).max(written);
        } else {
            self.early_windows = 0;
            self.window_start = ts;
            self.window_events = written;
        }
        self.resumed_at = ts;
        let stamped = recorder::stamp(kind, region, aux, flags).unwrap_or(ts);
        if into_sleep {
            self.on_search(kind, stamped);
        } else {
            self.open(stamped, close, region, false);
        }
        true
    }

    /// Ends the current stretch and starts what follows the event; counted when `count`.
    #[inline(always)]
    fn apply(&mut self, ts: u64, kind: EventKind, region: u32, flags: u8, count: bool) {
        if matches!(
            kind,
            EventKind::SearchRound | EventKind::SleepBegin | EventKind::SleepEnd
        ) {
            self.on_search(kind, ts);
            return;
        }
        let close = close_of(kind, flags);
        if !self.started {
            // The time before a thread's first event is the analysis's to place.
            self.started = true;
            self.since = ts;
        } else {
            self.close(ts, close, region, count);
        }
        self.open(ts, close, region, count);
    }

    fn on_search(&mut self, kind: EventKind, ts: u64) {
        if self.in_uc {
            return;
        }
        match kind {
            EventKind::SearchRound => self.rounds += 1,
            EventKind::SleepBegin => self.sleeps += 1,
            _ => return,
        }
        self.idle_from.get_or_insert(ts);
    }

    #[inline(always)]
    fn counters(&mut self, region: u32) -> &'static Counters {
        match self.counters.first() {
            Some(&(r, c)) if r == region => c,
            _ => self.counters_cold(region),
        }
    }

    #[cold]
    fn counters_cold(&mut self, region: u32) -> &'static Counters {
        let counters = match self.counters.iter().position(|(r, _)| *r == region) {
            Some(at) => self.counters.remove(at).1,
            None => {
                // One set per thread and region for the program's lifetime.
                let c: &'static Counters = Box::leak(Box::new(Counters::new(
                    crate::thread_context::current_tid(),
                    region,
                )));
                let unwritten = LifecycleTotals {
                    tid: c.tid,
                    region,
                    ..LifecycleTotals::default()
                };
                COUNTERS
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((c, unwritten));
                c
            }
        };
        self.counters.insert(0, (region, counters));
        counters
    }

    /// Ends the current stretch at `ts`, as the analysis does; counts it when `count`.
    #[inline(always)]
    fn close(&mut self, ts: u64, how: Close, region: u32, count: bool) {
        let since = std::mem::replace(&mut self.since, ts);
        let (rounds, sleeps, idle_from) = (self.rounds, self.sleeps, self.idle_from.take());
        self.rounds = 0;
        self.sleeps = 0;
        if !count {
            return;
        }
        let len = ts.saturating_sub(since);
        if self.in_uc {
            if let Some(top) = self.frames.last().map(|f| f.region) {
                let c = self.counters(top);
                c.user_code.add(len);
            }
            if let Close::Begin(_) = how {
                let c = self.counters(region);
                c.bypasses.add(1);
            }
            return;
        }
        let c = self.counters(region);
        match how {
            Close::Begin(TaskOrigin::Local | TaskOrigin::Inline) => {
                c.local.add(len);
                c.local_gap_lengths[duration_bucket(len)].add(1);
            }
            Close::Begin(TaskOrigin::Stolen | TaskOrigin::Injected) => c.steal.add(len),
            Close::Resume => c.resume[64 - len.leading_zeros() as usize].add(len),
            Close::TaskEnd | Close::RegionBegin | Close::RegionEnd => return,
        }
        // Only a search that slept is taken as idle after its first failed round (the
        // analysis's rule for gaps it sees without switch records).
        if let Some(t) = idle_from {
            if sleeps > 0 {
                c.idle.add(ts.saturating_sub(t.max(since)));
            }
            c.idle_episodes.add(1);
        }
        c.rounds.add(u64::from(rounds));
    }

    /// Starts what follows an event at `ts`: a task, a region body, user code or a gap.
    #[inline(always)]
    fn open(&mut self, ts: u64, how: Close, region: u32, count: bool) {
        match how {
            Close::Begin(origin) => {
                self.frames.push(Frame {
                    region,
                    begin: ts,
                    task: true,
                    nested: 0,
                });
                if count {
                    let c = self.counters(region);
                    c.tasks[origin as usize].add(1);
                }
                self.in_uc = true;
            }
            Close::TaskEnd => {
                if let Some(frame) = self.pop(true, region) {
                    self.last_region = frame.region;
                    let took = ts.saturating_sub(frame.begin);
                    if let Some(outer) = self.frames.iter_mut().rev().find(|f| f.task) {
                        outer.nested += took;
                    }
                    // The analysis times the tasks it saw begin in the current window.
                    let seen_whole = !count && frame.begin >= self.resumed_at;
                    if !seen_whole {
                        let c = self.counters(frame.region);
                        c.task_duration(
                            took.saturating_sub(frame.nested),
                            frame.nested == 0,
                            ts,
                            took,
                        );
                        if count {
                            c.task_ends.add(1);
                        }
                    }
                }
                self.in_uc = false;
            }
            Close::Resume => self.in_uc = true,
            Close::RegionBegin => {
                self.frames.push(Frame {
                    region,
                    begin: ts,
                    task: false,
                    nested: 0,
                });
                self.in_uc = true;
            }
            Close::RegionEnd => {
                self.pop(false, region);
                // Back in the enclosing task or region's code, or in code not seen.
                self.in_uc = !self.frames.is_empty();
            }
        }
    }

    /// Removes the innermost open frame of the given kind (normally the top one).
    #[inline(always)]
    fn pop(&mut self, task: bool, region: u32) -> Option<Frame> {
        match self.frames.last() {
            Some(top) if top.task == task && top.region == region => self.frames.pop(),
            _ => self.pop_inner(task, region),
        }
    }

    /// [`Tracker::pop`] of a frame below the top one (an unwinding task, a region left out of
    /// order).
    #[cold]
    fn pop_inner(&mut self, task: bool, region: u32) -> Option<Frame> {
        let at = self
            .frames
            .iter()
            .rposition(|f| f.task == task && f.region == region)
            .or_else(|| self.frames.iter().rposition(|f| f.task == task))?;
        Some(self.frames.remove(at))
    }
}

fn close_of(kind: EventKind, flags: u8) -> Close {
    match kind {
        EventKind::TaskBegin => {
            Close::Begin(TaskOrigin::from_u8(flags).unwrap_or(TaskOrigin::Local))
        }
        EventKind::TaskResume => Close::Resume,
        EventKind::TaskEnd => Close::TaskEnd,
        EventKind::RegionBegin => Close::RegionBegin,
        _ => Close::RegionEnd,
    }
}
