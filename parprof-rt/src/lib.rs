//! parprof-rt: the runtime linked into a profiled program.
//!
//! Annotate functions with [`probe`] and mark parallel regions with [`parallel_region!`]; run
//! the program under `cargo parprof` (`cargo install cargo-parprof`, which sets `PARPROF_OUT`)
//! and each probe call is recorded with a timestamp into a per-thread buffer, drained by a
//! background writer into a [`trace`] file. Without `PARPROF_OUT` a probe costs one predictable
//! branch; the `off` feature compiles probes out entirely.
//!
//! ```
//! use parprof_rt::{parallel_region, probe};
//! use rayon::prelude::*;
//!
//! #[probe]
//! fn hot_kernel(row: &[f32]) -> f32 {
//!     row.iter().map(|x| x.sqrt()).sum()
//! }
//!
//! let rows = vec![vec![4.0f32; 16]; 64];
//! let total = parallel_region!("sum_rows", {
//!     rows.par_iter().map(|r| hot_kernel(r)).sum::<f32>()
//! });
//! assert_eq!(total, 2.0 * 16.0 * 64.0);
//! ```
//!
//! `cargo parprof` builds the program against a copy of rayon-core with hooks in it, which
//! call this crate's `rayon_hooks` (not a public API): every rayon task is then recorded in the
//! region current where it was created. One runtime runs in a process (`links =
//! "parprof_rt"`), of the version the `cargo-parprof` that profiles the program carries.
//!
//! The other public modules are the formats the runtime writes and `cargo parprof` reads
//! ([`trace`], [`slice_results`]) and what both sides share to read them ([`clock`],
//! [`codec`], [`lifecycle_totals`], [`state_clock`], [`region`]).

#![warn(missing_docs)]

/// Marks a parallel region: `parallel_region!("name", { body })`, or `parallel_region!({ body })`
/// to name it after its `file:line`. It evaluates to the body's value, nests, and works in any
/// function.
///
/// ```
/// use rayon::prelude::*;
/// # #[parprof_rt::probe]
/// # fn hot_kernel(row: &[f32]) -> f32 { row.iter().sum() }
/// # let rows = vec![vec![1.0f32; 4]; 8];
///
/// let total = parprof_rt::parallel_region!("sum_rows", {
///     rows.par_iter().map(|r| hot_kernel(r)).sum::<f32>()
/// });
/// # assert_eq!(total, 32.0);
/// ```
///
/// ```
/// let answer = parprof_rt::parallel_region!("answer", { 6 * 7 });
/// assert_eq!(answer, 42);
/// ```
///
/// The region's begin and end are recorded on the thread that runs the body, and the region is
/// current there meanwhile. Under `cargo parprof`, which builds the program with hooks in its
/// copy of rayon-core, every rayon task created while a region is current belongs to it —
/// in the body, in the functions it calls, in dependencies and in rayon itself, on whichever
/// worker runs it — and so do the tasks those tasks create. The body is not rewritten.
pub use parprof_macros::parallel_region;

/// Records a timestamped entry and exit event each time the annotated function runs.
///
/// ```
/// #[parprof_rt::probe]
/// fn hot_kernel(x: &[f32]) -> f32 {
///     x.iter().sum()
/// }
/// # assert_eq!(hot_kernel(&[1.0, 2.0]), 3.0);
/// ```
///
/// The exit is recorded by a guard dropped when the function is left by any path: a return,
/// `?`, the end of the body, or a panic unwinding through it. The function's signature,
/// attributes and body are kept as written; the probe adds two statements in front of the
/// body and hands the body's value, in tail position, through the guard's exit (so that a
/// value computed in registers alone is computed before the exit is timed), so type
/// inference and `return` behave as before. The probe registers its site once
/// (one `static` per function); afterwards a call records only an id and a timestamp, and with
/// recording off it costs one predictable branch. The `off` feature of `parprof-rt` removes
/// probes entirely.
///
/// # Where it applies
///
/// - **A function** (free, generic, `unsafe`, `extern "C"`, a trait method with a body, …).
///   The probe is named `module::path::function`.
/// - **A method with a `self` receiver**, annotated alone: named `module::Type::method`. The
///   macro cannot see the surrounding `impl`, so the runtime takes the type's name from
///   `std::any::type_name::<Self>()` (generic arguments dropped) when the probe first runs.
/// - **An associated function without receiver** (such as `fn new() -> Self`), annotated
///   alone: named `module::function`, without the type, because nothing in the function
///   names it. Annotate the `impl` block instead to get the type in the name.
/// - **An `impl` block** (inherent or trait impl): every function in it is probed and named
///   `module::Type::function`, with the impl block's module and its self type without generic
///   arguments. When the self type is not a bare name such as `Grid` or `Grid<T>` (a path such
///   as `other::Type`, a reference, a slice, a generic parameter), the type's name comes from
///   `type_name::<Self>()` at run time as above. Exclude a function with `#[probe(skip)]`;
///   rename one with `#[probe(name = "...")]`.
///
/// ```
/// struct Grid<T>(Vec<T>);
///
/// #[parprof_rt::probe]
/// impl<T: Copy> Grid<T> {
///     fn step(&mut self) {}                  // probe `module::Grid::step`
///
///     #[probe(skip)]
///     fn len(&self) -> usize { self.0.len() } // not probed
/// }
/// # Grid(vec![1]).step();
/// ```
///
/// # Arguments
///
/// - `name = "..."` names the probe instead of the default path.
/// - `skip` excludes a function of a probed `impl` block.
///
/// # Not supported
///
/// - `async fn`: the guard would live across `.await` points and so count time in which the
///   future is not being polled. Probe the synchronous functions it calls.
/// - `const fn`: a probe reads a clock at run time, which a function evaluated at compile
///   time cannot do.
/// - Function declarations without a body, and items other than functions and `impl` blocks.
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
