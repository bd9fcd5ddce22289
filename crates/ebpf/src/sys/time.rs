//! The clocks of record timestamps.

/// `CLOCK_REALTIME - CLOCK_BOOTTIME` in nanoseconds: added to `bpf_ktime_get_boot_ns()` it
/// gives the wall-clock time of a record.
pub fn boot_to_wall_offset() -> u64 {
    let boot = now(libc::CLOCK_BOOTTIME);
    let wall = now(libc::CLOCK_REALTIME);
    wall.saturating_sub(boot)
}

/// `CLOCK_BOOTTIME` now, in nanoseconds (the clock of record timestamps).
pub fn boot_now() -> u64 {
    now(libc::CLOCK_BOOTTIME)
}

fn now(clock: libc::clockid_t) -> u64 {
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; clock_gettime writes only into it.
        let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
        if rc != 0 {
            return 0;
        }
        (ts.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec as u64)
    }
}
