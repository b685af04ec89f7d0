//! Counters for `cargo parprof --counters LIST`: collection on the profiled process and
//! everything it starts, read periodically, with timestamps on `CLOCK_MONOTONIC` (the time
//! line of the kernel's other records), plus the counters derived from the threads' switch
//! records, exact at every switch point.
//!
//! Per online CPU, one counting group is opened on the (not yet exec'd) child with `inherit`,
//! so every thread it starts is counted, user space only (`exclude_kernel`, which is what
//! `perf_event_paranoid = 2` allows an unprivileged user): a cpu-clock leader that only
//! counts, and the requested counters as members. Nothing samples: between reads a group
//! costs the program only the kernel's bookkeeping at its context switches.
//!
//! A collector thread of the profiler (never the program: no system call per probe event)
//! reads every group with `read()` every `read_interval_ns` — the totals of all threads on
//! that CPU, exited ones included. The reads are the program-wide series (method 3) and the
//! per-CPU work (method 4). Each read interrupts the CPU where the group is counting: that is
//! the price of a short interval.
//!
//! `context-switches` and `cpu-migrations` are counted by the kernel in kernel mode, so
//! with `exclude_kernel` they stay at 0; they are derived from the switch records that
//! [`crate::record::collect`] takes anyway, which gives their exact value at every switch point.
//!
//! Multiplexing: a CPU's group is enabled while any thread of the program runs (anywhere)
//! and running while one runs on that CPU with the group on the PMU, so over all CPUs the
//! running times add up to the enabled time unless the PMU could not count the hardware
//! groups all the time. Each delta between two read passes is then scaled by the ratio of
//! the two times' increments, and both totals are reported per counter ([`Scaling`]).
//! Software-only groups are never multiplexed.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use perf_event::events::{Event, Hardware, Software};
use perf_event::{Builder, Counter, ReadFormat};

use crate::record::perf::{
    CollectorThread, Cursor, Follow, StopSignal, describe_errno, monotonic_ns, online_cpus,
    open_per_cpu, task_builder,
};
use crate::recording::counters::{
    CounterRecords, CounterSample, CounterSeries, CounterSource, ReadCost, Scaling, SeriesSource,
    StoredSeries, UnavailableCounter,
};
use crate::recording::kernel_records::{Capability, SwitchKind, SwitchRecord, SwitchWalk};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Hardware(Hardware),
    Software(Software),
    ContextSwitches,
    CpuMigrations,
}

/// The counters `--counters` knows: perf's names (and its aliases), then what they are.
const KNOWN: &[(&str, &[&str], Kind)] = &[
    ("instructions", &[], Kind::Hardware(Hardware::INSTRUCTIONS)),
    (
        "cycles",
        &["cpu-cycles"],
        Kind::Hardware(Hardware::CPU_CYCLES),
    ),
    ("ref-cycles", &[], Kind::Hardware(Hardware::REF_CPU_CYCLES)),
    ("bus-cycles", &[], Kind::Hardware(Hardware::BUS_CYCLES)),
    (
        "cache-references",
        &[],
        Kind::Hardware(Hardware::CACHE_REFERENCES),
    ),
    ("cache-misses", &[], Kind::Hardware(Hardware::CACHE_MISSES)),
    (
        "branches",
        &["branch-instructions"],
        Kind::Hardware(Hardware::BRANCH_INSTRUCTIONS),
    ),
    (
        "branch-misses",
        &[],
        Kind::Hardware(Hardware::BRANCH_MISSES),
    ),
    (
        "stalled-cycles-frontend",
        &["idle-cycles-frontend"],
        Kind::Hardware(Hardware::STALLED_CYCLES_FRONTEND),
    ),
    (
        "stalled-cycles-backend",
        &["idle-cycles-backend"],
        Kind::Hardware(Hardware::STALLED_CYCLES_BACKEND),
    ),
    ("task-clock", &[], Kind::Software(Software::TASK_CLOCK)),
    ("cpu-clock", &[], Kind::Software(Software::CPU_CLOCK)),
    (
        "page-faults",
        &["faults"],
        Kind::Software(Software::PAGE_FAULTS),
    ),
    (
        "minor-faults",
        &[],
        Kind::Software(Software::PAGE_FAULTS_MIN),
    ),
    (
        "major-faults",
        &[],
        Kind::Software(Software::PAGE_FAULTS_MAJ),
    ),
    (
        "alignment-faults",
        &[],
        Kind::Software(Software::ALIGNMENT_FAULTS),
    ),
    (
        "emulation-faults",
        &[],
        Kind::Software(Software::EMULATION_FAULTS),
    ),
    ("context-switches", &["cs"], Kind::ContextSwitches),
    ("cpu-migrations", &["migrations"], Kind::CpuMigrations),
];

/// Asked for when `--counters` is not given: the hardware counters are used where the
/// machine has them and listed as unavailable otherwise; the software ones always work.
pub const DEFAULT_COUNTERS: &str =
    "instructions,cycles,cache-misses,task-clock,page-faults,context-switches,cpu-migrations";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CounterDef {
    name: &'static str,
    kind: Kind,
}

impl CounterDef {
    fn source(&self) -> CounterSource {
        match self.kind {
            Kind::Hardware(_) => CounterSource::Hardware,
            Kind::Software(_) => CounterSource::Software,
            Kind::ContextSwitches | Kind::CpuMigrations => CounterSource::SwitchRecords,
        }
    }
}

/// A parsed `--counters` list, without duplicates, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterSet {
    counters: Vec<CounterDef>,
}

/// A name `--counters` does not know.
#[derive(Debug, PartialEq, Eq)]
pub struct UnknownCounter {
    pub name: String,
    pub suggestion: Option<&'static str>,
}

impl fmt::Display for UnknownCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown counter `{}`", self.name)?;
        if let Some(s) = self.suggestion {
            write!(f, " (did you mean `{s}`?)")?;
        }
        let known: Vec<&str> = KNOWN.iter().map(|(n, _, _)| *n).collect();
        write!(f, "; known counters: {}", known.join(", "))
    }
}

impl std::error::Error for UnknownCounter {}

impl CounterSet {
    /// Parses a comma-separated list of perf counter names, e.g. `instructions,page-faults`.
    /// An empty list is the empty set.
    pub fn parse(list: &str) -> Result<CounterSet, UnknownCounter> {
        let mut counters: Vec<CounterDef> = Vec::new();
        for raw in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let lower = raw.to_ascii_lowercase();
            let Some(&(name, _, kind)) = KNOWN
                .iter()
                .find(|(n, aliases, _)| *n == lower || aliases.contains(&lower.as_str()))
            else {
                let suggestion = KNOWN
                    .iter()
                    .map(|(n, _, _)| (strsim::jaro_winkler(n, &lower), *n))
                    .filter(|(score, _)| *score > 0.8)
                    .max_by(|a, b| a.0.total_cmp(&b.0))
                    .map(|(_, n)| n);
                return Err(UnknownCounter {
                    name: raw.to_string(),
                    suggestion,
                });
            };
            if !counters.iter().any(|c| c.name == name) {
                counters.push(CounterDef { name, kind });
            }
        }
        Ok(CounterSet { counters })
    }

    pub fn default_set() -> CounterSet {
        // The default list only names known counters.
        CounterSet::parse(DEFAULT_COUNTERS).unwrap_or(CounterSet {
            counters: Vec::new(),
        })
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.counters.iter().map(|c| c.name).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }
}

#[derive(Clone, Debug)]
pub struct CounterOptions {
    pub counters: CounterSet,
    /// How often the collector reads every CPU's counters.
    pub read_interval_ns: u64,
    /// Behave as if the kernel refused `perf_event_open` (`EACCES`), for tests of the
    /// degraded mode (see [`crate::record::collect::SIMULATE_REFUSED_ENV`]).
    pub simulate_refused: bool,
    /// Which tasks the counters follow (as the collector's events).
    pub follow: Follow,
}

impl Default for CounterOptions {
    fn default() -> Self {
        CounterOptions {
            counters: CounterSet::default_set(),
            // Each read interrupts every CPU the program runs on: on a saturated 2-core VM,
            // reads every 1 ms cost the program 3% of its time, every 10 ms under 1%.
            // Method 3 interpolates in between (`--counter-interval` for finer reads).
            read_interval_ns: 10_000_000,
            simulate_refused: false,
            follow: Follow::default(),
        }
    }
}

/// A running collection, from [`CounterCollector::attach`] to [`CounterCollector::finish`].
pub struct CounterCollector {
    /// The counters read from the groups, in the order of the groups' members.
    group_counters: Vec<CounterDef>,
    derived: Vec<CounterDef>,
    unavailable: Vec<UnavailableCounter>,
    read_interval_ns: u64,
    follow: Follow,
    worker: Option<CollectorThread<Gathered>>,
}

/// One CPU's group: the leader and the members' fds, kept open.
struct CpuGroup {
    cpu: u32,
    leader: Counter,
    /// The kernel's id of each member, in the order of `CounterCollector::group_counters`.
    member_ids: Vec<u64>,
    _members: Vec<Counter>,
}

fn read_format() -> ReadFormat {
    ReadFormat::GROUP
        | ReadFormat::ID
        | ReadFormat::TOTAL_TIME_ENABLED
        | ReadFormat::TOTAL_TIME_RUNNING
}

fn base_builder<'a, E: Event>(
    event: E,
    pid: u32,
    cpu: Option<usize>,
    follow: Follow,
) -> Builder<'a> {
    let mut b = task_builder(event, pid, cpu, follow);
    b.read_format(read_format());
    b
}

fn member_builder<'a>(
    kind: Kind,
    pid: u32,
    cpu: Option<usize>,
    follow: Follow,
) -> Option<Builder<'a>> {
    match kind {
        Kind::Hardware(h) => Some(base_builder(h, pid, cpu, follow)),
        Kind::Software(s) => Some(base_builder(s, pid, cpu, follow)),
        Kind::ContextSwitches | Kind::CpuMigrations => None,
    }
}

impl CounterCollector {
    /// Opens the counters on `pid`, a forked child that has not called `exec` yet: counting
    /// starts at its `exec` (`enable_on_exec`). Refusals are not errors: every counter that cannot be
    /// collected is listed in [`CounterCollector::unavailable`] with the reason.
    pub fn attach(pid: u32, opts: &CounterOptions) -> CounterCollector {
        let mut unavailable = Vec::new();
        let mut group_counters = Vec::new();
        let mut derived = Vec::new();
        for def in &opts.counters.counters {
            if opts.simulate_refused {
                let refused = io::Error::from_raw_os_error(libc::EACCES);
                unavailable.push(UnavailableCounter {
                    name: def.name.to_string(),
                    reason: format!("{} (simulated)", refusal_reason(def, &refused)),
                });
                continue;
            }
            match member_builder(def.kind, pid, None, opts.follow) {
                None => derived.push(*def),
                // Each counter alone first, so that one the machine lacks is named with its
                // own reason instead of failing the whole group.
                Some(b) => match b.build() {
                    Ok(_) => group_counters.push(*def),
                    Err(e) => unavailable.push(UnavailableCounter {
                        name: def.name.to_string(),
                        reason: refusal_reason(def, &e),
                    }),
                },
            }
        }

        let mut collector = CounterCollector {
            group_counters,
            derived,
            unavailable,
            read_interval_ns: opts.read_interval_ns.max(10_000),
            follow: opts.follow,
            worker: None,
        };
        if collector.group_counters.is_empty() {
            return collector;
        }
        let groups = collector.open_groups(pid);
        if groups.is_empty() {
            return collector;
        }
        let interval = Duration::from_nanos(collector.read_interval_ns);
        let n_members = collector.group_counters.len();
        let spawned = CollectorThread::spawn("parprof-counters", move |stop| {
            gather_until_stopped(groups, n_members, interval, stop)
        });
        match spawned {
            Ok(thread) => collector.worker = Some(thread),
            Err(e) => {
                let reason = format!("could not start the counter collector thread: {e}");
                collector.groups_unavailable(&reason);
            }
        }
        collector
    }

    pub fn unavailable(&self) -> &[UnavailableCounter] {
        &self.unavailable
    }

    fn groups_unavailable(&mut self, reason: &str) {
        for def in self.group_counters.drain(..) {
            self.unavailable.push(UnavailableCounter {
                name: def.name.to_string(),
                reason: reason.to_string(),
            });
        }
    }

    /// One group per online CPU; none if any CPU's group cannot be opened.
    fn open_groups(&mut self, pid: u32) -> Vec<CpuGroup> {
        match open_per_cpu(&online_cpus(), |cpu| self.open_group(pid, cpu)) {
            Ok(groups) => groups,
            Err(e) => {
                self.groups_unavailable(&format!(
                    "perf_event_open of the counter group failed: {}",
                    describe_errno(&e)
                ));
                Vec::new()
            }
        }
    }

    fn open_group(&self, pid: u32, cpu: usize) -> io::Result<CpuGroup> {
        let mut lb = base_builder(Software::CPU_CLOCK, pid, Some(cpu), self.follow);
        lb.enable_on_exec(true).enabled(false);
        let mut leader = lb.build()?;
        let mut members = Vec::with_capacity(self.group_counters.len());
        for def in &self.group_counters {
            let Some(mut b) = member_builder(def.kind, pid, Some(cpu), self.follow) else {
                continue;
            };
            // Members follow their leader's enabling.
            b.enabled(true);
            members.push(b.build_with_group(&mut leader)?);
        }
        Ok(CpuGroup {
            cpu: cpu as u32,
            member_ids: members.iter().map(Counter::id).collect(),
            leader,
            _members: members,
        })
    }

    /// Stops the collection after one last read. Call it after the child has exited, so
    /// that the last read holds the final counts of every thread. `switches` are the
    /// program's switch records from [`crate::record::collect`]: the derived counters are
    /// counted from them each time they are walked (not held: one reading per switch).
    pub fn finish(self, switches: &SharedSwitches, switch_records: &Capability) -> CounterRecords {
        let gathered = self
            .worker
            .map_or_else(Gathered::default, CollectorThread::finish);
        let mut records = build_records(
            &self.group_counters,
            self.unavailable,
            gathered,
            self.read_interval_ns,
        );
        for def in &self.derived {
            if switch_records.available {
                records.counters.push(derived_series(def, switches));
            } else {
                records.unavailable.push(UnavailableCounter {
                    name: def.name.to_string(),
                    reason: format!(
                        "counted from context-switch records, which are unavailable: {}",
                        switch_records.reason.as_deref().unwrap_or("not collected")
                    ),
                });
            }
        }
        // In the order asked for.
        let order = |name: &str| {
            self.group_counters
                .iter()
                .chain(&self.derived)
                .position(|d| d.name == name)
                .unwrap_or(usize::MAX)
        };
        records.counters.sort_by_key(|s| order(&s.name));
        records
    }
}

fn refusal_reason(def: &CounterDef, e: &io::Error) -> String {
    let errno = describe_errno(e);
    match (def.kind, e.raw_os_error()) {
        (Kind::Hardware(_), Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV)) => format!(
            "hardware counter unavailable ({errno}): this machine exposes no hardware PMU to \
             user space (typical of virtual machines)"
        ),
        (_, Some(libc::EACCES | libc::EPERM)) => format!(
            "perf_event_open was refused ({errno}); allow it with `sudo sysctl \
             kernel.perf_event_paranoid=2` (or lower)"
        ),
        _ => format!("perf_event_open failed ({errno})"),
    }
}

/// A group's values as the kernel returns them (`PERF_FORMAT_GROUP | ID |
/// TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING`), by member id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct GroupRead {
    time_enabled: u64,
    time_running: u64,
    values: Vec<(u64, u64)>,
}

impl GroupRead {
    fn value_of(&self, id: u64) -> Option<u64> {
        self.values.iter().find(|(i, _)| *i == id).map(|(_, v)| *v)
    }
}

/// Bounds what one corrupt `nr` can make us allocate.
const MAX_GROUP: u64 = 64;

fn parse_group_read(c: &mut Cursor<'_>) -> Option<GroupRead> {
    let nr = c.u64()?;
    if nr > MAX_GROUP {
        return None;
    }
    let time_enabled = c.u64()?;
    let time_running = c.u64()?;
    let mut values = Vec::with_capacity(nr as usize);
    for _ in 0..nr {
        let value = c.u64()?;
        let id = c.u64()?;
        values.push((id, value));
    }
    Some(GroupRead {
        time_enabled,
        time_running,
        values,
    })
}

/// One pass of the collector over every CPU's group.
#[derive(Clone, Debug, Default)]
struct ReadPass {
    time_ns: u64,
    /// Per group, in the order of the groups.
    reads: Vec<Option<GroupRead>>,
}

#[derive(Default)]
struct Gathered {
    /// CPU and member ids of every group, in order.
    groups: Vec<(u32, Vec<u64>)>,
    passes: Vec<ReadPass>,
    read_cost: ReadCost,
}

fn read_group_fd(fd: i32, buf: &mut [u8]) -> Option<GroupRead> {
    // SAFETY: `buf` is valid for `buf.len()` bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    let n = usize::try_from(n).ok()?;
    parse_group_read(&mut Cursor::new(&buf[..n]))
}

fn gather_until_stopped(
    groups: Vec<CpuGroup>,
    n_members: usize,
    interval: Duration,
    stop: &StopSignal,
) -> Gathered {
    let mut g = Gathered {
        groups: groups
            .iter()
            .map(|g| (g.cpu, g.member_ids.clone()))
            .collect(),
        ..Gathered::default()
    };
    // nr, two times, then (value, id) for the leader and every member.
    let mut buf = vec![0u8; 8 * (3 + 2 * (n_members + 1))];
    loop {
        let stopping = stop.is_raised();
        let before = monotonic_ns();
        let reads = groups
            .iter()
            .map(|cg| read_group_fd(cg.leader.as_raw_fd(), &mut buf))
            .collect();
        let after = monotonic_ns();
        g.read_cost.passes += 1;
        g.read_cost.total_ns += after.saturating_sub(before);
        g.passes.push(ReadPass {
            time_ns: before + (after.saturating_sub(before)) / 2,
            reads,
        });
        if stopping {
            return g;
        }
        stop.wait(&mut [], interval);
    }
}

/// The cumulative value of one counter, its deltas scaled for multiplexing.
#[derive(Clone, Copy, Default)]
struct Scaler {
    last_raw: u64,
    scaled_total: f64,
}

impl Scaler {
    /// The scaled cumulative value after a reading whose delta is scaled by `factor`.
    fn push(&mut self, raw: u64, factor: f64) -> f64 {
        self.scaled_total += raw.saturating_sub(self.last_raw) as f64 * factor;
        self.last_raw = raw;
        self.scaled_total
    }
}

/// How much to scale a delta up: `should` is the time the counter should have counted,
/// `counted` the time it did. Only hardware counters are multiplexed; software-only groups
/// always count while the program runs on their CPU.
fn multiplexing_factor(hardware: bool, should: u64, counted: u64) -> f64 {
    if hardware && counted > 0 && should > counted {
        should as f64 / counted as f64
    } else {
        1.0
    }
}

fn build_records(
    group_counters: &[CounterDef],
    mut unavailable: Vec<UnavailableCounter>,
    gathered: Gathered,
    read_interval_ns: u64,
) -> CounterRecords {
    let mut series: Vec<CounterSeries> = group_counters
        .iter()
        .map(|d| CounterSeries {
            name: d.name.to_string(),
            source: d.source(),
            cpu_samples: Vec::new(),
            scaling: Scaling::default(),
            stored: None,
        })
        .collect();
    let hardware = group_counters
        .iter()
        .any(|d| d.source() == CounterSource::Hardware);

    let (factors, scaling) = multiplexing(&gathered, hardware);
    for s in &mut series {
        s.scaling = scaling;
    }
    push_cpu_samples(&gathered, &factors, &mut series);
    for s in &mut series {
        s.cpu_samples.sort_by_key(|c| (c.time_ns, c.cpu));
    }

    // A group that was enabled but never counted (the PMU had too few counters for it).
    let mut kept = Vec::with_capacity(series.len());
    for s in series {
        if s.scaling.time_enabled_ns > 0 && s.scaling.time_running_ns == 0 {
            unavailable.push(UnavailableCounter {
                name: s.name,
                reason: "enabled but never counted (time_running is 0): the PMU could not \
                         schedule the counter group; ask for fewer hardware counters"
                    .to_string(),
            });
        } else {
            kept.push(s);
        }
    }

    CounterRecords {
        counters: kept,
        unavailable,
        read_interval_ns,
        read_cost: gathered.read_cost,
    }
}

/// Each pass's multiplexing factor, and the scaling of the whole run.
///
/// Each CPU's group is bound to the program's threads and to that CPU. The kernel counts
/// its `time_enabled` while a thread of the program runs on any CPU, and its
/// `time_running` while it runs on that CPU and the group is on the PMU, so a group's own
/// ratio is not multiplexing. Over all CPUs, the running times of a pass add up to the
/// enabled time of any one group (the program's CPU time) unless the PMU multiplexed the
/// groups: the factor of a pass is their ratio, applied to every CPU's delta.
fn multiplexing(gathered: &Gathered, hardware: bool) -> (Vec<f64>, Scaling) {
    let mut last_times: Vec<(u64, u64)> = vec![(0, 0); gathered.groups.len()];
    let mut factors = Vec::with_capacity(gathered.passes.len());
    for pass in &gathered.passes {
        let (mut should, mut counted) = (0u64, 0u64);
        for (gi, read) in pass.reads.iter().enumerate() {
            let (Some(read), Some(last)) = (read, last_times.get_mut(gi)) else {
                continue;
            };
            should = should.max(read.time_enabled.saturating_sub(last.0));
            counted += read.time_running.saturating_sub(last.1);
            *last = (read.time_enabled, read.time_running);
        }
        factors.push(multiplexing_factor(hardware, should, counted));
    }
    let (total_should, total_counted) = last_times
        .iter()
        .fold((0, 0), |(s, c), &(e, r)| (s.max(e), c + r));
    let scaling = Scaling {
        time_enabled_ns: total_should,
        time_running_ns: total_counted,
        // Reads of the CPUs follow each other: allow for the time between them.
        scaled: hardware && (total_counted as f64) < 0.999 * total_should as f64,
    };
    (factors, scaling)
}

/// Every CPU's reads, scaled by their pass's factor, into the series of its counter.
fn push_cpu_samples(gathered: &Gathered, factors: &[f64], series: &mut [CounterSeries]) {
    for (gi, (cpu, ids)) in gathered.groups.iter().enumerate() {
        let mut scalers = vec![Scaler::default(); ids.len()];
        for (pass, &factor) in gathered.passes.iter().zip(factors) {
            let Some(Some(read)) = pass.reads.get(gi) else {
                continue;
            };
            for (mi, id) in ids.iter().enumerate() {
                let (Some(raw), Some(s)) = (read.value_of(*id), series.get_mut(mi)) else {
                    continue;
                };
                let value = scalers[mi].push(raw, factor);
                s.cpu_samples.push(CounterSample {
                    time_ns: pass.time_ns,
                    cpu: *cpu,
                    value,
                });
            }
        }
    }
}

/// `context-switches` (one per switch-out of a thread) or `cpu-migrations` (a thread
/// switched in on another CPU than it last ran on), exact at every switch; `switches` sorted
/// by time.
/// Switch records kept by the collector, walked in time order as often as needed.
pub type SharedSwitches = Arc<dyn SwitchWalk + Send + Sync>;

fn derived_series(def: &CounterDef, switches: &SharedSwitches) -> CounterSeries {
    let source = CountedFromSwitches {
        kind: def.kind,
        switches: Arc::clone(switches),
    };
    CounterSeries {
        name: def.name.to_string(),
        source: def.source(),
        cpu_samples: Vec::new(),
        scaling: Scaling::default(),
        stored: Some(StoredSeries {
            source: Arc::new(source),
            index: 0,
        }),
    }
}

/// A counter counted from the switch records, each time its readings are walked.
#[derive(Debug)]
struct CountedFromSwitches {
    kind: Kind,
    switches: SharedSwitches,
}

impl SeriesSource for CountedFromSwitches {
    fn series_samples(&self, _index: usize) -> Box<dyn Iterator<Item = CounterSample> + '_> {
        Box::new(readings_from_switches(self.kind, self.switches.walk()))
    }
}

/// The readings of a counter of `kind` counted from `switches` (in time order): one per
/// switch it counts, the count of its CPU so far.
fn readings_from_switches(
    kind: Kind,
    switches: impl Iterator<Item = SwitchRecord>,
) -> impl Iterator<Item = CounterSample> {
    let mut per_cpu: BTreeMap<u32, u64> = BTreeMap::new();
    let mut last_cpu: HashMap<u32, u32> = HashMap::new();
    switches.filter_map(move |s| {
        let counts = match (kind, s.kind) {
            (Kind::ContextSwitches, SwitchKind::OutPreempted | SwitchKind::OutVoluntary) => true,
            (Kind::CpuMigrations, SwitchKind::In) => {
                last_cpu.insert(s.tid, s.cpu).is_some_and(|c| c != s.cpu)
            }
            _ => false,
        };
        counts.then(|| {
            let on_cpu = per_cpu.entry(s.cpu).or_default();
            *on_cpu += 1;
            CounterSample {
                time_ns: s.time_ns,
                cpu: s.cpu,
                value: *on_cpu as f64,
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    // The real-task test checks what collection is for: attribution within its error bound.
    use crate::analysis::attribution::{self, Share, Span, process_series};

    #[test]
    fn counter_lists_parse_with_aliases_and_without_duplicates() {
        let set =
            CounterSet::parse(" instructions, cs,faults,page-faults ,CPU-MIGRATIONS,").unwrap();
        assert_eq!(
            set.names(),
            [
                "instructions",
                "context-switches",
                "page-faults",
                "cpu-migrations"
            ]
        );
        assert!(CounterSet::parse("").unwrap().is_empty());
        assert_eq!(
            CounterSet::default_set().names(),
            DEFAULT_COUNTERS.split(',').collect::<Vec<_>>()
        );
    }

    #[test]
    fn an_unknown_counter_is_an_error_that_lists_the_known_ones() {
        let err = CounterSet::parse("page-faults,instructons").unwrap_err();
        assert_eq!(err.name, "instructons");
        assert_eq!(err.suggestion, Some("instructions"));
        let text = err.to_string();
        assert!(text.starts_with("unknown counter `instructons` (did you mean `instructions`?)"));
        for (name, _, _) in KNOWN {
            assert!(text.contains(name), "{text}");
        }
        assert_eq!(CounterSet::parse("xyzzy").unwrap_err().suggestion, None);
    }

    fn read(enabled: u64, running: u64, values: &[(u64, u64)]) -> GroupRead {
        GroupRead {
            time_enabled: enabled,
            time_running: running,
            values: values.to_vec(),
        }
    }

    fn def(name: &str) -> CounterDef {
        let set = CounterSet::parse(name).unwrap();
        set.counters[0]
    }

    /// The hardware path on synthetic reads. Each CPU's group is enabled while the program
    /// runs anywhere and runs while it runs on that CPU, so the running times of all CPUs add
    /// up to the enabled time unless the PMU multiplexed them: here they counted half of the
    /// first interval, and the deltas of that interval are doubled.
    #[test]
    fn multiplexed_hardware_counters_are_scaled_per_interval() {
        let counters = [def("instructions"), def("cache-misses")];
        // Member ids: 11, 12 on CPU 0 and 21, 22 on CPU 1; the leader (id 10/20) is ignored.
        let gathered = Gathered {
            groups: vec![(0, vec![11, 12]), (1, vec![21, 22])],
            passes: vec![
                ReadPass {
                    time_ns: 1000,
                    reads: vec![
                        Some(read(100, 25, &[(10, 7), (11, 1000), (12, 10)])),
                        Some(read(100, 25, &[(21, 500), (22, 5)])),
                    ],
                },
                ReadPass {
                    time_ns: 2000,
                    reads: vec![
                        // 60 + 40 of the 100 ns the program ran: no multiplexing.
                        Some(read(200, 85, &[(11, 1600), (12, 12)])),
                        Some(read(200, 65, &[(21, 600), (22, 6)])),
                    ],
                },
                ReadPass {
                    time_ns: 3000,
                    reads: vec![Some(read(300, 185, &[(11, 1700), (12, 13)])), None],
                },
            ],
            ..Gathered::default()
        };
        let r = build_records(&counters, Vec::new(), gathered, 1000);
        let instr = r.counter("instructions").unwrap();
        assert_eq!(instr.source, CounterSource::Hardware);
        let values: Vec<(u64, u32, f64)> = instr
            .cpu_samples
            .iter()
            .map(|s| (s.time_ns, s.cpu, s.value))
            .collect();
        assert_eq!(
            values,
            [
                (1000, 0, 2000.0),
                (1000, 1, 1000.0),
                (2000, 0, 2600.0),
                (2000, 1, 1100.0),
                (3000, 0, 2700.0)
            ]
        );
        assert_eq!(
            instr.scaling,
            Scaling {
                time_enabled_ns: 300,
                time_running_ns: 250,
                scaled: true
            }
        );
        assert_eq!(instr, &crate::recording::counters::tests::two_cpu_series());
        assert_eq!(r.counter("cache-misses").unwrap().total(), 23.0 + 11.0);
    }

    /// Software counters are never multiplexed: a CPU's share of the program's time is not
    /// scaled up, however small.
    #[test]
    fn software_counters_are_not_scaled() {
        let gathered = Gathered {
            groups: vec![(0, vec![11]), (1, vec![21])],
            passes: vec![ReadPass {
                time_ns: 1000,
                reads: vec![
                    Some(read(100, 90, &[(11, 30)])),
                    Some(read(100, 10, &[(21, 4)])),
                ],
            }],
            ..Gathered::default()
        };
        let r = build_records(&[def("page-faults")], Vec::new(), gathered, 1000);
        let pf = r.counter("page-faults").unwrap();
        assert_eq!(pf.total(), 34.0);
        assert!(!pf.scaling.scaled);
        assert_eq!(
            (pf.scaling.time_enabled_ns, pf.scaling.time_running_ns),
            (100, 100)
        );
    }

    #[test]
    fn a_group_that_never_counted_is_reported_unavailable() {
        let gathered = Gathered {
            groups: vec![(0, vec![11])],
            passes: vec![ReadPass {
                time_ns: 1000,
                reads: vec![Some(read(100, 0, &[(11, 0)]))],
            }],
            ..Gathered::default()
        };
        let r = build_records(&[def("cycles")], Vec::new(), gathered, 1000);
        assert!(r.counters.is_empty());
        assert_eq!(r.unavailable[0].name, "cycles");
        assert!(
            r.unavailable[0].reason.contains("never counted"),
            "{:?}",
            r.unavailable
        );
    }

    #[test]
    fn switches_and_migrations_are_counted_from_switch_records() {
        use SwitchKind::*;
        let sw = |time_ns, cpu, tid, kind| SwitchRecord {
            time_ns,
            tid,
            cpu,
            kind,
        };
        // (time, cpu, tid, kind)
        let switches = [
            sw(10, 0, 1, In),
            sw(20, 0, 1, OutVoluntary),
            sw(30, 1, 1, In),
            sw(40, 1, 1, OutPreempted),
            sw(50, 1, 2, In),
            sw(60, 1, 1, In),
        ];
        let switches: SharedSwitches = Arc::new(switches.to_vec());
        let cs = derived_series(&def("context-switches"), &switches);
        assert_eq!(cs.total(), 2.0);
        let at: Vec<(u64, u32, f64)> = cs.samples().map(|s| (s.time_ns, s.cpu, s.value)).collect();
        assert_eq!(at, [(20, 0, 1.0), (40, 1, 1.0)]);
        let mig = derived_series(&def("cpu-migrations"), &switches);
        let at: Vec<(u64, u32)> = mig.samples().map(|s| (s.time_ns, s.cpu)).collect();
        assert_eq!(at, [(30, 1)]);
    }

    const WORKLOAD_ENV: &str = "PARPROF_COUNTERS_TEST_WORKLOAD";
    const PAGE: usize = 4096;

    /// Touches `pages` fresh pages between two sleeps, so that the task's boundaries fall
    /// where the program-wide count is flat. Returns (start, end) on CLOCK_MONOTONIC.
    fn fault_task(pages: usize) -> (u64, u64) {
        let start = monotonic_ns();
        std::thread::sleep(Duration::from_millis(2));
        let len = pages * PAGE;
        // SAFETY: a fresh private anonymous mapping, written within its bounds and unmapped.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            // One fault per page: no transparent huge pages.
            libc::madvise(p, len, libc::MADV_NOHUGEPAGE);
            for i in 0..pages {
                std::ptr::write_volatile(p.cast::<u8>().add(i * PAGE), 1);
            }
            std::thread::sleep(Duration::from_millis(2));
            let end = monotonic_ns();
            libc::munmap(p, len);
            (start, end)
        }
    }

    /// The workload of the real-run test, run in a child process: tasks with known,
    /// different page-fault counts on three threads that overlap.
    fn run_workload() {
        const PLAN: [&[(usize, usize)]; 3] = [&[(0, 3000)], &[(1, 400), (2, 1500)], &[(3, 800)]];
        let handles: Vec<_> = PLAN
            .iter()
            .enumerate()
            .map(|(i, tasks)| {
                std::thread::spawn(move || {
                    if i == 2 {
                        std::thread::sleep(Duration::from_millis(3));
                    }
                    tasks
                        .iter()
                        .map(|&(id, pages)| (id, pages, fault_task(pages)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (id, pages, (start, end)) in h.join().unwrap() {
                println!("TASK {id} {pages} {start} {end}");
            }
        }
    }

    /// Starts this test binary again, running only `test_name`, held between `fork` and
    /// `exec` (as `cargo parprof` holds the profiled program) while the counters attach.
    fn run_held_child(
        test_name: &str,
        opts: &CounterOptions,
    ) -> (std::process::Output, CounterRecords) {
        use std::io::{Read, Write};
        use std::os::fd::{AsRawFd, OwnedFd};
        use std::os::unix::process::CommandExt;
        let (mut ready_r, ready_w) = io::pipe().unwrap();
        let (go_r, mut go_w) = io::pipe().unwrap();
        let (ready_w, go_r) = (OwnedFd::from(ready_w), OwnedFd::from(go_r));
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([test_name, "--exact", "--nocapture", "--test-threads=1"])
            .env(WORKLOAD_ENV, "1")
            .stdout(std::process::Stdio::piped());
        // SAFETY: only write, read and getpid, which are async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let pid = libc::getpid().to_ne_bytes();
                libc::write(ready_w.as_raw_fd(), pid.as_ptr().cast(), pid.len());
                let mut b = 0u8;
                libc::read(go_r.as_raw_fd(), (&raw mut b).cast(), 1);
                Ok(())
            });
        }
        std::thread::scope(|scope| {
            let spawner = scope.spawn(move || cmd.spawn());
            let mut pid = [0u8; 4];
            ready_r.read_exact(&mut pid).unwrap();
            let pid = i32::from_ne_bytes(pid) as u32;
            // The switch records, for the derived counters, come from the recording.
            let recording = crate::record::collect::CollectOptions {
                counters: None,
                symbolize: false,
                ..crate::record::collect::CollectOptions::default()
            };
            let recorder = crate::record::collect::Collector::attach(pid, &recording);
            let collector = CounterCollector::attach(pid, opts);
            go_w.write_all(b"g").unwrap();
            let output = spawner.join().unwrap().unwrap().wait_with_output().unwrap();
            let collected = recorder.finish();
            let switches: SharedSwitches = collected.lists.switches;
            let records =
                collector.finish(&switches, &collected.kernel.capabilities.context_switches);
            (output, records)
        })
    }

    /// The software path end to end on a real run: page faults of tasks with known counts,
    /// attributed from the program-wide series, lie within the error bound.
    #[test]
    fn page_faults_of_real_tasks_are_attributed_within_the_error_bound() {
        const NAME: &str = "record::counters::tests::page_faults_of_real_tasks_are_attributed_within_the_error_bound";
        if std::env::var_os(WORKLOAD_ENV).is_some() {
            run_workload();
            return;
        }
        let opts = CounterOptions {
            counters: CounterSet::parse("page-faults,task-clock,context-switches,instructions")
                .unwrap(),
            // Reads closer than the tasks' 2 ms quiet edges.
            read_interval_ns: 1_000_000,
            ..CounterOptions::default()
        };
        let (output, records) = run_held_child(NAME, &opts);
        assert!(output.status.success());
        let stdout = String::from_utf8_lossy(&output.stdout);
        let tasks: Vec<(usize, f64, u64, u64)> = stdout
            .lines()
            // libtest prints its own text in front of the first line.
            .filter_map(|l| l.split_once("TASK ").map(|(_, task)| task))
            .map(|l| {
                let f: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
                (f[0] as usize, f[1] as f64, f[2], f[3])
            })
            .collect();
        assert_eq!(tasks.len(), 4, "{stdout}");

        // `instructions` is either collected or named with a reason.
        let instructions_ok = records.counter("instructions").is_some();
        let listed = records
            .unavailable
            .iter()
            .find(|u| u.name == "instructions");
        assert!(
            instructions_ok != listed.is_some(),
            "{:?}",
            records.unavailable
        );
        if let Some(u) = listed {
            eprintln!("instructions unavailable here: {}", u.reason);
        }

        let faults = records.counter("page-faults").unwrap();
        let total_pages: f64 = tasks.iter().map(|t| t.1).sum();
        assert!(
            faults.total() >= total_pages,
            "{} < {total_pages}",
            faults.total()
        );
        assert!(records.counter("task-clock").unwrap().total() > 0.0);
        // Every task sleeps twice: at least two voluntary switches each.
        assert!(records.counter("context-switches").unwrap().total() >= 8.0);

        let series = process_series(faults);
        let spans: Vec<Span> = tasks
            .iter()
            .map(|&(_, _, start, end)| Span {
                start_ns: Some(start),
                end_ns: Some(end),
                tid: None,
            })
            .collect();
        let attributed = attribution::attribute(&series, &spans, Share::Equal);
        // A few faults of the threads' own start-up and stacks may fall inside a task.
        let slack = 64.0;
        for (&(id, pages, _, _), a) in tasks.iter().zip(&attributed) {
            eprintln!(
                "task {id}: {pages} pages, attributed {:.0} ± {:.0}",
                a.value, a.error
            );
            assert!(
                a.value - a.error - slack <= pages && pages <= a.value + a.error + slack,
                "task {id}: truth {pages} outside {} ± {}",
                a.value,
                a.error
            );
        }
        let cost = records.read_cost;
        assert!(cost.passes > 0);
        eprintln!(
            "{} read passes, {:.1} µs each",
            cost.passes,
            cost.total_ns as f64 / cost.passes as f64 / 1000.0
        );
    }
}
