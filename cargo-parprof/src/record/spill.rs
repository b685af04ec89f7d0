//! Lists that grow with the run while it is recorded (the context switches, the samples), kept
//! off memory: the records come in batches out of order across the CPUs' rings, so each batch
//! of [`RUN_LEN`] is sorted and written whole to an anonymous temporary file (one sequential
//! write per batch, never one per record), and the list is read back as the merge of those
//! sorted runs, in order, as often as needed. What stays in memory is one batch being filled
//! and, while the list is read, a small buffer per run.

use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;

/// Records sorted and written at once: a batch in memory is about a megabyte.
const RUN_LEN: usize = 1 << 16;

/// What each run's reader buffers while the list is merged back.
const RUN_BUFFER: usize = 16 << 10;

/// A record of a fixed size, ordered by its key.
pub trait Spillable: Copy {
    const BYTES: usize;
    type Key: Ord;
    fn key(&self) -> Self::Key;
    fn put(&self, out: &mut Vec<u8>);
    fn get(bytes: &[u8]) -> Self;
}

/// A list being filled: sorted runs in a temporary file, the last batch in memory.
pub struct Spill<T> {
    file: Option<File>,
    /// The file could not be made or written: the rest of the list stays in memory.
    held_from_now: bool,
    /// Each run's first byte in the file and its records.
    runs: Vec<(u64, usize)>,
    written: u64,
    batch: Vec<T>,
}

impl<T: Spillable> Default for Spill<T> {
    fn default() -> Self {
        Spill {
            file: None,
            held_from_now: false,
            runs: Vec::new(),
            written: 0,
            batch: Vec::new(),
        }
    }
}

impl<T: Spillable> Spill<T> {
    pub fn push(&mut self, item: T) {
        self.batch.push(item);
        if self.batch.len() >= RUN_LEN && !self.held_from_now {
            self.write_batch();
        }
    }

    /// Writes the batch as a sorted run. Where no temporary file can be made or written, the
    /// records stay in memory (nothing is lost; memory follows the run, as before spilling).
    fn write_batch(&mut self) {
        self.batch.sort_unstable_by_key(T::key);
        let mut bytes = Vec::with_capacity(self.batch.len() * T::BYTES);
        for item in &self.batch {
            item.put(&mut bytes);
        }
        if self.file.is_none() {
            self.file = tempfile::tempfile().ok();
        }
        match &self.file {
            Some(file) if file.write_all_at(&bytes, self.written).is_ok() => {
                self.runs.push((self.written, self.batch.len()));
                self.written += bytes.len() as u64;
                self.batch.clear();
            }
            _ => self.held_from_now = true,
        }
    }

    /// The list, complete: read back in order from now on.
    pub fn finish(mut self) -> Spilled<T> {
        self.batch.sort_unstable_by_key(T::key);
        self.batch.shrink_to_fit();
        Spilled {
            file: self.file,
            runs: self.runs,
            held: self.batch,
        }
    }
}

/// A complete list: its sorted runs in the file, and the last one held.
pub struct Spilled<T> {
    file: Option<File>,
    runs: Vec<(u64, usize)>,
    held: Vec<T>,
}

impl<T> std::fmt::Debug for Spilled<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let runs = self.runs.len();
        write!(
            f,
            "{runs} sorted runs off memory and {} held",
            self.held.len()
        )
    }
}

impl<T: Spillable> Spilled<T> {
    /// The records in key order (those of equal keys in no given order): the merge of the
    /// runs. A run that can no longer be read ends early.
    pub fn walk(&self) -> impl Iterator<Item = T> + '_ {
        let mut runs: Vec<Box<dyn Iterator<Item = T> + '_>> = Vec::new();
        if let Some(file) = &self.file {
            for &(start, len) in &self.runs {
                runs.push(Box::new(read_run(file, start, len)));
            }
        }
        runs.push(Box::new(self.held.iter().copied()));
        // Each run's next record, the least key on top.
        let mut heads: BinaryHeap<Head<T>> = (runs.iter_mut().enumerate())
            .filter_map(|(run, records)| records.next().map(|item| Head { item, run }))
            .collect();
        std::iter::from_fn(move || {
            let Head { item, run } = heads.pop()?;
            if let Some(next) = runs[run].next() {
                heads.push(Head { item: next, run });
            }
            Some(item)
        })
    }
}

/// A run's next record in the merge, ordered so that the least key is the heap's greatest.
struct Head<T> {
    item: T,
    run: usize,
}

impl<T: Spillable> Ord for Head<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.item.key().cmp(&self.item.key())
    }
}

impl<T: Spillable> PartialOrd for Head<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<T: Spillable> PartialEq for Head<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl<T: Spillable> Eq for Head<T> {}

/// The `len` records of the run at `start` of `file`.
fn read_run<T: Spillable>(file: &File, start: u64, len: usize) -> impl Iterator<Item = T> + '_ {
    let mut input = BufReader::with_capacity(RUN_BUFFER, RunReader { file, at: start });
    let mut record = vec![0u8; T::BYTES];
    (0..len).map_while(move |_| {
        input.read_exact(&mut record).ok()?;
        Some(T::get(&record))
    })
}

/// Reads a file from `at` on, without moving the file's own position (runs are read side by
/// side).
struct RunReader<'a> {
    file: &'a File,
    at: u64,
}

impl Read for RunReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Item(u64, u32);

    impl Spillable for Item {
        const BYTES: usize = 12;
        type Key = (u64, u32);
        fn key(&self) -> (u64, u32) {
            (self.0, self.1)
        }
        fn put(&self, out: &mut Vec<u8>) {
            out.extend(self.0.to_le_bytes());
            out.extend(self.1.to_le_bytes());
        }
        fn get(b: &[u8]) -> Self {
            Item(
                u64::from_le_bytes(b[..8].try_into().unwrap()),
                u32::from_le_bytes(b[8..12].try_into().unwrap()),
            )
        }
    }

    #[test]
    fn a_list_of_several_runs_walks_back_sorted_every_time() {
        let mut spill = Spill::default();
        // Out of order within and across batches, as records come from several rings.
        let n = 3 * RUN_LEN as u64 + 1234;
        let items: Vec<Item> = (0..n)
            .map(|i| Item((i * 7919) % n / 3, (i % 3) as u32))
            .collect();
        items.iter().for_each(|i| spill.push(*i));
        let spilled = spill.finish();
        assert_eq!(spilled.runs.len(), 3);
        let mut sorted = items;
        sorted.sort_by_key(Item::key);
        assert_eq!(spilled.walk().collect::<Vec<_>>(), sorted);
        assert!(spilled.walk().eq(sorted.iter().copied()));
    }

    #[test]
    fn a_short_list_stays_in_memory() {
        let mut spill = Spill::default();
        [Item(3, 0), Item(1, 0), Item(2, 0)]
            .into_iter()
            .for_each(|i| spill.push(i));
        let spilled = spill.finish();
        assert!(spilled.file.is_none());
        assert_eq!(
            spilled.walk().collect::<Vec<_>>(),
            [Item(1, 0), Item(2, 0), Item(3, 0)]
        );
    }
}
