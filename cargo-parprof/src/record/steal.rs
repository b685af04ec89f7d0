//! Steal time: CPU time the hypervisor gave to other guests while this virtual machine's CPUs
//! had work. The guest kernel does not see it as context switches, and it accounts it outside
//! the threads' CPU time, so a probe interval that spans it looks active for that long. It is
//! only visible machine-wide, in the `steal` column of `/proc/stat`, in clock ticks.

/// The machine's total steal time so far, in ns, over all CPUs; `None` where `/proc/stat`
/// has no steal column (not Linux, or a kernel older than 2.6.11).
pub fn machine_steal_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks = steal_ticks(&stat)?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0)?;
    Some(ticks.saturating_mul(1_000_000_000) / hz)
}

/// The `steal` field (the 8th number) of the all-CPUs `cpu` line of `/proc/stat`.
fn steal_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steal_column_of_the_all_cpus_line_is_read() {
        let stat = "cpu  1361762 41801 150273 601469 3847 0 749 1007 0 0\n\
                    cpu0 653409 18890 71967 334386 935 0 106 510 0 0\n";
        assert_eq!(steal_ticks(stat), Some(1007));
        assert_eq!(steal_ticks("cpu  1 2 3 4 5 6 7\n"), None);
        assert_eq!(steal_ticks("intr 5\n"), None);
        assert!(machine_steal_ns().is_some());
    }
}
