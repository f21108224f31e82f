//! `compare --findings`: do two runs of a study reach the same findings? A regression lab
//! runs a study on another kernel, another machine or beside a build, and asks whether each
//! question's answer moved. Per question (and emulated disk) both findings side by side, each
//! decided as `report` decides it (on the disk's clock on an emulated disk), and two tests:
//!
//! - **inside**: the new ratio lies inside the base's 95% interval. Strict: that interval is
//!   for the base's own mean, and a second run of the same experiment lands outside it often
//!   (about a quarter of the time with a few pairs a side; see
//!   [`crate::analysis::stats::ratio_of_ratios`]).
//! - **agree**: the ratio of the two ratios, new / base, with a 95% interval from both
//!   findings' intervals (independent samples: Welch on the log scale); the two agree when it
//!   holds 1.

use serde::Serialize;

use crate::analysis::findings::sentence::sig;
use crate::analysis::findings::{confidence_level, device_name, findings, Finding};
use crate::analysis::stats::{ratio_of_ratios, Decision, Ratio};
use crate::base::error::bad_input;
use crate::base::text::Table;

use super::compare::ratio_text;
use super::findings_table::decision_name as decision_text;
use crate::results::{env_diff, Difference, RunResult};

/// One side's answer to a question.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// variant / baseline on the disk's clock (on this machine's storage, the one clock);
    /// absent when the finding has none (too few repetitions, a zero value).
    pub ratio: Option<Ratio>,
    pub decision: Option<Decision>,
    /// The same ratio on the wall clock, where a compared phase's disk clock stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_ratio: Option<f64>,
    /// Why there is no ratio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl Side {
    fn of(f: &Finding) -> Self {
        Side {
            ratio: f.ratio,
            decision: f.decision,
            wall_ratio: f.wall.as_ref().and_then(|w| w.ratio).map(|r| r.ratio),
            problem: f.problem.clone(),
        }
    }
}

/// One question answered by both sets.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub question: String,
    /// The emulated disk (profile reference), absent on this machine's own storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    pub metric: String,
    /// The seed study's ratio, where the question states one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published: Option<f64>,
    pub base: Side,
    pub new: Side,
    /// Whether the two decide alike (larger, smaller, no change, undecided).
    pub same_decision: bool,
    /// Whether the new ratio lies inside the base's 95% interval.
    pub inside: Option<bool>,
    /// new / base of the two ratios with its 95% interval (Welch on the log scale).
    pub new_over_base: Option<Ratio>,
    /// Whether that interval holds 1.
    pub agree: Option<bool>,
}

/// The two sets' findings side by side.
#[derive(Debug, Clone, Serialize)]
pub struct FindingsComparison {
    /// Environment fields that differ between the two sets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub environment: Vec<Difference>,
    pub rows: Vec<Row>,
    /// Questions (with their disk) that only one set answers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub only_base: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub only_new: Vec<String>,
}

/// How a question is named with its disk.
fn key(f: &Finding) -> String {
    match &f.device {
        Some(d) => format!("{} on {d}", f.question.id),
        None => f.question.id.clone(),
    }
}

/// Compares the findings of two sets of results of one study.
pub fn compare_findings(
    base: &[RunResult],
    new: &[RunResult],
) -> anyhow::Result<FindingsComparison> {
    let (bf, nf) = (findings(base), findings(new));
    for (side, f) in [("the base", &bf), ("the new set", &nf)] {
        if f.is_empty() {
            return Err(bad_input(format!(
                "{side} holds no study's questions: compare --findings needs the results of a plan with [[question]] (an as-published preset, or `fsgauge presets`); to compare metric by metric, leave out --findings"
            )));
        }
    }
    let mut rows = Vec::new();
    let mut only_base = Vec::new();
    for b in &bf {
        let Some(n) = nf
            .iter()
            .find(|n| n.question.id == b.question.id && n.device == b.device)
        else {
            only_base.push(key(b));
            continue;
        };
        rows.push(row(b, n));
    }
    let only_new: Vec<String> = nf
        .iter()
        .filter(|n| {
            !bf.iter()
                .any(|b| b.question.id == n.question.id && b.device == n.device)
        })
        .map(key)
        .collect();
    if rows.is_empty() {
        return Err(bad_input(format!(
            "the two sets answer no question in common (base: {}; new: {}); give two runs of the same study",
            only_base.join(", "),
            only_new.join(", ")
        )));
    }
    Ok(FindingsComparison {
        environment: env_diff(base, new),
        rows,
        only_base,
        only_new,
    })
}

fn row(b: &Finding, n: &Finding) -> Row {
    let q = &b.question;
    let new_over_base = match (&b.ratio, &n.ratio) {
        (Some(br), Some(nr)) => Some(ratio_of_ratios(
            br,
            nr,
            confidence_level(q),
            confidence_level(&n.question),
        )),
        _ => None,
    };
    Row {
        question: q.id.clone(),
        device: b.device.clone(),
        metric: match &q.phase {
            Some(p) => format!("{} ({p})", q.metric),
            None => format!("{} ({} → {})", q.metric, q.baseline, q.variant),
        },
        published: q.published,
        base: Side::of(b),
        new: Side::of(n),
        same_decision: b.decision == n.decision,
        inside: match (&b.ratio, &n.ratio) {
            (Some(br), Some(nr)) => Some(br.low <= nr.ratio && nr.ratio <= br.high),
            _ => None,
        },
        agree: new_over_base.map(|r| r.low <= 1.0 && 1.0 <= r.high),
        new_over_base,
    }
}

/// `1.5× (1.45–1.55)`, or the problem.
fn ratio_cell(s: &Side) -> String {
    match &s.ratio {
        Some(r) => ratio_text(r),
        None => s.problem.clone().unwrap_or_else(|| "-".into()),
    }
}

fn pairs(s: &Side) -> String {
    match &s.ratio {
        Some(r) if r.paired => r.n_base.to_string(),
        Some(r) => format!("{} + {}", r.n_base, r.n_variant),
        None => "-".into(),
    }
}

fn yes_no(b: Option<bool>) -> String {
    match b {
        Some(true) => "yes".into(),
        Some(false) => "no".into(),
        None => "-".into(),
    }
}

impl FindingsComparison {
    /// What is said before the table: how many agree, and which do not.
    pub fn summary_text(&self) -> String {
        let n = self.rows.len();
        let count = |f: &dyn Fn(&Row) -> bool| self.rows.iter().filter(|r| f(r)).count();
        let same = count(&|r| r.same_decision);
        let inside = count(&|r| r.inside == Some(true));
        let agree = count(&|r| r.agree == Some(true));
        let name = |r: &Row| match &r.device {
            Some(d) => format!("{} ({})", r.question, device_name(Some(d))),
            None => r.question.clone(),
        };
        let mut out = format!(
            "{n} question{} answered by both: {same} decided alike, {inside} new ratio{} inside the base's interval, {agree} agree by the two-sample test\n",
            if n == 1 { "" } else { "s" },
            if inside == 1 { "" } else { "s" },
        );
        let disagree: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.agree == Some(false))
            .map(|r| {
                let x = r.new_over_base.expect("agree is set with a ratio");
                format!("{}: new / base {}", name(r), ratio_text(&x))
            })
            .collect();
        if !disagree.is_empty() {
            out.push_str(&format!("disagree: {}\n", disagree.join("; ")));
        }
        for (side, qs) in [("base", &self.only_base), ("new set", &self.only_new)] {
            if !qs.is_empty() {
                out.push_str(&format!("only the {side} answers: {}\n", qs.join(", ")));
            }
        }
        out + "\n"
    }

    /// The table, one row per question.
    pub fn table(&self) -> Table {
        let rows = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.question.clone(),
                    device_name(r.device.as_deref()).to_string(),
                    r.metric.clone(),
                    r.published
                        .map_or("-".into(), |p| format!("{}×", sig(p, 3))),
                    ratio_cell(&r.base),
                    decision_text(r.base.decision),
                    pairs(&r.base),
                    ratio_cell(&r.new),
                    decision_text(r.new.decision),
                    pairs(&r.new),
                    yes_no(r.inside),
                    r.new_over_base.as_ref().map_or("-".into(), ratio_text),
                    yes_no(r.agree),
                ]
            })
            .collect();
        Table {
            title: "Findings of both sets".into(),
            label_columns: 3,
            note: "ratio = variant / baseline as `report` decides it (on an emulated disk, on the disk's clock), 95% interval; n: pairs (or baseline + variant repetitions); inside: the new ratio lies inside the base's interval; new / base: the ratio of the two ratios with its 95% interval (each ratio's standard error from its own interval, Welch–Satterthwaite degrees of freedom on the log scale); agree: that interval holds 1".into(),
            headers: [
                "question",
                "disk",
                "metric",
                "published",
                "base ratio (95% CI)",
                "base decision",
                "base n",
                "new ratio (95% CI)",
                "new decision",
                "new n",
                "inside",
                "new / base (95% CI)",
                "agree",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        }
    }

    /// Every row at full precision, as CSV.
    pub fn csv(&self) -> String {
        let f = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
        let headers = [
            "question",
            "disk",
            "metric",
            "published",
            "base_ratio",
            "base_low",
            "base_high",
            "base_decision",
            "new_ratio",
            "new_low",
            "new_high",
            "new_decision",
            "inside",
            "new_over_base",
            "new_over_base_low",
            "new_over_base_high",
            "agree",
        ]
        .map(String::from)
        .to_vec();
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let (b, n, x) = (r.base.ratio, r.new.ratio, r.new_over_base);
                vec![
                    r.question.clone(),
                    device_name(r.device.as_deref()).to_string(),
                    r.metric.clone(),
                    f(r.published),
                    f(b.map(|b| b.ratio)),
                    f(b.map(|b| b.low)),
                    f(b.map(|b| b.high)),
                    decision_text(r.base.decision),
                    f(n.map(|n| n.ratio)),
                    f(n.map(|n| n.low)),
                    f(n.map(|n| n.high)),
                    decision_text(r.new.decision),
                    yes_no(r.inside),
                    f(x.map(|x| x.ratio)),
                    f(x.map(|x| x.low)),
                    f(x.map(|x| x.high)),
                    yes_no(r.agree),
                ]
            })
            .collect();
        super::output::csv_table(&Table {
            title: String::new(),
            label_columns: 3,
            note: String::new(),
            headers,
            rows,
        })
    }
}
