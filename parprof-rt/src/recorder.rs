//! The recording machinery: start-up from `PARPROF_OUT`, per-thread rings, the site and
//! thread registries, the background writer, and the flushes at thread and process exit.
//!
//! Memory held: one ring of [`ring::CAPACITY`] events (2 MiB) per live recording thread, plus
//! the writer's chunk buffer (at most one drain of every ring). When a ring is full because the
//! writer cannot keep up, further events of that thread are counted as lost and the count is
//! written into the trace.

use crate::attention;
use crate::calibrate;
use crate::clock;
use crate::full_detail;
use crate::lifecycle_totals;
use crate::ring::{self, Push, Ring};
use crate::sampling;
use crate::slice_child;
use crate::slices;
use crate::speed_reference;
use crate::trace::{
    self, Chunk, ChunkEncoder, End, Event, EventKind, Header, SiteKind, SiteRecord, ThreadRecord,
};
use std::cell::Cell;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once, OnceLock};
use std::thread::Thread;
use std::time::Duration;

const UNINIT: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

/// Whether probes record. Starts UNINIT, which takes the recording path, whose cold branch
/// initialises the runtime once and settles the mode; afterwards a disabled probe costs
/// this one load and branch.
static MODE: AtomicU8 = AtomicU8::new(UNINIT);

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

/// True when probes are recording into a trace.
pub fn is_enabled() -> bool {
    ensure_init();
    MODE.load(Ordering::Relaxed) == ON
}

struct Runtime {
    rings: Mutex<Vec<Arc<Ring>>>,
    /// Site and thread records waiting for the writer; written before any later events.
    metadata: Mutex<Vec<Chunk>>,
    writer: OnceLock<Thread>,
    stop: AtomicBool,
    finished: (Mutex<bool>, Condvar),
    file: Mutex<Option<File>>,
    events_written: AtomicU64,
    events_lost: AtomicU64,
    /// Completed drain-and-write passes of the writer, for `flush`.
    passes: AtomicU64,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
static INIT: Once = Once::new();

thread_local! {
    /// This thread's ring; null until the thread first records (and again once it exits).
    static RING: Cell<*const Ring> = const { Cell::new(std::ptr::null()) };
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
            if sampling::has_pending() {
                write_unrecorded(&ring, clock::now());
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
    push(
        ring,
        Event {
            ts,
            id,
            aux,
            kind: kind as u8,
            flags,
        },
    );
    ts
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
                push(ring, Event::new(began, EventKind::SliceCheckpoint, took));
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
    let ts = push_now(ring, kind, id, aux, flags);
    if detail && kind == EventKind::Enter {
        full_detail::event(kind, id);
    }
    Some(ts)
}

#[inline(always)]
fn push(ring: &Ring, event: Event) {
    match ring.push(event) {
        Push::Stored => {}
        Push::StoredWakeWriter => wake_writer(),
        Push::Full => wait_for_room(ring, event),
    }
}

/// Stores an event that the caller measured (its own `ts`, taken before the work it
/// describes) on the calling thread's ring, after the counts of the calls that sampling did
/// not record: those ran before it, inside the frames it may change.
pub(crate) fn record_measured(event: Event) {
    with_current_ring(|ring| {
        write_pending_unrecorded(ring, event.ts);
        push(ring, event)
    });
}

/// Writes the counts of the calls that sampling did not record, if any, stamped `ts`: for a
/// thread about to sleep, which may write nothing more before the program ends.
pub(crate) fn flush_unrecorded(ts: u64) {
    if sampling::has_pending() {
        with_current_ring(|ring| write_pending_unrecorded(ring, ts));
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
fn write_unrecorded(ring: &Ring, ts: u64) {
    sampling::take_pending(|calls| {
        push(
            ring,
            Event::unrecorded(ts, calls.site, calls.count, calls.nested),
        );
    });
}

/// The writer fell behind: wait until it makes room, then store the event and a
/// [`EventKind::BufferStall`] that lets the analysis remove the wait like probe overhead.
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
    let stall = Event::new(stalled_at, EventKind::BufferStall, waited);
    if ring.push(stall) == Push::Full {
        ring.count_lost();
    }
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

/// Gives the calling thread a ring and a thread record. Returns false during thread teardown.
fn attach_current_thread() -> bool {
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
fn queue_metadata(rt: &Runtime, chunk: Chunk) {
    lock(&rt.metadata).push(chunk);
}

/// A poisoned lock only means a thread panicked while holding it; the data stays usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn current_tid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

fn current_thread_record() -> ThreadRecord {
    let current = std::thread::current();
    let (rayon_index, pool) = crate::region::worker();
    ThreadRecord {
        tid: current_tid(),
        rayon_index,
        pool,
        name: current.name().unwrap_or("").to_owned(),
    }
}

/// Writes (again) the calling thread's record, e.g. once it is known to be a rayon worker, and
/// makes sure the thread has a ring even if it never records an event (idle workers).
pub fn register_current_thread() {
    ensure_init();
    if MODE.load(Ordering::Relaxed) != ON {
        return;
    }
    let already_attached = !RING.with(|r| r.get().is_null());
    if !attach_current_thread() {
        return;
    }
    // A newly attached thread's record already says all this.
    if already_attached && let Some(rt) = RUNTIME.get() {
        queue_metadata(rt, Chunk::Thread(current_thread_record()));
    }
}

static NEXT_SITE_ID: AtomicU32 = AtomicU32::new(1);
static SITE_LOCK: Mutex<()> = Mutex::new(());

/// The id the next registered site gets.
pub(crate) fn next_site_id() -> u32 {
    NEXT_SITE_ID.load(Ordering::Relaxed)
}

/// Whether a `#[probe]` site has been registered: slices measure probe calls only.
static PROBE_SITES: AtomicBool = AtomicBool::new(false);

pub(crate) fn has_probe_sites() -> bool {
    PROBE_SITES.load(Ordering::Relaxed)
}

/// Registers a site once and returns its id (never 0).
#[cold]
pub fn register_site(slot: &AtomicU32, kind: SiteKind, name: String, file: &str, line: u32) -> u32 {
    if slice_child::active() {
        // A slice is one thread, whose lock may have been held by another at the fork, and
        // has no writer to tell: the id is the child's alone (the parent may give it to
        // another site), and the slice does not measure it.
        let id = NEXT_SITE_ID.fetch_add(1, Ordering::Relaxed);
        slot.store(id, Ordering::Release);
        return id;
    }
    let _guard = lock(&SITE_LOCK);
    let existing = slot.load(Ordering::Acquire);
    if existing != 0 {
        return existing;
    }
    let id = NEXT_SITE_ID.fetch_add(1, Ordering::Relaxed);
    if kind == SiteKind::Probe {
        PROBE_SITES.store(true, Ordering::Relaxed);
    }
    if let Some(rt) = RUNTIME.get() {
        queue_metadata(
            rt,
            Chunk::Site(SiteRecord {
                id,
                kind,
                name,
                file: file.to_owned(),
                line,
            }),
        );
    }
    slot.store(id, Ordering::Release);
    id
}

fn wake_writer() {
    if let Some(writer) = RUNTIME.get().and_then(|rt| rt.writer.get()) {
        writer.unpark();
    }
}

/// Starts the runtime before `main`, so that its start-up (clock rate, calibration, writer)
/// does not land inside the first probed interval or parallel region. The first probe still
/// starts it where constructors do not run (e.g. a static library loaded late).
#[used]
#[unsafe(link_section = ".init_array")]
static START_BEFORE_MAIN: extern "C" fn() = {
    extern "C" fn start_before_main() {
        // Without the variable nothing is decided yet: a program (or test) may still set it
        // before its first probe, which then starts the runtime.
        if std::env::var_os("PARPROF_OUT").is_some() {
            ensure_init();
        }
    }
    start_before_main
};

/// Initialises the runtime once: off unless `PARPROF_OUT` names a folder.
pub fn ensure_init() {
    if MODE.load(Ordering::Acquire) != UNINIT {
        return;
    }
    INIT.call_once(|| {
        let mode = match std::env::var_os("PARPROF_OUT") {
            Some(dir) if !dir.is_empty() => match start(PathBuf::from(dir)) {
                Ok(()) => ON,
                Err(e) => {
                    eprintln!("parprof: recording disabled: {e}");
                    OFF
                }
            },
            _ => OFF,
        };
        MODE.store(mode, Ordering::Release);
    });
}

/// Name of the trace file a process writes into the output folder.
pub fn trace_file_name(pid: u32) -> String {
    format!("trace-{pid}.ppt")
}

fn start(dir: PathBuf) -> std::io::Result<()> {
    std::fs::create_dir_all(&dir)?;
    let full_detail = full_detail::requested();
    let pid = std::process::id();
    let path = dir.join(trace_file_name(pid));
    let mut file = File::create(&path).map_err(|e| {
        std::io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
    })?;
    let clock = clock::select();
    let start = clock::sync_point();

    let rt = RUNTIME.get_or_init(|| Runtime {
        rings: Mutex::new(Vec::new()),
        metadata: Mutex::new(Vec::new()),
        writer: OnceLock::new(),
        stop: AtomicBool::new(false),
        finished: (Mutex::new(false), Condvar::new()),
        file: Mutex::new(None),
        events_written: AtomicU64::new(0),
        events_lost: AtomicU64::new(0),
        passes: AtomicU64::new(0),
    });
    // Calibration records through the real path, so it needs the mode on and a ring;
    // its events are discarded before the writer starts.
    MODE.store(ON, Ordering::Release);
    attach_current_thread();
    let every_call = sampling::every_call_requested(full_detail);
    sampling::set_every_call(every_call);
    let table = calibrate::measure(every_call);
    MODE.store(UNINIT, Ordering::Release);
    // Measured across calibration, which lasts longer than the 1 ms that pins the rate to
    // ~2e-5: it spares a millisecond of busy waiting at every start. Only a cut trace (no end
    // sync point) and the hot-site and reference intervals below rely on it.
    let ticks_per_ns = clock::ticks_per_ns_since(start, 1_000_000);
    // After calibration, which must record every call of its pseudo-site.
    sampling::configure(ticks_per_ns, every_call);
    speed_reference::configure(ticks_per_ns, every_call);
    lifecycle_totals::configure(ticks_per_ns);
    // After calibration too, whose events are not the program's. This thread attached for
    // calibration, before either could give it anything.
    if full_detail {
        if std::env::var_os(crate::slice_results::SLICES_ENV).is_some() {
            eprintln!("parprof: PARPROF_SLICES ignored: PARPROF_DETAIL=full measures every call");
        }
        full_detail::init(&dir);
        full_detail::attach_thread();
    } else {
        slices::init(&dir);
        slices::attach_thread();
    }

    let mut enc = ChunkEncoder::new();
    enc.preamble();
    enc.chunk(&Chunk::Header(Header {
        pid,
        clock,
        ticks_per_ns,
        start,
        bare_read_ticks: table.bare_read_pair_ticks,
        calibration: table.rows,
        program: std::env::args().next().unwrap_or_default(),
    }));
    enc.flush_to(&mut file)?;
    *lock(&rt.file) = Some(file);

    let writer = std::thread::Builder::new()
        .name(trace::WRITER_THREAD_NAME.into())
        .spawn(writer_loop)?;
    let _ = rt.writer.set(writer.thread().clone());
    // SAFETY: registering plain extern "C" fns with no captured state.
    unsafe {
        libc::atexit(flush_at_exit);
        libc::pthread_atfork(None, None, Some(stop_in_forked_child));
    }
    crash_flush::install();
    #[cfg(panic = "abort")]
    {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            shutdown();
        }));
    }
    Ok(())
}

/// A program that dies of a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) runs no
/// exit handler, and its last few milliseconds of events would still sit in the rings. The
/// handler lets the writer (a normal thread) make one more pass, bounded in time, then hands
/// the signal to the handler that was there before (Rust's stack-overflow report) or to the
/// default action.
mod crash_flush {
    use super::RUNTIME;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, Ordering};

    const SIGNALS: [libc::c_int; 5] = [
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGILL,
        libc::SIGFPE,
        libc::SIGABRT,
    ];
    static PREVIOUS: OnceLock<Vec<(libc::c_int, libc::sigaction)>> = OnceLock::new();
    static FLUSHING: AtomicBool = AtomicBool::new(false);

    pub fn install() {
        let mut previous = Vec::new();
        for sig in SIGNALS {
            // SAFETY: plain sigaction calls with zeroed, then filled, structs.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_fatal_signal as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &action, &mut old) == 0 {
                    previous.push((sig, old));
                }
            }
        }
        let _ = PREVIOUS.set(previous);
    }

    extern "C" fn on_fatal_signal(
        sig: libc::c_int,
        info: *mut libc::siginfo_t,
        context: *mut libc::c_void,
    ) {
        // A slice has no writer to wait for.
        if !FLUSHING.swap(true, Ordering::AcqRel)
            && !crate::slice_child::active()
            && let Some(rt) = RUNTIME.get()
        {
            let target = rt.passes.load(Ordering::Acquire) + 2;
            for _ in 0..200 {
                if rt.passes.load(Ordering::Acquire) >= target {
                    break;
                }
                if let Some(writer) = rt.writer.get() {
                    writer.unpark();
                }
                let pause = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 1_000_000,
                };
                // SAFETY: nanosleep is async-signal-safe.
                unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
            }
        }
        let previous = PREVIOUS
            .get()
            .and_then(|p| p.iter().find(|(s, _)| *s == sig))
            .map(|(_, a)| *a);
        // SAFETY: restores and re-raises, or calls the handler installed before ours with the
        // arguments its flags ask for.
        unsafe {
            match previous {
                Some(old)
                    if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN =>
                {
                    libc::sigaction(sig, &old, std::ptr::null_mut());
                    if old.sa_flags & libc::SA_SIGINFO != 0 {
                        let handler: extern "C" fn(
                            libc::c_int,
                            *mut libc::siginfo_t,
                            *mut libc::c_void,
                        ) = std::mem::transmute(old.sa_sigaction);
                        handler(sig, info, context);
                    } else {
                        let handler: extern "C" fn(libc::c_int) =
                            std::mem::transmute(old.sa_sigaction);
                        handler(sig);
                    }
                }
                _ => {
                    libc::signal(sig, libc::SIG_DFL);
                    libc::raise(sig);
                }
            }
        }
    }
}

extern "C" fn flush_at_exit() {
    shutdown();
}

/// A child of `fork()` has no writer thread, and its copy of the trace file is the parent's:
/// recording stops in it, so its probes cost one branch and its exit does not wait for a
/// writer that does not exist. (Slices are forked without the fork handlers: see `slices`.)
extern "C" fn stop_in_forked_child() {
    MODE.store(OFF, Ordering::Release);
}

/// Stops recording, writes everything buffered and the end chunk. Idempotent; waits at most
/// a few seconds for the writer.
pub fn shutdown() {
    if slice_child::active() {
        // The program ends inside a slice: the slice is complete; the parent's trace is not
        // this process's to write.
        slice_child::finish_completed();
    }
    let Some(rt) = RUNTIME.get() else { return };
    if MODE.load(Ordering::Acquire) != ON {
        return;
    }
    slices::shutdown();
    full_detail::shutdown();
    // The calling thread (at exit, the main thread) may hold counts of unrecorded calls.
    let ring = RING.try_with(|r| r.get()).unwrap_or(std::ptr::null());
    if !ring.is_null() && sampling::has_pending() {
        // SAFETY: as in `stamp`: the thread is alive and its ring with it.
        write_unrecorded(unsafe { &*ring }, clock::now());
    }
    rt.stop.store(true, Ordering::Release);
    wake_writer();
    let (finished, cvar) = &rt.finished;
    let done = lock(finished);
    let _ = cvar.wait_timeout_while(done, Duration::from_secs(5), |done| !*done);
}

/// Asks the writer to drain every buffer now and waits until what was recorded before the
/// call is in the file (at most a few seconds).
pub fn flush() {
    let Some(rt) = RUNTIME.get() else { return };
    if slice_child::active() {
        return;
    }
    // A pass that started before this call may have missed the latest events; the second
    // pass from now on has started after it.
    let target = rt.passes.load(Ordering::Acquire) + 2;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while rt.passes.load(Ordering::Acquire) < target && std::time::Instant::now() < deadline {
        if rt.stop.load(Ordering::Acquire) {
            return;
        }
        wake_writer();
        std::thread::sleep(Duration::from_micros(100));
    }
}

static WRITER_TID: AtomicU32 = AtomicU32::new(0);

/// The writer thread's id (0 before it starts): not a program thread.
pub(crate) fn writer_tid() -> u32 {
    WRITER_TID.load(Ordering::Relaxed)
}

fn writer_loop() {
    WRITER_TID.store(current_tid(), Ordering::Relaxed);
    let rt = RUNTIME
        .get()
        .expect("runtime initialised before the writer starts");
    let mut enc = ChunkEncoder::new();
    let mut snapshot_at = std::time::Instant::now() + lifecycle_totals::SNAPSHOT_EVERY;
    loop {
        let stopping = rt.stop.load(Ordering::Acquire);
        if std::time::Instant::now() >= snapshot_at {
            lifecycle_totals::snapshot_changed(|chunk| enc.chunk(&chunk));
            snapshot_at += lifecycle_totals::SNAPSHOT_EVERY;
        }
        drain_once(rt, &mut enc);
        if stopping {
            break;
        }
        std::thread::park_timeout(Duration::from_millis(2));
    }
    MODE.store(OFF, Ordering::Release);
    lifecycle_totals::snapshot_changed(|chunk| enc.chunk(&chunk));
    drain_once(rt, &mut enc);
    enc.chunk(&Chunk::End(End {
        end: clock::sync_point(),
        events_written: rt.events_written.load(Ordering::Relaxed),
        events_lost: rt.events_lost.load(Ordering::Relaxed),
    }));
    write_out(rt, &mut enc);
    if let Some(file) = lock(&rt.file).as_mut() {
        let _ = file.flush();
    }
    let (finished, cvar) = &rt.finished;
    *lock(finished) = true;
    cvar.notify_all();
}

fn drain_once(rt: &Runtime, enc: &mut ChunkEncoder) {
    for chunk in std::mem::take(&mut *lock(&rt.metadata)) {
        enc.chunk(&chunk);
    }
    let rings: Vec<Arc<Ring>> = lock(&rt.rings).clone();
    for ring in &rings {
        let closed = ring.is_closed();
        let n = ring.drain(|a, b| enc.events(ring.tid, a, b));
        rt.events_written.fetch_add(n as u64, Ordering::Relaxed);
        let lost = ring.take_lost();
        if lost > 0 {
            rt.events_lost.fetch_add(lost, Ordering::Relaxed);
            enc.chunk(&Chunk::Lost {
                tid: ring.tid,
                count: lost,
            });
        }
        if closed {
            lock(&rt.rings).retain(|r| !Arc::ptr_eq(r, ring));
        }
    }
    write_out(rt, enc);
    rt.passes.fetch_add(1, Ordering::Release);
}

fn write_out(rt: &Runtime, enc: &mut ChunkEncoder) {
    if enc.is_empty() {
        return;
    }
    let mut file = lock(&rt.file);
    if let Some(f) = file.as_mut()
        && let Err(e) = enc.flush_to(f)
    {
        eprintln!("parprof: cannot write the trace ({e}); recording stops");
        MODE.store(OFF, Ordering::Release);
        *file = None;
    }
}

/// The calling thread's ring, for calibration.
pub(crate) fn with_current_ring<T>(f: impl FnOnce(&Ring) -> T) -> Option<T> {
    let ring = RING.with(|r| r.get());
    // SAFETY: see `record`.
    (!ring.is_null()).then(|| f(unsafe { &*ring }))
}
