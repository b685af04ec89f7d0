//! The interface of the per-event analyses that the single pass over the trace feeds.

use parprof_rt::trace::Event;

/// An analysis fed by the single pass over the trace. To add one, implement this and add it
/// to one of the two groups of consumers handed to the reading loop in `stream_trace` (the
/// second group runs on a thread of its own).
pub trait EventConsumer {
    /// One event of thread `tid`; each thread's events arrive in time order, threads interleave.
    fn on_event(&mut self, tid: u32, event: &Event);

    /// The events of one chunk, all of thread `tid`; override to do per-thread work once per
    /// chunk instead of once per event.
    fn on_events(&mut self, tid: u32, events: &[Event]) {
        for event in events {
            self.on_event(tid, event);
        }
    }
}
