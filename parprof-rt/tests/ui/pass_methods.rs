// Methods and associated functions annotated one by one.
#![deny(warnings)]

use parprof_rt::probe;

struct Stack<T> {
    items: Vec<T>,
}

impl<T: Clone> Stack<T> {
    // No receiver: named `module::new`, since nothing here names the type.
    #[probe]
    fn new() -> Self {
        Stack { items: Vec::new() }
    }

    #[probe]
    fn push(&mut self, x: T) -> &mut Self {
        self.items.push(x);
        self
    }

    #[probe]
    fn top(&self) -> Option<T> {
        self.items.last().cloned()
    }

    #[probe(name = "stack::into_items")]
    fn into_items(self) -> Vec<T> {
        self.items
    }

    #[probe]
    fn len(self: &Self) -> usize {
        self.items.len()
    }
}

trait Area {
    fn area(&self) -> f64;

    // A default method: `Self` is the implementing type, possibly unsized.
    #[probe]
    fn double_area(&self) -> f64 {
        2.0 * self.area()
    }
}

struct Square(f64);

impl Area for Square {
    #[probe]
    fn area(&self) -> f64 {
        self.0 * self.0
    }
}

impl Area for str {
    #[probe]
    fn area(&self) -> f64 {
        self.len() as f64
    }
}

fn main() {
    let mut s = Stack::new();
    s.push(1).push(2);
    assert_eq!(s.top(), Some(2));
    assert_eq!(s.len(), 2);
    assert_eq!(s.into_items(), [1, 2]);
    assert_eq!(Square(3.0).double_area(), 18.0);
    assert_eq!("abcd".double_area(), 8.0);
}
