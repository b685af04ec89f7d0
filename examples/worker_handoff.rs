//! A main thread that hands each request to a service thread and waits on a condition
//! variable until the answer is there: the shape of a program with a background worker (a
//! logger, a cache, a connection). Under `cargo parprof --slices` a slice of the main thread
//! has no service thread (only the forking thread exists in a slice), so it waits forever: the
//! slice is ended as blocked, and the program runs on undisturbed.
//!
//! Prints `answers=<sum of the answers>` and `expected=<the same sum computed directly>`.
//!
//! Argument: `[REQUESTS]` (default 200, about 2 ms of work each).

use parprof_rt::probe;
use parprof_suite::spin;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// One request's slot: the question, then the answer.
#[derive(Default)]
struct Slot {
    question: Option<u64>,
    answer: Option<u64>,
    done: bool,
}

struct Service {
    slot: Mutex<Slot>,
    changed: Condvar,
}

fn answer(question: u64) -> u64 {
    question * question % 1_000_003
}

impl Service {
    /// Posts `question` and waits until the service thread has answered it.
    #[probe]
    fn request(&self, question: u64) -> u64 {
        let mut slot = self.slot.lock().unwrap();
        slot.question = Some(question);
        self.changed.notify_all();
        loop {
            if let Some(a) = slot.answer.take() {
                return a;
            }
            slot = self.changed.wait(slot).unwrap();
        }
    }

    fn serve(&self) {
        let mut slot = self.slot.lock().unwrap();
        loop {
            if let Some(q) = slot.question.take() {
                drop(slot);
                spin(Duration::from_millis(1));
                slot = self.slot.lock().unwrap();
                slot.answer = Some(answer(q));
                self.changed.notify_all();
            } else if slot.done {
                return;
            } else {
                slot = self.changed.wait(slot).unwrap();
            }
        }
    }
}

/// The main thread's own part of a request: about 1 ms of CPU.
#[probe]
fn prepare(i: u64) -> u64 {
    spin(Duration::from_millis(1));
    i * 7 + 3
}

fn main() {
    let requests: u64 = std::env::args()
        .nth(1)
        .map_or(200, |a| a.parse().expect("a number of requests"));
    let service = Arc::new(Service {
        slot: Mutex::new(Slot::default()),
        changed: Condvar::new(),
    });
    let server = {
        let service = Arc::clone(&service);
        std::thread::Builder::new()
            .name("service".into())
            .spawn(move || service.serve())
            .expect("spawn the service thread")
    };
    let mut answers = 0u64;
    for i in 0..requests {
        answers += service.request(prepare(i));
    }
    service.slot.lock().unwrap().done = true;
    service.changed.notify_all();
    server.join().expect("the service thread");
    let expected: u64 = (0..requests).map(|i| answer(i * 7 + 3)).sum();
    println!("answers={answers}");
    println!("expected={expected}");
}
