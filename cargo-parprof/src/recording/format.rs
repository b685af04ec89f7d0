//! The encoding of `records.ppr`, version 3 (also described in `docs/run-folder.md`).
//!
//! ```text
//! preamble   magic "PPRUNREC" (8 bytes), version u32
//! part*      kind u32, len u32, payload (len bytes), crc32 u32 of kind, len and payload
//! ```
//!
//! Integers of the framing are little-endian; inside payloads, integers are LEB128 varints
//! ("v" below) and `f64` are their 8 IEEE bytes, little-endian, so every value reads back bit
//! for bit. The framing is the probe trace's (`docs/trace-format.md`), so a cut file is read
//! the same way: up to its last complete part, with the loss reported as
//! [`Completeness::Cut`].
//!
//! Parts, in the order written (every list may span several parts of at most ~1 MiB):
//!
//! | kind | part | payload |
//! | --- | --- | --- |
//! | 1 | meta | JSON: the run (target, exit, options), capabilities, kernel scalars, thread names, counter setup |
//! | 3 | callchains | v count, then per chain: v n, n × v instruction pointer (leaf first) |
//! | 5 | switches | v count, then: v time_ns, v tid, v cpu, u8 kind (0 in, 1 preempted, 2 voluntary) |
//! | 6 | thread starts | v count, then: v time_ns, v tid |
//! | 7 | cpu samples | v count, then: v time_ns, v tid, v cpu, v callchain id |
//! | 9 | switch samples | as 7 |
//! | 11 | counter samples | v series index (into the meta's series), v count, then: v time_ns, v cpu, f64 value |
//! | 13 | mappings | v count, then: v time_ns, v pid, v start, v len, v file offset, v len, path bytes |
//! | 14 | forks | v count, then: v time_ns, v pid, v ppid, v tid, v ptid |
//! | 15 | execs | v count, then: v time_ns, v pid |
//! | 16 | sample processes | v count, then per run of samples of one process: v pid, v samples |
//! | 17 | switch sample processes | as 16, of the switch samples |
//! | 12 | end | v count of the lists 5 to 10 read so far (the stacks' are 0 here), then of each counter series' samples, then of the lists 13 to 17 |
//! | 2 | functions | v count, then per name: v len, UTF-8 |
//! | 19 | stack nodes | v count, then per node: v parent stack id, v (function id × 2 + inlined) |
//! | 8 | cpu sample stacks | v count, then v stack id each |
//! | 10 | switch sample stacks | as 8 |
//! | 18 | symbols end | v count of the lists 8 and 10 |
//!
//! The file is written once, up to the end part, as soon as the program ended; the symbols
//! (parts 2, 19, 8, 10 and 18) are appended once the samples are symbolised. A file without
//! them, or cut inside them (the profiler killed while symbolising), holds every record and
//! what symbolising needs (parts 13 to 17): `cargo parprof report` symbolises it again.
//!
//! The stacks are a prefix tree ([`super::kernel_records::StackTree`]): stack id 0 is the stack without frames, and
//! the n-th node written is stack id n, its parent's stack with one frame inside it (parents
//! come before their children). A deep recursion makes nearly every sample's stack distinct;
//! as nodes, a stack costs only the frames it does not share with those written before it.
//!
//! Older versions are read too: version 2 wrote each distinct stack whole (part 4: v count,
//! then per stack: v n, n × v (function id × 2 + inlined), root first; the samples' stack ids
//! index that list), version 1 also wrote its symbols before the end part, without 13 to 18.
//! Symbols appended to a version 2 file are version 3's, and its preamble says 3 from then on
//! (its records are the same).
//!
//! Samples share few distinct call chains and stacks, so those are stored once (parts 2, 3 and
//! 19, ids in the order written) and samples refer to them: a sample with its stack costs
//! about 16 bytes.
//!
//! The meta part is JSON because it is small and holds nested, evolving types; the lists that
//! can run into millions are binary.
//!
//! The meta part must come first, ids must refer to entries already read, and the end parts'
//! counts must match what was read; anything else is [`RecordsError::Corrupt`].

use super::address_spaces::{ExecEvent, ForkEvent, Mapping, SampleAddresses, SideBand};
use super::counters::{
    CounterRecords, CounterSample, CounterSeries, CounterSource, ReadCost, Scaling,
    UnavailableCounter,
};
use super::kernel_records::{
    CallChain, Capabilities, CpuSample, Frame, KernelRecords, StackId, StackInterner, SwitchKind,
    SwitchRecord, ThreadStart, UnwindCounts,
};
use super::run::{Recording, RunMeta};
use parprof_rt::codec::{put_varint, read_full, read_varint};
pub use parprof_rt::trace::Completeness;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::hash::Hash;
use std::io::{self, Read, Write};
use std::sync::Arc;

pub const MAGIC: [u8; 8] = *b"PPRUNREC";
pub const VERSION: u32 = 3;
/// The oldest version read: its symbols come before its end part, and it has no addresses.
const FIRST_VERSION: u32 = 1;
/// The last version that wrote each stack whole (part 4) rather than as nodes (part 19).
const LAST_WHOLE_STACKS_VERSION: u32 = 2;
/// Where the version is in the file.
pub const VERSION_OFFSET: u64 = MAGIC.len() as u64;
/// The writer closes a part once its payload reaches this size.
const TARGET_PART_LEN: usize = 1 << 20;
/// No part is longer: the reader refuses a longer one before allocating for it.
pub const MAX_PART_LEN: u32 = 16 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PartKind {
    Meta = 1,
    Functions = 2,
    Callchains = 3,
    Stacks = 4,
    Switches = 5,
    ThreadStarts = 6,
    Samples = 7,
    SampleStacks = 8,
    SwitchSamples = 9,
    SwitchSampleStacks = 10,
    CounterSamples = 11,
    End = 12,
    Mappings = 13,
    Forks = 14,
    Execs = 15,
    SamplePids = 16,
    SwitchSamplePids = 17,
    SymbolsEnd = 18,
    StackNodes = 19,
}

impl PartKind {
    fn from_u32(raw: u32) -> Option<PartKind> {
        use PartKind::*;
        [
            Meta,
            Functions,
            Callchains,
            Stacks,
            Switches,
            ThreadStarts,
            Samples,
            SampleStacks,
            SwitchSamples,
            SwitchSampleStacks,
            CounterSamples,
            End,
            Mappings,
            Forks,
            Execs,
            SamplePids,
            SwitchSamplePids,
            SymbolsEnd,
            StackNodes,
        ]
        .into_iter()
        .find(|k| *k as u32 == raw)
    }
}

/// Why records could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("not the records of a parprof run (bad magic number)")]
    NotRecords,
    #[error(
        "run records format version {found} is newer than this parprof understands \
         ({supported}); update cargo-parprof"
    )]
    FutureVersion { found: u32, supported: u32 },
    #[error("run records format version {found} is not supported (this parprof reads {supported})")]
    OldVersion { found: u32, supported: u32 },
    #[error("the run records end before their first part: the file was cut (disk full?)")]
    Empty,
    #[error("corrupt run records at byte {offset}: {reason}")]
    Corrupt { offset: u64, reason: String },
}

/// What [`read`] got: the records, whole or up to the last complete part of a cut file.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    pub recording: Recording,
    pub completeness: Completeness,
    /// Where the symbols start (or would): the length of the records up to their end part;
    /// `None` for version 1 (symbols inside the records) and records cut before their end.
    pub records_len: Option<u64>,
}

// ---------------------------------------------------------------------------------------------
// The meta part

/// The small, nested part of a recording, as JSON.
#[derive(Serialize, Deserialize)]
struct Meta {
    run: RunMeta,
    capabilities: Capabilities,
    call_chains: UnwindCounts,
    sample_period_ns: u64,
    lost_records: u64,
    malformed_records: u64,
    thread_names: Vec<(u32, String)>,
    steal_ns: Option<u64>,
    counters: CountersMeta,
}

#[derive(Serialize, Deserialize)]
struct CountersMeta {
    series: Vec<SeriesMeta>,
    unavailable: Vec<UnavailableCounter>,
    read_interval_ns: u64,
    read_cost: ReadCost,
}

/// A counter series without its samples (they are in counter-samples parts).
#[derive(Serialize, Deserialize)]
struct SeriesMeta {
    name: String,
    source: CounterSource,
    scaling: Scaling,
}

impl Meta {
    fn of(recording: &Recording) -> Meta {
        // Taken apart field by field, so that a field added to the records does not compile
        // until it is saved here or in a list part: `report` must see everything the run saw.
        let KernelRecords {
            capabilities,
            switches: _,
            thread_starts: _,
            samples: _,
            stacks: _,
            sample_stacks: _,
            switch_samples: _,
            switch_sample_stacks: _,
            call_chains,
            sample_period_ns,
            lost_records,
            malformed_records,
            thread_names,
            steal_ns,
            // Not records: where the lists are, and what a walk of them leaves out.
            stored: _,
            view: _,
        } = &recording.kernel;
        let CounterRecords {
            counters,
            unavailable,
            read_interval_ns,
            read_cost,
        } = &recording.counters;
        Meta {
            run: recording.run.clone(),
            capabilities: capabilities.clone(),
            call_chains: *call_chains,
            sample_period_ns: *sample_period_ns,
            lost_records: *lost_records,
            malformed_records: *malformed_records,
            thread_names: thread_names.clone(),
            steal_ns: *steal_ns,
            counters: CountersMeta {
                series: counters
                    .iter()
                    .map(|series| {
                        let CounterSeries {
                            name,
                            source,
                            cpu_samples: _,
                            scaling,
                            stored: _,
                        } = series;
                        SeriesMeta {
                            name: name.clone(),
                            source: *source,
                            scaling: *scaling,
                        }
                    })
                    .collect(),
                unavailable: unavailable.clone(),
                read_interval_ns: *read_interval_ns,
                read_cost: *read_cost,
            },
        }
    }

    /// A recording with the meta part's fields and empty lists.
    fn into_recording(self) -> Recording {
        Recording {
            run: self.run,
            kernel: KernelRecords {
                capabilities: self.capabilities,
                call_chains: self.call_chains,
                sample_period_ns: self.sample_period_ns,
                lost_records: self.lost_records,
                malformed_records: self.malformed_records,
                thread_names: self.thread_names,
                steal_ns: self.steal_ns,
                ..KernelRecords::default()
            },
            counters: CounterRecords {
                counters: self
                    .counters
                    .series
                    .into_iter()
                    .map(|s| CounterSeries {
                        name: s.name,
                        source: s.source,
                        cpu_samples: Vec::new(),
                        scaling: s.scaling,
                        stored: None,
                    })
                    .collect(),
                unavailable: self.counters.unavailable,
                read_interval_ns: self.counters.read_interval_ns,
                read_cost: self.counters.read_cost,
            },
            addresses: SampleAddresses::default(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Writing

fn switch_kind_code(kind: SwitchKind) -> u8 {
    match kind {
        SwitchKind::In => 0,
        SwitchKind::OutPreempted => 1,
        SwitchKind::OutVoluntary => 2,
    }
}

/// Distinct values in the order first seen; a value's id is its index. Keys are call chains and
/// stacks hundreds of entries deep, one per sample: hashed with the compiler's fast hash.
struct Table<K> {
    ids: FxHashMap<K, u64>,
    items: Vec<K>,
}

impl<K: Hash + Eq + Clone> Table<K> {
    fn new() -> Self {
        Table {
            ids: FxHashMap::default(),
            items: Vec::new(),
        }
    }

    fn id(&mut self, key: K) -> u64 {
        let next = self.items.len() as u64;
        *self.ids.entry(key).or_insert_with_key(|key| {
            self.items.push(key.clone());
            next
        })
    }
}

struct PartWriter<W> {
    out: W,
}

impl<W: Write> PartWriter<W> {
    fn part(&mut self, kind: PartKind, payload: &[u8]) -> io::Result<()> {
        let len = u32::try_from(payload.len())
            .ok()
            .filter(|len| *len <= MAX_PART_LEN)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a {kind:?} part of {} bytes is too long", payload.len()),
                )
            })?;
        let mut frame = [0u8; 8];
        frame[..4].copy_from_slice(&(kind as u32).to_le_bytes());
        frame[4..].copy_from_slice(&len.to_le_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(&frame);
        crc.update(payload);
        self.out.write_all(&frame)?;
        self.out.write_all(payload)?;
        self.out.write_all(&crc.finalize().to_le_bytes())
    }

    /// Writes `items` as parts of `kind`: each payload is `prefix`, the count of items in the
    /// part, then the items as `encode` writes them.
    fn list<T>(
        &mut self,
        kind: PartKind,
        prefix: &[u8],
        items: impl IntoIterator<Item = T>,
        encode: impl Fn(&mut Vec<u8>, T),
    ) -> io::Result<u64> {
        let mut body = Vec::new();
        let (mut count, mut total) = (0u64, 0u64);
        let flush = |this: &mut Self, body: &mut Vec<u8>, count: &mut u64| {
            let mut payload = prefix.to_vec();
            put_varint(&mut payload, *count);
            payload.append(body);
            *count = 0;
            this.part(kind, &payload)
        };
        for item in items {
            encode(&mut body, item);
            count += 1;
            total += 1;
            if body.len() >= TARGET_PART_LEN {
                flush(self, &mut body, &mut count)?;
            }
        }
        if count > 0 {
            flush(self, &mut body, &mut count)?;
        }
        Ok(total)
    }
}

/// A sample as written: time, thread, CPU and its call chain.
pub type SampleToWrite<'a> = (u64, u32, u32, &'a [u64]);

/// The long lists of a recording as [`write_records_of`] reads them, in the order saved, each
/// as often as it needs: held in the recording, or kept by the collector off memory.
pub trait ListsToWrite {
    /// The switch records, sorted by time.
    fn switches(&self) -> Box<dyn Iterator<Item = SwitchRecord> + '_>;
    /// The cpu samples (`switch_outs`: the switch samples), sorted by time.
    fn samples(&self, switch_outs: bool) -> Box<dyn Iterator<Item = SampleToWrite<'_>> + '_>;
    /// The process of each sample of [`Self::samples`], in the same order.
    fn sample_pids(&self, switch_outs: bool) -> Box<dyn Iterator<Item = u32> + '_>;
}

/// The long lists of a recording held in it.
struct HeldLists<'a>(&'a Recording);

impl ListsToWrite for HeldLists<'_> {
    fn switches(&self) -> Box<dyn Iterator<Item = SwitchRecord> + '_> {
        Box::new(self.0.kernel.switches.iter().copied())
    }

    fn samples(&self, switch_outs: bool) -> Box<dyn Iterator<Item = SampleToWrite<'_>> + '_> {
        let k = &self.0.kernel;
        let list = if switch_outs {
            &k.switch_samples
        } else {
            &k.samples
        };
        Box::new((list.iter()).map(|s| (s.time_ns, s.tid, s.cpu, &s.callchain[..])))
    }

    fn sample_pids(&self, switch_outs: bool) -> Box<dyn Iterator<Item = u32> + '_> {
        let a = &self.0.addresses;
        let list = if switch_outs {
            &a.switch_sample_pids
        } else {
            &a.sample_pids
        };
        Box::new(list.iter().copied())
    }
}

fn put_sample(buf: &mut Vec<u8>, (time_ns, tid, cpu, callchain): (u64, u32, u32, u64)) {
    put_varint(buf, time_ns);
    put_varint(buf, tid.into());
    put_varint(buf, cpu.into());
    put_varint(buf, callchain);
}

/// Writes `recording` in the format above: its records, then its symbols when its samples
/// have them.
pub fn write(recording: &Recording, out: impl Write) -> io::Result<()> {
    let mut out = out;
    write_records(recording, &mut out)?;
    let k = &recording.kernel;
    if !k.sample_stacks.is_empty() || !k.switch_sample_stacks.is_empty() {
        write_symbols(k, &mut out)?;
    }
    out.flush()
}

/// Writes `recording` up to its end part, without the samples' stacks.
pub fn write_records(recording: &Recording, out: impl Write) -> io::Result<()> {
    let counters = &recording.counters.counters;
    if recording.kernel.stored.is_some() || counters.iter().any(|s| s.stored.is_some()) {
        // Its long lists are not held: they would be written empty.
        return Err(io::Error::other(
            "records read again from a file are not written again",
        ));
    }
    write_records_of(recording, &HeldLists(recording), out)
}

/// Writes the records of `recording` up to its end part, its long lists (switches, samples and
/// their processes) as `lists` gives them (those `recording` holds are not read), its counter
/// series' readings as [`CounterSeries::samples`] gives them.
pub fn write_records_of(
    recording: &Recording,
    lists: &dyn ListsToWrite,
    out: impl Write,
) -> io::Result<()> {
    let mut out = out;
    out.write_all(&MAGIC)?;
    out.write_all(&VERSION.to_le_bytes())?;
    let mut w = PartWriter { out };
    let meta = serde_json::to_vec(&Meta::of(recording))?;
    w.part(PartKind::Meta, &meta)?;
    let mut long = write_kernel_lists(&mut w, &recording.kernel, lists)?;
    for (index, series) in recording.counters.counters.iter().enumerate() {
        let mut prefix = Vec::new();
        put_varint(&mut prefix, index as u64);
        let written = w.list(
            PartKind::CounterSamples,
            &prefix,
            series.samples(),
            |b, s| {
                put_varint(b, s.time_ns);
                put_varint(b, s.cpu.into());
                b.extend_from_slice(&s.value.to_bits().to_le_bytes());
            },
        )?;
        long.counter_samples.push(written);
    }
    (long.sample_pids, long.switch_sample_pids) =
        write_addresses(&mut w, &recording.addresses.side_band, lists)?;
    // The stacks come after the end part.
    let counts = list_counts(recording, &long, VERSION);
    w.part(PartKind::End, &put_counts(&counts))?;
    w.out.flush()
}

/// Appends the symbolised stacks of `kernel`'s samples to its records written by
/// [`write_records`].
pub fn write_symbols(kernel: &KernelRecords, out: impl Write) -> io::Result<()> {
    let mut functions = Table::new();
    for (_, frame) in kernel.stacks.nodes() {
        functions.id(&*frame.function);
    }
    let mut w = PartWriter { out };
    w.list(PartKind::Functions, &[], &functions.items, |b, f| {
        put_varint(b, f.len() as u64);
        b.extend_from_slice(f.as_bytes());
    })?;
    w.list(
        PartKind::StackNodes,
        &[],
        kernel.stacks.nodes(),
        |b, (parent, frame)| {
            put_varint(b, parent.into());
            put_varint(
                b,
                functions.ids[&*frame.function] * 2 + u64::from(frame.inlined),
            );
        },
    )?;
    let put_id = |b: &mut Vec<u8>, id: &StackId| put_varint(b, (*id).into());
    w.list(PartKind::SampleStacks, &[], &kernel.sample_stacks, put_id)?;
    w.list(
        PartKind::SwitchSampleStacks,
        &[],
        &kernel.switch_sample_stacks,
        put_id,
    )?;
    let counts = [
        kernel.sample_stacks.len(),
        kernel.switch_sample_stacks.len(),
    ]
    .map(|n| n as u64);
    w.part(PartKind::SymbolsEnd, &put_counts(&counts))?;
    w.out.flush()
}

fn put_counts(counts: &[u64]) -> Vec<u8> {
    let mut payload = Vec::new();
    put_varint(&mut payload, counts.len() as u64);
    for count in counts {
        put_varint(&mut payload, *count);
    }
    payload
}

fn put_codes(b: &mut Vec<u8>, codes: &[u64]) {
    put_varint(b, codes.len() as u64);
    codes.iter().for_each(|c| put_varint(b, *c));
}

/// The table of call chains (in the order the samples, then the switch samples, first have
/// them), then the kernel's lists that refer to it; the long lists' lengths.
fn write_kernel_lists(
    w: &mut PartWriter<impl Write>,
    k: &KernelRecords,
    lists: &dyn ListsToWrite,
) -> io::Result<LongLists> {
    let mut callchains = Table::new();
    for switch_outs in [false, true] {
        for (.., chain) in lists.samples(switch_outs) {
            callchains.id(chain);
        }
    }
    w.list(PartKind::Callchains, &[], &callchains.items, |b, c| {
        put_codes(b, c)
    })?;
    let switches = w.list(PartKind::Switches, &[], lists.switches(), |b, s| {
        put_varint(b, s.time_ns);
        put_varint(b, s.tid.into());
        put_varint(b, s.cpu.into());
        b.push(switch_kind_code(s.kind));
    })?;
    w.list(PartKind::ThreadStarts, &[], &k.thread_starts, |b, t| {
        put_varint(b, t.time_ns);
        put_varint(b, t.tid.into());
    })?;
    let mut samples = [PartKind::Samples, PartKind::SwitchSamples].map(|kind| (kind, 0));
    for (switch_outs, (kind, written)) in [false, true].into_iter().zip(&mut samples) {
        let with_ids = (lists.samples(switch_outs))
            .map(|(time_ns, tid, cpu, chain)| (time_ns, tid, cpu, callchains.ids[chain]));
        *written = w.list(*kind, &[], with_ids, put_sample)?;
    }
    let [(_, samples), (_, switch_samples)] = samples;
    Ok(LongLists {
        switches,
        samples,
        switch_samples,
        ..LongLists::default()
    })
}

/// What symbolising the samples needs: the address spaces and each sample's process; the
/// lengths of the two lists of processes.
fn write_addresses(
    w: &mut PartWriter<impl Write>,
    side: &SideBand,
    lists: &dyn ListsToWrite,
) -> io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    w.list(PartKind::Mappings, &[], &side.maps, |b, m| {
        for n in [m.time_ns, m.pid.into(), m.start, m.len, m.pgoff] {
            put_varint(b, n);
        }
        let path = m.path.as_os_str().as_bytes();
        put_varint(b, path.len() as u64);
        b.extend_from_slice(path);
    })?;
    w.list(PartKind::Forks, &[], &side.forks, |b, f| {
        put_varint(b, f.time_ns);
        for n in [f.pid, f.ppid, f.tid, f.ptid] {
            put_varint(b, n.into());
        }
    })?;
    w.list(PartKind::Execs, &[], &side.execs, |b, e| {
        put_varint(b, e.time_ns);
        put_varint(b, e.pid.into());
    })?;
    let put_run = |b: &mut Vec<u8>, (pid, n): &(u32, u64)| {
        put_varint(b, (*pid).into());
        put_varint(b, *n);
    };
    let mut pids = [(PartKind::SamplePids, 0), (PartKind::SwitchSamplePids, 0)];
    for (switch_outs, (kind, len)) in [false, true].into_iter().zip(&mut pids) {
        let runs = runs(lists.sample_pids(switch_outs));
        *len = runs.iter().map(|(_, n)| n).sum();
        w.list(*kind, &[], &runs, put_run)?;
    }
    Ok((pids[0].1, pids[1].1))
}

/// The runs of equal values of `values`, as (value, length): a sample's process is nearly
/// always the program's.
fn runs(values: impl Iterator<Item = u32>) -> Vec<(u32, u64)> {
    let mut runs: Vec<(u32, u64)> = Vec::new();
    for v in values {
        match runs.last_mut() {
            Some((last, n)) if *last == v => *n += 1,
            _ => runs.push((v, 1)),
        }
    }
    runs
}

/// The lengths of the long lists, held or only counted as read.
#[derive(Clone, Debug, Default, PartialEq)]
struct LongLists {
    switches: u64,
    samples: u64,
    sample_stacks: u64,
    switch_samples: u64,
    switch_sample_stacks: u64,
    sample_pids: u64,
    switch_sample_pids: u64,
    /// Of each counter series.
    counter_samples: Vec<u64>,
}

#[cfg(test)]
impl LongLists {
    fn of(recording: &Recording) -> LongLists {
        let (k, a) = (&recording.kernel, &recording.addresses);
        LongLists {
            switches: k.switches.len() as u64,
            samples: k.samples.len() as u64,
            sample_stacks: k.sample_stacks.len() as u64,
            switch_samples: k.switch_samples.len() as u64,
            switch_sample_stacks: k.switch_sample_stacks.len() as u64,
            sample_pids: a.sample_pids.len() as u64,
            switch_sample_pids: a.switch_sample_pids.len() as u64,
            counter_samples: (recording.counters.counters.iter())
                .map(|s| s.cpu_samples.len() as u64)
                .collect(),
        }
    }
}

/// The lengths of the lists the end part counts, in its order, as `version` wrote them; the
/// long lists' are `long`.
fn list_counts(recording: &Recording, long: &LongLists, version: u32) -> Vec<u64> {
    let k = &recording.kernel;
    let side = &recording.addresses.side_band;
    let addresses = [
        side.maps.len() as u64,
        side.forks.len() as u64,
        side.execs.len() as u64,
        long.sample_pids,
        long.switch_sample_pids,
    ];
    [
        long.switches,
        k.thread_starts.len() as u64,
        long.samples,
        long.sample_stacks,
        long.switch_samples,
        long.switch_sample_stacks,
    ]
    .into_iter()
    .chain(long.counter_samples.iter().copied())
    .chain(addresses.into_iter().filter(|_| version > FIRST_VERSION))
    .collect()
}

// ---------------------------------------------------------------------------------------------
// Reading

/// Reads records written by [`write`]. Never panics on bad bytes, and never allocates more
/// than [`MAX_PART_LEN`] for one part nor more list entries than a part has bytes.
pub fn read(input: impl Read) -> Result<Loaded, RecordsError> {
    read_lists(input, true).map(|(loaded, _)| loaded)
}

/// [`read`], with the long lists (switches, samples, switch samples, their stacks and
/// processes) checked and counted but not kept; `true` with them when they can be walked again
/// from the file ([`RecordsFile`]): read whole, of this version, symbolised, the switches in
/// time order. Otherwise the records must be read whole ([`read`]) to be analysed.
pub fn read_counted(input: impl Read) -> Result<(Loaded, bool), RecordsError> {
    read_lists(input, false)
}

fn read_lists(mut input: impl Read, hold: bool) -> Result<(Loaded, bool), RecordsError> {
    let version = read_preamble(&mut input)?;
    let mut parts = PartReader {
        input,
        offset: (MAGIC.len() + 4) as u64,
        payload: Vec::new(),
    };
    let mut decoder = match parts.next()? {
        Next::Part(PartKind::Meta, start) => Decoder::new(parts.meta(start)?, version, hold),
        Next::Part(kind, start) => {
            return Err(RecordsError::Corrupt {
                offset: start,
                reason: format!("the first part is {kind:?}, not the meta part"),
            });
        }
        Next::Cut { .. } => return Err(RecordsError::Empty),
    };
    loop {
        match parts.next()? {
            Next::Part(kind, start) => {
                let corrupt = |reason: String| RecordsError::Corrupt {
                    offset: start,
                    reason: format!("{kind:?} part: {reason}"),
                };
                let mut cursor = Cursor {
                    bytes: &parts.payload,
                    pos: 0,
                };
                let done = decoder.part(kind, &mut cursor).map_err(corrupt)?;
                cursor.finish().map_err(|r| corrupt(r.to_owned()))?;
                if kind == PartKind::End && decoder.version > FIRST_VERSION {
                    decoder.records_len = Some(parts.offset);
                }
                if done {
                    return Ok(decoder.finish(Completeness::Complete));
                }
            }
            Next::Cut {
                after_byte,
                tail_bytes,
            } => return Ok(decoder.cut(after_byte, tail_bytes)),
        }
    }
}

/// The version of the records that `input` starts.
fn read_preamble(input: &mut impl Read) -> Result<u32, RecordsError> {
    let mut pre = [0u8; 12];
    let got = read_full(input, &mut pre)?;
    if got < MAGIC.len() && MAGIC.starts_with(&pre[..got]) {
        return Err(RecordsError::Empty);
    }
    if pre[..MAGIC.len()] != MAGIC {
        return Err(RecordsError::NotRecords);
    }
    if got < pre.len() {
        return Err(RecordsError::Empty);
    }
    let version = u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]);
    if version > VERSION {
        Err(RecordsError::FutureVersion {
            found: version,
            supported: VERSION,
        })
    } else if version < FIRST_VERSION {
        Err(RecordsError::OldVersion {
            found: version,
            supported: VERSION,
        })
    } else {
        Ok(version)
    }
}

enum Next {
    /// A whole part, checksum verified, its payload in [`PartReader::payload`]; it starts at
    /// this byte.
    Part(PartKind, u64),
    /// The input ends here, `tail_bytes` into an incomplete part (0: between parts).
    Cut { after_byte: u64, tail_bytes: u64 },
}

struct PartReader<R> {
    input: R,
    offset: u64,
    payload: Vec<u8>,
}

impl<R: Read> PartReader<R> {
    fn next(&mut self) -> Result<Next, RecordsError> {
        let start = self.offset;
        let mut frame = [0u8; 8];
        let got = read_full(&mut self.input, &mut frame)?;
        if got < frame.len() {
            return Ok(Next::Cut {
                after_byte: start,
                tail_bytes: got as u64,
            });
        }
        let corrupt = |reason: String| RecordsError::Corrupt {
            offset: start,
            reason,
        };
        let kind_raw = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]);
        let len = u32::from_le_bytes([frame[4], frame[5], frame[6], frame[7]]);
        let kind = PartKind::from_u32(kind_raw)
            .ok_or_else(|| corrupt(format!("unknown part kind {kind_raw}")))?;
        if len > MAX_PART_LEN {
            return Err(corrupt(format!("part length {len} exceeds {MAX_PART_LEN}")));
        }
        self.payload.clear();
        // Exactly: a walk holds this buffer, and parts of a list have about the same length.
        self.payload.reserve_exact(len as usize + 4);
        self.payload.resize(len as usize + 4, 0);
        let got_payload = read_full(&mut self.input, &mut self.payload)?;
        if got_payload < self.payload.len() {
            return Ok(Next::Cut {
                after_byte: start,
                tail_bytes: (frame.len() + got_payload) as u64,
            });
        }
        let crc_bytes = self.payload.split_off(len as usize);
        let stored = u32::from_le_bytes([crc_bytes[0], crc_bytes[1], crc_bytes[2], crc_bytes[3]]);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&frame);
        crc.update(&self.payload);
        if crc.finalize() != stored {
            return Err(corrupt(format!("checksum mismatch in a {kind:?} part")));
        }
        self.offset += (frame.len() + self.payload.len() + 4) as u64;
        Ok(Next::Part(kind, start))
    }

    fn meta(&self, start: u64) -> Result<Meta, RecordsError> {
        serde_json::from_slice(&self.payload).map_err(|e| RecordsError::Corrupt {
            offset: start,
            reason: format!("meta part: {e}"),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Walking a long list again

/// The switch records of records read from `input`, in the order written: a list that
/// [`read_counted`] checked, walked again part by part.
pub fn walk_switches(input: impl Read) -> impl Iterator<Item = Result<SwitchRecord, RecordsError>> {
    walk(input, PartKind::Switches, None, switch)
}

/// The readings of the `series`-th counter series of records read from `input`, as
/// [`walk_switches`].
pub fn walk_counter_samples(
    input: impl Read,
    series: usize,
) -> impl Iterator<Item = Result<CounterSample, RecordsError>> {
    walk(
        input,
        PartKind::CounterSamples,
        Some(series as u64),
        counter_sample,
    )
}

/// The cpu samples (`switch_outs`: the switch samples) of records read from `input`, as
/// [`walk_switches`], their call chains left empty (their stacks stand for them).
pub fn walk_samples(
    input: impl Read,
    switch_outs: bool,
) -> impl Iterator<Item = Result<CpuSample, RecordsError>> {
    let none = CallChain::from([]);
    walk(input, samples_kind(switch_outs), None, move |c| {
        sample(c, |_| Ok(Arc::clone(&none)))
    })
}

/// The call chains of records read from `input`, in the order of their ids, as
/// [`walk_switches`].
pub fn walk_callchains(input: impl Read) -> impl Iterator<Item = Result<CallChain, RecordsError>> {
    walk(input, PartKind::Callchains, None, |c| {
        Ok(c.list(|c| Ok(c.varint()?))?.into())
    })
}

/// The samples of [`walk_samples`] as (time, thread, call-chain id).
pub fn walk_sample_chains(
    input: impl Read,
    switch_outs: bool,
) -> impl Iterator<Item = Result<(u64, u32, u64), RecordsError>> {
    walk(input, samples_kind(switch_outs), None, |c| {
        let (time_ns, tid, _cpu, callchain) = sample_fields(c)?;
        Ok((time_ns, tid, callchain))
    })
}

/// The processes of the samples of [`walk_samples`], as runs of (process, samples).
pub fn walk_sample_pid_runs(
    input: impl Read,
    switch_outs: bool,
) -> impl Iterator<Item = Result<(u32, u64), RecordsError>> {
    let kind = if switch_outs {
        PartKind::SwitchSamplePids
    } else {
        PartKind::SamplePids
    };
    walk(input, kind, None, |c| Ok((c.u32()?, c.varint()?)))
}

fn samples_kind(switch_outs: bool) -> PartKind {
    if switch_outs {
        PartKind::SwitchSamples
    } else {
        PartKind::Samples
    }
}

/// The stack ids of the samples of [`walk_samples`], in the same order (version 3: checked by
/// [`read_counted`]).
pub fn walk_sample_stacks(
    input: impl Read,
    switch_outs: bool,
) -> impl Iterator<Item = Result<StackId, RecordsError>> {
    let kind = if switch_outs {
        PartKind::SwitchSampleStacks
    } else {
        PartKind::SampleStacks
    };
    walk(input, kind, None, |c| Ok(c.u32()?))
}

/// The entries of the parts of `kind` (of the counter series `series`, for counter samples)
/// as `entry` reads them, one at a time from the part read last (a walk holds one part, not
/// its entries decoded: a part of samples decodes to three times its size); a failure is the
/// last item.
fn walk<T>(
    mut input: impl Read,
    kind: PartKind,
    series: Option<u64>,
    mut entry: impl FnMut(&mut Cursor<'_>) -> Result<T, String>,
) -> impl Iterator<Item = Result<T, RecordsError>> {
    let mut parts = match read_preamble(&mut input) {
        Ok(_) => Ok(PartReader {
            input,
            offset: (MAGIC.len() + 4) as u64,
            payload: Vec::new(),
        }),
        Err(e) => Err(Some(e)),
    };
    // In the part read last: where it starts, where its next entry starts, how many are left.
    let (mut part, mut at, mut left) = (0, 0, 0);
    let mut done = false;
    std::iter::from_fn(move || {
        loop {
            if done {
                return None;
            }
            let reader = match &mut parts {
                Ok(reader) => reader,
                Err(failed) => {
                    done = true;
                    return failed.take().map(Err);
                }
            };
            let corrupt = |offset, reason: String| RecordsError::Corrupt {
                offset,
                reason: format!("{kind:?} part: {reason}"),
            };
            if left > 0 {
                left -= 1;
                let mut c = Cursor {
                    bytes: &reader.payload,
                    pos: at,
                };
                let item = entry(&mut c);
                at = c.pos;
                done = item.is_err();
                return Some(item.map_err(|reason| corrupt(part, reason)));
            }
            match reader.next() {
                Ok(Next::Part(k, start)) if k == kind => {
                    let mut c = Cursor {
                        bytes: &reader.payload,
                        pos: 0,
                    };
                    let entries = match series {
                        Some(series) => c.varint().map(|index| index == series),
                        None => Ok(true),
                    }
                    .and_then(|of_series| if of_series { c.count() } else { Ok(0) });
                    match entries {
                        Ok(n) => (part, at, left) = (start, c.pos, n),
                        Err(reason) => {
                            done = true;
                            return Some(Err(corrupt(start, reason.to_owned())));
                        }
                    }
                }
                Ok(Next::Part(..)) => {}
                Ok(Next::Cut { .. }) => done = true,
                Err(e) => {
                    done = true;
                    return Some(Err(e));
                }
            }
        }
    })
}

/// Reads a payload; every failure is a reason for [`RecordsError::Corrupt`].
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn varint(&mut self) -> Result<u64, &'static str> {
        let (value, len) = read_varint(&self.bytes[self.pos..])?;
        self.pos += len;
        Ok(value)
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        u32::try_from(self.varint()?).map_err(|_| "a 32-bit number exceeds 32 bits")
    }

    fn take(&mut self, n: usize) -> Result<&[u8], &'static str> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or("ends inside a value")?;
        let taken = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(taken)
    }

    /// A count of entries that take at least one byte each: never more than the bytes left,
    /// so that a corrupt count cannot make the reader allocate without bound.
    fn count(&mut self) -> Result<usize, &'static str> {
        let count = self.varint()?;
        usize::try_from(count)
            .ok()
            .filter(|n| *n <= self.bytes.len() - self.pos)
            .ok_or("a count exceeds the part")
    }

    /// `count` entries read by `entry`.
    fn list<T>(
        &mut self,
        mut entry: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        let n = self.count()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(entry(self)?);
        }
        Ok(out)
    }

    fn finish(self) -> Result<(), &'static str> {
        if self.pos == self.bytes.len() {
            Ok(())
        } else {
            Err("bytes left over after its entries")
        }
    }
}

/// An id into a table read so far.
fn lookup<'t, T>(table: &'t [T], id: u64, what: &str) -> Result<&'t T, String> {
    usize::try_from(id)
        .ok()
        .and_then(|i| table.get(i))
        .ok_or_else(|| format!("{what} id {id} refers to no {what} read before it"))
}

/// Builds the recording part by part. The samples share the tables' call chains and stacks,
/// and the stacks share the function names, as in the file.
struct Decoder {
    recording: Recording,
    version: u32,
    /// The end part was read: only the symbols may follow.
    records_ended: bool,
    records_len: Option<u64>,
    functions: Vec<Arc<str>>,
    callchains: Vec<CallChain>,
    stacks: StackInterner,
    /// Version 2's stack ids (its list of whole stacks): each stack's id in `stacks`.
    whole_stacks: Vec<StackId>,
    /// Whether the long lists are kept, or only checked and counted.
    hold: bool,
    /// The long lists' lengths as read.
    long: LongLists,
    /// The last switch's time while they are in time order; `None` once one is out of it.
    switches_sorted_to: Option<u64>,
}

impl Decoder {
    fn new(meta: Meta, version: u32, hold: bool) -> Decoder {
        let recording = meta.into_recording();
        let series = recording.counters.counters.len();
        Decoder {
            hold,
            long: LongLists {
                counter_samples: vec![0; series],
                ..LongLists::default()
            },
            switches_sorted_to: Some(0),
            recording,
            version,
            records_ended: false,
            records_len: None,
            functions: Vec::new(),
            callchains: Vec::new(),
            stacks: StackInterner::default(),
            whole_stacks: Vec::new(),
        }
    }

    /// The records read, and whether their long lists (not held) can be walked again from
    /// the file.
    fn finish(mut self, completeness: Completeness) -> (Loaded, bool) {
        let long = &self.long;
        let walkable = !self.hold
            && self.version == VERSION
            && completeness == Completeness::Complete
            && self.switches_sorted_to.is_some()
            && long.sample_stacks == long.samples
            && long.switch_sample_stacks == long.switch_samples;
        self.recording.kernel.stacks = Arc::new(self.stacks.finish());
        let loaded = Loaded {
            recording: self.recording,
            completeness,
            records_len: self.records_len,
        };
        (loaded, walkable)
    }

    /// Keeps `items` of a long list in `list`, or only counts them in `len`.
    fn take<T>(hold: bool, list: &mut Vec<T>, len: &mut u64, items: Vec<T>) {
        *len += items.len() as u64;
        if hold {
            list.extend(items);
        }
    }

    /// The records read when the input ends: whole when their end part was read, the
    /// samples then without stacks unless every symbol part was read (they are symbolised
    /// again from the addresses).
    fn cut(mut self, after_byte: u64, tail_bytes: u64) -> (Loaded, bool) {
        if !self.records_ended {
            return self.finish(Completeness::Cut {
                after_byte,
                tail_bytes,
            });
        }
        let k = &mut self.recording.kernel;
        k.sample_stacks.clear();
        k.switch_sample_stacks.clear();
        (self.long.sample_stacks, self.long.switch_sample_stacks) = (0, 0);
        self.stacks = StackInterner::default();
        self.finish(Completeness::Complete)
    }

    /// Decodes one part after the meta part; `Ok(true)` for the last part.
    fn part(&mut self, kind: PartKind, c: &mut Cursor<'_>) -> Result<bool, String> {
        let is_symbol = matches!(
            kind,
            PartKind::Functions
                | PartKind::Stacks
                | PartKind::StackNodes
                | PartKind::SampleStacks
                | PartKind::SwitchSampleStacks
                | PartKind::SymbolsEnd
        );
        if self.records_ended && !is_symbol {
            return Err("a part of the records after their end part".into());
        }
        let k = &mut self.recording.kernel;
        match kind {
            PartKind::Meta => return Err("a second meta part".into()),
            PartKind::Functions => self.functions.extend(c.list(|c| {
                let len = c.count()?;
                std::str::from_utf8(c.take(len)?)
                    .map(Arc::from)
                    .map_err(|_| "a function name is not UTF-8".into())
            })?),
            PartKind::Callchains => self
                .callchains
                .extend(c.list(|c| c.list(|c| Ok(c.varint()?)).map(CallChain::from))?),
            PartKind::Stacks | PartKind::StackNodes => self.stack_part(kind, c)?,
            PartKind::ThreadStarts => k.thread_starts.extend(c.list(|c| {
                Ok(ThreadStart {
                    time_ns: c.varint()?,
                    tid: c.u32()?,
                })
            })?),
            PartKind::Switches
            | PartKind::Samples
            | PartKind::SwitchSamples
            | PartKind::SampleStacks
            | PartKind::SwitchSampleStacks
            | PartKind::CounterSamples => self.long_part(kind, c)?,
            PartKind::Mappings
            | PartKind::Forks
            | PartKind::Execs
            | PartKind::SamplePids
            | PartKind::SwitchSamplePids => self.address_part(kind, c)?,
            PartKind::End | PartKind::SymbolsEnd => return self.end_part(kind, c),
        }
        Ok(false)
    }

    /// Decodes a part of a long list: held, or only checked and counted.
    fn long_part(&mut self, kind: PartKind, c: &mut Cursor<'_>) -> Result<(), String> {
        let k = &mut self.recording.kernel;
        let (hold, long) = (self.hold, &mut self.long);
        match kind {
            PartKind::Switches => {
                let switches = c.list(switch)?;
                for s in &switches {
                    let sorted = self.switches_sorted_to.filter(|last| *last <= s.time_ns);
                    self.switches_sorted_to = sorted.map(|_| s.time_ns);
                }
                Self::take(hold, &mut k.switches, &mut long.switches, switches);
            }
            PartKind::Samples => {
                let samples = samples(c, &self.callchains)?;
                Self::take(hold, &mut k.samples, &mut long.samples, samples);
            }
            PartKind::SwitchSamples => {
                let samples = samples(c, &self.callchains)?;
                Self::take(
                    hold,
                    &mut k.switch_samples,
                    &mut long.switch_samples,
                    samples,
                );
            }
            PartKind::SampleStacks => {
                let ids = self.stack_ids(c)?;
                let k = &mut self.recording.kernel;
                Self::take(
                    hold,
                    &mut k.sample_stacks,
                    &mut self.long.sample_stacks,
                    ids,
                );
            }
            PartKind::SwitchSampleStacks => {
                let ids = self.stack_ids(c)?;
                let (k, long) = (&mut self.recording.kernel, &mut self.long);
                Self::take(
                    hold,
                    &mut k.switch_sample_stacks,
                    &mut long.switch_sample_stacks,
                    ids,
                );
            }
            PartKind::CounterSamples => {
                let index = c.varint()?;
                let series = usize::try_from(index)
                    .ok()
                    .and_then(|i| self.recording.counters.counters.get_mut(i))
                    .ok_or_else(|| format!("counter series {index} is not in the meta part"))?;
                let len = &mut long.counter_samples[index as usize];
                Self::take(hold, &mut series.cpu_samples, len, c.list(counter_sample)?);
            }
            // Called for the parts above only.
            _ => {}
        }
        Ok(())
    }

    /// Decodes a part of the stacks: whole (version 2 and before) or as nodes.
    fn stack_part(&mut self, kind: PartKind, c: &mut Cursor<'_>) -> Result<(), String> {
        let whole = self.version <= LAST_WHOLE_STACKS_VERSION;
        let functions = &self.functions;
        let frame = |c: &mut Cursor<'_>| -> Result<Frame, String> {
            let code = c.varint()?;
            Ok(Frame {
                function: Arc::clone(lookup(functions, code / 2, "function")?),
                inlined: code % 2 == 1,
            })
        };
        match kind {
            PartKind::Stacks if whole => {
                for _ in 0..c.count()? {
                    let frames = c.list(frame)?;
                    self.whole_stacks.push(self.stacks.intern(&frames));
                }
            }
            PartKind::StackNodes if !whole => {
                for _ in 0..c.count()? {
                    let parent = c.u32()?;
                    let frame = frame(c)?;
                    self.stacks.push(parent, &frame).ok_or_else(|| {
                        format!("stack id {parent} refers to no stack read before it")
                    })?;
                }
            }
            _ => {
                return Err(format!(
                    "a {kind:?} part in a version {} file",
                    self.version
                ));
            }
        }
        Ok(())
    }

    /// The samples' stack ids of a part, as ids into the tree.
    fn stack_ids(&self, c: &mut Cursor<'_>) -> Result<Vec<StackId>, String> {
        c.list(|c| {
            let id = c.varint()?;
            if self.version <= LAST_WHOLE_STACKS_VERSION {
                Ok(*lookup(&self.whole_stacks, id, "stack")?)
            } else {
                u32::try_from(id)
                    .ok()
                    .filter(|id| self.stacks.contains(*id))
                    .ok_or_else(|| format!("stack id {id} refers to no stack read before it"))
            }
        })
    }

    /// Decodes a part of what symbolising the samples needs.
    fn address_part(&mut self, kind: PartKind, c: &mut Cursor<'_>) -> Result<(), String> {
        let a = &mut self.recording.addresses;
        let (hold, long) = (self.hold, &mut self.long);
        match kind {
            PartKind::Mappings => a.side_band.maps.extend(c.list(mapping)?),
            PartKind::Forks => a.side_band.forks.extend(c.list(|c| {
                Ok(ForkEvent {
                    time_ns: c.varint()?,
                    pid: c.u32()?,
                    ppid: c.u32()?,
                    tid: c.u32()?,
                    ptid: c.u32()?,
                })
            })?),
            PartKind::Execs => a.side_band.execs.extend(c.list(|c| {
                Ok(ExecEvent {
                    time_ns: c.varint()?,
                    pid: c.u32()?,
                })
            })?),
            PartKind::SamplePids => {
                let pids = expand_runs(c, long.sample_pids, long.samples)?;
                Self::take(hold, &mut a.sample_pids, &mut long.sample_pids, pids);
            }
            PartKind::SwitchSamplePids => {
                let pids = expand_runs(c, long.switch_sample_pids, long.switch_samples)?;
                let list = &mut a.switch_sample_pids;
                Self::take(hold, list, &mut long.switch_sample_pids, pids);
            }
            // Called for the parts above only.
            _ => {}
        }
        Ok(())
    }

    /// Checks an end part against what was read; `Ok(true)` for the last part.
    fn end_part(&mut self, kind: PartKind, c: &mut Cursor<'_>) -> Result<bool, String> {
        let long = &self.long;
        match kind {
            PartKind::End => {
                let read = list_counts(&self.recording, long, self.version);
                expect_counts(c, &read, "end")?;
                self.records_ended = true;
                // Version 1 wrote its symbols before the end part.
                Ok(self.version == FIRST_VERSION)
            }
            PartKind::SymbolsEnd => {
                if !self.records_ended {
                    return Err("the symbols end before the records".into());
                }
                let read = [long.sample_stacks, long.switch_sample_stacks];
                expect_counts(c, &read, "symbols end")?;
                Ok(true)
            }
            // Called for the parts above only.
            _ => Ok(false),
        }
    }
}

/// Checks the counts an end part gives against the lists read.
fn expect_counts(c: &mut Cursor<'_>, read: &[u64], part: &str) -> Result<(), String> {
    let counts = c.list(|c| Ok(c.varint()?))?;
    if counts != read {
        return Err(format!(
            "the lists read have {read:?} entries, the {part} part says {counts:?}: parts are \
             missing"
        ));
    }
    Ok(())
}

/// The processes of a part's runs, `read` of them read before, never beyond the `samples`
/// they are of.
fn expand_runs(c: &mut Cursor<'_>, read: u64, samples: u64) -> Result<Vec<u32>, String> {
    let mut pids = Vec::new();
    for (pid, n) in c.list(|c| Ok((c.u32()?, c.varint()?)))? {
        let n = usize::try_from(n)
            .ok()
            .filter(|n| read.saturating_add((pids.len() + n) as u64) <= samples)
            .ok_or("more sample processes than samples")?;
        pids.extend(std::iter::repeat_n(pid, n));
    }
    Ok(pids)
}

fn counter_sample(c: &mut Cursor<'_>) -> Result<CounterSample, String> {
    Ok(CounterSample {
        time_ns: c.varint()?,
        cpu: c.u32()?,
        value: f64::from_le_bytes(c.take(8)?.try_into().map_err(|_| "a value is cut")?),
    })
}

fn switch(c: &mut Cursor<'_>) -> Result<SwitchRecord, String> {
    Ok(SwitchRecord {
        time_ns: c.varint()?,
        tid: c.u32()?,
        cpu: c.u32()?,
        kind: match c.take(1)? {
            [0] => SwitchKind::In,
            [1] => SwitchKind::OutPreempted,
            [2] => SwitchKind::OutVoluntary,
            other => return Err(format!("unknown switch kind {other:?}")),
        },
    })
}

fn mapping(c: &mut Cursor<'_>) -> Result<Mapping, String> {
    use std::os::unix::ffi::OsStrExt;
    let (time_ns, pid) = (c.varint()?, c.u32()?);
    let (start, len, pgoff) = (c.varint()?, c.varint()?, c.varint()?);
    let path_len = c.count()?;
    let path = std::ffi::OsStr::from_bytes(c.take(path_len)?).into();
    Ok(Mapping {
        time_ns,
        pid,
        start,
        len,
        pgoff,
        path,
    })
}

fn samples(c: &mut Cursor<'_>, callchains: &[CallChain]) -> Result<Vec<CpuSample>, String> {
    c.list(|c| sample(c, |id| Ok(Arc::clone(lookup(callchains, id, "callchain")?))))
}

/// A sample, its call chain by its id.
fn sample(
    c: &mut Cursor<'_>,
    callchain: impl FnOnce(u64) -> Result<CallChain, String>,
) -> Result<CpuSample, String> {
    let (time_ns, tid, cpu, id) = sample_fields(c)?;
    Ok(CpuSample {
        time_ns,
        tid,
        cpu,
        callchain: callchain(id)?,
    })
}

/// A sample's time, thread, CPU and call-chain id.
fn sample_fields(c: &mut Cursor<'_>) -> Result<(u64, u32, u32, u64), String> {
    Ok((c.varint()?, c.u32()?, c.u32()?, c.varint()?))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::recording::RecordedOptions;
    use crate::recording::Thresholds;
    use crate::recording::address_spaces::SideBand;
    use crate::recording::kernel_records::Capability;
    use crate::recording::kernel_records::CpuQuota;
    use crate::recording::kernel_records::{ListView, StackTree};
    use proptest::prelude::*;

    fn encode(recording: &Recording) -> Vec<u8> {
        let mut bytes = Vec::new();
        write(recording, &mut bytes).expect("writing to memory");
        bytes
    }

    fn frame(function: &str, inlined: bool) -> Frame {
        Frame {
            function: function.into(),
            inlined,
        }
    }

    /// A small recording with every list and a shared stack.
    /// A recording with every list and field set, symbolised.
    pub(crate) fn example() -> Recording {
        let sample = |time_ns, tid, callchain: &[u64]| CpuSample {
            time_ns,
            tid,
            cpu: 1,
            callchain: callchain.into(),
        };
        let stack = vec![frame("main", false), frame("app::work", true)];
        let (stacks, ids) =
            StackTree::of_stacks(&[stack.clone(), stack, vec![frame("main", false)]]);
        Recording {
            run: RunMeta {
                child_pid: 4242,
                interrupted: true,
                options: RecordedOptions {
                    thresholds: Thresholds {
                        preempted: 0.3,
                        ..Thresholds::default()
                    },
                    utilization_period_ns: 2_000_000,
                    merge_threads: true,
                },
                ..RunMeta::default()
            },
            kernel: KernelRecords {
                capabilities: Capabilities {
                    context_switches: Capability::yes(),
                    cpu_samples: Capability::yes(),
                    switch_stacks: Capability::no("off"),
                    stack_copies: Capability::yes(),
                    hardware_counters: Capability::no("no PMU"),
                    cpus: CpuQuota {
                        online: 2,
                        affinity: 2,
                        cgroup_limit: Some(1.5),
                    },
                },
                switches: vec![
                    SwitchRecord {
                        time_ns: 10,
                        tid: 7,
                        cpu: 0,
                        kind: SwitchKind::In,
                    },
                    SwitchRecord {
                        time_ns: u64::MAX,
                        tid: u32::MAX,
                        cpu: 1,
                        kind: SwitchKind::OutPreempted,
                    },
                ],
                thread_starts: vec![ThreadStart { time_ns: 5, tid: 8 }],
                samples: vec![sample(11, 7, &[3, 2, 1]), sample(12, 8, &[3, 2, 1])],
                stacks,
                sample_stacks: ids[..2].to_vec(),
                switch_samples: vec![sample(13, 7, &[u64::MAX])],
                switch_sample_stacks: ids[2..].to_vec(),
                call_chains: UnwindCounts {
                    to_the_root: 1,
                    joined_to_frame_pointers: 2,
                    cut_at_the_copy: 3,
                    frame_pointers_only: 4,
                },
                sample_period_ns: 1_001_001,
                lost_records: 3,
                malformed_records: 1,
                thread_names: vec![(7, "app".into()), (8, "rayon-0".into())],
                steal_ns: Some(77),
                stored: None,
                view: ListView::default(),
            },
            counters: CounterRecords {
                counters: vec![CounterSeries {
                    name: "page-faults".into(),
                    source: CounterSource::Software,
                    cpu_samples: vec![CounterSample {
                        time_ns: 20,
                        cpu: 1,
                        value: 0.1 + 0.2,
                    }],
                    scaling: Scaling {
                        time_enabled_ns: 5,
                        time_running_ns: 4,
                        scaled: true,
                    },
                    stored: None,
                }],
                unavailable: vec![UnavailableCounter {
                    name: "cycles".into(),
                    reason: "no PMU".into(),
                }],
                read_interval_ns: 10_000_000,
                read_cost: ReadCost {
                    passes: 2,
                    total_ns: 900,
                },
            },
            addresses: SampleAddresses {
                sample_pids: vec![7, 7],
                switch_sample_pids: vec![7],
                side_band: SideBand {
                    maps: vec![Mapping {
                        time_ns: 1,
                        pid: 7,
                        start: 0x5000,
                        len: 0x1000,
                        pgoff: 0x2000,
                        path: "/usr/bin/app".into(),
                    }],
                    forks: vec![ForkEvent {
                        time_ns: 2,
                        pid: 7,
                        ppid: 7,
                        tid: 8,
                        ptid: 7,
                    }],
                    execs: vec![ExecEvent { time_ns: 0, pid: 7 }],
                },
            },
        }
    }

    /// `recording` as read from records whose symbols were never written.
    fn without_stacks(recording: &Recording) -> Recording {
        let mut r = recording.clone();
        r.kernel.stacks = Arc::default();
        r.kernel.sample_stacks.clear();
        r.kernel.switch_sample_stacks.clear();
        r
    }

    fn encode_records(recording: &Recording) -> Vec<u8> {
        let mut bytes = Vec::new();
        write_records(recording, &mut bytes).expect("writing to memory");
        bytes
    }

    #[test]
    fn records_without_symbols_read_whole_and_symbols_appended_complete_them() {
        let recording = example();
        let records = encode_records(&recording);
        let loaded = read(records.as_slice()).unwrap();
        assert_eq!(loaded.completeness, Completeness::Complete);
        assert_eq!(loaded.records_len, Some(records.len() as u64));
        assert_eq!(loaded.recording, without_stacks(&recording));
        assert!(loaded.recording.needs_symbols());
        let mut whole = records.clone();
        write_symbols(&recording.kernel, &mut whole).unwrap();
        assert_eq!(whole, encode(&recording));
        // Symbols cut short: the records stay whole, their samples without stacks.
        for cut in records.len()..whole.len() {
            let loaded = read(&whole[..cut]).unwrap();
            assert_eq!(loaded.completeness, Completeness::Complete, "cut at {cut}");
            assert_eq!(loaded.recording, without_stacks(&recording), "cut at {cut}");
        }
        let loaded = read(whole.as_slice()).unwrap();
        assert_eq!(loaded.recording, recording);
        assert!(!loaded.recording.needs_symbols());
    }

    #[test]
    fn nothing_but_symbols_may_follow_the_end_part() {
        let mut bytes = encode_records(&example());
        let mut w = PartWriter { out: &mut bytes };
        w.part(PartKind::ThreadStarts, &[0]).unwrap();
        let err = read(bytes.as_slice()).unwrap_err();
        assert!(err.to_string().contains("after their end part"), "{err}");
    }

    #[test]
    fn a_recording_reads_back_whole() {
        let recording = example();
        let loaded = read(encode(&recording).as_slice()).unwrap();
        assert_eq!(loaded.completeness, Completeness::Complete);
        assert_eq!(loaded.recording, recording);
    }

    #[test]
    fn samples_share_their_stacks_and_call_chains() {
        let mut recording = example();
        let one = encode(&recording).len();
        let sample = recording.kernel.samples[0].clone();
        let stack = recording.kernel.sample_stacks[0];
        recording.kernel.samples.extend(vec![sample; 1000]);
        recording.kernel.sample_stacks.extend(vec![stack; 1000]);
        let per_sample = (encode(&recording).len() - one) as f64 / 1000.0;
        assert!(per_sample < 6.0, "{per_sample} bytes per sample");
    }

    #[test]
    fn read_samples_share_their_stacks_call_chains_and_names_in_memory() {
        let recording = example();
        let k = read(encode(&recording).as_slice())
            .unwrap()
            .recording
            .kernel;
        assert_eq!(k, recording.kernel);
        assert_eq!(k.sample_stacks[0], k.sample_stacks[1]);
        assert!(Arc::ptr_eq(
            &k.samples[0].callchain,
            &k.samples[1].callchain
        ));
        // The switch sample's stack (main) is the cpu samples' (main, app::work) parent.
        assert_eq!(
            k.stacks.leaf_first(k.sample_stacks[0]).nth(1),
            k.stacks.leaf_first(k.switch_sample_stacks[0]).next()
        );
        let main = |id: StackId| Arc::clone(&k.stacks.frames(id)[0].function);
        assert!(Arc::ptr_eq(
            &main(k.sample_stacks[0]),
            &main(k.switch_sample_stacks[0])
        ));
    }

    /// `recording`'s symbols as version 2 wrote them: each distinct stack whole.
    fn encode_version_2(recording: &Recording) -> Vec<u8> {
        let mut bytes = encode_records(recording);
        bytes[VERSION_OFFSET as usize..][..4].copy_from_slice(&2u32.to_le_bytes());
        let k = &recording.kernel;
        let mut functions = Table::new();
        let mut stacks = Table::new();
        let mut ids = |list: &[StackId]| -> Vec<u64> {
            (list.iter())
                .map(|&id| {
                    let codes: Vec<u64> = (k.stacks.frames(id).iter())
                        .map(|f| functions.id(&*f.function) * 2 + u64::from(f.inlined))
                        .collect();
                    stacks.id(codes)
                })
                .collect()
        };
        let (sample_ids, switch_ids) = (ids(&k.sample_stacks), ids(&k.switch_sample_stacks));
        let mut w = PartWriter { out: &mut bytes };
        w.list(PartKind::Functions, &[], &functions.items, |b, f| {
            put_varint(b, f.len() as u64);
            b.extend_from_slice(f.as_bytes());
        })
        .unwrap();
        w.list(PartKind::Stacks, &[], &stacks.items, |b, s| put_codes(b, s))
            .unwrap();
        for (kind, ids) in [
            (PartKind::SampleStacks, &sample_ids),
            (PartKind::SwitchSampleStacks, &switch_ids),
        ] {
            w.list(kind, &[], ids, |b, id| put_varint(b, *id)).unwrap();
        }
        let counts = [sample_ids.len(), switch_ids.len()].map(|n| n as u64);
        w.part(PartKind::SymbolsEnd, &put_counts(&counts)).unwrap();
        bytes
    }

    #[test]
    fn version_2_records_read_as_the_same_stacks() {
        let recording = example();
        let loaded = read(encode_version_2(&recording).as_slice()).unwrap();
        assert_eq!(loaded.completeness, Completeness::Complete);
        assert_eq!(loaded.recording, recording);
        // Version 3's nodes in a version 2 file, and the other way round, are corrupt.
        let mut mixed = encode_records(&recording);
        mixed[VERSION_OFFSET as usize..][..4].copy_from_slice(&2u32.to_le_bytes());
        write_symbols(&recording.kernel, &mut mixed).unwrap();
        let err = read(mixed.as_slice()).unwrap_err();
        assert!(
            err.to_string().contains("StackNodes part in a version 2"),
            "{err}"
        );
    }

    #[test]
    fn symbols_appended_to_version_2_records_make_a_version_3_file() {
        use crate::recording::run_folder::{RECORDS_FILE, append_symbols, load};
        let recording = example();
        let dir = tempfile::tempdir().unwrap();
        let mut records = encode_records(&recording);
        records[VERSION_OFFSET as usize..][..4].copy_from_slice(&2u32.to_le_bytes());
        std::fs::write(dir.path().join(RECORDS_FILE), &records).unwrap();
        let loaded = load(dir.path()).unwrap();
        assert!(loaded.recording.needs_symbols());
        let records_len = loaded.records_len.unwrap();
        append_symbols(dir.path(), records_len, &recording.kernel).unwrap();
        let file = std::fs::read(dir.path().join(RECORDS_FILE)).unwrap();
        assert_eq!(file, encode(&recording));
        // Of this version now, whole and symbolised: its long lists are walked from the file.
        let loaded = load(dir.path()).unwrap().recording;
        assert_eq!(loaded, without_long_lists(&loaded));
        assert!(loaded.kernel.stored.is_some());
    }

    #[test]
    fn a_deep_recursion_costs_its_new_frames_only() {
        // 1,000 samples, each one frame deeper than the last: as whole stacks, 500,500 frames.
        let mut recording = example();
        let frames: Vec<Frame> = (0..1000)
            .map(|depth| frame(if depth % 2 == 0 { "a" } else { "b" }, false))
            .collect();
        let stacks: Vec<Vec<Frame>> = (1..=frames.len()).map(|n| frames[..n].to_vec()).collect();
        let (tree, ids) = StackTree::of_stacks(&stacks);
        assert_eq!(tree.nodes().count(), 1000);
        let k = &mut recording.kernel;
        let sample = k.samples[0].clone();
        (k.stacks, k.samples, k.sample_stacks) = (tree, vec![sample; ids.len()], ids);
        recording.addresses.sample_pids = vec![7; 1000];
        let bytes = encode(&recording);
        assert!(bytes.len() < 12_000, "{} bytes", bytes.len());
        assert_eq!(read(bytes.as_slice()).unwrap().recording, recording);
    }

    #[test]
    fn long_lists_span_several_parts() {
        let mut recording = example();
        let switch = recording.kernel.switches[1];
        recording.kernel.switches = vec![switch; 200_000];
        let bytes = encode(&recording);
        assert!(bytes.len() > 2 * TARGET_PART_LEN);
        assert_eq!(read(bytes.as_slice()).unwrap().recording, recording);
    }

    #[test]
    fn every_cut_reads_the_complete_parts_before_it() {
        let recording = example();
        let bytes = encode_records(&recording);
        let meta_end = 12 + 8 + serde_json::to_vec(&Meta::of(&recording)).unwrap().len() + 4;
        let mut prefixes = Vec::new();
        for cut in 0..bytes.len() {
            match read(&bytes[..cut]) {
                Err(RecordsError::Empty) => assert!(cut < meta_end, "cut at {cut}"),
                Err(e) => panic!("cut at {cut}: {e}"),
                Ok(loaded) => {
                    assert!(cut >= meta_end);
                    let Completeness::Cut { after_byte, .. } = loaded.completeness else {
                        panic!("cut at {cut} read as complete");
                    };
                    assert!(after_byte <= cut as u64);
                    assert_is_prefix(&loaded.recording, &recording);
                    let long = LongLists::of(&loaded.recording);
                    prefixes.push(list_counts(&loaded.recording, &long, VERSION));
                }
            }
        }
        // Each complete part adds entries: the prefixes grow with the cut.
        assert!(prefixes.windows(2).all(|w| w[0] <= w[1]));
        assert!(prefixes.first() < prefixes.last());
    }

    fn assert_is_prefix(part: &Recording, whole: &Recording) {
        fn prefix<T: PartialEq + std::fmt::Debug>(a: &[T], b: &[T]) {
            assert!(b.starts_with(a), "{a:?} is not a prefix of {b:?}");
        }
        assert_eq!(part.run, whole.run);
        let (p, w) = (&part.kernel, &whole.kernel);
        assert_eq!(p.capabilities, w.capabilities);
        assert_eq!(p.thread_names, w.thread_names);
        prefix(&p.switches, &w.switches);
        prefix(&p.thread_starts, &w.thread_starts);
        prefix(&p.samples, &w.samples);
        prefix(&p.sample_stacks, &w.sample_stacks);
        prefix(&p.switch_samples, &w.switch_samples);
        prefix(&p.switch_sample_stacks, &w.switch_sample_stacks);
        for (p, w) in part.counters.counters.iter().zip(&whole.counters.counters) {
            assert_eq!((&p.name, p.scaling), (&w.name, w.scaling));
            prefix(&p.cpu_samples, &w.cpu_samples);
        }
    }

    #[test]
    fn a_damaged_preamble_or_part_is_a_typed_error() {
        let bytes = encode(&example());
        let with = |at: usize, byte: u8| {
            let mut b = bytes.clone();
            b[at] = byte;
            read(b.as_slice())
        };
        assert!(matches!(with(0, b'X'), Err(RecordsError::NotRecords)));
        assert!(matches!(
            with(8, 4),
            Err(RecordsError::FutureVersion { found: 4, .. })
        ));
        assert!(matches!(
            with(8, 0),
            Err(RecordsError::OldVersion { found: 0, .. })
        ));
        assert!(matches!(
            with(12, 99),
            Err(RecordsError::Corrupt { offset: 12, .. })
        ));
        let last_payload_byte = bytes.len() - 5;
        let err = with(last_payload_byte, bytes[last_payload_byte] ^ 1).unwrap_err();
        assert!(err.to_string().contains("checksum mismatch"), "{err}");
        assert!(matches!(read(&b""[..]), Err(RecordsError::Empty)));
    }

    /// The end part's length, for counts below 128 (one byte each).
    fn end_part_len(recording: &Recording) -> usize {
        8 + 1 + list_counts(recording, &LongLists::of(recording), VERSION).len() + 4
    }

    #[test]
    fn a_missing_part_is_caught_by_the_end_part() {
        // The same recording without its thread starts, with the original's end part.
        let recording = example();
        let mut without = recording.clone();
        without.kernel.thread_starts.clear();
        let whole = encode_records(&recording);
        let mut spliced = encode_records(&without);
        let end_len = end_part_len(&recording);
        spliced.truncate(spliced.len() - end_len);
        spliced.extend_from_slice(&whole[whole.len() - end_len..]);
        let err = read(spliced.as_slice()).unwrap_err();
        assert!(err.to_string().contains("parts are missing"), "{err}");
    }

    #[test]
    fn parts_must_refer_to_what_was_read_before_them() {
        let mut bytes = encode(&Recording::default());
        bytes.truncate(bytes.len() - end_part_len(&Recording::default()));
        let mut w = PartWriter { out: &mut bytes };
        // A sample stack list naming stack 1 while no stack was read (0 is the empty stack).
        w.part(PartKind::SampleStacks, &[1, 1]).unwrap();
        let err = read(bytes.as_slice()).unwrap_err();
        assert!(
            err.to_string().contains("stack id 1 refers to no stack"),
            "{err}"
        );
    }

    fn recordings() -> impl Strategy<Value = Recording> {
        let frame = ("[a-z:]{1,8}", any::<bool>()).prop_map(|(function, inlined)| Frame {
            function: function.into(),
            inlined,
        });
        let stack = prop::collection::vec(frame, 0..4);
        let sample = (
            any::<u64>(),
            any::<u32>(),
            0u32..4,
            prop::collection::vec(any::<u64>(), 0..5),
        )
            .prop_map(|(time_ns, tid, cpu, callchain)| CpuSample {
                time_ns,
                tid,
                cpu,
                callchain: callchain.into(),
            });
        let switch = (any::<u64>(), any::<u32>(), any::<u32>(), 0..3u8).prop_map(
            |(time_ns, tid, cpu, kind)| SwitchRecord {
                time_ns,
                tid,
                cpu,
                kind: [
                    SwitchKind::In,
                    SwitchKind::OutPreempted,
                    SwitchKind::OutVoluntary,
                ][kind as usize],
            },
        );
        let counter_sample =
            (any::<u64>(), 0u32..4, -1e18..1e18f64).prop_map(|(time_ns, cpu, value)| {
                CounterSample {
                    time_ns,
                    cpu,
                    value,
                }
            });
        (
            prop::collection::vec(switch, 0..20),
            prop::collection::vec(sample.clone(), 0..12),
            prop::collection::vec(stack.clone(), 0..12),
            prop::collection::vec(sample, 0..6),
            prop::collection::vec(stack, 0..6),
            prop::collection::vec(prop::collection::vec(counter_sample, 0..10), 0..3),
            (any::<u32>(), 0.0..10.0f64, any::<Option<u64>>()),
        )
            .prop_map(
                |(
                    switches,
                    samples,
                    sample_stacks,
                    switch_samples,
                    switch_sample_stacks,
                    series,
                    (pid, threshold, steal_ns),
                )| {
                    let mut recording = example();
                    recording.run.child_pid = pid;
                    recording.run.options.thresholds.active_overhead = threshold;
                    let k = &mut recording.kernel;
                    k.thread_starts = switches
                        .iter()
                        .map(|s| ThreadStart {
                            time_ns: s.time_ns,
                            tid: s.tid,
                        })
                        .collect();
                    let both = [&sample_stacks[..], &switch_sample_stacks[..]].concat();
                    let (tree, mut ids) = StackTree::of_stacks(&both);
                    let switch_ids = ids.split_off(sample_stacks.len());
                    (k.switches, k.samples, k.sample_stacks) = (switches, samples, ids);
                    (k.switch_samples, k.switch_sample_stacks) = (switch_samples, switch_ids);
                    k.stacks = tree;
                    k.steal_ns = steal_ns;
                    let a = &mut recording.addresses;
                    // Two processes, in runs.
                    a.sample_pids = (0..k.samples.len())
                        .map(|i| 7 + (i / 3 % 2) as u32)
                        .collect();
                    a.switch_sample_pids = vec![7; k.switch_samples.len()];
                    let template = recording.counters.counters[0].clone();
                    recording.counters.counters = series
                        .into_iter()
                        .enumerate()
                        .map(|(i, cpu_samples)| CounterSeries {
                            name: format!("counter-{i}"),
                            cpu_samples,
                            ..template.clone()
                        })
                        .collect();
                    recording
                },
            )
    }

    /// `recording` without its long lists, as [`read_counted`] reads it.
    fn without_long_lists(recording: &Recording) -> Recording {
        let mut r = recording.clone();
        let k = &mut r.kernel;
        (k.switches, k.samples, k.switch_samples) = Default::default();
        (k.sample_stacks, k.switch_sample_stacks) = Default::default();
        let a = &mut r.addresses;
        (a.sample_pids, a.switch_sample_pids) = Default::default();
        for series in &mut r.counters.counters {
            series.cpu_samples.clear();
        }
        r
    }

    fn walked<T>(walk: impl Iterator<Item = Result<T, RecordsError>>) -> Vec<T> {
        walk.collect::<Result<_, _>>().expect("walked again")
    }

    /// What [`read_counted`] left in the file, walked again, is what [`read`] holds.
    fn assert_walks_give_back(bytes: &[u8], whole: &Recording) {
        let k = &whole.kernel;
        assert_eq!(walked(walk_switches(bytes)), k.switches);
        for (switch_outs, samples, stacks) in [
            (false, &k.samples, &k.sample_stacks),
            (true, &k.switch_samples, &k.switch_sample_stacks),
        ] {
            let fields = |s: &CpuSample| (s.time_ns, s.tid, s.cpu);
            let walked_samples = walked(walk_samples(bytes, switch_outs));
            assert!(walked_samples.iter().all(|s| s.callchain.is_empty()));
            assert!(
                walked_samples
                    .iter()
                    .map(fields)
                    .eq(samples.iter().map(fields))
            );
            assert_eq!(&walked(walk_sample_stacks(bytes, switch_outs)), stacks);
        }
        for (index, series) in whole.counters.counters.iter().enumerate() {
            assert_eq!(
                walked(walk_counter_samples(bytes, index)),
                series.cpu_samples
            );
        }
        assert_walks_give_back_what_symbolising_needs(bytes, whole);
    }

    /// The samples' call chains by id, and each sample's process, walked again.
    fn assert_walks_give_back_what_symbolising_needs(bytes: &[u8], whole: &Recording) {
        let (k, a) = (&whole.kernel, &whole.addresses);
        let chains = walked(walk_callchains(bytes));
        for (switch_outs, samples, pids) in [
            (false, &k.samples, &a.sample_pids),
            (true, &k.switch_samples, &a.switch_sample_pids),
        ] {
            let walked_samples = walked(walk_sample_chains(bytes, switch_outs));
            let chain_of = |id: u64| &chains[id as usize];
            assert!(
                (walked_samples
                    .iter()
                    .map(|&(t, tid, id)| (t, tid, chain_of(id))))
                .eq(samples.iter().map(|s| (s.time_ns, s.tid, &s.callchain)))
            );
            let runs = walked(walk_sample_pid_runs(bytes, switch_outs));
            let walked_pids = runs
                .iter()
                .flat_map(|&(pid, n)| std::iter::repeat_n(pid, n as usize));
            assert!(walked_pids.eq(pids.iter().copied()));
        }
    }

    #[test]
    fn counted_records_leave_their_long_lists_to_be_walked_again() {
        let recording = example();
        let bytes = encode(&recording);
        let (counted, walkable) = read_counted(bytes.as_slice()).unwrap();
        assert!(walkable);
        assert_eq!(counted.completeness, Completeness::Complete);
        assert_eq!(counted.recording, without_long_lists(&recording));
        assert_walks_give_back(&bytes, &recording);
    }

    #[test]
    fn records_that_cannot_be_walked_again_say_so() {
        // Without symbols: symbolised from the held samples' call chains first.
        let recording = example();
        let (_, walkable) = read_counted(encode_records(&recording).as_slice()).unwrap();
        assert!(!walkable);
        // Switches out of time order: sorted in memory by the analysis.
        let mut unsorted = example();
        unsorted.kernel.switches.reverse();
        let (_, walkable) = read_counted(encode(&unsorted).as_slice()).unwrap();
        assert!(!walkable);
        // Cut in the records (what is left is read whole, with --partial) or in the symbols
        // (symbolised again).
        let records = encode_records(&recording);
        let (cut, walkable) = read_counted(&records[..records.len() - 1]).unwrap();
        assert!(!walkable);
        assert_ne!(cut.completeness, Completeness::Complete);
        let bytes = encode(&recording);
        let (_, walkable) = read_counted(&bytes[..bytes.len() - 1]).unwrap();
        assert!(!walkable);
    }

    #[test]
    fn a_walk_of_damaged_records_ends_with_a_typed_error() {
        let mut bytes = encode(&example());
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let items: Vec<_> = walk_sample_stacks(bytes.as_slice(), true).collect();
        assert!(
            matches!(items.last(), Some(Err(RecordsError::Corrupt { .. }))),
            "{items:?}"
        );
        let items: Vec<_> = walk_switches(&b"PPRUNREC"[..]).collect();
        assert!(matches!(items[..], [Err(RecordsError::Empty)]), "{items:?}");
    }

    proptest! {
        #[test]
        fn counted_records_walk_back_what_read_holds(recording in recordings()) {
            let bytes = encode(&recording);
            let whole = read(bytes.as_slice()).unwrap().recording;
            let (counted, walkable) = read_counted(bytes.as_slice()).unwrap();
            let sorted = whole.kernel.switches.is_sorted_by_key(|s| s.time_ns);
            prop_assert_eq!(walkable, sorted && !whole.needs_symbols());
            prop_assert_eq!(counted.recording, without_long_lists(&whole));
            assert_walks_give_back(&bytes, &whole);
        }

        #[test]
        fn recordings_read_back_bit_for_bit(recording in recordings()) {
            let loaded = read(encode(&recording).as_slice()).unwrap();
            prop_assert_eq!(loaded.completeness, Completeness::Complete);
            prop_assert_eq!(loaded.recording, recording);
        }

        #[test]
        fn a_cut_file_gives_a_prefix_or_a_typed_error(
            recording in recordings(),
            cut in any::<prop::sample::Index>(),
        ) {
            let bytes = encode(&recording);
            let cut = cut.index(bytes.len());
            match read(&bytes[..cut]) {
                // Cut in the symbols: the records without them.
                Ok(loaded) if loaded.completeness == Completeness::Complete => {
                    prop_assert_eq!(loaded.recording, without_stacks(&recording));
                }
                Ok(loaded) => assert_is_prefix(&loaded.recording, &recording),
                Err(e) => {
                    let before_meta = matches!(e, RecordsError::Empty);
                    prop_assert!(before_meta, "{}", e);
                }
            }
        }

        #[test]
        fn a_flipped_byte_never_panics_nor_passes_unnoticed(
            recording in recordings(),
            at in any::<prop::sample::Index>(),
            flip in 1..=255u8,
        ) {
            let mut bytes = encode(&recording);
            let at = at.index(bytes.len());
            bytes[at] ^= flip;
            if let Ok(loaded) = read(bytes.as_slice()) {
                // A flipped length may turn the file into a cut one; it never reads as another
                // complete recording.
                if loaded.completeness == Completeness::Complete {
                    prop_assert!(
                        loaded.recording == recording
                            || loaded.recording == without_stacks(&recording)
                    );
                }
            }
        }

        #[test]
        fn random_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..512)) {
            let mut bytes = MAGIC.to_vec();
            bytes.extend_from_slice(&VERSION.to_le_bytes());
            bytes.extend_from_slice(&tail);
            let _ = read(bytes.as_slice());
            let _ = read(tail.as_slice());
        }
    }
}
