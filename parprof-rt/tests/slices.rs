//! Slices and full detail on real processes: this file's binary re-executes itself as the
//! profiled program (`SLICES_TEST_ROLE`), with `PARPROF_OUT` and `PARPROF_SLICES` or
//! `PARPROF_DETAIL` set, and checks its output and the results file.

use parprof_rt::probe;
use parprof_rt::slice_results::{self, DetailMode, SliceEnd, SliceResults};
use parprof_rt::trace::{Chunk, TraceReader};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

/// Fresh pages each call touches.
const PAGES: usize = 32;

/// Maps `PAGES` fresh pages, writes one byte in each, unmaps them: `PAGES` page faults.
#[probe]
fn touch_pages() -> u64 {
    let len = PAGES * 4096;
    // SAFETY: a private anonymous mapping, written within its bounds, then unmapped.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        let p = p.cast::<u8>();
        let mut sum = 0u64;
        for page in 0..PAGES {
            p.add(page * 4096).write_volatile(page as u8 | 1);
            sum += u64::from(p.add(page * 4096).read_volatile());
        }
        libc::munmap(p.cast(), len);
        sum
    }
}

/// About `us` microseconds of CPU work, in probed pieces.
#[probe]
fn compute(us: u64) -> u64 {
    let until = Instant::now() + Duration::from_micros(us);
    let mut h = 0u64;
    while Instant::now() < until {
        h = small(h);
    }
    h
}

#[probe]
fn small(x: u64) -> u64 {
    (0..200).fold(x, |h, i| {
        (h ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)
    })
}

/// The page program: `threads` threads, each `steps` steps of touch_pages and some work, a
/// line on stdout and a line appended to `file` per step.
fn pages_role(threads: usize, steps: usize, file: &Path) {
    let file = Arc::new(Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .unwrap(),
    ));
    let run = move |t: usize, file: Arc<Mutex<std::fs::File>>| {
        for step in 0..steps {
            std::hint::black_box(touch_pages());
            std::hint::black_box(compute(300));
            println!("t{t} step {step}");
            writeln!(file.lock().unwrap(), "file t{t} step {step}").unwrap();
        }
    };
    if threads == 1 {
        run(0, file);
    } else {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let file = file.clone();
                std::thread::spawn(move || run(t, file))
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}

/// The blocking program: each round computes, then waits in a probed call until a helper
/// thread (which does not exist in a slice) says go.
fn blocking_role(rounds: usize) {
    let pair = Arc::new((Mutex::new(0usize), Condvar::new()));
    let (ask, asked) = mpsc::channel::<usize>();
    let helper = {
        let pair = pair.clone();
        std::thread::spawn(move || {
            for round in asked {
                std::thread::sleep(Duration::from_millis(15));
                *pair.0.lock().unwrap() = round + 1;
                pair.1.notify_all();
            }
        })
    };
    for round in 0..rounds {
        std::hint::black_box(compute(4_000));
        ask.send(round).unwrap();
        wait_for(&pair, round + 1);
        println!("round {round}");
    }
    drop(ask);
    helper.join().unwrap();
}

#[probe]
fn wait_for(pair: &(Mutex<usize>, Condvar), value: usize) {
    let mut v = pair.0.lock().unwrap();
    while *v < value {
        v = pair.1.wait(v).unwrap();
    }
}

/// A `MAP_SHARED` mapping of `len` bytes of `fd` (-1: anonymous), read and write.
fn map_shared(fd: i32, len: usize) -> *mut u64 {
    let flags = if fd < 0 {
        libc::MAP_SHARED | libc::MAP_ANONYMOUS
    } else {
        libc::MAP_SHARED
    };
    // SAFETY: a fresh mapping, checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    p.cast()
}

/// One step of the shared-memory program: some work, then a bump of a counter in a shared
/// file mapping, one in shared anonymous memory, and one in a file mapped here from an
/// inherited descriptor.
#[probe]
fn bump(file: *mut u64, anon: *mut u64, inherited: i32) {
    std::hint::black_box(compute(2_000));
    // SAFETY: the mappings are live and 8-byte aligned; one thread writes them.
    unsafe {
        file.write_volatile(file.read_volatile() + 1);
        anon.write_volatile(anon.read_volatile() + 1);
        let mapped = map_shared(inherited, 4096);
        mapped.write_volatile(mapped.read_volatile() + 1);
        libc::munmap(mapped.cast(), 4096);
    }
}

/// The shared-memory program: `steps` bumps, then the counters it sees (the files' are read
/// again by the test).
fn shared_role(steps: usize, file: &Path) {
    let open = |name: &str| {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(true)
            .open(file.with_extension(name))
            .unwrap();
        f.set_len(4096).unwrap();
        f
    };
    let (counted, inherited) = (open("counted"), open("inherited"));
    use std::os::fd::AsRawFd;
    let file_counter = map_shared(counted.as_raw_fd(), 4096);
    let anon_counter = map_shared(-1, 4096);
    for _ in 0..steps {
        bump(file_counter, anon_counter, inherited.as_raw_fd());
    }
    // SAFETY: the mapping is live.
    println!("anon={}", unsafe { anon_counter.read_volatile() });
}

/// One step of the protecting program: some work, then `pkey_mprotect` of `page` back to
/// read and write (no key) — nothing changes in the program, but in a slice a shared page is
/// read-only — and a bump of the counter in it.
#[probe]
fn reprotect(page: *mut u64) {
    std::hint::black_box(compute(2_000));
    // SAFETY: `page` is a live mapping of one page; the call changes its protection only.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pkey_mprotect,
            page,
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            -1,
        )
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    // SAFETY: the page is live, writable and 8-byte aligned; one thread writes it.
    unsafe { page.write_volatile(page.read_volatile() + 1) };
}

/// The protecting program: `steps` steps on a private page (`shared` 0) or a shared one (1),
/// then the counter.
fn protect_role(steps: usize, shared: bool) {
    let page = if shared {
        map_shared(-1, 4096)
    } else {
        // SAFETY: a fresh private mapping, checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p.cast()
    };
    for _ in 0..steps {
        reprotect(page);
    }
    // SAFETY: the mapping is live.
    println!("count={}", unsafe { page.read_volatile() });
}

/// The reaping program: `rounds` times, probed work (where slices fork), then a child of its
/// own, reaped with `wait()` (any child); prints how many waits returned another pid.
fn reaper_role(rounds: usize) {
    let mut strangers = 0;
    for _ in 0..rounds {
        std::hint::black_box(compute(3_000));
        // SAFETY: the child only exits.
        let child = unsafe { libc::fork() };
        if child == 0 {
            // SAFETY: ends the child at once, running nothing of the parent's.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: waits for any child of this process.
        let reaped = unsafe { libc::wait(&mut status) };
        if reaped != child {
            strangers += 1;
            // SAFETY: still this process's own child, to reap.
            unsafe { libc::waitpid(child, &mut status, 0) };
        }
    }
    println!("strangers={strangers}");
}

struct Run {
    stdout: String,
    results: SliceResults,
    /// Site name → id, from the trace.
    sites: HashMap<String, u32>,
    dir: tempfile::TempDir,
}

/// Runs of a role taken when every slice child starved: see [`run`].
const ATTEMPTS: usize = 3;

/// Runs the program in `role` with `env`. Slices run at SCHED_IDLE, on CPUs no other program
/// wants: beside CPU-bound programs a slice child may get no CPU before the program ends and
/// be killed having run nothing, a run that says nothing of slices. Such a run is taken again,
/// up to [`ATTEMPTS`] runs in all.
fn run(role: &str, env: &[(&str, &str)]) -> Run {
    let starved = |r: &Run| {
        !r.results.slices.is_empty()
            && r.results
                .slices
                .iter()
                .all(|s| s.end == SliceEnd::Killed && s.cpu_ns == 0)
    };
    let mut r = run_once(role, env);
    for _ in 1..ATTEMPTS {
        if !starved(&r) {
            break;
        }
        eprintln!("{role}: every slice child was killed before it ran (no idle CPU): taken again");
        std::thread::sleep(std::time::Duration::from_millis(200));
        r = run_once(role, env);
    }
    r
}

fn run_once(role: &str, env: &[(&str, &str)]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env("SLICES_TEST_ROLE", role)
        .env("SLICES_TEST_FILE", dir.path().join("lines.txt"))
        .env("PARPROF_OUT", &out)
        .env_remove("PARPROF_SLICES")
        .env_remove("PARPROF_DETAIL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let output = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{role}: {:?}\n{stderr}",
        output.status
    );
    assert!(!stderr.contains("parprof:"), "{role}: {stderr}");
    let pid_file = |prefix: &str| {
        std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix}* in {}", out.display()))
            .path()
    };
    let results =
        slice_results::read(std::fs::File::open(pid_file(slice_results::FILE_PREFIX)).unwrap())
            .unwrap();
    let mut sites = HashMap::new();
    let mut reader = TraceReader::new(std::fs::File::open(pid_file("trace-")).unwrap()).unwrap();
    while let Ok(Some(chunk)) = reader.next_chunk() {
        if let Chunk::Site(site) = chunk {
            let short = site
                .name
                .rsplit("::")
                .next()
                .unwrap_or(&site.name)
                .to_owned();
            sites.insert(short, site.id);
        }
    }
    Run {
        stdout: String::from_utf8(output.stdout).unwrap(),
        results,
        sites,
        dir,
    }
}

/// Every expected line exactly once, nothing else.
fn assert_lines_once(text: &str, expected: impl Iterator<Item = String>, what: &str) {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for line in text.lines() {
        *counts.entry(line).or_default() += 1;
    }
    let mut n = 0;
    for line in expected {
        assert_eq!(counts.get(line.as_str()), Some(&1), "{what}: `{line}`");
        n += 1;
    }
    assert_eq!(counts.len(), n, "{what}: unexpected lines");
}

/// Mean page faults per call of `site` over the entries, and the calls.
fn page_fault_mean(r: &Run, site: &str) -> (f64, u64) {
    let column = r
        .results
        .counters
        .iter()
        .position(|c| c.name == "page-faults")
        .expect("a page-faults column");
    let id = r.sites[site];
    let (mut sum, mut calls) = (0.0, 0);
    for s in r
        .results
        .slices
        .iter()
        .flat_map(|s| &s.sites)
        .filter(|s| s.site == id)
    {
        sum += s.sums[column];
        calls += s.calls;
    }
    (sum / calls.max(1) as f64, calls)
}

fn pages_with_slices() {
    let steps = 1500;
    let r = run(
        "pages",
        &[
            ("SLICES_TEST_ARGS", &format!("1 {steps}")),
            (
                "PARPROF_SLICES",
                "period_ns=10000000,length_ns=5000000,load=1.0",
            ),
        ],
    );
    assert_lines_once(
        &r.stdout,
        (0..steps).map(|s| format!("t0 step {s}")),
        "stdout",
    );
    let file = std::fs::read_to_string(r.dir.path().join("lines.txt")).unwrap();
    assert_lines_once(
        &file,
        (0..steps).map(|s| format!("file t0 step {s}")),
        "file",
    );
    let res = &r.results;
    assert_eq!(res.mode, DetailMode::Slices);
    let completed = res
        .slices
        .iter()
        .filter(|s| s.end == SliceEnd::Completed)
        .count();
    let (mean, calls) = page_fault_mean(&r, "touch_pages");
    let mut ends: HashMap<String, usize> = HashMap::new();
    for s in &res.slices {
        *ends.entry(format!("{:?}", s.end)).or_default() += 1;
    }
    eprintln!(
        "pages: checkpoints {:?}, {} slices {ends:?}, touch_pages: {calls} calls, \
         {mean:.3} page faults per call (truth {PAGES}); unavailable {:?}",
        res.checkpoints,
        res.slices.len(),
        res.unavailable
    );
    assert!(completed >= 1, "{res:#?}");
    assert!(calls >= 1);
    assert!((mean - PAGES as f64).abs() <= 0.15 * PAGES as f64, "{mean}");
    assert_eq!(res.checkpoints.forked as usize, res.slices.len());
}

fn blocking_slices() {
    let rounds = 20;
    let r = run(
        "blocking",
        &[
            ("SLICES_TEST_ARGS", &rounds.to_string()),
            (
                "PARPROF_SLICES",
                "period_ns=2000000,length_ns=20000000,load=1.0,max=1",
            ),
        ],
    );
    assert_lines_once(
        &r.stdout,
        (0..rounds).map(|s| format!("round {s}")),
        "stdout",
    );
    let ends: Vec<SliceEnd> = r.results.slices.iter().map(|s| s.end).collect();
    eprintln!(
        "blocking: checkpoints {:?}, ends {ends:?}",
        r.results.checkpoints
    );
    assert!(
        ends.iter()
            .any(|e| matches!(e, SliceEnd::Blocked | SliceEnd::Timeout)),
        "{ends:?}"
    );
    // A slice that blocks never gets to print: the parent's output is whole (checked above).
    assert!(
        ends.iter().all(|e| matches!(
            e,
            SliceEnd::Blocked | SliceEnd::Timeout | SliceEnd::Completed
        )),
        "{ends:?}"
    );
}

/// Slices never write the program's shared memory: three counters bumped in probed calls
/// while slices run ahead end exactly at the number of calls.
fn shared_memory_slices() {
    let steps = 300;
    let r = run(
        "shared",
        &[
            ("SLICES_TEST_ARGS", &steps.to_string()),
            (
                "PARPROF_SLICES",
                "period_ns=5000000,length_ns=20000000,load=1.0",
            ),
        ],
    );
    let counter = |name: &str| {
        let bytes = std::fs::read(r.dir.path().join(format!("lines.{name}"))).unwrap();
        u64::from_ne_bytes(bytes[..8].try_into().unwrap())
    };
    let ends: Vec<SliceEnd> = r.results.slices.iter().map(|s| s.end).collect();
    eprintln!(
        "shared: checkpoints {:?}, ends {ends:?}",
        r.results.checkpoints
    );
    assert!(
        !ends.is_empty(),
        "no slice ran: {:?}",
        r.results.checkpoints
    );
    assert_eq!(r.stdout.trim(), format!("anon={steps}"));
    assert_eq!(counter("counted"), steps as u64);
    assert_eq!(counter("inherited"), steps as u64);
}

/// `pkey_mprotect` is checked as `mprotect` is: on the program's private memory a slice goes
/// on; making a shared mapping writable ends it as a forbidden call, and the program's
/// counter there stays exact.
fn pkey_mprotect_slices() {
    let steps = 300;
    let pkey_mprotect = SliceEnd::ForbiddenSyscall {
        syscall: libc::SYS_pkey_mprotect,
    };
    for shared in [false, true] {
        let r = run(
            "protect",
            &[
                ("SLICES_TEST_ARGS", &format!("{steps} {}", u8::from(shared))),
                (
                    "PARPROF_SLICES",
                    "period_ns=5000000,length_ns=20000000,load=1.0",
                ),
            ],
        );
        let ends: Vec<SliceEnd> = r.results.slices.iter().map(|s| s.end).collect();
        eprintln!("protect (shared: {shared}): ends {ends:?}");
        assert_eq!(r.stdout.trim(), format!("count={steps}"));
        assert!(
            !ends.is_empty(),
            "no slice ran: {:?}",
            r.results.checkpoints
        );
        if shared {
            assert!(ends.contains(&pkey_mprotect), "{ends:?}");
        } else {
            assert!(!ends.contains(&pkey_mprotect), "{ends:?}");
            assert!(
                ends.iter()
                    .any(|e| matches!(e, SliceEnd::Completed | SliceEnd::Timeout)),
                "{ends:?}"
            );
        }
    }
}

/// The program's `wait()` never returns a slice: slices are children without an exit signal.
fn wait_never_sees_slices() {
    let rounds = 40;
    let r = run(
        "reaper",
        &[
            ("SLICES_TEST_ARGS", &rounds.to_string()),
            (
                "PARPROF_SLICES",
                "period_ns=2000000,length_ns=20000000,load=1.0",
            ),
        ],
    );
    eprintln!("reaper: checkpoints {:?}", r.results.checkpoints);
    assert!(
        r.results.checkpoints.forked >= 1,
        "{:?}",
        r.results.checkpoints
    );
    assert_eq!(r.stdout.trim(), "strangers=0");
}

fn pages_full_detail() {
    let steps = 300;
    let r = run(
        "pages",
        &[
            ("SLICES_TEST_ARGS", &format!("2 {steps}")),
            ("PARPROF_DETAIL", "full"),
        ],
    );
    let expected = (0..2).flat_map(|t| (0..steps).map(move |s| format!("t{t} step {s}")));
    assert_lines_once(&r.stdout, expected, "stdout");
    let res = &r.results;
    assert_eq!(res.mode, DetailMode::Full);
    // One entry per recording thread: the main thread (attached at start-up, it calls no
    // probe here) and the two workers.
    assert_eq!(res.slices.len(), 3, "{res:#?}");
    assert!(res.slices.iter().all(|s| s.end == SliceEnd::Full));
    let tids: std::collections::HashSet<u32> = res.slices.iter().map(|s| s.tid).collect();
    assert_eq!(tids.len(), 3);
    assert_eq!(res.slices.iter().filter(|s| !s.sites.is_empty()).count(), 2);
    let (mean, calls) = page_fault_mean(&r, "touch_pages");
    eprintln!("full: touch_pages: {calls} calls, {mean:.3} page faults per call (truth {PAGES})");
    assert_eq!(calls, 2 * steps as u64);
    assert!((mean - PAGES as f64).abs() <= 0.15 * PAGES as f64, "{mean}");
}

fn main() {
    if let Ok(role) = std::env::var("SLICES_TEST_ROLE") {
        let args: Vec<usize> = std::env::var("SLICES_TEST_ARGS")
            .unwrap_or_default()
            .split_whitespace()
            .map(|a| a.parse().unwrap())
            .collect();
        let file = std::env::var("SLICES_TEST_FILE").unwrap();
        match role.as_str() {
            "pages" => pages_role(args[0], args[1], Path::new(&file)),
            "blocking" => blocking_role(args[0]),
            "shared" => shared_role(args[0], Path::new(&file)),
            "reaper" => reaper_role(args[0]),
            "protect" => protect_role(args[0], args[1] == 1),
            _ => panic!("unknown role {role}"),
        }
        return;
    }
    if cfg!(feature = "off") {
        return;
    }
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let tests: [(&str, fn()); 6] = [
        ("pages_with_slices", pages_with_slices),
        ("blocking_slices", blocking_slices),
        ("shared_memory_slices", shared_memory_slices),
        ("pkey_mprotect_slices", pkey_mprotect_slices),
        ("wait_never_sees_slices", wait_never_sees_slices),
        ("pages_full_detail", pages_full_detail),
    ];
    for (name, test) in tests {
        if filter.as_deref().is_none_or(|f| name.contains(f)) {
            eprintln!("test {name} ...");
            test();
            eprintln!("test {name} ok");
        }
    }
}
