//! The run folder's records: what the analysis reads.

pub mod counters;
