//! Where the analysis spills what does not fit in memory: anonymous temporary files, beside
//! the trace when there is one.

use crate::analysis::spill::{SpillSpace, SpillStore};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// Spill stores as anonymous temporary files in `dir` (the system's temporary folder when
/// `None`), deleted when the analysis drops them.
pub struct TempFiles {
    dir: Option<PathBuf>,
}

impl TempFiles {
    pub fn in_dir(dir: Option<PathBuf>) -> TempFiles {
        TempFiles { dir }
    }
}

impl SpillSpace for TempFiles {
    fn new_store(&self) -> io::Result<Box<dyn SpillStore>> {
        let file = match &self.dir {
            Some(dir) => tempfile::tempfile_in(dir)?,
            None => tempfile::tempfile()?,
        };
        Ok(Box::new(AppendedFile { file, len: 0 }))
    }
}

struct AppendedFile {
    file: File,
    len: u64,
}

impl SpillStore for AppendedFile {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, self.len)?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::spill::assert_reads_back_what_was_appended;

    #[test]
    fn a_temporary_file_reads_back_what_was_appended_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let space = TempFiles::in_dir(Some(dir.path().to_path_buf()));
        let mut store = space.new_store().unwrap();
        assert_reads_back_what_was_appended(&mut *store);
        // Anonymous: nothing is left in the folder, even while the store is open.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
