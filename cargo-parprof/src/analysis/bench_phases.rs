//! A criterion benchmark's phases, as criterion counted them (the criterion hooks write them
//! into the trace, see `parprof_rt::bench_hooks`), and the measured batch that the probes'
//! calls and the CPU samples are kept to.
//!
//! Why a scan before the pass: the phases are written when each ends, so the measured batch's
//! record comes after the warm-up's events in the file; the per-event analyses must know the
//! batch before they see the first event. The scan decodes only the phase records.

use parprof_rt::trace::{BenchPhase, BenchPhaseKind, Chunk, ChunkKind, Event, EventKind};
use parprof_rt::trace::{TraceError, TraceReader};
use std::collections::HashMap;
use std::io::Read;

/// The phases a trace holds (the last of each kind: profile mode runs each once).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BenchPhases {
    pub warm_up: Option<BenchPhase>,
    pub measured: Option<BenchPhase>,
}

impl BenchPhases {
    pub fn is_empty(&self) -> bool {
        self.warm_up.is_none() && self.measured.is_none()
    }
}

/// The phases in the trace read by `reader` (its header read), up to its end or what cuts it.
pub fn scan<R: Read>(mut reader: TraceReader<R>) -> Result<BenchPhases, TraceError> {
    let mut phases = BenchPhases::default();
    while let Some(chunk) = reader.next_chunk_of(|kind| kind == ChunkKind::BenchPhase)? {
        if let Chunk::BenchPhase(phase) = chunk {
            match phase.kind {
                BenchPhaseKind::WarmUp => phases.warm_up = Some(phase),
                BenchPhaseKind::Measured => phases.measured = Some(phase),
            }
        }
    }
    Ok(phases)
}

/// Keeps the probes' calls to those that began in a time window (the measured batch), on the
/// trace's tick time line: a call that began outside it is dropped whole, its exit and the
/// calls nested in it too, so that every call kept is paired. The other events (rayon's
/// lifecycle, overhead to remove) are kept: they are not calls of the benchmark's code.
#[derive(Debug)]
pub struct CallWindow {
    begin: u64,
    end: u64,
    /// Per thread, whether each open call is kept, innermost last.
    open: HashMap<u32, Vec<bool>>,
    /// Probe calls dropped (recorded ones and the unrecorded ones counted).
    pub dropped_calls: u64,
}

impl CallWindow {
    pub fn new(begin: u64, end: u64) -> CallWindow {
        CallWindow {
            begin,
            end,
            open: HashMap::new(),
            dropped_calls: 0,
        }
    }

    /// The events of `tid` that the window keeps, in order.
    pub fn keep(&mut self, tid: u32, mut events: Vec<Event>) -> Vec<Event> {
        let (begin, end) = (self.begin, self.end);
        let open = self.open.entry(tid).or_default();
        let mut dropped = 0;
        events.retain(|e| {
            let inside = (begin..=end).contains(&e.ts);
            // A call nested in a dropped one is dropped with it.
            let in_kept = open.last().copied().unwrap_or(true);
            match e.kind() {
                EventKind::Enter => {
                    let keep = inside && in_kept;
                    open.push(keep);
                    dropped += u64::from(!keep);
                    keep
                }
                // An exit without its entry is kept: the analysis notes it as it would.
                EventKind::Exit => open.pop().unwrap_or(true),
                EventKind::Unrecorded => {
                    let keep = inside && in_kept;
                    if !keep {
                        dropped += u64::from(e.aux);
                    }
                    keep
                }
                _ => true,
            }
        });
        self.dropped_calls += dropped;
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parprof_rt::trace::{ChunkEncoder, Header};

    fn enter(ts: u64, site: u32) -> Event {
        Event::new(ts, EventKind::Enter, site)
    }

    fn exit(ts: u64, site: u32) -> Event {
        Event::new(ts, EventKind::Exit, site)
    }

    #[test]
    fn calls_that_began_outside_the_window_are_dropped_whole() {
        let mut window = CallWindow::new(100, 200);
        // An outer call from before the batch, with a call nested in it during the batch.
        let kept = window.keep(
            1,
            vec![
                enter(10, 1),
                exit(20, 1),
                enter(50, 2),
                enter(120, 1),
                exit(130, 1),
                Event::unrecorded(140, 1, 5, false),
            ],
        );
        assert!(kept.is_empty(), "{kept:?}");
        let kept = window.keep(
            1,
            vec![
                exit(150, 2),
                enter(160, 1),
                Event::new(165, EventKind::TaskBegin, 3),
                Event::unrecorded(170, 1, 4, false),
                exit(180, 1),
                enter(210, 1),
                exit(220, 1),
            ],
        );
        let ts: Vec<u64> = kept.iter().map(|e| e.ts).collect();
        assert_eq!(ts, [160, 165, 170, 180]);
        // 10, 50, 120, 5 unrecorded, 210.
        assert_eq!(window.dropped_calls, 9);
    }

    #[test]
    fn the_scan_finds_the_phases_in_a_trace() {
        let mut enc = ChunkEncoder::new();
        enc.preamble();
        enc.chunk(&Chunk::Header(Header::monotonic_without_calibration()));
        enc.events(7, &[enter(1, 1), exit(2, 1)], &[]);
        let warm_up = BenchPhase {
            kind: BenchPhaseKind::WarmUp,
            iterations: 63,
            begin: 1,
            end: 5,
        };
        let measured = BenchPhase {
            kind: BenchPhaseKind::Measured,
            iterations: 40,
            begin: 6,
            end: 9,
        };
        enc.chunk(&Chunk::BenchPhase(warm_up));
        enc.chunk(&Chunk::BenchPhase(measured));
        let bytes = enc.into_bytes();
        let phases = scan(TraceReader::new(&bytes[..]).unwrap()).unwrap();
        assert_eq!(phases.warm_up, Some(warm_up));
        assert_eq!(phases.measured, Some(measured));
    }
}
