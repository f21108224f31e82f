//! How long each side of a timed question waited for a CPU. A phase whose threads were
//! runnable but queued behind other work was slowed by the machine, not by the filesystem,
//! and the disk's clock does not stop for it; a finding that compares elapsed time (or a rate
//! over it) says so first where a side's phases waited over
//! [`NOTABLE_CPU_WAIT`](crate::results::cpuwait::NOTABLE_CPU_WAIT) of their thread time.

use serde::{Deserialize, Serialize};

use super::{compared_phases, label};
use crate::results::cpuwait::NOTABLE_CPU_WAIT;
use crate::results::{Compares, Question, RunResult};

/// One side's wait for a CPU over the phases the question compares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideWait {
    /// The side: its testbed or workload label, or its phase for a question of two phases.
    pub side: String,
    /// Of the side's compared phases' thread time (threads × wall time, added up), the share
    /// runnable but waiting for a CPU, 0–1.
    pub share: f64,
    /// How many of the side's compared phases recorded the wait.
    pub phases: u32,
    /// Where a compared phase ran more threads than the machine has CPUs: (its threads, the
    /// CPUs). Its threads then queue behind each other, so part of the wait is the workload's
    /// own, not the machine's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_threads: Option<(u32, u32)>,
}

impl SideWait {
    /// Whether the side waited long enough for a report to say so.
    pub fn notable(&self) -> bool {
        self.share > NOTABLE_CPU_WAIT
    }
}

/// Each side's wait, baseline first; a side whose phases recorded none is left out (results
/// from before fsgauge recorded it have none).
pub fn side_waits(q: &Question, results: &[RunResult]) -> Vec<SideWait> {
    // (run-queue wait, thread time, phases) per side.
    let mut sums = [(0.0, 0.0, 0u32), (0.0, 0.0, 0u32)];
    let mut own: [Option<(u32, u32)>; 2] = [None, None];
    for (r, p) in compared_phases(q, results) {
        let Some(w) = p.cpu_wait else { continue };
        let side = match (q.compares, label(q, r)) {
            (Compares::Phases, _) if p.name == q.baseline => 0,
            (Compares::Phases, _) => 1,
            (_, Some(l)) if l == q.baseline => 0,
            _ => 1,
        };
        let cpus = r.host.cpus.max(1);
        if w.threads > cpus && own[side].is_none_or(|(t, _)| w.threads > t) {
            own[side] = Some((w.threads, cpus));
        }
        let s = &mut sums[side];
        s.0 += w.run_delay_s();
        s.1 += p.wall_s * w.threads as f64;
        s.2 += 1;
    }
    [&q.baseline, &q.variant]
        .into_iter()
        .zip(sums)
        .zip(own)
        .filter(|((_, (_, thread_s, _)), _)| *thread_s > 0.0)
        .map(
            |((side, (wait_s, thread_s, phases)), own_threads)| SideWait {
                side: side.clone(),
                share: (wait_s / thread_s).min(1.0),
                phases,
                own_threads,
            },
        )
        .collect()
}

/// What a finding says first for each side that waited over the threshold: `journal-1G's
/// phases waited 12% of their time for a CPU: the machine, not the filesystem`.
/// A side whose phases ran more threads than the machine has CPUs is named with them: its
/// threads queued behind each other too, and when every side said is such a side the sentence
/// does not blame the machine alone.
pub fn warning(waits: &[SideWait]) -> Option<String> {
    let notable: Vec<&SideWait> = waits.iter().filter(|w| w.notable()).collect();
    let said: Vec<String> = notable
        .iter()
        .map(|w| {
            let own = w.own_threads.map_or(String::new(), |(t, c)| {
                format!(" ({t} threads on {c} CPUs)")
            });
            format!("{}'s phases waited {:.0}%{own}", w.side, w.share * 100.0)
        })
        .collect();
    let all_own = notable.iter().all(|w| w.own_threads.is_some());
    (!said.is_empty()).then(|| {
        let why = if all_own {
            "part of that is the workload's own threads queued behind each other, part the machine's, and the two are not told apart"
        } else {
            "the machine, not the filesystem (elapsed_less_runq and ops_per_s_less_runq take that wait off a one-thread phase)"
        };
        format!("{} of their time for a CPU: {why}", said.join(" and "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::clock::bare_result;
    use crate::results::{CpuWait, PhaseResult, StudyInfo};

    fn run(label: &str, rep: u32, wall_s: f64, wait: Option<(u64, u32)>) -> RunResult {
        let mut r = bare_result(label, rep, "fdtree");
        r.study = Some(StudyInfo {
            plan: "p".into(),
            workload: "deep-4K".into(),
            questions: vec![question()],
            scale: 1.0,
        });
        let mut p: PhaseResult = crate::measure::PhaseTotals::new("file_remove").into_result(&[]);
        p.wall_s = wall_s;
        p.ops = 1000;
        p.ops_per_s = 1000.0 / wall_s;
        p.cpu_wait = wait.map(|(run_delay_ns, threads)| CpuWait {
            run_delay_ns,
            on_cpu_ns: 0,
            threads,
        });
        r.phases.push(p);
        r
    }

    fn question() -> Question {
        Question {
            id: "file-remove".into(),
            ask: String::new(),
            baseline: "journal-16M".into(),
            variant: "journal-1G".into(),
            compares: Compares::Testbeds,
            testbed: None,
            workload: Some("deep-4K".into()),
            phase: Some("file_remove".into()),
            metric: "ops_per_s".into(),
            filter: Default::default(),
            published: None,
            source: String::new(),
            epsilon: crate::results::DEFAULT_EPSILON,
            looks: None,
        }
    }

    #[test]
    fn each_side_s_share_is_its_wait_over_its_thread_time() {
        let results = [
            run("journal-16M", 0, 10.0, Some((100_000_000, 1))),
            run("journal-16M", 1, 10.0, Some((300_000_000, 1))),
            run("journal-1G", 0, 2.0, Some((400_000_000, 2))),
            run("other", 0, 2.0, Some((2_000_000_000, 1))),
        ];
        let w = side_waits(&question(), &results);
        assert_eq!(w.len(), 2);
        assert_eq!((w[0].side.as_str(), w[0].phases), ("journal-16M", 2));
        assert!((w[0].share - 0.02).abs() < 1e-12, "{w:?}");
        assert!((w[1].share - 0.1).abs() < 1e-12, "{w:?}");
        assert!(!w[0].notable() && w[1].notable());
        let said = warning(&w).expect("the variant waited");
        assert!(
            said.starts_with("journal-1G's phases waited 10% of their time for a CPU: the machine, not the filesystem"),
            "{said}"
        );
        // Results without the record have nothing to say.
        let old = [
            run("journal-16M", 0, 10.0, None),
            run("journal-1G", 0, 2.0, None),
        ];
        assert!(side_waits(&question(), &old).is_empty());
        assert!(warning(&[]).is_none());
    }

    /// Eight threads on two CPUs queue behind each other whatever the machine does (the
    /// reservation preset's seqwrite at 8 threads waited 44-65% on a quiet machine): the side
    /// is named with its threads, and the sentence blames the machine only where a side that
    /// said so had no more threads than CPUs.
    #[test]
    fn a_side_with_more_threads_than_cpus_is_not_blamed_on_the_machine() {
        let results = [
            run("journal-16M", 0, 10.0, Some((40_000_000_000, 8))),
            run("journal-1G", 0, 10.0, Some((30_000_000_000, 8))),
        ];
        let w = side_waits(&question(), &results);
        assert_eq!(w[0].own_threads, Some((8, 2)), "{w:?}");
        assert_eq!(w[1].own_threads, Some((8, 2)), "{w:?}");
        let said = warning(&w).expect("both waited");
        assert_eq!(
            said,
            "journal-16M's phases waited 50% (8 threads on 2 CPUs) and journal-1G's phases waited 38% (8 threads on 2 CPUs) of their time for a CPU: part of that is the workload's own threads queued behind each other, part the machine's, and the two are not told apart"
        );
        assert!(!said.contains("the machine, not the filesystem"));
        // One side ran a thread per CPU or fewer and waited: the machine is named again.
        let results = [
            run("journal-16M", 0, 10.0, Some((40_000_000_000, 8))),
            run("journal-1G", 0, 10.0, Some((2_000_000_000, 1))),
        ];
        let w = side_waits(&question(), &results);
        assert_eq!(w[1].own_threads, None);
        let said = warning(&w).expect("both waited");
        assert!(
            said.ends_with("of their time for a CPU: the machine, not the filesystem (elapsed_less_runq and ops_per_s_less_runq take that wait off a one-thread phase)"),
            "{said}"
        );
        assert!(said.contains("50% (8 threads on 2 CPUs) and journal-1G's phases waited 20% of"));
    }

    #[test]
    fn the_finding_says_first_when_a_side_waited_over_the_threshold_and_only_then() {
        let sides = |base_wait: u64, variant_wait: u64| -> Vec<RunResult> {
            (0..3)
                .flat_map(|rep| {
                    let wall = 10.0 + rep as f64 * 0.1;
                    [
                        run("journal-16M", rep, wall, Some((base_wait, 1))),
                        run("journal-1G", rep, wall / 2.0, Some((variant_wait, 1))),
                    ]
                })
                .collect()
        };
        let said = |results: &[RunResult]| {
            let s = crate::analysis::findings::sentence::stated(results);
            assert_eq!(s.len(), 1);
            s[0].sentence.clone()
        };
        // The variant (5 s) waited 1 s, 20% of its time: said first, before the figures.
        let s = said(&sides(10_000_000, 1_000_000_000));
        assert!(
            s.starts_with("journal-1G's phases waited 20% of their time for a CPU: the machine, not the filesystem"),
            "{s}"
        );
        assert!(s.contains(": journal-1G has "), "{s}");
        // 4% of the variant's time and 0.1% of the baseline's: nothing is said.
        let s = said(&sides(10_000_000, 200_000_000));
        assert!(s.starts_with("journal-1G has "), "{s}");
        // Both sides over it: each named.
        let s = said(&sides(2_000_000_000, 1_000_000_000));
        assert!(
            s.starts_with("journal-16M's phases waited 20% and journal-1G's phases waited 20% of their time for a CPU"),
            "{s}"
        );
        // A metric that does not time its phase carries no wait.
        let mut q = question();
        q.metric = "dev_write_mb".into();
        let f = crate::analysis::findings::evaluate(&q, &sides(2_000_000_000, 1_000_000_000));
        assert!(f.cpu_wait.is_empty());
    }
}
