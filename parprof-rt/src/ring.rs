//! A single-producer single-consumer ring of events: the owning thread pushes without a lock
//! or an allocation, the writer thread drains.

use crate::trace::Event;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Events per thread buffer: 128 Ki events, 2 MiB.
pub const CAPACITY: usize = 1 << 17;
const MASK: usize = CAPACITY - 1;
/// The producer wakes the writer each time this many more events are pending.
pub const WAKE_EVERY: usize = CAPACITY / 4;

/// What became of a pushed event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Push {
    Stored,
    /// Stored, and enough is pending that the writer should run.
    StoredWakeWriter,
    /// Not stored: the ring is full.
    Full,
}

pub struct Ring {
    /// A fixed length, so that indexing by `& MASK` needs no bounds check.
    slots: Box<[UnsafeCell<Event>; CAPACITY]>,
    /// Next slot the producer writes; only the producer stores it.
    head: AtomicUsize,
    /// Next slot the consumer reads; only the consumer stores it.
    tail: AtomicUsize,
    lost: AtomicU64,
    /// Set when the owning thread has exited: the ring is drained once more, then dropped.
    closed: AtomicBool,
    /// Whether the CPU has `prefetchw` (see [`prefetch_for_write`]).
    has_prefetchw: bool,
    pub tid: u32,
}

// SAFETY: a slot is written only by the producer while it is outside [tail, head) and read only
// by the consumer while it is inside; head/tail are published with release/acquire.
unsafe impl Sync for Ring {}
unsafe impl Send for Ring {}

impl Ring {
    pub fn new(tid: u32) -> Self {
        let slots: Box<[UnsafeCell<Event>; CAPACITY]> = (0..CAPACITY)
            .map(|_| UnsafeCell::new(Event::default()))
            .collect::<Box<[_]>>()
            .try_into()
            .unwrap_or_else(|_| unreachable!("CAPACITY slots were made"));
        // The allocation may be fresh zero pages: touch every page now, so that the page
        // faults happen here and not inside the first probed intervals (nor in calibration).
        const EVENTS_PER_PAGE: usize = 4096 / std::mem::size_of::<Event>();
        for slot in slots.iter().step_by(EVENTS_PER_PAGE) {
            // SAFETY: the ring is not shared yet; a volatile write keeps the store.
            unsafe { slot.get().write_volatile(Event::default()) };
        }
        Ring {
            slots,
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            lost: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            has_prefetchw: has_prefetchw(),
            tid,
        }
    }

    /// Producer side.
    #[inline(always)]
    pub fn push(&self, event: Event) -> Push {
        let head = self.head.load(Ordering::Relaxed);
        if head - self.tail.load(Ordering::Acquire) >= CAPACITY {
            return Push::Full;
        }
        let slot = self.slots[head & MASK].get();
        // SAFETY: the slot is outside [tail, head), so the consumer does not read it.
        // Field by field, from registers: a whole-`Event` store was compiled as a copy through
        // the stack, whose 16-byte load after narrower stores could not be forwarded and
        // stalled each event for a dozen cycles.
        unsafe {
            std::ptr::addr_of_mut!((*slot).ts).write(event.ts);
            std::ptr::addr_of_mut!((*slot).id).write(event.id);
            std::ptr::addr_of_mut!((*slot).aux).write(event.aux);
            std::ptr::addr_of_mut!((*slot).kind).write(event.kind);
            std::ptr::addr_of_mut!((*slot).flags).write(event.flags);
        }
        // Four cache lines ahead.
        prefetch_for_write(self.slots[(head + 16) & MASK].get(), self.has_prefetchw);
        self.head.store(head + 1, Ordering::Release);
        if (head + 1).is_multiple_of(WAKE_EVERY) {
            Push::StoredWakeWriter
        } else {
            Push::Stored
        }
    }

    /// Events stored and not yet drained (producer side).
    #[inline]
    pub fn pending(&self) -> usize {
        self.head.load(Ordering::Relaxed) - self.tail.load(Ordering::Acquire)
    }

    /// Counts an event that could not be stored.
    pub fn count_lost(&self) {
        self.lost.fetch_add(1, Ordering::Relaxed);
    }

    /// Consumer side: hands the pending events (as up to two slices) to `f`, then frees them.
    pub fn drain(&self, f: impl FnOnce(&[Event], &[Event])) -> usize {
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Acquire);
        let n = head - tail;
        if n == 0 {
            return 0;
        }
        let start = tail & MASK;
        let first_len = n.min(CAPACITY - start);
        // SAFETY: slots in [tail, head) are published and not written until tail moves past.
        let slots: &[Event] =
            unsafe { std::slice::from_raw_parts(self.slots.as_ptr() as *const Event, CAPACITY) };
        f(&slots[start..start + first_len], &slots[..n - first_len]);
        self.tail.store(head, Ordering::Release);
        n
    }

    /// Drops every pending event without writing it (used after calibration).
    pub fn discard(&self) {
        self.tail
            .store(self.head.load(Ordering::Acquire), Ordering::Release);
    }

    pub fn take_lost(&self) -> u64 {
        self.lost.swap(0, Ordering::Relaxed)
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// Asks for the cache line at `at` ahead of its write. In a long run the line was last read by
/// the writer on another CPU: a read prefetch (all `_mm_prefetch` compiles to without the
/// `prfchw` target feature) brings it shared, and the write still waits for the other CPU to
/// give it up, inside probed intervals. With a write prefetch a nested probe's every-call
/// pair costs about 2 ns more in place than calibrated; with a read prefetch it cost 8 to
/// 20 ns more, bimodal from run to run (`cargo bench --bench nested_correction`).
#[inline(always)]
fn prefetch_for_write<T>(at: *const T, has_prefetchw: bool) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect and cannot fault; `prefetchw` runs only
    // where the CPU has it.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        if has_prefetchw {
            std::arch::asm!("prefetchw [{0}]", in(reg) at, options(nostack, preserves_flags, readonly));
        } else {
            _mm_prefetch::<_MM_HINT_T0>(at.cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, has_prefetchw);
}

/// `prefetchw`: CPUID leaf 8000_0001h, ECX bit 8 (AMD since the K6-2, Intel since Broadwell).
fn has_prefetchw() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        // `__cpuid` is safe in the toolchains of today, unsafe before them (rust-version).
        #[allow(unused_unsafe)]
        // SAFETY: CPUID exists on every x86_64 CPU.
        unsafe {
            __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).ecx & (1 << 8) != 0
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}
