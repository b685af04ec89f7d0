//! A program that dies of a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) runs no
//! exit handler, and its last few milliseconds of events would still sit in the rings. The
//! handler lets the writer (a normal thread) make one more pass, bounded in time, then hands
//! the signal to the handler that was there before (Rust's stack-overflow report) or to the
//! default action.

use crate::recorder::RUNTIME;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

const SIGNALS: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
];
static PREVIOUS: OnceLock<Vec<(libc::c_int, libc::sigaction)>> = OnceLock::new();
static FLUSHING: AtomicBool = AtomicBool::new(false);

pub fn install() {
    let mut previous = Vec::new();
    for sig in SIGNALS {
        // SAFETY: plain sigaction calls with zeroed, then filled, structs.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_fatal_signal as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, &action, &mut old) == 0 {
                previous.push((sig, old));
            }
        }
    }
    let _ = PREVIOUS.set(previous);
}

extern "C" fn on_fatal_signal(
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // A slice has no writer to wait for.
    if !FLUSHING.swap(true, Ordering::AcqRel)
        && !crate::slice_child::active()
        && let Some(rt) = RUNTIME.get()
    {
        let target = rt.passes.load(Ordering::Acquire) + 2;
        for _ in 0..200 {
            if rt.passes.load(Ordering::Acquire) >= target {
                break;
            }
            if let Some(writer) = rt.writer.get() {
                writer.unpark();
            }
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 1_000_000,
            };
            // SAFETY: nanosleep is async-signal-safe.
            unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
        }
    }
    let previous = PREVIOUS
        .get()
        .and_then(|p| p.iter().find(|(s, _)| *s == sig))
        .map(|(_, a)| *a);
    // SAFETY: restores and re-raises, or calls the handler installed before ours with the
    // arguments its flags ask for.
    unsafe {
        match previous {
            Some(old) if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN => {
                libc::sigaction(sig, &old, std::ptr::null_mut());
                if old.sa_flags & libc::SA_SIGINFO != 0 {
                    let handler: extern "C" fn(
                        libc::c_int,
                        *mut libc::siginfo_t,
                        *mut libc::c_void,
                    ) = std::mem::transmute(old.sa_sigaction);
                    handler(sig, info, context);
                } else {
                    let handler: extern "C" fn(libc::c_int) = std::mem::transmute(old.sa_sigaction);
                    handler(sig);
                }
            }
            _ => {
                libc::signal(sig, libc::SIG_DFL);
                libc::raise(sig);
            }
        }
    }
}
