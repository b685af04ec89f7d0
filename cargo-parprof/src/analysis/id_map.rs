//! Hash maps keyed by the ids of a trace (threads, sites, call paths), which the analyses look
//! up for nearly every event: a multiplication instead of SipHash (the ids are not chosen by an
//! adversary). Their iteration order is fixed, unlike that of `std`'s randomly keyed maps.

use std::collections::HashMap;

#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(n)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub(crate) type IdBuildHasher = std::hash::BuildHasherDefault<IdHasher>;
pub(crate) type IdMap<K, V> = HashMap<K, V, IdBuildHasher>;
