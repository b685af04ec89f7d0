//! cpu-clock samples folded by call stack, for the CPU flamegraph.

use super::model::{CpuSamples, OffCpuStacks, SampledStack, ThreadSummary, TimedSample};
use super::offcpu::{OffCpu, OffCpuIndex};
use super::threads::WRITER_THREAD;
use crate::recording::kernel_records::{CpuSample, Frame, KernelRecords, StackId};
use rustc_hash::{FxBuildHasher, FxHashMap};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

/// Suffix of an inlined frame: the annotation flamegraph tools (inferno's palettes included)
/// recognise as "inlined".
pub const INLINED_SUFFIX: &str = "_[i]";

pub(crate) struct FoldedSamples {
    pub samples: CpuSamples,
    /// Samples without a symbolised stack (shown with their raw addresses).
    pub unsymbolised: u64,
}

fn frame_name(frame: &Frame) -> String {
    let function = if frame.function.is_empty() {
        "[unknown]"
    } else {
        &*frame.function
    };
    if frame.inlined {
        format!("{function}{INLINED_SUFFIX}")
    } else {
        function.to_owned()
    }
}

/// Whether a frame is the profiler's own code, linked into the program: the probes' entry and
/// exit, the recorder and the clock reads (`_rdtsc` is inlined from `core::arch`).
pub(super) fn is_profiler_frame(function: &str) -> bool {
    let path = function.trim_start_matches('<');
    path.starts_with("parprof_rt::")
        || function.contains("drop_in_place<parprof_rt::")
        || function.contains("_rdtsc")
}

const PRIMITIVES: &[&str] = &[
    "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize", "f32",
    "f64", "bool", "char", "str",
];

/// A frame name without the `<`, `&`, `&mut `, `*mut `, `*const ` its type path starts with.
pub(super) fn type_path(name: &str) -> &str {
    let mut path = name;
    loop {
        let trimmed = path.trim_start_matches(['<', '&', '*']);
        let trimmed = ["mut ", "const "]
            .iter()
            .find_map(|p| trimmed.strip_prefix(p))
            .unwrap_or(trimmed);
        if trimmed.len() == path.len() {
            return path;
        }
        path = trimmed;
    }
}

/// Frames the profiler's code calls into without running user code: the standard library
/// and the crates inside it that symbolize a backtrace (an implicit region's call site), the
/// vDSO and libc (clock reads, allocation, the writer's I/O), unsymbolised addresses.
pub(super) fn is_runtime_library_frame(function: &str) -> bool {
    let path = type_path(function);
    // A trait's method for a generic or primitive type (`<T as alloc::string::ToString>::
    // to_string`, `<u8 as <[_]>::to_vec_in::ConvertVec>::to_vec`) is the trait's crate's.
    let path = match path.split_once(" as ") {
        Some((ty, trait_path)) if !ty.contains("::") => type_path(trait_path),
        _ => path,
    };
    // Methods of primitive types (`usize::checked_sub`) are core's.
    let primitive = path
        .split_once("::")
        .is_some_and(|(ty, _)| PRIMITIVES.contains(&ty.trim_end_matches('>')));
    primitive
        || [
            "core::",
            "std::",
            "alloc::",
            "addr2line::",
            "gimli::",
            "object::",
            "miniz_oxide::",
            "rustc_demangle::",
            "adler2::",
            "hashbrown::",
            // The C library's allocator and memory functions.
            "malloc",
            "calloc",
            "realloc",
            "free",
            "_int_",
            "mem",
            "[",
            "0x",
            "__",
            "clock_gettime",
        ]
        .iter()
        .any(|prefix| path.starts_with(prefix))
}

/// Splits the profiler's own time from the program's. A sample is the profiler's when its
/// innermost profiler frame is followed (toward the leaf) by library frames only; otherwise
/// the profiler frames are wrappers around user code (`parprof_rt::region::join`, the
/// instrumented iterators) and are removed, keeping the user frames under their callers.
fn without_profiler_frames<F: AsRef<str>>(frames: Vec<F>) -> Option<Vec<F>> {
    without_profiler_frames_by(
        frames,
        |f| is_profiler_frame(f.as_ref()),
        |f| is_runtime_library_frame(f.as_ref()),
    )
}

/// [`without_profiler_frames`] with the profiler's frames and the runtime library's told by
/// `is_profiler` and `is_library`.
fn without_profiler_frames_by<F>(
    frames: Vec<F>,
    is_profiler: impl Fn(&F) -> bool,
    is_library: impl Fn(&F) -> bool,
) -> Option<Vec<F>> {
    let Some(innermost) = frames.iter().rposition(&is_profiler) else {
        return Some(frames);
    };
    if frames[innermost + 1..].iter().all(is_library) {
        return None;
    }
    Some(frames.into_iter().filter(|f| !is_profiler(f)).collect())
}

/// A symbolised frame as the folding compares it: by its name (a pointer comparison where the
/// names are shared, as the symbolizer and the records' loader share them) and whether it was
/// inlined; hashed by its name's hash, worked out once per name ([`NameClasses`]). Folding a
/// deep recursion's stacks by these instead of by formatted names spares hundreds of
/// allocations, string comparisons and string hashes per stack.
#[derive(Clone, Copy)]
struct FrameRef<'a> {
    frame: &'a Frame,
    name_hash: u64,
}

impl PartialEq for FrameRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&*self.frame.function, &*other.frame.function);
        self.frame.inlined == other.frame.inlined && (std::ptr::eq(a, b) || a == b)
    }
}

impl Eq for FrameRef<'_> {}

impl std::hash::Hash for FrameRef<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name_hash.hash(state);
        self.frame.inlined.hash(state);
    }
}

impl AsRef<str> for FrameRef<'_> {
    fn as_ref(&self) -> &str {
        &self.frame.function
    }
}

/// Folds recursion: each function appears at most once in a stack. When a frame reappears
/// deeper in the stack, the frames from just after its first appearance down to the repeat
/// are removed, so the samples of a recursive call count under its outermost call. Rayon's
/// `join_context` → `bridge_producer_consumer::helper` → `join_context` cycles and a
/// recursive quicksort both fold to one level; the leaf frames are kept.
///
/// Linear in the stack's depth (a deep recursion has hundreds of frames): each frame kept is
/// found by its hash.
pub fn fold_recursion<F: Eq + Hash>(frames: Vec<F>) -> Vec<F> {
    let hash = |frame: &F| FxBuildHasher.hash_one(frame);
    let mut folded: Vec<(u64, F)> = Vec::with_capacity(frames.len());
    // Where each frame kept is, by hash; a colliding frame is found by a scan.
    let mut position: FxHashMap<u64, usize> =
        FxHashMap::with_capacity_and_hasher(frames.len(), FxBuildHasher);
    for frame in frames {
        let h = hash(&frame);
        let first = match position.get(&h) {
            Some(&at) if folded[at].1 == frame => Some(at),
            Some(_) => folded.iter().position(|(_, f)| *f == frame),
            None => None,
        };
        match first {
            Some(first) => {
                for (h, _) in folded.drain(first + 1..) {
                    if position.get(&h).is_some_and(|&at| at > first) {
                        position.remove(&h);
                    }
                }
            }
            None => {
                position.entry(h).or_insert(folded.len());
                folded.push((h, frame));
            }
        }
    }
    folded.into_iter().map(|(_, frame)| frame).collect()
}

/// The raw addresses of an unsymbolised sample, root first.
fn address_frames(callchain: &[u64]) -> Vec<String> {
    // Call chains are leaf first; flamegraph stacks are root first.
    let addresses: Vec<String> = callchain
        .iter()
        .rev()
        .map(|ip| format!("{ip:#x}"))
        .collect();
    if addresses.is_empty() {
        vec!["[unknown]".to_owned()]
    } else {
        addresses
    }
}

/// What the folding asks of a function's name, asked once per name: the names are interned
/// (one allocation per function), so by its address. A deep recursion's stacks repeat the same
/// few names hundreds of times each, and scanning them for every sample took a third of the
/// analysis of a 16 M-job quicksort.
#[derive(Default)]
struct NameClasses(FxHashMap<usize, NameClass>);

#[derive(Clone, Copy)]
struct NameClass {
    profiler: bool,
    thread_start: bool,
    /// The hash of the name's text: equal names hash alike, shared or not.
    hash: u64,
}

impl NameClasses {
    fn of(&mut self, frame: &Frame) -> NameClass {
        let function = &frame.function;
        *self
            .0
            .entry(Arc::as_ptr(function).cast::<u8>() as usize)
            .or_insert_with(|| NameClass {
                profiler: is_profiler_frame(function),
                thread_start: is_thread_start(function),
                hash: FxBuildHasher.hash_one(&**function),
            })
    }
}

/// A sample's frames for a flamegraph, root first, as the functions' interned names (see
/// [`FoldedFrames`]): the profiler's own (`None`: its frames with nothing of the program
/// under them, or its writer thread) left out, recursion folded.
fn program_frames<'a>(
    stack: Option<Vec<&'a Frame>>,
    callchain: &[u64],
    role: Option<&str>,
    classes: &mut NameClasses,
) -> Option<FoldedFrames<'a>> {
    if role == Some(WRITER_THREAD) {
        return None;
    }
    match stack {
        Some(stack) if !stack.is_empty() => {
            let frames: Vec<(FrameRef, NameClass)> = stack
                .into_iter()
                .map(|frame| {
                    let class = classes.of(frame);
                    let name_hash = class.hash;
                    (FrameRef { frame, name_hash }, class)
                })
                .collect();
            let frames = without_profiler_frames_by(
                frames,
                |(_, class)| class.profiler,
                |(frame, _)| is_runtime_library_frame(frame.as_ref()),
            )?;
            let frames = without_thread_start_by(frames, |(_, class)| class.thread_start);
            let frames = frames.into_iter().map(|(frame, _)| frame).collect();
            Some(FoldedFrames::Symbolised(fold_recursion(frames)))
        }
        _ => {
            let frames = without_profiler_frames(address_frames(callchain))?;
            Some(FoldedFrames::Addresses(fold_recursion(
                without_thread_start(frames),
            )))
        }
    }
}

/// A sample's folded frames: symbolised (the interned names), or its raw addresses.
enum FoldedFrames<'a> {
    Symbolised(Vec<FrameRef<'a>>),
    Addresses(Vec<String>),
}

impl FoldedFrames<'_> {
    fn symbolised(&self) -> bool {
        matches!(self, FoldedFrames::Symbolised(_))
    }

    /// The frames' names, as the flamegraphs show them.
    fn names(self) -> Vec<String> {
        match self {
            FoldedFrames::Symbolised(frames) => {
                frames.into_iter().map(|f| frame_name(f.frame)).collect()
            }
            FoldedFrames::Addresses(names) => names,
        }
    }

    /// The frames by their names' addresses: equal for equal stacks of interned names, without
    /// formatting or comparing a name.
    fn identity(&self) -> Option<Vec<(usize, bool)>> {
        match self {
            FoldedFrames::Symbolised(frames) => Some(
                frames
                    .iter()
                    .map(|f| {
                        (
                            Arc::as_ptr(&f.frame.function).cast::<u8>() as usize,
                            f.frame.inlined,
                        )
                    })
                    .collect(),
            ),
            FoldedFrames::Addresses(_) => None,
        }
    }
}

/// The frames std runs before a thread's own code — `lang_start` and the panic guards for
/// `main`, the spawn closure's for other threads — end in `__rust_begin_short_backtrace`,
/// where std's own backtraces start too: the frames up to it are left out (the stack's root
/// names the thread already).
fn without_thread_start<F: AsRef<str>>(frames: Vec<F>) -> Vec<F> {
    without_thread_start_by(frames, |f| is_thread_start(f.as_ref()))
}

fn is_thread_start(function: &str) -> bool {
    function.contains("__rust_begin_short_backtrace")
}

/// [`without_thread_start`] with the thread's start told by `is_start`.
fn without_thread_start_by<F>(mut frames: Vec<F>, is_start: impl Fn(&F) -> bool) -> Vec<F> {
    if let Some(entry) = frames.iter().rposition(is_start)
        && entry + 1 < frames.len()
    {
        frames.drain(..=entry);
    }
    frames
}

fn roles(threads: &[ThreadSummary]) -> HashMap<u32, &str> {
    threads.iter().map(|t| (t.tid, t.role.as_str())).collect()
}

fn thread_root(role: Option<&str>, tid: u32) -> String {
    role.map_or_else(|| format!("thread {tid}"), str::to_owned)
}

/// A folded stack: its thread's role and its frames, root first.
type StackKey = (String, Vec<String>);

/// A sample's stack as the samples that have it share it: its symbolised stack (when it has
/// one), the allocation of its call chain, and its thread. Folding depends on nothing else, so
/// each distinct one is folded once, however many samples a long run has of it.
type SharedStack = (Option<StackId>, *const [u64], u32);

fn shared_stack(stack: Option<StackId>, sample: &CpuSample) -> SharedStack {
    (stack, Arc::as_ptr(&sample.callchain), sample.tid)
}

fn sampled_stacks(stacks: BTreeMap<StackKey, u64>) -> Vec<SampledStack> {
    stacks
        .into_iter()
        .map(|((thread, frames), weight)| SampledStack {
            thread,
            frames,
            weight,
        })
        .collect()
}

/// Folds the cpu-clock samples by thread and stack: recursion folded, the profiler's own
/// samples (its frames anywhere in a stack, or its writer thread) counted apart. Each kept
/// sample is also placed in time, since `origin_ns`.
pub(crate) fn fold(
    kernel: &KernelRecords,
    threads: &[ThreadSummary],
    origin_ns: u64,
) -> FoldedSamples {
    let roles = roles(threads);
    // Stacks numbered as first met, sorted at the end.
    let mut ids: FxHashMap<StackKey, u32> = FxHashMap::default();
    let mut stacks: Vec<(StackKey, u64)> = Vec::new();
    // The id and whether it was symbolised, or `None` for the profiler's own.
    let mut folded_once: FxHashMap<SharedStack, Option<(u32, bool)>> = FxHashMap::default();
    // The ids of symbolised folded stacks by thread and their names' addresses: most samples of
    // a deep recursion are distinct stacks that fold alike, found here without a name formatted.
    let mut by_identity: FxHashMap<(u32, Vec<(usize, bool)>), u32> = FxHashMap::default();
    let mut classes = NameClasses::default();
    let mut timed = Vec::new();
    let mut unsymbolised = 0;
    let mut profiler = 0;
    let mut total = 0;
    for (sample, stack) in kernel.cpu_samples() {
        total += 1;
        let folded = *folded_once
            .entry(shared_stack(stack, &sample))
            .or_insert_with(|| {
                let role = roles.get(&sample.tid).copied();
                let stack = stack.map(|id| kernel.stacks.frames(id));
                let frames = program_frames(stack, &sample.callchain, role, &mut classes)?;
                let symbolised = frames.symbolised();
                let identity = frames.identity().map(|frames| (sample.tid, frames));
                if let Some(&id) = identity.as_ref().and_then(|k| by_identity.get(k)) {
                    return Some((id, symbolised));
                }
                let key = (thread_root(role, sample.tid), frames.names());
                let id = *ids.entry(key).or_insert_with_key(|key| {
                    stacks.push((key.clone(), 0));
                    (stacks.len() - 1) as u32
                });
                if let Some(identity) = identity {
                    by_identity.insert(identity, id);
                }
                Some((id, symbolised))
            });
        let Some((id, symbolised)) = folded else {
            profiler += 1;
            continue;
        };
        if !symbolised {
            unsymbolised += 1;
        }
        stacks[id as usize].1 += 1;
        timed.push(TimedSample {
            time_ns: sample.time_ns.saturating_sub(origin_ns),
            tid: sample.tid,
            stack: id,
        });
    }
    let mut order: Vec<usize> = (0..stacks.len()).collect();
    order.sort_by(|&a, &b| stacks[a].0.cmp(&stacks[b].0));
    let mut rank = vec![0u32; stacks.len()];
    for (position, &id) in order.iter().enumerate() {
        rank[id] = position as u32;
    }
    for sample in &mut timed {
        sample.stack = rank[sample.stack as usize];
    }
    // The stacks are distinct, so the map keeps them all, in the order of `rank`.
    let sorted: BTreeMap<StackKey, u64> = stacks.into_iter().collect();
    FoldedSamples {
        samples: CpuSamples {
            period_ns: kernel.sample_period_ns,
            total,
            profiler,
            stacks: sampled_stacks(sorted),
            timed,
        },
        unsymbolised,
    }
}

/// [`fold`] and [`fold_switch_outs`], side by side where there are cores: on a deep
/// recursion each is tens of ms.
pub(crate) fn fold_both(
    kernel: &KernelRecords,
    threads: &[ThreadSummary],
    origin_ns: u64,
) -> (FoldedSamples, Option<OffCpuStacks>) {
    std::thread::scope(|scope| {
        let offcpu = scope.spawn(|| fold_switch_outs(kernel, threads));
        let folded = fold(kernel, threads, origin_ns);
        let offcpu = offcpu
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (folded, offcpu)
    })
}

/// A context-switch sample and its switch-out record are written in the same scheduler call:
/// further apart than this, they are not the same switch.
const SWITCH_SAMPLE_SLACK_NS: u64 = 100_000;

/// Folds where threads were switched out, weighted by how long, from the context-switch
/// samples (the stack at each switch-out) and the switch records (how long until the thread
/// ran again); `None` when there are no such samples. The leaf says why the thread stopped:
/// `[blocked]` (it waited: sleep, lock, I/O, a join) or `[preempted]` (runnable, but the CPU
/// went to another thread).
pub(crate) fn fold_switch_outs(
    kernel: &KernelRecords,
    threads: &[ThreadSummary],
) -> Option<OffCpuStacks> {
    if !kernel.has_switch_samples() {
        return None;
    }
    let roles = roles(threads);
    // On the kernel's ns time line. A thread's last switch-out, at its exit, has no
    // switch-in: with no end of run (0) it is left out rather than counted as a wait. A new
    // thread's wait for its first CPU has no switch-out, so no stack: left out too.
    let off_cpu = OffCpuIndex::from_switches(kernel.switch_records(), &[], |ns| ns, 0);
    let mut matched: HashMap<u32, Vec<bool>> = off_cpu
        .threads()
        .map(|tid| (tid, vec![false; off_cpu.intervals(tid).len()]))
        .collect();
    // Each distinct folded stack and leaf, numbered as first met, and its weight: stacks
    // that differ as shared (most of a deep recursion's) can still fold alike, and are
    // weighed together as they come, so that this follows the folded stacks, not the run.
    let mut ids: FxHashMap<StackKey, usize> = FxHashMap::default();
    let mut weights: Vec<u64> = Vec::new();
    // The number of each shared stack and leaf, or `None` for the profiler's own.
    let mut folded_once: HashMap<(SharedStack, bool), Option<usize>> = HashMap::new();
    let mut classes = NameClasses::default();
    let mut result = OffCpuStacks::default();
    for (sample, stack) in kernel.switch_out_samples() {
        let list = off_cpu.intervals(sample.tid);
        let Some(j) = nearest_switch_out(list, sample.time_ns) else {
            continue;
        };
        let Some(seen) = matched.get_mut(&sample.tid).and_then(|v| v.get_mut(j)) else {
            continue;
        };
        // A second sample near the same switch-out (a lost switch record) would count its
        // interval twice.
        if std::mem::replace(seen, true) {
            continue;
        }
        let interval = &list[j];
        let ns = interval.end - interval.start;
        result.total_ns += ns;
        let folded = *folded_once
            .entry((shared_stack(stack, &sample), interval.preempted))
            .or_insert_with(|| {
                let role = roles.get(&sample.tid).copied();
                let stack = stack.map(|id| kernel.stacks.frames(id));
                let mut frames =
                    program_frames(stack, &sample.callchain, role, &mut classes)?.names();
                frames.push(leaf(interval.preempted).to_owned());
                let key = (thread_root(role, sample.tid), frames);
                Some(*ids.entry(key).or_insert_with(|| {
                    weights.push(0);
                    weights.len() - 1
                }))
            });
        let Some(index) = folded else {
            result.profiler_ns += ns;
            continue;
        };
        weights[index] += ns;
    }
    let mut stacks: BTreeMap<StackKey, u64> = (ids.into_iter())
        .map(|(key, id)| (key, weights[id]))
        .collect();
    add_unsampled_switch_outs(&off_cpu, &matched, &roles, &mut stacks, &mut result);
    result.stacks = sampled_stacks(stacks);
    Some(result)
}

/// The off-CPU interval of `list` whose switch-out is nearest a switch sample at `time_ns`,
/// if it is near enough to be the same switch.
fn nearest_switch_out(list: &[OffCpu], time_ns: u64) -> Option<usize> {
    let at = list.partition_point(|iv| iv.start < time_ns);
    [at.checked_sub(1), Some(at)]
        .into_iter()
        .flatten()
        .filter(|&j| j < list.len())
        .min_by_key(|&j| list[j].start.abs_diff(time_ns))
        .filter(|&j| list[j].start.abs_diff(time_ns) <= SWITCH_SAMPLE_SLACK_NS)
}

/// The switch-outs of the program's threads whose sample was lost (not `matched`), under
/// "[stack not recorded]".
fn add_unsampled_switch_outs(
    off_cpu: &OffCpuIndex,
    matched: &HashMap<u32, Vec<bool>>,
    roles: &HashMap<u32, &str>,
    stacks: &mut BTreeMap<StackKey, u64>,
    result: &mut OffCpuStacks,
) {
    for (tid, seen) in matched {
        let role = roles.get(tid).copied();
        if role == Some(WRITER_THREAD) {
            continue;
        }
        let list = off_cpu.intervals(*tid);
        for (interval, _) in list.iter().zip(seen).filter(|(_, seen)| !**seen) {
            let ns = interval.end - interval.start;
            result.total_ns += ns;
            result.unmatched_ns += ns;
            let frames = vec![
                "[stack not recorded]".to_owned(),
                leaf(interval.preempted).to_owned(),
            ];
            *stacks.entry((thread_root(role, *tid), frames)).or_default() += ns;
        }
    }
}

fn leaf(preempted: bool) -> &'static str {
    if preempted {
        "[preempted]"
    } else {
        "[blocked]"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::kernel_records::SwitchRecord;
    use crate::recording::kernel_records::{CpuSample, StackTree, SwitchKind};

    fn frame(function: &str, inlined: bool) -> Frame {
        Frame {
            function: function.into(),
            inlined,
        }
    }

    fn names(frames: &[&str]) -> Vec<String> {
        frames.iter().map(|f| (*f).to_owned()).collect()
    }

    fn thread(tid: u32, role: &str) -> ThreadSummary {
        ThreadSummary {
            tid,
            name: None,
            role: role.to_owned(),
            rayon_index: None,
            rayon_pool: None,
            first_seen_ns: 0,
            last_seen_ns: 0,
            on_cpu_ns: None,
            off_cpu_preempted_ns: None,
            off_cpu_voluntary_ns: None,
            switches_voluntary: None,
            switches_preempted: None,
            events: 0,
            lost_events: 0,
            cpu_samples: 0,
        }
    }

    #[test]
    fn the_thread_start_is_left_out() {
        let stack = names(&[
            "[libc.so.6]",
            "std::thread::lifecycle::{closure#1}_[i]",
            "std::sys::backtrace::__rust_begin_short_backtrace<F, ()>",
            "rayon_core::registry::main_loop",
            "work",
        ]);
        assert_eq!(
            without_thread_start(stack),
            names(&["rayon_core::registry::main_loop", "work"])
        );
        // Sampled in std's own start-up: kept as it is.
        let start = names(&[
            "main",
            "std::sys::backtrace::__rust_begin_short_backtrace<fn()>",
        ]);
        assert_eq!(without_thread_start(start.clone()), start);
    }

    #[test]
    fn recursion_folds_into_the_outermost_call() {
        let stack = names(&[
            "main",
            "sort",
            "join",
            "helper",
            "join",
            "sort",
            "join",
            "sort",
            "partition",
        ]);
        assert_eq!(fold_recursion(stack), names(&["main", "sort", "partition"]));
        let plain = names(&["main", "a", "b"]);
        assert_eq!(fold_recursion(plain.clone()), plain);
    }

    proptest::proptest! {
        /// The linear fold keeps exactly what the definition does: each frame once, a repeat
        /// cutting back to the frame's first appearance.
        #[test]
        fn recursion_folds_as_defined(stack in proptest::collection::vec(0u8..12, 0..400)) {
            let frames: Vec<String> = stack.iter().map(|f| format!("f{f}")).collect();
            let mut defined: Vec<String> = Vec::new();
            for frame in &frames {
                match defined.iter().position(|f| f == frame) {
                    Some(first) => defined.truncate(first + 1),
                    None => defined.push(frame.clone()),
                }
            }
            proptest::prop_assert_eq!(fold_recursion(frames), defined);
        }
    }

    #[test]
    fn profiler_time_is_split_from_user_code_under_its_wrappers() {
        let probe = names(&[
            "main",
            "work",
            "parprof_rt::recorder::record",
            "core::core_arch::x86::rdtsc::_rdtsc",
        ]);
        assert_eq!(without_profiler_frames(probe), None);
        let clock = names(&["main", "parprof_rt::clock::now", "[vdso]"]);
        assert_eq!(without_profiler_frames(clock), None);
        let call_site = names(&[
            "main",
            "demo::sort",
            "parprof_rt::call_site::from_stack",
            "<T as alloc::string::ToString>::to_string",
            "addr2line::Context::find_frames",
            "<&mut <std::backtrace_rs::symbolize::gimli::Context>::new::{closure#0} as core::ops::FnOnce<()>>::call_once",
            "<*mut addr2line::unit::ResUnit>::add",
            "<u8 as <[_]>::to_vec_in::ConvertVec>::to_vec",
            "<usize>::checked_sub",
            "gimli::read::unit::Unit::new",
        ]);
        assert_eq!(without_profiler_frames(call_site), None);
        let wrapped = names(&["main", "parprof_rt::region::join", "user::work"]);
        assert_eq!(
            without_profiler_frames(wrapped),
            Some(names(&["main", "user::work"]))
        );
    }

    #[test]
    fn switch_outs_are_weighted_by_the_time_until_the_switch_in() {
        let switch = |time_ns: u64, tid: u32, kind: SwitchKind| SwitchRecord {
            time_ns,
            tid,
            cpu: 0,
            kind,
        };
        let sample = |time_ns: u64, tid: u32| CpuSample {
            time_ns,
            tid,
            cpu: 0,
            callchain: vec![2, 1].into(),
        };
        let switches = [
            // A 10 µs sleep, its sample written 40 ns after the switch-out record.
            switch(1_000, 1, SwitchKind::OutVoluntary),
            switch(11_000, 1, SwitchKind::In),
            // A 500 ns preemption, sampled twice (the second must not count it again).
            switch(20_000, 1, SwitchKind::OutPreempted),
            switch(20_500, 1, SwitchKind::In),
            // A 300 ns wait whose sample was lost.
            switch(30_000, 1, SwitchKind::OutVoluntary),
            switch(30_300, 1, SwitchKind::In),
            // The thread's exit: no switch-in, no wait.
            switch(400_000, 1, SwitchKind::OutVoluntary),
            // The profiler's writer waits 700 ns (sampled) and 50 ns (not sampled).
            switch(5_000, 9, SwitchKind::OutVoluntary),
            switch(5_700, 9, SwitchKind::In),
            switch(6_000, 9, SwitchKind::OutVoluntary),
            switch(6_050, 9, SwitchKind::In),
        ];
        let mut switches = switches.to_vec();
        switches.sort_by_key(|s| s.time_ns);
        let user = vec![frame("main", false), frame("wait_for_input", false)];
        let (stacks, switch_sample_stacks) = StackTree::of_stacks(&[
            user.clone(),
            vec![frame("parprof_rt::writer::run", false)],
            user.clone(),
            user.clone(),
            user.clone(),
            user,
        ]);
        let kernel = KernelRecords {
            switches,
            switch_samples: vec![
                sample(1_040, 1),
                sample(5_000, 9),
                sample(20_000, 1),
                sample(20_010, 1),
                sample(400_000, 1),
                // Far from every switch-out of its thread: not one of them.
                sample(700_000, 1),
            ],
            stacks,
            switch_sample_stacks,
            ..KernelRecords::default()
        };
        let threads = [thread(1, "poller"), thread(9, WRITER_THREAD)];
        let folded = fold_switch_outs(&kernel, &threads).expect("samples");
        let stacks: Vec<(String, String, u64)> = folded
            .stacks
            .iter()
            .map(|s| (s.thread.clone(), s.frames.join(";"), s.weight))
            .collect();
        assert_eq!(
            stacks,
            [
                (
                    "poller".to_owned(),
                    "[stack not recorded];[blocked]".to_owned(),
                    300
                ),
                (
                    "poller".to_owned(),
                    "main;wait_for_input;[blocked]".to_owned(),
                    10_000
                ),
                (
                    "poller".to_owned(),
                    "main;wait_for_input;[preempted]".to_owned(),
                    500
                ),
            ]
        );
        assert_eq!(
            (folded.total_ns, folded.profiler_ns, folded.unmatched_ns),
            (10_000 + 500 + 300 + 700, 700, 300)
        );
        let none = KernelRecords {
            switch_samples: Vec::new(),
            ..kernel
        };
        assert_eq!(fold_switch_outs(&none, &threads), None);
    }

    #[test]
    fn folds_by_thread_and_falls_back_to_addresses() {
        let sample = |tid: u32, callchain: Vec<u64>| CpuSample {
            time_ns: 1000 + u64::from(tid),
            tid,
            cpu: 0,
            callchain: callchain.into(),
        };
        let (stacks, sample_stacks) = StackTree::of_stacks(&[
            vec![frame("main", false), frame("work", true)],
            vec![frame("main", false), frame("work", true)],
            vec![],
            vec![],
            vec![frame("start", false), frame("parprof_rt::clock::now", true)],
            vec![frame("start", false), frame("write", false)],
        ]);
        let kernel = KernelRecords {
            samples: vec![
                sample(1, vec![2, 1]),
                sample(1, vec![2, 1]),
                sample(2, vec![0x20, 0x10]),
                sample(3, vec![]),
                sample(2, vec![4, 3]),
                sample(9, vec![6, 5]),
            ],
            stacks,
            sample_stacks,
            sample_period_ns: 1000,
            ..KernelRecords::default()
        };
        let threads = [
            thread(1, "main"),
            thread(2, "rayon worker 0 (pool 0)"),
            thread(9, WRITER_THREAD),
        ];
        let folded = fold(&kernel, &threads, 1000);
        assert_eq!(folded.unsymbolised, 2);
        let stacks: Vec<(String, String, u64)> = folded
            .samples
            .stacks
            .iter()
            .map(|s| (s.thread.clone(), s.frames.join(";"), s.weight))
            .collect();
        assert_eq!(
            stacks,
            [
                ("main".to_owned(), "main;work_[i]".to_owned(), 2),
                (
                    "rayon worker 0 (pool 0)".to_owned(),
                    "0x10;0x20".to_owned(),
                    1
                ),
                ("thread 3".to_owned(), "[unknown]".to_owned(), 1),
            ]
        );
        let samples = &folded.samples;
        assert_eq!(
            (samples.total, samples.profiler, samples.period_ns),
            (6, 2, 1000)
        );
        // The kept samples in time, each pointing at its (sorted) stack.
        let timed: Vec<(u64, u32, u32)> = samples
            .timed
            .iter()
            .map(|t| (t.time_ns, t.tid, t.stack))
            .collect();
        assert_eq!(timed, [(1, 1, 0), (1, 1, 0), (2, 2, 1), (3, 3, 2)]);
    }
}
