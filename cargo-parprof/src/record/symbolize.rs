//! Symbolisation of sampled user call chains with blazesym.
//!
//! The profiled process has usually exited by the time we symbolise, so `/proc/<pid>/maps` is
//! gone: the address space is rebuilt from the kernel's `PERF_RECORD_MMAP2`, `FORK` and
//! exec-`COMM` records, and each address is turned into a file offset that blazesym resolves
//! against the ELF file (symbols, DWARF inlined frames, demangled names). File
//! offsets rather than virtual addresses make the PIE load bias and shared-library placement
//! irrelevant.

use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Sym, Symbolizer};
use rayon::prelude::*;

pub use crate::recording::address_spaces::{
    ExecEvent, ForkEvent, Mapping, SampleAddresses, SampleAt, SideBand,
};
use crate::recording::kernel_records::{
    CallChain, EMPTY_STACK, Frame, Interner, KernelRecords, StackId, StackInterner, StackTree,
};
use crate::recording::{self, Recording, run_folder::SavedSamples};

impl SampleAddresses {
    /// Fills in the symbolised stacks of `kernel`'s samples and switch samples, held in memory,
    /// from the mapped files (see [`symbolize_lists`]).
    pub fn symbolize(&self, kernel: &mut KernelRecords) {
        let mut chains = ChainIds::default();
        let lists = [
            (&kernel.samples, &self.sample_pids),
            (&kernel.switch_samples, &self.switch_sample_pids),
        ]
        .map(|(samples, pids)| {
            (samples.iter().enumerate())
                .map(|(i, s)| SampleAt {
                    time_ns: s.time_ns,
                    pid: pids.get(i).copied().unwrap_or(s.tid),
                    chain: chains.id(&s.callchain),
                })
                .collect::<Vec<_>>()
        });
        let (tree, [stacks, switch_stacks]) =
            symbolize_lists(&chains.chains, lists.map(Vec::into_iter), &self.side_band);
        kernel.stacks = Arc::new(tree);
        kernel.sample_stacks = stacks;
        kernel.switch_sample_stacks = switch_stacks;
    }
}

/// Symbolises the samples saved without symbols in the run folder `dir` (its records
/// `records_len` bytes long) and appends the symbols there ([`symbolise_saved_samples`], then
/// [`SavedSymbols::save`]).
pub fn symbolize_saved(
    dir: &Path,
    records_len: u64,
    recording: &mut Recording,
) -> anyhow::Result<()> {
    symbolise_saved_samples(dir, &recording.addresses.side_band)?.save(dir, records_len, recording)
}

/// The symbolised stacks of the samples saved in a run folder, made apart from the recording
/// they go into: the analysis's pass over the trace, which needs none, runs meanwhile.
pub struct SavedSymbols {
    tree: StackTree,
    sample_stacks: Vec<StackId>,
    switch_sample_stacks: Vec<StackId>,
}

/// Symbolises the samples saved without symbols in the run folder `dir`, walking them from its
/// records rather than holding them, in the address spaces of `side_band`. What symbolising
/// holds is the run's distinct call chains and a stack id per sample.
pub fn symbolise_saved_samples(dir: &Path, side_band: &SideBand) -> anyhow::Result<SavedSymbols> {
    let saved = SavedSamples::in_folder(dir);
    let chains = saved.call_chains();
    let lists = [saved.samples(false), saved.samples(true)];
    let (tree, [sample_stacks, switch_sample_stacks]) = symbolize_lists(&chains, lists, side_band);
    drop(chains);
    if let Some(failure) = saved.failure() {
        anyhow::bail!("the samples could not be read again to symbolise them: {failure}");
    }
    Ok(SavedSymbols {
        tree,
        sample_stacks,
        switch_sample_stacks,
    })
}

impl SavedSymbols {
    /// Gives `recording` these stacks and appends them to its records in the run folder `dir`
    /// (`records_len` bytes long); then `recording`'s long lists are walked from the folder
    /// ([`recording::walk_lists_from_file`]). Should the symbols not be written, `recording`
    /// keeps them beside its lists, held if they still were.
    pub fn save(
        self,
        dir: &Path,
        records_len: u64,
        recording: &mut Recording,
    ) -> anyhow::Result<()> {
        let kernel = &mut recording.kernel;
        kernel.stacks = Arc::new(self.tree);
        kernel.sample_stacks = self.sample_stacks;
        kernel.switch_sample_stacks = self.switch_sample_stacks;
        recording::append_symbols(dir, records_len, kernel)?;
        recording::walk_lists_from_file(dir, recording);
        Ok(())
    }
}

/// The call chains of samples held in memory, each by an id: samples share the interned
/// chains, so a chain is known by its address.
#[derive(Default)]
struct ChainIds {
    ids: FxHashMap<usize, u32>,
    chains: Vec<CallChain>,
}

impl ChainIds {
    fn id(&mut self, chain: &CallChain) -> u32 {
        let next = self.chains.len() as u32;
        *(self.ids)
            .entry(Arc::as_ptr(chain).cast::<u64>() as usize)
            .or_insert_with(|| {
                self.chains.push(Arc::clone(chain));
                next
            })
    }
}

/// Bounded so that a fork cycle in corrupt records cannot recurse forever.
const MAX_FORK_DEPTH: usize = 32;

struct AddressSpaces<'a> {
    /// Per pid, sorted by time.
    maps: HashMap<u32, Vec<&'a Mapping>>,
    /// Per pid, sorted.
    execs: HashMap<u32, Vec<u64>>,
    /// The process fork that created each pid.
    parent: HashMap<u32, ForkEvent>,
}

impl<'a> AddressSpaces<'a> {
    fn new(side: &'a SideBand) -> Self {
        let mut maps: HashMap<u32, Vec<&Mapping>> = HashMap::new();
        for m in &side.maps {
            maps.entry(m.pid).or_default().push(m);
        }
        for v in maps.values_mut() {
            v.sort_by_key(|m| m.time_ns);
        }
        let mut execs: HashMap<u32, Vec<u64>> = HashMap::new();
        for e in &side.execs {
            execs.entry(e.pid).or_default().push(e.time_ns);
        }
        for v in execs.values_mut() {
            v.sort_unstable();
        }
        let mut parent = HashMap::new();
        for f in side.forks.iter().filter(|f| f.pid != f.ppid) {
            parent.entry(f.pid).or_insert(*f);
        }
        AddressSpaces {
            maps,
            execs,
            parent,
        }
    }

    /// How many of the mappings and of the execs of `pid` had happened by `time_ns`: all that
    /// [`Self::lookup`] of `pid` at that time depends on besides the address (a forked
    /// process falls back on its parent at the fork, a fixed time), so two samples of one
    /// process and one call chain that agree on it have the same sites.
    fn seen_by(&self, pid: u32, time_ns: u64) -> (u32, u32) {
        let maps = (self.maps.get(&pid)).map_or(0, |v| v.partition_point(|m| m.time_ns <= time_ns));
        let execs = (self.execs.get(&pid)).map_or(0, |v| v.partition_point(|&t| t <= time_ns));
        (maps as u32, execs as u32)
    }

    fn lookup(&self, pid: u32, time_ns: u64, addr: u64) -> Option<&'a Mapping> {
        self.lookup_at(pid, time_ns, addr, 0)
            // Records of one instant can arrive in any order across CPUs; an address that is
            // only explained by a mapping "from the future" is still best explained by it.
            .or_else(|| self.any_mapping(pid, addr))
    }

    fn lookup_at(&self, pid: u32, time_ns: u64, addr: u64, depth: usize) -> Option<&'a Mapping> {
        let last_exec = self
            .execs
            .get(&pid)
            .and_then(|v| v.iter().rev().find(|&&t| t <= time_ns).copied());
        let epoch_start = last_exec.unwrap_or(0);
        if let Some(maps) = self.maps.get(&pid) {
            let found = maps
                .iter()
                .rev()
                .filter(|m| m.time_ns <= time_ns && m.time_ns >= epoch_start)
                .find(|m| contains(m, addr));
            if found.is_some() {
                return found.copied();
            }
        }
        // Without an exec since its fork, a process still runs its parent's image, whose
        // mappings the kernel does not report again.
        if last_exec.is_none()
            && depth < MAX_FORK_DEPTH
            && let Some(f) = self.parent.get(&pid)
        {
            return self.lookup_at(f.ppid, f.time_ns, addr, depth + 1);
        }
        None
    }

    fn any_mapping(&self, pid: u32, addr: u64) -> Option<&'a Mapping> {
        self.maps
            .get(&pid)?
            .iter()
            .rev()
            .find(|m| contains(m, addr))
            .copied()
    }
}

fn contains(m: &Mapping, addr: u64) -> bool {
    addr >= m.start && addr - m.start < m.len
}

/// What one call-chain entry resolved to before symbolisation. Mappings are told apart by
/// identity: two with the same contents are still two records of the kernel.
#[derive(Clone, Copy)]
enum Site<'a> {
    Unknown,
    /// Mapped, but not something blazesym can open (`[vdso]`, anonymous memory, …).
    Label(&'a Mapping),
    File(&'a Mapping, u64),
}

impl Site<'_> {
    fn identity(&self) -> (usize, *const Mapping, u64) {
        match *self {
            Site::Unknown => (0, std::ptr::null(), 0),
            Site::Label(m) => (1, m, 0),
            Site::File(m, off) => (2, m, off),
        }
    }
}

impl PartialEq for Site<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for Site<'_> {}

impl std::hash::Hash for Site<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.identity().hash(state);
    }
}

fn is_file(path: &Path) -> bool {
    path.is_absolute()
}

/// A short name for frames we cannot symbolise: `[libfoo.so]`, `[vdso]`, `[unknown]`.
fn module_label(m: &Mapping) -> String {
    let text = m.path.to_string_lossy();
    if text.starts_with('[') {
        return text.into_owned();
    }
    match m.path.file_name().map(OsStr::to_string_lossy) {
        Some(name) if is_file(&m.path) => format!("[{name}]"),
        _ => "[unknown]".to_string(),
    }
}

/// Symbolises each sample's call chain (leaf first, raw instruction pointers, `chains` by the
/// samples' ids) into frames, root first, for each list of samples. Each result has one stack
/// per sample of its list, in the tree returned with them.
///
/// A long run repeats a few thousand distinct call chains millions of times, so the memory
/// here follows the distinct ones, not the samples (which may be walked from a file): each
/// sample is known by what decides its sites (its process, its chain and how far its address
/// space had come, [`SiteKey`]); each key is resolved to sites and symbolised once, each
/// address of a file once (whichever list has it), each function name once, and the stacks as
/// a prefix tree shared by every sample.
pub fn symbolize_lists<const N: usize, I>(
    chains: &[CallChain],
    lists: [I; N],
    side: &SideBand,
) -> (StackTree, [Vec<StackId>; N])
where
    I: Iterator<Item = SampleAt> + Send,
{
    let sites = ChainSites {
        chains,
        spaces: AddressSpaces::new(side),
    };
    // Each list walked on a core of its own, where there are cores.
    let keyed = std::thread::scope(|scope| {
        (lists.map(|list| scope.spawn(|| distinct_keys(list, &sites.spaces))))
            .map(|list| list.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    });
    let mut names = Interner::default();
    let firsts = keyed.iter().flat_map(|(firsts, _)| firsts);
    let resolved = resolve_file_sites(firsts, &sites, &mut names);
    let mut tree = StackInterner::default();
    let mut chain_sites = Vec::new();
    let ids = keyed.map(|(firsts, mut key_of_sample)| {
        let stacks: Vec<StackId> = (firsts.iter())
            .map(|first| {
                sites.of(first, &mut chain_sites);
                stack_of(&chain_sites, &resolved, &mut names, &mut tree)
            })
            .collect();
        for id in &mut key_of_sample {
            *id = stacks[*id as usize];
        }
        key_of_sample
    });
    (tree.finish(), ids)
}

/// What decides the sites of a sample's call chain: its process, the chain, and how many of
/// the process's mappings and execs had happened by then ([`AddressSpaces::seen_by`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct SiteKey {
    pid: u32,
    chain: u32,
    seen: (u32, u32),
}

/// The first sample of each distinct [`SiteKey`] of `samples`, and which key each sample has.
fn distinct_keys(
    samples: impl Iterator<Item = SampleAt>,
    spaces: &AddressSpaces,
) -> (Vec<SampleAt>, Vec<u32>) {
    let mut ids: FxHashMap<SiteKey, u32> = FxHashMap::default();
    let mut firsts = Vec::new();
    let mut key_of_sample = Vec::with_capacity(samples.size_hint().0);
    for s in samples {
        let key = SiteKey {
            pid: s.pid,
            chain: s.chain,
            seen: spaces.seen_by(s.pid, s.time_ns),
        };
        let id = *ids.entry(key).or_insert_with(|| {
            firsts.push(s);
            (firsts.len() - 1) as u32
        });
        key_of_sample.push(id);
    }
    (firsts, key_of_sample)
}

/// The call chains of samples by their ids, and the address spaces they were taken in.
struct ChainSites<'a> {
    chains: &'a [CallChain],
    spaces: AddressSpaces<'a>,
}

impl<'a> ChainSites<'a> {
    /// The sites of the call chain of `sample`, into `out`.
    fn of(&self, sample: &SampleAt, out: &mut Vec<Site<'a>>) {
        let chain = (self.chains.get(sample.chain as usize)).map_or(&[][..], |c| &c[..]);
        out.clear();
        // Return addresses point after the call; one byte back lands inside the call
        // instruction, which is the line and inlining context the caller was actually in.
        out.extend(chain.iter().enumerate().map(|(depth, &ip)| {
            let addr = if depth == 0 { ip } else { ip.saturating_sub(1) };
            match self.spaces.lookup(sample.pid, sample.time_ns, addr) {
                None => Site::Unknown,
                Some(m) if !is_file(&m.path) => Site::Label(m),
                Some(m) => Site::File(m, addr - m.start + m.pgoff),
            }
        }));
    }
}

/// The frames of each file address of the call chains of the samples `firsts`, each
/// symbolised once, the files in parallel.
fn resolve_file_sites<'c, 's: 'c>(
    firsts: impl IntoIterator<Item = &'c SampleAt>,
    sites: &ChainSites<'s>,
    names: &mut Interner<str>,
) -> FxHashMap<(&'s OsStr, u64), Vec<Frame>> {
    let mut offsets_by_file: FxHashMap<&OsStr, rustc_hash::FxHashSet<u64>> = FxHashMap::default();
    let mut chain = Vec::new();
    for first in firsts {
        sites.of(first, &mut chain);
        for site in &chain {
            if let Site::File(m, off) = site {
                offsets_by_file
                    .entry(m.path.as_os_str())
                    .or_default()
                    .insert(*off);
            }
        }
    }
    let files: Vec<(&OsStr, Vec<u64>)> = offsets_by_file
        .into_iter()
        .map(|(path, offsets)| {
            let mut offsets: Vec<u64> = offsets.into_iter().collect();
            offsets.sort_unstable();
            (path, offsets)
        })
        .collect();
    let symbols: Vec<FileSymbols> = files
        .par_iter()
        .map(|(path, offsets)| FileSymbols::read(Path::new(path), offsets))
        .collect();
    let mut resolved = FxHashMap::default();
    for ((path, offsets), symbols) in files.iter().zip(symbols) {
        for (off, frames) in symbols.frames(offsets, names) {
            resolved.insert((*path, off), frames);
        }
    }
    resolved
}

/// The stack of a chain of sites, root first, in `tree`; two chains of sites can still make
/// one stack (the same file mapped twice), stored once.
fn stack_of(
    chain: &[Site],
    resolved: &FxHashMap<(&OsStr, u64), Vec<Frame>>,
    names: &mut Interner<str>,
    tree: &mut StackInterner,
) -> StackId {
    let mut unknown = |label: String| Frame {
        function: names.intern(label),
        inlined: false,
    };
    let mut stack = EMPTY_STACK;
    for site in chain.iter().rev() {
        match site {
            Site::Unknown => stack = tree.child(stack, &unknown("[unknown]".to_string())),
            Site::Label(m) => stack = tree.child(stack, &unknown(module_label(m))),
            Site::File(m, off) => match resolved.get(&(m.path.as_os_str(), *off)) {
                Some(frames) => {
                    stack = (frames.iter()).fold(stack, |at, f| tree.child(at, f));
                }
                None => stack = tree.child(stack, &unknown(module_label(m))),
            },
        }
    }
    stack
}

/// A symbolizer that reads only the debug information inside the mapped files: following
/// debug links into /usr/lib/debug (e.g. libc6-dbg) decompresses tens of MiB of DWARF, about
/// 30 ms of every run, for inlining detail inside system libraries.
fn symbolizer() -> Symbolizer {
    Symbolizer::builder()
        .enable_code_info(true)
        .enable_inlined_fns(true)
        .enable_demangling(true)
        .set_debug_dirs(Some(std::iter::empty::<&Path>()))
        .build()
}

/// What one file says of some offsets, from its symbol table and from its debug information:
/// two passes over the file, read in parallel.
struct FileSymbols {
    /// The symbol table's symbol at each offset.
    table: Vec<Option<Sym<'static>>>,
    /// The symbol at each offset with the functions inlined there; `None` when the file could
    /// not be read (it vanished, or is not ELF).
    dwarf: Option<Vec<Option<Sym<'static>>>>,
}

impl FileSymbols {
    fn read(path: &Path, offsets: &[u64]) -> FileSymbols {
        let symbols = |elf: Elf| {
            let symbolizer = symbolizer();
            let found = symbolizer.symbolize(&Source::Elf(elf), Input::FileOffset(offsets));
            found.ok().map(|found| {
                (found.into_iter())
                    .map(|s| s.into_sym().map(Sym::into_owned))
                    .collect::<Vec<_>>()
            })
        };
        let (table, dwarf) = rayon::join(
            || {
                let mut elf = Elf::new(path);
                elf.debug_syms = false;
                symbols(elf).unwrap_or_default()
            },
            || symbols(Elf::new(path)),
        );
        FileSymbols { table, dwarf }
    }

    /// The frames at each of `offsets` (those the file has a symbol for), outermost first.
    ///
    /// Names come from the symbols, never from where the source file lies: the function that
    /// holds the address is named by its entry in the symbol table (the demangled linkage
    /// name, `rayon_demo::nbody::next_velocity_par::{{closure}}`); the functions inlined into
    /// it by the DWARF linkage names of their abstract origins (the profiling build keeps
    /// them), else by DWARF's bare name (`{closure#0}<u32>`), the best the file holds. A file
    /// that vanished or is not ELF gives nothing: its frames stay `[libname]`.
    fn frames(self, offsets: &[u64], names: &mut Interner<str>) -> Vec<(u64, Vec<Frame>)> {
        let Some(with_dwarf) = self.dwarf else {
            return Vec::new();
        };
        let mut frames = Vec::with_capacity(offsets.len());
        for (i, (off, sym)) in offsets.iter().zip(with_dwarf).enumerate() {
            let Some(sym) = sym else { continue };
            let outer = match self.table.get(i) {
                Some(Some(table_sym)) => names.intern(&*table_sym.name),
                _ => names.intern(&*sym.name),
            };
            let mut stack = vec![Frame {
                function: outer,
                inlined: false,
            }];
            stack.extend(sym.inlined.iter().map(|f| Frame {
                function: names.intern(&*f.name),
                inlined: true,
            }));
            frames.push((*off, stack));
        }
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::kernel_records::{CpuSample, StackedSample};
    use std::path::PathBuf;

    fn map(time_ns: u64, pid: u32, start: u64, path: &str) -> Mapping {
        Mapping {
            time_ns,
            pid,
            start,
            len: 0x1000,
            pgoff: 0,
            path: PathBuf::from(path),
        }
    }

    #[test]
    fn exec_starts_a_new_address_space_and_forks_inherit_the_parent() {
        let side = SideBand {
            maps: vec![
                map(10, 1, 0x1000, "/bin/old"),
                map(30, 1, 0x1000, "/bin/new"),
            ],
            forks: vec![ForkEvent {
                time_ns: 20,
                pid: 2,
                ppid: 1,
                tid: 2,
                ptid: 1,
            }],
            execs: vec![ExecEvent {
                time_ns: 25,
                pid: 1,
            }],
        };
        let spaces = AddressSpaces::new(&side);
        assert_eq!(
            spaces.lookup(1, 15, 0x1800).unwrap().path,
            Path::new("/bin/old")
        );
        assert_eq!(
            spaces.lookup(1, 35, 0x1800).unwrap().path,
            Path::new("/bin/new")
        );
        assert_eq!(
            spaces.lookup(2, 40, 0x1800).unwrap().path,
            Path::new("/bin/old")
        );
        assert!(spaces.lookup(1, 35, 0x9000).is_none());
    }

    /// The tree and stacks of `samples` of process `pid`, symbolised as held in memory.
    fn symbolize_held(
        samples: Vec<CpuSample>,
        pid: u32,
        side: &SideBand,
    ) -> (Arc<StackTree>, Vec<StackId>) {
        let addresses = SampleAddresses {
            sample_pids: vec![pid; samples.len()],
            side_band: side.clone(),
            ..SampleAddresses::default()
        };
        let mut kernel = KernelRecords {
            samples,
            ..KernelRecords::default()
        };
        addresses.symbolize(&mut kernel);
        (kernel.stacks, kernel.sample_stacks)
    }

    #[test]
    fn one_chain_has_the_sites_of_the_address_space_at_each_sample() {
        let side = SideBand {
            maps: vec![map(10, 1, 0x1000, "[old]"), map(30, 1, 0x1000, "[new]")],
            execs: vec![ExecEvent {
                time_ns: 25,
                pid: 1,
            }],
            ..SideBand::default()
        };
        let chain: CallChain = vec![0x1010].into();
        let samples = [15, 20, 35, 40, 27].map(|time_ns| CpuSample {
            time_ns,
            tid: 1,
            cpu: 0,
            callchain: Arc::clone(&chain),
        });
        let (tree, stacks) = symbolize_held(samples.to_vec(), 1, &side);
        let name = |stack: StackId| {
            (tree.frames(stack).iter().map(|f| f.function.to_string())).collect::<Vec<_>>()
        };
        assert_eq!(stacks[0], stacks[1]);
        assert_eq!(stacks[2], stacks[3]);
        assert_eq!(name(stacks[0]), ["[old]"]);
        assert_eq!(name(stacks[2]), ["[new]"]);
        // After the exec, before the new mapping: no mapping of this address space yet, and
        // none of the parent's (there is none), so the one mapped later explains it.
        assert_eq!(name(stacks[4]), ["[new]"]);
    }

    #[test]
    fn samples_symbolised_from_the_saved_records_get_the_symbols_of_samples_held() {
        let side = SideBand {
            maps: vec![
                map(10, 1, 0x1000, "[old]"),
                map(30, 1, 0x1000, "[new]"),
                map(0, 1, 0x4000, "/nonexistent/libfoo.so"),
                map(0, 2, 0x1000, "[other]"),
            ],
            execs: vec![ExecEvent {
                time_ns: 25,
                pid: 1,
            }],
            ..SideBand::default()
        };
        let chains: [CallChain; 3] = [
            vec![0x1010, 0x4010].into(),
            vec![0x4020].into(),
            vec![0x1010, 0x4020, 0x9999].into(),
        ];
        let list = |n: u64, step: u64| {
            let samples: Vec<CpuSample> = (0..n)
                .map(|i| CpuSample {
                    time_ns: i * step % 45,
                    tid: 1 + (i % 5 == 0) as u32,
                    cpu: (i % 2) as u32,
                    callchain: Arc::clone(&chains[(i * 7 % 3) as usize]),
                })
                .collect();
            let pids = samples.iter().map(|s| s.tid).collect::<Vec<_>>();
            (samples, pids)
        };
        let ((samples, sample_pids), (switch_samples, switch_sample_pids)) =
            (list(200, 3), list(90, 7));
        let recording = Recording {
            kernel: KernelRecords {
                samples,
                switch_samples,
                ..KernelRecords::default()
            },
            addresses: SampleAddresses {
                sample_pids,
                switch_sample_pids,
                side_band: side,
            },
            ..Recording::default()
        };
        let (held_dir, walked_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let records_len = recording::save(held_dir.path(), &recording).unwrap();
        recording::save(walked_dir.path(), &recording).unwrap();

        let mut held = recording.clone();
        held.addresses.symbolize(&mut held.kernel);
        recording::append_symbols(held_dir.path(), records_len, &held.kernel).unwrap();
        let mut walked = recording;
        recording::walk_lists_from_file(walked_dir.path(), &mut walked);
        // Before the symbols are appended the samples are walked without stacks (the analysis's
        // pass over the trace takes their times meanwhile).
        let before: Vec<_> = walked.kernel.cpu_samples().collect();
        assert_eq!(before.len(), 200);
        assert!(before.iter().all(|(_, stack)| stack.is_none()));
        symbolize_saved(walked_dir.path(), records_len, &mut walked).unwrap();
        let after: Vec<_> = walked.kernel.cpu_samples().collect();
        assert_eq!(after.len(), 200);
        assert!(after.iter().all(|(_, stack)| stack.is_some()));
        let times =
            |samples: &[StackedSample]| samples.iter().map(|(s, _)| s.time_ns).collect::<Vec<_>>();
        assert_eq!(times(&before), times(&after));

        let bytes =
            |dir: &tempfile::TempDir| std::fs::read(dir.path().join("records.ppr")).unwrap();
        assert_eq!(bytes(&held_dir), bytes(&walked_dir));
        assert_eq!(held.kernel.stacks, walked.kernel.stacks);
        // Samples of one chain in two address spaces: more stacks than chains.
        assert!(held.kernel.stacks.nodes().count() > chains.len());
    }

    #[test]
    fn unmapped_and_unreadable_frames_get_labels() {
        let side = SideBand {
            maps: vec![
                map(0, 1, 0x1000, "[vdso]"),
                map(0, 1, 0x4000, "/nonexistent/libfoo.so"),
            ],
            ..SideBand::default()
        };
        let sample = CpuSample {
            time_ns: 5,
            tid: 1,
            cpu: 0,
            callchain: vec![0x1010, 0x4010, 0x9999].into(),
        };
        let (tree, stacks) = symbolize_held(vec![sample], 1, &side);
        let names: Vec<&str> = (tree.frames(stacks[0]).iter())
            .map(|f| &*f.function)
            .collect();
        assert_eq!(names, ["[unknown]", "[libfoo.so]", "[vdso]"]);
    }

    #[test]
    fn samples_of_one_chain_share_one_stack_and_stacks_share_names() {
        let side = SideBand {
            maps: vec![
                map(0, 1, 0x1000, "[vdso]"),
                map(0, 1, 0x4000, "/nonexistent/libfoo.so"),
            ],
            ..SideBand::default()
        };
        let sample = |time_ns: u64, callchain: &[u64]| CpuSample {
            time_ns,
            tid: 1,
            cpu: 0,
            callchain: callchain.into(),
        };
        let mut samples: Vec<CpuSample> = (0..1000).map(|t| sample(t, &[0x1010, 0x4010])).collect();
        // Another address in the same mappings: another chain, the same frames.
        samples.push(sample(1000, &[0x1020, 0x4020]));
        samples.push(sample(1001, &[0x4010]));
        let count = samples.len();
        let (tree, stacks) = symbolize_held(samples, 1, &side);
        assert_eq!(stacks.len(), count);
        assert!(stacks[..1001].iter().all(|s| *s == stacks[0]));
        let names = |stack: StackId| {
            (tree.frames(stack).iter())
                .map(|f| f.function.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(stacks[0]), ["[libfoo.so]", "[vdso]"]);
        assert_eq!(names(stacks[1001]), ["[libfoo.so]"]);
        // The shorter stack is the longer one's parent: a prefix tree, each frame once.
        assert_eq!(tree.nodes().count(), 2);
    }
}
