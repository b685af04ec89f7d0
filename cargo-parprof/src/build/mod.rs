//! Building the target for profiling: which cargo target to build and how ([`target`]), and
//! the dependencies built from copies with parprof's hooks ([`hooked_copy`]): rayon-core
//! ([`rayon_hooks`]), rayon ([`rayon_iter_hooks`]) and criterion ([`criterion_hooks`]).

pub mod criterion_hooks;
pub mod hooked_copy;
pub mod rayon_hooks;
pub mod rayon_iter_hooks;
pub mod target;
