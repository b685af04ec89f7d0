//! The slice results file, `slices-<pid>.txt` in the output folder: what the runtime's
//! detailed instrumentation measured (forked slices, or `PARPROF_DETAIL=full`), written by
//! the runtime at exit and read by `cargo parprof`. Both sides use this module, so the format
//! is defined once; `docs/slices-format.md` describes it.
//!
//! A line-oriented text format: the file is small (one line per measured site per slice),
//! and a person can read it when a figure looks wrong.

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};

/// Turns slices on: `period_ns=…,length_ns=…,load=…[,max=…]` (set by `cargo parprof --slices`).
pub const SLICES_ENV: &str = "PARPROF_SLICES";
/// `full`: every probe event reads the counters in the program itself (`--detail full`).
pub const DETAIL_ENV: &str = "PARPROF_DETAIL";

/// The start of a results file's name, `slices-<pid>.txt`.
pub const FILE_PREFIX: &str = "slices-";
/// The first line of every version-1 file.
const MAGIC: &str = "parprof-slices 1";

/// Name of the results file a process writes into the output folder.
pub fn file_name(pid: u32) -> String {
    format!("{FILE_PREFIX}{pid}.txt")
}

/// Where the measurements come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetailMode {
    /// Forked slices of the run (`PARPROF_SLICES`).
    Slices,
    /// The whole run measured in the program itself (`PARPROF_DETAIL=full`).
    Full,
}

/// The thresholds the run used.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceConfig {
    /// A slice is forked only while running program threads ÷ CPUs stay below it.
    pub load_threshold: f64,
    /// The most slices alive at once.
    pub slice_threshold: u32,
    /// The CPU time a slice runs for, in ns.
    pub length_ns: u64,
    /// The thread CPU time between two armed checkpoints, in ns.
    pub period_ns: u64,
    /// The CPUs the program may use.
    pub usable_cpus: u32,
}

/// What the checkpoints decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checkpoints {
    /// Checkpoints armed by the per-thread timer.
    pub armed: u64,
    /// Of them, those that forked a slice.
    pub forked: u64,
    /// Those skipped because the load was at the threshold.
    pub skipped_load: u64,
    /// Those skipped because the most slices were alive.
    pub skipped_slices: u64,
    /// Those whose fork failed.
    pub fork_failed: u64,
    /// Wall time the program's threads spent in checkpoints (scanning its threads, forking,
    /// reaping); the trace has each one (`SliceCheckpoint`) so that it is removed from probe
    /// times like overhead.
    pub cost_ns: u64,
}

/// One measured counter: `task-clock` (ns), `page-faults`, `instructions`.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterColumn {
    /// The counter's name, as `cargo parprof --counters` takes it.
    pub name: String,
}

/// A counter that was asked for and could not be opened.
#[derive(Debug, Clone, PartialEq)]
pub struct UnavailableCounter {
    /// The counter's name.
    pub name: String,
    /// Why it could not be opened, in words.
    pub reason: String,
}

/// Why a slice ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceEnd {
    /// It used its CPU time (or the program ended inside it).
    Completed,
    /// It ran out of wall time while using at least half of its CPU time.
    Timeout,
    /// It ran out of wall time while using less than half of its CPU time: it waited.
    Blocked,
    /// It made a system call with an effect outside itself.
    ForbiddenSyscall {
        /// The system call's number.
        syscall: i64,
    },
    /// It wrote memory the program shares (a `MAP_SHARED` mapping, which a slice holds
    /// read-only): the write never happened.
    SharedWrite,
    /// It died without saying why (killed by a signal, or by the parent's backstop).
    Killed,
    /// `PARPROF_DETAIL=full`: a thread's whole run.
    Full,
}

/// A site's per-call deltas within one slice: one sum and one sum of squares per column.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteStats {
    /// The trace's site id.
    pub site: u32,
    /// Calls measured whole within the slice.
    pub calls: u64,
    /// Per counter column, the sum of the calls' deltas.
    pub sums: Vec<f64>,
    /// Per counter column, the sum of their squares.
    pub sums_of_squares: Vec<f64>,
}

/// One slice (or, in full mode, one thread's whole run).
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    /// The thread the slice continued.
    pub tid: u32,
    /// The slice's own process (`None` in full mode): the kernel's records of it are the
    /// slice's, not the program's.
    pub pid: Option<u32>,
    /// The CPU the slice was pinned on, if any.
    pub cpu: Option<u32>,
    /// Event clock ticks, as the trace's events.
    pub start_ts: u64,
    /// The slice's task-clock.
    pub cpu_ns: u64,
    /// The slice's wall time.
    pub wall_ns: u64,
    /// Why it ended.
    pub end: SliceEnd,
    /// What it measured, per probe site.
    pub sites: Vec<SiteStats>,
}

/// The whole file.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceResults {
    /// Slices or the whole run.
    pub mode: DetailMode,
    /// The thresholds the run used.
    pub config: SliceConfig,
    /// The counters measured, the columns of every [`SiteStats`].
    pub counters: Vec<CounterColumn>,
    /// The counters asked for that could not be opened.
    pub unavailable: Vec<UnavailableCounter>,
    /// What the checkpoints decided.
    pub checkpoints: Checkpoints,
    /// Every slice.
    pub slices: Vec<Slice>,
}

/// A file that is not a valid results file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SliceResultsError {
    /// Reading the input failed.
    #[error("cannot read the slice results: {0}")]
    Io(String),
    /// A line is not what the format has there.
    #[error("slice results, line {line}: {message}")]
    Line {
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

fn end_text(end: SliceEnd) -> String {
    match end {
        SliceEnd::Completed => "completed".into(),
        SliceEnd::Timeout => "timeout".into(),
        SliceEnd::Blocked => "blocked".into(),
        SliceEnd::ForbiddenSyscall { syscall } => format!("forbidden_syscall:{syscall}"),
        SliceEnd::SharedWrite => "shared_write".into(),
        SliceEnd::Killed => "killed".into(),
        SliceEnd::Full => "full".into(),
    }
}

fn parse_end(text: &str) -> Option<SliceEnd> {
    Some(match text {
        "completed" => SliceEnd::Completed,
        "timeout" => SliceEnd::Timeout,
        "blocked" => SliceEnd::Blocked,
        "killed" => SliceEnd::Killed,
        "shared_write" => SliceEnd::SharedWrite,
        "full" => SliceEnd::Full,
        _ => SliceEnd::ForbiddenSyscall {
            syscall: text.strip_prefix("forbidden_syscall:")?.parse().ok()?,
        },
    })
}

/// A name is one token: no white space, not empty.
fn token(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect();
    if cleaned.is_empty() {
        "_".into()
    } else {
        cleaned
    }
}

/// Writes `r` in the version-1 format.
pub fn write(w: &mut impl Write, r: &SliceResults) -> io::Result<()> {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = writeln!(out, "{MAGIC}");
    let mode = match r.mode {
        DetailMode::Slices => "slices",
        DetailMode::Full => "full",
    };
    let _ = writeln!(out, "mode {mode}");
    let c = &r.config;
    let _ = writeln!(
        out,
        "config load_threshold={:?} slice_threshold={} length_ns={} period_ns={} usable_cpus={}",
        c.load_threshold, c.slice_threshold, c.length_ns, c.period_ns, c.usable_cpus
    );
    for counter in &r.counters {
        let _ = writeln!(out, "counter {}", token(&counter.name));
    }
    for u in &r.unavailable {
        // The reason runs to the end of the line.
        let reason = u.reason.replace(['\n', '\r'], " ");
        let _ = writeln!(out, "unavailable {} {reason}", token(&u.name));
    }
    let k = &r.checkpoints;
    let _ = writeln!(
        out,
        "checkpoints armed={} forked={} skipped_load={} skipped_slices={} fork_failed={} cost_ns={}",
        k.armed, k.forked, k.skipped_load, k.skipped_slices, k.fork_failed, k.cost_ns
    );
    for s in &r.slices {
        let cpu = s.cpu.map_or("-".to_owned(), |c| c.to_string());
        let pid = s.pid.map_or("-".to_owned(), |p| p.to_string());
        let _ = writeln!(
            out,
            "slice tid={} pid={pid} cpu={cpu} start_ts={} cpu_ns={} wall_ns={} end={} sites={}",
            s.tid,
            s.start_ts,
            s.cpu_ns,
            s.wall_ns,
            end_text(s.end),
            s.sites.len()
        );
        for site in &s.sites {
            let _ = write!(out, "site {} {}", site.site, site.calls);
            for (sum, square) in site.sums.iter().zip(&site.sums_of_squares) {
                let _ = write!(out, " {sum:?} {square:?}");
            }
            out.push('\n');
        }
    }
    // A file cut anywhere lacks this line.
    out.push_str("end\n");
    w.write_all(out.as_bytes())
}

/// The lines of a file with their numbers (from 1), and the error of the current one.
struct Lines<R> {
    input: BufReader<R>,
    number: usize,
}

impl<R: Read> Lines<R> {
    /// The next line without its newline; a line cut before its newline is an error, so that
    /// a file cut inside its last line is not taken for a whole one.
    fn next(&mut self) -> Result<String, SliceResultsError> {
        self.number += 1;
        let mut line = String::new();
        match self.input.read_line(&mut line) {
            Ok(0) => Err(self.error("the file ends early (no `end` line)")),
            Ok(_) => match line.strip_suffix('\n') {
                Some(line) => Ok(line.to_owned()),
                None => Err(self.error("the file ends inside a line")),
            },
            Err(e) => Err(SliceResultsError::Io(e.to_string())),
        }
    }

    /// Whether the input has nothing more.
    fn at_end(&mut self) -> Result<bool, SliceResultsError> {
        self.input
            .fill_buf()
            .map(<[u8]>::is_empty)
            .map_err(|e| SliceResultsError::Io(e.to_string()))
    }

    fn error(&self, message: impl Into<String>) -> SliceResultsError {
        SliceResultsError::Line {
            line: self.number,
            message: message.into(),
        }
    }
}

/// Splits `rest` into the values of `keys`, which must come in that order as `key=value`.
fn fields<'a>(rest: &'a str, keys: &[&str]) -> Result<Vec<&'a str>, String> {
    let tokens: Vec<&str> = rest.split(' ').collect();
    if tokens.len() != keys.len() {
        return Err(format!(
            "expected {} fields: {}",
            keys.len(),
            keys.join(" ")
        ));
    }
    tokens
        .iter()
        .zip(keys)
        .map(|(token, key)| {
            token
                .strip_prefix(key)
                .and_then(|t| t.strip_prefix('='))
                .ok_or_else(|| format!("expected `{key}=` in `{token}`"))
        })
        .collect()
}

fn number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{what}: `{text}` is not a valid number"))
}

/// Reads and checks a version-1 file.
pub fn read(r: impl Read) -> Result<SliceResults, SliceResultsError> {
    let mut lines = Lines {
        input: BufReader::new(r),
        number: 0,
    };
    let first = lines.next()?;
    if first != MAGIC {
        return Err(lines.error(format!("expected `{MAGIC}`, found `{first}`")));
    }
    let line = lines.next()?;
    let mode = match line.strip_prefix("mode ") {
        Some("slices") => DetailMode::Slices,
        Some("full") => DetailMode::Full,
        _ => return Err(lines.error("expected `mode slices` or `mode full`")),
    };
    let line = lines.next()?;
    let config = line
        .strip_prefix("config ")
        .ok_or_else(|| "expected `config`".to_owned())
        .and_then(parse_config)
        .map_err(|e| lines.error(e))?;

    let mut counters = Vec::new();
    let mut unavailable = Vec::new();
    let checkpoints = loop {
        let line = lines.next()?;
        let (head, rest) = line.split_once(' ').unwrap_or((&line, ""));
        match head {
            "counter" if !rest.is_empty() && !rest.contains(' ') => {
                counters.push(CounterColumn { name: rest.into() })
            }
            "unavailable" => {
                let (name, reason) = rest.split_once(' ').unwrap_or((rest, ""));
                if name.is_empty() {
                    return Err(lines.error("`unavailable` without a counter name"));
                }
                unavailable.push(UnavailableCounter {
                    name: name.into(),
                    reason: reason.into(),
                });
            }
            "checkpoints" => break parse_checkpoints(rest).map_err(|e| lines.error(e))?,
            _ => return Err(lines.error("expected `counter`, `unavailable` or `checkpoints`")),
        }
    };

    let mut slices = Vec::new();
    loop {
        let line = lines.next()?;
        if line == "end" {
            break;
        }
        let Some(rest) = line.strip_prefix("slice ") else {
            return Err(lines.error("expected `slice` or `end`"));
        };
        let (mut slice, n_sites) = parse_slice(rest).map_err(|e| lines.error(e))?;
        for _ in 0..n_sites {
            let line = lines.next()?;
            let site = parse_site(&line, counters.len()).map_err(|e| lines.error(e))?;
            slice.sites.push(site);
        }
        slices.push(slice);
    }
    // Anything after `end` means the file is not what this reader knows.
    if !lines.at_end()? {
        lines.number += 1;
        return Err(lines.error("text after `end`"));
    }
    Ok(SliceResults {
        mode,
        config,
        counters,
        unavailable,
        checkpoints,
        slices,
    })
}

fn parse_config(rest: &str) -> Result<SliceConfig, String> {
    let f = fields(
        rest,
        &[
            "load_threshold",
            "slice_threshold",
            "length_ns",
            "period_ns",
            "usable_cpus",
        ],
    )?;
    Ok(SliceConfig {
        load_threshold: number(f[0], "load_threshold")?,
        slice_threshold: number(f[1], "slice_threshold")?,
        length_ns: number(f[2], "length_ns")?,
        period_ns: number(f[3], "period_ns")?,
        usable_cpus: number(f[4], "usable_cpus")?,
    })
}

fn parse_checkpoints(rest: &str) -> Result<Checkpoints, String> {
    let f = fields(
        rest,
        &[
            "armed",
            "forked",
            "skipped_load",
            "skipped_slices",
            "fork_failed",
            "cost_ns",
        ],
    )?;
    Ok(Checkpoints {
        armed: number(f[0], "armed")?,
        forked: number(f[1], "forked")?,
        skipped_load: number(f[2], "skipped_load")?,
        skipped_slices: number(f[3], "skipped_slices")?,
        fork_failed: number(f[4], "fork_failed")?,
        cost_ns: number(f[5], "cost_ns")?,
    })
}

/// A `slice` line's fields, and how many `site` lines follow it.
fn parse_slice(rest: &str) -> Result<(Slice, usize), String> {
    let f = fields(
        rest,
        &[
            "tid", "pid", "cpu", "start_ts", "cpu_ns", "wall_ns", "end", "sites",
        ],
    )?;
    let optional = |text: &str, what: &str| match text {
        "-" => Ok(None),
        text => number(text, what).map(Some),
    };
    let slice = Slice {
        tid: number(f[0], "tid")?,
        pid: optional(f[1], "pid")?,
        cpu: optional(f[2], "cpu")?,
        start_ts: number(f[3], "start_ts")?,
        cpu_ns: number(f[4], "cpu_ns")?,
        wall_ns: number(f[5], "wall_ns")?,
        end: parse_end(f[6]).ok_or_else(|| format!("unknown end `{}`", f[6]))?,
        sites: Vec::new(),
    };
    Ok((slice, number(f[7], "sites")?))
}

fn parse_site(line: &str, columns: usize) -> Result<SiteStats, String> {
    let rest = line
        .strip_prefix("site ")
        .ok_or_else(|| "expected `site`".to_owned())?;
    let tokens: Vec<&str> = rest.split(' ').collect();
    if tokens.len() != 2 + 2 * columns {
        return Err(format!(
            "a site line has its id, its calls and a sum and a sum of squares per counter \
             ({} values), found {}",
            2 + 2 * columns,
            tokens.len()
        ));
    }
    let mut sums = Vec::with_capacity(columns);
    let mut sums_of_squares = Vec::with_capacity(columns);
    for pair in tokens[2..].chunks(2) {
        sums.push(number(pair[0], "sum")?);
        sums_of_squares.push(number(pair[1], "sum of squares")?);
    }
    Ok(SiteStats {
        site: number(tokens[0], "site")?,
        calls: number(tokens[1], "calls")?,
        sums,
        sums_of_squares,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> SliceResults {
        SliceResults {
            mode: DetailMode::Slices,
            config: SliceConfig {
                load_threshold: 1.0,
                slice_threshold: 3,
                length_ns: 10_000_000,
                period_ns: 20_000_000,
                usable_cpus: 4,
            },
            counters: vec![
                CounterColumn {
                    name: "task-clock".into(),
                },
                CounterColumn {
                    name: "page-faults".into(),
                },
            ],
            unavailable: vec![UnavailableCounter {
                name: "instructions".into(),
                reason: "perf_event_open: No such file or directory (os error 2)".into(),
            }],
            checkpoints: Checkpoints {
                armed: 12,
                forked: 5,
                skipped_load: 4,
                skipped_slices: 2,
                fork_failed: 1,
                cost_ns: 1_234_567,
            },
            slices: vec![
                Slice {
                    tid: 4242,
                    pid: Some(5151),
                    cpu: Some(3),
                    start_ts: 123_456_789_012,
                    cpu_ns: 10_000_321,
                    wall_ns: 10_400_000,
                    end: SliceEnd::ForbiddenSyscall { syscall: 257 },
                    sites: vec![SiteStats {
                        site: 7,
                        calls: 3,
                        sums: vec![0.1 + 0.2, 48.0],
                        sums_of_squares: vec![1e-300, f64::MAX],
                    }],
                },
                Slice {
                    tid: 4243,
                    pid: None,
                    cpu: None,
                    start_ts: 0,
                    cpu_ns: 0,
                    wall_ns: 0,
                    end: SliceEnd::Blocked,
                    sites: vec![],
                },
            ],
        }
    }

    fn text(r: &SliceResults) -> Vec<u8> {
        let mut out = Vec::new();
        write(&mut out, r).unwrap();
        out
    }

    #[test]
    fn results_round_trip_exactly() {
        let r = sample();
        assert_eq!(read(&text(&r)[..]), Ok(r.clone()));
        for end in [
            SliceEnd::Completed,
            SliceEnd::Timeout,
            SliceEnd::Killed,
            SliceEnd::Full,
            SliceEnd::ForbiddenSyscall { syscall: -1 },
        ] {
            let mut r = r.clone();
            r.mode = DetailMode::Full;
            r.slices[1].end = end;
            assert_eq!(read(&text(&r)[..]), Ok(r));
        }
    }

    #[test]
    fn errors_name_the_line() {
        let good = String::from_utf8(text(&sample())).unwrap();
        let bad = good.replace("sites=1", "sites=2");
        assert_eq!(
            read(bad.as_bytes()),
            Err(SliceResultsError::Line {
                line: 10,
                message: "expected `site`".into()
            })
        );
        let err = read(&b"parprof-slices 2\n"[..]).unwrap_err();
        assert!(
            matches!(err, SliceResultsError::Line { line: 1, .. }),
            "{err}"
        );
    }

    proptest! {
        #[test]
        fn a_cut_file_is_an_error(cut in 0usize..1000) {
            let bytes = text(&sample());
            let cut = cut % bytes.len();
            prop_assert!(read(&bytes[..cut]).is_err());
        }

        #[test]
        fn a_corrupted_file_never_panics(at in 0usize..1000, byte in any::<u8>()) {
            let mut bytes = text(&sample());
            let at = at % bytes.len();
            bytes[at] = byte;
            // Some changes keep the file valid (a digit for another); none may panic.
            let _ = read(&bytes[..]);
        }

        #[test]
        fn arbitrary_text_never_panics(noise in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut bytes = text(&sample());
            let at = noise.len() % bytes.len();
            bytes.splice(at..at, noise);
            let _ = read(&bytes[..]);
        }
    }
}
