//! A target that ends badly on purpose, for parprof's error-path tests.
//! Usage: `misbehave panic | segv | abort | exit CODE | hang`, after some probed work.

use parprof_rt::probe;

#[probe]
fn some_work() -> u64 {
    (0..200_000u64).fold(0, |a, b| a.wrapping_add(b * b))
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    for _ in 0..10 {
        std::hint::black_box(some_work());
    }
    match mode.as_str() {
        "panic" => panic!("misbehave: deliberate panic"),
        // SAFETY: none: a deliberate invalid write, to die of SIGSEGV as a buggy program would.
        "segv" => unsafe { std::ptr::null_mut::<u8>().write_volatile(1) },
        "abort" => std::process::abort(),
        "exit" => std::process::exit(
            std::env::args()
                .nth(2)
                .and_then(|c| c.parse().ok())
                .unwrap_or(3),
        ),
        "hang" => loop {
            std::hint::black_box(some_work());
        },
        _ => println!("misbehave: nothing asked, exiting normally"),
    }
}
