//! The call site of a parallel operation that enters a pool with no region current: the
//! innermost frame of the calling thread's stack that is the program's own — not rayon's,
//! rayon-core's, the standard library's or the profiler's — named by its function and the
//! line of the call, e.g. `nbody::Simulation::tick_par (src/nbody.rs:41)`.
//!
//! The operation's type says little (a `par_iter_mut().for_each(drift)` has no closure of the
//! program's, and two loops over one element type in two functions look alike), and the caller
//! location rayon-core sees is rayon's own when the operation is a parallel iterator. The stack
//! is read once per operation type and caller (the first time the program runs it), symbolized
//! from the executable's debug information.

/// Crates whose frames are the machinery between a call site and the pool, not the call site.
pub(crate) const MACHINERY: &[&str] = &[
    "rayon",
    "rayon_core",
    "core",
    "std",
    "alloc",
    "parprof_rt",
    "crossbeam_deque",
    "crossbeam_utils",
    "either",
    "backtrace",
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CallSite {
    /// The function, without generic arguments, closures named by their function.
    pub name: String,
    /// As the debug information gives it; empty when it gives none.
    pub file: String,
    pub line: u32,
    /// The next function of the program's own up the stack, when there is one: a helper that
    /// starts the operation for several callers (`join8` of two matrix products) is as many
    /// call sites.
    pub caller: Option<String>,
}

/// The innermost frame of the program's own on the calling thread's stack; `None` when the
/// stack cannot be read or symbolized (no debug information), or holds no such frame. Never
/// inlined: the profile tells the symbolization's samples, the profiler's own time, by this
/// frame.
///
/// Frames are symbolized one at a time, from the innermost, until the call site and its caller
/// are found: the frames below (`main`'s callers in the C library) are never read. Symbolizing
/// the whole stack, as the standard library's backtrace prints it, read the C library's
/// detached, compressed debug information too, where a distribution installs it: 100 ms of a
/// program's first parallel call on the project's VM.
#[inline(never)]
pub(crate) fn from_stack() -> Option<CallSite> {
    let mut frames = Vec::with_capacity(64);
    backtrace::trace(|frame| {
        frames.push(frame.clone());
        frames.len() < MAX_FRAMES
    });
    let mut finder = SiteFinder::default();
    for frame in &frames {
        let mut symbols: Vec<(String, Option<(String, u32)>)> = Vec::new();
        // Inlined functions first, as they nest.
        backtrace::resolve_frame(frame, |symbol| {
            let Some(name) = symbol.name() else {
                return;
            };
            let location = symbol
                .filename()
                .zip(symbol.lineno())
                .map(|(file, line)| (crate_relative(&file.to_string_lossy()).to_owned(), line));
            symbols.push((name.to_string(), location));
        });
        for (symbol, location) in symbols {
            if finder.see(&symbol, location) {
                return finder.site;
            }
        }
    }
    finder.site
}

/// Frames read at most: a call site deeper than this in a recursion is named by the frames above.
const MAX_FRAMES: usize = 256;

/// The call site among a stack's frames, given from the innermost.
#[derive(Default)]
struct SiteFinder {
    site: Option<CallSite>,
}

impl SiteFinder {
    /// Takes the next frame outwards; true once the call site and its caller are known.
    fn see(&mut self, symbol: &str, location: Option<(String, u32)>) -> bool {
        let symbol = without_disambiguators(symbol);
        let symbol = closure_of_shim(&symbol).unwrap_or(&symbol);
        if is_machinery(symbol) {
            return false;
        }
        let name = function_name(symbol);
        match &mut self.site {
            None => {
                let (file, line) = location.unwrap_or_default();
                self.site = Some(CallSite {
                    name,
                    file,
                    line,
                    caller: None,
                });
                false
            }
            // A closure of the same function, or its inlined copy, is not its caller.
            Some(s) if s.name == name => false,
            Some(s) => {
                s.caller = Some(name);
                true
            }
        }
    }
}

/// The folders of a crate's own sources.
const SOURCE_FOLDERS: [&str; 4] = ["src", "examples", "benches", "tests"];

/// A source path from its crate's source folder on (`/home/me/proj/src/main.rs` →
/// `src/main.rs`). The standard library prints paths relative to the program's current
/// folder, and absolute ones elsewhere: a program run outside its workspace (recorded on
/// another machine, say) would otherwise name its regions after the folders of the machine
/// it was built on.
fn crate_relative(file: &str) -> &str {
    if !file.starts_with('/') {
        return file;
    }
    (file.rmatch_indices('/'))
        .map(|(at, _)| &file[at + 1..])
        .find(|rest| {
            SOURCE_FOLDERS.iter().any(|folder| {
                rest.strip_prefix(folder)
                    .is_some_and(|r| r.starts_with('/'))
            })
        })
        .unwrap_or(file)
}

/// A symbol without the crate disambiguators of the v0 mangling (`core[c1f1a4ba060b9bfa]::ops`
/// → `core::ops`), which the standard library's symbols carry: its crates are then known by
/// name.
fn without_disambiguators(symbol: &str) -> String {
    let mut out = String::with_capacity(symbol.len());
    let mut rest = symbol;
    while let Some(open) = rest.find('[') {
        let (before, from) = rest.split_at(open);
        out.push_str(before);
        // A disambiguator follows a crate's name; a slice type (`<[f32] as …>`) does not.
        let after_name = before.ends_with(|c: char| c.is_alphanumeric() || c == '_');
        let hash = (from[1..].find(']').map(|close| &from[1..1 + close])).filter(|_| after_name);
        match hash {
            Some(h) if !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()) => {
                rest = &from[h.len() + 2..];
            }
            _ => {
                out.push('[');
                rest = &from[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The closure that a call shim calls: `<app::main::{{closure}} as
/// core::ops::function::FnOnce<()>>::call_once` → `app::main::{{closure}}`. The shim is the
/// standard library's plumbing between the closure and whoever calls it, not a function of the
/// program: taken for the closure, it is never named as a caller (`from call_once`).
fn closure_of_shim(symbol: &str) -> Option<&str> {
    let (ty, rest) = symbol.strip_prefix('<')?.split_once(" as ")?;
    (rest.starts_with("core::ops::function::Fn") && ty.contains("{{closure}}")).then_some(ty)
}

/// The crate of a path: its first segment (`None` for a type of no crate: `usize`, `[T]`).
fn crate_of(path: &str) -> Option<&str> {
    let path = path.trim_start_matches(['<', '&', '*', '[', '(']);
    let path = path.strip_prefix("mut ").unwrap_or(path);
    let path = path.strip_prefix("dyn ").unwrap_or(path);
    path.contains("::")
        .then(|| path.split("::").next().unwrap_or(path))
}

/// Whether a frame is the machinery's rather than the program's. A trait impl
/// (`<T as Trait>::f`) is the program's when its type or its trait is: `<Grid as
/// rayon::ParallelIterator>` is, `<usize as rayon::range::IndexedRangeInteger>` is not.
fn is_machinery(symbol: &str) -> bool {
    let programs = |path: &str| crate_of(path).is_some_and(|c| !MACHINERY.contains(&c));
    if let Some(inner) = symbol.strip_prefix('<')
        && let Some((ty, rest)) = inner.split_once(" as ")
    {
        let trait_path = rest.split('>').next().unwrap_or(rest);
        return !(programs(ty) || programs(trait_path));
    }
    // Unnamed frames, the unwinder's and the C library's (`__libc_start_main`), have no `::`.
    !programs(symbol)
}

/// The symbol without its hash, generic arguments and closure suffixes:
/// `demo::quick_sort::<i32>::{{closure}}::h0123456789abcdef` → `demo::quick_sort`.
fn function_name(symbol: &str) -> String {
    let mut name = String::with_capacity(symbol.len());
    let mut depth = 0usize;
    for c in symbol.chars() {
        match c {
            // `::<` opens generic arguments of a path segment (v0 symbols), `<` at depth 0
            // after a segment too; a symbol that starts with `<` is a trait impl, kept.
            '<' if !name.is_empty() || depth > 0 => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth > 0 => {}
            _ => name.push(c),
        }
    }
    let mut name = name.trim_end_matches("::").replace("::::", "::");
    loop {
        let trimmed = strip_hash(&name)
            .trim_end_matches("::{{closure}}")
            .trim_end_matches("::{closure}")
            .to_owned();
        if trimmed == name {
            break;
        }
        name = trimmed;
    }
    name
}

/// `path::h0123456789abcdef` → `path`.
fn strip_hash(name: &str) -> &str {
    match name.rsplit_once("::h") {
        Some((path, hash)) if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) => {
            path
        }
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The call site in a backtrace as the standard library prints it.
    fn innermost_program_frame(printed: &str) -> Option<CallSite> {
        let mut lines = printed.lines().peekable();
        let mut finder = SiteFinder::default();
        while let Some(line) = lines.next() {
            let Some(symbol) = frame_symbol(line) else {
                continue;
            };
            let location = lines.peek().and_then(|l| location(l));
            if finder.see(symbol, location) {
                break;
            }
        }
        finder.site
    }

    /// `symbol` of a frame line `   12: symbol`.
    fn frame_symbol(line: &str) -> Option<&str> {
        let (index, symbol) = line.trim_start().split_once(": ")?;
        index.parse::<u32>().ok()?;
        Some(symbol.trim())
    }

    /// `(file, line)` of a location line `             at ./src/main.rs:12:5`.
    fn location(line: &str) -> Option<(String, u32)> {
        let at = line.trim_start().strip_prefix("at ")?;
        let (rest, _column) = at.rsplit_once(':')?;
        let (file, line) = rest.rsplit_once(':')?;
        let file = file.strip_prefix("./").unwrap_or(file);
        Some((crate_relative(file).to_owned(), line.parse().ok()?))
    }

    const PRINTED: &str = "   0: std::backtrace::Backtrace::force_capture
             at /rustc/abc/library/std/src/backtrace.rs:312:13
   1: parprof_rt::call_site::from_stack
             at ./parprof-rt/src/call_site.rs:40:17
   2: rayon_core::registry::Registry::in_worker_cold
             at /root/.cargo/registry/src/index/rayon-core-1.13.0/src/registry.rs:516:13
   3: <rayon::slice::IterMut<T> as rayon::iter::ParallelIterator>::drive_unindexed
             at /root/.cargo/registry/src/index/rayon-1.12.0/src/slice/mod.rs:1000:9
   4: demo_nbody_steps::tick_par
             at ./examples/demo_nbody_steps.rs:41:5
   5: demo_nbody_steps::main
             at ./examples/demo_nbody_steps.rs:62:9
   6: core::ops::function::FnOnce::call_once
             at /rustc/abc/library/core/src/ops/function.rs:250:5
";

    #[test]
    fn source_paths_start_at_the_crate_source_folder() {
        assert_eq!(crate_relative("src/main.rs"), "src/main.rs");
        assert_eq!(
            crate_relative("/work/rdemo/rayon-demo/src/nbody/nbody.rs"),
            "src/nbody/nbody.rs"
        );
        assert_eq!(
            crate_relative("/home/me/proj/examples/demo.rs"),
            "examples/demo.rs"
        );
        assert_eq!(crate_relative("/usr/lib/x.rs"), "/usr/lib/x.rs");
        assert_eq!(
            location("             at /home/me/proj/benches/b.rs:12:5"),
            Some(("benches/b.rs".to_owned(), 12))
        );
    }

    #[test]
    fn the_innermost_frame_outside_rayon_std_and_the_profiler_is_the_call_site() {
        assert_eq!(
            innermost_program_frame(PRINTED),
            Some(CallSite {
                name: "demo_nbody_steps::tick_par".into(),
                file: "examples/demo_nbody_steps.rs".into(),
                line: 41,
                caller: Some("demo_nbody_steps::main".into()),
            })
        );
    }

    #[test]
    fn closure_shims_and_the_standard_library_are_never_callers() {
        let from_main = "   0: parprof_rt::call_site::from_stack
   1: rayon_core::registry::Registry::in_worker_cold
   2: rayon_core::thread_pool::ThreadPool::install
   3: gain_items::main::{{closure}}
             at ./src/bin/gain_items.rs:16:9
   4: <gain_items::main::{{closure}} as core::ops::function::FnOnce<()>>::call_once
             at /rustc/abc/library/core/src/ops/function.rs:250:5
   5: gain_items::main
             at ./src/bin/gain_items.rs:14:5
   6: core::ops::function::FnOnce::call_once
   7: std::rt::lang_start::{{closure}}
   8: std::rt::lang_start_internal
";
        assert_eq!(
            innermost_program_frame(from_main),
            Some(CallSite {
                name: "gain_items::main".into(),
                file: "src/bin/gain_items.rs".into(),
                line: 16,
                caller: None,
            })
        );
        assert_eq!(
            closure_of_shim(
                "<app::run::{{closure}} as core::ops::function::FnMut<(usize,)>>::call_mut"
            ),
            Some("app::run::{{closure}}")
        );
        assert_eq!(closure_of_shim("<app::Grid as app::Step>::step"), None);
        // The standard library's shim of `main`, as a v0 symbol: machinery.
        let shim = "<&dyn core[c1f1a4ba060b9bfa]::ops::function::Fn<()> + core[c1f1a4ba060b9bfa]::marker::Sync as core[c1f1a4ba060b9bfa]::ops::function::FnOnce<()>>::call_once";
        assert!(is_machinery(&without_disambiguators(shim)));
        assert_eq!(
            without_disambiguators("std[0a1b]::rt::lang_start::<()>"),
            "std::rt::lang_start::<()>"
        );
        assert_eq!(
            without_disambiguators("[app::Row]::sort"),
            "[app::Row]::sort"
        );
        assert_eq!(
            without_disambiguators("<[f32] as app::Sum>::sum"),
            "<[f32] as app::Sum>::sum"
        );
    }

    #[test]
    fn a_stack_of_machinery_only_has_no_call_site() {
        let machinery: String = PRINTED.lines().take(6).collect::<Vec<_>>().join("\n");
        assert_eq!(innermost_program_frame(&machinery), None);
    }

    #[test]
    fn names_drop_hashes_generic_arguments_and_closures() {
        assert_eq!(
            function_name("demo::quick_sort::<i32>::{{closure}}::h0123456789abcdef"),
            "demo::quick_sort"
        );
        assert_eq!(
            function_name("demo::sort::{{closure}}::{{closure}}"),
            "demo::sort"
        );
        assert_eq!(
            function_name("<demo::Grid as demo::Step>::step"),
            "<demo::Grid as demo::Step>::step"
        );
        assert_eq!(
            function_name("demo::Simulation::tick_par"),
            "demo::Simulation::tick_par"
        );
    }

    #[test]
    fn a_trait_impl_on_a_type_of_the_program_is_the_program_s() {
        assert!(!is_machinery(
            "<demo::Grid as rayon::iter::ParallelIterator>::drive"
        ));
        assert!(is_machinery(
            "<rayon::slice::Iter<T> as rayon::iter::ParallelIterator>::drive"
        ));
        assert!(is_machinery("__libc_start_main"));
        assert!(is_machinery(
            "<usize as rayon::range::IndexedRangeInteger>::with_producer"
        ));
        assert!(!is_machinery("<usize as demo::Step>::step"));
    }
}
