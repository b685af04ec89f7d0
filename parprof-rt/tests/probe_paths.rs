//! `#[probe]` with recording on: every way out of a probed function records exactly one exit,
//! nested correctly, under the expected site name.
//!
//! One test function runs every case in order, because the runtime reads `PARPROF_OUT` once
//! per process and this file's events must be the only ones in the trace.
#![cfg(not(feature = "off"))]

use parprof_rt::probe;
use parprof_rt::trace::{Chunk, Completeness, EventKind, TraceReader};
use std::collections::HashMap;
use std::num::ParseIntError;

#[probe]
fn checked_div(a: u32, b: u32) -> Option<u32> {
    if b == 0 {
        return None;
    }
    Some(a / b)
}

#[probe]
fn parse_double(s: &str) -> Result<i32, ParseIntError> {
    let x: i32 = s.parse()?;
    Ok(x * 2)
}

// The panic unwinds through two probed frames.
#[probe]
fn explode() {
    fuse();
}

#[probe]
fn fuse() {
    panic!("expected by the test");
}

#[probe]
fn countdown(n: u32) -> u32 {
    if n <= 1 { n } else { 1 + countdown(n - 1) }
}

struct Grid<T> {
    cells: Vec<T>,
}

#[probe]
impl<T: Copy + std::ops::Add<Output = T>> Grid<T> {
    fn step(&mut self, d: T) {
        for c in &mut self.cells {
            *c = *c + d;
        }
    }

    #[probe(skip)]
    fn len(&self) -> usize {
        self.cells.len()
    }

    #[probe(name = "custom::sum")]
    fn sum(&self, zero: T) -> T {
        self.cells.iter().fold(zero, |a, &b| a + b)
    }

    // Without receiver: the impl block still names the type.
    fn filled(x: T, n: usize) -> Self {
        Grid { cells: vec![x; n] }
    }
}

impl std::fmt::Display for Grid<u8> {
    // Annotated alone: the runtime names the type from `type_name::<Self>()`.
    #[probe]
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.cells)
    }
}

impl Grid<u8> {
    // Annotated alone and without receiver: nothing names the type.
    #[probe]
    fn empty() -> Self {
        Grid { cells: Vec::new() }
    }
}

/// (kind, site name) of every event on one thread, in order.
type Timeline = Vec<(EventKind, String)>;

/// Every site's (file, line) by name, and the timeline of every thread by tid.
fn read_trace(path: &std::path::Path) -> (HashMap<String, (String, u32)>, HashMap<u32, Timeline>) {
    let file = std::fs::File::open(path).expect("trace file exists");
    let mut reader = TraceReader::new(file).expect("trace has a valid header");
    let mut names = HashMap::new();
    let mut locations = HashMap::new();
    let mut raw = Vec::new();
    while let Some(chunk) = reader.next_chunk().expect("trace is readable") {
        match chunk {
            Chunk::Site(site) => {
                locations.insert(site.name.clone(), (site.file, site.line));
                names.insert(site.id, site.name);
            }
            Chunk::Events { tid, events } => raw.extend(events.into_iter().map(|e| (tid, e))),
            _ => {}
        }
    }
    assert_eq!(reader.completeness(), Some(&Completeness::Complete));
    let mut threads: HashMap<u32, Timeline> = HashMap::new();
    let mut last_ts = HashMap::new();
    for (tid, event) in raw {
        let previous = last_ts.insert(tid, event.ts).unwrap_or(0);
        assert!(
            event.ts >= previous,
            "timestamps of thread {tid} go backwards"
        );
        let name = names
            .get(&event.id)
            .unwrap_or_else(|| panic!("event of unregistered site {}", event.id));
        threads
            .entry(tid)
            .or_default()
            .push((event.kind(), name.clone()));
    }
    (locations, threads)
}

/// The line of this file that starts with `start` (after indentation).
fn line_of(start: &str) -> u32 {
    let source = include_str!("probe_paths.rs");
    let index = source
        .lines()
        .position(|l| l.trim_start().starts_with(start))
        .expect("line exists");
    index as u32 + 1
}

#[test]
fn every_exit_path_records_one_exit() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: this file's only test runs alone and the runtime has not started yet (it reads
    // the variable once, in the next line), so nothing reads the environment concurrently.
    unsafe { std::env::set_var("PARPROF_OUT", dir.path()) };
    assert!(parprof_rt::is_enabled());

    assert_eq!(checked_div(1, 0), None);
    assert!(parse_double("not a number").is_err());
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    assert!(std::panic::catch_unwind(explode).is_err());
    std::panic::set_hook(hook);
    assert_eq!(countdown(5), 5);
    let mut grid = Grid::filled(1.5f32, 2);
    grid.step(1.0);
    assert_eq!(grid.len(), 2);
    assert_eq!(grid.sum(0.0), 5.0);
    assert_eq!(Grid::<u8>::empty().len(), 0);
    assert_eq!(Grid { cells: vec![1u8] }.to_string(), "[1]");

    // `shutdown` rather than `flush`: it returns only once the writer has written everything
    // and the end chunk to the file.
    parprof_rt::shutdown();
    let (locations, threads) = read_trace(
        &dir.path()
            .join(parprof_rt::trace_file_name(std::process::id())),
    );
    assert_eq!(
        threads.len(),
        1,
        "only the test thread records: {threads:?}"
    );
    let timeline = threads.into_values().next().unwrap();

    let pair = |name: &str| {
        vec![
            (EventKind::Enter, format!("probe_paths::{name}")),
            (EventKind::Exit, format!("probe_paths::{name}")),
        ]
    };
    let mut expected: Timeline = Vec::new();
    expected.extend(pair("checked_div"));
    expected.extend(pair("parse_double"));
    expected.extend([
        (EventKind::Enter, "probe_paths::explode".to_owned()),
        (EventKind::Enter, "probe_paths::fuse".to_owned()),
        (EventKind::Exit, "probe_paths::fuse".to_owned()),
        (EventKind::Exit, "probe_paths::explode".to_owned()),
    ]);
    expected.extend((0..5).map(|_| (EventKind::Enter, "probe_paths::countdown".to_owned())));
    expected.extend((0..5).map(|_| (EventKind::Exit, "probe_paths::countdown".to_owned())));
    expected.extend(pair("Grid::filled"));
    expected.extend(pair("Grid::step"));
    expected.extend([
        (EventKind::Enter, "custom::sum".to_owned()),
        (EventKind::Exit, "custom::sum".to_owned()),
    ]);
    expected.extend(pair("empty"));
    expected.extend(pair("Grid::fmt"));
    assert_eq!(timeline, expected);

    // Each function of an impl block has its own line, not the line of the block's attribute.
    for (name, start) in [
        ("probe_paths::Grid::step", "fn step("),
        ("probe_paths::Grid::filled", "fn filled("),
    ] {
        let (file, line) = &locations[name];
        assert!(file.ends_with("probe_paths.rs"), "{name} is in {file}");
        assert_eq!(*line, line_of(start), "line of {name}");
    }
}
