//! rayon's hook point: the items of a region's own parallel iterators.
//!
//! Why: too-fine tasks of a parallel iterator are fixed with `.with_min_len(n)`, and n counts
//! items, while the lifecycle (rayon-core's hooks) sees jobs. rayon knows an indexed iterator's
//! length where it bridges the producer to the consumer (`bridge_producer_consumer`, the
//! entry of every indexed iterator's split), so the program is built against a copy of rayon
//! ([`crate::build::hooked_copy`]) that tells `parprof_rt::rayon_hooks::IteratorBridge` the
//! length there. Without it (another rayon version), the advice counts today's tasks instead.

use crate::build::hooked_copy::{HookPoint, HookedCrate, PreparedCopy, Program, no_lib_items};
use std::path::Path;

/// rayon, as parprof hooks it.
pub const RAYON: HookedCrate = HookedCrate {
    package: "rayon",
    supported: &["1.10", "1.11", "1.12"],
    hook_points: HOOK_POINTS,
    purpose: "count the items of the parallel iterators",
    lib_items: no_lib_items,
};

const HOOK_POINTS: &[HookPoint] = &[
    // An indexed iterator's producer bridged to its consumer over `len` items.
    HookPoint {
        file: "src/iter/plumbing/mod.rs",
        anchor: "    let splitter = LengthSplitter::new(producer.min_len(), producer.max_len(), len);\n    return helper(len, false, splitter, producer, consumer);\n",
        replacement: "    let splitter = LengthSplitter::new(producer.min_len(), producer.max_len(), len);\n    let _parprof_bridge = ::parprof_rt::rayon_hooks::IteratorBridge::begin(len);\n    return helper(len, false, splitter, producer, consumer);\n",
    },
];

/// Prepares the hooked copy of the program's rayon in `build_dir`: `Ok(None)` when the program
/// does not use rayon, `Err` with the reason when it cannot be hooked.
pub fn prepare(program: &Program, build_dir: &Path) -> Result<Option<PreparedCopy>, String> {
    program.prepare(&RAYON, build_dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::hooked_copy::assert_workspace_copy_is_hooked;

    /// This workspace's own rayon (a supported version) takes the hook point.
    #[test]
    fn the_workspace_rayon_takes_the_hook_point() {
        let dir = tempfile::tempdir().unwrap();
        assert_workspace_copy_is_hooked(&RAYON, dir.path());
    }
}
