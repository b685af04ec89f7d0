//! How the views are drawn; the analysis is the same whatever they say.

/// How the views are drawn (the analysis is the same).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReportOptions {
    /// One cpu flamegraph root for all threads instead of one per thread.
    pub merge_threads: bool,
    pub frames: FrameView,
}

/// How the cpu and off-CPU flamegraphs name and fold frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameView {
    /// Every frame: rayon's and std's runs between two frames of the program not folded.
    pub all_frames: bool,
    /// The symbols' names, generic arguments included, instead of the short display names.
    pub full_names: bool,
}
