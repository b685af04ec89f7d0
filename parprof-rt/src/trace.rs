//! The parprof trace format: defined once here, written by the runtime, read by `cargo parprof`.
//!
//! ```text
//! file    := MAGIC (8 bytes) version (u32) chunk*
//! chunk   := kind (u32) length (u32) payload (length bytes) crc32(kind, length, payload) (u32)
//! ```
//! All integers are little-endian. Every chunk is self-delimiting and checksummed, so a reader
//! can stop at the last complete chunk of a file whose writer was killed, and tell a cut file
//! (truncated tail) from a corrupt one (bad checksum or invalid payload).
//!
//! A complete trace holds, in this order of first appearance: one [`Header`], then any mix of
//! [`SiteRecord`], [`ThreadRecord`], event and lost-count chunks, then one [`End`]. A thread
//! record may be repeated for the same tid when more is learnt (e.g. its rayon index); the
//! last one wins. Events of one thread appear in time order across its chunks.
//!
//! Events are packed (version 2): in memory an [`Event`] is 16 bytes, in the file it is a
//! header byte, the time since the previous event of the chunk, and only the fields that are
//! not implied, so a probe's entry or exit takes 2–4 bytes:
//!
//! ```text
//! events  := tid (u32) count (u32) event*
//! event   := head (u8) ts_delta (varint) [id (varint)] [aux (varint)] [flags (u8)]
//! head    := kind (bits 0–3) | id differs from the previous event's (bit 4, first: from 0)
//!            | aux ≠ 0 (bit 5) | flags ≠ 0 (bit 6); bit 7 is 0
//! varint  := LEB128, unsigned, at most 10 bytes
//! ```
//!
//! Written with [`ChunkEncoder`], read with [`TraceReader`]:
//!
//! ```
//! use parprof_rt::trace::{
//!     Chunk, ChunkEncoder, Completeness, End, Event, EventKind, Header, TraceReader,
//! };
//!
//! let mut encoder = ChunkEncoder::new();
//! encoder.preamble();
//! encoder.chunk(&Chunk::Header(Header::monotonic_without_calibration()));
//! let events = [Event::new(100, EventKind::Enter, 1), Event::new(250, EventKind::Exit, 1)];
//! encoder.events(7, &events, &[]);
//! encoder.chunk(&Chunk::End(End::default()));
//!
//! let bytes = encoder.into_bytes();
//! let mut reader = TraceReader::new(bytes.as_slice())?;
//! let mut read = Vec::new();
//! while let Some(chunk) = reader.next_chunk()? {
//!     if let Chunk::Events { tid: 7, events } = chunk {
//!         read.extend(events);
//!     }
//! }
//! assert_eq!(read, events);
//! assert_eq!(reader.completeness(), Some(&Completeness::Complete));
//! # Ok::<(), parprof_rt::trace::TraceError>(())
//! ```

use crate::codec::{put_varint, read_full, read_varint};
use std::io::{self, Read, Write};

/// First eight bytes of every trace file.
pub const MAGIC: [u8; 8] = *b"PPTRACE\0";
/// Version of the format written by this crate.
pub const VERSION: u32 = 12;
/// The oldest version readers accept: versions 7 to 11 differ only by fields at the end of
/// [`LifecycleTotals`] (two, one, and the iterators' items since version 11) and of
/// [`SiteRecord`] (the caller and the entry kind, since version 10), read as absent, and by
/// the writer's wakes ([`BUFFER_WRITER_WOKEN`], since version 12), which they do not have.
pub const OLDEST_READABLE: u32 = 7;
/// Upper bound on a chunk payload; a larger length is corruption, not a reason to allocate.
pub const MAX_CHUNK_LEN: u32 = 64 << 20;
/// Size of one [`Event`] in memory (the runtime's rings).
pub const EVENT_SIZE: usize = 16;
/// The name of the runtime's trace-writer thread, so that the analysis can tell the
/// profiler's own CPU use from the program's.
pub const WRITER_THREAD_NAME: &str = "parprof-writer";

/// `Event::flags` of an [`EventKind::Enter`] recorded while its site was not sampled on the
/// thread: the call stands for itself only, and unrecorded calls are not estimated from it
/// (a site is sampled while its calls are close together, so the calls recorded while it is
/// not are the long ones, such as the first activations of a recursion).
pub const ENTER_NOT_SAMPLED: u8 = 1;

/// `Event::flags` of an [`EventKind::Unrecorded`] event whose calls were nested in an
/// unrecorded activation of the same site. Traces written before this flag have none.
pub const UNRECORDED_NESTED: u8 = 1;

/// `Event::flags` of an [`EventKind::BufferStall`] that is no wait: the thread woke the writer
/// (its ring filled another quarter), a system call when the writer sleeps, once per 32 Ki
/// events. Removed like a wait, for its measured duration; not counted as a stall. Stamped when
/// the wake began and stored before the thread's next event stamped after that, in time order.
pub const BUFFER_WRITER_WOKEN: u8 = 1;

/// `Event::flags` of an [`EventKind::SpeedReference`] whose probed calls were timed pairs,
/// recorded into the ring (every call recorded): its readings follow what the ring's writes cost
/// in place, including while the writer drains on another CPU. Without it (untimed calls, and
/// traces written before the flag) the calls wrote nothing.
pub const REFERENCE_TIMED_PAIRS: u8 = 1;
/// `Event::flags` of an [`EventKind::SpeedReference`] during which the round's own events woke
/// the writer: its reading holds the wake, which the program's events measure apart
/// ([`BUFFER_WRITER_WOKEN`]).
pub const REFERENCE_WOKE_WRITER: u8 = 2;

/// `Event::flags` of an [`EventKind::Detail`]: per-job events stop here.
pub const DETAIL_PAUSE: u8 = 0;
/// `Event::flags` of an [`EventKind::Detail`]: per-job events start again; frame events follow.
pub const DETAIL_RESUME: u8 = 1;
/// `Event::flags` of an [`EventKind::Detail`]: a task or region open on the thread at a resume.
pub const DETAIL_FRAME: u8 = 2;

/// `ThreadRecord::rayon_index` and `Event::aux` value meaning "no rayon worker".
pub const NO_WORKER: u16 = u16::MAX;

/// Kinds of chunks. The numeric values are part of the format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ChunkKind {
    /// [`Chunk::Header`].
    Header = 1,
    /// [`Chunk::Site`].
    Site = 2,
    /// [`Chunk::Thread`].
    Thread = 3,
    /// [`Chunk::Events`].
    Events = 4,
    /// [`Chunk::Lost`].
    Lost = 5,
    /// [`Chunk::End`].
    End = 6,
    /// [`Chunk::LifecycleTotals`].
    LifecycleTotals = 7,
    /// [`Chunk::BenchPhase`].
    BenchPhase = 8,
    /// [`Chunk::HookCosts`].
    HookCosts = 9,
}

impl ChunkKind {
    fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::Header,
            2 => Self::Site,
            3 => Self::Thread,
            4 => Self::Events,
            5 => Self::Lost,
            6 => Self::End,
            7 => Self::LifecycleTotals,
            8 => Self::BenchPhase,
            9 => Self::HookCosts,
            _ => return None,
        })
    }
}

/// What an event records. The numeric values are part of the format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum EventKind {
    /// A probed section was entered; `id` is its site. `flags` is [`ENTER_NOT_SAMPLED`] when
    /// the site was not sampled on the thread then (every call recorded), 0 when it was,
    /// when sampling is off for the run, and in traces written before the flag.
    Enter = 1,
    /// A probed section was left (on any path, unwinding included); `id` is its site.
    Exit = 2,
    /// A parallel region began on this thread; `id` is the region's site.
    RegionBegin = 3,
    /// A parallel region ended on this thread; `id` is the region's site.
    RegionEnd = 4,
    /// A task of a region started on this thread; `id` is the region's site, `aux` the rayon
    /// index of the worker that created the task ([`NO_WORKER`] from outside the pool), and
    /// `flags` a [`TaskOrigin`].
    TaskBegin = 5,
    /// The task that began last on this thread ended; `id` is the region's site.
    TaskEnd = 6,
    /// A task or region body that waited in a fork (`join`, `scope`, a parallel iterator,
    /// `install`) continues on this thread: the fork returned. Between the last task end and
    /// this event the thread was in the scheduler (running, searching or waiting for the
    /// fork's other tasks), not in user code. `id` is the region's site.
    TaskResume = 7,
    /// The thread waited for room in its buffer because the writer fell behind: the wait
    /// began at `ts` and lasted `id` ticks. Like probe overhead, it is removed from every
    /// enclosing probed interval. Recording is lossless at this price. With `flags`
    /// [`BUFFER_WRITER_WOKEN`] (since version 12) the thread did not wait but woke the writer,
    /// for `id` ticks, removed likewise.
    BufferStall = 8,
    /// A searching rayon worker's round over the deques and the injector found nothing
    /// (rayon-core hooks); `aux` counts the failed rounds of this search so far (rayon sleeps
    /// after 32 of them, yielding the CPU after each), `id` the region current on the worker.
    SearchRound = 9,
    /// A rayon worker blocked until work arrives (rayon-core hooks); `id` as for `SearchRound`.
    SleepBegin = 10,
    /// The sleeping worker woke up; `id` as for `SearchRound`.
    SleepEnd = 11,
    /// `aux` calls of the probe site `id` ran without being recorded (the site is hot on this
    /// thread and sampled, see the runtime's `sampling` module). They ran after the thread's
    /// previous event, inside the call that was innermost then, and cost `aux` × this kind's
    /// calibrated cost; writing the event took the time up to the thread's next event.
    /// `flags` is [`UNRECORDED_NESTED`] for calls nested in an unrecorded activation of the
    /// same site (their time is in that activation's estimate), 0 otherwise.
    Unrecorded = 12,
    /// The thread ran a slice checkpoint (method 5: scanning the program's threads, forking a
    /// slice, reaping finished ones) from `ts` for `id` ticks. Removed like probe overhead.
    SliceCheckpoint = 13,
    /// The thread measured what a probe costs in place, as calibration did at start-up, so that
    /// the correction follows the machine's speed during the run (see the runtime's
    /// `speed_reference` module): from `ts` for `id` ticks, removed like probe overhead; `aux`
    /// is the measured cost of one untimed call (a timed pair when every call is recorded) in
    /// 1/16 ticks, `flags` [`REFERENCE_TIMED_PAIRS`] and [`REFERENCE_WOKE_WRITER`]. The
    /// calibration row of this kind holds the same figure measured at start-up, in ticks.
    SpeedReference = 14,
    /// The rayon-core hooks' per-job events stop or start again on this thread (see the
    /// runtime's `lifecycle_totals` module): `flags` is [`DETAIL_PAUSE`], [`DETAIL_RESUME`] or
    /// [`DETAIL_FRAME`]. From a pause to the next resume the thread's lifecycle is counted in
    /// the program and written as [`LifecycleTotals`] chunks. A resume's `aux` is 0 when the
    /// stretch that the next event ends was counted in the program up to the resume, 1 when a
    /// gap starts at the resume (the thread is going to sleep: the search before it was
    /// counted). A resume is followed by one frame event per task or region open on the
    /// thread then, outermost first (`id` its region, `aux` 1 for a task, 0 for a region
    /// body), stamped at the resume.
    Detail = 15,
}

impl EventKind {
    /// Every event kind, for calibration tables and exhaustive checks.
    pub const ALL: [EventKind; 15] = [
        Self::Enter,
        Self::Exit,
        Self::RegionBegin,
        Self::RegionEnd,
        Self::TaskBegin,
        Self::TaskEnd,
        Self::TaskResume,
        Self::BufferStall,
        Self::SearchRound,
        Self::SleepBegin,
        Self::SleepEnd,
        Self::Unrecorded,
        Self::SliceCheckpoint,
        Self::SpeedReference,
        Self::Detail,
    ];

    /// Called for every event decoded: an index, not a search of [`EventKind::ALL`].
    #[inline]
    pub fn from_u8(v: u8) -> Option<Self> {
        // The kinds are numbered from 1 without gaps, in the order of `ALL`.
        Self::ALL.get(usize::from(v).wrapping_sub(1)).copied()
    }
}

/// How a worker obtained the task it runs (`flags` of a [`EventKind::TaskBegin`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum TaskOrigin {
    /// Run directly by the thread that created it (scheduler bypass, e.g. the first half of a join).
    Inline = 0,
    /// Popped from the worker's own deque.
    Local = 1,
    /// Stolen from another worker's deque.
    Stolen = 2,
    /// Injected into the pool from a thread outside it.
    Injected = 3,
}

impl TaskOrigin {
    /// The origin of a `flags` value, `None` for a value no origin has.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Inline,
            1 => Self::Local,
            2 => Self::Stolen,
            3 => Self::Injected,
            _ => return None,
        })
    }
}

/// One timestamped event, 16 bytes in memory, packed in the file (see the module's format).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Event {
    /// Clock ticks (see [`ClockKind`]).
    pub ts: u64,
    /// Site id of the probe or region.
    pub id: u32,
    /// Kind-specific (the creating worker of a task).
    pub aux: u16,
    /// An [`EventKind`] value.
    pub kind: u8,
    /// Kind-specific (the [`TaskOrigin`] of a task).
    pub flags: u8,
}

const _: () = assert!(std::mem::size_of::<Event>() == EVENT_SIZE);

impl Event {
    /// An event with no kind-specific fields (`aux` and `flags` 0): a probe's entry or exit,
    /// a region's begin or end.
    pub const fn new(ts: u64, kind: EventKind, id: u32) -> Event {
        Event {
            ts,
            id,
            aux: 0,
            kind: kind as u8,
            flags: 0,
        }
    }

    /// The thread woke the writer at `ts`, for `took` ticks (see [`BUFFER_WRITER_WOKEN`]).
    pub const fn writer_woken(ts: u64, took: u32) -> Event {
        Event {
            ts,
            id: took,
            aux: 0,
            kind: EventKind::BufferStall as u8,
            flags: BUFFER_WRITER_WOKEN,
        }
    }

    /// `count` unrecorded calls of `site`, `nested` in an unrecorded activation of it or not
    /// (see [`EventKind::Unrecorded`]).
    pub const fn unrecorded(ts: u64, site: u32, count: u16, nested: bool) -> Event {
        Event {
            ts,
            id: site,
            aux: count,
            kind: EventKind::Unrecorded as u8,
            flags: if nested { UNRECORDED_NESTED } else { 0 },
        }
    }

    /// Whether an [`EventKind::Enter`] was recorded while its site was not sampled.
    pub const fn entered_unsampled(&self) -> bool {
        self.flags & ENTER_NOT_SAMPLED != 0
    }

    /// Whether an [`EventKind::Unrecorded`] event counts calls nested in an unrecorded
    /// activation of its site.
    pub const fn unrecorded_nested(&self) -> bool {
        self.flags & UNRECORDED_NESTED != 0
    }

    /// A reference of the probes' in-place cost (see [`EventKind::SpeedReference`]).
    pub const fn speed_reference(
        ts: u64,
        took_ticks: u32,
        sixteenths_per_call: u16,
        flags: u8,
    ) -> Event {
        Event {
            ts,
            id: took_ticks,
            aux: sixteenths_per_call,
            kind: EventKind::SpeedReference as u8,
            flags,
        }
    }

    /// The event's kind ([`EventKind::Enter`] for a kind byte that names none, which the
    /// reader never hands out).
    #[inline]
    pub fn kind(&self) -> EventKind {
        // Events handed out by the reader are validated, so this cannot fail for them.
        EventKind::from_u8(self.kind).unwrap_or(EventKind::Enter)
    }
}

/// The clock of event timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ClockKind {
    /// The x86 time-stamp counter, used only where it is invariant (constant and nonstop).
    Tsc = 1,
    /// `CLOCK_MONOTONIC` in nanoseconds (one tick = one ns).
    Monotonic = 2,
}

/// A simultaneous reading of the event clock and of `CLOCK_MONOTONIC`.
///
/// The kernel stamps perf records with `CLOCK_MONOTONIC` when `cargo parprof` asks it to
/// (`use_clockid`), so two sync points map ticks onto the kernel's time line. The
/// monotonic reading lies between `ticks` and `ticks + uncertainty_ticks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ClockSync {
    /// The event clock before the monotonic reading.
    pub ticks: u64,
    /// `CLOCK_MONOTONIC`, in nanoseconds.
    pub monotonic_ns: u64,
    /// Event-clock ticks between the reading before and the one after the monotonic reading.
    pub uncertainty_ticks: u32,
}

/// The standard error of a median over `rounds` readings whose interquartile range over the
/// median is `spread`, as a share of the median: 1.25 σ / √n, with σ ≈ interquartile range ÷
/// 1.35 for a normal spread. How well calibration knew a figure (see [`Calibration`]).
pub fn median_standard_error(spread: f64, rounds: usize) -> f64 {
    1.25 / 1.35 * spread / (rounds.max(1) as f64).sqrt()
}

/// One row of the overhead calibration table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// The event kind whose cost this row gives.
    pub kind: EventKind,
    /// Median cost of one event, in ticks, that falls inside an enclosing probed interval.
    /// Fractional: an untimed call costs a dozen ticks, and rounding it would bias every one
    /// of millions of calls the same way.
    pub cost_ticks: f64,
    /// How much the in-place measurement behind `cost_ticks` varied over its rounds: the
    /// interquartile range over the median (0.02 on a steady machine; tens of percent where a
    /// VM's host takes the CPU away at times). The overhead removed is uncertain by as much.
    /// For [`EventKind::SpeedReference`]: how much the ratio of the untimed call's cost to the
    /// reference varied over the rounds.
    pub spread: f64,
    /// Rounds of that measurement (since version 6): calibration measures until each median
    /// is known well enough, fewer rounds on a steady machine than on an unsteady one.
    pub rounds: u16,
}

/// The first chunk of every trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// The recording process.
    pub pid: u32,
    /// The clock of every timestamp in the trace.
    pub clock: ClockKind,
    /// Ticks per nanosecond measured at start-up (against `CLOCK_MONOTONIC`).
    pub ticks_per_ns: f64,
    /// Both clocks read together at start-up.
    pub start: ClockSync,
    /// Cost of two back-to-back bare clock reads, in ticks (for context in reports).
    pub bare_read_ticks: u32,
    /// The cost of each event kind, measured at start-up (method 1 removes it).
    pub calibration: Vec<Calibration>,
    /// The program's executable, as the process sees it.
    pub program: String,
}

impl Header {
    /// A header for kernel time alone: `CLOCK_MONOTONIC`, one tick per ns, nothing calibrated
    /// (for runs without a trace, and as the reader's value before the real header is read).
    pub fn monotonic_without_calibration() -> Self {
        Header {
            pid: 0,
            clock: ClockKind::Monotonic,
            ticks_per_ns: 1.0,
            start: ClockSync::default(),
            bare_read_ticks: 0,
            calibration: Vec::new(),
            program: String::new(),
        }
    }
}

/// What a site id stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SiteKind {
    /// A function annotated with `#[probe]`.
    Probe = 1,
    /// A region named by `parallel_region!`.
    Region = 2,
    /// A call site that entered a rayon pool from outside with no region current (rayon-core
    /// hooks): its name is the function that made the call, with the file and line of the
    /// call, the calling function and the kind of entry in the record.
    ImplicitRegion = 3,
}

/// How a call site entered a rayon pool from outside it (an implicit region's kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum EntryKind {
    /// `join` / `join_context` (and `ThreadPool::join`).
    Join = 1,
    /// rayon's parallel iterators and slice operations (`par_iter`, `par_sort`, …): rayon
    /// itself enters the pool.
    Iterator = 2,
    /// `scope`, `scope_fifo`, `in_place_scope`, `in_place_scope_fifo`.
    Scope = 3,
    /// `spawn` / `spawn_fifo`: each spawned job is a run of the region.
    Spawn = 4,
    /// `ThreadPool::install`.
    Install = 5,
    /// `broadcast` / `spawn_broadcast`.
    Broadcast = 6,
}

impl EntryKind {
    /// The kind of a value, `None` for a value no kind has.
    pub fn from_u8(v: u8) -> Option<EntryKind> {
        Some(match v {
            1 => EntryKind::Join,
            2 => EntryKind::Iterator,
            3 => EntryKind::Scope,
            4 => EntryKind::Spawn,
            5 => EntryKind::Install,
            6 => EntryKind::Broadcast,
            _ => return None,
        })
    }
}

impl SiteKind {
    /// Named and implicit regions.
    pub fn is_region(self) -> bool {
        self != SiteKind::Probe
    }
}

/// A site: what an event's `id` stands for. Written once per site, before its first event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteRecord {
    /// The id events carry.
    pub id: u32,
    /// A probe or a region.
    pub kind: SiteKind,
    /// A probe's or named region's name; an implicit region's function.
    pub name: String,
    /// The source file (of an implicit region: of the call, empty when not known).
    pub file: String,
    /// The line in `file` (0 when not known).
    pub line: u32,
    /// An implicit region's calling function, the nearest one of the program's (empty: none).
    pub caller: String,
    /// An implicit region's kind of entry (`None` for probes and named regions).
    pub entry: Option<EntryKind>,
}

/// A thread that recorded events, or a rayon worker that may: its identity for the analysis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadRecord {
    /// OS thread id (as the kernel's records name it).
    pub tid: u32,
    /// Rayon worker index, or [`NO_WORKER`].
    pub rayon_index: u16,
    /// Rayon pool identity (0 for the global pool or none), to tell pools apart.
    pub pool: u32,
    /// The thread's name (empty for an unnamed thread).
    pub name: String,
}

/// The last chunk of a complete trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct End {
    /// Both clocks read together at the end: with the header's, the rate over the whole run.
    pub end: ClockSync,
    /// Events in the trace.
    pub events_written: u64,
    /// Events that could not be stored (the sum of the [`Chunk::Lost`] counts).
    pub events_lost: u64,
}

/// Durations are counted in log-linear buckets: values below 8 ticks have a bucket each,
/// larger ones share one with the values of the same leading 4 bits, so a bucket's midpoint is
/// within 1/16 (6 %) of every value in it, whatever the clock.
pub const DURATION_BUCKETS: usize = 496;
const BUCKET_SUB_BITS: u32 = 3;

/// The bucket of a duration in ticks, below [`DURATION_BUCKETS`].
#[inline]
pub fn duration_bucket(ticks: u64) -> usize {
    let sub = 1u64 << BUCKET_SUB_BITS;
    if ticks < sub {
        return ticks as usize;
    }
    let shift = 63 - ticks.leading_zeros() - BUCKET_SUB_BITS;
    (((shift + 1) << BUCKET_SUB_BITS) as usize) + ((ticks >> shift) - sub) as usize
}

/// The midpoint of a bucket: the duration that stands for its values.
pub fn duration_bucket_midpoint(bucket: usize) -> u64 {
    let sub = 1u64 << BUCKET_SUB_BITS;
    if (bucket as u64) < sub {
        return bucket as u64;
    }
    let shift = (bucket as u32 >> BUCKET_SUB_BITS) - 1;
    let leading = (bucket as u64 & (sub - 1)) + sub;
    (leading << shift) + ((1u64 << shift) >> 1)
}

/// How many gaps, and their total length in ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GapSum {
    /// Gaps counted.
    pub count: u64,
    /// Their total length, in ticks.
    pub ticks: u64,
}

/// The lifecycle of one thread in one region while its per-job events were paused (see
/// [`EventKind::Detail`]), counted in the program: cumulative since the thread started, so the
/// last chunk of a (thread, region) holds it all. The fields are what the analysis would have
/// summed from the events (user code, gaps by how they ended, the hooks' searches), so that
/// both add up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LifecycleTotals {
    /// The thread.
    pub tid: u32,
    /// The region's site id.
    pub region: u32,
    /// Time in the region's user code (tasks and region bodies) with this region innermost.
    pub user_code_ticks: u64,
    /// Tasks begun while the thread ran user code (UC→UC, e.g. a join's first half).
    pub bypasses: u64,
    /// Tasks of the region that ended (UC→LQ).
    pub task_ends: u64,
    /// Tasks of the region begun, by [`TaskOrigin`] value.
    pub tasks: [u64; 4],
    /// Gaps that ended with a local or inline task, with a steal, and with a fork's return (by
    /// bit length of the gap, as `(bit length, sum)`, ascending).
    pub local_gaps: GapSum,
    /// Gaps that ended with a stolen task.
    pub steal_gaps: GapSum,
    /// Gaps that ended with a fork's return, `(bit length, sum)` ascending.
    pub resume_gaps: Vec<(u8, GapSum)>,
    /// Of these gaps: the time idle after a first failed search round of a search that slept,
    /// the failed rounds, and the searches with a failed round.
    pub idle_ticks: u64,
    /// Failed search rounds (GS→GS).
    pub search_rounds: u64,
    /// Searches that had a failed round (GS→W).
    pub idle_episodes: u64,
    /// Task durations and local-gap lengths, `(bucket, count)` ascending (see
    /// [`duration_bucket`]), with the exact shortest and longest task.
    pub task_durations: Vec<(u16, u64)>,
    /// Local-gap lengths, `(bucket, count)` ascending.
    pub local_gap_lengths: Vec<(u16, u64)>,
    /// The shortest task, in ticks.
    pub min_task_ticks: u64,
    /// The longest task, in ticks.
    pub max_task_ticks: u64,
    /// The longest task's end (event clock) and its time from begin to end, nested tasks and
    /// switched-out time included (since version 8): the analysis takes out the time its
    /// thread was switched out between the two, so that a task preempted for milliseconds is
    /// not "the longest task".
    pub max_task_end: u64,
    /// The longest task's time from begin to end, in ticks.
    pub max_task_span_ticks: u64,
    /// The spacing of the marks whose clock timed the states (since version 9; 0 before, and
    /// where every stretch was timed): user code and gaps are then sampled in time, once per
    /// mark, and their times are known to about ±1/√(time ÷ spacing) of themselves.
    /// The task durations and the gap lengths are a sample of the stretches, scaled to their
    /// counts; the longest task is the longest timed or longer than three spacings.
    pub mark_spacing_ticks: u64,
    /// The region's own indexed parallel iterators that this thread bridged (since version
    /// 11; 0 before, and without rayon's hooks): how many, and their items, so that a piece
    /// of work's items are known (those nested in the region's tasks are not its own).
    pub iterators: u64,
    /// Their items, summed.
    pub iterator_items: u64,
    /// The indexed iterators bridged in the region's tasks below its entry (a row's cells
    /// summed by an inner `par_iter`), and their items (since version 11).
    pub nested_iterators: u64,
    /// Their items, summed.
    pub nested_iterator_items: u64,
}

/// Which part of a benchmark harness's run a [`BenchPhase`] is. The values are part of the
/// format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum BenchPhaseKind {
    /// Criterion's warm-up: the routine in batches of 1, 2, 4, … iterations.
    WarmUp = 1,
    /// The batch criterion measures (in profile mode: one batch).
    Measured = 2,
}

/// A phase of a benchmark, as the harness counted it (criterion hooks): its iterations of the
/// benchmarked routine, and when it began and ended on the event clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchPhase {
    /// Warm-up or measured.
    pub kind: BenchPhaseKind,
    /// Iterations of the benchmarked routine in the phase.
    pub iterations: u64,
    /// When the phase began, on the event clock.
    pub begin: u64,
    /// When it ended, on the event clock.
    pub end: u64,
}

/// What the rayon-core hooks cost the worker that runs them, by the state their time falls in,
/// measured at start-up through the counting path the workers' hooks take (see
/// `hook_cost`): the analysis takes it out of the states.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HookCosts {
    /// A task's begin and end: what falls in its user code (the begin's time; half the pair's
    /// in traces of runtimes that timed the pair as one).
    pub task_in_uc_ticks: f64,
    /// A task's begin and end: what falls in the gap after it (the end's time, or half the
    /// pair's).
    pub task_in_gap_ticks: f64,
    /// A fork's return: what falls in the user code it resumes.
    pub resume_in_uc_ticks: f64,
    /// The tasks of the measurement.
    pub tasks_timed: u32,
    /// The extra spin each hook was asked to make (`PARPROF_HOOK_SPIN_NS`), in ns; 0 normally.
    pub spin_ns: u32,
}

/// A decoded chunk.
#[derive(Clone, Debug, PartialEq)]
pub enum Chunk {
    /// The first chunk: the process, its clock and its calibration.
    Header(Header),
    /// A probe or region site.
    Site(SiteRecord),
    /// A thread's identity.
    Thread(ThreadRecord),
    /// Events of one thread, in time order.
    Events {
        /// The thread that recorded them.
        tid: u32,
        /// The events.
        events: Vec<Event>,
    },
    /// Events a thread could not store (its buffer was full); counted, never silently dropped.
    Lost {
        /// The thread.
        tid: u32,
        /// Events lost since its previous count.
        count: u64,
    },
    /// The last chunk of a complete trace.
    End(End),
    /// A thread's lifecycle in a region, counted in the program while its per-job events
    /// were paused.
    LifecycleTotals(LifecycleTotals),
    /// A benchmark phase, as the harness counted it.
    BenchPhase(BenchPhase),
    /// What the rayon-core hooks cost, measured at start-up.
    HookCosts(HookCosts),
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Reading the input failed.
    #[error("cannot read the trace: {0}")]
    Io(#[from] io::Error),
    /// The input does not start with [`MAGIC`].
    #[error("not a parprof trace (bad magic number)")]
    NotATrace,
    #[error(
        "trace format version {found} is newer than this parprof understands ({supported}); \
         update cargo-parprof"
    )]
    /// Written by a newer runtime than this reader knows.
    FutureVersion {
        /// The trace's version.
        found: u32,
        /// The newest this reader knows, [`VERSION`].
        supported: u32,
    },
    /// Older than [`OLDEST_READABLE`].
    #[error("trace format version {found} is not supported (this parprof reads {supported})")]
    OldVersion {
        /// The trace's version.
        found: u32,
        /// The newest this reader knows, [`VERSION`].
        supported: u32,
    },
    /// The input ends before the header chunk.
    #[error("the trace ends before its header: it was cut before anything was recorded")]
    Empty,
    /// A chunk's checksum or content is wrong.
    #[error("corrupt trace at byte {offset}: {reason}")]
    Corrupt {
        /// Where the bad chunk starts in the file.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
}

// ---------------------------------------------------------------------------------------------
// Writing

/// Appends encoded chunks to a byte buffer; the runtime's writer and tests use it.
#[derive(Default)]
pub struct ChunkEncoder {
    buf: Vec<u8>,
}

const HEAD_KIND: u8 = 0x0f;
const HEAD_ID: u8 = 1 << 4;
const HEAD_AUX: u8 = 1 << 5;
const HEAD_FLAGS: u8 = 1 << 6;

/// Appends `e` packed against `previous`, the chunk's event before it (the default event for
/// the first). Timestamps of a chunk never decrease (the reader checks it).
fn pack_event(out: &mut Vec<u8>, e: &Event, previous: &Event) {
    let mut head = e.kind & HEAD_KIND;
    if e.id != previous.id {
        head |= HEAD_ID;
    }
    if e.aux != 0 {
        head |= HEAD_AUX;
    }
    if e.flags != 0 {
        head |= HEAD_FLAGS;
    }
    out.push(head);
    put_varint(out, e.ts.wrapping_sub(previous.ts));
    if head & HEAD_ID != 0 {
        put_varint(out, u64::from(e.id));
    }
    if head & HEAD_AUX != 0 {
        put_varint(out, u64::from(e.aux));
    }
    if head & HEAD_FLAGS != 0 {
        out.push(e.flags);
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    // Strings are bounded by u16; longer ones are cut at a char boundary.
    let mut end = s.len().min(u16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u16).to_le_bytes());
    out.extend_from_slice(&s.as_bytes()[..end]);
}

fn put_totals(o: &mut Vec<u8>, t: &LifecycleTotals) {
    let put = |o: &mut Vec<u8>, v: u64| put_varint(o, v);
    o.extend_from_slice(&t.tid.to_le_bytes());
    o.extend_from_slice(&t.region.to_le_bytes());
    for v in [t.user_code_ticks, t.bypasses, t.task_ends] {
        put(o, v);
    }
    for v in t.tasks {
        put(o, v);
    }
    for s in [t.local_gaps, t.steal_gaps] {
        put(o, s.count);
        put(o, s.ticks);
    }
    put(o, t.resume_gaps.len() as u64);
    for (bits, s) in &t.resume_gaps {
        o.push(*bits);
        put(o, s.count);
        put(o, s.ticks);
    }
    for v in [t.idle_ticks, t.search_rounds, t.idle_episodes] {
        put(o, v);
    }
    for buckets in [&t.task_durations, &t.local_gap_lengths] {
        put(o, buckets.len() as u64);
        for (bucket, count) in buckets {
            put(o, u64::from(*bucket));
            put(o, *count);
        }
    }
    put(o, t.min_task_ticks);
    put(o, t.max_task_ticks);
    put(o, t.max_task_end);
    put(o, t.max_task_span_ticks);
    put(o, t.mark_spacing_ticks);
    put(o, t.iterators);
    put(o, t.iterator_items);
    put(o, t.nested_iterators);
    put(o, t.nested_iterator_items);
}

fn put_sync(out: &mut Vec<u8>, s: &ClockSync) {
    out.extend_from_slice(&s.ticks.to_le_bytes());
    out.extend_from_slice(&s.monotonic_ns.to_le_bytes());
    out.extend_from_slice(&s.uncertainty_ticks.to_le_bytes());
}

impl ChunkEncoder {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The file preamble: magic and version.
    pub fn preamble(&mut self) {
        self.buf.extend_from_slice(&MAGIC);
        self.buf.extend_from_slice(&VERSION.to_le_bytes());
    }

    /// Appends `chunk`, checksummed (events packed).
    pub fn chunk(&mut self, chunk: &Chunk) {
        match chunk {
            Chunk::Header(h) => self.framed(ChunkKind::Header, |o| {
                o.extend_from_slice(&h.pid.to_le_bytes());
                o.push(h.clock as u8);
                o.extend_from_slice(&h.ticks_per_ns.to_bits().to_le_bytes());
                put_sync(o, &h.start);
                o.extend_from_slice(&h.bare_read_ticks.to_le_bytes());
                o.extend_from_slice(&(h.calibration.len() as u16).to_le_bytes());
                for c in &h.calibration {
                    o.push(c.kind as u8);
                    o.extend_from_slice(&c.cost_ticks.to_bits().to_le_bytes());
                    o.extend_from_slice(&c.spread.to_bits().to_le_bytes());
                    o.extend_from_slice(&c.rounds.to_le_bytes());
                }
                put_str(o, &h.program);
            }),
            Chunk::Site(s) => self.framed(ChunkKind::Site, |o| {
                o.extend_from_slice(&s.id.to_le_bytes());
                o.push(s.kind as u8);
                o.extend_from_slice(&s.line.to_le_bytes());
                put_str(o, &s.name);
                put_str(o, &s.file);
                put_str(o, &s.caller);
                o.push(s.entry.map_or(0, |e| e as u8));
            }),
            Chunk::Thread(t) => self.framed(ChunkKind::Thread, |o| {
                o.extend_from_slice(&t.tid.to_le_bytes());
                o.extend_from_slice(&t.rayon_index.to_le_bytes());
                o.extend_from_slice(&t.pool.to_le_bytes());
                put_str(o, &t.name);
            }),
            Chunk::Events { tid, events } => self.events(*tid, events, &[]),
            Chunk::Lost { tid, count } => self.framed(ChunkKind::Lost, |o| {
                o.extend_from_slice(&tid.to_le_bytes());
                o.extend_from_slice(&count.to_le_bytes());
            }),
            Chunk::End(e) => self.framed(ChunkKind::End, |o| {
                put_sync(o, &e.end);
                o.extend_from_slice(&e.events_written.to_le_bytes());
                o.extend_from_slice(&e.events_lost.to_le_bytes());
            }),
            Chunk::LifecycleTotals(t) => self.framed(ChunkKind::LifecycleTotals, |o| {
                put_totals(o, t);
            }),
            Chunk::BenchPhase(b) => self.framed(ChunkKind::BenchPhase, |o| {
                o.push(b.kind as u8);
                o.extend_from_slice(&b.iterations.to_le_bytes());
                o.extend_from_slice(&b.begin.to_le_bytes());
                o.extend_from_slice(&b.end.to_le_bytes());
            }),
            Chunk::HookCosts(h) => self.framed(ChunkKind::HookCosts, |o| {
                for ticks in [
                    h.task_in_uc_ticks,
                    h.task_in_gap_ticks,
                    h.resume_in_uc_ticks,
                ] {
                    o.extend_from_slice(&ticks.to_bits().to_le_bytes());
                }
                o.extend_from_slice(&h.tasks_timed.to_le_bytes());
                o.extend_from_slice(&h.spin_ns.to_le_bytes());
            }),
        }
    }

    /// An events chunk from two slices (a ring buffer's contents may wrap around), packed.
    pub fn events(&mut self, tid: u32, first: &[Event], second: &[Event]) {
        self.events_kept(tid, first, second, |_| true);
    }

    /// [`ChunkEncoder::events`] of the events that `keep` keeps; returns how many it kept (an
    /// empty chunk is not written).
    pub fn events_kept(
        &mut self,
        tid: u32,
        first: &[Event],
        second: &[Event],
        keep: impl Fn(&Event) -> bool,
    ) -> usize {
        let mut kept = 0u32;
        let start = self.buf.len();
        self.framed(ChunkKind::Events, |o| {
            o.extend_from_slice(&tid.to_le_bytes());
            let count_at = o.len();
            o.extend_from_slice(&0u32.to_le_bytes());
            o.reserve((first.len() + second.len()) * 4);
            let mut previous = Event::default();
            for e in first.iter().chain(second).filter(|e| keep(e)) {
                pack_event(o, e, &previous);
                previous = *e;
                kept += 1;
            }
            o[count_at..count_at + 4].copy_from_slice(&kept.to_le_bytes());
        });
        if kept == 0 && first.len() + second.len() > 0 {
            self.buf.truncate(start);
        }
        kept as usize
    }

    fn framed(&mut self, kind: ChunkKind, payload: impl FnOnce(&mut Vec<u8>)) {
        let start = self.buf.len();
        self.buf.extend_from_slice(&(kind as u32).to_le_bytes());
        self.buf.extend_from_slice(&[0; 4]);
        payload(&mut self.buf);
        let len = (self.buf.len() - start - 8) as u32;
        self.buf[start + 4..start + 8].copy_from_slice(&len.to_le_bytes());
        let crc = crc32fast::hash(&self.buf[start..]);
        self.buf.extend_from_slice(&crc.to_le_bytes());
    }

    /// Whether nothing is encoded since the last flush.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Writes what was encoded and empties the buffer.
    pub fn flush_to(&mut self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// What was encoded.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

// ---------------------------------------------------------------------------------------------
// Reading

/// How a trace ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completeness {
    /// The End chunk was read.
    Complete,
    /// The file stops without an End chunk: the writer was killed or crashed. `tail_bytes`
    /// is the size of an incomplete chunk at the end that was ignored (0 if the cut fell
    /// between chunks).
    Cut {
        /// The end of the last complete chunk.
        after_byte: u64,
        /// The size of the incomplete chunk after it.
        tail_bytes: u64,
    },
}

/// A streaming, validating reader. It never panics on bad bytes and never allocates more than
/// [`MAX_CHUNK_LEN`] for one chunk.
pub struct TraceReader<R> {
    input: R,
    offset: u64,
    header: Header,
    completeness: Option<Completeness>,
    payload: Vec<u8>,
}

impl<R: Read> TraceReader<R> {
    /// Reads and checks the preamble and the header chunk.
    pub fn new(mut input: R) -> Result<Self, TraceError> {
        let mut pre = [0u8; 12];
        let got = read_full(&mut input, &mut pre)?;
        if got < 8 {
            return Err(if got == 0 || MAGIC.starts_with(&pre[..got]) {
                TraceError::Empty
            } else {
                TraceError::NotATrace
            });
        }
        if pre[..8] != MAGIC {
            return Err(TraceError::NotATrace);
        }
        if got < 12 {
            return Err(TraceError::Empty);
        }
        let version = u32::from_le_bytes(pre[8..12].try_into().expect("4 bytes"));
        if version > VERSION {
            return Err(TraceError::FutureVersion {
                found: version,
                supported: VERSION,
            });
        }
        if version < OLDEST_READABLE {
            return Err(TraceError::OldVersion {
                found: version,
                supported: VERSION,
            });
        }
        let mut reader = TraceReader {
            input,
            offset: 12,
            header: Header::monotonic_without_calibration(),
            completeness: None,
            payload: Vec::new(),
        };
        match reader.next_chunk()? {
            Some(Chunk::Header(h)) => {
                reader.header = h;
                Ok(reader)
            }
            Some(_) => Err(TraceError::Corrupt {
                offset: 12,
                reason: "the first chunk is not the header".into(),
            }),
            None => Err(TraceError::Empty),
        }
    }

    /// The trace's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Set once the reader has reached the end of the input.
    pub fn completeness(&self) -> Option<&Completeness> {
        self.completeness.as_ref()
    }

    /// The next chunk, `Ok(None)` at the end of the trace (see [`Self::completeness`]).
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, TraceError> {
        self.next_chunk_of(|_| true)
    }

    /// The next chunk of a kind `wanted` accepts; the others are read and checked but not
    /// decoded, so that a scan for a few small chunks costs the reading of the file only.
    pub fn next_chunk_of(
        &mut self,
        wanted: impl Fn(ChunkKind) -> bool,
    ) -> Result<Option<Chunk>, TraceError> {
        loop {
            let start = self.offset;
            let Some(kind) = self.next_frame()? else {
                return Ok(None);
            };
            if kind == ChunkKind::End {
                self.completeness = Some(Completeness::Complete);
            }
            if wanted(kind) {
                let body = &self.payload[..self.payload.len() - 4];
                return decode_chunk(kind, body)
                    .map(Some)
                    .map_err(|reason| TraceError::Corrupt {
                        offset: start,
                        reason: reason.to_string(),
                    });
            }
        }
    }

    /// Reads the next chunk's frame and checks it: its kind, with its body and checksum in
    /// `payload`; `None` at the end of the trace.
    fn next_frame(&mut self) -> Result<Option<ChunkKind>, TraceError> {
        if self.completeness.is_some() {
            return Ok(None);
        }
        let start = self.offset;
        let mut frame = [0u8; 8];
        let got = read_full(&mut self.input, &mut frame)?;
        if got < 8 {
            self.completeness = Some(Completeness::Cut {
                after_byte: start,
                tail_bytes: got as u64,
            });
            return Ok(None);
        }
        let kind_raw = u32::from_le_bytes(frame[0..4].try_into().expect("4 bytes"));
        let len = u32::from_le_bytes(frame[4..8].try_into().expect("4 bytes"));
        let corrupt = |reason: String| TraceError::Corrupt {
            offset: start,
            reason,
        };
        let kind = ChunkKind::from_u32(kind_raw)
            .ok_or_else(|| corrupt(format!("unknown chunk kind {kind_raw}")))?;
        if len > MAX_CHUNK_LEN {
            return Err(corrupt(format!(
                "chunk length {len} exceeds {MAX_CHUNK_LEN}"
            )));
        }
        self.payload.clear();
        self.payload.resize(len as usize + 4, 0);
        let got_payload = read_full(&mut self.input, &mut self.payload)?;
        if got_payload < self.payload.len() {
            self.completeness = Some(Completeness::Cut {
                after_byte: start,
                tail_bytes: 8 + got_payload as u64,
            });
            return Ok(None);
        }
        let (body, crc_bytes) = self.payload.split_at(len as usize);
        let stored_crc = u32::from_le_bytes(crc_bytes.try_into().expect("4 bytes"));
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&frame);
        hasher.update(body);
        if hasher.finalize() != stored_crc {
            return Err(corrupt(format!("checksum mismatch in a {kind:?} chunk")));
        }
        self.offset += 8 + len as u64 + 4;
        Ok(Some(kind))
    }
}

impl<R: Read> Iterator for TraceReader<R> {
    type Item = Result<Chunk, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_chunk().transpose()
    }
}

/// A bounds-checked cursor over a chunk payload.
struct Cursor<'a> {
    b: &'a [u8],
}

impl<'a> Cursor<'a> {
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.b.len() < n {
            return Err("payload shorter than its fields");
        }
        let (head, tail) = self.b.split_at(n);
        self.b = tail;
        Ok(head)
    }
    #[inline]
    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, &'static str> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn u32(&mut self) -> Result<u32, &'static str> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, &'static str> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    #[inline(always)]
    fn varint(&mut self) -> Result<u64, &'static str> {
        let (value, len) = read_varint(self.b)?;
        self.b = &self.b[len..];
        Ok(value)
    }

    /// A varint that an older version did not write at the end of its chunk: 0 there.
    fn varint_or_absent(&mut self) -> Result<u64, &'static str> {
        if self.b.is_empty() {
            Ok(0)
        } else {
            self.varint()
        }
    }

    /// One packed event after `previous` (see the module's format).
    #[inline(always)]
    fn packed_event(&mut self, previous: &Event) -> Result<Event, &'static str> {
        let head = self.u8()?;
        if head & !(HEAD_KIND | HEAD_ID | HEAD_AUX | HEAD_FLAGS) != 0 {
            return Err("reserved bit set in an event head");
        }
        let ts = previous
            .ts
            .checked_add(self.varint()?)
            .ok_or("event timestamp overflows")?;
        let id = if head & HEAD_ID != 0 {
            u32::try_from(self.varint()?).map_err(|_| "event id out of range")?
        } else {
            previous.id
        };
        let aux = if head & HEAD_AUX != 0 {
            u16::try_from(self.varint()?).map_err(|_| "event aux out of range")?
        } else {
            0
        };
        let flags = if head & HEAD_FLAGS != 0 {
            self.u8()?
        } else {
            0
        };
        Ok(Event {
            ts,
            id,
            aux,
            kind: head & HEAD_KIND,
            flags,
        })
    }

    fn str(&mut self) -> Result<String, &'static str> {
        let n = self.u16()? as usize;
        std::str::from_utf8(self.take(n)?)
            .map(str::to_owned)
            .map_err(|_| "string is not UTF-8")
    }
    fn sync(&mut self) -> Result<ClockSync, &'static str> {
        Ok(ClockSync {
            ticks: self.u64()?,
            monotonic_ns: self.u64()?,
            uncertainty_ticks: self.u32()?,
        })
    }
    fn gap_sum(&mut self) -> Result<GapSum, &'static str> {
        Ok(GapSum {
            count: self.varint()?,
            ticks: self.varint()?,
        })
    }
    /// `(bucket, count)` pairs, buckets strictly ascending and below [`DURATION_BUCKETS`].
    fn buckets(&mut self) -> Result<Vec<(u16, u64)>, &'static str> {
        let n = self.varint()?;
        if n > DURATION_BUCKETS as u64 {
            return Err("more duration buckets than there are");
        }
        let mut out: Vec<(u16, u64)> = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let bucket = self.varint()?;
            if bucket >= DURATION_BUCKETS as u64
                || out.last().is_some_and(|l| u64::from(l.0) >= bucket)
            {
                return Err("duration buckets out of order or out of range");
            }
            out.push((bucket as u16, self.varint()?));
        }
        Ok(out)
    }
    fn totals(&mut self) -> Result<LifecycleTotals, &'static str> {
        let tid = self.u32()?;
        let region = self.u32()?;
        let user_code_ticks = self.varint()?;
        let bypasses = self.varint()?;
        let task_ends = self.varint()?;
        let tasks = [
            self.varint()?,
            self.varint()?,
            self.varint()?,
            self.varint()?,
        ];
        let local_gaps = self.gap_sum()?;
        let steal_gaps = self.gap_sum()?;
        let n = self.varint()?;
        if n > 65 {
            return Err("more gap lengths than bits in a u64");
        }
        let mut resume_gaps: Vec<(u8, GapSum)> = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let bits = self.u8()?;
            if bits > 64 || resume_gaps.last().is_some_and(|l| l.0 >= bits) {
                return Err("gap lengths out of order or out of range");
            }
            resume_gaps.push((bits, self.gap_sum()?));
        }
        Ok(LifecycleTotals {
            tid,
            region,
            user_code_ticks,
            bypasses,
            task_ends,
            tasks,
            local_gaps,
            steal_gaps,
            resume_gaps,
            idle_ticks: self.varint()?,
            search_rounds: self.varint()?,
            idle_episodes: self.varint()?,
            task_durations: self.buckets()?,
            local_gap_lengths: self.buckets()?,
            min_task_ticks: self.varint()?,
            max_task_ticks: self.varint()?,
            // Absent in version 7.
            max_task_end: self.varint_or_absent()?,
            max_task_span_ticks: self.varint_or_absent()?,
            // Absent before version 9.
            mark_spacing_ticks: self.varint_or_absent()?,
            // Absent before version 11.
            iterators: self.varint_or_absent()?,
            iterator_items: self.varint_or_absent()?,
            nested_iterators: self.varint_or_absent()?,
            nested_iterator_items: self.varint_or_absent()?,
        })
    }
    fn finish(&self) -> Result<(), &'static str> {
        if self.b.is_empty() {
            Ok(())
        } else {
            Err("trailing bytes after the chunk's fields")
        }
    }
}

fn decode_chunk(kind: ChunkKind, body: &[u8]) -> Result<Chunk, &'static str> {
    let mut c = Cursor { b: body };
    let chunk = match kind {
        ChunkKind::Header => Chunk::Header(decode_header(&mut c)?),
        ChunkKind::Site => {
            let id = c.u32()?;
            let kind = match c.u8()? {
                1 => SiteKind::Probe,
                2 => SiteKind::Region,
                3 => SiteKind::ImplicitRegion,
                _ => return Err("unknown site kind"),
            };
            let line = c.u32()?;
            let name = c.str()?;
            let file = c.str()?;
            // Absent before version 10.
            let (caller, entry) = if c.b.is_empty() {
                (String::new(), None)
            } else {
                (c.str()?, EntryKind::from_u8(c.u8()?))
            };
            Chunk::Site(SiteRecord {
                id,
                kind,
                line,
                name,
                file,
                caller,
                entry,
            })
        }
        ChunkKind::Thread => Chunk::Thread(ThreadRecord {
            tid: c.u32()?,
            rayon_index: c.u16()?,
            pool: c.u32()?,
            name: c.str()?,
        }),
        ChunkKind::Events => decode_events(&mut c)?,
        ChunkKind::Lost => Chunk::Lost {
            tid: c.u32()?,
            count: c.u64()?,
        },
        ChunkKind::End => Chunk::End(End {
            end: c.sync()?,
            events_written: c.u64()?,
            events_lost: c.u64()?,
        }),
        ChunkKind::LifecycleTotals => Chunk::LifecycleTotals(c.totals()?),
        ChunkKind::BenchPhase => Chunk::BenchPhase(BenchPhase {
            kind: match c.u8()? {
                1 => BenchPhaseKind::WarmUp,
                2 => BenchPhaseKind::Measured,
                _ => return Err("unknown bench phase"),
            },
            iterations: c.u64()?,
            begin: c.u64()?,
            end: c.u64()?,
        }),
        ChunkKind::HookCosts => {
            let mut ticks = || -> Result<f64, &'static str> {
                let t = f64::from_bits(c.u64()?);
                (t.is_finite() && t >= 0.0)
                    .then_some(t)
                    .ok_or("hook cost is not a finite number of ticks")
            };
            let (task_in_uc_ticks, task_in_gap_ticks, resume_in_uc_ticks) =
                (ticks()?, ticks()?, ticks()?);
            Chunk::HookCosts(HookCosts {
                task_in_uc_ticks,
                task_in_gap_ticks,
                resume_in_uc_ticks,
                tasks_timed: c.u32()?,
                spin_ns: c.u32()?,
            })
        }
    };
    c.finish()?;
    Ok(chunk)
}

fn decode_header(c: &mut Cursor) -> Result<Header, &'static str> {
    let pid = c.u32()?;
    let clock = match c.u8()? {
        1 => ClockKind::Tsc,
        2 => ClockKind::Monotonic,
        _ => return Err("unknown clock kind"),
    };
    let ticks_per_ns = f64::from_bits(c.u64()?);
    if !(ticks_per_ns.is_finite() && ticks_per_ns > 0.0) {
        return Err("ticks per ns is not a positive number");
    }
    let start = c.sync()?;
    let bare_read_ticks = c.u32()?;
    let n = c.u16()?;
    let mut calibration = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let kind = EventKind::from_u8(c.u8()?).ok_or("unknown event kind in calibration")?;
        let cost_ticks = f64::from_bits(c.u64()?);
        if !(cost_ticks.is_finite() && cost_ticks >= 0.0) {
            return Err("calibration cost is not a finite number of ticks");
        }
        let spread = f64::from_bits(c.u64()?);
        if !(spread.is_finite() && spread >= 0.0) {
            return Err("calibration spread is not a finite share");
        }
        let rounds = c.u16()?;
        if rounds == 0 {
            return Err("calibration row measured over no rounds");
        }
        calibration.push(Calibration {
            kind,
            cost_ticks,
            spread,
            rounds,
        });
    }
    let program = c.str()?;
    Ok(Header {
        pid,
        clock,
        ticks_per_ns,
        start,
        bare_read_ticks,
        calibration,
        program,
    })
}

fn decode_events(c: &mut Cursor) -> Result<Chunk, &'static str> {
    let tid = c.u32()?;
    let count = c.u32()? as usize;
    // Every packed event takes at least two bytes: a larger count is corruption.
    if count > c.b.len() / 2 {
        return Err("event count does not match the chunk length");
    }
    let mut events = Vec::with_capacity(count);
    let mut previous = Event::default();
    for _ in 0..count {
        let e = c.packed_event(&previous)?;
        let kind = EventKind::from_u8(e.kind).ok_or("unknown event kind")?;
        if kind == EventKind::TaskBegin && TaskOrigin::from_u8(e.flags).is_none() {
            return Err("unknown task origin");
        }
        if kind == EventKind::Unrecorded && e.flags & !UNRECORDED_NESTED != 0 {
            return Err("unknown flags of unrecorded calls");
        }
        if kind == EventKind::Enter && e.flags & !ENTER_NOT_SAMPLED != 0 {
            return Err("unknown flags of a probe entry");
        }
        if kind == EventKind::BufferStall && e.flags & !BUFFER_WRITER_WOKEN != 0 {
            return Err("unknown flags of a buffer stall");
        }
        if kind == EventKind::Detail && e.flags > DETAIL_FRAME {
            return Err("unknown flags of a detail event");
        }
        events.push(e);
        previous = e;
    }
    Ok(Chunk::Events { tid, events })
}

/// Converts event-clock ticks to `CLOCK_MONOTONIC` nanoseconds, the time line of the kernel's
/// perf records. With both sync points the rate is the one measured over the whole run;
/// a cut trace falls back to the start-up calibration.
#[derive(Clone, Copy, Debug)]
pub struct TickConverter {
    base_ticks: u64,
    base_ns: u64,
    ns_per_tick: f64,
}

impl TickConverter {
    /// The converter of a trace: its header, and its end's sync point when it has one.
    pub fn new(header: &Header, end: Option<&ClockSync>) -> Self {
        let start = header.start;
        let startup = 1.0 / header.ticks_per_ns;
        let whole_run = end
            .filter(|e| e.ticks > start.ticks && e.monotonic_ns > start.monotonic_ns)
            .map(|e| (e.monotonic_ns - start.monotonic_ns) as f64 / (e.ticks - start.ticks) as f64);
        // The rate drifts by parts per million over a run: an end point that implies a rate 1 %
        // off the start-up one is damaged, and would stretch every time of the run.
        let ns_per_tick = whole_run
            .filter(|r| (r / startup - 1.0).abs() < 0.01)
            .unwrap_or(startup);
        TickConverter {
            base_ticks: start.ticks,
            base_ns: start.monotonic_ns,
            ns_per_tick,
        }
    }

    /// A timestamp on the event clock as `CLOCK_MONOTONIC` nanoseconds.
    pub fn to_ns(&self, ticks: u64) -> u64 {
        let delta = ticks as i128 - self.base_ticks as i128;
        let ns = self.base_ns as f64 + delta as f64 * self.ns_per_tick;
        ns.max(0.0) as u64
    }

    /// The inverse of [`Self::to_ns`]: a kernel `CLOCK_MONOTONIC` time on the tick time line.
    pub fn ns_to_ticks(&self, ns: u64) -> u64 {
        let delta = ns as i128 - self.base_ns as i128;
        let ticks = self.base_ticks as f64 + delta as f64 / self.ns_per_tick;
        ticks.max(0.0) as u64
    }

    /// A duration in ticks as nanoseconds.
    pub fn span_ns(&self, ticks: u64) -> f64 {
        ticks as f64 * self.ns_per_tick
    }

    /// Nanoseconds per tick: 1 for [`ClockKind::Monotonic`].
    pub fn ns_per_tick(&self) -> f64 {
        self.ns_per_tick
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Version 7's totals end before the longest task's end and span, version 8's before the
    /// marks' spacing, version 10's before the iterators: they read as 0.
    #[test]
    fn older_totals_read_without_their_last_fields() {
        let totals = LifecycleTotals {
            tid: 3,
            region: 1,
            task_ends: 5,
            max_task_ticks: 900,
            max_task_end: 1_000_000,
            max_task_span_ticks: 950,
            mark_spacing_ticks: 300,
            iterators: 2,
            iterator_items: 1_000,
            nested_iterators: 1,
            nested_iterator_items: 16,
            ..LifecycleTotals::default()
        };
        let mut body = Vec::new();
        put_totals(&mut body, &totals);
        let read = |body: &[u8]| match decode_chunk(ChunkKind::LifecycleTotals, body) {
            Ok(Chunk::LifecycleTotals(t)) => t,
            other => panic!("{other:?}"),
        };
        assert_eq!(read(&body), totals);
        // Version 10 did not write the iterators (2: one byte, 1,000: two; 1 and 16: one each).
        let body = &body[..body.len() - 5];
        let read_10 = LifecycleTotals {
            iterators: 0,
            iterator_items: 0,
            nested_iterators: 0,
            nested_iterator_items: 0,
            ..totals.clone()
        };
        assert_eq!(read(body), read_10);
        // Version 8 did not write the spacing (300: two bytes), version 7 not the longest
        // task's end and span either (1,000,000 takes 3 bytes, 950 two).
        let version_8 = &body[..body.len() - 2];
        let read_8 = LifecycleTotals {
            mark_spacing_ticks: 0,
            ..read_10
        };
        assert_eq!(read(version_8), read_8);
        let version_7 = &body[..body.len() - 7];
        assert_eq!(
            read(version_7),
            LifecycleTotals {
                max_task_end: 0,
                max_task_span_ticks: 0,
                ..read_8
            }
        );
    }
}
