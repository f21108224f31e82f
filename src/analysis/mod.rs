//! From results to answers: summary statistics and tests (`stats`), the findings of a study's
//! questions (`findings`), and the one document every command prints, with its exporters
//! (`report`). Reads what results hold; names no workload kind.

pub mod findings;
pub mod report;
pub mod stats;
