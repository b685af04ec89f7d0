fn main() {
    let _ = parprof_rt::parallel_region!("named");
    let _ = parprof_rt::parallel_region!();
}
