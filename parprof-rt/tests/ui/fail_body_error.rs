// Errors in a probed body point at the user's code, and the body cannot reach the guard.
#[parprof_rt::probe]
fn count(xs: &[u32]) -> usize {
    let n: u32 = xs.len();
    n
}

#[parprof_rt::probe]
fn stop_early() {
    drop(__parprof_guard);
}

fn main() {
    let _ = count(&[]);
    stop_early();
}
