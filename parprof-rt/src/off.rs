//! With the `off` feature a probe is a zero-sized guard without `Drop`: no code at all.

/// A probe site that records nothing.
pub struct Site;
impl Site {
    /// The site `#[probe]` makes; its name and place are dropped.
    pub const fn new(_: &'static str, _: &'static str, _: u32) -> Self {
        Site
    }
}
/// A probe's guard that records nothing when dropped.
pub struct Guard;
/// Entering a probe: nothing.
#[inline(always)]
pub fn enter(_: &'static Site) -> Guard {
    Guard
}
/// Entering a method's probe: nothing.
#[inline(always)]
pub fn enter_method(_: &'static Site, _: fn() -> &'static str) -> Guard {
    Guard
}
/// Leaving a probe: the value, untouched.
#[inline(always)]
pub fn leave<T>(_: Guard, value: T) -> T {
    value
}
