fn main() {
    let _ = parprof_rt::parallel_region!("r", { 1 }, 2);
    let _ = parprof_rt::parallel_region!(3, { 1 });
}
