//! The ids given to sites as they register, and whether any is a `#[probe]` site.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

static NEXT_SITE_ID: AtomicU32 = AtomicU32::new(1);

/// Whether a `#[probe]` site has been registered: slices measure probe calls only.
static PROBE_SITES: AtomicBool = AtomicBool::new(false);

/// The id the next registered site gets.
pub(crate) fn next_site_id() -> u32 {
    NEXT_SITE_ID.load(Ordering::Relaxed)
}

/// Gives out the next site id (never 0).
pub(crate) fn take_site_id() -> u32 {
    NEXT_SITE_ID.fetch_add(1, Ordering::Relaxed)
}

pub(crate) fn has_probe_sites() -> bool {
    PROBE_SITES.load(Ordering::Relaxed)
}

/// A `#[probe]` site has been registered.
pub(crate) fn note_probe_site() {
    PROBE_SITES.store(true, Ordering::Relaxed);
}
