//! Entry points of the criterion hooks: `cargo parprof` builds a criterion bench against a copy
//! of criterion whose profile mode (`Routine::profile`) calls these around its warm-up and its
//! measured batch, with criterion's own iteration counts. Each phase is written into the trace
//! as a [`BenchPhase`] chunk, so that the report can say what criterion measured and keep to
//! the measured batch. Not a public API.

use crate::clock;
use crate::recorder::{self, RUNTIME, queue_metadata};
use crate::runtime;
use crate::trace::{BenchPhase, BenchPhaseKind, Chunk};

/// A phase of the benchmark under way: when it began on the event clock (0: not recording).
#[must_use]
pub struct Phase {
    begin: u64,
}

impl Phase {
    /// A phase begins now.
    pub fn begin() -> Phase {
        // The runtime may not have started yet: a bench with neither probes nor rayon has no
        // event before this one.
        if !runtime::is_enabled() {
            return Phase { begin: 0 };
        }
        // Calls that sampling did not record wait for the thread's next event to be written,
        // stamped then: those of this thread are written now, before the phase, so that they
        // count in the phase that ran them. (A rayon worker writes its own at its next event
        // or before it sleeps.)
        recorder::flush_unrecorded(clock::now());
        Phase {
            begin: clock::now(),
        }
    }

    /// The warm-up ended after `iterations` iterations of the routine (criterion's `wu_iters`).
    pub fn warm_up_done(self, iterations: u64) {
        self.done(BenchPhaseKind::WarmUp, iterations);
    }

    /// The measured batch of `iterations` iterations (criterion's `iters`) ended.
    pub fn measured_done(self, iterations: u64) {
        self.done(BenchPhaseKind::Measured, iterations);
    }

    fn done(self, kind: BenchPhaseKind, iterations: u64) {
        if self.begin == 0 || !runtime::is_enabled() {
            return;
        }
        let end = clock::now();
        // This thread's unrecorded calls of the phase, stamped inside it (see `begin`).
        recorder::flush_unrecorded(end);
        if let Some(rt) = RUNTIME.get() {
            queue_metadata(
                rt,
                Chunk::BenchPhase(BenchPhase {
                    kind,
                    iterations,
                    begin: self.begin,
                    end,
                }),
            );
        }
    }
}
