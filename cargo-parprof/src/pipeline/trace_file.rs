//! The run's trace, fed to the analysis: which file of the output folder, opened, with what
//! is read before streaming it (the End chunk at its tail, criterion's phases), and a progress
//! bar drawn as the analysis reads it.

use crate::analysis::bench_phases::{self, BenchPhases};
use crate::analysis::{AnalysisOptions, Note, OpenTrace, TraceBytes, TraceInput, TraceNote};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use parprof_rt::trace::{Chunk, ChunkEncoder, End, Header, TraceError, TraceReader};
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::spill_files::TempFiles;

#[derive(Debug, thiserror::Error)]
pub enum TraceOpenError {
    #[error("cannot look for the trace in {path}")]
    Folder {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot open the trace {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot analyse the trace {path}")]
    Trace {
        path: PathBuf,
        #[source]
        source: TraceError,
    },
}

/// Finds the trace of a run (`trace` is a trace file or the output folder holding it, see
/// [`pick_trace`]) and opens it for the analysis, with criterion's phases scanned first when
/// `opts` asks for them. No trace, an empty one or another run's is noted, not an error.
pub fn open(trace: &Path, opts: &AnalysisOptions) -> Result<TraceInput, TraceOpenError> {
    let mut notes = Vec::new();
    let path = locate_trace(trace, opts.child_pid, &mut notes)?;
    let opened = match &path {
        Some(path) => open_trace(path, opts.progress_min_bytes, &mut notes)?
            .filter(|t| of_the_run(t, opts.child_pid, &mut notes)),
        None => {
            notes.push(Note::Trace(TraceNote::Absent {
                folder: trace.to_owned(),
            }));
            None
        }
    };
    let bench_phases = match &opened {
        Some(t) if opts.bench_phases => scan_bench_phases(&t.path, &mut notes),
        _ => BenchPhases::default(),
    };
    // Beside the trace: the system's temporary folder may be in memory.
    let spill_dir = path
        .as_deref()
        .and_then(Path::parent)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(Path::to_path_buf);
    Ok(TraceInput {
        path,
        opened,
        bench_phases,
        notes,
        spill: Arc::new(TempFiles::in_dir(spill_dir)),
    })
}

fn locate_trace(
    trace: &Path,
    child_pid: Option<u32>,
    notes: &mut Vec<Note>,
) -> Result<Option<PathBuf>, TraceOpenError> {
    if !trace.is_dir() {
        return Ok(trace.is_file().then(|| trace.to_owned()));
    }
    let pick = pick_trace(trace, child_pid).map_err(|source| TraceOpenError::Folder {
        path: trace.to_owned(),
        source,
    })?;
    notes.extend(pick.note);
    Ok(pick.file)
}

/// Opens the trace and reads its header; an empty trace (the program stopped before writing
/// anything) is noted and treated as absent. Traces of at least `progress_min_bytes` draw a
/// progress bar on stderr as they are read (never when stderr is not a terminal).
fn open_trace(
    path: &Path,
    progress_min_bytes: u64,
    notes: &mut Vec<Note>,
) -> Result<Option<OpenTrace>, TraceOpenError> {
    let file = File::open(path).map_err(|source| TraceOpenError::Open {
        path: path.to_owned(),
        source,
    })?;
    let file_len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let bytes: Box<dyn Read> = if file_len >= progress_min_bytes {
        Box::new(ProgressReader::new(file, file_len))
    } else {
        Box::new(file)
    };
    let bytes: TraceBytes = BufReader::with_capacity(1 << 20, bytes);
    let reader = match TraceReader::new(bytes) {
        Ok(reader) => reader,
        Err(TraceError::Empty) => {
            notes.push(Note::Trace(TraceNote::Empty {
                path: path.to_owned(),
            }));
            return Ok(None);
        }
        Err(source) => {
            return Err(TraceOpenError::Trace {
                path: path.to_owned(),
                source,
            });
        }
    };
    let end = read_end_chunk(path, reader.header());
    Ok(Some(OpenTrace {
        path: path.to_owned(),
        reader,
        end,
    }))
}

/// Whether a trace named after the run's process was written by it: one written by another
/// process (copied or renamed there) would give another run's figures as this one's.
fn of_the_run(trace: &OpenTrace, child_pid: Option<u32>, notes: &mut Vec<Note>) -> bool {
    let written_by = trace.reader.header().pid;
    let named = trace_file_pid(&trace.path);
    match (child_pid, named) {
        (Some(pid), Some(named)) if named == pid && written_by != pid => {
            notes.push(Note::Trace(TraceNote::OfAnotherProcess {
                path: trace.path.clone(),
                written_by,
                run_pid: pid,
            }));
            false
        }
        _ => true,
    }
}

/// The benchmark phases in the trace, from a scan of its own; what stops it is noted.
fn scan_bench_phases(path: &Path, notes: &mut Vec<Note>) -> BenchPhases {
    let scanned = File::open(path)
        .map_err(TraceError::from)
        .and_then(|file| TraceReader::new(BufReader::new(file)))
        .and_then(bench_phases::scan);
    scanned.unwrap_or_else(|e| {
        notes.push(Note::Trace(TraceNote::BenchPhasesUnread {
            path: path.to_owned(),
            error: e.to_string(),
        }));
        BenchPhases::default()
    })
}

/// The trace file chosen among those of an output folder.
#[derive(Clone, Debug, PartialEq)]
struct TracePick {
    file: Option<PathBuf>,
    /// Why the choice is not the obvious one, for the report's notes.
    note: Option<Note>,
}

fn is_trace_file(name: &str) -> bool {
    name.starts_with("trace") && name.ends_with(".ppt")
}

/// The process a trace file is named after (`trace-<pid>.ppt`).
fn trace_file_pid(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    name.strip_prefix("trace-")?
        .strip_suffix(".ppt")?
        .parse()
        .ok()
}

/// Picks the trace of the process `pid` (`trace-<pid>.ppt`) in `dir`. Without it: the only
/// trace present, or the largest of several (processes the program started write their own),
/// or none.
fn pick_trace(dir: &Path, pid: Option<u32>) -> io::Result<TracePick> {
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
fn read_end_chunk(path: &Path, header: &Header) -> Option<End> {
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

/// A file that moves a progress bar as it is read, and clears it at its end.
struct ProgressReader {
    file: File,
    bar: ProgressBar,
}

impl ProgressReader {
    fn new(file: File, len: u64) -> ProgressReader {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "analysing the trace [{bar:40}] {bytes}/{total_bytes} ({eta})",
        ) {
            bar.set_style(style);
        }
        ProgressReader { file, bar }
    }
}

impl Read for ProgressReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read(buf)?;
        self.bar.inc(n as u64);
        if n == 0 && !buf.is_empty() {
            self.bar.finish_and_clear();
        }
        Ok(n)
    }
}

impl Drop for ProgressReader {
    /// A trace that ends short of its file (a corrupt chunk) clears the bar here.
    fn drop(&mut self) {
        self.bar.finish_and_clear();
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
