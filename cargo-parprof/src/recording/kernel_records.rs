//! What the kernel told us about the profiled process, on `CLOCK_MONOTONIC` nanoseconds
//! (the collector sets `use_clockid`, the runtime records sync points against the same clock).

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Whether a capability could be used, and if not, why (shown to the user as is).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    pub available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Capability {
    pub fn yes() -> Self {
        Capability {
            available: true,
            reason: None,
        }
    }
    pub fn no(reason: impl Into<String>) -> Self {
        Capability {
            available: false,
            reason: Some(reason.into()),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Capabilities {
    pub context_switches: Capability,
    pub cpu_samples: Capability,
    /// A user call chain at each switch-out (the off-CPU flamegraph).
    pub switch_stacks: Capability,
    /// A copy of the user stack with each cpu-clock sample, unwound with the files' DWARF
    /// call-frame information (call chains through code without frame pointers).
    pub stack_copies: Capability,
    pub hardware_counters: Capability,
    /// The CPUs the program could use (affinity and cgroup quota).
    pub cpus: CpuQuota,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum SwitchKind {
    /// The thread was switched in.
    In,
    /// The thread was switched out while runnable (preempted).
    OutPreempted,
    /// The thread was switched out because it blocked (sleep, lock, I/O, futex wait).
    OutVoluntary,
}

/// One `PERF_RECORD_SWITCH` of a thread of the profiled process. Packed (17 bytes, not
/// 24): a long run has millions (walked from the run folder by the analysis, held while
/// recording).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, packed)]
pub struct SwitchRecord {
    pub time_ns: u64,
    pub tid: u32,
    pub cpu: u32,
    pub kind: SwitchKind,
}

/// A thread the profiled process created (a `PERF_RECORD_FORK` within the process): runnable
/// from `time_ns` on, though it has no CPU until its first switch-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadStart {
    pub time_ns: u64,
    pub tid: u32,
}

/// How the call chains of the cpu-clock samples were obtained (see [`crate::record::unwind`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnwindCounts {
    /// Unwound to the thread's root within the stack copy.
    pub to_the_root: u64,
    /// Unwound to the end of the copy, then continued along the frame-pointer chain.
    pub joined_to_frame_pointers: u64,
    /// Unwound to the end of the copy; the frame-pointer chain had nothing further.
    pub cut_at_the_copy: u64,
    /// The frame-pointer chain alone: no copy, an unknown address space, or a chain the
    /// unwinder could not follow as far.
    pub frame_pointers_only: u64,
}

impl UnwindCounts {
    pub fn total(&self) -> u64 {
        self.to_the_root
            + self.joined_to_frame_pointers
            + self.cut_at_the_copy
            + self.frame_pointers_only
    }
}

/// A user call chain: instruction pointers, leaf first. Samples share the few distinct
/// chains a program has (see [`Interner`]), so a run's memory follows the code it ran, not
/// its length.
pub type CallChain = Arc<[u64]>;

/// One cpu-clock sample with its user call chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSample {
    pub time_ns: u64,
    pub tid: u32,
    pub cpu: u32,
    pub callchain: CallChain,
}

/// A symbolised frame. `inlined` frames were inlined into the next frame toward the root.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Shared by every frame of the function (see [`Interner`]).
    pub function: Arc<str>,
    pub inlined: bool,
}

/// A symbolised stack: its innermost frame's node in the records' [`StackTree`]
/// ([`EMPTY_STACK`] for a stack without frames).
pub type StackId = u32;

/// The stack without frames, the root of every [`StackTree`].
pub const EMPTY_STACK: StackId = 0;

/// The distinct symbolised stacks of a run as a prefix tree: each stack is its parent stack
/// (one frame shorter, toward the root) and one frame. A deep recursion makes nearly every
/// sample's stack distinct, hundreds of frames deep; as a tree, a stack costs the frames it
/// does not share with stacks met before it, so the table follows the code the run went
/// through, not its length. A node names its frame by its index among the tree's distinct
/// frames (8 bytes a node rather than 32): a deep recursion makes a million nodes of a few
/// hundred frames.
#[derive(Clone, Debug)]
pub struct StackTree {
    /// Index = [`StackId`]; the node at [`EMPTY_STACK`] is the root (its frame is unused).
    nodes: Vec<StackNode>,
    /// The distinct frames of the nodes, each once.
    frames: Vec<Frame>,
    /// Each frame's index in `frames`, by [`frame_key`].
    frame_ids: rustc_hash::FxHashMap<(usize, bool), u32>,
}

#[derive(Clone, Copy, Debug)]
struct StackNode {
    parent: StackId,
    /// Index into [`StackTree::frames`].
    frame: u32,
}

/// A frame by the address of its function's name (the names are shared) and whether inlined.
fn frame_key(frame: &Frame) -> (usize, bool) {
    (
        Arc::as_ptr(&frame.function).cast::<u8>() as usize,
        frame.inlined,
    )
}

/// Trees are equal when their nodes are, in the same order.
impl PartialEq for StackTree {
    fn eq(&self, other: &Self) -> bool {
        self.nodes().eq(other.nodes())
    }
}

impl Default for StackTree {
    fn default() -> Self {
        StackTree {
            nodes: vec![StackNode {
                parent: EMPTY_STACK,
                frame: 0,
            }],
            frames: vec![Frame {
                function: Arc::from(""),
                inlined: false,
            }],
            frame_ids: rustc_hash::FxHashMap::default(),
        }
    }
}

impl StackTree {
    /// The stack `parent` with `frame` inside it, as a new node: `None` when `parent` is not
    /// in the tree.
    fn push(&mut self, parent: StackId, frame: &Frame) -> Option<StackId> {
        let id = StackId::try_from(self.nodes.len()).ok()?;
        if (parent as usize) >= self.nodes.len() {
            return None;
        }
        let frames = &mut self.frames;
        // Cloned only when new: a frame is shared by many nodes, and each clone and drop of
        // its name is an atomic update (a deep recursion adds a million nodes).
        let index = *self.frame_ids.entry(frame_key(frame)).or_insert_with(|| {
            frames.push(frame.clone());
            (frames.len() - 1) as u32
        });
        self.nodes.push(StackNode {
            parent,
            frame: index,
        });
        Some(id)
    }

    /// The frame of node `id` (an id of this tree).
    fn frame(&self, id: StackId) -> &Frame {
        &self.frames[self.nodes[id as usize].frame as usize]
    }

    /// Nodes other than the root, in the order added: each after its parent.
    pub fn nodes(&self) -> impl Iterator<Item = (StackId, &Frame)> {
        (self.nodes[1..].iter()).map(|n| (n.parent, &self.frames[n.frame as usize]))
    }

    /// Whether `id` is a stack of this tree.
    pub fn contains(&self, id: StackId) -> bool {
        (id as usize) < self.nodes.len()
    }

    /// The frames of stack `id`, innermost first (none for an id not in the tree).
    pub fn leaf_first(&self, id: StackId) -> impl Iterator<Item = &Frame> {
        let mut at = if self.contains(id) { id } else { EMPTY_STACK };
        std::iter::from_fn(move || {
            (at != EMPTY_STACK).then(|| {
                let frame = self.frame(at);
                at = self.nodes[at as usize].parent;
                frame
            })
        })
    }

    /// The frames of stack `id`, root first.
    pub fn frames(&self, id: StackId) -> Vec<&Frame> {
        let mut frames: Vec<&Frame> = self.leaf_first(id).collect();
        frames.reverse();
        frames
    }
}

/// Builds a [`StackTree`] from whole stacks, each distinct one stored once.
///
/// A deep recursion makes a million nodes or more, nearly all new: each node's children are
/// found by walking a list from the node (a new node, the last one added, is at hand in the
/// cache) rather than by hashing every frame into a table of them all, which cost a cache miss
/// per frame and a table several times the tree's size. A node with many children (a
/// dispatcher calling hundreds of functions) keeps them in a table instead.
pub struct StackInterner {
    tree: StackTree,
    /// Per node: its first child ([`EMPTY_STACK`] for none: the root is nobody's child), or
    /// [`CROWDED`] when its children are in `crowded`.
    first_child: Vec<StackId>,
    /// Per node: the next child of its parent ([`EMPTY_STACK`] after the last).
    next_sibling: Vec<StackId>,
    /// The children of the crowded nodes, by [`child_key`].
    crowded: rustc_hash::FxHashMap<(StackId, usize, bool), StackId>,
}

/// The mark of a node whose children are in [`StackInterner::crowded`]; no node has this id.
const CROWDED: StackId = StackId::MAX;

/// A node with more children than this keeps them in a table.
const MAX_LISTED_CHILDREN: usize = 8;

/// A node by its parent and frame (the frame's name by its address: the names are interned,
/// and a deep recursion repeats the same few hundreds of times).
fn child_key(parent: StackId, frame: &Frame) -> (StackId, usize, bool) {
    let (name, inlined) = frame_key(frame);
    (parent, name, inlined)
}

impl Default for StackInterner {
    fn default() -> Self {
        StackInterner {
            tree: StackTree::default(),
            first_child: vec![EMPTY_STACK],
            next_sibling: vec![EMPTY_STACK],
            crowded: rustc_hash::FxHashMap::default(),
        }
    }
}

impl StackInterner {
    /// The id of the stack of `frames`, root first.
    pub fn intern<'f>(&mut self, frames: impl IntoIterator<Item = &'f Frame>) -> StackId {
        (frames.into_iter()).fold(EMPTY_STACK, |parent, frame| self.child(parent, frame))
    }

    /// The id of the stack `parent` (an id of this tree) with `frame` inside it, added if
    /// new.
    pub fn child(&mut self, parent: StackId, frame: &Frame) -> StackId {
        let first = self.first_child[parent as usize];
        if first == CROWDED {
            return match self.crowded.get(&child_key(parent, frame)) {
                Some(&id) => id,
                None => self.add_new(parent, frame),
            };
        }
        let mut listed = 0;
        let mut at = first;
        while at != EMPTY_STACK {
            let node = self.tree.frame(at);
            if node.inlined == frame.inlined && Arc::ptr_eq(&node.function, &frame.function) {
                return at;
            }
            listed += 1;
            at = self.next_sibling[at as usize];
        }
        let id = self.add_new(parent, frame);
        if listed >= MAX_LISTED_CHILDREN {
            self.crowd(parent);
        }
        id
    }

    /// Moves the children of `parent` from its list to the table.
    fn crowd(&mut self, parent: StackId) {
        let mut at = std::mem::replace(&mut self.first_child[parent as usize], CROWDED);
        while at != EMPTY_STACK {
            let key = child_key(parent, self.tree.frame(at));
            self.crowded.insert(key, at);
            at = self.next_sibling[at as usize];
        }
    }

    /// Adds the stack `parent` with `frame` inside it as the next node, without looking it up
    /// (the records' reader adds the nodes as they were written, each once); `None` when
    /// `parent` is not in the tree, or the tree is full (no node takes the id [`CROWDED`]).
    pub fn push(&mut self, parent: StackId, frame: &Frame) -> Option<StackId> {
        if self.tree.nodes.len() >= CROWDED as usize {
            return None;
        }
        let key = child_key(parent, frame);
        let id = self.tree.push(parent, frame)?;
        self.first_child.push(EMPTY_STACK);
        let first = &mut self.first_child[parent as usize];
        if *first == CROWDED {
            self.next_sibling.push(EMPTY_STACK);
            self.crowded.insert(key, id);
        } else {
            self.next_sibling.push(std::mem::replace(first, id));
        }
        Some(id)
    }

    /// [`Self::push`] of a frame under a node this interner gave.
    fn add_new(&mut self, parent: StackId, frame: &Frame) -> StackId {
        // Fewer nodes than frames sampled: more than 4 G of them cannot be recorded.
        self.push(parent, frame)
            .expect("fewer than 2^32 - 1 stacks, each parent added before its children")
    }

    /// Whether `id` is a stack of the tree so far.
    pub fn contains(&self, id: StackId) -> bool {
        self.tree.contains(id)
    }

    pub fn finish(self) -> StackTree {
        self.tree
    }
}

#[cfg(test)]
impl StackTree {
    /// The tree of `stacks` (root first, their names shared as the symbolizer shares them)
    /// and each one's id.
    pub fn of_stacks(stacks: &[Vec<Frame>]) -> (Arc<StackTree>, Vec<StackId>) {
        let mut names = Interner::<str>::default();
        let mut tree = StackInterner::default();
        let ids = (stacks.iter())
            .map(|stack| {
                let shared: Vec<Frame> = (stack.iter())
                    .map(|f| Frame {
                        function: names.intern(&*f.function),
                        inlined: f.inlined,
                    })
                    .collect();
                tree.intern(&shared)
            })
            .collect();
        (Arc::new(tree.finish()), ids)
    }
}

/// Values stored once however often they recur: call chains, stacks and function names,
/// which a long run repeats millions of times.
pub struct Interner<T: ?Sized> {
    values: HashSet<Arc<T>>,
}

impl<T: ?Sized> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            values: HashSet::new(),
        }
    }
}

impl<T: ?Sized + Hash + Eq> Interner<T> {
    /// The shared copy of `value`, made on its first appearance.
    pub fn intern<V: AsRef<T> + Into<Arc<T>>>(&mut self, value: V) -> Arc<T> {
        if let Some(shared) = self.values.get(value.as_ref()) {
            return Arc::clone(shared);
        }
        let shared: Arc<T> = value.into();
        self.values.insert(Arc::clone(&shared));
        shared
    }
}

/// Everything collected from the kernel for one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelRecords {
    pub capabilities: Capabilities,
    /// Sorted by time.
    pub switches: Vec<SwitchRecord>,
    /// Threads created during the run, sorted by time.
    pub thread_starts: Vec<ThreadStart>,
    /// Sorted by time.
    pub samples: Vec<CpuSample>,
    /// The symbolised stacks of both sample lists.
    pub stacks: Arc<StackTree>,
    /// Symbolised stacks of `samples` in `stacks`, in the same order (empty when not
    /// symbolised).
    pub sample_stacks: Vec<StackId>,
    /// One sample per switch-out of a thread, with the user call chain where it stopped;
    /// sorted by time.
    pub switch_samples: Vec<CpuSample>,
    /// Symbolised stacks of `switch_samples`, as `sample_stacks`.
    pub switch_sample_stacks: Vec<StackId>,
    /// How the samples' call chains were obtained.
    pub call_chains: UnwindCounts,
    /// Sampling period of cpu-clock samples, in ns.
    pub sample_period_ns: u64,
    /// Records the kernel dropped because a ring buffer was full (`PERF_RECORD_LOST`).
    pub lost_records: u64,
    /// Records that could not be decoded (truncated or inconsistent) and were skipped.
    pub malformed_records: u64,
    /// Thread names the kernel reported (`PERF_RECORD_COMM`), by tid.
    pub thread_names: Vec<(u32, String)>,
    /// Steal time of the whole machine during the run (see [`crate::record::steal`]), in ns; `None`
    /// where it cannot be read.
    pub steal_ns: Option<u64>,
    /// Where the long lists are when they are not held: `switches`, `samples` and
    /// `switch_samples` (with their stacks) that are empty are then read again from it, part
    /// by part, each time they are walked, so that memory follows what the analysis keeps,
    /// not the run's length.
    pub stored: Option<StoredLists>,
    /// What the walks of the long lists leave out (the threads of slices, the samples outside
    /// a benchmark's measured batch).
    pub view: ListView,
}

/// The long lists of a run's records kept outside memory (in the run folder's records.ppr),
/// read again, in the order written, each time they are walked.
pub trait ListSource: std::fmt::Debug + Send + Sync {
    /// The switch records, sorted by time.
    fn switches(&self) -> Box<dyn Iterator<Item = SwitchRecord> + '_>;
    /// The cpu samples (`switch_outs`: the switch samples) with their stacks (none before
    /// the samples are symbolised), in the order written; their call chains are left empty
    /// (the stacks stand for them).
    fn samples(&self, switch_outs: bool) -> Box<dyn Iterator<Item = StackedSample> + '_>;
    /// Why a walk ended before the list did (the file changed since it was read), if one did.
    fn failure(&self) -> Option<String>;
}

/// A shared [`ListSource`]: equal when the same one.
#[derive(Clone, Debug)]
pub struct StoredLists(pub Arc<dyn ListSource>);

impl PartialEq for StoredLists {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// What walks of the long lists leave out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListView {
    /// Records of these threads.
    without_threads: Option<Arc<HashSet<u32>>>,
    /// Cpu samples outside these times (ns, both ends in).
    samples_between: Option<(u64, u64)>,
}

impl ListView {
    fn keeps_thread(&self, tid: u32) -> bool {
        self.without_threads
            .as_ref()
            .is_none_or(|t| !t.contains(&tid))
    }

    fn keeps_sample(&self, sample: &CpuSample) -> bool {
        self.keeps_thread(sample.tid)
            && (self.samples_between).is_none_or(|(a, b)| (a..=b).contains(&sample.time_ns))
    }
}

/// Switch records that can be walked as often as needed, in time order: held, or read again.
pub trait SwitchWalk: Sync + std::fmt::Debug {
    fn walk(&self) -> Box<dyn Iterator<Item = SwitchRecord> + '_>;
}

impl SwitchWalk for Vec<SwitchRecord> {
    fn walk(&self) -> Box<dyn Iterator<Item = SwitchRecord> + '_> {
        Box::new(self.iter().copied())
    }
}

impl SwitchWalk for KernelRecords {
    fn walk(&self) -> Box<dyn Iterator<Item = SwitchRecord> + '_> {
        self.switch_records()
    }
}

/// A sample with its symbolised stack (`None`: not symbolised).
pub type StackedSample = (CpuSample, Option<StackId>);

impl KernelRecords {
    /// The switch records, as the view keeps them: sorted by time when the collector kept its
    /// promise (see [`Self::with_switches_sorted`]).
    pub fn switch_records(&self) -> Box<dyn Iterator<Item = SwitchRecord> + '_> {
        let all = match &self.stored {
            Some(stored) if self.switches.is_empty() => stored.0.switches(),
            _ => Box::new(self.switches.iter().copied()),
        };
        Box::new(all.filter(|s| self.view.keeps_thread(s.tid)))
    }

    /// The cpu samples as the view keeps them, with their stacks.
    pub fn cpu_samples(&self) -> Box<dyn Iterator<Item = StackedSample> + '_> {
        let all = self.stacked(false, &self.samples, &self.sample_stacks);
        Box::new(all.filter(|(s, _)| self.view.keeps_sample(s)))
    }

    /// The switch samples (one per switch-out), as the view keeps them, with their stacks.
    pub fn switch_out_samples(&self) -> Box<dyn Iterator<Item = StackedSample> + '_> {
        let all = self.stacked(true, &self.switch_samples, &self.switch_sample_stacks);
        Box::new(all.filter(|(s, _)| self.view.keeps_thread(s.tid)))
    }

    fn stacked<'a>(
        &'a self,
        switch_outs: bool,
        held: &'a [CpuSample],
        stacks: &'a [StackId],
    ) -> Box<dyn Iterator<Item = StackedSample> + 'a> {
        match &self.stored {
            Some(stored) if held.is_empty() => stored.0.samples(switch_outs),
            // The stacks are all there or none (not symbolised).
            _ => Box::new(
                held.iter()
                    .enumerate()
                    .map(|(i, s)| (s.clone(), stacks.get(i).copied())),
            ),
        }
    }

    /// Whether the cpu samples have their stacks (symbolised; those read again always have).
    pub fn samples_have_stacks(&self) -> bool {
        self.sample_stacks.len() == self.samples.len()
    }

    /// Whether there are switch samples.
    pub fn has_switch_samples(&self) -> bool {
        self.switch_out_samples().next().is_some()
    }

    /// These records with their held switches sorted by time, if the collector broke its
    /// promise (records read again are sorted, or held).
    pub fn with_switches_sorted(&self) -> std::borrow::Cow<'_, KernelRecords> {
        if self.switches.is_sorted_by_key(|s| s.time_ns) {
            std::borrow::Cow::Borrowed(self)
        } else {
            let mut sorted = self.clone();
            sorted.switches.sort_by_key(|s| s.time_ns);
            std::borrow::Cow::Owned(sorted)
        }
    }
}

impl KernelRecords {
    /// These records without those of the threads `tids` (e.g. the processes of slices, which
    /// the collector follows like any child of the program).
    pub fn without_threads(&self, tids: &HashSet<u32>) -> KernelRecords {
        let keep = |tid: u32| !tids.contains(&tid);
        let mut out = self.clone();
        out.thread_starts.retain(|t| keep(t.tid));
        out.thread_names.retain(|(tid, _)| keep(*tid));
        let mut without = (out.view.without_threads.as_deref().cloned()).unwrap_or_default();
        without.extend(tids);
        out.view.without_threads = Some(Arc::new(without));
        out
    }

    /// These records with the cpu samples taken from `begin_ns` to `end_ns` only (e.g. a
    /// benchmark's measured batch), and how many samples were dropped.
    pub fn with_samples_between(&self, begin_ns: u64, end_ns: u64) -> (KernelRecords, u64) {
        let mut out = self.clone();
        let before = self.cpu_samples().count();
        out.view.samples_between = Some(match self.view.samples_between {
            Some((a, b)) => (a.max(begin_ns), b.min(end_ns)),
            None => (begin_ns, end_ns),
        });
        let dropped = (before - out.cpu_samples().count()) as u64;
        (out, dropped)
    }
}

/// The CPUs a program started from this process may use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuQuota {
    /// CPUs online on the machine.
    pub online: usize,
    /// CPUs in this process's affinity mask (inherited by the program).
    pub affinity: usize,
    /// The cgroup's CPU bandwidth (`cpu.max` quota ÷ period), when limited.
    pub cgroup_limit: Option<f64>,
}

impl CpuQuota {
    /// Threads the program can run at once.
    pub fn usable(&self) -> f64 {
        let affinity = self.affinity.max(1) as f64;
        self.cgroup_limit
            .map_or(affinity, |limit| limit.min(affinity))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// The ids a table of every prefix gives: each new prefix the next id, in the order met.
    fn ids_by_prefix(stacks: &[Vec<(u8, bool)>]) -> Vec<StackId> {
        let mut ids: HashMap<&[(u8, bool)], StackId> = HashMap::new();
        let mut next = EMPTY_STACK;
        for stack in stacks {
            for depth in 1..=stack.len() {
                ids.entry(&stack[..depth]).or_insert_with(|| {
                    next += 1;
                    next
                });
            }
        }
        (stacks.iter())
            .map(|s| {
                if s.is_empty() {
                    EMPTY_STACK
                } else {
                    ids[&s[..]]
                }
            })
            .collect()
    }

    fn interned(stacks: &[Vec<(u8, bool)>]) -> (StackTree, Vec<StackId>) {
        let names: Vec<Arc<str>> = (0..=u8::MAX).map(|n| Arc::from(format!("f{n}"))).collect();
        let mut interner = StackInterner::default();
        let ids = (stacks.iter())
            .map(|stack| {
                let frames: Vec<Frame> = (stack.iter())
                    .map(|&(name, inlined)| Frame {
                        function: Arc::clone(&names[name as usize]),
                        inlined,
                    })
                    .collect();
                interner.intern(&frames)
            })
            .collect();
        (interner.finish(), ids)
    }

    #[test]
    fn walks_leave_out_what_the_view_leaves_out() {
        let sample = |time_ns, tid| CpuSample {
            time_ns,
            tid,
            cpu: 0,
            callchain: Arc::from([]),
        };
        let switch = |time_ns, tid| SwitchRecord {
            time_ns,
            tid,
            cpu: 0,
            kind: SwitchKind::In,
        };
        let kernel = KernelRecords {
            switches: vec![switch(1, 7), switch(2, 9)],
            samples: vec![sample(10, 7), sample(20, 9), sample(30, 7)],
            sample_stacks: vec![1, 2, 3],
            switch_samples: vec![sample(5, 9)],
            thread_starts: vec![ThreadStart { time_ns: 0, tid: 9 }],
            ..KernelRecords::default()
        };
        let without = kernel.without_threads(&HashSet::from([9]));
        let tids = |walk: Box<dyn Iterator<Item = StackedSample> + '_>| {
            walk.map(|(s, stack)| (s.tid, stack)).collect::<Vec<_>>()
        };
        assert_eq!(tids(without.cpu_samples()), [(7, Some(1)), (7, Some(3))]);
        assert_eq!(tids(without.switch_out_samples()), []);
        assert_eq!(
            without.switch_records().map(|s| s.tid).collect::<Vec<_>>(),
            [7]
        );
        assert!(without.thread_starts.is_empty());
        let (batch, dropped) = without.with_samples_between(15, 40);
        assert_eq!(
            (tids(batch.cpu_samples()), dropped),
            (vec![(7, Some(3))], 1)
        );
        // The switches stay whole: only samples are kept to a batch.
        assert_eq!(batch.switch_records().count(), 1);
    }

    #[test]
    fn a_node_with_many_children_finds_each_once() {
        // 40 callees of one function, each met three times, inlined once: 80 children, that
        // move from the parent's list to a table on the ninth.
        let stacks: Vec<Vec<(u8, bool)>> = (0..120)
            .map(|i| vec![(0, false), ((i % 40) as u8 + 1, i % 3 == 0)])
            .collect();
        let (tree, ids) = interned(&stacks);
        assert_eq!(ids, ids_by_prefix(&stacks));
        assert_eq!(tree.nodes().count(), 1 + 80);
    }

    #[test]
    fn pushed_nodes_are_found_by_interning() {
        let name: Arc<str> = Arc::from("f");
        let frame = |inlined| Frame {
            function: Arc::clone(&name),
            inlined,
        };
        let mut interner = StackInterner::default();
        let outer = interner.push(EMPTY_STACK, &frame(false)).unwrap();
        let inner = interner.push(outer, &frame(true)).unwrap();
        assert_eq!(interner.intern(&[frame(false), frame(true)]), inner);
        assert_eq!(interner.push(7, &frame(false)), None);
    }

    proptest! {
        #[test]
        fn interning_gives_each_prefix_one_id_in_the_order_met(
            stacks in prop::collection::vec(
                prop::collection::vec((0u8..24, any::<bool>()), 0..12), 0..200)
        ) {
            let (tree, ids) = interned(&stacks);
            prop_assert_eq!(&ids, &ids_by_prefix(&stacks));
            for (stack, id) in stacks.iter().zip(&ids) {
                let frames: Vec<String> = (tree.frames(*id).iter())
                    .map(|f| format!("{}{}", f.function, f.inlined))
                    .collect();
                let expected: Vec<String> =
                    stack.iter().map(|(n, i)| format!("f{n}{i}")).collect();
                prop_assert_eq!(frames, expected);
            }
        }
    }
}
