//! Bounded-memory distribution of per-call durations (in ticks) for min / median / max.
//!
//! While a probe has few calls every duration is kept and the median is exact. Past
//! [`EXACT_LIMIT`] calls the durations move into a log-linear histogram: values below 128 have
//! a bucket each, larger ones share a bucket with values of the same leading 8 bits, so a
//! bucket's midpoint is within 1/256 (0.4 %) of every value in it. The bucket counts are a
//! vector up to the largest bucket used: at most 7,424 counters (58 KiB) per distribution,
//! 3,300 for durations up to a second of a 3 GHz clock, whatever the number of calls.

use super::model::MedianMethod;

/// Calls whose durations are all kept.
const EXACT_LIMIT: usize = 1024;
/// log2 of the buckets per power of two.
const SUB_BUCKET_BITS: u32 = 7;
const SUB_BUCKETS: u64 = 1 << SUB_BUCKET_BITS;

#[derive(Debug)]
pub(crate) struct DurationDistribution {
    count: u64,
    min: u64,
    max: u64,
    /// Every duration, until the count exceeds [`EXACT_LIMIT`].
    exact: Vec<u64>,
    /// Count per bucket index, once `exact` overflowed.
    buckets: Vec<u64>,
}

impl Default for DurationDistribution {
    fn default() -> Self {
        DurationDistribution {
            count: 0,
            min: u64::MAX,
            max: 0,
            exact: Vec::new(),
            buckets: Vec::new(),
        }
    }
}

fn bucket_of(value: u64) -> u32 {
    if value < SUB_BUCKETS {
        return value as u32;
    }
    let shift = 63 - value.leading_zeros() - SUB_BUCKET_BITS;
    let leading_bits = value >> shift; // in [SUB_BUCKETS, 2 * SUB_BUCKETS)
    ((shift + 1) << SUB_BUCKET_BITS) + (leading_bits - SUB_BUCKETS) as u32
}

fn bucket_midpoint(bucket: u32) -> u64 {
    if (bucket as u64) < SUB_BUCKETS {
        return bucket as u64;
    }
    let shift = (bucket >> SUB_BUCKET_BITS) - 1;
    let leading_bits = (bucket as u64 & (SUB_BUCKETS - 1)) + SUB_BUCKETS;
    (leading_bits << shift) + ((1u64 << shift) >> 1)
}

impl DurationDistribution {
    pub(crate) fn record(&mut self, value: u64) {
        self.count += 1;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        if self.buckets.is_empty() {
            if self.exact.len() < EXACT_LIMIT {
                self.exact.push(value);
                return;
            }
            for v in std::mem::take(&mut self.exact) {
                self.count_in_bucket(v);
            }
        }
        self.count_in_bucket(value);
    }

    /// Adds durations counted in a coarser histogram (the runtime's, see
    /// `parprof_rt::trace::duration_bucket`): `count` of them near `midpoint`, all within
    /// `[min, max]`, the exact extremes of the durations counted there.
    pub(crate) fn record_counted(&mut self, midpoint: u64, count: u64, min: u64, max: u64) {
        if count == 0 {
            return;
        }
        if self.buckets.is_empty() {
            for v in std::mem::take(&mut self.exact) {
                self.count_in_bucket(v);
            }
        }
        let value = midpoint.clamp(min, max.max(min));
        self.count += count;
        self.min = self.min.min(min);
        self.max = self.max.max(max);
        let bucket = bucket_of(value) as usize;
        if bucket >= self.buckets.len() {
            self.buckets.resize(bucket + 1, 0);
        }
        self.buckets[bucket] += count;
    }

    fn count_in_bucket(&mut self, value: u64) {
        let bucket = bucket_of(value) as usize;
        if bucket >= self.buckets.len() {
            self.buckets.resize(bucket + 1, 0);
        }
        self.buckets[bucket] += 1;
    }

    /// `None` when nothing was recorded.
    pub(crate) fn min(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min)
    }

    pub(crate) fn max(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max)
    }

    /// The median (the mean of the two middle values for an even count when exact; the
    /// lower middle value's bucket otherwise), and how it was obtained.
    pub(crate) fn median(&self) -> Option<(u64, MedianMethod)> {
        if self.count == 0 {
            return None;
        }
        if self.buckets.is_empty() {
            let mut sorted = self.exact.clone();
            sorted.sort_unstable();
            let n = sorted.len();
            let median = if n % 2 == 1 {
                sorted[n / 2]
            } else {
                // Halves first, so the sum cannot overflow.
                sorted[n / 2 - 1] / 2
                    + sorted[n / 2] / 2
                    + (sorted[n / 2 - 1] % 2 + sorted[n / 2] % 2) / 2
            };
            return Some((median, MedianMethod::Exact));
        }
        let rank = (self.count - 1) / 2;
        let mut seen = 0;
        for (bucket, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen > rank {
                let median = bucket_midpoint(bucket as u32).clamp(self.min, self.max);
                return Some((median, MedianMethod::Histogram));
            }
        }
        // The bucket counts add up to `count`, so the loop has returned.
        Some((self.max, MedianMethod::Histogram))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_median_while_calls_are_few() {
        let mut d = DurationDistribution::default();
        assert_eq!(d.median(), None);
        for v in [5, 1, 9, 3] {
            d.record(v);
        }
        assert_eq!(d.median(), Some((4, MedianMethod::Exact)));
        d.record(100);
        assert_eq!(d.median(), Some((5, MedianMethod::Exact)));
        assert_eq!((d.min(), d.max()), (Some(1), Some(100)));
    }

    #[test]
    fn exact_median_of_huge_values_does_not_overflow() {
        let mut d = DurationDistribution::default();
        d.record(u64::MAX);
        d.record(u64::MAX - 2);
        assert_eq!(d.median(), Some((u64::MAX - 1, MedianMethod::Exact)));
    }

    #[test]
    fn buckets_cover_every_value_within_the_stated_error() {
        for v in (0..100_000u64).chain([u64::MAX, u64::MAX / 3, 1 << 40, (1 << 40) - 1]) {
            let mid = bucket_midpoint(bucket_of(v));
            let error = mid.abs_diff(v) as f64;
            assert!(error <= v as f64 / 256.0, "value {v} midpoint {mid}");
        }
        // Buckets are ordered like the values.
        assert!(bucket_of(127) < bucket_of(128) && bucket_of(255) < bucket_of(256));
    }

    #[test]
    fn counted_durations_join_the_recorded_ones() {
        let mut d = DurationDistribution::default();
        d.record(10);
        d.record(30);
        // Three near 20 (between 18 and 22), five near 1000.
        d.record_counted(20, 3, 18, 22);
        d.record_counted(1000, 5, 990, 1010);
        assert_eq!((d.min(), d.max()), (Some(10), Some(1010)));
        // Ten values in order: 10, three near 20, 30, five near 1000; the lower middle one,
        // the 5th, is 30.
        assert_eq!(d.median(), Some((30, MedianMethod::Histogram)));
    }

    #[test]
    fn histogram_median_of_many_calls_is_within_the_error() {
        let mut d = DurationDistribution::default();
        for v in 1..=10_001u64 {
            d.record(v * 1000);
        }
        let (median, method) = d.median().expect("values recorded");
        assert_eq!(method, MedianMethod::Histogram);
        let exact = 5_001_000f64;
        assert!(
            (median as f64 - exact).abs() <= exact / 256.0,
            "median {median}"
        );
        assert_eq!((d.min(), d.max()), (Some(1000), Some(10_001_000)));
    }
}
