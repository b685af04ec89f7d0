//! Building the target for profiling: which cargo target to build and how ([`target`]), and
//! the rayon-core edited with parprof's hooks that it is built against ([`rayon_hooks`]).

pub mod rayon_hooks;
pub mod target;
