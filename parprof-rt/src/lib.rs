//! parprof-rt: the runtime linked into a profiled program.
//!
//! Annotate functions with [`probe`]; run the program under `cargo parprof` (which sets
//! `PARPROF_OUT`) and each probe call is recorded with a timestamp into a per-thread buffer,
//! drained by a background writer into a [`trace`] file. Without `PARPROF_OUT` a probe costs
//! one predictable branch; the `off` feature compiles probes out entirely.

pub use parprof_macros::parallel_region;
pub use parprof_macros::probe;

mod attention;
#[doc(hidden)]
pub mod bench_hooks;
mod calibrate;
mod call_site;
pub mod clock;
pub mod codec;
mod crash_flush;
mod detail;
mod full_detail;
mod hook_cost;
mod hook_spin;
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
mod runtime;
mod sampling;
mod site_ids;
mod slice_child;
pub mod slice_results;
mod slice_shared_memory;
mod slice_slot;
mod slice_timer;
mod slices;
mod speed_reference;
pub mod state_clock;
mod thread_context;
pub mod trace;

pub use runtime::{flush, is_enabled, register_current_thread, shutdown, trace_file_name};

/// Support for the code `#[probe]` generates; not a public API.
#[doc(hidden)]
pub mod __private;

/// With the `off` feature a probe is a zero-sized guard without `Drop`: no code at all.
#[cfg(feature = "off")]
mod off;
