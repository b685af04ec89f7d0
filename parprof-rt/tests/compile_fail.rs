//! Expansion tests of `#[probe]` and `parallel_region!`: what they reject (with the message and span checked against
//! the `.stderr` files) and what must still compile and run once probed.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail_*.rs");
    t.pass("tests/ui/pass_*.rs");
}
