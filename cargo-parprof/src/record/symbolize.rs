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
    ExecEvent, ForkEvent, Mapping, SampleAddresses, SideBand,
};
use crate::recording::kernel_records::{
    CpuSample, EMPTY_STACK, Frame, Interner, KernelRecords, StackId, StackInterner, StackTree,
};

impl SampleAddresses {
    /// Fills in the symbolised stacks of `kernel`'s samples and switch samples, from the
    /// mapped files.
    ///
    /// The collection's last step, after the program ended, when its CPUs are free: each
    /// distinct address of both lists is symbolised once, the files in parallel (each file's
    /// symbol table and its debug information on a core of their own, where there are cores).
    pub fn symbolize(&self, kernel: &mut KernelRecords) {
        let (tree, [stacks, switch_stacks]) = symbolize_lists(
            [
                (&kernel.samples, &self.sample_pids),
                (&kernel.switch_samples, &self.switch_sample_pids),
            ],
            &self.side_band,
        );
        kernel.stacks = Arc::new(tree);
        kernel.sample_stacks = stacks;
        kernel.switch_sample_stacks = switch_stacks;
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

/// Symbolises each sample's call chain (leaf first, raw instruction pointers) into frames,
/// root first, for each list of samples; `pids[i]` is the process of `samples[i]`. Each result
/// has one stack per sample of its list, in the tree returned with them.
///
/// A long run repeats a few thousand distinct call chains millions of times, so the memory
/// here follows the distinct ones: each is resolved to sites once and symbolised once, each
/// address of a file once (whichever list has it), each function name once, and the stacks
/// as a prefix tree shared by every sample.
pub fn symbolize_lists<const N: usize>(
    lists: [(&[CpuSample], &[u32]); N],
    side: &SideBand,
) -> (StackTree, [Vec<StackId>; N]) {
    let spaces = AddressSpaces::new(side);
    // Each list's chains on a core of their own, where there are cores.
    let chains = std::thread::scope(|scope| {
        (lists.map(|(samples, pids)| scope.spawn(|| distinct_site_chains(samples, pids, &spaces))))
            .map(|list| list.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    });
    let mut names = Interner::default();
    let resolved = resolve_file_sites(chains.iter().flat_map(|(c, _)| c), &mut names);
    let mut tree = StackInterner::default();
    let ids = chains.map(|(chains, chain_of_sample)| {
        let stacks = stacks_of_chains(&chains, &resolved, &mut names, &mut tree);
        chain_of_sample.into_iter().map(|id| stacks[id]).collect()
    });
    (tree.finish(), ids)
}

/// The distinct chains of sites of `samples`, and which one each sample has.
fn distinct_site_chains<'a>(
    samples: &[CpuSample],
    pids: &[u32],
    spaces: &'a AddressSpaces,
) -> (Vec<Vec<Site<'a>>>, Vec<usize>) {
    // Chains are hundreds of sites deep in a recursion: hashed with the compiler's fast hash.
    let mut chain_ids: FxHashMap<Vec<Site>, usize> = FxHashMap::default();
    let mut chain_of_sample = Vec::with_capacity(samples.len());
    let mut sites = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let pid = pids.get(i).copied().unwrap_or(s.tid);
        sites.clear();
        // Return addresses point after the call; one byte back lands inside the call
        // instruction, which is the line and inlining context the caller was actually in.
        sites.extend(s.callchain.iter().enumerate().map(|(depth, &ip)| {
            let addr = if depth == 0 { ip } else { ip.saturating_sub(1) };
            match spaces.lookup(pid, s.time_ns, addr) {
                None => Site::Unknown,
                Some(m) if !is_file(&m.path) => Site::Label(m),
                Some(m) => Site::File(m, addr - m.start + m.pgoff),
            }
        }));
        let id = match chain_ids.get(&sites) {
            Some(&id) => id,
            None => {
                let id = chain_ids.len();
                chain_ids.insert(sites.clone(), id);
                id
            }
        };
        chain_of_sample.push(id);
    }
    // Each chain held once: the map's keys, in the order of their ids.
    let mut chains = vec![Vec::new(); chain_ids.len()];
    for (chain, id) in chain_ids {
        chains[id] = chain;
    }
    (chains, chain_of_sample)
}

/// The frames of each file address the chains hold, each symbolised once, the files in
/// parallel.
fn resolve_file_sites<'c, 's: 'c>(
    chains: impl IntoIterator<Item = &'c Vec<Site<'s>>>,
    names: &mut Interner<str>,
) -> FxHashMap<(&'s OsStr, u64), Vec<Frame>> {
    let mut offsets_by_file: FxHashMap<&OsStr, Vec<u64>> = FxHashMap::default();
    for site in chains.into_iter().flatten() {
        if let Site::File(m, off) = site {
            offsets_by_file
                .entry(m.path.as_os_str())
                .or_default()
                .push(*off);
        }
    }
    let files: Vec<(&OsStr, Vec<u64>)> = offsets_by_file
        .into_iter()
        .map(|(path, mut offsets)| {
            offsets.sort_unstable();
            offsets.dedup();
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

/// Each chain's stack, root first, in `tree`; two chains of sites can still make one stack
/// (the same file mapped twice), stored once.
fn stacks_of_chains(
    chains: &[Vec<Site>],
    resolved: &FxHashMap<(&OsStr, u64), Vec<Frame>>,
    names: &mut Interner<str>,
    tree: &mut StackInterner,
) -> Vec<StackId> {
    let mut unknown = |label: String| Frame {
        function: names.intern(label),
        inlined: false,
    };
    chains
        .iter()
        .map(|chain| {
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
        })
        .collect()
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
        let (tree, [stacks]) = symbolize_lists([(&[sample][..], &[1][..])], &side);
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
        let (tree, [stacks]) =
            symbolize_lists([(&samples[..], &vec![1; samples.len()][..])], &side);
        assert_eq!(stacks.len(), samples.len());
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
