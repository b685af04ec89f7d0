//! `cargo parprof` (and `cargo-parprof record` where no cargo is): a thin binary over the
//! `cargo_parprof` library.

fn main() {
    use cargo_parprof::cli::{self, Invocation};
    let invocation = match cli::parse_invocation(std::env::args_os()) {
        Ok(invocation) => invocation,
        Err(e) => e.exit(),
    };
    let code = match invocation {
        Invocation::Run(args) => cli::run(&args).map(|summary| summary.target_exit_code),
        Invocation::Diff(args) => cli::diff(&args),
        Invocation::Report(args) => cli::report(&args).map(|()| 0),
        Invocation::Build(args) => cli::build(&args).map(|()| 0),
        Invocation::Record(args) => cli::record(&args).map(|summary| summary.target_exit_code),
    };
    match code {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            cargo_parprof::console::write_note(format_args!("error: {e:#}"));
            std::process::exit(101);
        }
    }
}
