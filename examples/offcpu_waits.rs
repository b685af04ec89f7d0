//! Threads that wait, written as a service's threads do: one polls for input with a sleep
//! (`wait_for_input`: 20 sleeps of 10 ms), one blocks on a condition variable until the main
//! thread signals it after about 100 ms (`wait_for_signal`), while main computes.
//!
//! `cargo parprof --example offcpu_waits`: the off-CPU flamegraph has about 200 ms blocked
//! under `wait_for_input` and about 100 ms under `wait_for_signal` (tests/flamegraph_e2e.rs).

use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

fn wait_for_input(polls: u32) -> u32 {
    let mut seen = 0;
    for _ in 0..polls {
        thread::sleep(Duration::from_millis(10));
        seen += 1;
    }
    seen
}

fn wait_for_signal(ready: &(Mutex<bool>, Condvar)) {
    let (lock, signal) = ready;
    let mut done = lock.lock().expect("the lock");
    while !*done {
        done = signal.wait(done).expect("the lock");
    }
}

fn busy_for(duration: Duration) -> u64 {
    let start = Instant::now();
    let mut x = 1u64;
    while start.elapsed() < duration {
        for _ in 0..1000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        }
    }
    x
}

fn main() {
    let poller = thread::Builder::new()
        .name("poller".into())
        .spawn(|| wait_for_input(20))
        .expect("spawn the poller");
    let ready = Arc::new((Mutex::new(false), Condvar::new()));
    let waiter = {
        let ready = Arc::clone(&ready);
        thread::Builder::new()
            .name("waiter".into())
            .spawn(move || wait_for_signal(&ready))
            .expect("spawn the waiter")
    };
    let x = busy_for(Duration::from_millis(100));
    *ready.0.lock().expect("the lock") = true;
    ready.1.notify_all();
    waiter.join().expect("the waiter");
    println!("polls={} x={x:x}", poller.join().expect("the poller"));
}
