//! The analyses: one in-memory result that every report is a view of.

pub mod offcpu;
