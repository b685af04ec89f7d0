//! The long lists of a collection (context switches, samples, switch samples) as the
//! collector keeps them while the program runs: off memory ([`crate::record::spill`]), each
//! sample's call chain by its id in a table of the distinct ones. `records.ppr` is written
//! from them as they are ([`ListsToWrite`]); callers that analyse in memory hold them
//! ([`KeptLists::hold`]).

use std::collections::HashMap;
use std::sync::Arc;

use crate::record::spill::{Spill, Spillable, Spilled};
use crate::recording::address_spaces::SampleAddresses;
use crate::recording::counters::CounterRecords;
use crate::recording::format::{ListsToWrite, SampleToWrite};
use crate::recording::kernel_records::{
    CallChain, CpuSample, KernelRecords, SwitchKind, SwitchRecord, SwitchWalk,
};

/// A sample as kept: its call chain by id, and its process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeptSample {
    pub time_ns: u64,
    pub tid: u32,
    pub cpu: u32,
    pub chain: u32,
    pub pid: u32,
}

/// The little-endian numbers at `i` of a spilled record (its length is the type's `BYTES`).
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from(u32_at(b, i)) | u64::from(u32_at(b, i + 4)) << 32
}

impl Spillable for KeptSample {
    const BYTES: usize = 24;
    /// A thread has one sample at a time on a CPU.
    type Key = (u64, u32, u32);
    fn key(&self) -> Self::Key {
        (self.time_ns, self.tid, self.cpu)
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.extend(self.time_ns.to_le_bytes());
        for n in [self.tid, self.cpu, self.chain, self.pid] {
            out.extend(n.to_le_bytes());
        }
    }
    fn get(b: &[u8]) -> Self {
        KeptSample {
            time_ns: u64_at(b, 0),
            tid: u32_at(b, 8),
            cpu: u32_at(b, 12),
            chain: u32_at(b, 16),
            pid: u32_at(b, 20),
        }
    }
}

impl Spillable for SwitchRecord {
    const BYTES: usize = 17;
    /// No two switches of a thread share it.
    type Key = (u64, u32, u32, u8);
    fn key(&self) -> Self::Key {
        (self.time_ns, self.tid, self.cpu, self.kind as u8)
    }
    fn put(&self, out: &mut Vec<u8>) {
        let (time_ns, tid, cpu) = (self.time_ns, self.tid, self.cpu);
        out.extend(time_ns.to_le_bytes());
        out.extend(tid.to_le_bytes());
        out.extend(cpu.to_le_bytes());
        out.push(self.kind as u8);
    }
    fn get(b: &[u8]) -> Self {
        SwitchRecord {
            time_ns: u64_at(b, 0),
            tid: u32_at(b, 8),
            cpu: u32_at(b, 12),
            kind: match b[16] {
                0 => SwitchKind::In,
                1 => SwitchKind::OutPreempted,
                _ => SwitchKind::OutVoluntary,
            },
        }
    }
}

impl SwitchWalk for Spilled<SwitchRecord> {
    fn walk(&self) -> Box<dyn Iterator<Item = SwitchRecord> + '_> {
        Box::new(Spilled::walk(self))
    }
}

/// The distinct call chains of a list of samples, each by its id (the order first seen).
#[derive(Default)]
pub struct ChainTable {
    ids: HashMap<CallChain, u32>,
    chains: Vec<CallChain>,
}

impl ChainTable {
    pub fn id(&mut self, chain: Vec<u64>) -> u32 {
        if let Some(&id) = self.ids.get(&chain[..]) {
            return id;
        }
        let chain: CallChain = chain.into();
        let id = self.chains.len() as u32;
        self.ids.insert(Arc::clone(&chain), id);
        self.chains.push(chain);
        id
    }

    /// The chains by id.
    pub fn finish(self) -> Vec<CallChain> {
        self.chains
    }
}

/// A finished collection's long lists, kept off memory, each in time order.
#[derive(Debug)]
pub struct KeptLists {
    pub switches: Arc<Spilled<SwitchRecord>>,
    /// The cpu samples, then the switch samples, each with the chains its ids refer to.
    pub samples: [(Spilled<KeptSample>, Vec<CallChain>); 2],
}

impl KeptLists {
    /// The lists held in `kernel` and `addresses`, and the readings of the counters counted
    /// from the switches held in `counters`, as a collection that kept nothing off memory
    /// made them (for callers that analyse in memory).
    pub fn hold(
        &self,
        kernel: &mut KernelRecords,
        addresses: &mut SampleAddresses,
        counters: &mut CounterRecords,
    ) {
        for series in &mut counters.counters {
            let readings = series.samples().collect();
            (series.cpu_samples, series.stored) = (readings, None);
        }
        kernel.switches = self.switches.walk().collect();
        let [(samples, sample_pids), (switch_samples, switch_sample_pids)] =
            self.samples.each_ref().map(|(list, chains)| {
                let no_chain = CallChain::from([]);
                (list.walk())
                    .map(|s| {
                        let chain = chains.get(s.chain as usize).unwrap_or(&no_chain);
                        let sample = CpuSample {
                            time_ns: s.time_ns,
                            tid: s.tid,
                            cpu: s.cpu,
                            callchain: Arc::clone(chain),
                        };
                        (sample, s.pid)
                    })
                    .unzip::<_, _, Vec<_>, Vec<_>>()
            });
        (kernel.samples, kernel.switch_samples) = (samples, switch_samples);
        (addresses.sample_pids, addresses.switch_sample_pids) = (sample_pids, switch_sample_pids);
    }
}

impl ListsToWrite for KeptLists {
    fn switches(&self) -> Box<dyn Iterator<Item = SwitchRecord> + '_> {
        Box::new(self.switches.walk())
    }

    fn samples(&self, switch_outs: bool) -> Box<dyn Iterator<Item = SampleToWrite<'_>> + '_> {
        let (list, chains) = &self.samples[usize::from(switch_outs)];
        Box::new(list.walk().map(move |s| {
            let chain = chains.get(s.chain as usize).map_or(&[][..], |c| &c[..]);
            (s.time_ns, s.tid, s.cpu, chain)
        }))
    }

    fn sample_pids(&self, switch_outs: bool) -> Box<dyn Iterator<Item = u32> + '_> {
        Box::new(
            self.samples[usize::from(switch_outs)]
                .0
                .walk()
                .map(|s| s.pid),
        )
    }
}

/// A list being kept, and the chains of its samples.
#[derive(Default)]
pub struct KeptSamples {
    pub samples: Spill<KeptSample>,
    pub chains: ChainTable,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::Recording;
    use crate::recording::address_spaces::SideBand;
    use crate::recording::format;

    /// `n` records of each list, out of time order as from several rings, over more than one
    /// spilled run; the same held, in time order.
    fn lists(n: u64) -> (KeptLists, Recording) {
        let chains: Vec<CallChain> = (0..5u64).map(|i| (0..i + 1).collect()).collect();
        let (mut switches, mut samples, mut switch_samples) =
            <(Spill<SwitchRecord>, KeptSamples, KeptSamples)>::default();
        let kinds = [
            SwitchKind::In,
            SwitchKind::OutPreempted,
            SwitchKind::OutVoluntary,
        ];
        for i in 0..n {
            let time_ns = (i * 7919) % n;
            let (tid, cpu) = (1 + (i % 3) as u32, (i % 2) as u32);
            switches.push(SwitchRecord {
                time_ns,
                tid,
                cpu,
                kind: kinds[(i % 3) as usize],
            });
            for (list, chain) in [(&mut samples, i % 5), (&mut switch_samples, (i * 3) % 4)] {
                let chain = list.chains.id(chains[chain as usize].to_vec());
                let pid = 100 + (i / 1000 % 2) as u32;
                (list.samples).push(KeptSample {
                    time_ns,
                    tid,
                    cpu,
                    chain,
                    pid,
                });
            }
        }
        let kept = |k: KeptSamples| (k.samples.finish(), k.chains.finish());
        let lists = KeptLists {
            switches: Arc::new(switches.finish()),
            samples: [kept(samples), kept(switch_samples)],
        };
        let mut held = Recording {
            addresses: SampleAddresses {
                side_band: SideBand::default(),
                ..SampleAddresses::default()
            },
            ..Recording::default()
        };
        let r = &mut held;
        lists.hold(&mut r.kernel, &mut r.addresses, &mut r.counters);
        (lists, held)
    }

    #[test]
    fn records_written_from_the_kept_lists_are_those_written_from_the_lists_held() {
        let (kept, held) = lists(150_000);
        let k = &held.kernel;
        assert_eq!(k.switches.len(), 150_000);
        assert!(
            k.switches
                .is_sorted_by_key(|s| (s.time_ns, s.tid, s.cpu, s.kind as u8))
        );
        assert!(k.samples.is_sorted_by_key(|s| (s.time_ns, s.tid, s.cpu)));
        assert_eq!(held.addresses.switch_sample_pids.len(), 150_000);
        let mut from_held = Vec::new();
        format::write_records(&held, &mut from_held).unwrap();
        let mut from_kept = Vec::new();
        let small = Recording {
            kernel: KernelRecords::default(),
            addresses: SampleAddresses::default(),
            ..held.clone()
        };
        format::write_records_of(&small, &kept, &mut from_kept).unwrap();
        assert!(from_held == from_kept, "the two writes differ");
        let read = format::read(from_kept.as_slice()).unwrap().recording;
        assert_eq!(read.kernel.switches, held.kernel.switches);
        assert_eq!(read.kernel.switch_samples, held.kernel.switch_samples);
        assert_eq!(read.addresses, held.addresses);
    }
}
