#[parprof_rt::probe]
struct Grid {
    cells: Vec<f32>,
}

#[parprof_rt::probe]
trait Step {
    fn step(&mut self);
}

trait Solve {
    #[parprof_rt::probe]
    fn solve(&self);
}

fn main() {
    let _ = Grid { cells: Vec::new() }.cells;
}
