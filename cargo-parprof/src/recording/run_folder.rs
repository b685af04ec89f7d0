//! Saving and loading a run folder's records (`records.ppr`, encoded by [`super::format`]).

use super::format::{self, Loaded, RecordsError};
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
/// not at all: it is written aside and renamed.
pub fn save(dir: &Path, recording: &Recording) -> Result<PathBuf, RunFolderError> {
    let path = dir.join(RECORDS_FILE);
    let partial = dir.join(format!("{RECORDS_FILE}.partial"));
    let write = || -> std::io::Result<()> {
        let mut out = BufWriter::new(std::fs::File::create(&partial)?);
        format::write(recording, &mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&partial, &path)
    };
    write().map_err(|source| RunFolderError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
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
