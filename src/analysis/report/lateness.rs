//! Where an emulated disk fell behind its model, as one table per report: one row per
//! testbed × workload × phase whose disk replied late (lateness p99 over
//! [`LATE_P99_MS`]) in any repetition, with how many repetitions, the worst p99, the late
//! requests among all, how many of those the machine held the emulator off its CPU for, and
//! the share of those repetitions' wall time the disk's own clock stood still.
//!
//! The disk's clock stops while the emulator is behind, so lateness no longer lengthens any
//! figure read on disk time ([`crate::results::PhaseResult::times`]); the table says where
//! the host could not keep time and how much of it the disk's clock left out. It replaces one
//! warning paragraph per phase: runs no longer write them, and those older results carry are
//! left out of a report's warnings ([`is_lateness_warning`]), their figures being in this
//! table, read from the same records.

use crate::analysis::findings::sentence::sig;
use crate::analysis::report::cells::workload_labels;
use crate::base::text::Table;
use crate::results::device::{ModelledIo, LATE_P99_MS};
use crate::results::RunResult;

/// One testbed × workload × phase's lateness over its repetitions.
#[derive(Debug, Default)]
struct Row {
    key: (String, String, String),
    reps: usize,
    affected: usize,
    worst_p99_ms: f64,
    late: u64,
    requests: u64,
    held_off: u64,
    pause_s: f64,
    wall_s: f64,
}

/// Whether a stored warning is the per-phase lateness paragraph runs wrote before the disk
/// had its own clock (its figures are in [`lateness_table`]).
pub fn is_lateness_warning(w: &str) -> bool {
    w.starts_with("phase ")
        && (w.contains(": the emulated disk fell behind its model (lateness p99")
            || w.contains(": the emulated journal disk fell behind its model (lateness p99"))
}

/// The lateness table of these results, `None` when no emulated disk fell behind its model.
pub fn lateness_table(results: &[RunResult]) -> Option<Table> {
    let labels = workload_labels(results, &[]);
    let mut rows: Vec<Row> = Vec::new();
    for (r, w) in results.iter().zip(&labels) {
        for p in &r.phases {
            let disks: Vec<&ModelledIo> = [&p.device_model, &p.journal_device_model]
                .into_iter()
                .flatten()
                .collect();
            if disks.is_empty() {
                continue;
            }
            let key = (r.testbed.label.clone(), w.clone(), p.name.clone());
            let i = match rows.iter().position(|row| row.key == key) {
                Some(i) => i,
                None => {
                    rows.push(Row {
                        key,
                        ..Row::default()
                    });
                    rows.len() - 1
                }
            };
            let row = &mut rows[i];
            row.reps += 1;
            if !disks.iter().any(|d| d.fell_behind()) {
                continue;
            }
            row.affected += 1;
            for d in &disks {
                row.worst_p99_ms = row.worst_p99_ms.max(d.lateness_p99_ms);
                row.late += d.counts.late;
                row.requests += d.requests();
                row.held_off += d.counts.late_held_off;
            }
            let t = p.times();
            row.pause_s += t.pause_s;
            row.wall_s += t.wall_s;
        }
    }
    rows.retain(|r| r.affected > 0);
    if rows.is_empty() {
        return None;
    }
    Some(Table {
        title: "Where the emulated disk fell behind its model".into(),
        label_columns: 3,
        note: format!("phases whose emulated disk (main or journal) replied late, lateness p99 over {LATE_P99_MS} ms, in at least one repetition; over those repetitions: the worst p99, the requests answered over {LATE_P99_MS} ms after their modelled completion among all requests (both disks), how many of the late ones the machine held the emulator's timing thread off its CPU for (the rest were late for the emulator's own work), and the share of their wall time the disk's own clock stood still. Elapsed times and rates on an emulated disk are read on the disk's clock (wall time less that pause), so lateness does not lengthen them; results written before the disk had a clock have no pause, and their times include the lateness"),
        headers: [
            "testbed",
            "workload",
            "phase",
            "repetitions affected",
            "worst p99 (ms)",
            "late/requests",
            "late held off the CPU",
            "pause share",
        ]
        .map(String::from)
        .to_vec(),
        rows: rows.into_iter().map(cells).collect(),
    })
}

fn cells(r: Row) -> Vec<String> {
    let share = if r.wall_s > 0.0 {
        r.pause_s / r.wall_s * 100.0
    } else {
        0.0
    };
    let (testbed, workload, phase) = r.key;
    vec![
        testbed,
        workload,
        phase,
        format!("{} of {}", r.affected, r.reps),
        sig(r.worst_p99_ms, 3),
        format!("{}/{}", r.late, r.requests),
        r.held_off.to_string(),
        format!("{share:.1}%"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result of testbed `tb`, repetition `rep`, with one phase `name` of 10 s wall time on
    /// an emulated disk with this lateness p99, late requests (of 1000) and pause.
    fn run(tb: &str, rep: u32, name: &str, p99_ms: f64, late: u64, pause_ns: u64) -> RunResult {
        let mut r = crate::results::clock::bare_result(tb, rep, "tio");
        let mut p = crate::measure::PhaseTotals::new(name).into_result(&[]);
        p.wall_s = 10.0;
        let mut d = ModelledIo {
            lateness_p99_ms: p99_ms,
            pause_ns,
            pauses: late,
            ..Default::default()
        };
        d.counts.reads = 1000;
        d.counts.late = late;
        d.counts.late_held_off = late / 2;
        p.device_model = Some(d);
        r.phases.push(p);
        r
    }

    #[test]
    fn one_row_per_phase_that_fell_behind_over_its_repetitions() {
        let results = vec![
            run("b", 0, "seqwrite-4K-t8", 6.9, 305, 1_000_000_000),
            run("b", 1, "seqwrite-4K-t8", 17.2, 95, 3_000_000_000),
            run("b", 2, "seqwrite-4K-t8", 0.3, 2, 1_000_000),
            run("b", 0, "read", 0.2, 1, 1_000_000),
            run("a", 0, "seqwrite-4K-t8", 0.9, 10, 0),
        ];
        let t = lateness_table(&results).expect("a table");
        assert_eq!(
            t.rows,
            [
                [
                    "b",
                    "tio",
                    "seqwrite-4K-t8",
                    "2 of 3",
                    "17.2",
                    "400/2000",
                    "199",
                    "20.0%"
                ],
                [
                    "a",
                    "tio",
                    "seqwrite-4K-t8",
                    "1 of 1",
                    "0.900",
                    "10/1000",
                    "5",
                    "0.0%"
                ],
            ]
        );
        assert_eq!(
            t.headers[3..],
            [
                "repetitions affected",
                "worst p99 (ms)",
                "late/requests",
                "late held off the CPU",
                "pause share"
            ]
        );
        // Nothing fell behind: no table.
        assert!(lateness_table(&results[2..4]).is_none());
    }

    #[test]
    fn the_old_per_phase_paragraphs_are_recognised_and_nothing_else() {
        assert!(is_lateness_warning("phase remove: the emulated disk fell behind its model (lateness p99 0.800 ms, max 1.600 ms, over 0.5 ms): the phase's times are too long by up to that much; run on a less loaded machine or a profile with longer service times"));
        assert!(is_lateness_warning("phase w: the emulated journal disk fell behind its model (lateness p99 2.000 ms, max 3.000 ms, over 0.5 ms)"));
        assert!(!is_lateness_warning(
            "the loop device did not use direct I/O"
        ));
        assert!(!is_lateness_warning(
            "phase w: the emulated disk's store is full"
        ));
    }
}
