//! Finding the trace file in an output folder, and reading what is needed before streaming it.

use super::note::{Note, TraceNote};
use parprof_rt::trace::{Chunk, ChunkEncoder, End, Header, TraceReader};
use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The trace file chosen among those of an output folder.
#[derive(Clone, Debug, PartialEq)]
pub struct TracePick {
    pub file: Option<PathBuf>,
    /// Why the choice is not the obvious one, for the report's notes.
    pub note: Option<Note>,
}

fn is_trace_file(name: &str) -> bool {
    name.starts_with("trace") && name.ends_with(".ppt")
}

/// The process a trace file is named after (`trace-<pid>.ppt`).
pub(crate) fn trace_file_pid(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    name.strip_prefix("trace-")?
        .strip_suffix(".ppt")?
        .parse()
        .ok()
}

/// Picks the trace of the process `pid` (`trace-<pid>.ppt`) in `dir`. Without it: the only
/// trace present, or the largest of several (processes the program started write their own),
/// or none.
pub fn pick_trace(dir: &Path, pid: Option<u32>) -> io::Result<TracePick> {
    if let Some(pid) = pid {
        let own = dir.join(format!("trace-{pid}.ppt"));
        if own.is_file() {
            return Ok(TracePick {
                file: Some(own),
                note: None,
            });
        }
    }
    let mut traces: Vec<(u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_str().is_some_and(is_trace_file) && entry.file_type()?.is_file() {
            traces.push((entry.metadata()?.len(), entry.path()));
        }
    }
    traces.sort();
    Ok(match traces.as_slice() {
        [] => TracePick {
            file: None,
            note: None,
        },
        [(_, only)] => TracePick {
            file: Some(only.clone()),
            note: pid.map(|expected_pid| {
                Note::Trace(TraceNote::OnlyOther {
                    expected_pid,
                    analysed: only.clone(),
                })
            }),
        },
        [.., (_, largest)] => TracePick {
            file: Some(largest.clone()),
            note: Some(Note::Trace(TraceNote::LargestOfSeveral {
                folder: dir.to_owned(),
                traces: traces.len(),
                expected_pid: pid,
                analysed: largest.clone(),
            })),
        },
    })
}

/// The End chunk of a complete trace, read from the file's tail before streaming it: the
/// whole-run clock rate is needed to place kernel records on the tick time line before the
/// first event is analysed. `None` when the tail is not a valid End chunk (a cut trace).
pub(crate) fn read_end_chunk(path: &Path, header: &Header) -> Option<End> {
    let end_chunk_len = encode(&[Chunk::End(End::default())]).len();
    let mut file = File::open(path).ok()?;
    file.seek(SeekFrom::End(-(end_chunk_len as i64))).ok()?;
    let mut tail = vec![0; end_chunk_len];
    file.read_exact(&mut tail).ok()?;
    // Let the trace reader validate the chunk: put it behind a preamble and the header.
    let mut encoder = ChunkEncoder::new();
    encoder.preamble();
    encoder.chunk(&Chunk::Header(header.clone()));
    let mut bytes = Vec::new();
    encoder.flush_to(&mut bytes).ok()?;
    bytes.extend_from_slice(&tail);
    match TraceReader::new(io::Cursor::new(bytes)).ok()?.next_chunk() {
        Ok(Some(Chunk::End(end))) => Some(end),
        _ => None,
    }
}

/// The bytes of `chunks`, without a preamble.
fn encode(chunks: &[Chunk]) -> Vec<u8> {
    let mut encoder = ChunkEncoder::new();
    for chunk in chunks {
        encoder.chunk(chunk);
    }
    let mut bytes = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = encoder.flush_to(&mut bytes);
    bytes
}

/// A reader that counts the bytes read through it, for the progress bar.
pub(crate) struct CountingReader<R> {
    inner: R,
    count: Rc<Cell<u64>>,
}

impl<R> CountingReader<R> {
    pub(crate) fn new(inner: R) -> (Self, Rc<Cell<u64>>) {
        let count = Rc::new(Cell::new(0));
        (
            CountingReader {
                inner,
                count: Rc::clone(&count),
            },
            count,
        )
    }
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_childs_trace_then_the_only_one_then_the_largest() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(
            pick_trace(dir.path(), Some(7)).unwrap(),
            TracePick {
                file: None,
                note: None
            }
        );
        std::fs::write(dir.path().join("trace-9.ppt"), b"12345").unwrap();
        let only = pick_trace(dir.path(), Some(7)).unwrap();
        assert_eq!(only.file, Some(dir.path().join("trace-9.ppt")));
        assert_eq!(
            only.note,
            Some(Note::Trace(TraceNote::OnlyOther {
                expected_pid: 7,
                analysed: dir.path().join("trace-9.ppt")
            }))
        );
        std::fs::write(dir.path().join("trace-8.ppt"), b"123").unwrap();
        std::fs::write(dir.path().join("report.json"), b"{}").unwrap();
        let largest = pick_trace(dir.path(), Some(7)).unwrap();
        assert_eq!(largest.file, Some(dir.path().join("trace-9.ppt")));
        assert_eq!(
            largest.note,
            Some(Note::Trace(TraceNote::LargestOfSeveral {
                folder: dir.path().to_owned(),
                traces: 2,
                expected_pid: Some(7),
                analysed: dir.path().join("trace-9.ppt")
            }))
        );
        std::fs::write(dir.path().join("trace-7.ppt"), b"1").unwrap();
        assert_eq!(
            pick_trace(dir.path(), Some(7)).unwrap().file,
            Some(dir.path().join("trace-7.ppt"))
        );
    }
}
