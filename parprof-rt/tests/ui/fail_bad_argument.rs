#[parprof_rt::probe(nmae = "solve")]
fn solve() {}

#[parprof_rt::probe(name = 3)]
fn step() {}

#[parprof_rt::probe(name = "a", name = "b")]
fn twice() {}

fn main() {
    solve();
    step();
    twice();
}
