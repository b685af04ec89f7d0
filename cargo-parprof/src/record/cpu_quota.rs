//! How many CPUs the profiled program may use: its CPU affinity, capped by its cgroup's CPU
//! quota. A container limited to 2 CPUs on a 64-core host sees 64 CPUs online but can run
//! only 2 threads at a time; rayon sizes its pool by the CPUs it sees, so that case is the
//! commonest cause of oversubscription.

use crate::recording::kernel_records::CpuQuota;

impl CpuQuota {
    /// Reads the quota of the calling process (which the program it starts inherits).
    pub fn of_this_process() -> CpuQuota {
        // SAFETY: sysconf has no preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
        CpuQuota {
            online,
            affinity: affinity_cpus().unwrap_or(online),
            cgroup_limit: cgroup_limit(),
        }
    }
}

fn affinity_cpus() -> Option<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let ok =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    // SAFETY: the set was filled by the kernel.
    (ok == 0).then(|| unsafe { libc::CPU_COUNT(&set) } as usize)
}

/// The cgroup v2 `cpu.max` of this process's cgroup, or of its nearest limited ancestor.
fn cgroup_limit() -> Option<f64> {
    const ROOT: &str = "/sys/fs/cgroup";
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // cgroup v2: the line `0::/path`.
    let path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    let mut dir = std::path::Path::new(ROOT).join(path.trim_start_matches('/'));
    loop {
        let limit = std::fs::read_to_string(dir.join("cpu.max"));
        if let Some(limit) = limit.ok().and_then(|s| parse_cpu_max(&s)) {
            return Some(limit);
        }
        if dir.as_os_str() == ROOT || !dir.pop() {
            return None;
        }
    }
}

/// `"200000 100000"` → 2.0 CPUs; `"max 100000"` → no limit.
fn parse_cpu_max(s: &str) -> Option<f64> {
    let mut parts = s.split_whitespace();
    let quota: f64 = parts.next()?.parse().ok()?;
    let period: f64 = parts.next()?.parse().ok()?;
    (period > 0.0).then_some(quota / period)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_is_quota_over_period() {
        assert_eq!(parse_cpu_max("200000 100000\n"), Some(2.0));
        assert_eq!(parse_cpu_max("50000 100000"), Some(0.5));
        assert_eq!(parse_cpu_max("max 100000"), None);
        assert_eq!(parse_cpu_max(""), None);
    }

    #[test]
    fn the_usable_cpus_are_the_smaller_of_affinity_and_quota() {
        let quota = |affinity, cgroup_limit| CpuQuota {
            online: 64,
            affinity,
            cgroup_limit,
        };
        assert_eq!(quota(64, Some(2.0)).usable(), 2.0);
        assert_eq!(quota(4, None).usable(), 4.0);
        assert_eq!(quota(1, Some(2.5)).usable(), 1.0);
        let here = CpuQuota::of_this_process();
        assert!(here.online >= 1 && here.affinity >= 1 && here.usable() > 0.0);
    }
}
