//! `cargo parprof`: a thin binary over the `cargo_parprof` library.

fn main() {
    let args = match cargo_parprof::cli::parse(std::env::args_os()) {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    match cargo_parprof::cli::run(&args) {
        Ok(summary) => std::process::exit(summary.target_exit_code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(101);
        }
    }
}
