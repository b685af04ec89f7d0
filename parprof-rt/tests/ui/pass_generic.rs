// Generic functions, where clauses and `impl Trait` returns keep their types and inference.
#![deny(warnings)]

use parprof_rt::probe;
use std::fmt::Display;
use std::ops::Add;

#[probe]
fn sum<T: Copy + Add<Output = T> + Default>(xs: &[T]) -> T {
    xs.iter().fold(T::default(), |a, &b| a + b)
}

#[probe]
fn describe<T, U>(a: T, b: &U) -> String
where
    T: Display,
    U: Display + ?Sized,
{
    format!("{a}/{b}")
}

#[probe]
fn evens(n: u32) -> impl Iterator<Item = u32> + Clone {
    (0..n).filter(|x| x % 2 == 0)
}

// The tail expression is still coerced to the declared return type.
#[probe]
fn counter(start: u32) -> Box<dyn Fn() -> u32> {
    Box::new(move || start + 1)
}

// Inferred from the return type alone.
#[probe]
fn default_of<T: Default>() -> T {
    Default::default()
}

#[probe]
fn longest<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.len() >= b.len() { a } else { b }
}

#[probe]
fn first_const<const N: usize>(xs: [u8; N]) -> Option<u8> {
    xs.first().copied()
}

fn main() {
    assert_eq!(sum(&[1, 2, 3]), 6);
    assert_eq!(sum(&[0.5f32, 0.25]), 0.75);
    assert_eq!(describe(1, "x"), "1/x");
    assert_eq!(evens(7).collect::<Vec<_>>(), [0, 2, 4, 6]);
    assert_eq!(counter(41)(), 42);
    let v: Vec<u8> = default_of();
    assert!(v.is_empty());
    assert_eq!(longest("ab", "c"), "ab");
    assert_eq!(first_const([7, 8]), Some(7));
}
