//! Start-up and shutdown of the recording: from `PARPROF_OUT`, calibration, the
//! configuration of sampling, speed references, lifecycle totals and slices (or full detail),
//! the trace's header, the background writer and the flushes at process exit. It calls
//! outward, into the recording core ([`crate::recorder`]) and the modules it configures; none
//! calls it back (the core reaches [`ensure_init`] through the function registered with
//! `recorder::set_start`).

use crate::calibrate;
use crate::clock;
use crate::crash_flush;
use crate::full_detail;
use crate::hook_cost;
use crate::lifecycle_totals;
use crate::recorder::{
    self, MODE, OFF, ON, RUNTIME, Runtime, UNINIT, attach_current_thread, current_thread_record,
    lock, queue_metadata, wake_writer,
};
use crate::ring::Ring;
use crate::sampling;
use crate::slice_child;
use crate::slices;
use crate::speed_reference;
use crate::state_clock;
use crate::thread_context;
use crate::trace::{self, Chunk, ChunkEncoder, End, EventKind, Header};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once, OnceLock};
use std::time::Duration;

static INIT: Once = Once::new();

/// True when probes are recording into a trace.
pub fn is_enabled() -> bool {
    ensure_init();
    MODE.load(Ordering::Relaxed) == ON
}

/// Writes (again) the calling thread's record, e.g. once it is known to be a rayon worker, and
/// makes sure the thread has a ring even if it never records an event (idle workers).
pub fn register_current_thread() {
    ensure_init();
    if MODE.load(Ordering::Relaxed) != ON {
        return;
    }
    let already_attached = recorder::is_attached();
    if !attach_current_thread() {
        return;
    }
    // A newly attached thread's record already says all this.
    if already_attached && let Some(rt) = RUNTIME.get() {
        queue_metadata(rt, Chunk::Thread(current_thread_record()));
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
        recorder::set_start(ensure_init);
        if std::env::var_os("PARPROF_OUT").is_some() {
            ensure_init();
        }
    }
    start_before_main
};

/// Initialises the runtime once: off unless `PARPROF_OUT` names a folder.
pub fn ensure_init() {
    recorder::set_start(ensure_init);
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
///
/// ```
/// assert_eq!(parprof_rt::trace_file_name(4242), "trace-4242.ppt");
/// ```
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
    // In-run references of the probes' in-place cost, but not with full detail, whose every
    // event reads counters: a reference there would cost as much as the calls it follows.
    let follow = !full_detail;
    sampling::follow_every_call(follow);
    let table = calibrate::measure(every_call);
    MODE.store(UNINIT, Ordering::Release);
    // Measured across calibration, which lasts longer than the 1 ms that pins the rate to
    // ~2e-5: it spares a millisecond of busy waiting at every start. Only a cut trace (no end
    // sync point) and the hot-site and reference intervals below rely on it.
    let ticks_per_ns = clock::ticks_per_ns_since(start, 1_000_000);
    // After calibration, which must record every call of its pseudo-site.
    sampling::configure(ticks_per_ns, every_call);
    speed_reference::configure(ticks_per_ns, follow);
    lifecycle_totals::configure(ticks_per_ns);
    // With the clocks configured (a timed stretch's length leaves out the clock read).
    MODE.store(ON, Ordering::Release);
    let hook_costs = hook_cost::measure(ticks_per_ns);
    MODE.store(UNINIT, Ordering::Release);
    start_detail(&dir, full_detail);

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
    enc.chunk(&Chunk::HookCosts(hook_costs));
    enc.flush_to(&mut file)?;
    *lock(&rt.file) = Some(file);

    let writer = std::thread::Builder::new()
        .name(trace::WRITER_THREAD_NAME.into())
        .spawn(writer_loop)?;
    let _ = rt.writer.set(writer.thread().clone());
    install_exit_handlers();
    Ok(())
}

/// Starts the per-call detail asked for: full detail, or slices. After calibration, whose
/// events are not the program's; the calling thread attached for calibration, before either
/// could give it anything.
fn start_detail(dir: &Path, full_detail: bool) {
    if full_detail {
        if std::env::var_os(crate::slice_results::SLICES_ENV).is_some() {
            eprintln!("parprof: PARPROF_SLICES ignored: PARPROF_DETAIL=full measures every call");
        }
        full_detail::init(dir);
        full_detail::attach_thread();
    } else {
        slices::init(dir);
        slices::attach_thread();
    }
}

/// Flushes the trace at `exit`, after a fatal signal and (with `panic = "abort"`) at a panic;
/// stops recording in the child of a `fork()`.
fn install_exit_handlers() {
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
    recorder::write_unrecorded_at_exit();
    rt.stop.store(true, Ordering::Release);
    wake_writer();
    let (finished, cvar) = &rt.finished;
    let done = lock(finished);
    let _ = cvar.wait_timeout_while(done, Duration::from_secs(5), |done| !*done);
}

/// Asks the writer to drain every buffer now and waits until what was recorded before the
/// call is in the file (at most a few seconds). Without recording it returns at once.
///
/// ```
/// // Before another process reads the trace while this one goes on (a long-running server):
/// parprof_rt::flush();
/// ```
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

fn writer_loop() {
    thread_context::set_writer_tid();
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
        std::thread::park_timeout(state_clock::mark());
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
        // An in-run reference's recorded calls (every call recorded) are calibration's, not
        // the program's: their time is in the reference's own event.
        let mut kept = 0;
        ring.drain(|a, b| {
            kept = enc.events_kept(ring.tid, a, b, |e| {
                e.id != sampling::CALIBRATION_SITE
                    || !matches!(e.kind(), EventKind::Enter | EventKind::Exit)
            });
        });
        rt.events_written.fetch_add(kept as u64, Ordering::Relaxed);
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
