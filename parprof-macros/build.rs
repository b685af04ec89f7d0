//! Tells the crates that depend on parprof-macros where its sources are (`links` metadata):
//! parprof-rt passes it on to cargo-parprof, whose build carries these sources so that its
//! hooked builds need no checkout (see cargo-parprof/build.rs).

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if let Ok(root) = std::env::var("CARGO_MANIFEST_DIR") {
        println!("cargo::metadata=root={root}");
    }
}
