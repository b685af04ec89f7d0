//! The recording core: the mode, the per-thread rings and what stores events into them
//! (`stamp`, `record`, `record_measured`), the thread and site records queued for the writer.
//! Everything that records calls here; this module calls only downward: sampling, the slices
//! (checkpoints, a slice's measurement, full detail) and the leaves.
//!
//! Starting the runtime (`runtime`, which calibrates through this very path) is above it: the
//! first event of a program that nothing started yet reaches it through the function
//! `runtime` registers with [`set_start`] (before `main`, and whenever it starts).
//!
//! Memory held: one ring of [`ring::CAPACITY`] events (2 MiB) per live recording thread, plus
//! the writer's chunk buffer (at most one drain of every ring). When a ring is full because the
//! writer cannot keep up, further events of that thread are counted as lost and the count is
//! written into the trace.

use crate::attention;
use crate::clock;
use crate::full_detail;
use crate::ring::{self, Push, Ring};
use crate::sampling;
use crate::site_ids;
use crate::slice_child;
use crate::slices;
use crate::thread_context::{self, current_tid};
use crate::trace::{Chunk, Event, EventKind, SiteKind, SiteRecord, ThreadRecord};
use std::cell::Cell;
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::Thread;
use std::time::Duration;

pub(crate) const UNINIT: u8 = 0;
pub(crate) const OFF: u8 = 1;
pub(crate) const ON: u8 = 2;

/// Whether probes record. Starts UNINIT, which takes the recording path, whose cold branch
/// initialises the runtime once and settles the mode; afterwards a disabled probe costs
/// this one load and branch.
pub(crate) static MODE: AtomicU8 = AtomicU8::new(UNINIT);

#[inline(always)]
pub fn is_off() -> bool {
    MODE.load(Ordering::Relaxed) == OFF
}

/// True when recording is on (the runtime started and has not stopped).
#[inline(always)]
pub(crate) fn is_on() -> bool {
    MODE.load(Ordering::Relaxed) == ON
}

/// Whether the calling thread's ring is less than half full: past that, per-job detail pauses
/// rather than make the thread wait for the writer.
pub(crate) fn ring_has_room() -> bool {
    with_current_ring(|ring| ring.pending() < ring::CAPACITY / 2).unwrap_or(false)
}

/// Whether the calling thread's ring can take `events` more without waiting for the writer.
pub(crate) fn ring_has_room_for(events: usize) -> bool {
    with_current_ring(|ring| ring.pending() + events <= ring::CAPACITY).unwrap_or(false)
}

pub(crate) struct Runtime {
    pub(crate) rings: Mutex<Vec<Arc<Ring>>>,
    /// Site and thread records waiting for the writer; written before any later events.
    pub(crate) metadata: Mutex<Vec<Chunk>>,
    pub(crate) writer: OnceLock<Thread>,
    pub(crate) stop: AtomicBool,
    pub(crate) finished: (Mutex<bool>, Condvar),
    pub(crate) file: Mutex<Option<File>>,
    pub(crate) events_written: AtomicU64,
    pub(crate) events_lost: AtomicU64,
    /// Completed drain-and-write passes of the writer, for `flush`.
    pub(crate) passes: AtomicU64,
}

pub(crate) static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// Starts the runtime; registered by `runtime` (which is above this module).
static START: OnceLock<fn()> = OnceLock::new();

/// Registers the function that starts the runtime, for the first event of a program that
/// nothing started yet.
pub(crate) fn set_start(start: fn()) {
    let _ = START.set(start);
}

/// Initialises the runtime once, through the function `runtime` registered: off unless
/// `PARPROF_OUT` names a folder.
#[cold]
pub fn ensure_init() {
    if MODE.load(Ordering::Acquire) != UNINIT {
        return;
    }
    if let Some(start) = START.get() {
        start();
    }
}

thread_local! {
    /// How many times calibration's and the in-run references' own events woke the writer on
    /// this thread (see [`calibration_wakes`]).
    static CALIBRATION_WAKES: Cell<u32> = const { Cell::new(0) };
    /// This thread's ring; null until the thread first records (and again once it exits).
    static RING: Cell<*const Ring> = const { Cell::new(std::ptr::null()) };
    /// The events this thread holds, to be stored before its next event stamped after them (see
    /// [`hold`]).
    static HELD: Cell<Held> = const { Cell::new(Held { wake: None, stall: None }) };
    /// Closes this thread's ring when the thread exits, so the writer flushes and frees it.
    static THREAD_EXIT: ThreadExit = const { ThreadExit { ring: std::cell::RefCell::new(None) } };
}

struct ThreadExit {
    ring: std::cell::RefCell<Option<Arc<Ring>>>,
}

impl Drop for ThreadExit {
    fn drop(&mut self) {
        if slice_child::active() {
            // A slice's only thread ends: so does the slice, complete.
            slice_child::finish_completed();
        }
        slices::detach_thread();
        full_detail::detach_thread();
        let _ = RING.try_with(|r| r.set(std::ptr::null()));
        if let Some(ring) = self.ring.borrow_mut().take() {
            let now = clock::now();
            store_held_before(&ring, now);
            if sampling::has_pending() {
                write_unrecorded(&ring, now);
            }
            ring.close();
            wake_writer();
        }
    }
}

/// Records one event on the calling thread. Returns false when nothing was recorded
/// (recording is off, or the thread is past its exit).
#[inline(always)]
pub fn record(kind: EventKind, id: u32, aux: u16, flags: u8) -> bool {
    stamp(kind, id, aux, flags).is_some()
}

/// Records one event on the calling thread and returns its timestamp; `None` when nothing
/// was recorded (recording is off, or the thread is past its exit).
///
/// The timestamp is taken first, so that almost all of the event's cost falls after it: the
/// calibrated cost of an event then lies inside the interval the event opens (method 1
/// counts an entry's cost inside its own section and an exit's cost outside).
#[inline(always)]
pub fn stamp(kind: EventKind, id: u32, aux: u16, flags: u8) -> Option<u64> {
    let ring = RING.with(|r| r.get());
    if ring.is_null() {
        // Attaching the thread allocates its ring.
        return stamp_cold(kind, id, aux, flags);
    }
    // SAFETY: a non-null RING points into an Arc held by THREAD_EXIT of this live thread.
    let ring = unsafe { &*ring };
    // One byte says whether anything else is to be done: unrecorded calls to write, a slice
    // checkpoint, detailed instrumentation.
    if attention::get() != 0 {
        return stamp_attention(ring, kind, id, aux, flags);
    }
    Some(push_now(ring, kind, id, aux, flags))
}

/// Stores an event stamped now; returns the stamp.
#[inline(always)]
fn push_now(ring: &Ring, kind: EventKind, id: u32, aux: u16, flags: u8) -> u64 {
    let ts = clock::now();
    push(ring, event_at(ts, kind, id, aux, flags));
    ts
}

#[inline(always)]
fn event_at(ts: u64, kind: EventKind, id: u32, aux: u16, flags: u8) -> Event {
    Event {
        ts,
        id,
        aux,
        kind: kind as u8,
        flags,
    }
}

/// `stamp` for a thread whose attention byte is set.
#[cold]
#[inline(never)]
fn stamp_attention(ring: &Ring, kind: EventKind, id: u32, aux: u16, flags: u8) -> Option<u64> {
    if attention::get() & attention::DETAIL == 0 || !slice_child::active() {
        if sampling::has_pending() {
            write_unrecorded(ring, clock::now());
        }
        if attention::get() & attention::CHECKPOINT != 0 {
            attention::clear(attention::CHECKPOINT);
            let began = clock::now();
            // In the child of a fork this returns in the slice.
            slices::checkpoint();
            if !slice_child::active() {
                let took = clock::now().saturating_sub(began).min(u64::from(u32::MAX)) as u32;
                push_in_order(ring, Event::new(began, EventKind::SliceCheckpoint, took));
            }
        }
    }
    if slice_child::active() {
        // A slice measures the event and writes no trace: the writer is not in this process.
        slice_child::event(kind, id);
        return Some(clock::now());
    }
    let detail = attention::get() & attention::DETAIL != 0;
    // The counters are read inside the event's interval: after the entry's push, before the
    // exit's, so that the ring's cost stays out of the calls measured.
    if detail && kind == EventKind::Exit {
        full_detail::event(kind, id);
    }
    let ts = clock::now();
    push_in_order(ring, event_at(ts, kind, id, aux, flags));
    if detail && kind == EventKind::Enter {
        full_detail::event(kind, id);
    }
    Some(ts)
}

#[inline(always)]
fn push(ring: &Ring, event: Event) {
    match ring.push(event) {
        Push::Stored => {}
        // Calibration's and an in-run reference's own events: their measurement holds the
        // wake (a reference's whole time is removed; the reference says it woke the writer).
        Push::StoredWakeWriter if event.id == sampling::CALIBRATION_SITE => {
            wake_writer_from_calibration()
        }
        Push::StoredWakeWriter => wake_writer_measured(),
        Push::Full => wait_for_room(ring, event),
    }
}

/// Wakes the writer from calibration's or an in-run reference's own events, counted (see
/// [`calibration_wakes`]); out of line, as the measured wake is, so that the store of an event
/// stays small where it is inlined.
#[cold]
#[inline(never)]
fn wake_writer_from_calibration() {
    CALIBRATION_WAKES.with(|w| w.set(w.get().wrapping_add(1)));
    wake_writer();
}

/// A count that changes each time calibration's or an in-run reference's own events wake the
/// writer on the calling thread: a reference compares it before and after its round.
pub(crate) fn calibration_wakes() -> u32 {
    CALIBRATION_WAKES.with(Cell::get)
}

/// Wakes the writer from a recording thread and holds how long that took ([`hold`]), as a
/// [`EventKind::BufferStall`] with [`crate::trace::BUFFER_WRITER_WOKEN`] that the analysis
/// removes like probe overhead. Calibration and the in-run references, medians over rounds,
/// leave out a cost this rare (one event in 32 Ki), yet waking a sleeping writer is a system
/// call of 0.1 to 5 µs on this project's VM (2 EPYC vCPUs under KVM), and up to a millisecond
/// where the woken writer takes the thread's CPU (that part is switched-out time, which the
/// analysis removes once).
#[cold]
#[inline(never)]
fn wake_writer_measured() {
    let began = clock::now();
    wake_writer();
    let took = clock::now().saturating_sub(began).min(u64::from(u32::MAX)) as u32;
    hold(Event::writer_woken(began, took));
}

/// Events a thread made while it stored another: they are stamped when they began, and the
/// event being stored, or events stored after it, may have been stamped earlier (counts of
/// unrecorded calls, an in-run reference, an event held before).
#[derive(Clone, Copy)]
struct Held {
    /// The writer's wake ([`wake_writer_measured`]).
    wake: Option<Event>,
    /// The wait for room ([`wait_for_room`]).
    stall: Option<Event>,
}

/// Holds `event` (a wake or a wait for room, whose `id` is its duration) until the thread's next
/// event stamped after it began ([`push_in_order`]), so that a thread's events stay in time
/// order. A second of a kind before the first is stored joins it: one event at the first's
/// time, lasting as long as both did.
fn hold(event: Event) {
    let mut held = HELD.get();
    let slot = if event.flags & crate::trace::BUFFER_WRITER_WOKEN != 0 {
        &mut held.wake
    } else {
        &mut held.stall
    };
    *slot = Some(match *slot {
        Some(first) => Event {
            id: first.id.saturating_add(event.id),
            ..first
        },
        None => event,
    });
    HELD.set(held);
    attention::set(attention::HELD);
}

/// Stores `event` after the events the thread holds that began by its stamp. Events held while
/// storing them begin after the stamp: they wait for a later event. An in-run reference's own
/// calls (every call recorded) store none: the writer leaves them out of the trace, and the
/// reference's event, stamped at its start, comes after them.
fn push_in_order(ring: &Ring, event: Event) {
    let reference_call = event.id == sampling::CALIBRATION_SITE
        && matches!(event.kind(), EventKind::Enter | EventKind::Exit);
    if !reference_call {
        store_held_before(ring, event.ts);
    }
    push(ring, event);
}

/// Stores the events the thread holds that began by `ts`, earliest first: the thread is about to
/// store an event stamped `ts`, and every event it stored since they began was stamped before
/// them.
fn store_held_before(ring: &Ring, ts: u64) {
    if attention::get() & attention::HELD == 0 {
        return;
    }
    let held = HELD.get();
    let due = |e: Option<Event>| e.filter(|e| e.ts <= ts);
    let (wake, stall) = (due(held.wake), due(held.stall));
    let rest = Held {
        wake: held.wake.filter(|_| wake.is_none()),
        stall: held.stall.filter(|_| stall.is_none()),
    };
    // Set first: storing them may hold new ones.
    HELD.set(rest);
    if rest.wake.is_none() && rest.stall.is_none() {
        attention::clear(attention::HELD);
    }
    let (first, second) = match (wake, stall) {
        (Some(w), Some(s)) if s.ts < w.ts => (Some(s), Some(w)),
        pair => pair,
    };
    for event in [first, second].into_iter().flatten() {
        push(ring, event);
    }
}

/// Stores an event that the caller measured (its own `ts`, taken before the work it
/// describes) on the calling thread's ring, after the counts of the calls that sampling did
/// not record: those ran before it, inside the frames it may change.
pub(crate) fn record_measured(event: Event) {
    with_current_ring(|ring| {
        write_pending_unrecorded(ring, event.ts);
        push_in_order(ring, event)
    });
}

/// Writes the counts of the calls that sampling did not record, if any, stamped `ts`: for a
/// thread about to sleep, which may write nothing more before the program ends.
pub(crate) fn flush_unrecorded(ts: u64) {
    if sampling::has_pending() {
        with_current_ring(|ring| write_pending_unrecorded(ring, ts));
    }
}

/// [`flush_unrecorded`] stamped now, the clock read only when there is something to write.
#[inline(always)]
pub(crate) fn flush_unrecorded_now() {
    if sampling::has_pending() {
        flush_unrecorded(clock::now());
    }
}

fn write_pending_unrecorded(ring: &Ring, ts: u64) {
    if sampling::has_pending() && !slice_child::active() {
        write_unrecorded(ring, ts);
    }
}

/// Writes the counts of the calls that sampling did not record, stamped `ts`, before the
/// thread's next event: they lie inside the call that was innermost while they ran, and the
/// time from `ts` to that next event is what writing them cost (the analysis removes it).
#[cold]
#[inline(never)]
pub(crate) fn write_unrecorded(ring: &Ring, ts: u64) {
    sampling::take_pending(|calls| {
        push_in_order(
            ring,
            Event::unrecorded(ts, calls.site, calls.count, calls.nested),
        );
    });
}

/// The writer fell behind: wait until it makes room, then store the event and hold a
/// [`EventKind::BufferStall`] that lets the analysis remove the wait like probe overhead (stamped
/// when the wait began: the events stored next may have been stamped before, see [`hold`]).
/// Only a writer that is gone (stopped, or failed to write) makes events lost, counted.
#[cold]
#[inline(never)]
fn wait_for_room(ring: &Ring, event: Event) {
    let stalled_at = clock::now();
    let give_up = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let writer_gone = RUNTIME
            .get()
            .is_none_or(|rt| rt.stop.load(Ordering::Acquire))
            || MODE.load(Ordering::Relaxed) != ON;
        if writer_gone || std::time::Instant::now() > give_up {
            ring.count_lost();
            return;
        }
        wake_writer();
        // A sleep, not a yield: a drain takes about a millisecond, and a yield loop would
        // flood the kernel's switch records (whose loss would leave times uncorrected).
        std::thread::sleep(Duration::from_micros(100));
        if ring.push(event) != Push::Full {
            break;
        }
    }
    let waited = clock::now().saturating_sub(stalled_at).min(u32::MAX as u64) as u32;
    hold(Event::new(stalled_at, EventKind::BufferStall, waited));
}

#[cold]
#[inline(never)]
fn stamp_cold(kind: EventKind, id: u32, aux: u16, flags: u8) -> Option<u64> {
    ensure_init();
    if MODE.load(Ordering::Relaxed) != ON || !attach_current_thread() {
        return None;
    }
    stamp(kind, id, aux, flags)
}

/// Whether the calling thread has a ring.
pub(crate) fn is_attached() -> bool {
    !RING.with(|r| r.get().is_null())
}

/// Gives the calling thread a ring and a thread record. Returns false during thread teardown.
pub(crate) fn attach_current_thread() -> bool {
    let Some(rt) = RUNTIME.get() else {
        return false;
    };
    if !RING.with(|r| r.get().is_null()) {
        return true;
    }
    let ring = Arc::new(Ring::new(current_tid()));
    // Before THREAD_EXIT: the sampling state is then freed after THREAD_EXIT has written its
    // last counts.
    sampling::attach_thread();
    let attached = THREAD_EXIT
        .try_with(|exit| {
            *exit.ring.borrow_mut() = Some(ring.clone());
        })
        .is_ok();
    if !attached {
        return false;
    }
    RING.with(|r| r.set(Arc::as_ptr(&ring)));
    queue_metadata(rt, Chunk::Thread(current_thread_record()));
    lock(&rt.rings).push(ring);
    slices::attach_thread();
    full_detail::attach_thread();
    true
}

/// Queues a site or thread record for the writer, which writes it before later events.
pub(crate) fn queue_metadata(rt: &Runtime, chunk: Chunk) {
    lock(&rt.metadata).push(chunk);
}

/// A poisoned lock only means a thread panicked while holding it; the data stays usable.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn current_thread_record() -> ThreadRecord {
    let current = std::thread::current();
    let (rayon_index, pool) = thread_context::worker();
    ThreadRecord {
        tid: current_tid(),
        rayon_index,
        pool,
        name: current.name().unwrap_or("").to_owned(),
    }
}

static SITE_LOCK: Mutex<()> = Mutex::new(());

/// Registers a site once and returns its id (never 0): gives `slot` its id and writes `site`
/// (its `id` set then) to the trace.
#[cold]
pub fn register_site(slot: &AtomicU32, mut site: SiteRecord) -> u32 {
    if slice_child::active() {
        // A slice is one thread, whose lock may have been held by another at the fork, and
        // has no writer to tell: the id is the child's alone (the parent may give it to
        // another site), and the slice does not measure it.
        let id = site_ids::take_site_id();
        slot.store(id, Ordering::Release);
        return id;
    }
    let _guard = lock(&SITE_LOCK);
    let existing = slot.load(Ordering::Acquire);
    if existing != 0 {
        return existing;
    }
    let id = site_ids::take_site_id();
    if site.kind == SiteKind::Probe {
        site_ids::note_probe_site();
    }
    if let Some(rt) = RUNTIME.get() {
        site.id = id;
        queue_metadata(rt, Chunk::Site(site));
    }
    slot.store(id, Ordering::Release);
    id
}

pub(crate) fn wake_writer() {
    if let Some(writer) = RUNTIME.get().and_then(|rt| rt.writer.get()) {
        writer.unpark();
    }
}

/// Writes the counts of the calls that sampling did not record on the calling thread, if any:
/// at exit, where the thread (the main thread) may be past its thread-local storage.
pub(crate) fn write_unrecorded_at_exit() {
    let ring = RING.try_with(|r| r.get()).unwrap_or(std::ptr::null());
    if !ring.is_null() {
        // SAFETY: as in `stamp`: the thread is alive and its ring with it.
        let ring = unsafe { &*ring };
        let now = clock::now();
        store_held_before(ring, now);
        if sampling::has_pending() {
            write_unrecorded(ring, now);
        }
    }
}

/// The calling thread's ring, for calibration.
pub(crate) fn with_current_ring<T>(f: impl FnOnce(&Ring) -> T) -> Option<T> {
    let ring = RING.with(|r| r.get());
    // SAFETY: see `record`.
    (!ring.is_null()).then(|| f(unsafe { &*ring }))
}
