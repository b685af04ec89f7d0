// Every way out of a probed function still works: `?`, early return, recursion, diverging
// functions and panics. (The recorded events are checked in parprof-rt's tests.)
#![deny(warnings)]

use parprof_rt::probe;
use std::num::ParseIntError;

#[probe]
fn parse_sum(a: &str, b: &str) -> Result<i64, ParseIntError> {
    let a: i64 = a.parse()?;
    Ok(a + b.parse::<i64>()?)
}

#[probe]
fn first_even(xs: &[u32]) -> Option<u32> {
    for &x in xs {
        if x % 2 == 0 {
            return Some(x);
        }
    }
    None
}

#[probe]
fn fib(n: u64) -> u64 {
    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
}

#[probe]
fn fail(msg: &str) -> ! {
    panic!("{msg}")
}

// Statements and items in the body keep working after the inserted prologue.
#[probe]
fn with_items() -> u32 {
    use std::collections::HashMap;
    const K: u32 = 2;
    let m: HashMap<_, _> = [(1, K)].into();
    m[&1]
}

#[probe]
fn nested() -> u32 {
    #[probe]
    fn inner() -> u32 {
        1
    }
    inner() + 1
}

// The body's value goes through the probe's exit: coercions at the tail, a `return` as the
// last statement, an opaque type, and a temporary that borrows a local all still compile.
#[probe]
fn boxed(n: u32) -> Box<dyn std::fmt::Display> {
    Box::new(n)
}

#[probe]
#[allow(clippy::needless_return)]
fn returned_last(n: u32) -> u32 {
    return n + 1;
}

#[probe]
fn evens(n: u32) -> impl Iterator<Item = u32> {
    (0..n).filter(|x| x % 2 == 0)
}

// The return type still reaches a closure in the tail: its argument's type comes from there.
#[probe]
fn adder(k: u32) -> impl Fn(u32) -> u32 {
    move |x| x + k
}

#[probe]
fn boxed_adder(k: u32) -> Box<dyn Fn(u32) -> u32> {
    Box::new(move |x| x + k)
}

#[probe]
fn locked_len(m: &std::sync::Mutex<Vec<u8>>) -> usize {
    let guard = m.lock().unwrap();
    guard.len()
}

#[probe]
fn forever() -> ! {
    loop {
        std::thread::park();
    }
}

fn main() {
    assert_eq!(parse_sum("1", "2"), Ok(3));
    assert!(parse_sum("x", "2").is_err());
    assert_eq!(first_even(&[1, 4, 6]), Some(4));
    assert_eq!(first_even(&[1]), None);
    assert_eq!(fib(10), 55);
    std::panic::set_hook(Box::new(|_| {}));
    assert!(std::panic::catch_unwind(|| fail("expected")).is_err());
    drop(std::panic::take_hook());
    assert_eq!(with_items(), 2);
    assert_eq!(nested(), 2);
    assert_eq!(boxed(7).to_string(), "7");
    assert_eq!(returned_last(1), 2);
    assert_eq!(evens(5).count(), 3);
    assert_eq!(adder(2)(3), 5);
    assert_eq!(boxed_adder(2)(3), 5);
    assert_eq!(locked_len(&std::sync::Mutex::new(vec![1, 2])), 2);
    let _never_called: fn() -> ! = forever;
}
