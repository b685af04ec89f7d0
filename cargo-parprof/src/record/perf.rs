//! The `perf_event_open` plumbing shared by the kernel-event collection ([`crate::record::collect`])
//! and the counters ([`crate::record::counters`]): the attributes of the events opened on the
//! profiled process, opening one event (or group) per online CPU, sizing, mapping and
//! draining the ring buffers on a collector thread, decoding the parts of the records that
//! both read (byte cursor, `sample_id_all` fields, switch and lost records), naming errnos,
//! and reading `CLOCK_MONOTONIC`, the clock every record is stamped with.

use std::borrow::Cow;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use perf_event::events::Event;
use perf_event::{Builder, Clock, Counter, SampleFlag, Sampler};

use crate::recording::kernel_records::{SwitchKind, SwitchRecord};

pub const PERF_RECORD_MMAP: u32 = 1;
pub const PERF_RECORD_LOST: u32 = 2;
pub const PERF_RECORD_COMM: u32 = 3;
pub const PERF_RECORD_FORK: u32 = 7;
pub const PERF_RECORD_SAMPLE: u32 = 9;
pub const PERF_RECORD_MMAP2: u32 = 10;
pub const PERF_RECORD_LOST_SAMPLES: u32 = 13;
pub const PERF_RECORD_SWITCH: u32 = 14;

pub const PERF_RECORD_MISC_SWITCH_OUT: u16 = 0x2000;
pub const PERF_RECORD_MISC_SWITCH_OUT_PREEMPT: u16 = 0x4000;
pub const PERF_RECORD_MISC_COMM_EXEC: u16 = 0x2000;
/// Call-chain entries at or above this are context markers (`PERF_CONTEXT_USER`, …).
pub const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;

/// Length of the `sample_id_all` trailer for TID|TIME|CPU: pid, tid, time, cpu, reserved.
pub const TRAILER_LEN: usize = 24;

/// Which tasks started by the profiled process its events follow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Follow {
    /// Its threads and the processes it starts (a shell's commands, a build's compilers).
    #[default]
    ThreadsAndProcesses,
    /// Its threads only (`inherit_thread`, where the kernel has it): with `--slices`, whose
    /// forked copies of the program are not the program and must not be counted as it.
    ThreadsOnly,
}

/// An event on `pid` and the tasks it starts as `follow` says (`inherit`), user space only
/// (`exclude_kernel`, `exclude_hv`: what `perf_event_paranoid = 2` allows an unprivileged
/// user on their own processes), stamped on `CLOCK_MONOTONIC`; on one CPU or on any.
pub fn task_builder<'a, E: Event>(
    event: E,
    pid: u32,
    cpu: Option<usize>,
    follow: Follow,
) -> Builder<'a> {
    let mut b = Builder::new(event);
    b.observe_pid(pid as libc::pid_t)
        .inherit(true)
        .inherit_thread(follow == Follow::ThreadsOnly && kernel_inherits_to_threads_only())
        .exclude_kernel(true)
        .exclude_hv(true)
        .clockid(Clock::MONOTONIC);
    match cpu {
        Some(c) => b.one_cpu(c),
        None => b.any_cpu(),
    };
    b
}

/// Whether the kernel accepts `inherit_thread` (Linux 5.13 and later), tried once on the
/// calling process with a dummy event.
pub fn kernel_inherits_to_threads_only() -> bool {
    static ACCEPTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ACCEPTED.get_or_init(|| {
        Builder::new(perf_event::events::Software::DUMMY)
            .observe_self()
            .any_cpu()
            .inherit(true)
            .inherit_thread(true)
            .exclude_kernel(true)
            .exclude_hv(true)
            .build()
            .is_ok()
    })
}

/// The first event on the machine that asks for context-switch records makes the kernel wait
/// out an RCU grace period inside its `perf_event_open` (10–15 ms on the project's VM, on the
/// critical path before the program starts); while one is open, later ones open at once. A
/// disabled dummy event on this process, opened on a thread of its own while cargo checks the
/// build, waits it out there; it is closed when this is dropped (where the kernel refuses it,
/// nothing is open and nothing changes).
pub struct SwitchRecordsWarmed {
    /// The event, once open: held, never read.
    _event: JoinHandle<Option<Counter>>,
}

impl SwitchRecordsWarmed {
    pub fn start() -> SwitchRecordsWarmed {
        let event = std::thread::spawn(|| {
            Builder::new(perf_event::events::Software::DUMMY)
                .observe_self()
                .any_cpu()
                .context_switch(true)
                .exclude_kernel(true)
                .exclude_hv(true)
                .enabled(false)
                .build()
                .ok()
        });
        SwitchRecordsWarmed { _event: event }
    }
}

/// Makes `b` the event whose ring buffer the collector drains: its samples carry TID, TIME
/// and CPU plus `extra`, every other record the same three as the `sample_id_all` trailer
/// that [`SampleId::trailer`] reads, with the threads' context switches if `switches`. It is
/// enabled by the child's `exec` and wakes the collector well before `ring_bytes` fill up
/// (the collector also polls on a timeout).
pub fn ring_events(b: &mut Builder<'_>, extra: SampleFlag, switches: bool, ring_bytes: usize) {
    b.sample_id_all(true)
        .sample(SampleFlag::TID | SampleFlag::TIME | SampleFlag::CPU | extra)
        .context_switch(switches)
        .enable_on_exec(true)
        .wakeup_watermark((ring_bytes / 4).max(4096));
}

/// Opens one event (or group) per CPU of `cpus` with `open`, skipping a CPU that went
/// offline since they were listed (`ENODEV`, once one is open); any other error ends it.
pub fn open_per_cpu<T>(
    cpus: &[usize],
    mut open: impl FnMut(usize) -> io::Result<T>,
) -> io::Result<Vec<T>> {
    let mut out = Vec::with_capacity(cpus.len());
    for &cpu in cpus {
        match open(cpu) {
            Ok(t) => out.push(t),
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) && !out.is_empty() => {}
            Err(e) => return Err(e),
        }
    }
    if out.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENODEV));
    }
    Ok(out)
}

/// The online CPUs from `/sys/devices/system/cpu/online` ("0-3,6"), else `0..n`.
pub fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            (0..n).collect()
        })
}

fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// The largest ring buffer, `ring_bytes` rounded up to a power of two and halved while the
/// locked-memory budget (`perf_event_mlock_kb`, `RLIMIT_MEMLOCK`) refuses it, e.g. when
/// several runs share the budget, down to `min_bytes` (a power of two); the size to pass to
/// `Counter::sampled`, which consumes the counter even when the mapping fails.
///
/// The probe maps and unmaps a throwaway side-band event of the profiler itself, never the
/// event that will be mapped for real: the kernel makes an event whose buffer was unmapped
/// wait for an RCU grace period (about 15 ms in a VM) before it takes a new one.
pub fn fitting_ring_size(ring_bytes: usize, min_bytes: usize) -> io::Result<usize> {
    let mut probe = Builder::new(perf_event::events::Software::DUMMY);
    probe
        .observe_self()
        .any_cpu()
        .exclude_kernel(true)
        .exclude_hv(true);
    let probe = probe.build()?;
    let mut size = ring_bytes.max(min_bytes).next_power_of_two();
    loop {
        match try_mmap(&probe, size) {
            Ok(()) => return Ok(size),
            Err(e)
                if size > min_bytes
                    && matches!(e.raw_os_error(), Some(libc::EPERM | libc::ENOMEM)) =>
            {
                size /= 2;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether a ring buffer of `size` bytes (plus the header page) can be mapped for `counter`.
/// A refused mapping attaches no buffer, so the same event can try a smaller size at once.
fn try_mmap(counter: &Counter, size: usize) -> io::Result<()> {
    let page = page_size();
    let len = page + size.max(page);
    // SAFETY: a fresh shared mapping of the perf fd, unmapped right away; nothing reads it.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            counter.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `ptr` and `len` are exactly the mapping created above.
    unsafe { libc::munmap(ptr, len) };
    Ok(())
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// Hands every record in `sampler`'s ring buffer to `parse` as (type, misc, body) and
/// returns how many it rejected as malformed (`None`).
pub fn drain_ring(
    sampler: &mut Sampler,
    mut parse: impl FnMut(u32, u16, &[u8]) -> Option<()>,
) -> u64 {
    let mut malformed = 0;
    while let Some(record) = sampler.next_record() {
        let (ty, misc) = (record.ty(), record.misc());
        let body: Cow<[u8]> = record.to_contiguous();
        if parse(ty, misc, &body).is_none() {
            malformed += 1;
        }
    }
    malformed
}

/// The profiler's thread that drains the ring buffers (and reads the counters) while the
/// child runs, from [`CollectorThread::spawn`] until [`CollectorThread::finish`] or drop.
pub struct CollectorThread<T> {
    stop: Arc<StopSignal>,
    handle: Option<JoinHandle<T>>,
}

impl<T: Default + Send + 'static> CollectorThread<T> {
    /// Starts `work` on a thread named `name`; it should return soon after the signal it is
    /// given is raised, having made one last pass.
    pub fn spawn(
        name: &str,
        work: impl FnOnce(&StopSignal) -> T + Send + 'static,
    ) -> io::Result<CollectorThread<T>> {
        let stop = Arc::new(StopSignal::new()?);
        let stop2 = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || work(&stop2))?;
        Ok(CollectorThread {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops the thread and returns what it gathered. A panic in it loses the records, not
    /// the run.
    pub fn finish(mut self) -> T {
        self.stop.raise();
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl<T> Drop for CollectorThread<T> {
    fn drop(&mut self) {
        self.stop.raise();
    }
}

/// The request to a collector thread to make its last pass. The thread sleeps in
/// [`StopSignal::wait`], which the request interrupts, so the profiler does not wait out a
/// polling interval after the child's exit.
pub struct StopSignal {
    raised: AtomicBool,
    /// An eventfd made readable by [`StopSignal::raise`].
    wake: OwnedFd,
}

impl StopSignal {
    fn new() -> io::Result<StopSignal> {
        // SAFETY: eventfd has no preconditions; the result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(StopSignal {
            raised: AtomicBool::new(false),
            // SAFETY: `fd` was just created and is owned by nobody else.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn raise(&self) {
        self.raised.store(true, Ordering::Release);
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to our own eventfd; it cannot block
        // (non-blocking) and a full counter still leaves it readable.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// Whether the last pass is due. Read it before a pass: records and counts from before
    /// the child's exit are then certainly in that pass.
    pub fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Acquire)
    }

    /// Sleeps until one of `fds` is ready, the signal is raised, or `timeout` has passed;
    /// `fds[i].revents` tell which were ready.
    pub fn wait(&self, fds: &mut [libc::pollfd], timeout: Duration) {
        let mut all = Vec::with_capacity(fds.len() + 1);
        all.extend_from_slice(fds);
        all.push(libc::pollfd {
            fd: self.wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        let ms = libc::c_int::try_from(timeout.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: `all` is a valid array of `all.len()` pollfds.
        let n = unsafe { libc::poll(all.as_mut_ptr(), all.len() as libc::nfds_t, ms) };
        for (fd, polled) in fds.iter_mut().zip(&all) {
            fd.revents = if n > 0 { polled.revents } else { 0 };
        }
    }
}

/// Reads a record's body field by field, in the machine's byte order (as the kernel writes).
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }
    /// Bytes read so far.
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// Bytes left to read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let b = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(b)
    }
    pub fn u32(&mut self) -> Option<u32> {
        self.bytes(4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self) -> Option<u64> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_ne_bytes(a))
    }
}

/// The TID, TIME and CPU fields of a record: inside a sample, or the `sample_id_all`
/// trailer of any other record (see [`ring_events`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleId {
    pub pid: u32,
    pub tid: u32,
    pub time_ns: u64,
    pub cpu: u32,
}

impl SampleId {
    /// Reads pid, tid, time, cpu and the reserved word, as they follow each other.
    pub fn read(c: &mut Cursor<'_>) -> Option<SampleId> {
        let (pid, tid) = (c.u32()?, c.u32()?);
        let time_ns = c.u64()?;
        let cpu = c.u32()?;
        let _reserved = c.u32()?;
        Some(SampleId {
            pid,
            tid,
            time_ns,
            cpu,
        })
    }

    /// The `sample_id_all` trailer at the end of a non-sample record.
    pub fn trailer(body: &[u8]) -> Option<SampleId> {
        let start = body.len().checked_sub(TRAILER_LEN)?;
        SampleId::read(&mut Cursor::new(&body[start..]))
    }
}

/// A NUL-padded string between `from` and the `sample_id_all` trailer.
pub fn padded_str(body: &[u8], from: usize) -> Option<&[u8]> {
    let end = body.len().checked_sub(TRAILER_LEN)?;
    let raw = body.get(from..end)?;
    Some(raw.split(|&b| b == 0).next().unwrap_or(raw))
}

/// A `PERF_RECORD_SWITCH` record; `None` if it is malformed.
pub fn switch_record(misc: u16, body: &[u8]) -> Option<SwitchRecord> {
    let id = SampleId::trailer(body)?;
    let kind = if misc & PERF_RECORD_MISC_SWITCH_OUT == 0 {
        SwitchKind::In
    } else if misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT != 0 {
        SwitchKind::OutPreempted
    } else {
        SwitchKind::OutVoluntary
    };
    Some(SwitchRecord {
        time_ns: id.time_ns,
        tid: id.tid,
        cpu: id.cpu,
        kind,
    })
}

/// How many records a `PERF_RECORD_LOST` or `PERF_RECORD_LOST_SAMPLES` record (`ty`) says
/// were dropped; `None` if it is malformed.
pub fn lost_count(ty: u32, body: &[u8]) -> Option<u64> {
    let mut c = Cursor::new(body);
    if ty == PERF_RECORD_LOST {
        let _id = c.u64()?;
    }
    c.u64()
}

/// `EACCES: Permission denied` for the errnos of `perf_event_open` and `mmap`, the plain
/// text for anything else.
pub fn describe_errno(e: &io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(libc::EACCES) => "EACCES",
        Some(libc::EPERM) => "EPERM",
        Some(libc::ENOENT) => "ENOENT",
        Some(libc::ENOSYS) => "ENOSYS",
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP",
        Some(libc::EINVAL) => "EINVAL",
        Some(libc::E2BIG) => "E2BIG",
        Some(libc::ENODEV) => "ENODEV",
        Some(libc::EBUSY) => "EBUSY",
        Some(libc::ESRCH) => "ESRCH",
        Some(libc::EMFILE) => "EMFILE",
        Some(libc::ENOMEM) => "ENOMEM",
        _ => return e.to_string(),
    };
    let text = e.to_string();
    // io::Error's text ends in "(os error N)", which the name makes redundant.
    let text = text.split(" (os error").next().unwrap_or(&text);
    format!("{name}: {text}")
}

/// Now on `CLOCK_MONOTONIC` in ns, the clock of the kernel's records (`clockid`).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn trailers_and_lost_records() {
        let mut body = vec![0xAA; 5];
        for w in [3u32, 4] {
            body.extend(w.to_ne_bytes());
        }
        body.extend(77u64.to_ne_bytes());
        body.extend(2u32.to_ne_bytes());
        body.extend(0u32.to_ne_bytes());
        let id = SampleId::trailer(&body).unwrap();
        assert_eq!(
            id,
            SampleId {
                pid: 3,
                tid: 4,
                time_ns: 77,
                cpu: 2
            }
        );
        assert_eq!(SampleId::trailer(&body[..TRAILER_LEN - 1]), None);

        let mut lost = 9u64.to_ne_bytes().to_vec();
        lost.extend(5u64.to_ne_bytes());
        assert_eq!(lost_count(PERF_RECORD_LOST, &lost), Some(5));
        assert_eq!(lost_count(PERF_RECORD_LOST_SAMPLES, &lost), Some(9));
        assert_eq!(lost_count(PERF_RECORD_LOST, &lost[..12]), None);
    }

    #[test]
    fn errnos_are_named() {
        let e = io::Error::from_raw_os_error(libc::EACCES);
        assert!(describe_errno(&e).starts_with("EACCES: "), "{e}");
        assert!(!describe_errno(&e).contains("os error"));
        assert_eq!(
            describe_errno(&io::Error::other("no errno")),
            "no errno".to_string()
        );
    }
}
