//! Scratch space for what the analysis cannot hold in memory (the counters' spans of a long
//! run). The pipeline gives it — files beside the trace — so that the analysis does no file
//! I/O of its own; tests give it memory.

use std::io;

/// One store: appended to, read back by offset.
pub trait SpillStore {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Fills `buf` from `offset`; an error where fewer bytes were stored.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

/// Where stores come from: a new, empty one at each call, made only when something spills.
pub trait SpillSpace {
    fn new_store(&self) -> io::Result<Box<dyn SpillStore>>;
}

/// Stores in memory, for tests: what spills stays resident.
#[cfg(test)]
#[derive(Clone, Copy, Debug, Default)]
pub struct InMemory;

#[cfg(test)]
impl SpillSpace for InMemory {
    fn new_store(&self) -> io::Result<Box<dyn SpillStore>> {
        Ok(Box::new(Vec::<u8>::new()))
    }
}

#[cfg(test)]
impl SpillStore for Vec<u8> {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.extend_from_slice(bytes);
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let stored = usize::try_from(offset)
            .ok()
            .and_then(|at| self.get(at..at.checked_add(buf.len())?))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(stored);
        Ok(())
    }
}

/// Every store reads back what was appended, across appends, and refuses to read past it.
#[cfg(test)]
pub(crate) fn assert_reads_back_what_was_appended(store: &mut dyn SpillStore) {
    store.append(b"abc").unwrap();
    store.append(b"def").unwrap();
    let mut buf = [0u8; 4];
    store.read_at(&mut buf, 2).unwrap();
    assert_eq!(&buf, b"cdef");
    assert!(store.read_at(&mut buf, 3).is_err());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_in_memory_reads_back_what_was_appended() {
        assert_reads_back_what_was_appended(&mut *InMemory.new_store().unwrap());
    }
}
