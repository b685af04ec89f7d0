//! The workspace's `Cargo.lock`, restored on every way out of the patched build.
//!
//! cargo rewrites the lock file when it builds with the hooked copies (the patches and the
//! copies' `parprof-rt` dependency go into it), and has no stable way to write it elsewhere, so
//! the bytes are saved before the build and written back after. A drop alone misses the most
//! common way out, Ctrl-C: SIGINT ends the process without unwinding. So while the build runs,
//! SIGINT, SIGTERM and SIGHUP are caught: the handler passes the signal on to cargo (which may
//! be in another process group, or signalled alone) and notes it; once cargo has exited, the
//! lock file is restored and the signal raised again with its former disposition, so that
//! parprof still ends as the signal asked (exit status 128 + signal for the shell).

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

/// The signals that end a build early and are caught while it runs.
const CAUGHT: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The signal received while the build ran (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// The build's cargo process, which the handler passes the signal on to (0: none yet).
static CARGO_PID: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    // Only async-signal-safe work here: atomics and kill(2).
    RECEIVED.store(signal, Ordering::SeqCst);
    let pid = CARGO_PID.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill has no memory-safety preconditions; `pid` is our unreaped child.
        unsafe { libc::kill(pid, signal) };
    }
}

/// Restores a workspace's `Cargo.lock` when dropped, and catches the signals that would end
/// the process before it could (see the module's description).
pub struct LockFileGuard {
    path: PathBuf,
    /// The lock file's bytes before the build (`None`: there was none).
    saved: Option<Vec<u8>>,
    /// The dispositions the caught signals had before (not caught: they were ignored).
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

impl LockFileGuard {
    /// Saves the lock file at `path` and catches the ending signals until dropped.
    pub fn save(path: &Path) -> Result<LockFileGuard> {
        let saved = match std::fs::read(path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            // Unreadable is not absent: restoring "absent" would delete the user's file.
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "cannot read {} to restore it after the profiling build",
                        path.display()
                    )
                });
            }
        };
        RECEIVED.store(0, Ordering::SeqCst);
        CARGO_PID.store(0, Ordering::SeqCst);
        Ok(LockFileGuard {
            path: path.to_path_buf(),
            saved,
            previous: catch_signals(),
        })
    }

    /// The build's cargo process: an ending signal is passed on to it, so that it stops
    /// writing before the lock file is restored. A signal received already is passed on now.
    pub fn watch(&self, cargo_pid: u32) {
        let pid = libc::pid_t::try_from(cargo_pid).unwrap_or(0);
        CARGO_PID.store(pid, Ordering::SeqCst);
        let signal = RECEIVED.load(Ordering::SeqCst);
        if signal != 0 && pid > 0 {
            // SAFETY: as in the handler.
            unsafe { libc::kill(pid, signal) };
        }
    }

    /// cargo has exited (and was reaped): its pid is no longer ours to signal.
    pub fn unwatch(&self) {
        CARGO_PID.store(0, Ordering::SeqCst);
    }

    /// The signal received while the build ran, if any.
    pub fn interrupted_by(&self) -> Option<libc::c_int> {
        Some(RECEIVED.load(Ordering::SeqCst)).filter(|&s| s != 0)
    }

    fn restore(&self) -> std::io::Result<()> {
        match &self.saved {
            Some(bytes) if std::fs::read(&self.path).ok().as_ref() == Some(bytes) => Ok(()),
            Some(bytes) => std::fs::write(&self.path, bytes),
            None => match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            },
        }
    }
}

impl Drop for LockFileGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            crate::console::note!(
                "parprof: could not restore {} after the profiling build: {e}",
                self.path.display()
            );
        }
        self.unwatch();
        for (signal, previous) in &self.previous {
            // SAFETY: puts back a disposition the kernel gave us.
            unsafe { libc::sigaction(*signal, previous, std::ptr::null_mut()) };
        }
        if let Some(signal) = self.interrupted_by() {
            crate::console::note!("parprof: the build was interrupted; the lock file is as it was");
            // With its former disposition back, the signal ends the process as it would have.
            // SAFETY: raise has no memory-safety preconditions.
            unsafe { libc::raise(signal) };
        }
    }
}

/// Installs [`on_signal`] for each of [`CAUGHT`] that is not ignored (a build started with
/// `nohup`, or in the background, keeps ignoring it); returns their former dispositions.
fn catch_signals() -> Vec<(libc::c_int, libc::sigaction)> {
    let mut previous = Vec::new();
    for signal in CAUGHT {
        // SAFETY: a zeroed sigaction is a valid value; the fields that matter are filled.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: valid pointers to a sigset and two sigactions.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        let installed = unsafe {
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, &mut old) == 0
        };
        if !installed {
            continue;
        }
        if old.sa_sigaction == libc::SIG_IGN {
            // SAFETY: as above; ignored it was, ignored it stays.
            unsafe { libc::sigaction(signal, &old, std::ptr::null_mut()) };
            continue;
        }
        previous.push((signal, old));
    }
    previous
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_file_is_restored_or_removed_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("Cargo.lock");
        std::fs::write(&lock, b"before").unwrap();
        {
            let _guard = LockFileGuard::save(&lock).unwrap();
            std::fs::write(&lock, b"patched").unwrap();
        }
        assert_eq!(std::fs::read(&lock).unwrap(), b"before");

        let absent = dir.path().join("absent/Cargo.lock");
        std::fs::create_dir(absent.parent().unwrap()).unwrap();
        {
            let _guard = LockFileGuard::save(&absent).unwrap();
            std::fs::write(&absent, b"made by the build").unwrap();
        }
        assert!(!absent.exists());
    }

    #[test]
    fn an_unreadable_lock_file_is_an_error_not_an_absent_one() {
        let dir = tempfile::tempdir().unwrap();
        // A folder where the lock file should be: reading it fails, but not as NotFound.
        let lock = dir.path().join("Cargo.lock");
        std::fs::create_dir(&lock).unwrap();
        assert!(LockFileGuard::save(&lock).is_err());
        assert!(lock.is_dir(), "nothing removed");
    }
}
