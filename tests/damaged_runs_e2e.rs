//! `cargo parprof report` on damaged copies of a real run folder: the trace (`trace-*.ppt`)
//! and the records (`records.ppr`) cut short, with a byte flipped, and with a field changed
//! inside a chunk whose checksum is made right again (what a bug of the writer, not of the
//! disk, would leave: an absurd time, a count of u64::MAX). Every damaged run must end with a
//! report or a clear error — never a panic, never a hang.
//!
//! Prints the outcome counts; the mutations are the same on every run (a fixed seed).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A report of the quick start takes about a second here; a damaged one that runs for this
/// long hangs.
const HANG_AFTER: Duration = Duration::from_secs(60);
/// Mutations per file and kind.
const PER_KIND: usize = 6;

/// A small deterministic generator (xorshift64*), so that a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    Cut,
    Flip,
    /// A byte of a chunk's payload changed, the chunk's checksum made right.
    Field,
    /// Eight bytes of a payload set to 0xFF (u64::MAX where a time or a count was), checksum
    /// made right.
    Absurd,
}

/// The chunks of a file framed as `magic (8) version (4) (kind u32, len u32, payload, crc32)*`:
/// `(start, payload start, payload end)` of each whole chunk.
fn chunks(bytes: &[u8]) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let mut at = 12;
    while at + 12 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        let end = at + 8 + len;
        if end + 4 > bytes.len() {
            break;
        }
        out.push((at, at + 8, end));
        at = end + 4;
    }
    out
}

fn damage(bytes: &mut Vec<u8>, how: Damage, rng: &mut Rng) {
    match how {
        Damage::Cut => bytes.truncate(rng.below(bytes.len())),
        Damage::Flip => {
            let at = rng.below(bytes.len());
            bytes[at] ^= 1 << rng.below(8);
        }
        Damage::Field | Damage::Absurd => {
            let chunks: Vec<_> = chunks(bytes)
                .into_iter()
                .filter(|&(_, p0, p1)| p1 - p0 >= 8)
                .collect();
            let Some(&(start, p0, p1)) = chunks.get(rng.below(chunks.len())) else {
                return;
            };
            if let Damage::Field = how {
                let at = p0 + rng.below(p1 - p0);
                bytes[at] = rng.next() as u8;
            } else {
                let at = p0 + rng.below(p1 - p0 - 7);
                bytes[at..at + 8].fill(0xFF);
            }
            let crc = crc32fast::hash(&bytes[start..p1]);
            bytes[p1..p1 + 4].copy_from_slice(&crc.to_le_bytes());
        }
    }
}

/// A copy of the run folder `from` with `file` damaged.
fn damaged_copy(from: &Path, file: &str, how: Damage, rng: &mut Rng) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary directory");
    for entry in std::fs::read_dir(from).expect("run folder").flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".ppt") || name == "records.ppr" {
            let mut bytes = std::fs::read(entry.path()).unwrap();
            if name.starts_with(file) {
                damage(&mut bytes, how, rng);
            }
            std::fs::write(dir.path().join(&*name), bytes).unwrap();
        }
    }
    dir
}

#[derive(Debug, Default)]
struct Outcomes {
    reported: usize,
    refused: usize,
    panics: Vec<String>,
    hangs: Vec<String>,
}

/// `cargo-parprof report <dir>`, killed after [`HANG_AFTER`].
fn report(parprof: &PathBuf, dir: &Path, what: &str, outcomes: &mut Outcomes) {
    let log = dir.join("stderr.txt");
    let mut child = Command::new(parprof)
        .args(["parprof", "report"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("run cargo-parprof report");
    let began = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if began.elapsed() > HANG_AFTER {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    match status {
        None => outcomes.hangs.push(what.to_owned()),
        // An error exits 101 too (as cargo does): a panic is told by its message.
        Some(s) if stderr.contains("panicked at") || s.code().is_none() => {
            outcomes.panics.push(format!("{what}: {s:?}\n{stderr}"))
        }
        Some(s) if s.success() => outcomes.reported += 1,
        Some(_) => {
            assert!(
                stderr.contains("parprof") || stderr.contains("error"),
                "{what}: an error says what went wrong: {stderr}"
            );
            outcomes.refused += 1;
        }
    }
}

#[test]
fn damaged_run_folders_are_reported_or_refused_never_panic_or_hang() {
    let run = common::profile_example("quickstart", &[], &[]);
    let parprof = common::parprof_binary();
    let _machine = common::exclusive();
    let mut rng = Rng(0x5EED_0FDA_4A6E);
    let mut outcomes = Outcomes::default();
    for file in ["trace-", "records.ppr"] {
        for how in [Damage::Cut, Damage::Flip, Damage::Field, Damage::Absurd] {
            for i in 0..PER_KIND {
                let copy = damaged_copy(run.dir.path(), file, how, &mut rng);
                report(
                    &parprof,
                    copy.path(),
                    &format!("{file} {how:?} #{i}"),
                    &mut outcomes,
                );
            }
        }
    }
    eprintln!(
        "damaged runs: {} reported, {} refused with an error, {} panics, {} hangs",
        outcomes.reported,
        outcomes.refused,
        outcomes.panics.len(),
        outcomes.hangs.len()
    );
    assert!(outcomes.panics.is_empty(), "{:#?}", outcomes.panics);
    assert!(outcomes.hangs.is_empty(), "{:#?}", outcomes.hangs);
}
