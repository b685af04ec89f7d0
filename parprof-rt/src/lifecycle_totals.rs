//! The rayon lifecycle counted in the program, so that what profiling costs follows run time and
//! threads, not the number of rayon jobs.
//!
//! Every rayon-core hook (a task's begin and end, a fork's return, a failed search round, a
//! sleep) and every region begin and end passes through a thread's `Tracker`. A thread writes
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
use crate::state_clock;
use crate::trace::{
    Chunk, DETAIL_FRAME, DETAIL_PAUSE, DETAIL_RESUME, DURATION_BUCKETS, Event, EventKind, GapSum,
    LifecycleTotals, TaskOrigin, duration_bucket,
};
use std::cell::Cell;
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
    state_clock::configure(ticks_per_ns);
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

/// Stretches of one state timed with the event clock, as [`state_clock::TimedSample`] counts
/// them (the squares as `f64` bits).
#[derive(Default)]
struct Timed {
    count: Count,
    sum: Count,
    squares: Count,
}

impl Timed {
    #[inline]
    fn add(&self, ticks: u64) {
        self.count.add(1);
        self.sum.add(ticks);
        let squares = f64::from_bits(self.squares.get()) + (ticks as f64).powi(2);
        self.squares.set(squares.to_bits());
    }

    fn get(&self) -> state_clock::TimedSample {
        state_clock::TimedSample {
            count: self.count.get(),
            sum: self.sum.get() as f64,
            squares: f64::from_bits(self.squares.get()),
        }
    }
}

/// [`Counters::timed`] by state.
const UC: usize = 0;
const LOCAL: usize = 1;
const STEAL: usize = 2;
const RESUME: usize = 3;

/// What one thread did in one region while its detail was paused. See [`LifecycleTotals`].
struct Counters {
    tid: u32,
    region: u32,
    /// User code's time by the marks, and its stretches.
    user_code: Count,
    user_code_stretches: Count,
    /// The stretches of user code, local gaps, steal gaps and fork returns' gaps timed with
    /// the event clock (see [`state_clock::state_time`]).
    timed: [Timed; 4],
    bypasses: Count,
    task_ends: Count,
    tasks: [Count; 4],
    local: Sum,
    steal: Sum,
    /// Every gap a fork's return ended, and the timed ones by bit length: the totals split
    /// the former as the latter (see [`resume_gaps`]).
    resume: Sum,
    resume_timed: [Sum; 65],
    idle: Count,
    rounds: Count,
    idle_episodes: Count,
    /// Leaf tasks' own times timed exactly, and the leaves whose time the marks counted with
    /// those of them that were timed (a sample the totals scale to all of them).
    durations: [Count; DURATION_BUCKETS],
    leaves: Count,
    leaves_timed: Count,
    durations_timed: [Count; DURATION_BUCKETS],
    /// Local gaps' lengths, of the timed ones (scaled to `local`'s count).
    local_gap_lengths: [Count; DURATION_BUCKETS],
    min_task: Count,
    max_task: Count,
    /// When the longest task ended and how long it lasted begin to end: the analysis takes
    /// out the time its thread was switched out then (see [`LifecycleTotals::max_task_end`]).
    max_task_end: Count,
    max_task_span: Count,
    /// The region's own indexed iterators bridged on this thread, and their items; those
    /// bridged in its tasks below the entry, and theirs.
    iterators: Count,
    iterator_items: Count,
    nested_iterators: Count,
    nested_iterator_items: Count,
}

impl Counters {
    fn new(tid: u32, region: u32) -> Counters {
        Counters {
            tid,
            region,
            user_code: Count::default(),
            user_code_stretches: Count::default(),
            timed: Default::default(),
            bypasses: Count::default(),
            task_ends: Count::default(),
            tasks: Default::default(),
            local: Sum::default(),
            steal: Sum::default(),
            resume: Sum::default(),
            resume_timed: std::array::from_fn(|_| Sum::default()),
            idle: Count::default(),
            rounds: Count::default(),
            idle_episodes: Count::default(),
            durations: std::array::from_fn(|_| Count::default()),
            leaves: Count::default(),
            leaves_timed: Count::default(),
            durations_timed: std::array::from_fn(|_| Count::default()),
            local_gap_lengths: std::array::from_fn(|_| Count::default()),
            min_task: Count(AtomicU64::new(u64::MAX)),
            max_task: Count::default(),
            max_task_end: Count::default(),
            max_task_span: Count::default(),
            iterators: Count::default(),
            iterator_items: Count::default(),
            nested_iterators: Count::default(),
            nested_iterator_items: Count::default(),
        }
    }

    fn iterator_bridged(&self, items: u64) {
        self.iterators.add(1);
        self.iterator_items.add(items);
    }

    fn nested_iterator_bridged(&self, items: u64) {
        self.nested_iterators.add(1);
        self.nested_iterator_items.add(items);
    }

    /// A task ended that the analysis does not time (see [`Tracker::task_ended`]), with its own
    /// time `own` known as `known` says: a leaf (a piece of work that ran no nested task; the
    /// split tasks of a recursion do little of their own and would make the median theirs) goes
    /// into the histogram, exactly or as a sample, or is counted untimed (its time by the marks
    /// is too coarse for a bucket); the longest is over every task, kept with when it ended
    /// (`end`) and its time from begin to end (`span`).
    fn task_ended(&self, leaf: bool, own: u64, known: OwnTime, end: u64, span: u64) {
        if leaf {
            match known {
                OwnTime::Exact => self.durations[duration_bucket(own)].add(1),
                OwnTime::Timed => {
                    self.leaves.add(1);
                    self.leaves_timed.add(1);
                    self.durations_timed[duration_bucket(own)].add(1);
                }
                OwnTime::ByMarks => self.leaves.add(1),
            }
            if known != OwnTime::ByMarks && own < self.min_task.get() {
                self.min_task.set(own);
            }
        }
        if own > self.max_task.get() {
            self.max_task.set(own);
            self.max_task_end.set(end);
            self.max_task_span.set(span);
        }
    }

    fn totals(&self) -> LifecycleTotals {
        let get = |counts: &[Count]| counts.iter().map(Count::get).collect::<Vec<u64>>();
        let exact = get(&self.durations);
        let leaves = scaled(
            &get(&self.durations_timed),
            self.leaves_timed.get(),
            self.leaves.get(),
        );
        let task_durations = nonzero(exact.iter().zip(&leaves).map(|(a, b)| a + b));
        let local_gap_lengths = nonzero(scaled(
            &get(&self.local_gap_lengths),
            self.timed[LOCAL].count.get(),
            self.local.count.get(),
        ));
        let resume_timed: Vec<GapSum> = self.resume_timed.iter().map(Sum::get).collect();
        let spacing = state_clock::mark_spacing_ticks();
        let state_time = |marked: u64, count: u64, state: usize| {
            state_clock::state_time(marked, count, self.timed[state].get(), spacing)
        };
        let gaps = |sum: &Sum, state: usize| {
            let marked = sum.get();
            GapSum {
                count: marked.count,
                ticks: state_time(marked.ticks, marked.count, state),
            }
        };
        LifecycleTotals {
            tid: self.tid,
            region: self.region,
            user_code_ticks: state_time(self.user_code.get(), self.user_code_stretches.get(), UC),
            bypasses: self.bypasses.get(),
            task_ends: self.task_ends.get(),
            tasks: std::array::from_fn(|i| self.tasks[i].get()),
            local_gaps: gaps(&self.local, LOCAL),
            steal_gaps: gaps(&self.steal, STEAL),
            resume_gaps: resume_gaps(gaps(&self.resume, RESUME), &resume_timed),
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
            local_gap_lengths,
            mark_spacing_ticks: state_clock::mark_spacing_ticks(),
            iterators: self.iterators.get(),
            iterator_items: self.iterator_items.get(),
            nested_iterators: self.nested_iterators.get(),
            nested_iterator_items: self.nested_iterator_items.get(),
        }
    }
}

/// `(bucket, count)` of the buckets that hold any.
fn nonzero(counts: impl IntoIterator<Item = u64>) -> Vec<(u16, u64)> {
    (counts.into_iter().enumerate())
        .filter_map(|(b, n)| Some((b as u16, n)).filter(|(_, n)| *n > 0))
        .collect()
}

/// A histogram of `sampled` values scaled to `total` values: each bucket in proportion, rounded
/// so that the buckets add up to `total` exactly (the largest remainders round up).
fn scaled(buckets: &[u64], sampled: u64, total: u64) -> Vec<u64> {
    if sampled == 0 || total == sampled {
        return buckets.to_vec();
    }
    let share = |n: u64| u128::from(n) * u128::from(total);
    let mut out: Vec<u64> = (buckets.iter())
        .map(|&n| (share(n) / u128::from(sampled)) as u64)
        .collect();
    let short = total.saturating_sub(out.iter().sum());
    let mut by_remainder: Vec<usize> = (0..buckets.len()).filter(|&b| buckets[b] > 0).collect();
    by_remainder.sort_by_key(|&b| std::cmp::Reverse(share(buckets[b]) % u128::from(sampled)));
    for &b in by_remainder.iter().cycle().take(short as usize) {
        out[b] += 1;
    }
    out
}

/// The gaps a fork's return ended, by bit length: `all` of them split as the `timed` ones are
/// (counts in proportion to theirs, time to their time); by their mean length when none was
/// timed.
fn resume_gaps(all: GapSum, timed: &[GapSum]) -> Vec<(u8, GapSum)> {
    if all.count == 0 {
        return Vec::new();
    }
    let counts: Vec<u64> = timed.iter().map(|s| s.count).collect();
    let ticks: Vec<u64> = timed.iter().map(|s| s.ticks).collect();
    let timed_count: u64 = counts.iter().sum();
    if timed_count == 0 {
        let bits = 64 - (all.ticks / all.count).leading_zeros() as u8;
        return vec![(bits, all)];
    }
    let counts = scaled(&counts, timed_count, all.count);
    // Time in proportion to the timed time; by count when the timed gaps took no tick.
    let timed_ticks: u64 = ticks.iter().sum();
    let ticks = if timed_ticks == 0 {
        scaled(&counts, all.count, all.ticks)
    } else {
        scaled(&ticks, timed_ticks, all.ticks)
    };
    (0..timed.len())
        .filter(|&b| counts[b] > 0 || ticks[b] > 0)
        .map(|b| {
            let gaps = GapSum {
                count: counts[b],
                ticks: ticks[b],
            };
            (b as u8, gaps)
        })
        .collect()
}

/// How a task's own time is known: both ends written as events, timed with the event clock in
/// the sample, or by the marks only (a long task's).
#[derive(Clone, Copy, PartialEq, Eq)]
enum OwnTime {
    Exact,
    Timed,
    ByMarks,
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
    /// A region body, or the task a pool entry injected: where the region's own code runs
    /// (an iterator bridged there is the region's, one bridged in a task below is nested).
    entry: bool,
    /// Time of the tasks that ran nested in this one (a join's halves, work taken while
    /// waiting in it): a task's own time is its duration less theirs.
    nested: u64,
    /// Whether a task ended nested in this one: a leaf is a task without.
    has_nested: bool,
    /// Whether its begin was written as an event (its time is the event clock's).
    exact: bool,
    /// The event clock at the begin when the stretch it opened was timed, 0 otherwise.
    timed_begin: u64,
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
    /// Windows opened early, and at a sleep, since the last one opened on time.
    early_windows: u32,
    sleep_windows: u32,
    /// The region this thread counted for last ([`NO_REGION`] before the first) and its
    /// counters, in the tracker itself (one compare at every hook), and the counters of every
    /// region it worked for.
    last_counted_region: u32,
    last_counters: *const Counters,
    counters: Vec<(u32, &'static Counters)>,
    /// Hooks until the next stretch timed with the event clock while counting, the state of
    /// the generator that draws them, and the event clock at the current stretch's start when
    /// it is timed (0 otherwise).
    countdown: u32,
    draw: u32,
    timed_from: u64,
    /// The mark the previous counted hook read: a window opens only at a hook that reads a new
    /// one.
    last_mark: u64,
    /// A window is due: the next task begin, fork return or sleep opens one.
    window_due: bool,
    /// The region whose tasks' hooks may take [`Tracker::fast_hook`] ([`NO_REGION`]: none):
    /// `last_counters` are its counters, and no window would open early at its tasks.
    fast_region: u32,
}

/// What the event clock says of the stretch a counted hook ends and of the one it starts: the
/// clock when this hook read it (0 when not), the length of the stretch it ends when that was
/// timed, and whether the one it starts is.
#[derive(Clone, Copy, Default)]
struct Timing {
    now: u64,
    ended: Option<u64>,
    starts: bool,
}

thread_local! {
    /// This thread's tracker, made at its first hook. Not dropped with the thread (one per
    /// thread that ran a hook, like its counters), so that reaching it is one load: a
    /// thread-local with a destructor is checked for being alive at every access.
    static TRACKER: Cell<*mut Tracker> = const { Cell::new(std::ptr::null_mut()) };
}

/// A rayon-core hook on the calling thread: written as an event while the thread's detail
/// window is open, counted otherwise. False when nothing is recorded (recording is off, or
/// the thread is past its exit).
///
/// The counted fast path is inlined at each hook with its kind, so that each compiles to its
/// own path; the general one is shared ([`general_hook`]).
#[inline(always)]
pub(crate) fn hook(kind: EventKind, region: u32, aux: u16, flags: u8) -> bool {
    let mut tracker = TRACKER.with(Cell::get);
    if tracker.is_null() {
        tracker = new_tracker();
    }
    // SAFETY: the tracker is this thread's alone and no reference to it outlives a call; hooks
    // do not run inside one another.
    let t = unsafe { &mut *tracker };
    if t.fast_hook(kind, region, flags) {
        crate::hook_spin::spin_if_asked();
        return true;
    }
    general_hook(t, kind, region, aux, flags)
}

/// A hook that [`Tracker::fast_hook`] did not take: out of line, so that the fast path inlined
/// at each hook point keeps few registers and no stack frame of its own (inlined, the general
/// path made each hook point save five registers and reserve 88 bytes of stack first).
#[inline(never)]
fn general_hook(t: &mut Tracker, kind: EventKind, region: u32, aux: u16, flags: u8) -> bool {
    let recorded = t.on_hook(kind, region, aux, flags);
    if kind == EventKind::RegionBegin {
        t.take_pending_items(region);
    }
    crate::hook_spin::spin_if_asked();
    recorded
}

thread_local! {
    /// The items of an indexed iterator bridged on this thread outside every region, while
    /// its bridge runs: the region its first split opens (a pool entry) takes them.
    static PENDING_ITEMS: Cell<Option<u64>> = const { Cell::new(None) };
}

/// An indexed parallel iterator of `items` was bridged on this thread in `region` (0: none):
/// counted for the region as its own when bridged in its body or in the task that entered the
/// pool, as nested when bridged in a task below; kept for the region the bridge opens when
/// outside every region.
/// Returns whether they were kept ([`bridge_ended`] forgets them).
pub(crate) fn iterator_bridged(region: u32, items: u64) -> bool {
    if region == 0 {
        PENDING_ITEMS.with(|p| p.set(Some(items)));
        return true;
    }
    let mut tracker = TRACKER.with(Cell::get);
    if tracker.is_null() {
        tracker = new_tracker();
    }
    // SAFETY: as in `hook`.
    let t = unsafe { &mut *tracker };
    let own = t
        .frames
        .last()
        .is_some_and(|f| f.entry && f.region == region);
    let counters = t.counters(region);
    if own {
        counters.iterator_bridged(items);
    } else {
        counters.nested_iterator_bridged(items);
    }
    false
}

/// The bridge whose items were kept returned: a later region is not its.
pub(crate) fn bridge_ended() {
    PENDING_ITEMS.with(|p| p.set(None));
}

/// The stretches of user code and of local gaps that the calling thread timed in `region` so far
/// (for `hook_cost`, which measures what timing adds to a stretch).
pub(crate) fn timed_stretches(region: u32) -> [state_clock::TimedSample; 2] {
    let mut tracker = TRACKER.with(Cell::get);
    if tracker.is_null() {
        tracker = new_tracker();
    }
    // SAFETY: as in `hook`.
    let c = unsafe { &mut *tracker }.counters(region);
    [c.timed[UC].get(), c.timed[LOCAL].get()]
}

/// Forgets what the calling thread counted for `region` and its tracker, so that nothing of a
/// measurement is written: its next hook starts afresh, as a thread's first.
pub(crate) fn forget(region: u32) {
    let tid = crate::thread_context::current_tid();
    COUNTERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(c, _)| !(c.tid == tid && c.region == region));
    // The old tracker is leaked, as every thread's is.
    TRACKER.with(|t| t.set(std::ptr::null_mut()));
}

#[cold]
fn new_tracker() -> *mut Tracker {
    let tracker = Box::into_raw(Box::new(Tracker::new()));
    TRACKER.with(|t| t.set(tracker));
    tracker
}

impl Tracker {
    /// A region opened on this thread takes the items of the iterator whose bridge opened it.
    #[cold]
    fn take_pending_items(&mut self, region: u32) {
        if let Some(items) = PENDING_ITEMS.with(Cell::take) {
            self.counters(region).iterator_bridged(items);
        }
    }

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
            sleep_windows: 0,
            last_counted_region: NO_REGION,
            last_counters: std::ptr::null(),
            counters: Vec::new(),
            countdown: state_clock::TIMED_EVERY,
            draw: 0x9E37_79B9,
            timed_from: 0,
            last_mark: 0,
            window_due: false,
            fast_region: NO_REGION,
        }
    }

    /// The counted path of a task's begin or end or a fork's return where only counts change,
    /// taken by nearly every hook of a job-heavy run: no mark since the previous hook (a stretch
    /// that holds no mark is credited no time), no stretch being timed or starting, no search
    /// to close, the frames as a recursion leaves them. Does what [`Tracker::on_hook`] would,
    /// with none of its other cases; returns false, having changed nothing, where it must take
    /// the hook. (A search opens only through the general path, which then leaves the fast path
    /// unarmed until a gap's close has counted it.)
    #[inline(always)]
    fn fast_hook(&mut self, kind: EventKind, region: u32, flags: u8) -> bool {
        if region != self.fast_region
            || self.countdown <= 1
            || state_clock::now() != self.last_mark
            || !recorder::is_on()
        {
            return false;
        }
        // SAFETY: `fast_region` is set only with `last_counters` its counters (see
        // `arm_fast_path`; `counters_cold` unsets it).
        let c = unsafe { &*self.last_counters };
        match kind {
            EventKind::TaskBegin => {
                let origin = flags as usize & 3;
                if self.in_uc {
                    // User code ends: the stretch is the enclosing frame's, the task a bypass.
                    if self.frames.last().is_none_or(|top| top.region != region) {
                        return false;
                    }
                    c.user_code_stretches.add(1);
                    c.bypasses.add(1);
                } else if origin <= TaskOrigin::Local as usize {
                    c.local.count.add(1);
                } else {
                    c.steal.count.add(1);
                }
                self.frames.push(Frame {
                    region,
                    begin: self.since,
                    task: true,
                    entry: origin == TaskOrigin::Injected as usize,
                    nested: 0,
                    has_nested: false,
                    exact: false,
                    timed_begin: 0,
                });
                c.tasks[origin].add(1);
                self.in_uc = true;
            }
            EventKind::TaskEnd => {
                // The top task ends, of no time by the marks.
                let Some(&top) = self.frames.last().filter(|_| self.in_uc) else {
                    return false;
                };
                if !top.task
                    || top.region != region
                    || top.timed_begin != 0
                    || top.begin != self.since
                {
                    return false;
                }
                self.frames.pop();
                if let Some(outer) = self.frames.iter_mut().rev().find(|f| f.task) {
                    outer.has_nested = true;
                }
                c.user_code_stretches.add(1);
                c.task_ends.add(1);
                if !top.has_nested {
                    c.leaves.add(1);
                }
                self.last_region = region;
                self.in_uc = false;
            }
            EventKind::TaskResume => {
                if self.in_uc {
                    return false;
                }
                c.resume.count.add(1);
                self.in_uc = true;
            }
            _ => return false,
        }
        self.countdown -= 1;
        true
    }

    /// After a counted hook of `region`: its next hooks may take [`Tracker::fast_hook`] unless a
    /// stretch is being timed, a search is open (its gap's close counts it) or a task of the
    /// region would open a window early.
    #[inline(always)]
    fn arm_fast_path(&mut self, region: u32) {
        let early_at_its_tasks = region != self.paused_region && self.early_windows < EARLY_WINDOWS;
        if self.detail
            || !self.started
            || self.timed_from != 0
            || self.rounds != 0
            || self.sleeps != 0
            || self.window_due
            || early_at_its_tasks
        {
            self.fast_region = NO_REGION;
        } else {
            self.counters(region);
            self.fast_region = region;
        }
    }

    #[inline(always)]
    fn on_hook(&mut self, kind: EventKind, region: u32, aux: u16, flags: u8) -> bool {
        // Region begins and ends bound the regions' runs: always written.
        let always = matches!(kind, EventKind::RegionBegin | EventKind::RegionEnd);
        if self.detail {
            let Some(ts) = recorder::stamp(kind, region, aux, flags) else {
                return false;
            };
            self.apply(ts, kind, region, flags, false, Timing::default());
            self.window_events += 1;
            if self.window_events >= EVENTS_PER_WINDOW.load(Ordering::Relaxed)
                || !recorder::ring_has_room()
            {
                self.pause(ts);
            }
            return true;
        }
        if !recorder::is_on() {
            return false;
        }
        // Counted by the marks' clock: the event clock is read only for the timed stretches.
        let mark = state_clock::now();
        let fresh_mark = mark != self.last_mark;
        self.last_mark = mark;
        let ts = mark.max(self.since);
        // A window is due from the first mark read past the window length (most hooks read no
        // new mark and look no further) until a hook that can open it.
        self.window_due |= fresh_mark
            && ts.wrapping_sub(self.window_start) >= WINDOW_TICKS.load(Ordering::Relaxed);
        if always {
            recorder::stamp(kind, region, aux, flags);
        }
        let idling = kind == EventKind::SleepBegin
            || (kind == EventKind::SearchRound && self.rounds == IDLE_ROUNDS);
        if idling {
            // The counts of the calls this thread did not record are written once it idles:
            // it may write nothing more before the program ends.
            recorder::flush_unrecorded(clock::now());
        }
        let resumes_here = matches!(
            kind,
            EventKind::TaskBegin | EventKind::TaskResume | EventKind::SleepBegin
        );
        if resumes_here {
            let on_time = self.window_due;
            let early = kind == EventKind::TaskBegin
                && region != self.paused_region
                && self.early_windows < EARLY_WINDOWS;
            // The counts stop at the last mark and the events start now: the time between is
            // held by neither. On time, a window waits for the first hook after a mark that can
            // open it, where that is a stretch or two at most. A task of another region (its probe calls would go
            // under the wrong one) and a thread going to sleep (its sleep may outlast the last
            // snapshot, where no count would hold it) open a short window at once, a few per
            // window length, and leave that time out.
            let to_sleep = kind == EventKind::SleepBegin && self.sleep_windows < EARLY_WINDOWS;
            if (on_time || early || to_sleep) && recorder::ring_has_room() {
                return self.resume(ts, kind, region, aux, flags, !on_time);
            }
        }
        let timing = self.timing();
        self.apply(ts, kind, region, flags, true, timing);
        self.arm_fast_path(region);
        true
    }

    /// Counts down to the next timed stretch and reads the event clock where a timed stretch
    /// ends or starts.
    #[inline(always)]
    fn timing(&mut self) -> Timing {
        let from = std::mem::take(&mut self.timed_from);
        self.countdown -= 1;
        let starts = self.countdown == 0;
        if from == 0 && !starts {
            return Timing::default();
        }
        let now = clock::now();
        if starts {
            self.countdown = state_clock::next_countdown(&mut self.draw);
            self.timed_from = now;
        }
        Timing {
            now,
            ended: (from != 0).then(|| state_clock::timed_length(from, now, self.in_uc)),
            starts,
        }
    }

    /// Stops writing detail after the event stamped `ts`.
    #[cold]
    fn pause(&mut self, ts: u64) {
        self.detail = false;
        self.timed_from = 0;
        if state_clock::use_marks() {
            // The writer keeps its slower pace until it wakes.
            recorder::wake_writer();
        }
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
    /// here, up to the mark `counted_until`), or at a sleep (the search so far is counted here,
    /// the analysis sees the rest of the gap, the idle part): the frames open now are written,
    /// then the event itself. An `early` window, opened to place the task in its region, is
    /// short and leaves the window length's start where it was.
    #[cold]
    fn resume(
        &mut self,
        counted_until: u64,
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
        self.close(counted_until, close, counted_region, true, None);
        self.timed_from = 0;
        let ts = clock::now();
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
        self.fast_region = NO_REGION;
        let written = 1 + (self.frames.len() - skipped) as u32;
        if early {
            if into_sleep {
                self.sleep_windows += 1;
            } else {
                self.early_windows += 1;
            }
            let limit = EVENTS_PER_WINDOW.load(Ordering::Relaxed);
            self.window_events = limit.saturating_sub(EARLY_WINDOW_EVENTS).max(written);
        } else {
            self.early_windows = 0;
            self.sleep_windows = 0;
            self.window_due = false;
            self.window_start = ts;
            self.window_events = written;
        }
        self.resumed_at = ts;
        let stamped = recorder::stamp(kind, region, aux, flags).unwrap_or(ts);
        if into_sleep {
            self.on_search(kind, stamped);
        } else {
            self.open(stamped, close, region, false, Timing::default());
        }
        true
    }

    /// Ends the current stretch and starts what follows the event; counted when `count`.
    #[inline(always)]
    fn apply(
        &mut self,
        ts: u64,
        kind: EventKind,
        region: u32,
        flags: u8,
        count: bool,
        timing: Timing,
    ) {
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
            self.close(ts, close, region, count, timing.ended);
        }
        self.open(ts, close, region, count, timing);
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
        if self.last_counted_region == region {
            // SAFETY: set with the region, from a `&'static Counters`.
            unsafe { &*self.last_counters }
        } else {
            self.counters_cold(region)
        }
    }

    #[cold]
    fn counters_cold(&mut self, region: u32) -> &'static Counters {
        self.fast_region = NO_REGION;
        let counters = match self.counters.iter().find(|(r, _)| *r == region) {
            Some(&(_, c)) => c,
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
                self.counters.push((region, c));
                c
            }
        };
        self.last_counted_region = region;
        self.last_counters = counters;
        counters
    }

    /// Ends the current stretch at `ts`, as the analysis does; counts it when `count`, with its
    /// length by the event clock when it was `timed`.
    #[inline(always)]
    fn close(&mut self, ts: u64, how: Close, region: u32, count: bool, timed: Option<u64>) {
        let since = std::mem::replace(&mut self.since, ts);
        if self.in_uc {
            // No search in user code (see `on_search`): nothing to reset.
            if count {
                self.close_user_code(ts.saturating_sub(since), how, region, timed);
            }
            return;
        }
        let (rounds, sleeps, idle_from) = (self.rounds, self.sleeps, self.idle_from.take());
        self.rounds = 0;
        self.sleeps = 0;
        if !count {
            return;
        }
        let len = ts.saturating_sub(since);
        let c = self.counters(region);
        match how {
            Close::Begin(TaskOrigin::Local | TaskOrigin::Inline) => {
                c.local.add(len);
                if let Some(t) = timed {
                    c.timed[LOCAL].add(t);
                    c.local_gap_lengths[duration_bucket(t)].add(1);
                }
            }
            Close::Begin(TaskOrigin::Stolen | TaskOrigin::Injected) => {
                c.steal.add(len);
                if let Some(t) = timed {
                    c.timed[STEAL].add(t);
                }
            }
            Close::Resume => {
                c.resume.add(len);
                if let Some(t) = timed {
                    c.timed[RESUME].add(t);
                    c.resume_timed[64 - t.leading_zeros() as usize].add(t);
                }
            }
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
        if rounds > 0 {
            c.rounds.add(u64::from(rounds));
        }
    }

    /// Counts a stretch of user code of `len` ticks by the marks (`timed` when the event clock
    /// timed it) ended by an event of `how` in `region`.
    #[inline(always)]
    fn close_user_code(&mut self, len: u64, how: Close, region: u32, timed: Option<u64>) {
        if let Some(top) = self.frames.last().map(|f| f.region) {
            let c = self.counters(top);
            c.user_code_stretches.add(1);
            // Most stretches hold no mark: nothing to add.
            if len > 0 {
                c.user_code.add(len);
            }
            if let Some(t) = timed {
                c.timed[UC].add(t);
            }
        }
        if let Close::Begin(_) = how {
            self.counters(region).bypasses.add(1);
        }
    }

    /// Starts what follows an event at `ts`: a task, a region body, user code or a gap.
    #[inline(always)]
    fn open(&mut self, ts: u64, how: Close, region: u32, count: bool, timing: Timing) {
        match how {
            Close::Begin(origin) => {
                self.frames.push(Frame {
                    region,
                    begin: ts,
                    task: true,
                    entry: origin == TaskOrigin::Injected,
                    nested: 0,
                    has_nested: false,
                    exact: !count,
                    timed_begin: if timing.starts { timing.now } else { 0 },
                });
                if count {
                    let c = self.counters(region);
                    c.tasks[origin as usize].add(1);
                }
                self.in_uc = true;
            }
            Close::TaskEnd => {
                if let Some(at) = self.frame_at(true, region) {
                    self.task_ended(at, ts, count, timing);
                }
                self.in_uc = false;
            }
            Close::Resume => self.in_uc = true,
            Close::RegionBegin => {
                self.frames.push(Frame {
                    region,
                    begin: ts,
                    task: false,
                    entry: true,
                    nested: 0,
                    has_nested: false,
                    exact: !count,
                    timed_begin: 0,
                });
                self.in_uc = true;
            }
            Close::RegionEnd => {
                if let Some(at) = self.frame_at(false, region) {
                    self.remove_frame(at);
                }
                // Back in the enclosing task or region's code, or in code not seen.
                self.in_uc = !self.frames.is_empty();
            }
        }
    }

    /// A task ends at `ts`: its time goes to the task it is nested in, and the task to the
    /// counts unless the analysis times it (begun in the current window). Its own time is
    /// exact when its begin and end were both written as events, timed when the stretch from
    /// its begin was, and by the marks' clock otherwise: that one stands as the longest task
    /// only when long (a short stretch's marks say nothing of its length).
    #[inline(always)]
    fn task_ended(&mut self, at: usize, ts: u64, count: bool, timing: Timing) {
        let frame = self.frames[at];
        self.remove_frame(at);
        self.last_region = frame.region;
        let took = ts.saturating_sub(frame.begin);
        if let Some(outer) = self.frames.iter_mut().rev().find(|f| f.task) {
            outer.nested += took;
            outer.has_nested = true;
        }
        let seen_whole = !count && frame.begin >= self.resumed_at;
        if seen_whole {
            return;
        }
        let c = self.counters(frame.region);
        let leaf = !frame.has_nested;
        if count {
            c.task_ends.add(1);
        }
        let own = took.saturating_sub(frame.nested);
        if !count && frame.exact {
            // Begun in an earlier window and ended in this one: both ends are events.
            c.task_ended(leaf, own, OwnTime::Exact, ts, took);
        } else if leaf && frame.timed_begin != 0 && timing.now != 0 {
            let own = state_clock::timed_length(frame.timed_begin, timing.now, true);
            c.task_ended(leaf, own, OwnTime::Timed, timing.now, own);
        } else if state_clock::is_long(own) {
            let end = if count { clock::now() } else { ts };
            c.task_ended(leaf, own, OwnTime::ByMarks, end, took);
        } else if leaf {
            c.leaves.add(1);
        }
    }

    /// Where the innermost open frame of the given kind is (normally the top one). An index,
    /// not the frame: a frame returned by value went through memory at every task's end.
    #[inline(always)]
    fn frame_at(&self, task: bool, region: u32) -> Option<usize> {
        match self.frames.last() {
            Some(top) if top.task == task && top.region == region => Some(self.frames.len() - 1),
            _ => self.frame_below(task, region),
        }
    }

    /// [`Tracker::frame_at`] of a frame below the top one (an unwinding task, a region left
    /// out of order).
    #[cold]
    fn frame_below(&self, task: bool, region: u32) -> Option<usize> {
        (self
            .frames
            .iter()
            .rposition(|f| f.task == task && f.region == region))
        .or_else(|| self.frames.iter().rposition(|f| f.task == task))
    }

    #[inline(always)]
    fn remove_frame(&mut self, at: usize) {
        if at + 1 == self.frames.len() {
            self.frames.truncate(at);
        } else {
            self.frames.remove(at);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_scales_to_the_total_exactly() {
        // 3 of 10 timed values in bucket 0, 7 in bucket 5, standing for 1000.
        let mut buckets = vec![0; 8];
        buckets[0] = 3;
        buckets[5] = 7;
        let out = scaled(&buckets, 10, 1000);
        assert_eq!(out[0], 300);
        assert_eq!(out[5], 700);
        // Rounding keeps the total: 1, 1, 1 of 3 standing for 100 → 34, 33, 33.
        let out = scaled(&[1, 1, 1], 3, 100);
        assert_eq!(out.iter().sum::<u64>(), 100);
        assert!(out.iter().all(|&n| n == 33 || n == 34), "{out:?}");
        // Nothing timed, or everything: as it is.
        assert_eq!(scaled(&[0, 0], 0, 50), vec![0, 0]);
        assert_eq!(scaled(&[2, 3], 5, 5), vec![2, 3]);
    }

    #[test]
    fn fork_returns_are_split_as_the_timed_ones() {
        let gaps = |count, ticks| GapSum { count, ticks };
        let mut timed = vec![GapSum::default(); 65];
        // 3 short timed returns (bit length 4) of 10 ticks in all, 1 long (bit length 12) of
        // 3000: the marks' total time splits 10 : 3000, the count 3 : 1.
        timed[4] = gaps(3, 10);
        timed[12] = gaps(1, 3000);
        let split = resume_gaps(gaps(400, 60_200), &timed);
        assert_eq!(split, vec![(4, gaps(300, 200)), (12, gaps(100, 60_000))]);
        // None timed: all of them by their mean length (150 ticks: bit length 8).
        let none = vec![GapSum::default(); 65];
        assert_eq!(
            resume_gaps(gaps(400, 60_000), &none),
            vec![(8, gaps(400, 60_000))]
        );
        assert!(resume_gaps(gaps(0, 0), &timed).is_empty());
    }
}
