//! The seccomp filter and its SIGSYS handler.

use crate::{slice_shared_memory, slice_slot};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;

/// How a slice ends (the parent module's `finish`), given at [`install`]: the handlers end
/// the slice without this module calling back into its parent.
static FINISH: OnceLock<fn(u32, i64) -> !> = OnceLock::new();

/// Writes the slot and ends the process, through the function given at [`install`].
/// Async-signal-safe: a load, then that function (or `_exit` if none was given).
fn finish(end: u32, syscall: i64) -> ! {
    match FINISH.get() {
        Some(finish) => finish(end, syscall),
        // SAFETY: ends the process without running any of its code.
        None => unsafe { libc::_exit(0) },
    }
}

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
    let arg_in = |arg: u8, values: &[i32]| -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
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
/// memory (read-only in the slice) ends it as such; any other fault as killed. `finish`
/// writes the slot and ends the slice.
pub(super) fn install(finish: fn(u32, i64) -> !) -> io::Result<()> {
    let _ = FINISH.set(finish);
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

extern "C" fn on_fault(_sig: libc::c_int, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
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
            let r = unsafe { libc::syscall(call.nr, args[0], args[1], args[2], args[3], args[4]) };
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
