#[parprof_rt::probe]
async fn fetch() -> u32 {
    1
}

fn main() {
    let _ = fetch();
}
