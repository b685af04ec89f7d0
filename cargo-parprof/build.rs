//! Carries the runtime inside the subcommand: the sources of parprof-rt and parprof-macros that
//! this cargo-parprof is built with are embedded in its executable (`carried_runtime.rs` in
//! `OUT_DIR`). `cargo parprof` writes them into the build folder when a program without a
//! parprof-rt of its own needs one for its hooked rayon-core or criterion
//! (src/build/hooked_copy/carried_runtime.rs).
//!
//! Why embedded, not resolved from a registry: an installed subcommand must not point back into
//! the checkout it was built from, the runtime must be exactly the one this subcommand reads the
//! traces of, and a profiling build should work offline. The sources are found through the
//! `links` metadata of parprof-rt's and parprof-macros's build scripts: path dependencies in
//! this workspace, the packaged or registry copies once installed. Their manifests are written
//! anew, standalone: workspace inheritance resolved, parprof-macros found beside parprof-rt,
//! only what the library's build needs (no dev-dependencies, tests, benches).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// One carried crate: its name, version, source folder, and standalone manifest.
struct Carried {
    name: String,
    version: String,
    root: PathBuf,
    manifest: String,
}

impl Carried {
    /// Its folder in the runtime folder, named as cargo names a registry's (`parprof-rt-0.1.0`).
    fn dir(&self) -> String {
        format!("{}-{}", self.name, self.version)
    }
}

fn main() {
    let macros = carried(&dep_root("DEP_PARPROF_RT_MACROS_ROOT"), None);
    let runtime = carried(&dep_root("DEP_PARPROF_RT_ROOT"), Some(&macros));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut code = format!(
        "/// The version of parprof-rt this cargo-parprof carries.\n\
         pub const RUNTIME_VERSION: &str = {:?};\n\
         /// The folder of the carried parprof-rt in the runtime folder.\n\
         pub const RUNTIME_DIR: &str = {:?};\n\
         /// Every carried file: its path in the runtime folder, and its bytes.\n\
         pub const FILES: &[(&str, &[u8])] = &[\n",
        runtime.version,
        runtime.dir()
    );
    for krate in [&runtime, &macros] {
        let manifest = out.join(format!("{}.Cargo.toml", krate.dir()));
        std::fs::write(&manifest, &krate.manifest).expect("cannot write to OUT_DIR");
        let mut files = vec![(PathBuf::from("Cargo.toml"), manifest)];
        files.extend(
            sources(&krate.root)
                .into_iter()
                .map(|file| (file.strip_prefix(&krate.root).unwrap().to_owned(), file)),
        );
        for (relative, file) in files {
            let name = format!("{}/{}", krate.dir(), relative.to_string_lossy());
            writeln!(
                code,
                "    ({name:?}, include_bytes!({:?})),",
                file.to_string_lossy()
            )
            .unwrap();
        }
    }
    code.push_str("];\n");
    std::fs::write(out.join("carried_runtime.rs"), code).expect("cannot write to OUT_DIR");
}

/// A source folder named by a dependency's build script.
fn dep_root(variable: &str) -> PathBuf {
    println!("cargo::rerun-if-env-changed={variable}");
    match std::env::var_os(variable) {
        Some(root) => PathBuf::from(root),
        None => panic!("{variable} is not set: parprof-rt's build script names its sources"),
    }
}

/// What the library's build reads: `build.rs` and everything under `src/`, in a stable order.
fn sources(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let build_script = root.join("build.rs");
    if build_script.is_file() {
        println!("cargo::rerun-if-changed={}", build_script.display());
        files.push(build_script);
    }
    let mut pending = vec![root.join("src")];
    println!("cargo::rerun-if-changed={}", pending[0].display());
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for path in entries.map(|e| e.expect("a readable folder").path()) {
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The crate at `root`, with a standalone manifest; `macros`, when given, is the carried
/// parprof-macros that the manifest's dependency of that name points to.
fn carried(root: &Path, macros: Option<&Carried>) -> Carried {
    let manifest = read_toml(&root.join("Cargo.toml"));
    let inherits = ["package", "dependencies"].iter().any(|key| {
        manifest
            .get(*key)
            .and_then(Value::as_table)
            .is_some_and(|t| t.values().any(inherited))
    });
    let workspace = inherits.then(|| workspace_of(root));
    let package = &manifest["package"];
    let field = |key: &str| {
        package.get(key).map(|value| match inherited(value) {
            true => workspace_table(workspace.as_ref(), "package")[key].clone(),
            false => value.clone(),
        })
    };
    let mut standalone_package = Table::new();
    for key in ["name", "version", "edition", "links"] {
        if let Some(value) = field(key) {
            standalone_package.insert(key.to_owned(), value);
        }
    }
    if root.join("build.rs").is_file() {
        standalone_package.insert("build".to_owned(), "build.rs".into());
    }
    let mut standalone = Table::new();
    standalone.insert("package".to_owned(), standalone_package.into());
    for key in ["lib", "features"] {
        if let Some(value) = manifest.get(key) {
            standalone.insert(key.to_owned(), value.clone());
        }
    }
    if let Some(dependencies) = manifest.get("dependencies").and_then(Value::as_table) {
        let normalized: Table = dependencies
            .iter()
            .map(|(name, spec)| {
                (
                    name.clone(),
                    dependency(name, spec, workspace.as_ref(), macros),
                )
            })
            .collect();
        standalone.insert("dependencies".to_owned(), normalized.into());
    }
    let name = field("name").and_then(|v| v.as_str().map(str::to_owned));
    let version = field("version").and_then(|v| v.as_str().map(str::to_owned));
    let (Some(name), Some(version)) = (name, version) else {
        panic!("{}: no package name or version", root.display());
    };
    Carried {
        manifest: format!(
            "# {name} {version} as cargo-parprof carries it, for its hooked builds.\n{}",
            toml::to_string(&standalone).expect("a manifest serializes")
        ),
        name,
        version,
        root: root.to_owned(),
    }
}

/// A dependency as the standalone manifest gives it: inherited from the workspace, the carried
/// parprof-macros by path, any other by version alone (only the registry can provide it).
fn dependency(
    name: &str,
    spec: &Value,
    workspace: Option<&Table>,
    macros: Option<&Carried>,
) -> Value {
    if let Some(macros) = macros.filter(|m| m.name == name) {
        let mut path = Table::new();
        path.insert("path".to_owned(), format!("../{}", macros.dir()).into());
        return path.into();
    }
    let mut spec = as_dependency_table(spec);
    if spec
        .remove("workspace")
        .is_some_and(|v| v.as_bool() == Some(true))
    {
        let mut merged = as_dependency_table(&workspace_table(workspace, "dependencies")[name]);
        if let Some(Value::Array(more)) = spec.remove("features") {
            match merged.get_mut("features") {
                Some(Value::Array(features)) => features.extend(more),
                _ => drop(merged.insert("features".to_owned(), more.into())),
            }
        }
        for (key, value) in spec {
            merged.insert(key, value);
        }
        spec = merged;
    }
    spec.remove("path");
    assert!(
        spec.contains_key("version"),
        "dependency `{name}` has no version: a carried crate can only depend on the registry"
    );
    spec.into()
}

fn as_dependency_table(spec: &Value) -> Table {
    match spec {
        Value::String(version) => {
            Table::from_iter([("version".to_owned(), version.clone().into())])
        }
        Value::Table(table) => table.clone(),
        other => panic!("not a dependency: {other}"),
    }
}

/// `key.workspace = true`: the value is the workspace's.
fn inherited(value: &Value) -> bool {
    value.get("workspace").and_then(Value::as_bool) == Some(true)
}

fn workspace_table<'a>(workspace: Option<&'a Table>, key: &str) -> &'a Table {
    workspace
        .and_then(|w| w.get(key))
        .and_then(Value::as_table)
        .unwrap_or_else(|| panic!("the workspace has no `workspace.{key}` to inherit from"))
}

/// The `[workspace]` table of the nearest manifest above `root` that has one.
fn workspace_of(root: &Path) -> Table {
    for dir in root.ancestors().skip(1) {
        let path = dir.join("Cargo.toml");
        if path.is_file()
            && let Some(Value::Table(workspace)) = read_toml(&path).remove("workspace")
        {
            return workspace;
        }
    }
    panic!(
        "{}: inherits from a workspace that is not found",
        root.display()
    )
}

fn read_toml(path: &Path) -> Table {
    println!("cargo::rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
