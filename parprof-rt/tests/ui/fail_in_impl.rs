// Errors of functions inside a probed impl block, and of the block's own arguments.
use parprof_rt::probe;

struct Grid;

#[probe]
impl Grid {
    const fn new() -> Self {
        Grid
    }

    async fn load(&self) {}

    #[probe(skip, name = "grid_len")]
    fn len(&self) -> usize {
        0
    }

    #[probe]
    #[probe(name = "grid_step")]
    fn step(&mut self) {}
}

struct Solver;

#[probe(name = "solver")]
impl Solver {
    fn solve(&self) {}
}

#[probe(skip)]
fn free() {}

fn main() {
    let mut grid = Grid::new();
    let _ = grid.load();
    grid.step();
    let _ = grid.len();
    Solver.solve();
    free();
}
