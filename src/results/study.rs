//! What a run was part of: the plan it came from and the questions that plan asks. Every result
//! of a plan carries the plan's questions, so that findings are a pure function of the result
//! files (`fsgauge report` on a results directory answers them without the plan).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Default tolerance of a question: an interval inside 1 ± 5% is "no change".
pub const DEFAULT_EPSILON: f64 = 0.05;

/// One `[[question]]` of a plan: is the variant different from the baseline, in one metric of
/// one phase, and by how much?
///
/// ```toml
/// [[question]]
/// id = "dir-remove"            # unique in the plan; default q1, q2, ...
/// ask = "Does a larger journal speed up deep-tree directory removal?"
/// baseline = "journal-16M"     # a testbed label, or a workload label
/// variant = "journal-1G"       # the same kind of label as baseline
/// on = "deep-4K"               # the other side of the cell: the workload label when baseline
///                              # and variant are testbeds, the testbed label when they are
///                              # workloads; may be left out when the plan has only one
/// phase = "dir_remove"
/// metric = "ops_per_s"         # a core metric key (elapsed, sys, ops_per_s, mb_per_s, ...)
///                              # or one of the workload's own figures
/// where = { threads = 8 }      # optional: only sweep cells with these parameter values
/// published = 3.67             # optional: the published ratio variant / baseline
/// source = "study 5: 504 -> 1849 removes/s"   # optional
/// epsilon = 0.05               # optional: "no change" band, default 5%
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    pub id: String,
    /// The question in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ask: String,
    pub baseline: String,
    pub variant: String,
    /// Whether baseline and variant name testbeds or workloads.
    pub compares: Compares,
    /// The label of the other side of the cell (a workload label when `compares` is
    /// testbeds, a testbed label when it is workloads); `None` when the plan has only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<String>,
    pub phase: String,
    /// A core metric key, or a workload's own figure (a key of the phase's `extra`).
    pub metric: String,
    /// Only results whose workload parameters have these values (sweep cells).
    #[serde(default, rename = "where", skip_serializing_if = "BTreeMap::is_empty")]
    pub filter: BTreeMap<String, serde_json::Value>,
    /// The published ratio variant / baseline, when the question reproduces a study.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<f64>,
    /// Where the published figure comes from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// Half-width of the "no change" band, as a fraction.
    pub epsilon: f64,
}

/// What a question's baseline and variant name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compares {
    Testbeds,
    Workloads,
}

/// The plan a result belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyInfo {
    /// The plan's name.
    pub plan: String,
    /// The label of the plan's workload entry this run ran (`label = ...` in the entry;
    /// default: the kind, with `#N` for the Nth entry of a kind when there are several).
    pub workload: String,
    /// Every question of the plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<Question>,
}
