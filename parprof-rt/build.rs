//! Tells the crates that depend on parprof-rt where its sources and those of parprof-macros are
//! (`links` metadata): cargo-parprof's build carries both, so that its hooked builds need no
//! checkout (see cargo-parprof/build.rs).

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=DEP_PARPROF_MACROS_ROOT");
    if let Ok(root) = std::env::var("CARGO_MANIFEST_DIR") {
        println!("cargo::metadata=root={root}");
    }
    if let Ok(macros) = std::env::var("DEP_PARPROF_MACROS_ROOT") {
        println!("cargo::metadata=macros_root={macros}");
    }
}
