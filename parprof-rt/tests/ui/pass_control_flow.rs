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
}
