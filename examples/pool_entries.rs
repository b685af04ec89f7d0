//! Each way a thread outside the pool gives it work, called from a plain function of the main
//! thread, as programs write them: `pool_entries MODE`, MODE one of `spawn_fifo`, `scope`,
//! `in_place_scope`, `install` (on a pool built here), `broadcast`, `spawn_broadcast`. Each is
//! an implicit region named at its call, in the function of the same name; `install_in_main`
//! makes the `install` call in `main` itself (a closure of `main`'s, called by the standard
//! library's shim).
//!
//! Prints what it did: `pieces=<n>` jobs spawned (or leaves of the parallel iterator, counted
//! in its fold, for `install`) and `threads=<n>` (the pool's), so that the region's tasks can be
//! checked exactly:
//! - `spawn_fifo`, `spawn_broadcast`, `in_place_scope`: one task per piece, every one injected
//!   (made on the main thread, outside the pool);
//! - `scope`: the scope's body is one injected task, and each `spawn` in it a task;
//! - `install`: one injected task, and two per `join` of the iterator (leaves − 1 of them);
//! - `broadcast`: one task per thread of the pool, injected.

use rayon::prelude::*;
use std::sync::mpsc;
use std::time::Duration;

const PIECES: usize = 40;
const PIECE: Duration = Duration::from_micros(500);

static LEAVES: parprof_suite::Tally = parprof_suite::Tally::new();

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let threads = rayon::current_num_threads();
    let pieces = match mode.as_str() {
        "spawn_fifo" => spawn_fifo(),
        "scope" => scope(),
        "in_place_scope" => in_place_scope(),
        "install" => install(),
        "install_in_main" => {
            let pool = rayon::ThreadPoolBuilder::new().build().expect("a pool");
            let (a, b) = pool.install(|| rayon::join(spin_piece, spin_piece));
            usize::from(a ^ b != 1)
        }
        "broadcast" => broadcast(),
        "spawn_broadcast" => spawn_broadcast(),
        other => panic!("unknown mode {other:?}"),
    };
    println!("pieces={pieces} threads={threads}");
}

fn spin_piece() -> u64 {
    parprof_suite::spin(PIECE)
}

fn spawn_fifo() -> usize {
    let (done, finished) = mpsc::channel();
    for _ in 0..PIECES {
        let done = done.clone();
        rayon::spawn_fifo(move || {
            let _ = done.send(parprof_suite::spin(PIECE));
        });
    }
    drop(done);
    finished.iter().count()
}

fn scope() -> usize {
    rayon::scope(|s| {
        for _ in 0..PIECES {
            s.spawn(|_| {
                parprof_suite::spin(PIECE);
            });
        }
    });
    PIECES
}

fn in_place_scope() -> usize {
    rayon::in_place_scope(|s| {
        for _ in 0..PIECES {
            s.spawn(|_| {
                parprof_suite::spin(PIECE);
            });
        }
    });
    PIECES
}

fn install() -> usize {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("a pool");
    pool.install(|| {
        (0..PIECES)
            .into_par_iter()
            .fold(
                || {
                    LEAVES.add();
                    0u64
                },
                |acc, _| acc ^ parprof_suite::spin(PIECE),
            )
            .reduce(|| 0, |a, b| a ^ b)
    });
    LEAVES.total() as usize
}

fn broadcast() -> usize {
    rayon::broadcast(|_| parprof_suite::spin(PIECE)).len()
}

fn spawn_broadcast() -> usize {
    let (done, finished) = mpsc::channel();
    rayon::spawn_broadcast(move |_| {
        let _ = done.send(parprof_suite::spin(PIECE));
    });
    finished.iter().count()
}
