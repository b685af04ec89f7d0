//! Symbolisation of sampled user call chains with blazesym.
//!
//! The profiled process has usually exited by the time we symbolise, so `/proc/<pid>/maps` is
//! gone: the address space is rebuilt from the kernel's `PERF_RECORD_MMAP2`, `FORK` and
//! exec-`COMM` records, and each address is turned into a file offset that blazesym resolves
//! against the ELF file (symbols, DWARF line tables, inlined frames, demangled names). File
//! offsets rather than virtual addresses make the PIE load bias and shared-library placement
//! irrelevant.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{CodeInfo, Input, Symbolized, Symbolizer};

use crate::kernel::{CpuSample, Frame};

/// An executable mapping reported by `PERF_RECORD_MMAP2` (or `MMAP`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub time_ns: u64,
    pub pid: u32,
    pub start: u64,
    pub len: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// A path, or a kernel label such as `[vdso]` or `//anon`.
    pub path: PathBuf,
}

/// A `PERF_RECORD_FORK`: `pid == ppid` for a new thread, otherwise a new process that starts
/// with a copy of its parent's address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForkEvent {
    pub time_ns: u64,
    pub pid: u32,
    pub ppid: u32,
    pub tid: u32,
    pub ptid: u32,
}

/// An exec (a `PERF_RECORD_COMM` with the exec flag): the address space of `pid` starts over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecEvent {
    pub time_ns: u64,
    pub pid: u32,
}

/// The kernel's side-band records that describe address spaces over time.
#[derive(Clone, Debug, Default)]
pub struct SideBand {
    pub maps: Vec<Mapping>,
    pub forks: Vec<ForkEvent>,
    pub execs: Vec<ExecEvent>,
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

/// What one call-chain entry resolved to before symbolisation.
#[derive(Clone, Copy)]
enum Site<'a> {
    Unknown,
    /// Mapped, but not something blazesym can open (`[vdso]`, anonymous memory, …).
    Label(&'a Mapping),
    File(&'a Mapping, u64),
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
/// root first. `pids[i]` is the process of `samples[i]`. The result has one stack per sample.
pub fn symbolize_samples(samples: &[CpuSample], pids: &[u32], side: &SideBand) -> Vec<Vec<Frame>> {
    let spaces = AddressSpaces::new(side);

    // Return addresses point after the call; one byte back lands inside the call instruction,
    // which is the line and inlining context the caller was actually in.
    let sites: Vec<Vec<Site>> = samples
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let pid = pids.get(i).copied().unwrap_or(s.tid);
            s.callchain
                .iter()
                .enumerate()
                .map(|(depth, &ip)| {
                    let addr = if depth == 0 { ip } else { ip.saturating_sub(1) };
                    match spaces.lookup(pid, s.time_ns, addr) {
                        None => Site::Unknown,
                        Some(m) if !is_file(&m.path) => Site::Label(m),
                        Some(m) => Site::File(m, addr - m.start + m.pgoff),
                    }
                })
                .collect()
        })
        .collect();

    let mut offsets_by_file: HashMap<&Path, Vec<u64>> = HashMap::new();
    for site in sites.iter().flatten() {
        if let Site::File(m, off) = site {
            offsets_by_file
                .entry(m.path.as_path())
                .or_default()
                .push(*off);
        }
    }

    let symbolizer = Symbolizer::builder()
        .enable_code_info(true)
        .enable_inlined_fns(true)
        .enable_demangling(true)
        // Only the debug information inside the mapped files: following debug links into
        // /usr/lib/debug (e.g. libc6-dbg) decompresses tens of MiB of DWARF, about 30 ms of
        // every run, for inlining detail inside system libraries.
        .set_debug_dirs(Some(std::iter::empty::<&Path>()))
        .build();
    let mut resolved: HashMap<(&Path, u64), Vec<Frame>> = HashMap::new();
    for (path, mut offsets) in offsets_by_file {
        offsets.sort_unstable();
        offsets.dedup();
        let src = Source::Elf(Elf::new(path));
        // A file that vanished or is not ELF leaves its frames as `[libname]`.
        let Ok(syms) = symbolizer.symbolize(&src, Input::FileOffset(&offsets)) else {
            continue;
        };
        for (off, sym) in offsets.iter().zip(syms) {
            if let Symbolized::Sym(sym) = sym {
                let mut frames = vec![Frame {
                    function: qualified_name(&sym.name, sym.code_info.as_deref()),
                    inlined: false,
                }];
                frames.extend(sym.inlined.iter().map(|f| Frame {
                    function: qualified_name(&f.name, f.code_info.as_ref()),
                    inlined: true,
                }));
                resolved.insert((path, *off), frames);
            }
        }
    }

    sites
        .iter()
        .map(|chain| {
            let mut stack = Vec::with_capacity(chain.len());
            for site in chain.iter().rev() {
                match site {
                    Site::Unknown => stack.push(unknown_frame("[unknown]".to_string())),
                    Site::Label(m) => stack.push(unknown_frame(module_label(m))),
                    Site::File(m, off) => match resolved.get(&(m.path.as_path(), *off)) {
                        Some(frames) => stack.extend(frames.iter().cloned()),
                        None => stack.push(unknown_frame(module_label(m))),
                    },
                }
            }
            stack
        })
        .collect()
}

/// DWARF names a function by its bare name (`hot_kernel`, `now`); its module path is read
/// from the file the code is in, as cargo lays sources out: `<crate>[-version]/src/a/b.rs` is
/// `crate::a::b`, `examples/quickstart.rs` is `quickstart` (`lib.rs`, `main.rs`, `mod.rs` add
/// nothing). A name that already has a path (`<T as Trait>::f`) is kept.
fn qualified_name(name: &str, code: Option<&CodeInfo<'_>>) -> String {
    let module = code.and_then(|code| {
        let dir = code.dir.as_deref().unwrap_or(Path::new(""));
        module_path(&dir.join::<&OsStr>(code.file.as_ref()))
    });
    // The path is in the part before generic arguments; `<T as Trait>::f` has one.
    let head = name.split('<').next().unwrap_or(name);
    match module {
        Some(module) if !head.is_empty() && !head.contains("::") => format!("{module}::{name}"),
        _ => name.to_owned(),
    }
}

/// `…/rayon-core-1.12.1/src/join/mod.rs` → `rayon_core::join`; `None` for a file outside a
/// cargo source layout.
fn module_path(file: &Path) -> Option<String> {
    let parts: Vec<&str> = file.iter().filter_map(OsStr::to_str).collect();
    let stem = |part: &str| part.strip_suffix(".rs").map(str::to_owned);
    let (crate_name, modules) = match parts.iter().rposition(|p| *p == "src") {
        Some(src) if src > 0 => (crate_of_dir(parts[src - 1]), &parts[src + 1..]),
        _ => {
            let at = parts
                .iter()
                .rposition(|p| matches!(*p, "examples" | "benches" | "tests"))?;
            (stem(parts.get(at + 1)?)?, &parts[at + 2..])
        }
    };
    let mut path = vec![crate_name];
    for part in modules {
        let module = stem(part).unwrap_or_else(|| (*part).to_owned());
        if !matches!(module.as_str(), "lib" | "main" | "mod") {
            path.push(module);
        }
    }
    Some(path.join("::"))
}

/// A crate's directory name without the version cargo appends (`rayon-core-1.12.1`), with
/// the `-` of a package name written `_` as in paths.
fn crate_of_dir(dir: &str) -> String {
    let mut name = dir;
    while let Some((head, tail)) = name.rsplit_once('-') {
        if !tail.starts_with(|c: char| c.is_ascii_digit()) {
            break;
        }
        name = head;
    }
    name.replace('-', "_")
}

fn unknown_frame(function: String) -> Frame {
    Frame {
        function,
        inlined: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            callchain: vec![0x1010, 0x4010, 0x9999],
        };
        let stacks = symbolize_samples(&[sample], &[1], &side);
        let names: Vec<&str> = stacks[0].iter().map(|f| f.function.as_str()).collect();
        assert_eq!(names, ["[unknown]", "[libfoo.so]", "[vdso]"]);
    }

    #[test]
    fn module_paths_follow_the_cargo_source_layout() {
        let path = |p: &str| module_path(Path::new(p));
        assert_eq!(
            path("/home/u/.cargo/registry/src/index/rayon-core-1.12.1/src/join/mod.rs").as_deref(),
            Some("rayon_core::join")
        );
        assert_eq!(
            path("/rustc/abc/library/core/src/slice/sort/mod.rs").as_deref(),
            Some("core::slice::sort")
        );
        assert_eq!(
            path("/w/parprof-rt/src/lib.rs").as_deref(),
            Some("parprof_rt")
        );
        assert_eq!(
            path("/w/examples/quickstart.rs").as_deref(),
            Some("quickstart")
        );
        assert_eq!(path("/usr/include/stdio.h"), None);
    }
}
