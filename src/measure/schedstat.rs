//! How long a phase's own threads waited for a CPU: the scheduler's per-thread counters in
//! `/proc/self/task/TID/schedstat` (time on a CPU, time runnable but waiting on a run queue,
//! and the count of time slices; nanoseconds, kept without `sched_schedstats`). A CPU-bound
//! phase on a busy machine is slower by the time its threads queued for a CPU; the
//! filesystem had no part in that time, and the disk's clock (which stops only for the
//! emulated disk) does not take it off.
//!
//! Which threads: the ones that did the phase's work, i.e. those that finished a worker's
//! [`Recorder`](super::Recorder). Each takes its own reading when it finishes its recorder,
//! on its own thread and so before it is joined: a worker thread that has exited by the end
//! of the phase is not lost. A thread that was alive when the phase started (the calling
//! thread of a one-worker phase) counts from its reading at the start; one born during the
//! phase counts whole.
//!
//! The kernel brings a running thread's counters up to date at its scheduler tick and when it
//! is switched out, so a thread's own reading lags by at most a tick (1–4 ms).

use std::collections::HashMap;

use crate::results::CpuWait;

/// One thread's scheduler counters, nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskSched {
    /// Time on a CPU (field 1).
    pub on_cpu_ns: u64,
    /// Time runnable, waiting on a run queue (field 2).
    pub run_delay_ns: u64,
}

impl TaskSched {
    /// The counters of a `schedstat` file: `ON_CPU RUN_DELAY SLICES`.
    pub fn parse(text: &str) -> Option<Self> {
        let mut it = text.split_whitespace().map(|f| f.parse::<u64>().ok());
        let on_cpu_ns = it.next()??;
        let run_delay_ns = it.next()??;
        Some(Self {
            on_cpu_ns,
            run_delay_ns,
        })
    }

    /// What was added since `earlier` (never below zero).
    fn since(self, earlier: Self) -> Self {
        Self {
            on_cpu_ns: self.on_cpu_ns.saturating_sub(earlier.on_cpu_ns),
            run_delay_ns: self.run_delay_ns.saturating_sub(earlier.run_delay_ns),
        }
    }
}

/// The calling thread's id and counters; `None` where the kernel does not keep them.
pub fn this_thread() -> Option<(i32, TaskSched)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some((nix::unistd::gettid().as_raw(), TaskSched::parse(&text)?))
}

/// The counters of every thread of this process at a phase's start, by thread id.
#[derive(Debug, Clone, Default)]
pub struct SchedMark {
    start: HashMap<i32, TaskSched>,
}

impl SchedMark {
    pub fn now() -> Self {
        let mut start = HashMap::new();
        if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
            for e in dir.flatten() {
                let tid = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok());
                let text = std::fs::read_to_string(e.path().join("schedstat")).ok();
                if let (Some(tid), Some(s)) = (tid, text.as_deref().and_then(TaskSched::parse)) {
                    start.insert(tid, s);
                }
            }
        }
        Self { start }
    }

    /// The wait of the threads whose end readings are `ends` (one per finished recorder; a
    /// thread that finished several counts once, at its latest reading). `None` when no
    /// thread had a reading.
    pub fn since(&self, ends: impl IntoIterator<Item = (i32, TaskSched)>) -> Option<CpuWait> {
        let mut last: HashMap<i32, TaskSched> = HashMap::new();
        for (tid, s) in ends {
            let e = last.entry(tid).or_insert(s);
            if s.on_cpu_ns >= e.on_cpu_ns {
                *e = s;
            }
        }
        if last.is_empty() {
            return None;
        }
        let mut out = CpuWait {
            threads: last.len() as u32,
            ..CpuWait::default()
        };
        for (tid, end) in last {
            let d = end.since(self.start.get(&tid).copied().unwrap_or_default());
            out.run_delay_ns += d.run_delay_ns;
            out.on_cpu_ns += d.on_cpu_ns;
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(on_cpu_ns: u64, run_delay_ns: u64) -> TaskSched {
        TaskSched {
            on_cpu_ns,
            run_delay_ns,
        }
    }

    #[test]
    fn a_schedstat_line_reads_as_on_cpu_then_run_delay() {
        assert_eq!(
            TaskSched::parse("123456789 4242 17\n"),
            Some(s(123456789, 4242))
        );
        assert_eq!(TaskSched::parse("5 6"), Some(s(5, 6)));
        assert_eq!(TaskSched::parse(""), None);
        assert_eq!(TaskSched::parse("5\n"), None);
        assert_eq!(TaskSched::parse("x 6 1"), None);
        let (tid, _) = this_thread().expect("Linux keeps schedstat per thread");
        assert_eq!(tid, nix::unistd::gettid().as_raw());
    }

    #[test]
    fn threads_alive_at_the_start_count_from_it_and_new_ones_whole_and_once() {
        let mark = SchedMark {
            start: HashMap::from([(10, s(1_000, 100)), (11, s(50, 5))]),
        };
        // Thread 10 (the caller) finished two recorders: its later reading counts, once.
        // Thread 20 was born in the phase and has exited: its reading counts whole.
        let w = mark
            .since([(10, s(1_500, 130)), (20, s(400, 70)), (10, s(1_600, 150))])
            .expect("readings");
        assert_eq!(w.threads, 2);
        assert_eq!(w.on_cpu_ns, 600 + 400);
        assert_eq!(w.run_delay_ns, 50 + 70);
        // Thread 11 did no work of the phase: it is not counted.
        assert!(mark.since([]).is_none());
        // A reused id whose counters went back never counts below zero.
        let w = mark.since([(10, s(10, 1))]).expect("reading");
        assert_eq!((w.on_cpu_ns, w.run_delay_ns), (0, 0));
    }

    #[test]
    fn the_mark_sees_this_thread() {
        let (tid, _) = this_thread().expect("schedstat");
        let mark = SchedMark::now();
        assert!(mark.start.contains_key(&tid));
        let spawned = std::thread::spawn(|| {
            let mut x = 0u64;
            for i in 0..200_000u64 {
                x = x.wrapping_add(std::hint::black_box(i));
            }
            std::hint::black_box(x);
            this_thread().expect("schedstat")
        })
        .join()
        .expect("no panic");
        let (_, now) = this_thread().expect("schedstat");
        let w = mark
            .since([(tid, now), spawned])
            .expect("both threads counted");
        assert_eq!(w.threads, 2);
        assert!(w.on_cpu_ns >= spawned.1.on_cpu_ns, "{w:?} {spawned:?}");
    }
}
