//! A kind's own tables of its results, registered once by the kind and shown wherever its
//! results are shown: `fsgauge bench` prints them, and `fsgauge report` adds them to its
//! tables. The hook is a results-level type (results in, [`Table`]s out), so a kind defines it
//! in its own module and the report needs no kind's name: the command line composes the
//! registrations (`registry::kind_tables`) and hands them to the report.

use super::RunResult;
use crate::text::Table;

/// The tables one kind makes of its results.
#[derive(Debug, Clone, Copy)]
pub struct KindTables {
    /// The `workload.kind` of the results these tables read.
    pub kind: &'static str,
    /// The tables of results of that kind (empty when they hold nothing to show).
    pub tables: fn(&[RunResult]) -> Vec<Table>,
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
