//! Launching the profiled program: start it suspended, attach the kernel-event collection,
//! release it, wait for it (forwarding Ctrl-C), and return what was collected.
//!
//! The child is held in a `pre_exec` hook until the counters are attached: it sends its pid
//! over one pipe and waits for a byte on another. `Command::spawn` only returns after the
//! child's `exec`, so it runs on a helper thread while this thread does the handshake.

use std::ffi::OsString;
use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::record::collect::{CollectOptions, Collected, Collector};
use crate::record::counters::{CounterCollector, CounterOptions, SharedSwitches};
use crate::record::kept_lists::KeptLists;
use crate::record::perf::monotonic_ns;
use crate::record::symbolize::SampleAddresses;
use crate::recording::counters::CounterRecords;
use crate::recording::kernel_records::{Capability, KernelRecords};
use std::sync::Arc;

/// How the profiled program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitStatus {
    /// The exit code, if it exited normally.
    pub code: Option<i32>,
    /// The signal that killed it, if any.
    pub signal: Option<i32>,
    pub core_dumped: bool,
}

impl ExitStatus {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// The status as a shell reports it: the exit code, or 128 + the signal.
    pub fn shell_code(&self) -> i32 {
        match (self.code, self.signal) {
            (Some(code), _) => code,
            (None, Some(signal)) => 128 + signal,
            (None, None) => 1,
        }
    }
}

impl From<std::process::ExitStatus> for ExitStatus {
    fn from(s: std::process::ExitStatus) -> Self {
        ExitStatus {
            code: s.code(),
            signal: s.signal(),
            core_dumped: s.core_dumped(),
        }
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exited with code {code}")?,
            (None, Some(sig)) => match signal_name(sig) {
                Some(name) => write!(f, "killed by signal {sig} ({name})")?,
                None => write!(f, "killed by signal {sig}")?,
            },
            (None, None) => write!(f, "ended in an unknown way")?,
        }
        if self.core_dumped {
            write!(f, " (core dumped)")?;
        }
        Ok(())
    }
}

/// The conventional name of a Linux signal number, e.g. `SIGSEGV` for 11.
pub fn signal_name(sig: i32) -> Option<&'static str> {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    usize::try_from(sig)
        .ok()
        .and_then(|s| s.checked_sub(1))
        .and_then(|i| NAMES.get(i).copied())
}

/// Everything one profiled run produced.
#[derive(Debug)]
pub struct RunOutcome {
    pub exit: ExitStatus,
    pub kernel: KernelRecords,
    /// The counters read for `--counters` (empty when none were asked for).
    pub counters: CounterRecords,
    pub child_pid: u32,
    /// When the child was released to `exec`, on `CLOCK_MONOTONIC` ns (the records' clock).
    pub started_ns: u64,
    /// From the release of the child to the moment its exit was seen, on `CLOCK_MONOTONIC`.
    pub wall_ns: u64,
    /// Ctrl-C was pressed (or SIGINT sent to the profiler) while the child ran.
    pub interrupted: bool,
    /// What symbolising `kernel`'s samples needs, when they were collected with
    /// `symbolize: false` (to save the records before symbolising them, say); `None` once
    /// they are symbolised.
    pub unsymbolised: Option<SampleAddresses>,
    /// The long lists (switches, samples, switch samples) kept off memory by
    /// [`run_keeping_lists`]; `None` when `kernel` and `unsymbolised` hold them.
    pub lists: Option<KeptLists>,
}

/// Runs `exe` with `args`, the extra `env` (e.g. `PARPROF_OUT=<dir>`) on top of the
/// profiler's environment, in `working_dir` (default: the current directory), with kernel
/// events collected from its `exec` to its exit, and symbolises the samples if asked.
///
/// SIGINT to the profiler while the child runs is forwarded to the child (unless the terminal
/// already delivered it to the child's process group); a second one kills the child with
/// SIGKILL. Either way the records collected so far are returned.
pub fn run_and_collect(
    exe: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    working_dir: Option<&Path>,
    opts: &CollectOptions,
) -> anyhow::Result<RunOutcome> {
    let mut outcome = run_keeping_lists(exe, args, env, working_dir, opts)?;
    let mut addresses = outcome.unsymbolised.take().unwrap_or_default();
    if let Some(lists) = outcome.lists.take() {
        lists.hold(&mut outcome.kernel, &mut addresses, &mut outcome.counters);
    }
    if opts.symbolize {
        addresses.symbolize(&mut outcome.kernel);
    } else {
        outcome.unsymbolised = Some(addresses);
    }
    Ok(outcome)
}

/// [`run_and_collect`] without symbolising, the long lists kept off memory in
/// [`RunOutcome::lists`] (to be saved from there).
pub fn run_keeping_lists(
    exe: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    working_dir: Option<&Path>,
    opts: &CollectOptions,
) -> anyhow::Result<RunOutcome> {
    check_target(exe, working_dir)?;
    let sigint = SigintGuard::install().context("installing the SIGINT handler")?;
    let (ready_r, go_w, hold) = launch_pipes(sigint.was_ignored)?;

    let mut cmd = held_command(exe, args, env, working_dir, hold);
    std::thread::scope(|scope| {
        // `cmd` (and with it the parent's copies of the child's pipe ends) is dropped when
        // `spawn` returns, so a failed spawn shows up as end-of-file on `ready_r`.
        let spawner = scope.spawn(move || cmd.spawn());
        let Some(pid) = read_pid(ready_r) else {
            let err = spawn_failure(spawner.join());
            return Err(err.context(format!("cannot start {}", exe.display())));
        };

        let (collector, counters) = attach_collectors(pid, opts);
        let mut go_w = go_w;
        // If this fails the child sees end-of-file and gives up, so spawn reports it below.
        let _ = go_w.write_all(b"g");
        drop(go_w);
        let started = monotonic_ns();

        let mut child = match spawner.join() {
            Ok(Ok(child)) => child,
            Ok(Err(e)) => {
                drop(collector.finish());
                let none: SharedSwitches = Arc::new(Vec::new());
                let refused = Capability::no("the program did not start");
                drop(counters.map(|c| c.finish(&none, &refused)));
                return Err(
                    anyhow::Error::new(e).context(format!("cannot start {}", exe.display()))
                );
            }
            Err(_) => bail!("the launching thread panicked"),
        };
        let (status, interrupted) = wait_forwarding_sigint(&mut child, &sigint)
            .with_context(|| format!("waiting for {} (pid {pid})", exe.display()))?;
        let wall_ns = monotonic_ns().saturating_sub(started);
        let (collected, counters) = finish_collection(collector, counters);
        // From here on Ctrl-C is the user's to abort symbolisation and reporting.
        drop(sigint);
        Ok(RunOutcome {
            exit: status.into(),
            kernel: collected.kernel,
            unsymbolised: Some(collected.addresses),
            lists: Some(collected.lists),
            counters,
            child_pid: pid,
            started_ns: started,
            wall_ns,
            interrupted,
        })
    })
}

/// The pipes between the profiler and the child it holds before `exec`: the end the child
/// reports its pid on, the end that releases it, and the child's side ([`ChildHold`]).
fn launch_pipes(
    ignore_sigint: bool,
) -> anyhow::Result<(io::PipeReader, io::PipeWriter, ChildHold)> {
    let (ready_r, ready_w) = io::pipe().context("creating the launch pipe")?;
    let (go_r, go_w) = io::pipe().context("creating the launch pipe")?;
    let hold = ChildHold {
        ready_w: OwnedFd::from(ready_w),
        go_r: OwnedFd::from(go_r),
        parent_only: [ready_r.as_raw_fd(), go_w.as_raw_fd()],
        ignore_sigint,
    };
    Ok((ready_r, go_w, hold))
}

/// Why a child reported no pid: its spawn's error (or, were it running, the child killed:
/// an unsupervised child must not be left behind).
fn spawn_failure(spawned: std::thread::Result<io::Result<Child>>) -> anyhow::Error {
    match spawned {
        Ok(Err(e)) => anyhow::Error::new(e),
        // Unreachable in practice: the pid is written before exec.
        Ok(Ok(mut child)) => {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::anyhow!("the child did not report its pid")
        }
        Err(_) => anyhow::anyhow!("the launching thread panicked"),
    }
}

/// The kernel records of a run that ended, what symbolising their samples needs, and the
/// counters.
fn finish_collection(
    collector: Collector,
    counters: Option<CounterCollector>,
) -> (Collected, CounterRecords) {
    let collected = collector.finish();
    let switches: SharedSwitches = collected.lists.switches.clone();
    let counters = counters.map_or_else(CounterRecords::default, |c| {
        c.finish(&switches, &collected.kernel.capabilities.context_switches)
    });
    (collected, counters)
}

/// The program's command, which holds the child between fork and exec until the collectors
/// are attached (see [`ChildHold`]).
fn held_command(
    exe: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    working_dir: Option<&Path>,
    hold: ChildHold,
) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(args).envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(dir) = working_dir {
        cmd.current_dir(dir);
    }
    // SAFETY: the hook only makes async-signal-safe calls (close, signal, getpid, read,
    // write) and does not allocate.
    unsafe {
        cmd.pre_exec(move || hold.wait_in_child());
    }
    cmd
}

/// The kernel-record collector, and the counters' when asked for, attached to `pid`.
fn attach_collectors(pid: u32, opts: &CollectOptions) -> (Collector, Option<CounterCollector>) {
    let collector = Collector::attach(pid, opts);
    let counters = opts.counters.as_ref().map(|c| {
        CounterCollector::attach(
            pid,
            &CounterOptions {
                simulate_refused: opts.simulate_perf_refused,
                ..c.clone()
            },
        )
    });
    (collector, counters)
}

/// A clear error before anything starts: a missing file or working directory.
fn check_target(exe: &Path, working_dir: Option<&Path>) -> anyhow::Result<()> {
    // A bare name is looked up in PATH by exec; only a path can be checked here.
    if exe.components().count() > 1 && !exe.exists() {
        bail!("cannot start {}: no such file", exe.display());
    }
    if let Some(dir) = working_dir
        && !dir.is_dir()
    {
        bail!(
            "cannot start {}: working directory {} does not exist",
            exe.display(),
            dir.display()
        );
    }
    Ok(())
}

/// What the child needs between `fork` and `exec` to wait for the parent.
struct ChildHold {
    ready_w: OwnedFd,
    go_r: OwnedFd,
    /// The parent's ends, inherited by the fork; closed in the child so that its wait ends
    /// with end-of-file if the parent goes away.
    parent_only: [RawFd; 2],
    ignore_sigint: bool,
}

impl ChildHold {
    /// Runs in the forked child: report the pid, then wait for the go byte.
    fn wait_in_child(&self) -> io::Result<()> {
        // SAFETY (all calls below): plain syscalls on fds and buffers owned by this frame.
        unsafe {
            for fd in self.parent_only {
                libc::close(fd);
            }
            // Our handler is replaced by the default at exec; the child should see the
            // disposition the profiler itself inherited.
            if self.ignore_sigint {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
            }
            let pid = libc::getpid().to_ne_bytes();
            let mut done = 0;
            while done < pid.len() {
                let n = libc::write(
                    self.ready_w.as_raw_fd(),
                    pid[done..].as_ptr().cast(),
                    pid.len() - done,
                );
                if n < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(e);
                }
                done += n as usize;
            }
            let mut byte = 0u8;
            loop {
                let n = libc::read(self.go_r.as_raw_fd(), (&raw mut byte).cast(), 1);
                match n {
                    1 => return Ok(()),
                    0 => return Err(io::Error::from_raw_os_error(libc::ECANCELED)),
                    _ => {
                        let e = io::Error::last_os_error();
                        if e.kind() != io::ErrorKind::Interrupted {
                            return Err(e);
                        }
                    }
                }
            }
        }
    }
}

fn read_pid(mut r: io::PipeReader) -> Option<u32> {
    let mut buf = [0u8; 4];
    r.read_exact(&mut buf).ok()?;
    u32::try_from(i32::from_ne_bytes(buf))
        .ok()
        .filter(|&p| p > 0)
}

/// Waits for the child. The first SIGINT is forwarded, the second kills the child.
fn wait_forwarding_sigint(
    child: &mut Child,
    sigint: &SigintGuard,
) -> io::Result<(std::process::ExitStatus, bool)> {
    let pid = child.id() as libc::pid_t;
    let pidfd = pidfd_open(pid);
    let mut handled = 0u64;
    loop {
        if let Some(status) = child.try_wait()? {
            // The same Ctrl-C that ended the child may not have been handled yet.
            return Ok((status, handled > 0 || sigint.seen().0 > 0));
        }
        let (total, from_process) = sigint.seen();
        while handled < total {
            handled += 1;
            if handled == 1 {
                // A Ctrl-C at the terminal already reached the child if it shares our
                // process group; sending another could count as a second one for programs
                // that shut down gracefully on the first.
                // SAFETY: getpgid/getpgrp have no memory-safety preconditions.
                let same_group = unsafe { libc::getpgid(pid) == libc::getpgrp() };
                if from_process > 0 || !same_group {
                    // SAFETY: the child is not reaped yet, so `pid` is still ours.
                    unsafe { libc::kill(pid, libc::SIGINT) };
                }
            } else if handled == 2 {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        match &pidfd {
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut p, 1, 50) };
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// A pidfd becomes readable when the process exits (Linux 5.3+); without one we poll.
fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = RawFd::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: the kernel just gave us this fd.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

static SIGINT_TOTAL: AtomicU64 = AtomicU64::new(0);
/// SIGINTs sent by a process (`kill`), as opposed to the terminal driver (Ctrl-C).
static SIGINT_FROM_PROCESS: AtomicU64 = AtomicU64::new(0);

struct HandlerState {
    users: usize,
    previous: Option<libc::sigaction>,
}

static HANDLER: Mutex<HandlerState> = Mutex::new(HandlerState {
    users: 0,
    previous: None,
});

extern "C" fn on_sigint(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    SIGINT_TOTAL.fetch_add(1, Ordering::SeqCst);
    // SI_USER, SI_QUEUE and SI_TKILL are <= 0; the tty driver sends SI_KERNEL.
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo (or null, checked).
    if !info.is_null() && unsafe { (*info).si_code } <= 0 {
        SIGINT_FROM_PROCESS.fetch_add(1, Ordering::SeqCst);
    }
}

/// Keeps the profiler alive on SIGINT while a child runs; counts the signals instead. Shared
/// by concurrent runs, the previous disposition comes back when the last one ends.
struct SigintGuard {
    base_total: u64,
    base_from_process: u64,
    was_ignored: bool,
}

impl SigintGuard {
    fn install() -> io::Result<SigintGuard> {
        let mut state = HANDLER.lock().unwrap_or_else(|p| p.into_inner());
        if state.users == 0 {
            // SAFETY: zeroed sigaction is a valid value; we fill the fields that matter.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            type Handler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);
            action.sa_sigaction = on_sigint as Handler as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            // SAFETY: valid pointers to a sigset and two sigactions.
            let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
            let rc = unsafe {
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(libc::SIGINT, &action, &mut previous)
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            state.previous = Some(previous);
        }
        state.users += 1;
        let was_ignored = state
            .previous
            .is_some_and(|p| p.sa_sigaction == libc::SIG_IGN);
        Ok(SigintGuard {
            base_total: SIGINT_TOTAL.load(Ordering::SeqCst),
            base_from_process: SIGINT_FROM_PROCESS.load(Ordering::SeqCst),
            was_ignored,
        })
    }

    /// SIGINTs since this guard was installed: (all, sent by a process).
    fn seen(&self) -> (u64, u64) {
        (
            SIGINT_TOTAL
                .load(Ordering::SeqCst)
                .saturating_sub(self.base_total),
            SIGINT_FROM_PROCESS
                .load(Ordering::SeqCst)
                .saturating_sub(self.base_from_process),
        )
    }
}

impl Drop for SigintGuard {
    fn drop(&mut self) {
        let mut state = HANDLER.lock().unwrap_or_else(|p| p.into_inner());
        state.users = state.users.saturating_sub(1);
        if state.users == 0
            && let Some(previous) = state.previous.take()
        {
            // SAFETY: restores a sigaction the kernel gave us.
            unsafe { libc::sigaction(libc::SIGINT, &previous, std::ptr::null_mut()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_text_names_signals() {
        let killed = ExitStatus {
            code: None,
            signal: Some(9),
            core_dumped: false,
        };
        assert_eq!(killed.to_string(), "killed by signal 9 (SIGKILL)");
        let segv = ExitStatus {
            code: None,
            signal: Some(11),
            core_dumped: true,
        };
        assert_eq!(
            segv.to_string(),
            "killed by signal 11 (SIGSEGV) (core dumped)"
        );
        let ok = ExitStatus {
            code: Some(0),
            signal: None,
            core_dumped: false,
        };
        assert_eq!(ok.to_string(), "exited with code 0");
        assert_eq!(signal_name(64), None);
        assert_eq!(signal_name(0), None);
    }
}
