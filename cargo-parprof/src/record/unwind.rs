//! DWARF unwinding of the user stacks copied with each cpu-clock sample.
//!
//! The kernel walks frame pointers for the call chain it records, and code built without them
//! (the standard library as rustup ships it, libc) breaks that walk: frames vanish, or the
//! walk stops. Like `perf record --call-graph dwarf` and samply, each sample therefore also
//! carries the user registers and a copy of the top of the user stack, and the unwinder
//! (framehop) follows the `.eh_frame` rules of each mapped file through that copy. The copy is
//! bounded ([`STACK_COPY_BYTES`]), so a deep stack (rayon's recursive `join`) runs out of
//! copied bytes before its root: from there the frame-pointer chain goes on, joined at the
//! frame both hold.
//!
//! It runs on the collector thread while the program runs: each copy is unwound as it is read
//! and then dropped, so memory does not grow with the run. The address spaces are followed
//! from the same ring's `MMAP2`, `FORK` and exec records.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use crate::recording::kernel_records::UnwindCounts;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};
use memmap2::Mmap;
use object::{Object, ObjectSection, ObjectSegment, SegmentFlags};

/// Bytes of user stack copied with each sample: a few dozen frames of typical Rust code. Each
/// sample costs the kernel this copy and the ring buffer this space.
pub const STACK_COPY_BYTES: u32 = 16 * 1024;

/// The user registers asked for, in perf's x86-64 numbering: bp (6), sp (7) and ip (8). The
/// kernel writes them in that order.
pub const SAMPLE_REGS_USER: u64 = (1 << 6) | (1 << 7) | (1 << 8);

/// Frames of one unwound stack at most, as for the kernel's chains.
const MAX_FRAMES: usize = 1024;

/// The registers and the stack copy of one sample.
#[derive(Clone, Copy, Debug)]
pub struct UserStack<'a> {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// The stack from `sp` up, as far as the kernel could copy it.
    pub bytes: &'a [u8],
}

impl UserStack<'_> {
    /// The word at `addr` if it lies in the copy.
    fn read(&self, addr: u64) -> Option<u64> {
        let at = usize::try_from(addr.checked_sub(self.sp)?).ok()?;
        let word = self.bytes.get(at..at.checked_add(8)?)?;
        Some(u64::from_le_bytes(word.try_into().ok()?))
    }
}

/// A section of a mapped file. The file is mapped once and its sections are views of the
/// mapping: reading a module copies nothing. Read into memory with its `.text` copied, a
/// 7 MB program took the collector milliseconds at the program's start, while it preempted
/// the program's workers (seen as `oversubscription` of the first region on 2 CPUs).
#[derive(Clone)]
struct SectionBytes {
    file: Arc<Mmap>,
    range: Range<usize>,
}

impl std::ops::Deref for SectionBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.file[self.range.clone()]
    }
}

/// What unwinding needs of one ELF file, read once however often it is mapped.
struct ElfUnwindInfo {
    sections: ExplicitModuleSectionInfo<SectionBytes>,
    /// The executable `PT_LOAD` segments: (file offsets, address stated in the file).
    segments: Vec<(Range<u64>, u64)>,
}

impl ElfUnwindInfo {
    fn read(path: &Path) -> Option<ElfUnwindInfo> {
        let file = std::fs::File::open(path).ok()?;
        // SAFETY: the files mapped are the program's executable and shared libraries, which
        // are not rewritten in place while a process runs them (builds and package updates
        // write a new file and rename it over the old one, which stays mapped as it was). A
        // file truncated all the same would fault the collector on a read of a lost page:
        // the risk every profiler that maps binaries takes (samply and perf alike).
        let file = Arc::new(unsafe { Mmap::map(&file) }.ok()?);
        let elf = object::File::parse(&**file).ok()?;
        let section = |name: &str| {
            let s = elf.section_by_name(name)?;
            let (offset, size) = s.file_range()?;
            let start = usize::try_from(offset).ok()?;
            let range = start..start.checked_add(usize::try_from(size).ok()?)?;
            // A section beyond the end of the file (a damaged file) is left out, so that a
            // view never indexes past the map.
            file.get(range.clone())?;
            let data = SectionBytes {
                file: Arc::clone(&file),
                range,
            };
            Some((s.address()..s.address() + s.size(), data))
        };
        let (eh_frame_svma, eh_frame) = section(".eh_frame").unzip();
        let (eh_frame_hdr_svma, eh_frame_hdr) = section(".eh_frame_hdr").unzip();
        let (text_svma, text) = section(".text").unzip();
        eh_frame.as_ref()?;
        let segments = elf
            .segments()
            .filter(|s| matches!(s.flags(), SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0))
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset..offset + size, s.address())
            })
            .collect();
        Some(ElfUnwindInfo {
            sections: ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma,
                text,
                got_svma: elf
                    .section_by_name(".got")
                    .map(|s| s.address()..s.address() + s.size()),
                eh_frame_svma,
                eh_frame,
                eh_frame_hdr_svma,
                eh_frame_hdr,
                stubs_svma: None,
                stub_helper_svma: None,
                unwind_info: None,
                debug_frame: None,
                text_segment_svma: None,
                text_segment: None,
            },
            segments,
        })
    }

    /// Where address 0 of the file lies in a process that mapped file offset `pgoff` at
    /// `start`.
    fn base_avma(&self, start: u64, pgoff: u64) -> Option<u64> {
        const PAGE: u64 = 4096;
        let (offsets, vaddr) = self
            .segments
            .iter()
            .find(|(offsets, _)| offsets.start & !(PAGE - 1) <= pgoff && pgoff < offsets.end)?;
        // avma(o) = start + (o - pgoff) and svma(o) = vaddr + (o - offset), for every offset o.
        Some(
            start
                .wrapping_sub(pgoff)
                .wrapping_add(offsets.start)
                .wrapping_sub(*vaddr),
        )
    }
}

/// One process's address space: its modules, and when each was mapped.
#[derive(Clone, Default)]
struct AddressSpace {
    modules: UnwinderX86_64<SectionBytes>,
    /// (start address, time mapped) of each module.
    mapped_at: Vec<(u64, u64)>,
}

/// The address spaces of the profiled processes, and the unwinding of their stack copies.
#[derive(Default)]
pub struct StackUnwinder {
    processes: HashMap<u32, AddressSpace>,
    /// Unwind information by path; `None` for a file that is gone or has none.
    files: HashMap<Box<Path>, Option<Arc<ElfUnwindInfo>>>,
    cache: CacheX86_64,
    counts: UnwindCounts,
}

impl StackUnwinder {
    /// An executable mapping of `path` (file offset `pgoff` at `start`) in `pid`, at `time_ns`.
    pub fn on_mmap(
        &mut self,
        pid: u32,
        time_ns: u64,
        (start, len, pgoff): (u64, u64, u64),
        path: &Path,
    ) {
        let info = self
            .files
            .entry(path.into())
            .or_insert_with(|| ElfUnwindInfo::read(path).map(Arc::new));
        let Some(info) = info else { return };
        let Some(base_avma) = info.base_avma(start, pgoff) else {
            return;
        };
        let module = Module::new(
            path.display().to_string(),
            start..start.saturating_add(len),
            base_avma,
            info.sections.clone(),
        );
        let process = self.processes.entry(pid).or_default();
        process.modules.remove_module(start);
        process.modules.add_module(module);
        process.mapped_at.retain(|&(s, _)| s != start);
        process.mapped_at.push((start, time_ns));
    }

    /// A new process `pid` started as a copy of `parent`.
    pub fn on_fork(&mut self, pid: u32, parent: u32) {
        if let Some(modules) = self.processes.get(&parent).cloned() {
            self.processes.insert(pid, modules);
        }
    }

    /// `pid` called `exec` at `time_ns`: the modules mapped before are gone. The records come
    /// from one ring per CPU, drained one after the other, so the loader's mappings of the
    /// libraries (made on another CPU, after the exec) can be read before the exec itself: those
    /// stay.
    pub fn on_exec(&mut self, pid: u32, time_ns: u64) {
        let Some(process) = self.processes.get_mut(&pid) else {
            return;
        };
        let modules = &mut process.modules;
        process.mapped_at.retain(|&(start, mapped_ns)| {
            let before = mapped_ns < time_ns;
            if before {
                modules.remove_module(start);
            }
            !before
        });
    }

    /// The call chain of a sample of `pid` (instruction pointer first, then return addresses,
    /// as the kernel writes them): unwound through `stack`, continued along the kernel's
    /// `frame_pointer_chain` past the end of the copy.
    pub fn unwind(&mut self, pid: u32, stack: &UserStack, frame_pointer_chain: &[u64]) -> Vec<u64> {
        let (frames, to_the_root) = match self.processes.get(&pid) {
            Some(process) => unwind_copy(&process.modules, &mut self.cache, stack),
            None => (Vec::new(), false),
        };
        let (chain, how) = join(frames, to_the_root, frame_pointer_chain);
        *match how {
            Joined::ToTheRoot => &mut self.counts.to_the_root,
            Joined::ToFramePointers => &mut self.counts.joined_to_frame_pointers,
            Joined::CutAtTheCopy => &mut self.counts.cut_at_the_copy,
            Joined::FramePointersOnly => &mut self.counts.frame_pointers_only,
        } += 1;
        chain
    }

    /// A sample of `pid` that carried no stack copy (a kernel thread, a failed copy).
    pub fn count_without_copy(&mut self) {
        self.counts.frame_pointers_only += 1;
    }

    pub fn counts(&self) -> UnwindCounts {
        self.counts
    }
}

/// The frames found in the copy, and whether the unwinder reached the thread's root.
fn unwind_copy(
    process: &UnwinderX86_64<SectionBytes>,
    cache: &mut CacheX86_64,
    stack: &UserStack,
) -> (Vec<u64>, bool) {
    let mut read_stack = |addr| stack.read(addr).ok_or(());
    let regs = UnwindRegsX86_64::new(stack.ip, stack.sp, stack.bp);
    let mut frames = process.iter_frames(stack.ip, regs, cache, &mut read_stack);
    let mut out = Vec::new();
    while out.len() < MAX_FRAMES {
        match frames.next() {
            Ok(Some(frame)) => out.push(frame.address()),
            Ok(None) => return (out, true),
            // Usually the end of the copy; any other stop is handled the same way.
            Err(_) => break,
        }
    }
    (out, false)
}

#[derive(Debug, PartialEq, Eq)]
enum Joined {
    ToTheRoot,
    ToFramePointers,
    CutAtTheCopy,
    FramePointersOnly,
}

/// The unwound frames, continued along the frame-pointer chain where they stop short of the
/// root. The join is at the chain's occurrence of the last unwound address nearest the same
/// depth: the chain drops the frames of functions without frame pointers, so depths differ a
/// little, and recursion repeats addresses at other depths.
fn join(mut unwound: Vec<u64>, to_the_root: bool, chain: &[u64]) -> (Vec<u64>, Joined) {
    if to_the_root && !unwound.is_empty() {
        return (unwound, Joined::ToTheRoot);
    }
    let depth = unwound.len().saturating_sub(1);
    let at = unwound.last().and_then(|last| {
        chain
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, a)| *a == last)
            .min_by_key(|(i, _)| i.abs_diff(depth))
            .map(|(i, _)| i)
    });
    match at {
        Some(i) if i + 1 < chain.len() => {
            unwound.extend_from_slice(&chain[i + 1..]);
            (unwound, Joined::ToFramePointers)
        }
        _ if chain.len() > unwound.len() => (chain.to_vec(), Joined::FramePointersOnly),
        _ => (unwound, Joined::CutAtTheCopy),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_unwound_to_its_root_is_kept_whole() {
        let (chain, how) = join(vec![1, 2, 3], true, &[1, 3]);
        assert_eq!((chain, how), (vec![1, 2, 3], Joined::ToTheRoot));
    }

    #[test]
    fn the_frame_pointer_chain_continues_past_the_copy_at_the_same_depth() {
        // Recursion: 7 repeats. The chain lost frame 2 (no frame pointer); the copy ends at
        // the second 7, which the chain holds at depth 3 and 5.
        let unwound = vec![1, 2, 9, 7, 8, 7];
        let chain = [1, 9, 7, 8, 7, 8, 7, 8, 100];
        let (joined, how) = join(unwound, false, &chain);
        assert_eq!(how, Joined::ToFramePointers);
        assert_eq!(joined, vec![1, 2, 9, 7, 8, 7, 8, 7, 8, 100]);
    }

    #[test]
    fn without_a_common_frame_the_longer_chain_is_kept() {
        assert_eq!(
            join(vec![1], false, &[5, 6, 7]),
            (vec![5, 6, 7], Joined::FramePointersOnly)
        );
        assert_eq!(
            join(vec![1, 2, 3], false, &[5, 6]),
            (vec![1, 2, 3], Joined::CutAtTheCopy)
        );
        assert_eq!(
            join(Vec::new(), false, &[5, 6]),
            (vec![5, 6], Joined::FramePointersOnly)
        );
    }

    #[test]
    fn stack_reads_stay_inside_the_copy() {
        let bytes: Vec<u8> = (0u8..16).collect();
        let stack = UserStack {
            ip: 0,
            sp: 0x1000,
            bp: 0,
            bytes: &bytes,
        };
        assert_eq!(stack.read(0x1000), Some(0x0706_0504_0302_0100));
        assert_eq!(stack.read(0x1008), Some(0x0f0e_0d0c_0b0a_0908));
        assert_eq!(stack.read(0x1009), None);
        assert_eq!(stack.read(0xff8), None);
        assert_eq!(stack.read(u64::MAX), None);
    }

    /// An unwinder that holds this process's executable mappings, mapped at `time_ns`.
    #[cfg(target_arch = "x86_64")]
    fn unwinder_of_this_process(time_ns: u64) -> (StackUnwinder, u32) {
        let mut unwinder = StackUnwinder::default();
        let pid = std::process::id();
        let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
        for line in maps.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 6 || !fields[1].contains('x') || !fields[5].starts_with('/') {
                continue;
            }
            let (a, b) = fields[0].split_once('-').expect("a range");
            let start = u64::from_str_radix(a, 16).unwrap();
            let end = u64::from_str_radix(b, 16).unwrap();
            let pgoff = u64::from_str_radix(fields[2], 16).unwrap();
            unwinder.on_mmap(
                pid,
                time_ns,
                (start, end - start, pgoff),
                Path::new(fields[5]),
            );
        }
        (unwinder, pid)
    }

    #[cfg(target_arch = "x86_64")]
    /// This test binary's own stack, copied and unwound as the collector does with a sample.
    #[test]
    fn this_threads_stack_unwinds_through_its_own_mappings() {
        let (mut unwinder, pid) = unwinder_of_this_process(0);
        let (chain, counts) = nested_frames(3, &mut unwinder, pid);
        assert!(chain.len() >= 5, "too few frames: {chain:x?}");
        assert_eq!(counts.total(), 1);
        assert!(
            counts.to_the_root + counts.cut_at_the_copy == 1,
            "unwinding did not get through the copy: {counts:?}"
        );
    }

    /// The exec record comes from one CPU's ring, the loader's mappings of the libraries after
    /// it from another's, which may be drained first: an exec removes only what was mapped
    /// before it (the fresh-clone suite once lost libc's unwind rules this way for a whole run:
    /// 2,159 of 2,167 samples short of their root).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn an_exec_read_after_later_mappings_keeps_them() {
        let (mut unwinder, pid) = unwinder_of_this_process(20);
        unwinder.on_exec(pid, 10);
        let (kept, _) = nested_frames(3, &mut unwinder, pid);
        assert!(kept.len() >= 5, "the mappings were lost: {kept:x?}");
        unwinder.on_exec(pid, 30);
        let (gone, _) = nested_frames(3, &mut unwinder, pid);
        assert!(
            gone.len() < kept.len(),
            "mappings older than the exec kept: {gone:x?}"
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(never)]
    fn nested_frames(depth: u32, u: &mut StackUnwinder, pid: u32) -> (Vec<u64>, UnwindCounts) {
        if depth > 0 {
            let r = nested_frames(depth - 1, u, pid);
            return std::hint::black_box(r);
        }
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: reads three registers and the address of the next instruction.
        unsafe {
            std::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                bp = out(reg) bp,
            );
        }
        // SAFETY: the copy reads this thread's own live stack, above the stack pointer.
        let bytes = unsafe { std::slice::from_raw_parts(sp as *const u8, 4096) }.to_vec();
        let stack = UserStack {
            ip,
            sp,
            bp,
            bytes: &bytes,
        };
        let chain = u.unwind(pid, &stack, &[]);
        (chain, u.counts())
    }
}
