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
/// baseline = "journal-16M"     # two testbed labels, two workload labels, or two phase names
/// variant = "journal-1G"
/// workload = "deep-4K"         # the cell's other coordinates: the workload label (when
/// testbed = "..."              #   baseline/variant are not workloads and the plan has more
/// phase = "dir_remove"         #   than one), the testbed label (likewise), the phase (unless
///                              #   baseline/variant are phases)
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
    /// Whether baseline and variant name testbeds, workloads or phases.
    pub compares: Compares,
    /// The testbed label, when baseline and variant are not testbeds; `None` when the plan
    /// has only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub testbed: Option<String>,
    /// The workload label, when baseline and variant are not workloads; `None` when the plan
    /// has only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// The phase, when baseline and variant are not phases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
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
    /// Set when `reps = "auto"` looked at the question after every round and would stop once
    /// it was decided: its interval is then the repeated one over those looks
    /// ([`crate::analysis::stats::sequential`]), valid whenever the run stopped. `None`: one look (a fixed
    /// number of repetitions, a smoke run, or a result from before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub looks: Option<Looks>,
}

/// The repetitions per side at which `reps = "auto"` looked at a question: after the first
/// round (`first`) and after each further round, up to the cap (`last`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Looks {
    pub first: u32,
    pub last: u32,
}

/// What a question's baseline and variant name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compares {
    Testbeds,
    Workloads,
    /// Two phases of the same runs (e.g. reading an aged tree and its fresh copy).
    Phases,
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
    /// The `--scale` the plan ran at (1 as written).
    #[serde(default = "one")]
    pub scale: f64,
}

fn one() -> f64 {
    1.0
}
