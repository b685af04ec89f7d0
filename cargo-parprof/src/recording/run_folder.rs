//! Saving and loading a run folder's records (`records.ppr`, encoded by [`super::format`]).

use super::format::{self, Loaded, RecordsError};
use super::kernel_records::KernelRecords;
use super::run::Recording;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

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
    let path = dir.join(RECORDS_FILE);
    let partial = dir.join(format!("{RECORDS_FILE}.partial"));
    let write = || -> std::io::Result<u64> {
        let mut out = BufWriter::new(std::fs::File::create(&partial)?);
        format::write(recording, &mut out)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&partial, &path)?;
        Ok(file.metadata()?.len())
    };
    write().map_err(|source| RunFolderError::Write { path, source })
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
/// part (see [`Loaded::completeness`]).
pub fn load(dir: &Path) -> Result<Loaded, RunFolderError> {
    let path = dir.join(RECORDS_FILE);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RunFolderError::NoRecords {
                dir: dir.to_owned(),
            });
        }
        Err(e) => {
            return Err(RunFolderError::Read {
                path,
                source: RecordsError::Io(e),
            });
        }
    };
    format::read(BufReader::with_capacity(1 << 20, file))
        .map_err(|source| RunFolderError::Read { path, source })
}
