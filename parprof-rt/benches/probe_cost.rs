//! Probe cost, printed as figures: `cargo bench -p parprof-rt --bench probe_cost`.
//!
//! - ns per enabled probe pair on 1 and 2 threads, next to two bare clock reads (goal:
//!   ≤ 1.3 × two bare reads + 2 ns): with the default sampling of hot sites (this loop is hot:
//!   one call in 64 recorded) and with every call recorded (`PARPROF_SAMPLING=off`);
//! - beside them, in the same process, a span of `tracy-client` and a scope of `puffin` around
//!   the same function (goal: parprof's pair at most half of each);
//! - ns per disabled probe pair (no `PARPROF_OUT`; goal ≤ 1 ns) over an unprobed call;
//! - sustained events/s into the trace file, and memory held.
//!
//! The runtime reads `PARPROF_OUT` once per process, so each mode runs in a child process.

use parprof_rt::clock;
use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

/// Pairs per burst: 2 × BURST events stay below half a thread's ring, so no event waits
/// while timing; the writer drains between bursts.
const BURST: u64 = 30_000;
const BURSTS: usize = 60;

#[parprof_rt::probe]
#[inline(never)]
fn probed() {
    black_box(());
}

#[inline(never)]
fn plain() {
    black_box(());
}

#[inline(never)]
fn in_tracy_span() {
    let _span = tracy_client::span!("probed");
    black_box(());
}

#[inline(never)]
fn in_puffin_scope() {
    puffin::profile_scope!("probed");
    black_box(());
}

/// The fastest burst's ns per iteration; `between` runs after each burst, untimed (the
/// profilers' own housekeeping: parprof's writer, puffin's frame).
fn best_ns_per_iteration_then(mut burst: impl FnMut(), mut between: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..BURSTS {
        let start = Instant::now();
        burst();
        best = best.min(start.elapsed().as_nanos() as f64 / BURST as f64);
        between();
    }
    best
}

fn best_ns_per_iteration(burst: impl FnMut()) -> f64 {
    best_ns_per_iteration_then(burst, parprof_rt::flush)
}

/// A `tracy-client` span and a `puffin` scope around the same empty function, in ns.
fn other_profilers_ns() -> (f64, f64) {
    let _client = tracy_client::Client::start();
    let tracy = best_ns_per_iteration(|| (0..BURST).for_each(|_| in_tracy_span()));
    puffin::set_scopes_on(true);
    let puffin = best_ns_per_iteration_then(
        || (0..BURST).for_each(|_| in_puffin_scope()),
        || puffin::GlobalProfiler::lock().new_frame(),
    );
    (tracy, puffin)
}

fn probe_pair_ns() -> f64 {
    best_ns_per_iteration(|| (0..BURST).for_each(|_| probed()))
}

fn bare_reads_ns() -> f64 {
    best_ns_per_iteration(|| {
        for _ in 0..BURST {
            black_box(clock::now());
            black_box(clock::now());
        }
    })
}

fn plain_call_ns() -> f64 {
    best_ns_per_iteration(|| (0..BURST).for_each(|_| plain()))
}

fn on_threads(n: usize, f: fn() -> f64) -> Vec<f64> {
    let barrier = std::sync::Barrier::new(n);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    f()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn vm_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn sustained(dir: &std::path::Path) {
    let trace = dir.join(parprof_rt::trace_file_name(std::process::id()));
    let before = std::fs::metadata(&trace).map_or(0, |m| m.len());
    let start = Instant::now();
    let mut pairs = 0u64;
    while start.elapsed() < Duration::from_secs(1) {
        for _ in 0..1000 {
            probed();
        }
        pairs += 1000;
    }
    parprof_rt::flush();
    let secs = start.elapsed().as_secs_f64();
    let written = std::fs::metadata(&trace).map_or(0, |m| m.len()) - before;
    println!(
        "  sustained (1 thread, 1 s): {:.1} M probe calls/s, {:.1} MB/s written to the trace \
         (a full buffer makes the thread wait for the writer, an accounted stall; nothing is dropped); \
         memory: VmRSS {} KiB, VmHWM {} KiB",
        pairs as f64 / secs / 1e6,
        written as f64 / secs / 1e6,
        vm_kib("VmRSS:"),
        vm_kib("VmHWM:"),
    );
}

fn child(mode: &str) {
    match mode {
        "enabled" => {
            let dir = std::env::var_os("PARPROF_OUT").expect("set by the parent");
            assert!(parprof_rt::is_enabled(), "recording should be on");
            let bare = bare_reads_ns();
            let one = probe_pair_ns();
            let two = on_threads(2, probe_pair_ns);
            let two_bare = on_threads(2, bare_reads_ns);
            let goal = 1.3 * bare + 2.0;
            let every_call = std::env::var("PARPROF_SAMPLING").is_ok_and(|v| v == "off");
            println!(
                "{}",
                if every_call {
                    "every call recorded (PARPROF_SAMPLING=off):"
                } else {
                    "hot sites sampled (the default):"
                }
            );
            println!(
                "  two bare clock reads ({:?}): {bare:.2} ns (2 threads: {:.2} / {:.2} ns)",
                clock::kind(),
                two_bare[0],
                two_bare[1]
            );
            println!(
                "  enabled probe pair, 1 thread: {one:.2} ns   (goal ≤ {goal:.2} ns: {})",
                verdict(one <= goal)
            );
            println!(
                "  enabled probe pair, 2 threads: {:.2} / {:.2} ns   (goal ≤ {goal:.2} ns: {})",
                two[0],
                two[1],
                verdict(two.iter().all(|&t| t <= goal))
            );
            // Before the other profilers hold memory of their own.
            sustained(std::path::Path::new(&dir));
            let (tracy, puffin) = other_profilers_ns();
            println!(
                "  side by side: tracy-client span {tracy:.2} ns, puffin scope {puffin:.2} ns; the \
                 probe pair is {:.2}× tracy's and {:.2}× puffin's (goal ≤ 0.5× each: {})",
                one / tracy,
                one / puffin,
                verdict(one <= 0.5 * tracy && one <= 0.5 * puffin)
            );
        }
        "disabled" => {
            assert!(!parprof_rt::is_enabled());
            let plain = plain_call_ns();
            let probed = probe_pair_ns();
            println!(
                "disabled probe pair: {:.2} ns over an unprobed call ({probed:.2} vs {plain:.2} ns; goal ≤ 1 ns: {})",
                probed - plain,
                verdict(probed - plain <= 1.0)
            );
        }
        _ => unreachable!("unknown mode {mode}"),
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

fn main() {
    if let Ok(mode) = std::env::var("PROBE_COST_MODE") {
        return child(&mode);
    }
    let exe = std::env::current_exe().unwrap();
    let dir = std::env::temp_dir().join(format!("parprof-probe-cost-{}", std::process::id()));
    for (mode, out, sampling) in [
        ("enabled", Some(&dir), "on"),
        ("enabled", Some(&dir), "off"),
        ("disabled", None, "on"),
    ] {
        let mut cmd = Command::new(&exe);
        cmd.env("PROBE_COST_MODE", mode)
            .env("PARPROF_SAMPLING", sampling)
            .env_remove("PARPROF_OUT");
        if let Some(out) = out {
            cmd.env("PARPROF_OUT", out);
        }
        let status = cmd.status().expect("run the benchmark child");
        assert!(status.success(), "{mode} child failed: {status}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
