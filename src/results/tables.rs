//! A kind's own tables of its results, registered once by the kind and shown wherever its
//! results are shown: `fsgauge bench` prints them, and `fsgauge report` adds them to its
//! tables. The hook is a results-level type (results in, [`Table`]s out), so a kind defines it
//! in its own module and the report needs no kind's name: the command line composes the
//! registrations (`registry::kind_tables`) and hands them to the report.

use super::RunResult;
use crate::base::text::Table;

/// The tables one kind makes of its results, and the figures it is drawn as.
#[derive(Debug, Clone, Copy)]
pub struct KindTables {
    /// The `workload.kind` of the results these tables read.
    pub kind: &'static str,
    /// The tables of results of that kind (empty when they hold nothing to show).
    pub tables: fn(&[RunResult]) -> Vec<Table>,
    /// Figures of metrics against another metric of the same phases (the aging checkpoints'
    /// layout against usage), drawn by the report with one line per testbed.
    pub against: &'static [Against],
}

/// Some metrics of a kind's phases drawn against another of them: one plot per `ys` entry,
/// x the mean of `x` and y the mean of the entry's metric, per testbed × phase.
#[derive(Debug, Clone, Copy)]
pub struct Against {
    /// The metric along x, by its report key (`extra.usage_pct`).
    pub x: &'static str,
    /// Its name in plot titles and ids (`usage`).
    pub x_name: &'static str,
    /// What x is, for the axis (`usage %`).
    pub x_desc: &'static str,
    /// The metrics drawn along y, by report key, each with its name for title and axis.
    pub ys: &'static [(&'static str, &'static str)],
}

/// No tables of its own (a kind that registers only figures).
pub fn no_tables(_: &[RunResult]) -> Vec<Table> {
    Vec::new()
}

impl KindTables {
    /// The tables of the results of this kind among `results`; none when there are none.
    pub fn of(&self, results: &[RunResult]) -> Vec<Table> {
        let mine: Vec<RunResult> = results
            .iter()
            .filter(|r| r.workload.kind == self.kind)
            .cloned()
            .collect();
        if mine.is_empty() {
            return Vec::new();
        }
        (self.tables)(&mine)
    }
}

/// Every registered kind's tables of `results`, in registration order.
pub fn all(registered: &[KindTables], results: &[RunResult]) -> Vec<Table> {
    registered.iter().flat_map(|k| k.of(results)).collect()
}
