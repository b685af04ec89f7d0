//! Slices (method 5 of the spec), the parent's side: `PARPROF_SLICES` turns them on.
//!
//! 1. First stage: every recording thread has a timer on its own CPU time that fires every
//!    `period_ns`; its signal handler only arms a checkpoint ([`attention::CHECKPOINT`]).
//! 2. Second stage: the thread's next recorded probe event runs [`checkpoint`] on its cold
//!    path: reap finished slices, then fork a slice of this thread if the program's load and
//!    the live slices are below their thresholds, else count why not.
//! 3. The child ([`crate::slice_child`]) measures every call on a CPU of its own and hands its
//!    results back through shared memory ([`crate::slice_slot`]).
//! 4. At exit the live slices are waited for (up to their wall limit), and the results are
//!    written ([`crate::slice_results`]).
//!
//! What a checkpoint costs (a scan of `/proc/self/task`, and a fork) lands inside the probed
//! call whose event ran it.

use crate::attention;
use crate::clock;
use crate::detail::{self, MAX_SITES};
use crate::perf_group;
use crate::site_ids;
use crate::slice_child;
use crate::slice_results::{
    self, Checkpoints, CounterColumn, DetailMode, Slice, SliceConfig, SliceEnd, SliceResults,
    UnavailableCounter,
};
use crate::slice_slot::{self, Slots};
use crate::slice_timer::{TIMER_CHECKPOINT, TIMER_SLICE_CPU, TIMER_SLICE_WALL, arm_timer};
use crate::thread_context;
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once, OnceLock};
use std::time::Duration;

/// Live slices at most, whatever `max` says: one slot each.
const MAX_SLOTS: u32 = 64;
/// How long past a slice's own wall limit the parent waits before killing it.
const KILL_GRACE_NS: u64 = 20_000_000;

/// `PARPROF_SLICES`, parsed.
#[derive(Debug, Clone, PartialEq)]
struct Config {
    period_ns: u64,
    length_ns: u64,
    load: f64,
    max: Option<u32>,
}

fn parse_config(text: &str) -> Result<Config, String> {
    let mut config = Config {
        period_ns: 20_000_000,
        length_ns: 10_000_000,
        load: 1.0,
        max: None,
    };
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("`{item}` is not key=value"))?;
        let bad = || format!("{key}: `{value}` is not a valid value");
        match key {
            "period_ns" => config.period_ns = value.parse().map_err(|_| bad())?,
            "length_ns" => config.length_ns = value.parse().map_err(|_| bad())?,
            "load" => config.load = value.parse().map_err(|_| bad())?,
            "max" => config.max = Some(value.parse().map_err(|_| bad())?),
            _ => {
                return Err(format!(
                    "unknown key `{key}` (known: period_ns, length_ns, load, max)"
                ));
            }
        }
    }
    if config.period_ns == 0 || config.length_ns == 0 {
        return Err("period_ns and length_ns must be above 0".into());
    }
    if !(config.load.is_finite() && config.load > 0.0) {
        return Err("load must be a number above 0".into());
    }
    if config.max == Some(0) {
        return Err("max must be at least 1".into());
    }
    Ok(config)
}

struct Slices {
    config: SliceConfig,
    /// A slice's wall-clock limit.
    wall_limit_ns: u64,
    columns: Vec<CounterColumn>,
    unavailable: Vec<UnavailableCounter>,
    usable: Vec<u32>,
    slots: Slots,
    signal: libc::c_int,
    dir: PathBuf,
    parent: Mutex<Parent>,
    /// Set at shutdown: no more forks.
    stopped: AtomicBool,
}

/// A slice running in a child process.
struct Live {
    pid: libc::pid_t,
    slot: usize,
    cpu: Option<u32>,
    tid: u32,
    start_ts: u64,
    forked_ns: u64,
    /// Site ids the child can measure: the end of its table, should it be killed before it
    /// says how much of the table it used.
    site_limit: u32,
    /// SIGKILL was sent: reaped once the kernel has ended it.
    killed: bool,
}

#[derive(Default)]
struct Parent {
    checkpoints: Checkpoints,
    live: Vec<Live>,
    done: Vec<Slice>,
    /// Slot `i` is used by a live slice.
    busy: Vec<bool>,
}

impl Slices {
    /// How long after its fork the parent kills a slice that has not ended itself: past the
    /// longest wall time the slice allows itself, and a grace.
    fn kill_after_ns(&self) -> u64 {
        self.wall_limit_ns * u64::from(slice_child::WALL_TICKS) + KILL_GRACE_NS
    }
}

static SLICES: OnceLock<Slices> = OnceLock::new();

thread_local! {
    /// This thread's first-stage timer (a kernel timer id), -1 when it has none. Const and
    /// without a destructor: the recorder's thread exit deletes the timer.
    static TIMER: Cell<isize> = const { Cell::new(-1) };
}

/// Reads `PARPROF_SLICES` (recording is on) and gets everything ready for the first fork.
/// Runs once, before the program's threads record.
pub(crate) fn init(dir: &Path) {
    let Some(text) = std::env::var_os(crate::slice_results::SLICES_ENV) else {
        return;
    };
    let config = match parse_config(&text.to_string_lossy()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("parprof: PARPROF_SLICES ignored, slices off: {e}");
            return;
        }
    };
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        eprintln!("parprof: slices are not supported on this architecture; slices off");
        return;
    }
    let usable = usable_cpus();
    let threads = scan_threads(0).map_or(1, |s| s.threads);
    let default_max = (usable.len() as u32).saturating_sub(threads).max(1);
    let slice_threshold = config.max.unwrap_or(default_max).min(MAX_SLOTS);
    let (columns, unavailable) = perf_group::available();
    if columns.is_empty() {
        eprintln!(
            "parprof: slices off: no counter opens ({})",
            unavailable
                .iter()
                .map(|u| format!("{}: {}", u.name, u.reason))
                .collect::<Vec<_>>()
                .join("; ")
        );
        return;
    }
    let slots = match Slots::map(slice_threshold as usize) {
        Ok(slots) => slots,
        Err(e) => {
            eprintln!("parprof: slices off: cannot map their shared memory: {e}");
            return;
        }
    };
    let signal = libc::SIGRTMAX() - 3;
    if let Err(e) = install_handler(signal) {
        eprintln!("parprof: slices off: cannot install the timer signal handler: {e}");
        return;
    }
    let _ = SLICES.set(Slices {
        config: SliceConfig {
            load_threshold: config.load,
            slice_threshold,
            length_ns: config.length_ns,
            period_ns: config.period_ns,
            usable_cpus: usable.len() as u32,
        },
        wall_limit_ns: (4 * config.length_ns).max(config.length_ns + 20_000_000),
        columns,
        unavailable,
        usable,
        parent: Mutex::new(Parent {
            busy: vec![false; slots.len()],
            ..Parent::default()
        }),
        slots,
        signal,
        dir: dir.to_owned(),
        stopped: AtomicBool::new(false),
    });
}

/// The CPUs this process may run on.
fn usable_cpus() -> Vec<u32> {
    // SAFETY: a zeroed cpu_set_t filled by the kernel.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .map(|cpu| cpu as u32)
            .collect()
    }
}

fn install_handler(signal: libc::c_int) -> std::io::Result<()> {
    // SAFETY: a plain sigaction with a zeroed, then filled, struct.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_timer as *const () as usize;
        // SA_RESTART: the program's blocking calls go on as if nothing happened.
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The runtime's timers' signal handler: only flags, or (a slice past its wall limit) the end
/// of the slice.
extern "C" fn on_timer(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes the siginfo of a timer signal, whose value we set.
    let which = unsafe { (*info).si_value().sival_ptr } as usize;
    match which {
        TIMER_CHECKPOINT => attention::set(attention::CHECKPOINT),
        TIMER_SLICE_CPU => slice_child::on_cpu_timer(),
        TIMER_SLICE_WALL => slice_child::on_wall_timer(),
        _ => {}
    }
}

/// A thread starts recording: give it its first-stage timer.
pub(crate) fn attach_thread() {
    let Some(s) = SLICES.get() else { return };
    if slice_child::active() || TIMER.with(Cell::get) >= 0 {
        return;
    }
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    match arm_timer(
        libc::CLOCK_THREAD_CPUTIME_ID,
        tid,
        s.signal,
        TIMER_CHECKPOINT,
        s.config.period_ns,
        true,
    ) {
        Ok(timer) => TIMER.with(|t| t.set(timer)),
        Err(e) => {
            static ONCE: Once = Once::new();
            ONCE.call_once(|| eprintln!("parprof: a thread has no slice timer: {e}"));
        }
    }
}

/// A recording thread exits: delete its timer.
pub(crate) fn detach_thread() {
    let timer = TIMER.try_with(|t| t.replace(-1)).unwrap_or(-1);
    if timer >= 0 {
        // SAFETY: a timer this thread created and nothing else deletes.
        unsafe { libc::timer_delete(timer as libc::timer_t) };
    }
}

/// The program's threads (parprof's writer excluded): how many, how many are running, and
/// the CPUs the running ones last ran on.
struct Scan {
    threads: u32,
    running: u32,
    busy_cpus: Vec<u32>,
}

fn scan_threads(writer: u32) -> Option<Scan> {
    let mut scan = Scan {
        threads: 0,
        running: 0,
        busy_cpus: Vec::new(),
    };
    for entry in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<u32>().ok())
        else {
            continue;
        };
        if tid == writer {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces and parentheses): state is
        // field 3, the CPU last run on field 39.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        scan.threads += 1;
        if fields.first() == Some(&"R") {
            scan.running += 1;
            if let Some(cpu) = fields.get(39 - 3).and_then(|c| c.parse().ok()) {
                scan.busy_cpus.push(cpu);
            }
        }
    }
    Some(scan)
}

/// The second stage, on the cold path of a recorded probe event of a thread whose timer
/// fired. In the child of a fork it returns with the child made a slice.
pub(crate) fn checkpoint() {
    let Some(s) = SLICES.get() else { return };
    if s.stopped.load(Ordering::Acquire) || slice_child::active() {
        return;
    }
    let began_ns = clock::monotonic_ns();
    let mut p = s.parent.lock().unwrap_or_else(|e| e.into_inner());
    decide(s, &mut p);
    if slice_child::active() {
        // The child's copy of the lock stays taken: the child never checkpoints, and
        // releasing it could wake (futex) nothing but costs a system call in the slice.
        std::mem::forget(p);
        return;
    }
    p.checkpoints.cost_ns += clock::monotonic_ns().saturating_sub(began_ns);
}

/// Reaps, ends overdue slices, and forks one if the slice threshold and the load allow.
fn decide(s: &Slices, p: &mut Parent) {
    // Before the program's first probe (or in a program with regions and rayon's events
    // alone) a slice would measure nothing: not worth a fork.
    if !site_ids::has_probe_sites() {
        return;
    }
    p.checkpoints.armed += 1;
    reap(s, p, &[]);
    if p.live.len() >= s.config.slice_threshold as usize {
        // The backstop: a child ends itself at its wall limit, unless something (a blocked
        // signal) keeps it from it.
        kill_overdue(s, p);
        if p.live.len() >= s.config.slice_threshold as usize {
            // Skipped before the load is measured: that costs a scan of every thread.
            p.checkpoints.skipped_slices += 1;
            return;
        }
    }
    let Some(scan) = scan_threads(thread_context::writer_tid()) else {
        p.checkpoints.skipped_load += 1;
        return;
    };
    let load = f64::from(scan.running) / s.usable.len().max(1) as f64;
    if load >= s.config.load_threshold {
        p.checkpoints.skipped_load += 1;
        return;
    }
    fork_slice(s, p, &scan.busy_cpus);
}

fn fork_slice(s: &Slices, p: &mut Parent, busy_cpus: &[u32]) {
    let Some(slot) = p.busy.iter().position(|b| !b) else {
        p.checkpoints.skipped_slices += 1;
        return;
    };
    let cpu = s
        .usable
        .iter()
        .copied()
        .find(|c| !busy_cpus.contains(c) && !p.live.iter().any(|l| l.cpu == Some(*c)));
    let site_limit = site_ids::next_site_id().min(MAX_SITES as u32);
    slice_slot::reset(s.slots.get(slot), site_limit);
    let start_ts = clock::now();
    // A fork with no exit signal (a "clone" child): the program's `wait()` and its SIGCHLD
    // handler never see a slice, which is reaped with `__WALL`. The C library's fork handlers
    // do not run: the child only runs this thread's code (see `slice_child`).
    // SAFETY: clone with no flags and no new stack is fork without its handlers; the child
    // continues on a copy of this stack.
    let forked = unsafe {
        libc::syscall(
            libc::SYS_clone,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    } as libc::pid_t;
    match forked {
        -1 => p.checkpoints.fork_failed += 1,
        0 => slice_child::start(slice_child::Setup {
            slot: s.slots.get(slot),
            cpu,
            columns: &s.columns,
            length_ns: s.config.length_ns,
            wall_limit_ns: s.wall_limit_ns,
            site_limit,
            signal: s.signal,
        }),
        pid => {
            p.checkpoints.forked += 1;
            p.busy[slot] = true;
            p.live.push(Live {
                pid,
                slot,
                cpu,
                // SAFETY: gettid has no preconditions.
                tid: unsafe { libc::gettid() } as u32,
                start_ts,
                forked_ns: clock::monotonic_ns(),
                site_limit,
                killed: false,
            });
        }
    }
}

/// Collects the slices that ended; waits for those in `wait_for` (just killed, or all at exit).
fn reap(s: &Slices, p: &mut Parent, wait_for: &[libc::pid_t]) {
    let mut i = 0;
    while i < p.live.len() {
        let pid = p.live[i].pid;
        // `__WALL`: a slice is a child with no exit signal, which plain waits skip.
        let flags = if wait_for.contains(&pid) {
            libc::__WALL
        } else {
            libc::WNOHANG | libc::__WALL
        };
        let mut status = 0;
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, flags) };
        // ECHILD: the program reaped it (a wait with `__WALL`); it is gone all the same.
        let gone = r == pid
            || (r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD));
        if gone {
            let live = p.live.swap_remove(i);
            p.busy[live.slot] = false;
            if let Some(slice) = collect(s, &live) {
                p.done.push(slice);
            }
        } else {
            i += 1;
        }
    }
}

/// The results of a gone child from its slot; `None` when it could not set itself up (said
/// once on stderr).
fn collect(s: &Slices, live: &Live) -> Option<Slice> {
    // SAFETY: the child is gone; nothing writes the slot.
    let slot = unsafe { &*s.slots.get(live.slot) };
    if slot.end.load(Ordering::Acquire) == slice_slot::END_SETUP_FAILED {
        static ONCE: Once = Once::new();
        let why = slice_child::describe_setup_error(slot.setup_error.load(Ordering::Relaxed));
        ONCE.call_once(|| eprintln!("parprof: a slice could not start: {why}"));
        return None;
    }
    let end = slice_slot::end_of(slot);
    let wall_ns = match end {
        SliceEnd::Killed => clock::monotonic_ns().saturating_sub(live.forked_ns),
        _ => slot.wall_ns.load(Ordering::Relaxed),
    };
    // A killed child's table holds the calls it completed (it zeroed the table when it
    // started, and counts a call once its deltas are added).
    let used = match end {
        SliceEnd::Killed => live.site_limit,
        _ => slot.used.load(Ordering::Relaxed),
    };
    Some(Slice {
        tid: live.tid,
        pid: Some(live.pid as u32),
        cpu: live.cpu,
        start_ts: live.start_ts,
        cpu_ns: slot.cpu_ns.load(Ordering::Relaxed),
        wall_ns,
        end,
        // SAFETY: the slot's table has MAX_SITES entries.
        sites: unsafe { detail::site_stats(slot.sites.as_ptr(), used, s.columns.len()) },
    })
}

/// Kills the slices past their wall limit and a grace, and reaps those already gone.
fn kill_overdue(s: &Slices, p: &mut Parent) {
    let now = clock::monotonic_ns();
    for live in p.live.iter_mut() {
        if !live.killed && now.saturating_sub(live.forked_ns) > s.kill_after_ns() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(live.pid, libc::SIGKILL) };
            live.killed = true;
        }
    }
    // Not waited for: a slice at SCHED_IDLE on a busy machine may take a while to run its
    // exit, and the program's thread must not wait for it; a later checkpoint reaps it.
    reap(s, p, &[]);
}

/// At process exit: waits for the live slices up to their longest wall time, kills the
/// others, and writes the results file.
pub(crate) fn shutdown() {
    let Some(s) = SLICES.get() else { return };
    if s.stopped.swap(true, Ordering::AcqRel) {
        return;
    }
    detach_thread();
    let mut p = s.parent.lock().unwrap_or_else(|e| e.into_inner());
    let deadline = p
        .live
        .iter()
        .map(|l| l.forked_ns + s.kill_after_ns())
        .max()
        .unwrap_or(0);
    loop {
        reap(s, &mut p, &[]);
        if p.live.is_empty() || clock::monotonic_ns() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let left: Vec<libc::pid_t> = p.live.iter().map(|l| l.pid).collect();
    for &pid in &left {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    reap(s, &mut p, &left);
    let results = SliceResults {
        mode: DetailMode::Slices,
        config: s.config.clone(),
        counters: s.columns.clone(),
        unavailable: s.unavailable.clone(),
        checkpoints: p.checkpoints.clone(),
        slices: std::mem::take(&mut p.done),
    };
    write_results(&s.dir, &results);
}

/// Writes `slices-<pid>.txt` into the output folder; a failure is said on stderr.
pub(crate) fn write_results(dir: &Path, results: &SliceResults) {
    let path = dir.join(slice_results::file_name(std::process::id()));
    let written = std::fs::File::create(&path).and_then(|mut f| {
        slice_results::write(&mut f, results)?;
        std::io::Write::flush(&mut f)
    });
    if let Err(e) = written {
        eprintln!("parprof: cannot write {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_parses_with_defaults_and_rejects_the_unknown() {
        assert_eq!(
            parse_config("period_ns=5000000,length_ns=1000000,load=0.5,max=3"),
            Ok(Config {
                period_ns: 5_000_000,
                length_ns: 1_000_000,
                load: 0.5,
                max: Some(3)
            })
        );
        assert_eq!(
            parse_config(""),
            Ok(Config {
                period_ns: 20_000_000,
                length_ns: 10_000_000,
                load: 1.0,
                max: None
            })
        );
        assert!(parse_config("period=1").is_err());
        assert!(parse_config("load=x").is_err());
        assert!(parse_config("load=-1").is_err());
        assert!(parse_config("max=0").is_err());
        assert!(parse_config("length_ns").is_err());
    }

    #[test]
    fn the_scan_sees_this_thread_running() {
        let scan = scan_threads(0).unwrap();
        assert!(scan.threads >= 1 && scan.running >= 1);
        assert!(!scan.busy_cpus.is_empty());
    }
}
