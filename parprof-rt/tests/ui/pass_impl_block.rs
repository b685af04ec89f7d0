// `#[probe]` on impl blocks: inherent and trait impls, generic, with opted-out and renamed
// functions, and self types the macro cannot name (left to the runtime).
#![deny(warnings)]

use parprof_rt::probe;
use std::fmt;

struct Grid<T> {
    cells: Vec<T>,
}

#[probe]
impl<T: Copy + Default> Grid<T> {
    /// Documented and public: attributes of the functions are kept.
    pub fn new(n: usize) -> Self {
        Grid {
            cells: vec![T::default(); n],
        }
    }

    #[inline]
    fn step(&mut self, f: impl Fn(T) -> T) {
        for c in &mut self.cells {
            *c = f(*c);
        }
    }

    #[probe(skip)]
    const fn empty() -> Self {
        Grid { cells: Vec::new() }
    }

    #[parprof_rt::probe(name = "grid_total")]
    fn total<S>(&self) -> S
    where
        S: std::iter::Sum<T>,
    {
        self.cells.iter().copied().sum()
    }

    const ORIGIN: usize = 0;
}

#[probe]
impl<T: fmt::Debug> fmt::Display for Grid<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.cells)
    }
}

trait Name {
    fn name(&self) -> String;
}

// Self types that are not a bare name of this module: a reference, a path, a generic
// parameter, and a type passed through a `macro_rules!` fragment.
#[probe]
impl Name for &str {
    fn name(&self) -> String {
        self.to_string()
    }
}

#[probe]
impl Name for std::string::String {
    fn name(&self) -> String {
        self.clone()
    }
}

trait Twice {
    fn twice(&self) -> (Self, Self)
    where
        Self: Sized;
}

#[probe]
impl<T: Clone> Twice for T {
    fn twice(&self) -> (T, T) {
        (self.clone(), self.clone())
    }
}

macro_rules! impl_name {
    ($t:ty) => {
        #[probe]
        impl Name for $t {
            fn name(&self) -> String {
                stringify!($t).to_owned()
            }
        }
    };
}
impl_name!(u8);

/// # Safety
/// `raw` returns the length of the cells.
unsafe trait Raw {
    fn raw(&self) -> usize;
}

#[probe]
unsafe impl Raw for Grid<u8> {
    fn raw(&self) -> usize {
        self.cells.len()
    }
}

fn main() {
    let mut g: Grid<i32> = Grid::new(3);
    g.step(|c| c + 2);
    assert_eq!(g.total::<i32>(), 6);
    assert_eq!(g.to_string(), "[2, 2, 2]");
    assert!(Grid::<u8>::empty().cells.is_empty());
    assert_eq!(Grid::<u8>::ORIGIN, 0);
    assert_eq!("a".name(), "a");
    assert_eq!(String::from("b").name(), "b");
    assert_eq!(3u8.name(), "u8");
    assert_eq!(1.twice(), (1, 1));
    assert_eq!(Grid::<u8>::new(2).raw(), 2);
}
