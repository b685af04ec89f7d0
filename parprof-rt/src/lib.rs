//! parprof-rt: the runtime linked into a profiled program.
//!
//! Annotate functions with [`probe`]; run the program under `cargo parprof` (which sets
//! `PARPROF_OUT`) and each probe call is recorded with a timestamp into a per-thread buffer,
//! drained by a background writer into a [`trace`] file. Without `PARPROF_OUT` a probe costs
//! one predictable branch; the `off` feature compiles probes out entirely.

pub use parprof_macros::parallel_region;
pub use parprof_macros::probe;

mod attention;
mod calibrate;
mod call_site;
pub mod clock;
pub mod codec;
mod detail;
mod full_detail;
pub mod lifecycle_totals;
mod perf_group;
// With `off`, probes expand to the stubs below and only calibration uses the real guard.
#[cfg_attr(feature = "off", allow(dead_code))]
mod probe;
#[doc(hidden)]
pub mod rayon_hooks;
mod recorder;
pub mod region;
mod ring;
mod sampling;
mod slice_child;
pub mod slice_results;
mod slice_shared_memory;
mod slice_slot;
mod slices;
mod speed_reference;
pub mod trace;

pub use recorder::{flush, is_enabled, register_current_thread, shutdown, trace_file_name};

/// Support for the code `#[probe]` generates; not a public API.
#[doc(hidden)]
pub mod __private {
    #[cfg(not(feature = "off"))]
    pub use crate::probe::{Guard, Site, enter, enter_method};

    #[cfg(feature = "off")]
    pub use crate::off::{Guard, Site, enter, enter_method};
}

/// With the `off` feature a probe is a zero-sized guard without `Drop`: no code at all.
#[cfg(feature = "off")]
mod off {
    pub struct Site;
    impl Site {
        pub const fn new(_: &'static str, _: &'static str, _: u32) -> Self {
            Site
        }
    }
    pub struct Guard;
    #[inline(always)]
    pub fn enter(_: &'static Site) -> Guard {
        Guard
    }
    #[inline(always)]
    pub fn enter_method(_: &'static Site, _: fn() -> &'static str) -> Guard {
        Guard
    }
}
