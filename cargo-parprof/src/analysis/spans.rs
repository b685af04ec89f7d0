//! The bounded set of spans behind the timeline view: the longest spans are kept, since short
//! ones are invisible until one zooms in, and the number left out is counted by kind.

use std::cmp::{Ordering, Reverse};

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

/// The longest `capacity` spans of those offered. Candidates pile up to half as many again
/// as are kept, then the longest `capacity` of them are selected in O(n) and the shortest of
/// those becomes the bar: an offer costs O(1) amortised, where a heap of the kept spans sifts
/// through log2(capacity) levels for every span that enters while it fills (most of them
/// then). Memory: at most 1.5 × `capacity` spans.
#[derive(Debug)]
pub(crate) struct LongestSpans {
    capacity: usize,
    candidates: Vec<TickSpan>,
    /// The shortest span kept by the last selection: a span ranking no higher is left out.
    bar: Option<TickSpan>,
    left_out_probe: u64,
    left_out_switched_out: u64,
}

/// The kept spans and how many of each kind were left out.
pub(crate) struct KeptSpans {
    /// By thread then start (longer first at equal starts, so enclosing spans come before the
    /// spans they enclose).
    pub spans: Vec<TickSpan>,
    pub left_out_probe: u64,
    pub left_out_switched_out: u64,
}

impl LongestSpans {
    pub(crate) fn new(capacity: usize) -> Self {
        LongestSpans {
            capacity,
            candidates: Vec::new(),
            bar: None,
            left_out_probe: 0,
            left_out_switched_out: 0,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn offer(&mut self, span: TickSpan) {
        if self.capacity == 0 || self.bar.is_some_and(|bar| span <= bar) {
            self.leave_out(&span);
            return;
        }
        self.candidates.push(span);
        if self.candidates.len() >= self.capacity.saturating_add(self.capacity / 2 + 1) {
            self.select();
        }
    }

    fn leave_out(&mut self, span: &TickSpan) {
        match span.kind {
            TickSpanKind::Probe { .. } => self.left_out_probe += 1,
            TickSpanKind::Preempted | TickSpanKind::Blocked => self.left_out_switched_out += 1,
        }
    }

    /// Keeps the longest `capacity` candidates and raises the bar to the shortest of them.
    fn select(&mut self) {
        if self.candidates.len() <= self.capacity {
            return;
        }
        let mut candidates = std::mem::take(&mut self.candidates);
        // Longest first: the first `capacity` are the kept ones, the last of them the bar.
        candidates.select_nth_unstable_by(self.capacity - 1, |a, b| b.cmp(a));
        for span in &candidates[self.capacity..] {
            self.leave_out(span);
        }
        candidates.truncate(self.capacity);
        self.bar = Some(candidates[self.capacity - 1]);
        self.candidates = candidates;
    }

    pub(crate) fn into_sorted(mut self) -> KeptSpans {
        self.select();
        let mut spans = self.candidates;
        spans.sort_by_key(|s| (s.tid, s.start, Reverse(s.end), s.kind));
        KeptSpans {
            spans,
            left_out_probe: self.left_out_probe,
            left_out_switched_out: self.left_out_switched_out,
        }
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
        let kept = spans.into_sorted();
        assert_eq!((kept.left_out_probe, kept.left_out_switched_out), (1, 1));
        let kept: Vec<(u64, u64)> = kept.spans.iter().map(|s| (s.start, s.end)).collect();
        assert_eq!(kept, [(0, 10), (30, 60)]);
    }

    #[test]
    fn keeps_the_same_spans_as_sorting_them_all_whatever_the_order_of_the_offers() {
        // Durations repeat, so ties are broken by the other fields; several selections run.
        let all: Vec<TickSpan> = (0..1000u64)
            .map(|i| {
                let start = (i * 7919) % 1000;
                span(start, start + (i * 31) % 17, TickSpanKind::Blocked)
            })
            .collect();
        let mut spans = LongestSpans::new(10);
        for s in &all {
            spans.offer(*s);
        }
        let kept = spans.into_sorted();
        let mut expected = all.clone();
        expected.sort_by(|a, b| b.cmp(a));
        expected.truncate(10);
        expected.sort_by_key(|s| (s.tid, s.start, Reverse(s.end), s.kind));
        assert_eq!(kept.spans, expected);
        assert_eq!(kept.left_out_switched_out, 990);
    }

    #[test]
    fn zero_capacity_keeps_nothing() {
        let mut spans = LongestSpans::new(0);
        spans.offer(span(0, 10, TickSpanKind::Blocked));
        let kept = spans.into_sorted();
        assert_eq!(kept.left_out_switched_out, 1);
        assert!(kept.spans.is_empty());
    }
}
