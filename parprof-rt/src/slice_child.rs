//! A slice, in the forked child: the thread that forked (the only one there) continues the
//! program with every probe event measured ([`crate::detail`]), on a CPU of its own, for a
//! bounded CPU time, under a seccomp filter that keeps its effects inside itself.
//!
//! The child never touches the trace: the writer thread does not exist here, and the
//! recorder's locks may have been held by other threads at the fork. It ends by writing its
//! slot ([`crate::slice_slot`]) and calling `_exit`: no destructors, no `atexit` handlers.
//!
//! Ends: its CPU time is used (a CPU-time timer sets [`OVER`], the next probe event ends it);
//! its wall time is used (a wall-clock timer ends it from the handler: `blocked` if it used
//! less than half its CPU time, else `timeout`); a system call the filter traps that is not a
//! write (`forbidden_syscall`). Writes are suppressed: the handler of the trap returns the byte
//! count, so the program goes on as if its output had been written.
//!
//! A slice that is runnable but does not get a CPU (a loaded machine) is neither blocked nor
//! slow: when the wall limit passes while it spent most of the time running or waiting for a
//! CPU (its run delay, from `/proc/thread-self/schedstat`), it gets the limit again, up to
//! [`WALL_TICKS`] times.

use crate::attention;
use crate::clock;
use crate::detail::{MAX_SITES, Measure};
use crate::perf_group::{Group, MAX_COUNTERS, read_group};
use crate::sampling;
use crate::slice_results::CounterColumn;
use crate::slice_shared_memory;
use crate::slice_slot::{self, Slot};
use crate::trace::EventKind;
use std::cell::UnsafeCell;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering, compiler_fence,
};

/// A slice's wall-clock time is at most this many wall limits.
pub(crate) const WALL_TICKS: u32 = 4;

/// This process is a slice.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The slice's CPU time is used: the next probe event ends it.
static OVER: AtomicBool = AtomicBool::new(false);
/// The wall-clock limit passed while the measurement was being updated: end right after.
static WALL_DUE: AtomicBool = AtomicBool::new(false);
/// The measurement is being updated: a handler that would end the slice defers to the
/// updating code, so that no call is half counted.
static UPDATING: AtomicBool = AtomicBool::new(false);
/// Wall limits passed so far.
static WALL_TICKS_PASSED: AtomicU32 = AtomicU32::new(0);
/// What the handlers read without borrowing [`CHILD`] (which the probe events may be
/// updating): the counter leader and the number of counters, the task-clock and the run
/// delay at the start, `/proc/thread-self/schedstat` (-1: none).
static LEADER: AtomicI32 = AtomicI32::new(-1);
static COUNTERS: AtomicUsize = AtomicUsize::new(0);
static START_TASK_CLOCK: AtomicU64 = AtomicU64::new(0);
static START_RUN_DELAY: AtomicU64 = AtomicU64::new(0);
static SCHEDSTAT: AtomicI32 = AtomicI32::new(-1);
static START_WALL_NS: AtomicU64 = AtomicU64::new(0);
static LENGTH_NS: AtomicU64 = AtomicU64::new(0);

struct Child {
    measure: Measure,
    slot: *mut Slot,
}

/// The child's state: written once before the timers are armed, then reached only by the one
/// thread, from its probe events or from its signal handlers (which defer while `UPDATING`).
struct ChildCell(UnsafeCell<Option<Child>>);
// SAFETY: see above: one thread, handlers excluded while it updates.
unsafe impl Sync for ChildCell {}
static CHILD: ChildCell = ChildCell(UnsafeCell::new(None));

/// Whether this process is a slice.
#[inline]
pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// What the parent hands to the child.
pub(crate) struct Setup<'a> {
    pub(crate) slot: *mut Slot,
    pub(crate) cpu: Option<u32>,
    pub(crate) columns: &'a [CounterColumn],
    pub(crate) length_ns: u64,
    pub(crate) wall_limit_ns: u64,
    /// Sites the parent had registered at the fork are below this.
    pub(crate) site_limit: u32,
    pub(crate) signal: libc::c_int,
}

/// Set-up steps, for the parent's message when one fails.
const STEP_COUNTERS: u64 = 1;
const STEP_TIMERS: u64 = 2;
const STEP_SIGSYS: u64 = 3;
const STEP_FILTER: u64 = 4;
const STEP_SHARED: u64 = 5;

/// Describes a failed set-up as the slot holds it.
pub(crate) fn describe_setup_error(code: u64) -> String {
    let step = match code >> 32 {
        STEP_COUNTERS => "opening the counters",
        STEP_TIMERS => "creating the timers",
        STEP_SIGSYS => "installing the SIGSYS handler",
        STEP_FILTER => "installing the seccomp filter",
        STEP_SHARED => "making the program's shared memory read-only in the slice",
        _ => "setting up",
    };
    let errno = (code & 0xFFFF_FFFF) as i32;
    format!("{step}: {}", std::io::Error::from_raw_os_error(errno))
}

/// Turns the freshly forked child into a slice; returns to continue the program in it.
pub(crate) fn start(setup: Setup) {
    ACTIVE.store(true, Ordering::Relaxed);
    sampling::record_every_call();
    attention::set(attention::DETAIL);
    if let Some(cpu) = setup.cpu {
        pin(cpu);
    }
    run_only_when_idle();
    // The slot's pages are not mapped in the child yet (the kernel does not copy the page
    // tables of shared mappings at fork): touching them now keeps those page faults out of
    // the calls measured.
    // SAFETY: the parent handed this slot to this child alone.
    let slot = unsafe { &mut *setup.slot };
    for acc in slot.sites.iter_mut() {
        *acc = Default::default();
    }
    let fail = |step: u64, e: std::io::Error| -> ! {
        let code = (step << 32) | u64::from(e.raw_os_error().unwrap_or(0) as u32);
        slot.setup_error.store(code, Ordering::Relaxed);
        slot.end
            .store(slice_slot::END_SETUP_FAILED, Ordering::Release);
        // SAFETY: _exit ends the process without running anything of the program.
        unsafe { libc::_exit(0) }
    };
    // Before the counters, whose own shared mappings the slice needs.
    if let Err(e) = slice_shared_memory::make_read_only(setup.slot as usize) {
        fail(STEP_SHARED, e);
    }
    let group = match Group::open(setup.columns) {
        Ok(group) => group,
        Err(e) => fail(STEP_COUNTERS, e),
    };
    let leader = group.leader();
    // SAFETY: the table is the slot's, `MAX_SITES` entries, this child's alone until it ends.
    let measure = unsafe { Measure::new(group, slot.sites.as_mut_ptr(), setup.site_limit) };
    let Some(start_values) = measure.read_now() else {
        fail(STEP_COUNTERS, std::io::Error::last_os_error())
    };
    // SAFETY: a plain open of a NUL-terminated path.
    let schedstat = unsafe {
        libc::open(
            c"/proc/thread-self/schedstat".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    LEADER.store(leader, Ordering::Relaxed);
    COUNTERS.store(measure.group.len(), Ordering::Relaxed);
    START_TASK_CLOCK.store(start_values[0], Ordering::Relaxed);
    SCHEDSTAT.store(schedstat, Ordering::Relaxed);
    START_RUN_DELAY.store(run_delay(), Ordering::Relaxed);
    START_WALL_NS.store(clock::monotonic_ns(), Ordering::Relaxed);
    LENGTH_NS.store(setup.length_ns, Ordering::Relaxed);
    // SAFETY: no handler of this child reads the cell before the timers below are armed.
    unsafe {
        *CHILD.0.get() = Some(Child {
            measure,
            slot: setup.slot,
        });
    }
    if let Err(e) = sigsys::install() {
        fail(STEP_SIGSYS, e);
    }
    let tid = unsafe { libc::gettid() };
    let timers = crate::slices::arm_timer(
        libc::CLOCK_PROCESS_CPUTIME_ID,
        tid,
        setup.signal,
        crate::slices::TIMER_SLICE_CPU,
        setup.length_ns,
        false,
    )
    .and_then(|_| {
        crate::slices::arm_timer(
            libc::CLOCK_MONOTONIC,
            tid,
            setup.signal,
            crate::slices::TIMER_SLICE_WALL,
            setup.wall_limit_ns,
            true,
        )
    });
    if let Err(e) = timers {
        fail(STEP_TIMERS, e);
    }
    if let Err(e) = sigsys::filter(leader, schedstat) {
        fail(STEP_FILTER, e);
    }
}

/// Slices run on otherwise idle CPUs: at `SCHED_IDLE` a slice never takes a CPU from the
/// program (nor from anything else). Where no CPU is idle it waits, and the wall-clock limit
/// (stretched while it only waits for a CPU) ends it as timed out.
fn run_only_when_idle() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: lowering one's own policy needs no privilege; the call only reads `param`.
    // Left as it is if refused: the slice then competes like any process of the user.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
}

fn pin(cpu: u32) {
    // SAFETY: a zeroed cpu_set_t with one CPU set; sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        // Unpinned if it fails: the slice still measures, on a shared CPU.
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// A probe event in the slice.
#[inline]
pub(crate) fn event(kind: EventKind, site: u32) {
    UPDATING.store(true, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    // SAFETY: set in `start` before any event; handlers stay away while UPDATING.
    if let Some(child) = unsafe { (*CHILD.0.get()).as_mut() } {
        child.measure.event(kind, site);
    }
    compiler_fence(Ordering::SeqCst);
    UPDATING.store(false, Ordering::Relaxed);
    if WALL_DUE.load(Ordering::Relaxed) {
        finish_wall();
    }
    if OVER.load(Ordering::Relaxed) {
        finish(slice_slot::END_COMPLETED, 0);
    }
}

/// The slice's CPU-time timer fired (signal handler).
pub(crate) fn on_cpu_timer() {
    OVER.store(true, Ordering::Relaxed);
}

/// The slice's wall-clock timer fired (signal handler, every wall limit): end now, unless the
/// slice was mostly runnable and has limits left, or the measurement is being updated (which
/// then ends it).
pub(crate) fn on_wall_timer() {
    let ticks = WALL_TICKS_PASSED.load(Ordering::Relaxed) + 1;
    WALL_TICKS_PASSED.store(ticks, Ordering::Relaxed);
    let elapsed = clock::monotonic_ns().saturating_sub(START_WALL_NS.load(Ordering::Relaxed));
    let wanted_cpu =
        cpu_used() + run_delay().saturating_sub(START_RUN_DELAY.load(Ordering::Relaxed));
    if ticks < WALL_TICKS && wanted_cpu >= elapsed / 2 {
        return;
    }
    if UPDATING.load(Ordering::Relaxed) {
        WALL_DUE.store(true, Ordering::Relaxed);
    } else {
        finish_wall();
    }
}

/// The run delay (ns spent runnable, waiting for a CPU) in `schedstat`'s second field; 0
/// when there is none. Async-signal-safe: one `pread`, no allocation.
fn run_delay() -> u64 {
    let schedstat = SCHEDSTAT.load(Ordering::Relaxed);
    if schedstat < 0 {
        return 0;
    }
    let mut buf = [0u8; 64];
    // SAFETY: reading into a buffer of the stated size.
    let n = unsafe { libc::pread(schedstat, buf.as_mut_ptr().cast(), buf.len(), 0) };
    let text = &buf[..n.max(0) as usize];
    text.split(|&b| b == b' ').nth(1).map_or(0, |field| {
        field
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .fold(0u64, |v, &d| {
                v.saturating_mul(10).saturating_add(u64::from(d - b'0'))
            })
    })
}

fn finish_wall() -> ! {
    let end = if cpu_used() < LENGTH_NS.load(Ordering::Relaxed) / 2 {
        slice_slot::END_BLOCKED
    } else {
        slice_slot::END_TIMEOUT
    };
    finish(end, 0)
}

/// The slice's task-clock so far (async-signal-safe).
fn cpu_used() -> u64 {
    let mut values = [0; MAX_COUNTERS];
    let leader = LEADER.load(Ordering::Relaxed);
    if leader < 0 || !read_group(leader, COUNTERS.load(Ordering::Relaxed), &mut values) {
        return 0;
    }
    values[0].saturating_sub(START_TASK_CLOCK.load(Ordering::Relaxed))
}

/// The program ends inside the slice (`exit`, or its thread returns): the slice is complete.
pub(crate) fn finish_completed() -> ! {
    finish(slice_slot::END_COMPLETED, 0)
}

/// Writes the slot and ends the process. Async-signal-safe: reads, stores and `_exit`.
fn finish(end: u32, syscall: i64) -> ! {
    // SAFETY: the measurement is not being updated (callers ensure it), and the slot is this
    // child's.
    if let Some(child) = unsafe { (*CHILD.0.get()).as_ref() } {
        let slot = unsafe { &*child.slot };
        slot.cpu_ns.store(cpu_used(), Ordering::Relaxed);
        slot.wall_ns.store(
            clock::monotonic_ns().saturating_sub(START_WALL_NS.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
        slot.used.store(
            child.measure.used().min(MAX_SITES as u32),
            Ordering::Relaxed,
        );
        slot.syscall.store(syscall, Ordering::Relaxed);
        slot.end.store(end, Ordering::Release);
    }
    // SAFETY: ends the process without running any of its code.
    unsafe { libc::_exit(0) }
}

/// The seccomp filter and its SIGSYS handler.
mod sigsys {
    use super::finish;
    use crate::{slice_shared_memory, slice_slot};
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    use std::collections::BTreeMap;
    use std::io;
    use std::os::fd::RawFd;

    /// System calls a slice makes freely: memory, waiting, time, signals' return, its own
    /// identity and usage (programs count their own page faults and CPU time), ending.
    /// The first argument the kernel ignores (`mprotect`'s fourth, `pkey_mprotect`'s fifth)
    /// of a call the handler checked.
    const CHECKED: u64 = 0x7061_7270_726f_6621;

    /// Where a checked call carries [`CHECKED`].
    fn checked_arg(nr: i64) -> u8 {
        if nr == libc::SYS_pkey_mprotect { 4 } else { 3 }
    }

    /// `mmap`, `mprotect`, `pkey_mprotect` and `madvise` pass only as far as they keep the
    /// program's shared memory out of the slice's reach (see [`filter`]).
    const ALLOWED: &[libc::c_long] = &[
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_brk,
        libc::SYS_futex,
        libc::SYS_sched_yield,
        libc::SYS_clock_gettime,
        libc::SYS_clock_getres,
        libc::SYS_getrusage,
        libc::SYS_times,
        libc::SYS_getcpu,
        libc::SYS_clock_nanosleep,
        libc::SYS_nanosleep,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_sigaltstack,
        libc::SYS_getpid,
        libc::SYS_gettid,
        // Closing its copy of a descriptor leaves the program's open.
        libc::SYS_close,
        libc::SYS_exit,
        libc::SYS_exit_group,
        libc::SYS_restart_syscall,
        libc::SYS_sched_getaffinity,
    ];

    /// Installs the filter: the allowed calls pass, `read` and `ioctl` only on the counter
    /// leader (reading an inherited descriptor would move the offset it shares with the
    /// parent), `pread64` only on the child's own `schedstat`, `fcntl` only to query flags
    /// (Rust's standard library checks descriptors so in debug builds); everything else traps
    /// to [`on_sigsys`].
    pub(super) fn filter(leader: RawFd, schedstat: RawFd) -> io::Result<()> {
        let arch = std::env::consts::ARCH
            .try_into()
            .map_err(|_| io::Error::from_raw_os_error(libc::ENOSYS))?;
        // Argument `arg` is one of `values`.
        let arg_in =
            |arg: u8, values: &[i32]| -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
                values
                    .iter()
                    .map(|&v| {
                        SeccompRule::new(vec![SeccompCondition::new(
                            arg,
                            SeccompCmpArgLen::Dword,
                            SeccompCmpOp::Eq,
                            v as u32 as u64,
                        )?])
                    })
                    .collect()
            };
        let build = || -> Result<BpfProgram, seccompiler::BackendError> {
            let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
                ALLOWED.iter().map(|&nr| (nr, Vec::new())).collect();
            rules.insert(libc::SYS_read, arg_in(0, &[leader])?);
            rules.insert(libc::SYS_ioctl, arg_in(0, &[leader])?);
            if schedstat >= 0 {
                rules.insert(libc::SYS_pread64, arg_in(0, &[schedstat])?);
            }
            rules.insert(libc::SYS_fcntl, arg_in(1, &[libc::F_GETFD, libc::F_GETFL])?);
            // Shared memory: an `mmap` private or not writable; an `mprotect` or
            // `pkey_mprotect` that asks no write access, or that the handler checked and made
            // again (its first unused argument set to `CHECKED`); an `madvise` that does not
            // punch holes in a file.
            let bits_clear = |arg: u8, bits: u64| {
                SeccompCondition::new(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(bits),
                    0,
                )
            };
            let write = libc::PROT_WRITE as u64;
            rules.insert(
                libc::SYS_mmap,
                vec![
                    SeccompRule::new(vec![bits_clear(3, libc::MAP_SHARED as u64)?])?,
                    SeccompRule::new(vec![bits_clear(2, write)?])?,
                ],
            );
            for nr in [libc::SYS_mprotect, libc::SYS_pkey_mprotect] {
                rules.insert(
                    nr,
                    vec![
                        SeccompRule::new(vec![bits_clear(2, write)?])?,
                        SeccompRule::new(vec![SeccompCondition::new(
                            checked_arg(nr),
                            SeccompCmpArgLen::Qword,
                            SeccompCmpOp::Eq,
                            CHECKED,
                        )?])?,
                    ],
                );
            }
            rules.insert(
                libc::SYS_madvise,
                vec![SeccompRule::new(vec![SeccompCondition::new(
                    2,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Ne,
                    libc::MADV_REMOVE as u64,
                )?])?],
            );
            SeccompFilter::new(rules, SeccompAction::Trap, SeccompAction::Allow, arch)?.try_into()
        };
        let program = build().map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        seccompiler::apply_filter(&program).map_err(|e| match e {
            seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e) => e,
            _ => io::Error::from_raw_os_error(libc::EINVAL),
        })
    }

    /// The handlers of the filter's traps, and of faults: a write to the program's shared
    /// memory (read-only in the slice) ends it as such; any other fault as killed.
    pub(super) fn install() -> io::Result<()> {
        let handlers: [(libc::c_int, usize); 3] = [
            (libc::SIGSYS, on_sigsys as *const () as usize),
            (libc::SIGSEGV, on_fault as *const () as usize),
            (libc::SIGBUS, on_fault as *const () as usize),
        ];
        for (signal, handler) in handlers {
            // SAFETY: a plain sigaction with a zeroed, then filled, struct.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = handler;
                action.sa_flags = libc::SA_SIGINFO;
                libc::sigemptyset(&mut action.sa_mask);
                if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }

    extern "C" fn on_fault(
        _sig: libc::c_int,
        info: *mut libc::siginfo_t,
        _context: *mut libc::c_void,
    ) {
        // SAFETY: the kernel passes the fault's siginfo to an SA_SIGINFO handler.
        let addr = unsafe { (*info).si_addr() } as u64;
        if slice_shared_memory::intersects_shared(addr, 1) {
            finish(slice_slot::END_SHARED_WRITE, 0);
        }
        // SAFETY: ends the slice without running any of the program's code.
        unsafe { libc::_exit(0) }
    }

    /// The trapped call's number and arguments, and where its result goes.
    struct Call {
        nr: i64,
        args: [u64; 6],
        result: *mut u64,
    }

    /// After a trap the kernel has rolled the registers back to the call: number and
    /// arguments as at the `syscall` instruction; what the handler leaves in the result
    /// register is what the call returns.
    #[cfg(target_arch = "x86_64")]
    unsafe fn call(context: *mut libc::c_void) -> Call {
        // SAFETY: the kernel passes a ucontext_t to an SA_SIGINFO handler.
        let gregs = unsafe { &mut (*context.cast::<libc::ucontext_t>()).uc_mcontext.gregs };
        let reg = |r: libc::c_int| gregs[r as usize] as u64;
        Call {
            nr: reg(libc::REG_RAX) as i64,
            args: [
                reg(libc::REG_RDI),
                reg(libc::REG_RSI),
                reg(libc::REG_RDX),
                reg(libc::REG_R10),
                reg(libc::REG_R8),
                reg(libc::REG_R9),
            ],
            result: (&mut gregs[libc::REG_RAX as usize] as *mut i64).cast(),
        }
    }

    #[cfg(target_arch = "aarch64")]
    unsafe fn call(context: *mut libc::c_void) -> Call {
        // SAFETY: the kernel passes a ucontext_t to an SA_SIGINFO handler.
        let regs = unsafe { &mut (*context.cast::<libc::ucontext_t>()).uc_mcontext.regs };
        Call {
            nr: regs[8] as i64,
            args: [regs[0], regs[1], regs[2], regs[3], regs[4], regs[5]],
            result: &mut regs[0],
        }
    }

    /// The byte count `writev(fd, iov, count)` would have written.
    unsafe fn iov_bytes(iov: u64, count: u64) -> u64 {
        let iov = iov as *const libc::iovec;
        (0..count.min(1024) as usize)
            // SAFETY: the program passed this array to writev.
            .map(|i| unsafe { (*iov.add(i)).iov_len as u64 })
            .sum()
    }

    extern "C" fn on_sigsys(
        _sig: libc::c_int,
        _info: *mut libc::siginfo_t,
        context: *mut libc::c_void,
    ) {
        // SAFETY: the context of a seccomp trap.
        let call = unsafe { call(context) };
        let result = match call.nr {
            libc::SYS_write | libc::SYS_pwrite64 => call.args[2],
            // SAFETY: as in `iov_bytes`.
            libc::SYS_writev | libc::SYS_pwritev | libc::SYS_pwritev2 => unsafe {
                iov_bytes(call.args[1], call.args[2])
            },
            libc::SYS_fsync | libc::SYS_fdatasync => 0,
            libc::SYS_mprotect | libc::SYS_pkey_mprotect
                if !slice_shared_memory::intersects_shared(call.args[0], call.args[1]) =>
            {
                let mut args = call.args;
                args[usize::from(checked_arg(call.nr))] = CHECKED;
                // SAFETY: the program's own call, made again with the mark the filter passes.
                let r =
                    unsafe { libc::syscall(call.nr, args[0], args[1], args[2], args[3], args[4]) };
                if r < 0 {
                    // SAFETY: errno of this thread, set by the call above.
                    (-i64::from(unsafe { *libc::__errno_location() })) as u64
                } else {
                    r as u64
                }
            }
            nr => finish(slice_slot::END_FORBIDDEN, nr),
        };
        // SAFETY: the result register of the interrupted context.
        unsafe { *call.result = result };
    }
}
