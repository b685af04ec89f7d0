//! `cargo parprof` (and `cargo-parprof record` where no cargo is): a thin binary over the
//! `cargo_parprof` library.

fn main() {
    use cargo_parprof::cli::{self, Invocation};
    map_large_blocks_apart();
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

/// Large blocks (a long run's lists, the symbolizer's tables) are mapped each for itself and
/// unmapped when freed. glibc would otherwise raise its mapping threshold once the first such
/// block is freed and serve the next ones from its heap, where freed memory stays with the
/// process: the profiler's peak held the symbolizer's freed tables beside the analysis's
/// (about 15 MB of a 20 s run's 108 MB; 8 MB of a 60 s run's report, 128 MB).
fn map_large_blocks_apart() {
    #[cfg(target_env = "gnu")]
    // SAFETY: sets one of the allocator's tunables, before any other thread runs.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}
