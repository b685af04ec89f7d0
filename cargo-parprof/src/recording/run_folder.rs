//! Saving and loading a run folder's records (`records.ppr`, encoded by [`super::format`]).

use super::address_spaces::SampleAt;
use super::counters::{CounterSample, SeriesSource, StoredSeries};
use super::format::{self, ListsToWrite, Loaded, RecordsError};
use super::kernel_records::{
    CallChain, KernelRecords, ListSource, StackedSample, StoredLists, SwitchRecord,
};
use super::run::Recording;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The records' file in a run folder.
pub const RECORDS_FILE: &str = "records.ppr";

/// Why a run folder's records could not be saved or loaded.
#[derive(Debug, thiserror::Error)]
pub enum RunFolderError {
    #[error(
        "{dir} holds no {RECORDS_FILE}: it is not the folder of one run of `cargo parprof` \
         (runs recorded before parprof saved its records cannot be analysed again)"
    )]
    NoRecords { dir: PathBuf },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: RecordsError,
    },
}

/// Writes `recording` into the run folder `dir` (as `records.ppr`). The file appears whole or
/// not at all: it is written aside and renamed; returns its length. Samples without stacks are saved with what
/// symbolising them needs; [`append_symbols`] adds the stacks later.
pub fn save(dir: &Path, recording: &Recording) -> Result<u64, RunFolderError> {
    save_as(dir, |out| format::write(recording, out))
}

/// [`save`] of `recording`'s records up to their end part, its long lists as `lists` gives
/// them (those it holds are not read): what the collector kept off memory.
pub fn save_with_lists(
    dir: &Path,
    recording: &Recording,
    lists: &dyn ListsToWrite,
) -> Result<u64, RunFolderError> {
    save_as(dir, |out| format::write_records_of(recording, lists, out))
}

/// Writes `records.ppr` in `dir` as `write` does, aside, then renames it; its length.
fn save_as(
    dir: &Path,
    write: impl FnOnce(&mut BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<u64, RunFolderError> {
    let path = dir.join(RECORDS_FILE);
    let partial = dir.join(format!("{RECORDS_FILE}.partial"));
    let save = || -> std::io::Result<u64> {
        let mut out = BufWriter::new(std::fs::File::create(&partial)?);
        write(&mut out)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&partial, &path)?;
        Ok(file.metadata()?.len())
    };
    save().map_err(|source| RunFolderError::Write { path, source })
}

/// Appends the symbolised stacks of `kernel`'s samples to the records saved in the run folder
/// `dir` without them, `records_len` bytes long ([`Loaded::records_len`]: what a symbolising
/// cut short left after them goes). Should this be cut short, the records stay whole and
/// their samples are read without stacks, to be symbolised again. The symbols are this
/// version's, so the file says it is of this version (an older one's records are the same).
pub fn append_symbols(
    dir: &Path,
    records_len: u64,
    kernel: &KernelRecords,
) -> Result<(), RunFolderError> {
    use std::io::{Seek, SeekFrom, Write};
    let path = dir.join(RECORDS_FILE);
    let append = || -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new().write(true).open(&path)?;
        file.set_len(records_len)?;
        file.seek(SeekFrom::Start(format::VERSION_OFFSET))?;
        file.write_all(&format::VERSION.to_le_bytes())?;
        file.seek(SeekFrom::End(0))?;
        let mut out = BufWriter::new(file);
        format::write_symbols(kernel, &mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()
    };
    append().map_err(|source| RunFolderError::Write {
        path: path.clone(),
        source,
    })
}

/// Whether `dir` holds a run's records.
pub fn is_run_folder(dir: &Path) -> bool {
    dir.join(RECORDS_FILE).is_file()
}

/// Reads the records of the run folder `dir`; a cut file is read up to its last complete
/// part (see [`Loaded::completeness`]). The long lists (switches, samples and their stacks)
/// are not held where they can be walked again from the file ([`RecordsFile`]): memory then
/// follows what the analysis keeps, not the run's length. Records that cannot (older, cut,
/// not symbolised) are read whole.
pub fn load(dir: &Path) -> Result<Loaded, RunFolderError> {
    let path = dir.join(RECORDS_FILE);
    let read_error = |source| RunFolderError::Read {
        path: path.clone(),
        source,
    };
    let (mut loaded, walkable) = format::read_counted(open(dir)?).map_err(read_error)?;
    if !walkable {
        return format::read(open(dir)?).map_err(read_error);
    }
    RecordsFile::leave_lists(path, &mut loaded.recording);
    Ok(loaded)
}

/// Drops the long lists of `recording` saved in the run folder `dir` (by [`save`], with or
/// without [`append_symbols`]) to walk them from its records from now on, as [`load`] does:
/// the switches, the counters' readings, the samples with their stacks and processes. The
/// samples are symbolised from the records too ([`SavedSamples`]), so memory after a recording
/// follows what the analysis keeps, not the run. Switches out of time order stay held (the
/// analysis sorts them).
pub fn walk_lists_from_file(dir: &Path, recording: &mut Recording) {
    if !recording.kernel.switches.is_sorted_by_key(|s| s.time_ns) {
        return;
    }
    if recording.kernel.stored.is_none() {
        RecordsFile::leave_lists(dir.join(RECORDS_FILE), recording);
    }
    let kernel = &mut recording.kernel;
    kernel.switches = Vec::new();
    for series in &mut recording.counters.counters {
        series.cpu_samples = Vec::new();
    }
    kernel.samples = Vec::new();
    kernel.sample_stacks = Vec::new();
    kernel.switch_samples = Vec::new();
    kernel.switch_sample_stacks = Vec::new();
    let addresses = &mut recording.addresses;
    addresses.sample_pids = Vec::new();
    addresses.switch_sample_pids = Vec::new();
}

fn open(dir: &Path) -> Result<BufReader<std::fs::File>, RunFolderError> {
    let path = dir.join(RECORDS_FILE);
    match std::fs::File::open(&path) {
        Ok(file) => Ok(BufReader::with_capacity(1 << 20, file)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(RunFolderError::NoRecords {
            dir: dir.to_owned(),
        }),
        Err(e) => Err(RunFolderError::Read {
            path,
            source: RecordsError::Io(e),
        }),
    }
}

/// A run folder's `records.ppr`, its long lists walked again from it, part by part, each time
/// the analysis walks them.
#[derive(Debug)]
pub struct RecordsFile {
    path: PathBuf,
    /// The first failure to read them again (the file changed since it was checked): the walk
    /// ended there.
    failure: Mutex<Option<String>>,
}

impl RecordsFile {
    /// Lets `recording`'s long lists, not held, be walked from the records at `path`.
    fn leave_lists(path: PathBuf, recording: &mut Recording) {
        let file = Arc::new(RecordsFile {
            path,
            failure: Mutex::new(None),
        });
        for (index, series) in recording.counters.counters.iter_mut().enumerate() {
            series.stored = Some(StoredSeries {
                source: file.clone(),
                index,
            });
        }
        recording.kernel.stored = Some(StoredLists(file));
    }

    /// The items of `walk` up to its first failure, which is kept.
    fn items<'a, T: 'a>(
        &'a self,
        walk: impl Iterator<Item = Result<T, RecordsError>> + 'a,
    ) -> impl Iterator<Item = T> + 'a {
        walk.map_while(|item| item.map_err(|e| self.failed(e.to_string())).ok())
    }

    fn failed(&self, error: String) {
        if let Ok(mut failure) = self.failure.lock() {
            failure.get_or_insert(error);
        }
    }

    fn input(&self) -> Option<BufReader<std::fs::File>> {
        match std::fs::File::open(&self.path) {
            Ok(file) => Some(BufReader::with_capacity(256 << 10, file)),
            Err(e) => {
                self.failed(e.to_string());
                None
            }
        }
    }
}

impl ListSource for RecordsFile {
    fn switches(&self) -> Box<dyn Iterator<Item = SwitchRecord> + '_> {
        match self.input() {
            Some(input) => Box::new(self.items(format::walk_switches(input))),
            None => Box::new(std::iter::empty()),
        }
    }

    fn samples(&self, switch_outs: bool) -> Box<dyn Iterator<Item = StackedSample> + '_> {
        let (Some(samples), Some(stacks)) = (self.input(), self.input()) else {
            return Box::new(std::iter::empty());
        };
        let samples = self.items(format::walk_samples(samples, switch_outs));
        // Records saved before their samples were symbolised have no stacks (yet: the analysis
        // may walk them while they are symbolised).
        let stacks = (self.items(format::walk_sample_stacks(stacks, switch_outs)))
            .map(Some)
            .chain(std::iter::repeat(None));
        Box::new(samples.zip(stacks))
    }

    fn failure(&self) -> Option<String> {
        // The counters' walks fail here too: one file.
        let failure = self.failure.lock().ok()?.clone()?;
        Some(format!("{}: read again: {failure}", self.path.display()))
    }
}

impl SeriesSource for RecordsFile {
    fn series_samples(&self, index: usize) -> Box<dyn Iterator<Item = CounterSample> + '_> {
        match self.input() {
            Some(input) => Box::new(self.items(format::walk_counter_samples(input, index))),
            None => Box::new(std::iter::empty()),
        }
    }
}

/// The samples saved in a run folder's records, walked from them as symbolising needs them
/// ([`SampleAt`]), so that symbolising a long run does not hold its samples.
#[derive(Debug)]
pub struct SavedSamples(RecordsFile);

impl SavedSamples {
    pub fn in_folder(dir: &Path) -> SavedSamples {
        SavedSamples(RecordsFile {
            path: dir.join(RECORDS_FILE),
            failure: Mutex::new(None),
        })
    }

    /// The call chains the samples refer to, by id.
    pub fn call_chains(&self) -> Vec<CallChain> {
        let file = &self.0;
        (file.input()).map_or_else(Vec::new, |input| {
            file.items(format::walk_callchains(input)).collect()
        })
    }

    /// The cpu samples (`switch_outs`: the switch samples) in the order saved, each with its
    /// process (its thread where the records have none).
    pub fn samples(&self, switch_outs: bool) -> Box<dyn Iterator<Item = SampleAt> + Send + '_> {
        let file = &self.0;
        let (Some(samples), Some(pids)) = (file.input(), file.input()) else {
            return Box::new(std::iter::empty());
        };
        let mut pids = (file.items(format::walk_sample_pid_runs(pids, switch_outs)))
            .flat_map(|(pid, n)| std::iter::repeat_n(pid, n as usize));
        let samples = file.items(format::walk_sample_chains(samples, switch_outs));
        Box::new(samples.map(move |(time_ns, tid, chain)| SampleAt {
            time_ns,
            pid: pids.next().unwrap_or(tid),
            // An id past the table is no chain (the records were checked when saved).
            chain: u32::try_from(chain).unwrap_or(u32::MAX),
        }))
    }

    /// Why a walk ended before its list did, if one did.
    pub fn failure(&self) -> Option<String> {
        ListSource::failure(&self.0)
    }
}
