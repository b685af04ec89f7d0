//! Kernel-event collection with `perf_event_open` for one profiled process and everything it
//! starts.
//!
//! One cpu-clock sampling event is opened per online CPU on the (still suspended) child with
//! `inherit`, because the kernel refuses to `mmap` inherited per-task events (`cpu = -1`).
//! The same event carries the side-band records: context switches, mmaps, comm and
//! fork/exit. Everything is user-space only (`exclude_kernel`, `exclude_hv`), which is what
//! `perf_event_paranoid = 2` allows an unprivileged user on their own processes. The events
//! start at the child's `exec` (`enable_on_exec`), so nothing of the profiler's own pre-exec
//! code is recorded. A collector thread drains the ring buffers while the child runs.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Counter, SampleFlag, Sampler};

use crate::record::counters::CounterOptions;
use crate::record::kept_lists::{KeptLists, KeptSample, KeptSamples};
use crate::record::perf::{
    CollectorThread, Cursor, Follow, PERF_CONTEXT_MAX, PERF_RECORD_COMM, PERF_RECORD_FORK,
    PERF_RECORD_LOST, PERF_RECORD_LOST_SAMPLES, PERF_RECORD_MISC_COMM_EXEC, PERF_RECORD_MMAP,
    PERF_RECORD_MMAP2, PERF_RECORD_SAMPLE, PERF_RECORD_SWITCH, SampleId, StopSignal,
    describe_errno, drain_ring, fitting_ring_size, lost_count, online_cpus, open_per_cpu,
    padded_str, ring_events, switch_record, task_builder,
};
use crate::record::spill::Spill;
use crate::record::steal::machine_steal_ns;
use crate::record::symbolize::{ExecEvent, ForkEvent, Mapping, SampleAddresses, SideBand};
use crate::record::unwind::{SAMPLE_REGS_USER, STACK_COPY_BYTES, StackUnwinder, UserStack};
use crate::recording::kernel_records::CpuQuota;
use crate::recording::kernel_records::{
    Capabilities, Capability, KernelRecords, SwitchRecord, ThreadStart,
};

/// The highest cpu-clock sampling frequency asked of the kernel: above it the samples'
/// own interrupts take a large share of the CPU (one every 10 µs per thread).
pub const MAX_FREQUENCY_HZ: u64 = 100_000;

/// Set to `1` in the profiler's environment to take the same path as a kernel that refuses
/// `perf_event_open` with `EACCES` (for tests of the degraded mode).
pub const SIMULATE_REFUSED_ENV: &str = "PARPROF_SIMULATE_PERF_REFUSED";

/// Settings of the kernel-event collection.
#[derive(Clone, Debug)]
pub struct CollectOptions {
    /// cpu-clock sampling frequency, per thread, in Hz.
    pub frequency_hz: u64,
    /// Ring buffer size per CPU in KiB (rounded up to a power of two pages). The default,
    /// 512 KiB, fits in the default unprivileged budget (`kernel.perf_event_mlock_kb` = 516
    /// per CPU, the extra page being the kernel's header page).
    pub ring_buffer_kib: usize,
    /// Symbolise the samples' call chains after the run.
    pub symbolize: bool,
    /// Behave as if the kernel refused `perf_event_open` (`EACCES`).
    pub simulate_perf_refused: bool,
    /// Sample every switch-out with its call chain (the off-CPU flamegraph), where the kernel
    /// allows it; off, the run costs one sample per context switch less
    /// (`cargo bench --bench offcpu_overhead` measures it).
    pub switch_stacks: bool,
    /// The counters to read for attribution and utilization (`--counters`); `None` reads none.
    pub counters: Option<CounterOptions>,
    /// How the cpu-clock samples' call chains are taken (`--call-graph`).
    pub call_graph: CallGraph,
    /// Whether the processes the program starts are followed too (not with `--slices`).
    pub follow: Follow,
}

/// How the call chains of the cpu-clock samples are taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CallGraph {
    /// A copy of the user stack with each sample, unwound with the DWARF call-frame
    /// information of the mapped files, continued along the frame pointers past the copy.
    #[default]
    Dwarf,
    /// The kernel's frame-pointer walk alone: cheaper, but it loses the callers of code
    /// built without frame pointers (the standard library, libc).
    Fp,
}

/// Stack copies are unwound with x86-64's register numbering.
const STACK_COPIES_SUPPORTED: bool = cfg!(target_arch = "x86_64");

impl Default for CollectOptions {
    fn default() -> Self {
        CollectOptions {
            frequency_hz: 999,
            ring_buffer_kib: 512,
            symbolize: true,
            simulate_perf_refused: std::env::var_os(SIMULATE_REFUSED_ENV).is_some_and(|v| v == "1"),
            switch_stacks: true,
            counters: Some(CounterOptions::default()),
            call_graph: CallGraph::default(),
            follow: Follow::default(),
        }
    }
}

/// What a finished collection produced: the records for the analyses, plus what
/// symbolisation needs; the long lists kept apart, off memory (`kernel`'s and `addresses`'
/// are empty).
pub struct Collected {
    pub kernel: KernelRecords,
    pub addresses: SampleAddresses,
    pub lists: KeptLists,
}

/// A running collection, from [`Collector::attach`] to [`Collector::finish`].
pub struct Collector {
    capabilities: Capabilities,
    period_ns: u64,
    /// The machine's steal time when the collection started (see [`crate::record::steal`]).
    steal_at_start: Option<u64>,
    /// Drains the recording's rings and the switch-stack rings.
    worker: Option<CollectorThread<(Parsed, Parsed)>>,
}

impl Collector {
    /// Opens the events on `pid`, which should be a forked child that has not called `exec`
    /// yet (the events are enabled by its `exec`). Refusals by the kernel are not errors: they
    /// are recorded in [`Collector::capabilities`] and the run goes on without those records.
    pub fn attach(pid: u32, opts: &CollectOptions) -> Collector {
        let freq = opts.frequency_hz.clamp(1, MAX_FREQUENCY_HZ);
        // cpu-clock is an hrtimer, so the kernel maps a frequency to a fixed period anyway;
        // asking for the period directly makes every sample worth exactly `period_ns`.
        let period_ns = 1_000_000_000 / freq;
        let ring_bytes = opts.ring_buffer_kib.max(4) * 1024;
        let opener = Opener {
            pid,
            follow: opts.follow,
            simulate_refused: opts.simulate_perf_refused,
            stack_copies: false,
        };

        let mut capabilities = Capabilities {
            hardware_counters: opener.probe_hardware(),
            cpus: CpuQuota::of_this_process(),
            ..Capabilities::default()
        };
        let (samplers, (switches, samples), stack_copies) =
            opener.open_recording_with_copies(opts.call_graph, period_ns, ring_bytes);
        capabilities.stack_copies = stack_copies;
        let unwinder = capabilities
            .stack_copies
            .available
            .then(StackUnwinder::default);
        let switch_samplers = if !opts.switch_stacks {
            capabilities.switch_stacks =
                Capability::no("no off-CPU flamegraph: switch-out stacks were not asked for");
            Vec::new()
        } else if switches.available {
            opener
                .open_switch_stacks(ring_bytes)
                .map_err(|why| capabilities.switch_stacks = why)
                .unwrap_or_default()
        } else {
            capabilities.switch_stacks =
                Capability::no("no context-switch records to place stacks at");
            Vec::new()
        };
        if !switch_samplers.is_empty() {
            capabilities.switch_stacks = Capability::yes();
        }
        capabilities.context_switches = switches;
        capabilities.cpu_samples = samples;

        let worker = if samplers.is_empty() {
            None
        } else {
            let spawned = CollectorThread::spawn("parprof-collect", move |stop| {
                drain_until_stopped(samplers, unwinder, switch_samplers, stop)
            });
            match spawned {
                Ok(thread) => Some(thread),
                Err(e) => {
                    let why = format!("could not start the collector thread: {e}");
                    capabilities.context_switches = Capability::no(why.clone());
                    capabilities.cpu_samples = Capability::no(why);
                    None
                }
            }
        };
        Collector {
            capabilities,
            period_ns,
            steal_at_start: machine_steal_ns(),
            worker,
        }
    }

    pub fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// Stops the collection after one last drain and returns the records, the long lists
    /// kept in time order.
    /// Call it after the child has exited so that its last records are in the buffers.
    pub fn finish(self) -> Collected {
        let steal_ns = self
            .steal_at_start
            .zip(machine_steal_ns())
            .map(|(start, end)| end.saturating_sub(start));
        let (parsed, switch_parsed) = self
            .worker
            .map_or_else(Default::default, CollectorThread::finish);
        parsed.into_collected(switch_parsed, self.capabilities, self.period_ns, steal_ns)
    }
}

#[derive(Clone, Copy)]
struct Opener {
    pid: u32,
    follow: Follow,
    simulate_refused: bool,
    /// The cpu-clock samples carry the user registers and a copy of the user stack.
    stack_copies: bool,
}

/// The (context switches, CPU samples) capabilities of a recording.
type RecordingCaps = (Capability, Capability);

impl Opener {
    /// Every `perf_event_open` goes through here so that a simulated refusal takes the same
    /// path as a real one.
    fn open(&self, builder: &Builder) -> io::Result<Counter> {
        if self.simulate_refused {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        builder.build()
    }

    fn probe_hardware(&self) -> Capability {
        match self.open(&task_builder(
            Hardware::INSTRUCTIONS,
            self.pid,
            None,
            self.follow,
        )) {
            Ok(_) => Capability::yes(),
            Err(e) => Capability::no(format!(
                "hardware counters unavailable: perf_event_open(instructions) failed with {}; \
                 {} only software events (task-clock, context switches, page faults) are used",
                describe_errno(&e),
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV)
                ) {
                    "this machine (typically a virtual machine) exposes no hardware PMU;"
                } else {
                    "see the reason above;"
                }
            )),
        }
    }

    /// The recording with stack copies if `call_graph` asks for them and the kernel takes
    /// them, else without; and whether the samples carry copies.
    fn open_recording_with_copies(
        &self,
        call_graph: CallGraph,
        period_ns: u64,
        ring_bytes: usize,
    ) -> (Vec<Sampler>, RecordingCaps, Capability) {
        let no_copies = match call_graph {
            CallGraph::Fp => "`--call-graph fp` was given".to_owned(),
            CallGraph::Dwarf if !STACK_COPIES_SUPPORTED => {
                "stack copies are unwound on x86-64 only".to_owned()
            }
            CallGraph::Dwarf => {
                let with_copies = Opener {
                    stack_copies: true,
                    ..*self
                };
                match with_copies.open_recording(period_ns, ring_bytes) {
                    Ok((samplers, caps)) if caps.1.available => {
                        return (samplers, caps, Capability::yes());
                    }
                    Ok(_) => "cpu-clock samples unavailable".to_owned(),
                    Err(caps) => caps.1.reason.unwrap_or_default(),
                }
            }
        };
        let (samplers, caps) = self
            .open_recording(period_ns, ring_bytes)
            .unwrap_or_else(|refused| (Vec::new(), refused));
        (samplers, caps, Capability::no(no_copies))
    }

    /// Opens and maps one event per online CPU, degrading step by step: without context
    /// switches for kernels that lack `PERF_RECORD_SWITCH`, without samples if only the
    /// side-band event is allowed.
    fn open_recording(
        &self,
        period_ns: u64,
        ring_bytes: usize,
    ) -> Result<(Vec<Sampler>, RecordingCaps), RecordingCaps> {
        let cpus = online_cpus();
        let first = match self.open_all(&cpus, Some(period_ns), true, ring_bytes) {
            Ok(s) => return Ok((s, (Capability::yes(), Capability::yes()))),
            Err(e) => e,
        };
        if is_refusal(&first) {
            return Err(refused_both(&first, self.simulate_refused));
        }
        // The ring buffers could not be mapped: fewer features would need the same buffers.
        if first.raw_os_error().is_none() {
            return Err(failed_both(&first.to_string()));
        }
        if let Ok(s) = self.open_all(&cpus, Some(period_ns), false, ring_bytes) {
            let why = format!(
                "context-switch records unavailable ({}), so times are not corrected for \
                 switched-out intervals; PERF_RECORD_SWITCH needs Linux 4.3 or later",
                describe_errno(&first)
            );
            return Ok((s, (Capability::no(why), Capability::yes())));
        }
        if let Ok(s) = self.open_all(&cpus, None, true, ring_bytes) {
            let why = format!(
                "cpu-clock sampling unavailable ({})",
                describe_errno(&first)
            );
            return Ok((s, (Capability::yes(), Capability::no(why))));
        }
        Err(failed_both(&format!(
            "perf_event_open failed with {}",
            describe_errno(&first)
        )))
    }

    /// One `context-switches` event per CPU sampling every switch-out with the user call
    /// chain where the thread stopped. The kernel counts a switch in kernel mode, so the event
    /// must include kernel mode (its call chain stays user-only): allowed to root, or with
    /// `perf_event_paranoid` ≤ 1.
    fn open_switch_stacks(&self, ring_bytes: usize) -> Result<Vec<Sampler>, Capability> {
        let cpus = online_cpus();
        open_per_cpu(&cpus, |cpu| {
            let mut b = task_builder(Software::CONTEXT_SWITCHES, self.pid, Some(cpu), self.follow);
            b.exclude_kernel(false)
                .exclude_callchain_kernel(true)
                .sample_period(1);
            // The same sample layout as the cpu-clock samples, read by the same parser.
            ring_events(
                &mut b,
                SampleFlag::IP | SampleFlag::CALLCHAIN,
                false,
                ring_bytes,
            );
            map_ring(self.open(&b)?, ring_bytes)
        })
        .map_err(|e| {
            let level = paranoid_level().map_or("unknown".to_owned(), |p| p.to_string());
            Capability::no(if is_refusal(&e) {
                format!(
                    "no off-CPU flamegraph: stacks at switch-outs need kernel-mode context-switch \
                     samples, refused ({}); they need root or `kernel.perf_event_paranoid` ≤ 1 \
                     (current value: {level})",
                    describe_errno(&e)
                )
            } else {
                format!("no off-CPU flamegraph: the context-switch samples failed: {e}")
            })
        })
    }

    fn open_all(
        &self,
        cpus: &[usize],
        period_ns: Option<u64>,
        switches: bool,
        ring_bytes: usize,
    ) -> io::Result<Vec<Sampler>> {
        open_per_cpu(cpus, |cpu| {
            let b = recording_builder(self, cpu, period_ns, switches, ring_bytes);
            map_ring(self.open(&b)?, ring_bytes)
        })
    }
}

fn recording_builder(
    opener: &Opener,
    cpu: usize,
    period_ns: Option<u64>,
    switches: bool,
    ring_bytes: usize,
) -> Builder<'static> {
    let mut b = match period_ns {
        Some(_) => task_builder(Software::CPU_CLOCK, opener.pid, Some(cpu), opener.follow),
        None => task_builder(Software::DUMMY, opener.pid, Some(cpu), opener.follow),
    };
    // The samples' fields, in the order the parser below reads them: IP, then the
    // TID|TIME|CPU block, then CALLCHAIN, then the user registers and stack if copied.
    let mut fields = SampleFlag::IP | SampleFlag::CALLCHAIN;
    if opener.stack_copies {
        fields |= SampleFlag::REGS_USER | SampleFlag::STACK_USER;
        b.sample_regs_user(SAMPLE_REGS_USER)
            .sample_stack_user(STACK_COPY_BYTES);
    }
    ring_events(&mut b, fields, switches, ring_bytes);
    b.exclude_callchain_kernel(true)
        .mmap(true)
        .mmap2(true)
        .comm(true)
        .comm_exec(true)
        .task(true);
    if let Some(p) = period_ns {
        b.sample_period(p);
    }
    b
}

/// Maps the ring buffer, as large as the locked-memory budget allows.
fn map_ring(counter: Counter, ring_bytes: usize) -> io::Result<Sampler> {
    const MIN_RING: usize = 16 * 1024;
    match fitting_ring_size(ring_bytes, MIN_RING) {
        Ok(size) => counter.sampled(size),
        // Without an errno this is not mistaken for a refusal of perf_event_open itself.
        Err(e) => Err(io::Error::other(format!(
            "mapping the perf ring buffer failed ({}); raise \
             `kernel.perf_event_mlock_kb` or `ulimit -l`",
            describe_errno(&e)
        ))),
    }
}

fn is_refusal(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EACCES | libc::EPERM | libc::ENOENT | libc::ENOSYS)
    )
}

fn paranoid_level() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

fn refused_both(e: &io::Error, simulated: bool) -> RecordingCaps {
    let code = e.raw_os_error().unwrap_or(0);
    let paranoid = paranoid_level();
    let level = paranoid.map_or("unknown".to_string(), |p| p.to_string());
    let advice = if matches!(code, libc::ENOSYS | libc::ENOENT) {
        "this kernel has no perf events support (CONFIG_PERF_EVENTS) or blocks the syscall"
            .to_string()
    } else {
        let mut a = format!(
            "allow it with `sudo sysctl kernel.perf_event_paranoid=2` (or lower; \
             current value: {level})"
        );
        if paranoid.is_some_and(|p| p <= 2) && !simulated {
            a.push_str(
                "; the level already allows it, so a container or seccomp policy or a \
                 security module refuses the syscall",
            );
        }
        a
    };
    let sim = if simulated {
        format!(" [simulated by {SIMULATE_REFUSED_ENV}=1]")
    } else {
        String::new()
    };
    let why = format!("perf_event_open was refused ({}){sim}", describe_errno(e));
    (
        Capability::no(format!(
            "context-switch records unavailable: {why}, so times are not corrected for \
             switched-out intervals; {advice}"
        )),
        Capability::no(format!("CPU samples unavailable: {why}; {advice}")),
    )
}

fn failed_both(why: &str) -> RecordingCaps {
    (
        Capability::no(format!(
            "context-switch records unavailable: {why}; times are not corrected for \
             switched-out intervals"
        )),
        Capability::no(format!("CPU samples unavailable: {why}")),
    )
}

/// Drains the recording's rings and the switch-stack rings (into a `Parsed` of their own:
/// their samples are switch-outs, not cpu-clock ticks) until `stop` is raised.
fn drain_until_stopped(
    samplers: Vec<Sampler>,
    unwinder: Option<StackUnwinder>,
    switch_samplers: Vec<Sampler>,
    stop: &StopSignal,
) -> (Parsed, Parsed) {
    let recording = Parsed {
        unwinder,
        ..Parsed::default()
    };
    let mut parsed = [recording, Parsed::default()];
    let mut rings: Vec<(Sampler, usize)> = samplers
        .into_iter()
        .map(|s| (s, 0))
        .chain(switch_samplers.into_iter().map(|s| (s, 1)))
        .collect();
    let mut hung_up = vec![false; rings.len()];
    loop {
        let stopping = stop.is_raised();
        for (ring, into) in &mut rings {
            let out = &mut parsed[*into];
            let malformed = drain_ring(ring, |ty, misc, body| parse_record(ty, misc, body, out));
            out.malformed += malformed;
        }
        if stopping {
            let [recording, switches] = parsed;
            return (recording, switches);
        }
        // A hung-up fd (its first task exited) polls ready forever, but inherited tasks may
        // still write to its buffer: keep draining it, stop polling it.
        let polled: Vec<usize> = (0..rings.len()).filter(|&i| !hung_up[i]).collect();
        let mut fds: Vec<libc::pollfd> = polled
            .iter()
            .map(|&i| libc::pollfd {
                fd: rings[i].0.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let timeout = if fds.is_empty() { 10 } else { 50 };
        stop.wait(&mut fds, Duration::from_millis(timeout));
        for (&i, fd) in polled.iter().zip(&fds) {
            if fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                hung_up[i] = true;
            }
        }
    }
}

/// Bounds what one corrupt `nr` can make us allocate.
const MAX_CALLCHAIN: u64 = 4096;

#[derive(Clone, Debug)]
struct Comm {
    time_ns: u64,
    tid: u32,
    name: String,
}

#[derive(Default)]
struct Parsed {
    switches: Spill<SwitchRecord>,
    /// The samples with their call chains: a long run repeats the same few thousand.
    samples: KeptSamples,
    maps: Vec<Mapping>,
    comms: Vec<Comm>,
    forks: Vec<ForkEvent>,
    execs: Vec<ExecEvent>,
    lost: u64,
    malformed: u64,
    /// Present when the samples carry user registers and stack copies: it follows the
    /// address spaces and replaces each sample's frame-pointer chain by the unwound one.
    unwinder: Option<StackUnwinder>,
}

/// The user registers (ip, sp, bp) and stack copy that end a sample; `None` inside when the
/// kernel had none to give (no user context, or the copy failed).
fn read_user_stack<'a>(c: &mut Cursor<'a>) -> Option<Option<UserStack<'a>>> {
    const PERF_SAMPLE_REGS_ABI_NONE: u64 = 0;
    let abi = c.u64()?;
    // The registers in ascending perf numbering: bp, sp, ip.
    let regs = if abi == PERF_SAMPLE_REGS_ABI_NONE {
        None
    } else {
        Some((c.u64()?, c.u64()?, c.u64()?))
    };
    let size = c.u64()?;
    if size == 0 {
        return Some(None);
    }
    let copied = c.bytes(usize::try_from(size).ok()?)?;
    let valid = usize::try_from(c.u64()?).ok()?.min(copied.len());
    Some(regs.map(|(bp, sp, ip)| UserStack {
        ip,
        sp,
        bp,
        bytes: &copied[..valid],
    }))
}

/// Decodes one record into `out`; `None` if it is malformed.
fn parse_record(ty: u32, misc: u16, body: &[u8], out: &mut Parsed) -> Option<()> {
    let mut c = Cursor::new(body);
    match ty {
        PERF_RECORD_SAMPLE => parse_sample(&mut c, out)?,
        PERF_RECORD_SWITCH => out.switches.push(switch_record(misc, body)?),
        PERF_RECORD_MMAP | PERF_RECORD_MMAP2 => parse_mmap(ty, body, &mut c, out)?,
        PERF_RECORD_COMM => parse_comm(misc, body, &mut c, out)?,
        PERF_RECORD_FORK => parse_fork(&mut c, out)?,
        PERF_RECORD_LOST | PERF_RECORD_LOST_SAMPLES => {
            out.lost = out.lost.saturating_add(lost_count(ty, body)?);
        }
        // EXIT, THROTTLE and anything newer carry nothing we use.
        _ => {}
    }
    Some(())
}

/// A sample: its call chain from the kernel, or unwound from its stack copy.
fn parse_sample(c: &mut Cursor<'_>, out: &mut Parsed) -> Option<()> {
    let ip = c.u64()?;
    let id = SampleId::read(c)?;
    let nr = c.u64()?;
    if nr > MAX_CALLCHAIN || (nr as usize) * 8 > c.remaining() {
        return None;
    }
    let mut callchain = Vec::with_capacity(nr as usize);
    for _ in 0..nr {
        let a = c.u64()?;
        if a < PERF_CONTEXT_MAX && a != 0 {
            callchain.push(a);
        }
    }
    if callchain.is_empty() && ip != 0 {
        callchain.push(ip);
    }
    if let Some(unwinder) = &mut out.unwinder {
        callchain = match read_user_stack(c)? {
            Some(stack) => unwinder.unwind(id.pid, &stack, &callchain),
            None => {
                unwinder.count_without_copy();
                callchain
            }
        };
    }
    let chain = out.samples.chains.id(callchain);
    out.samples.samples.push(KeptSample {
        time_ns: id.time_ns,
        tid: id.tid,
        cpu: id.cpu,
        chain,
        pid: id.pid,
    });
    Some(())
}

/// A mapping of a file (or anonymous memory) into the process.
fn parse_mmap(ty: u32, body: &[u8], c: &mut Cursor<'_>, out: &mut Parsed) -> Option<()> {
    let (pid, _tid) = (c.u32()?, c.u32()?);
    let (start, len, pgoff) = (c.u64()?, c.u64()?, c.u64()?);
    if ty == PERF_RECORD_MMAP2 {
        // maj, min, ino, ino_generation (or build id), prot, flags.
        c.bytes(24 + 8)?;
    }
    let name = padded_str(body, c.pos())?;
    let t = SampleId::trailer(body)?;
    let path = PathBuf::from(OsStr::from_bytes(name));
    if let Some(unwinder) = &mut out.unwinder {
        unwinder.on_mmap(pid, t.time_ns, (start, len, pgoff), &path);
    }
    out.maps.push(Mapping {
        time_ns: t.time_ns,
        pid,
        start,
        len,
        pgoff,
        path,
    });
    Some(())
}

/// A thread's new name, and an exec when the record says so.
fn parse_comm(misc: u16, body: &[u8], c: &mut Cursor<'_>, out: &mut Parsed) -> Option<()> {
    let (pid, tid) = (c.u32()?, c.u32()?);
    let name = padded_str(body, c.pos())?;
    let t = SampleId::trailer(body)?;
    out.comms.push(Comm {
        time_ns: t.time_ns,
        tid,
        name: String::from_utf8_lossy(name).into_owned(),
    });
    if misc & PERF_RECORD_MISC_COMM_EXEC != 0 {
        if let Some(unwinder) = &mut out.unwinder {
            unwinder.on_exec(pid, t.time_ns);
        }
        out.execs.push(ExecEvent {
            time_ns: t.time_ns,
            pid,
        });
    }
    Some(())
}

/// A new process or thread.
fn parse_fork(c: &mut Cursor<'_>, out: &mut Parsed) -> Option<()> {
    let (pid, ppid, tid, ptid) = (c.u32()?, c.u32()?, c.u32()?, c.u32()?);
    let time_ns = c.u64()?;
    if let Some(unwinder) = &mut out.unwinder
        && pid != ppid
    {
        unwinder.on_fork(pid, ppid);
    }
    out.forks.push(ForkEvent {
        time_ns,
        pid,
        ppid,
        tid,
        ptid,
    });
    Some(())
}

impl Parsed {
    /// The records, with the samples of `switch_stacks` (the switch-stack rings) as switch
    /// samples.
    fn into_collected(
        self,
        switch_stacks: Parsed,
        capabilities: Capabilities,
        period_ns: u64,
        steal_ns: Option<u64>,
    ) -> Collected {
        let Parsed {
            switches,
            samples,
            maps,
            comms,
            forks,
            execs,
            lost,
            malformed,
            unwinder,
        } = self;
        let (lost, malformed) = (
            lost.saturating_add(switch_stacks.lost),
            malformed.saturating_add(switch_stacks.malformed),
        );
        let thread_names = thread_names(&comms, &forks);
        let thread_starts = thread_starts(&forks);
        let kept = |k: KeptSamples| (k.samples.finish(), k.chains.finish());
        Collected {
            kernel: KernelRecords {
                capabilities,
                thread_starts,
                call_chains: unwinder.map(|u| u.counts()).unwrap_or_default(),
                sample_period_ns: period_ns,
                lost_records: lost,
                malformed_records: malformed,
                thread_names,
                steal_ns,
                ..KernelRecords::default()
            },
            addresses: SampleAddresses {
                side_band: SideBand { maps, forks, execs },
                ..SampleAddresses::default()
            },
            lists: KeptLists {
                switches: Arc::new(switches.finish()),
                samples: [kept(samples), kept(switch_stacks.samples)],
            },
        }
    }
}

/// The threads the process created, from its fork records, in time order.
fn thread_starts(forks: &[ForkEvent]) -> Vec<ThreadStart> {
    let mut starts: Vec<ThreadStart> = forks
        .iter()
        .filter(|f| f.pid == f.ppid && f.tid != f.pid)
        .map(|f| ThreadStart {
            time_ns: f.time_ns,
            tid: f.tid,
        })
        .collect();
    starts.sort_by_key(|s| (s.time_ns, s.tid));
    starts
}

/// The last name of every thread. A new thread has its creator's name until it renames
/// itself, and the kernel reports only renames, so names are passed down the fork records.
fn thread_names(comms: &[Comm], forks: &[ForkEvent]) -> Vec<(u32, String)> {
    enum Ev<'a> {
        Fork(&'a ForkEvent),
        Comm(&'a Comm),
    }
    let mut events: Vec<(u64, u8, Ev)> = Vec::with_capacity(comms.len() + forks.len());
    // At equal times a fork comes first: a thread can only rename itself once it exists.
    events.extend(forks.iter().map(|f| (f.time_ns, 0, Ev::Fork(f))));
    events.extend(comms.iter().map(|c| (c.time_ns, 1, Ev::Comm(c))));
    events.sort_by_key(|(t, order, _)| (*t, *order));
    let mut names: HashMap<u32, String> = HashMap::new();
    for (_, _, ev) in events {
        match ev {
            Ev::Fork(f) => {
                if let Some(n) = names.get(&f.ptid).cloned() {
                    names.entry(f.tid).or_insert(n);
                }
            }
            Ev::Comm(c) => {
                names.insert(c.tid, c.name.clone());
            }
        }
    }
    let mut out: Vec<(u32, String)> = names.into_iter().collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::kernel_records::SwitchKind;

    fn trailer_bytes(pid: u32, tid: u32, time: u64, cpu: u32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(pid.to_ne_bytes());
        v.extend(tid.to_ne_bytes());
        v.extend(time.to_ne_bytes());
        v.extend(cpu.to_ne_bytes());
        v.extend(0u32.to_ne_bytes());
        v
    }

    #[test]
    fn switch_misc_bits_decide_the_kind() {
        let mut p = Parsed::default();
        for (time_ns, misc) in [(100, 0), (101, 0x2000), (102, 0x6000)] {
            let body = trailer_bytes(1, 2, time_ns, 1);
            parse_record(PERF_RECORD_SWITCH, misc, &body, &mut p).unwrap();
        }
        let switches: Vec<SwitchRecord> = p.switches.finish().walk().collect();
        let kinds: Vec<_> = switches.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            [
                SwitchKind::In,
                SwitchKind::OutVoluntary,
                SwitchKind::OutPreempted
            ]
        );
        assert_eq!(
            (switches[0].tid, switches[0].time_ns, switches[0].cpu),
            (2, 100, 1)
        );
    }

    #[test]
    fn samples_drop_context_markers_and_malformed_records_are_rejected() {
        let mut body = Vec::new();
        body.extend(0x1234u64.to_ne_bytes());
        body.extend(7u32.to_ne_bytes());
        body.extend(8u32.to_ne_bytes());
        body.extend(55u64.to_ne_bytes());
        body.extend(1u32.to_ne_bytes());
        body.extend(0u32.to_ne_bytes());
        body.extend(3u64.to_ne_bytes());
        body.extend((-512i64 as u64).to_ne_bytes()); // PERF_CONTEXT_USER
        body.extend(0x1234u64.to_ne_bytes());
        body.extend(0x5678u64.to_ne_bytes());
        let mut p = Parsed::default();
        parse_record(PERF_RECORD_SAMPLE, 0, &body, &mut p).unwrap();
        let kept = std::mem::take(&mut p.samples);
        let sample = kept.samples.finish().walk().next().unwrap();
        assert_eq!(
            *kept.chains.finish()[sample.chain as usize],
            [0x1234, 0x5678]
        );
        assert_eq!(sample.pid, 7);

        // Truncated chain, and an absurd `nr`.
        assert!(parse_record(PERF_RECORD_SAMPLE, 0, &body[..body.len() - 4], &mut p).is_none());
        let mut huge = body.clone();
        huge[32..40].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert!(parse_record(PERF_RECORD_SAMPLE, 0, &huge, &mut p).is_none());
        assert!(parse_record(PERF_RECORD_SWITCH, 0, &[0; 7], &mut p).is_none());
        assert!(parse_record(PERF_RECORD_MMAP2, 0, &[0; 30], &mut p).is_none());
    }

    #[test]
    fn thread_names_follow_forks_and_renames() {
        let comms = vec![
            Comm {
                time_ns: 1,
                tid: 10,
                name: "main".into(),
            },
            Comm {
                time_ns: 5,
                tid: 11,
                name: "worker".into(),
            },
        ];
        let forks = vec![
            ForkEvent {
                time_ns: 3,
                pid: 10,
                ppid: 10,
                tid: 11,
                ptid: 10,
            },
            ForkEvent {
                time_ns: 4,
                pid: 10,
                ppid: 10,
                tid: 12,
                ptid: 10,
            },
        ];
        assert_eq!(
            thread_names(&comms, &forks),
            [
                (10, "main".into()),
                (11, "worker".into()),
                (12, "main".into())
            ]
        );
    }
}
