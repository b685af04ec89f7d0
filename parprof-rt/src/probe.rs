//! Probe sites and the RAII guard that `#[probe]` expands to.

use crate::recorder;
use crate::sampling;
use crate::speed_reference;
use crate::trace::{EventKind, SiteKind, SiteRecord};
use std::sync::atomic::{AtomicU32, Ordering};

/// A probed source location: one static per annotated function, registered on first use so
/// that the hot path writes only an id and a timestamp.
pub struct Site {
    name: &'static str,
    file: &'static str,
    line: u32,
    kind: SiteKind,
    id: AtomicU32,
}

impl Site {
    /// The site of the probe `name` (`module::function`) at `file:line`; `#[probe]` makes one
    /// static per function.
    pub const fn new(name: &'static str, file: &'static str, line: u32) -> Self {
        Site {
            name,
            file,
            line,
            kind: SiteKind::Probe,
            id: AtomicU32::new(0),
        }
    }

    /// The site of the region `name` at `file:line`; `parallel_region!` makes one static per
    /// use.
    pub const fn region(name: &'static str, file: &'static str, line: u32) -> Self {
        Site {
            name,
            file,
            line,
            kind: SiteKind::Region,
            id: AtomicU32::new(0),
        }
    }

    /// The site's id, registering it on first use. `type_name` names the `Self` type of a
    /// method, so that the probe is called `module::Type::method`.
    #[inline(always)]
    pub fn id(&self, type_name: Option<fn() -> &'static str>) -> u32 {
        let id = self.id.load(Ordering::Relaxed);
        if id != 0 {
            id
        } else {
            self.register(type_name)
        }
    }

    #[cold]
    #[inline(never)]
    fn register(&self, type_name: Option<fn() -> &'static str>) -> u32 {
        // The first probe of a program may come here before anything started the runtime,
        // and the site record must reach the trace.
        recorder::ensure_init();
        let name = match type_name {
            Some(type_name) => method_name(type_name(), self.name),
            None => self.name.to_owned(),
        };
        recorder::register_site(
            &self.id,
            SiteRecord {
                id: 0,
                kind: self.kind,
                name,
                file: self.file.to_owned(),
                line: self.line,
                caller: String::new(),
                entry: None,
            },
        )
    }
}

/// `crate::m::Type<T>` and `crate::m::f` (the site's default name) → `crate::m::Type::f`.
fn method_name(type_name: &str, fn_path: &str) -> String {
    let base = type_name.split('<').next().unwrap_or(type_name);
    let fn_name = fn_path.rsplit("::").next().unwrap_or(fn_path);
    format!("{base}::{fn_name}")
}

/// Records the exit of a probed section when dropped: on return, `?`, and unwinding alike.
#[must_use = "the probe measures until this guard is dropped"]
pub struct Guard {
    /// The site, 0 when recording is off.
    id: u32,
    /// Whether the entry was recorded (else sampling counted the call without recording it).
    recorded: bool,
}

impl Guard {
    /// The guard of a recorded entry of `id` (0: nothing to do on drop).
    pub(crate) const fn new(id: u32) -> Self {
        Guard { id, recorded: true }
    }
}

impl Drop for Guard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.id != 0 {
            exit_recording(self.id, self.recorded);
        }
    }
}

/// Exit of a probed function, given the value it returns: when the call is recorded, the value
/// is made to exist (in memory, through an empty `asm!`) before the exit probe reads the clock.
/// The exit path is an opaque call, but a body that reads no memory, or only memory the
/// compiler knows no call can change (a `&[T]` argument), may still be computed after it,
/// and the function's time would then read about 0 while its caller got it.
#[inline(always)]
pub fn leave<T>(guard: Guard, value: T) -> T {
    if guard.id != 0 {
        std::hint::black_box(&value);
    }
    value
}

/// Entry of a probed section. When recording is off this is one load and one branch.
#[inline(always)]
pub fn enter(site: &'static Site) -> Guard {
    if recorder::is_off() {
        return Guard::new(0);
    }
    enter_recording(site, None)
}

/// Entry of a probed method: `type_name` is `std::any::type_name::<Self>`.
#[inline(always)]
pub fn enter_method(site: &'static Site, type_name: fn() -> &'static str) -> Guard {
    if recorder::is_off() {
        return Guard::new(0);
    }
    enter_recording(site, Some(type_name))
}

// Recording's entry and exit paths are never inlined into the probed function: the machine
// code a probe adds to a program is then the same two calls wherever it is, and calibration
// (which calls the same two functions from a function shaped like a probed one) measures
// what a probe costs in place. Inlined, the paths' code took the shape of each probed
// function (registers saved, branches laid out differently), and an untimed call cost about
// twice its calibrated cost there.

#[inline(never)]
fn enter_recording(site: &'static Site, type_name: Option<fn() -> &'static str>) -> Guard {
    let id = site.id(type_name);
    if sampling::enter(id) {
        enter_timed(id)
    } else {
        Guard {
            id,
            recorded: false,
        }
    }
}

#[inline(never)]
fn exit_recording(id: u32, recorded: bool) {
    if recorded {
        exit_timed(id);
    } else {
        sampling::exit(id);
    }
}

// The timed paths are apart from the untimed ones, which then save no registers: on a hot
// site 63 calls in 64 take only the untimed path.

#[inline(never)]
fn enter_timed(id: u32) -> Guard {
    if recorder::record(EventKind::Enter, id, 0, sampling::entry_flags(id)) {
        Guard::new(id)
    } else {
        sampling::exit(id);
        Guard::new(0)
    }
}

#[inline(never)]
fn exit_timed(id: u32) {
    if let Some(ts) = recorder::stamp(EventKind::Exit, id, 0, 0) {
        if sampling::recorded_exit(id, ts) {
            speed_reference::on_followed_exit(ts, probed_small_body);
        }
    } else {
        sampling::exit(id);
    }
}

/// Calibration's pseudo-site, whose events calibration discards.
static CALIBRATION: Site = Site {
    name: "parprof calibration",
    file: "",
    line: 0,
    kind: SiteKind::Probe,
    id: AtomicU32::new(sampling::CALIBRATION_SITE),
};

/// The entry path of `#[probe]`, for calibration.
#[inline(always)]
pub(crate) fn enter_calibration() -> Guard {
    enter(&CALIBRATION)
}

/// A small function probed, through the calls `#[probe]` makes: the probed half of a speed
/// reference and of calibration ([`speed_reference::small_body`] is the other).
#[inline(never)]
pub(crate) fn probed_small_body(x: u64) -> u64 {
    let guard = enter_calibration();
    leave(guard, speed_reference::small_work(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_names_drop_generics_and_keep_the_type() {
        assert_eq!(
            method_name("app::grid::Grid<f32>", "app::grid::step"),
            "app::grid::Grid::step"
        );
        assert_eq!(
            method_name("app::Solver", "app::solve"),
            "app::Solver::solve"
        );
    }
}
