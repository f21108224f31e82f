//! Which part of a late reply the machine, not the emulator, is to blame for.
//!
//! The timing thread sleeps until just before each reply is due. On a kernel without
//! preemption (`CONFIG_PREEMPT_NONE`, this lab's VM), a SCHED_FIFO thread woken while any
//! other task runs a long path in the kernel on its CPU (a filesystem's journal commit, a
//! writeback worker, the workload's own system calls) waits until that task reaches a
//! scheduling point, whatever the priorities, and the scheduler queues it there even when
//! the other CPU is free; a virtual CPU that was halted waits for its host to run it again.
//! Measured with the scheduler's trace over a run of journal-size-as-published (a build
//! running beside it): 1,219 of its 1,226 replies over 0.5 ms late came after a late
//! wake-up of the timing thread; of the 563 wake-ups over 0.3 ms late, 498 had waited for the
//! CPU behind such a task (jbd2 124 times, writeback workers, the workload, an idle virtual
//! CPU, the build's compilers) and 65 had run on time and spent the time in the kernel
//! copying the FUSE ring's incoming requests in. Moving the held thread to the other CPU
//! (`sched_setaffinity` from a watcher there) did not make fewer replies late on this
//! 2-core machine under load: the other CPU was held as often.
//!
//! A wait's time splits into the time the thread was on its CPU (CLOCK_THREAD_CPUTIME_ID:
//! the system call and the kernel's copies for the ring) and the time off it (asleep, or
//! woken and not yet run). The thread sleeps first and runs after, so the off-CPU time past
//! the wake-up it asked for is when the machine held it off ([`HeldOff`]); a late reply whose
//! lateness lies mostly there is counted as the machine's (`late_held_off` in the counts, see
//! `stats::Stats::record`), the rest as the emulator's own work. Interrupts taken while the
//! thread runs count in its CPU time on a kernel without `CONFIG_IRQ_TIME_ACCOUNTING` (this
//! one), so they count as its own work too: the split is the machine's share at least.

/// The span after the wake-up a wait asked for during which the thread was still off its
/// CPU (empty when it ran by then).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeldOff {
    from: u64,
    until: u64,
}

impl HeldOff {
    /// Of a wait entered at `entered`, asked to end by `asked`, that returned at `returned`
    /// having run `cpu_ns` on the CPU meanwhile (all on the monotonic clock).
    pub fn of_wait(entered: u64, asked: u64, returned: u64, cpu_ns: u64) -> HeldOff {
        let off_cpu = returned.saturating_sub(entered).saturating_sub(cpu_ns);
        let ran_at = entered.saturating_add(off_cpu);
        let from = asked.max(entered);
        if ran_at <= from {
            return HeldOff::default();
        }
        HeldOff {
            from,
            until: ran_at,
        }
    }

    /// How much of a reply's lateness (due at `done_ns`, sent at `replied_ns`) falls in the
    /// span.
    pub fn share(&self, done_ns: u64, replied_ns: u64) -> u64 {
        self.until
            .min(replied_ns)
            .saturating_sub(self.from.max(done_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_off_cpu_time_past_the_asked_wake_up_is_the_machines() {
        // Asleep from 0, asked to wake at 1 ms, back at 3 ms having run 100 µs: off the CPU
        // until 2.9 ms, 1.9 ms past the wake-up it asked for.
        let h = HeldOff::of_wait(0, 1_000_000, 3_000_000, 100_000);
        assert_eq!(
            h,
            HeldOff {
                from: 1_000_000,
                until: 2_900_000
            }
        );
        // A reply due at 1 ms and sent at 3 ms: 1.9 of its 2 ms late are the machine's.
        assert_eq!(h.share(1_000_000, 3_000_000), 1_900_000);
        // A reply due at 2.8 ms: 0.1 ms of its 0.2 ms.
        assert_eq!(h.share(2_800_000, 3_000_000), 100_000);
        // One due after the thread ran: none of it.
        assert_eq!(h.share(2_950_000, 3_000_000), 0);
    }

    #[test]
    fn a_wait_that_ran_on_time_and_spent_it_in_the_kernel_is_the_emulators() {
        // Woken at 0.5 ms by an incoming request (before the asked 1 ms), then 2.5 ms on the
        // CPU in the kernel copying the ring's requests in: nothing is the machine's.
        let h = HeldOff::of_wait(0, 1_000_000, 3_000_000, 2_500_000);
        assert_eq!(h, HeldOff::default());
        assert_eq!(h.share(1_000_000, 3_000_000), 0);
        // Half on the CPU, half held off: the reply's 2 ms lateness is 1 ms the machine's.
        let h = HeldOff::of_wait(0, 1_000_000, 3_000_000, 1_000_000);
        assert_eq!(h.share(1_000_000, 3_000_000), 1_000_000);
    }
}
