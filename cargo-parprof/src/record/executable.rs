//! What `record` can tell of an executable before it runs it, with neither cargo nor rustc
//! nor the program's sources: that it can run at all, and whether `cargo parprof build` made
//! it (the mark of its rayon-core hooks, [`crate::record::hook_marker`]).

use crate::record::hook_marker;
use crate::recording::RayonHooks;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// An executable that can be recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executable {
    /// Where it is: the path given, or found in `PATH` for a bare name.
    pub path: PathBuf,
    /// Its file name, which names the run.
    pub name: String,
    /// Whether its rayon's worker lifecycle will be recorded.
    pub rayon_hooks: RayonHooks,
}

/// Why an executable cannot be recorded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ExecutableError {
    #[error(
        "cannot record {}: no such file (give the path that `cargo parprof build` printed, \
         e.g. `./NAME` for a copy in this folder)",
        .0.display()
    )]
    NotFound(PathBuf),
    #[error("cannot record `{0}`: no such program in PATH (give its path, e.g. `./{0}`)")]
    NotInPath(String),
    #[error("cannot record {}: it is a folder, not an executable", .0.display())]
    Folder(PathBuf),
    #[error(
        "cannot record {path}: it is not executable (mode {mode:03o}); a copy may have lost \
         its mode: `chmod +x {path}`, or copy it with `cp -p` or `tar`",
        path = .path.display()
    )]
    NotExecutable { path: PathBuf, mode: u32 },
    #[error("cannot record {}: {}", .path.display(), .reason)]
    Unusable { path: PathBuf, reason: String },
}

/// Why a run has no rayon lifecycle when its executable holds no mark (the report's note).
pub const NOT_BUILT_FOR_PROFILING: &str = "the executable holds no rayon-core hooks of \
    parprof: it was not built by `cargo parprof build` (or that build could not hook its \
    rayon-core, and said why). Build it with `cargo parprof build` and record that executable \
    to get the workers' states, tasks and diagnoses";

/// Checks that `exe` can run and reads what its build left in it.
pub fn inspect(exe: &Path) -> Result<Executable, ExecutableError> {
    let path = locate(exe)?;
    let meta = std::fs::metadata(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ExecutableError::NotFound(path.clone()),
        _ => ExecutableError::Unusable {
            path: path.clone(),
            reason: e.to_string(),
        },
    })?;
    if meta.is_dir() {
        return Err(ExecutableError::Folder(path));
    }
    let mode = meta.permissions().mode() & 0o777;
    if !meta.is_file() || mode & 0o111 == 0 {
        return Err(ExecutableError::NotExecutable { path, mode });
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "program".to_owned());
    let rayon_hooks = hooks_of(&path);
    Ok(Executable {
        path,
        name,
        rayon_hooks,
    })
}

/// The path of `exe`: as given when it names a folder, else looked up in `PATH` as `exec`
/// would.
fn locate(exe: &Path) -> Result<PathBuf, ExecutableError> {
    if exe.as_os_str().is_empty() {
        return Err(ExecutableError::NotFound(exe.to_path_buf()));
    }
    let mut components = exe.components();
    let bare = matches!(
        (components.next(), components.next()),
        (Some(Component::Normal(_)), None)
    );
    if !bare {
        return Ok(exe.to_path_buf());
    }
    let paths = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&paths)
        .map(|dir| dir.join(exe))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| ExecutableError::NotInPath(exe.to_string_lossy().into_owned()))
}

/// What the executable's bytes say of its rayon: hooked (the mark), not hooked (rayon-core's
/// names but no mark) or no rayon at all.
fn hooks_of(path: &Path) -> RayonHooks {
    let bytes = match read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            return RayonHooks::Unavailable {
                reason: format!("the executable could not be read to find its hooks ({e})"),
            };
        }
    };
    if let Some(version) = hook_marker::find(&bytes) {
        return RayonHooks::Hooked { version };
    }
    let names_rayon = |name: &[u8]| memchr::memmem::find(&bytes, name).is_some();
    if names_rayon(b"rayon_core") || names_rayon(b"rayon-core") {
        RayonHooks::Unavailable {
            reason: NOT_BUILT_FOR_PROFILING.to_owned(),
        }
    } else {
        RayonHooks::NoRayon
    }
}

/// The executable's bytes, mapped rather than read (a program can be hundreds of MB).
fn read(path: &Path) -> std::io::Result<Bytes> {
    let file = std::fs::File::open(path)?;
    if file.metadata()?.len() == 0 {
        return Ok(Bytes::Empty);
    }
    // SAFETY: the map is only read, while this function's caller runs; a program rewritten
    // meanwhile (a concurrent build) gives wrong bytes, never undefined behaviour in safe code
    // that only searches them.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    Ok(Bytes::Mapped(map))
}

/// A file's bytes.
enum Bytes {
    Empty,
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Empty => &[],
            Bytes::Mapped(map) => map,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(bytes: &[u8], mode: u32) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("program");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        (dir, path)
    }

    #[test]
    fn a_marked_executable_is_hooked() {
        let bytes = [
            b"\x7fELF..".as_slice(),
            hook_marker::mark("1.13.0").as_bytes(),
        ]
        .concat();
        let (_dir, path) = file_with(&bytes, 0o755);
        let exe = inspect(&path).unwrap();
        assert_eq!(
            exe.rayon_hooks,
            RayonHooks::Hooked {
                version: "1.13.0".into()
            }
        );
        assert_eq!(exe.name, "program");
    }

    #[test]
    fn rayon_without_the_mark_is_not_hooked_and_no_rayon_is_said() {
        let (_dir, path) = file_with(b"\x7fELF _ZN10rayon_core8registry", 0o700);
        let RayonHooks::Unavailable { reason } = inspect(&path).unwrap().rayon_hooks else {
            panic!("hooked?");
        };
        assert!(reason.contains("cargo parprof build"), "{reason}");
        let (_dir, plain) = file_with(b"\x7fELF main", 0o700);
        assert_eq!(inspect(&plain).unwrap().rayon_hooks, RayonHooks::NoRayon);
        let (_dir, empty) = file_with(b"", 0o700);
        assert_eq!(inspect(&empty).unwrap().rayon_hooks, RayonHooks::NoRayon);
    }

    #[test]
    fn what_cannot_run_is_refused_with_the_reason() {
        let (dir, text) = file_with(b"not a program", 0o644);
        let err = inspect(&text).unwrap_err();
        assert_eq!(
            err,
            ExecutableError::NotExecutable {
                path: text.clone(),
                mode: 0o644
            }
        );
        assert!(err.to_string().contains("chmod +x"), "{err}");
        assert_eq!(
            inspect(dir.path()).unwrap_err(),
            ExecutableError::Folder(dir.path().to_path_buf())
        );
        assert_eq!(
            inspect(Path::new(".")).unwrap_err(),
            ExecutableError::Folder(PathBuf::from("."))
        );
        let missing = dir.path().join("missing");
        assert_eq!(
            inspect(&missing).unwrap_err(),
            ExecutableError::NotFound(missing)
        );
        assert!(matches!(
            inspect(Path::new("no-such-program-of-parprof")).unwrap_err(),
            ExecutableError::NotInPath(_)
        ));
        assert!(matches!(
            inspect(Path::new("")).unwrap_err(),
            ExecutableError::NotFound(_)
        ));
    }

    #[test]
    fn a_bare_name_is_found_in_path() {
        let exe = inspect(Path::new("sh")).unwrap();
        assert!(exe.path.is_absolute(), "{:?}", exe.path);
        assert_eq!(exe.name, "sh");
    }
}
