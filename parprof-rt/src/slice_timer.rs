//! The runtime's timers: per-thread POSIX timers that signal one thread, each telling its
//! handler (in `slices`) which timer fired.

/// `si_value` of the runtime's timer signal: which timer fired.
pub(crate) const TIMER_CHECKPOINT: usize = 1;
pub(crate) const TIMER_SLICE_CPU: usize = 2;
pub(crate) const TIMER_SLICE_WALL: usize = 3;

/// Creates a timer on `clock` that signals thread `tid` with `which` after `ns`, and every
/// `ns` after that when `periodic`. Returns the kernel's timer id.
pub(crate) fn arm_timer(
    clock: libc::clockid_t,
    tid: libc::pid_t,
    signal: libc::c_int,
    which: usize,
    ns: u64,
    periodic: bool,
) -> std::io::Result<isize> {
    // SAFETY: plain timer calls with zeroed, then filled, structs.
    unsafe {
        let mut event: libc::sigevent = std::mem::zeroed();
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_notify_thread_id = tid;
        event.sigev_signo = signal;
        event.sigev_value.sival_ptr = which as *mut libc::c_void;
        let mut timer: libc::timer_t = std::ptr::null_mut();
        if libc::timer_create(clock, &mut event, &mut timer) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let time = libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        let spec = libc::itimerspec {
            it_interval: if periodic {
                time
            } else {
                libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                }
            },
            it_value: time,
        };
        if libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) != 0 {
            let e = std::io::Error::last_os_error();
            libc::timer_delete(timer);
            return Err(e);
        }
        Ok(timer as isize)
    }
}
