//! Where parprof's own text goes, and what a closed pipe does to it.
//!
//! Two rules:
//! - while a command runs the profiled program, that program owns stdout (its output may be
//!   piped into a file or another tool), so parprof's summary goes to stderr instead of being
//!   appended to the program's output; `report`, `diff` and `build` run no program and print
//!   their results on stdout;
//! - a reader that goes away (`| head -c 5`, `| true`, on stdout or stderr) is not an error
//!   of the profile: the first `EPIPE` stops all further writing to that stream, the run goes
//!   on (its files are written) and ends with its own exit code. `println!` and `eprintln!`
//!   would panic there instead, so parprof's own lines on stderr go through [`note!`].

use std::fmt::Display;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// The summary goes to stderr: set while the profiled program shares our stdout.
static SUMMARY_ON_STDERR: AtomicBool = AtomicBool::new(false);
/// A stream whose reader went away: nothing more is written to it.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
static STDERR_CLOSED: AtomicBool = AtomicBool::new(false);

/// From now on the summary goes to stderr: the profiled program's output owns stdout.
pub fn summary_to_stderr() {
    SUMMARY_ON_STDERR.store(true, Ordering::Relaxed);
}

/// Writes a line of parprof's summary where the summary goes (see the module's rules).
pub fn summary(text: impl Display) {
    if SUMMARY_ON_STDERR.load(Ordering::Relaxed) {
        write_note(text);
    } else {
        result(text);
    }
}

/// Writes a line of parprof's progress, warnings or errors on stderr.
pub fn write_note(text: impl Display) {
    write_line(&mut io::stderr().lock(), &STDERR_CLOSED, text);
}

/// `eprintln!` for parprof's own lines (see [`write_note`]).
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::console::write_note(format_args!($($arg)*))
    };
}
pub(crate) use note;

/// Writes a line of a command's result (a path, a table) on stdout.
pub fn result(text: impl Display) {
    write_line(&mut io::stdout().lock(), &STDOUT_CLOSED, text);
}

/// Writes `text` and a newline to `out` unless it was `closed`; marks it closed on a broken
/// pipe. Other write errors are dropped too: there is nowhere left to say them, and the run
/// folder holds everything the text would have said.
fn write_line(out: &mut dyn Write, closed: &AtomicBool, text: impl Display) {
    if closed.load(Ordering::Relaxed) {
        return;
    }
    let written = writeln!(out, "{text}").and_then(|()| out.flush());
    if let Err(e) = written
        && e.kind() == io::ErrorKind::BrokenPipe
    {
        closed.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose reader is gone.
    struct ClosedPipe {
        writes: usize,
    }

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            self.writes += 1;
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_broken_pipe_stops_the_writing_without_a_panic() {
        let closed = AtomicBool::new(false);
        let mut pipe = ClosedPipe { writes: 0 };
        write_line(&mut pipe, &closed, "summary");
        assert!(closed.load(Ordering::Relaxed));
        let tried = pipe.writes;
        write_line(&mut pipe, &closed, "more");
        assert_eq!(
            pipe.writes, tried,
            "nothing is written after the pipe closed"
        );
    }

    #[test]
    fn lines_reach_an_open_stream() {
        let closed = AtomicBool::new(false);
        let mut out = Vec::new();
        write_line(&mut out, &closed, "a");
        write_line(&mut out, &closed, 7);
        assert_eq!(out, b"a\n7\n");
        assert!(!closed.load(Ordering::Relaxed));
    }
}
