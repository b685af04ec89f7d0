//! cpu-clock samples folded by call stack, for the CPU flamegraph.

use super::model::{CpuSamples, SampledStack};
use crate::kernel::{Frame, KernelRecords};
use std::collections::BTreeMap;

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
        frame.function.as_str()
    };
    if frame.inlined {
        format!("{function}{INLINED_SUFFIX}")
    } else {
        function.to_owned()
    }
}

pub(crate) fn fold(kernel: &KernelRecords) -> FoldedSamples {
    let mut stacks: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    let mut unsymbolised = 0;
    for (i, sample) in kernel.samples.iter().enumerate() {
        let frames: Vec<String> = match kernel.sample_stacks.get(i) {
            Some(stack) if !stack.is_empty() => stack.iter().map(frame_name).collect(),
            _ => {
                unsymbolised += 1;
                // Call chains are leaf first; flamegraph stacks are root first.
                let addresses: Vec<String> = sample
                    .callchain
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
        };
        *stacks.entry(frames).or_default() += 1;
    }
    FoldedSamples {
        samples: CpuSamples {
            period_ns: kernel.sample_period_ns,
            total: kernel.samples.len() as u64,
            stacks: stacks
                .into_iter()
                .map(|(frames, samples)| SampledStack { frames, samples })
                .collect(),
        },
        unsymbolised,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::CpuSample;

    fn frame(function: &str, inlined: bool) -> Frame {
        Frame {
            function: function.to_owned(),
            inlined,
        }
    }

    #[test]
    fn folds_symbolised_stacks_and_falls_back_to_addresses() {
        let sample = |callchain: Vec<u64>| CpuSample {
            time_ns: 0,
            tid: 1,
            cpu: 0,
            callchain,
        };
        let kernel = KernelRecords {
            samples: vec![
                sample(vec![2, 1]),
                sample(vec![2, 1]),
                sample(vec![0x20, 0x10]),
                sample(vec![]),
            ],
            sample_stacks: vec![
                vec![frame("main", false), frame("work", true)],
                vec![frame("main", false), frame("work", true)],
                vec![],
            ],
            sample_period_ns: 1000,
            ..KernelRecords::default()
        };
        let folded = fold(&kernel);
        assert_eq!(folded.unsymbolised, 2);
        let stacks: Vec<(String, u64)> = folded
            .samples
            .stacks
            .iter()
            .map(|s| (s.frames.join(";"), s.samples))
            .collect();
        assert_eq!(
            stacks,
            [
                ("0x10;0x20".to_owned(), 1),
                ("[unknown]".to_owned(), 1),
                ("main;work_[i]".to_owned(), 2)
            ]
        );
        assert_eq!((folded.samples.total, folded.samples.period_ns), (4, 1000));
    }
}
