//! The bounded set of spans behind the timeline view: the longest spans are kept, since short
//! ones are invisible until one zooms in, and the number left out is counted by kind.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// A span on the tick time line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TickSpan {
    pub tid: u32,
    pub start: u64,
    pub end: u64,
    pub kind: TickSpanKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TickSpanKind {
    Probe { site: u32, active_ticks: u64 },
    Preempted,
    Blocked,
}

impl TickSpan {
    fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// Longer spans rank higher; among spans as long, earlier ones (so spans offered in time
    /// order do not keep evicting each other), and then every field breaks the tie, so the
    /// kept set does not depend on the order spans were offered in.
    fn rank_key(&self) -> (u64, Reverse<u64>, Reverse<u32>, TickSpanKind) {
        (
            self.duration(),
            Reverse(self.start),
            Reverse(self.tid),
            self.kind,
        )
    }
}

impl PartialOrd for TickSpan {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TickSpan {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank_key().cmp(&other.rank_key())
    }
}

#[derive(Debug)]
pub(crate) struct LongestSpans {
    capacity: usize,
    /// A min-heap, so the shortest kept span is the one to evict.
    kept: BinaryHeap<Reverse<TickSpan>>,
    pub left_out_probe: u64,
    pub left_out_switched_out: u64,
}

impl LongestSpans {
    pub(crate) fn new(capacity: usize) -> Self {
        LongestSpans {
            capacity,
            kept: BinaryHeap::new(),
            left_out_probe: 0,
            left_out_switched_out: 0,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn offer(&mut self, span: TickSpan) {
        if self.kept.len() < self.capacity {
            self.kept.push(Reverse(span));
            return;
        }
        // Most spans of a long trace rank below the shortest kept: compared through `peek`,
        // they never build the `PeekMut` guard, whose drop is not free.
        let left_out = match self.kept.peek() {
            Some(shortest) if span > shortest.0 => self.replace_shortest(span),
            _ => span,
        };
        match left_out.kind {
            TickSpanKind::Probe { .. } => self.left_out_probe += 1,
            TickSpanKind::Preempted | TickSpanKind::Blocked => self.left_out_switched_out += 1,
        }
    }

    /// Puts `span` in place of the shortest kept span and returns that one. Replacing in place
    /// sifts once, where a pop and a push would twice.
    #[cold]
    fn replace_shortest(&mut self, span: TickSpan) -> TickSpan {
        match self.kept.peek_mut() {
            Some(mut shortest) => std::mem::replace(&mut shortest.0, span),
            None => span,
        }
    }

    /// The kept spans, by thread then start (longer first at equal starts, so enclosing
    /// spans come before the spans they enclose).
    pub(crate) fn into_sorted(self) -> Vec<TickSpan> {
        let mut spans: Vec<TickSpan> = self.kept.into_iter().map(|Reverse(s)| s).collect();
        spans.sort_by_key(|s| (s.tid, s.start, Reverse(s.end), s.kind));
        spans
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: u64, end: u64, kind: TickSpanKind) -> TickSpan {
        TickSpan {
            tid: 1,
            start,
            end,
            kind,
        }
    }

    #[test]
    fn keeps_the_longest_and_counts_the_rest_by_kind() {
        let mut spans = LongestSpans::new(2);
        spans.offer(span(0, 10, TickSpanKind::Blocked));
        spans.offer(span(
            20,
            25,
            TickSpanKind::Probe {
                site: 1,
                active_ticks: 5,
            },
        ));
        spans.offer(span(
            30,
            60,
            TickSpanKind::Probe {
                site: 1,
                active_ticks: 30,
            },
        ));
        spans.offer(span(70, 71, TickSpanKind::Preempted));
        assert_eq!((spans.left_out_probe, spans.left_out_switched_out), (1, 1));
        let kept: Vec<(u64, u64)> = spans
            .into_sorted()
            .iter()
            .map(|s| (s.start, s.end))
            .collect();
        assert_eq!(kept, [(0, 10), (30, 60)]);
    }

    #[test]
    fn zero_capacity_keeps_nothing() {
        let mut spans = LongestSpans::new(0);
        spans.offer(span(0, 10, TickSpanKind::Blocked));
        assert_eq!(spans.left_out_switched_out, 1);
        assert!(spans.into_sorted().is_empty());
    }
}
