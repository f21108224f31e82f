//! Process and timing controls for a server that answers block requests on time: the monotonic
//! clock in nanoseconds, an absolute sleep on it (`clock_nanosleep(TIMER_ABSTIME)`) finished by
//! a short spin, and the `prctl`/`mlockall` calls that keep a FUSE daemon serving a loop device
//! out of the memory-reclaim paths it would otherwise deadlock in (DEVICES.md, "traps").

use nix::errno::Errno;

/// Now on CLOCK_MONOTONIC, in nanoseconds.
pub fn monotonic_ns() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) {
        Ok(t) => t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64,
        // CLOCK_MONOTONIC cannot fail on Linux; 0 keeps the signature total.
        Err(_) => 0,
    }
}

/// CPU time of the calling thread, in nanoseconds (CLOCK_THREAD_CPUTIME_ID: the scheduler's
/// own account of the time it ran, exact, including the time in the kernel on its behalf).
pub fn thread_cpu_ns() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID) {
        Ok(t) => t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64,
        // A thread's own CPU clock cannot fail on Linux; 0 counts no time on the CPU.
        Err(_) => 0,
    }
}

/// Sleeps until CLOCK_MONOTONIC reads `deadline_ns`: an absolute `clock_nanosleep` to
/// `spin_ns` before it (so a late wake-up of the scheduler is absorbed), then a spin.
pub fn sleep_until(deadline_ns: u64, spin_ns: u64) {
    let wake = deadline_ns.saturating_sub(spin_ns);
    loop {
        let now = monotonic_ns();
        if now >= wake {
            break;
        }
        let ts = libc::timespec {
            tv_sec: (wake / 1_000_000_000) as libc::time_t,
            tv_nsec: (wake % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: `ts` is a valid timespec that lives across the call; the remainder pointer
        // may be null with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        // EINTR: a signal; sleep again. Anything else cannot happen with these arguments.
        if rc != 0 && rc != libc::EINTR {
            break;
        }
    }
    while monotonic_ns() < deadline_ns {
        std::hint::spin_loop();
    }
}

fn prctl(option: libc::c_int, arg: libc::c_ulong) -> Result<(), Errno> {
    // SAFETY: the options used here take one integer argument and no pointers.
    let rc = unsafe {
        libc::prctl(
            option,
            arg,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// `PR_SET_IO_FLUSHER` (Linux 5.6+): this process serves block I/O, so memory allocations
/// made on its behalf must not recurse into writeback of the device it serves.
pub fn set_io_flusher() -> Result<(), Errno> {
    const PR_SET_IO_FLUSHER: libc::c_int = 57;
    prctl(PR_SET_IO_FLUSHER, 1)
}

/// Timer slack of 1 ns for this thread (and the threads it starts after): sleeps end when
/// asked rather than up to 50 µs later.
pub fn set_timer_slack_min() -> Result<(), Errno> {
    prctl(libc::PR_SET_TIMERSLACK, 1)
}

/// Puts the calling thread under SCHED_FIFO at `priority` (1–99); threads it starts after
/// inherit it. A device server's replies are due at exact times: under CPU contention a
/// normal thread wakes milliseconds late, a real-time one within microseconds.
pub fn set_realtime(priority: i32) -> Result<(), Errno> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param that lives across the call; pid 0 is this thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// The calling thread's nice (-20 to 19; Linux keeps one per thread).
pub fn nice() -> i32 {
    // SAFETY: getpriority with PRIO_PROCESS and who = 0 reads the calling thread's nice; no
    // memory is passed. It cannot fail for the calling thread, so -1 is a nice, not an error.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
}

/// Sets the calling thread's nice to `n`; threads it starts after inherit it. Lowering it
/// below the current one needs root or `CAP_SYS_NICE`.
pub fn set_nice(n: i32) -> Result<(), Errno> {
    // SAFETY: setpriority with PRIO_PROCESS and who = 0 changes only the calling thread's
    // nice; no memory is passed.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, n) };
    if rc < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// Sets the nice of thread `tid` (a kernel thread's pid is its thread id) to `n`: root or
/// `CAP_SYS_NICE` for another user's thread or a lower nice.
pub fn set_nice_of(tid: u32, n: i32) -> Result<(), Errno> {
    let who = libc::id_t::from(tid);
    // SAFETY: setpriority with PRIO_PROCESS changes the nice of one thread `who`; no memory is
    // passed. A thread that is gone is ESRCH, an error returned.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, who, n) };
    if rc < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// Puts the calling thread back under the normal scheduler (SCHED_OTHER).
pub fn set_normal() -> Result<(), Errno> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as in set_realtime.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
    if rc < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// Locks every present and future page of this process in memory, so that serving a request
/// never waits on a page fault that needs reclaim.
///
/// Pages are locked as they are first touched (MCL_ONFAULT), so that a large mapping made
/// later (the device server's image) is not filled in whole when it is made.
pub fn lock_all_memory() -> Result<(), Errno> {
    // SAFETY: mlockall takes flags only.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT) };
    if rc < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// CPU time of process `pid` in seconds (its live threads' schedstat, else fields 14 and 15 of
/// /proc/PID/stat), None when it is gone.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    threads_cpu_ns(pid)
        .map(|ns| ns as f64 / 1e9)
        .or_else(|| ticks_cpu_seconds(pid))
}

/// The CPU time of every thread of `pid`, ns: the sum of the first field of
/// /proc/PID/task/TID/schedstat (exact, where /proc/PID/stat counts 10 ms ticks). None without
/// schedstats. Threads that have ended are not in it: for a server whose threads live as long
/// as it does.
fn threads_cpu_ns(pid: u32) -> Option<u64> {
    let mut total = 0u64;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let s = std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok()?;
        total += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// User + system time from /proc/PID/stat, in clock ticks.
fn ticks_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    // SAFETY: sysconf takes an integer and reads no memory of ours.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    Some((utime + stime) as f64 / hz)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_cpu_time_is_exact_and_grows_with_work() {
        let me = std::process::id();
        let a = threads_cpu_ns(me).expect("schedstat of this process");
        // Work until the counter moves up (however busy the machine, it does). The sum is over
        // the process's threads: another test's thread ending between the two reads takes its
        // time with it, so the sum may also go down meanwhile.
        let mut b = a;
        let mut x = 0u64;
        while b <= a {
            for _ in 0..100_000 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            b = threads_cpu_ns(me).unwrap();
        }
        // Counted in ns, not in 10 ms ticks.
        assert_ne!((b - a) % 10_000_000, 0, "{a} -> {b} ({x})");
        assert!(process_cpu_seconds(me).unwrap() >= b as f64 / 1e9 - 1e-3);
    }

    #[test]
    fn sleep_until_reaches_the_deadline_and_not_much_later() {
        let start = monotonic_ns();
        let deadline = start + 2_000_000;
        sleep_until(deadline, 50_000);
        let end = monotonic_ns();
        assert!(end >= deadline, "woke {} ns early", deadline - end);
        // Generous: a loaded 2-core VM can be slow, but not 50 ms slow.
        assert!(
            end - deadline < 50_000_000,
            "woke {} ns late",
            end - deadline
        );
    }

    #[test]
    fn own_cpu_time_is_readable() {
        assert!(process_cpu_seconds(std::process::id()).is_some());
    }
}
