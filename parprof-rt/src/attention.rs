//! The per-thread "needs attention" byte: the one thread-local every recorded probe event
//! checks, so that the fast path stays one load and one branch whatever is switched on. Each
//! bit names a reason to take the cold path, which dispatches on them.
//!
//! The checkpoint timer's signal handler sets [`CHECKPOINT`] on the thread it interrupts, and
//! may interrupt that thread's own read-modify-write of the byte. The handler's update runs
//! to completion before the interrupted one resumes, so only the handler's bit can be lost
//! (the thread stores the value it read before the signal): a lost checkpoint arm is
//! harmless, the next period arms again. [`PENDING`], [`DETAIL`] and [`HELD`] are only changed
//! by the thread itself and are never lost. The byte is an atomic only so that the handler's access
//! is defined behaviour; loads and stores are separate (no locked instruction).

use std::sync::atomic::{AtomicU8, Ordering};

/// Sampling holds counts of unrecorded calls, to be written before the next event.
pub(crate) const PENDING: u8 = 1;
/// The first-stage timer fired: run a slice checkpoint.
pub(crate) const CHECKPOINT: u8 = 2;
/// Every probe event goes to the detailed instrumentation (a slice, or `PARPROF_DETAIL=full`).
pub(crate) const DETAIL: u8 = 4;
/// The thread holds events (the writer's wake, a wait for room) to be stored before its next
/// event stamped after them.
pub(crate) const HELD: u8 = 8;

thread_local! {
    // Const-initialised and without a destructor: a signal handler may touch it at any time.
    static ATTENTION: AtomicU8 = const { AtomicU8::new(0) };
}

/// The calling thread's bits.
#[inline(always)]
pub(crate) fn get() -> u8 {
    ATTENTION
        .try_with(|a| a.load(Ordering::Relaxed))
        .unwrap_or(0)
}

/// Sets `bits` on the calling thread (also from a signal handler).
#[inline(always)]
pub(crate) fn set(bits: u8) {
    let _ = ATTENTION.try_with(|a| a.store(a.load(Ordering::Relaxed) | bits, Ordering::Relaxed));
}

/// Clears `bits` on the calling thread.
#[inline(always)]
pub(crate) fn clear(bits: u8) {
    let _ = ATTENTION.try_with(|a| a.store(a.load(Ordering::Relaxed) & !bits, Ordering::Relaxed));
}
