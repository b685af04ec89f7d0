// A second `#[probe]` on one function is reported rather than nesting two probes.
#[parprof_rt::probe]
#[parprof_rt::probe(name = "again")]
fn solve() {}

fn main() {
    solve();
}
