// `unsafe fn` and `extern "C" fn` keep their ABI, safety and linkage attributes.
#![deny(warnings)]

use parprof_rt::probe;

#[probe]
unsafe fn read(p: *const u32) -> u32 {
    // SAFETY: the caller passes a valid pointer.
    unsafe { *p }
}

#[probe]
extern "C" fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[probe]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn parprof_ui_mul(a: i32, b: i32) -> i32 {
    a * b
}

struct Buf(Vec<u8>);

impl Buf {
    #[probe]
    unsafe fn get_unchecked(&self, i: usize) -> u8 {
        // SAFETY: the caller checks the bounds.
        unsafe { *self.0.get_unchecked(i) }
    }
}

fn main() {
    let x = 7;
    // SAFETY: `x` is alive.
    assert_eq!(unsafe { read(&x) }, 7);
    let f: extern "C" fn(i32, i32) -> i32 = add;
    assert_eq!(f(2, 3), 5);
    // SAFETY: no preconditions beyond the signature.
    assert_eq!(unsafe { parprof_ui_mul(2, 3) }, 6);
    // SAFETY: index 1 is in bounds.
    assert_eq!(unsafe { Buf(vec![1, 2]).get_unchecked(1) }, 2);
}
