//! criterion's hook points: what its profile mode measured, as criterion counted it.
//!
//! Why: parprof runs each criterion benchmark in criterion's profile mode (`--profile-time`,
//! see `record::bench_harness`), whose `Routine::profile` first warms up (the routine in
//! batches of 1, 2, 4, … iterations for about a second) and then runs one batch of as many
//! iterations as the warm-up says fill the rest of the time. Neither count is printed, and the
//! warm-up runs the same code as the batch. So the program is built against a copy of
//! criterion ([`crate::build::hooked_copy`]) whose `profile` tells `parprof_rt::bench_hooks`
//! when each phase began and ended and its iterations (criterion's own `wu_iters` and
//! `iters`): the report states them, and keeps to the measured batch.

use crate::build::hooked_copy::{HookPoint, HookedCrate, PreparedCopy, Program, no_lib_items};
use std::path::Path;

/// criterion, as parprof hooks it.
pub const CRITERION: HookedCrate = HookedCrate {
    package: "criterion",
    supported: &["0.5"],
    hook_points: HOOK_POINTS,
    purpose: "count criterion's warm-up and measured iterations",
    lib_items: no_lib_items,
};

const HOOK_POINTS: &[HookPoint] = &[
    // The warm-up of profile mode (`sample`, the statistics mode, warms up with another time).
    HookPoint {
        file: "src/routine.rs",
        anchor: "        let (wu_elapsed, wu_iters) = self.warm_up(measurement, Duration::from_secs(1), parameter);\n",
        replacement: "        let parprof_warm_up = ::parprof_rt::bench_hooks::Phase::begin();\n        let (wu_elapsed, wu_iters) = self.warm_up(measurement, Duration::from_secs(1), parameter);\n        parprof_warm_up.warm_up_done(wu_iters);\n",
    },
    // The measured batch of profile mode.
    HookPoint {
        file: "src/routine.rs",
        anchor: "            self.bench(measurement, &[iters], parameter);\n",
        replacement: "            let parprof_batch = ::parprof_rt::bench_hooks::Phase::begin();\n            self.bench(measurement, &[iters], parameter);\n            parprof_batch.measured_done(iters);\n",
    },
];

/// Prepares the hooked copy of the program's criterion in `build_dir`: `Ok(None)` when the
/// program does not use criterion, `Err` with the reason when it cannot be hooked.
pub fn prepare(program: &Program, build_dir: &Path) -> Result<Option<PreparedCopy>, String> {
    program.prepare(&CRITERION, build_dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::hooked_copy::assert_workspace_copy_is_hooked;

    /// This workspace's own criterion (a supported version, for `benches/criterion_pair.rs`)
    /// takes every hook point.
    #[test]
    fn the_workspace_criterion_takes_every_hook_point() {
        let dir = tempfile::tempdir().unwrap();
        assert_workspace_copy_is_hooked(&CRITERION, dir.path());
    }
}
