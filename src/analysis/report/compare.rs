//! Comparing two sets of results (a base and a new one): per cell and metric, base mean ± sd,
//! new mean ± sd, the change in %, the two-sided p-value of Welch's t-test, a significance
//! mark, and whether the change is better or worse by the metric's declared direction.
//!
//! Cells are matched by testbed × workload × phase; when the two sets have one testbed each
//! under different labels (the usual "before and after a patch"), they are matched by workload
//! × phase alone.

use serde::Serialize;

use super::metrics::Better;
use super::model::{cells, fmt_num, pct_change, sort_results, Cell, Table};
use super::output::csv_table;
use crate::analysis::findings::sentence::sig;
use crate::analysis::stats::{ratio_of_means, significance_mark, welch};
use crate::results::{env_diff, Difference, RunResult};

/// One metric of one matched cell.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub testbed: String,
    pub workload: String,
    pub phase: String,
    pub metric: String,
    pub unit: String,
    pub better: Better,
    pub base_n: usize,
    pub base_mean: f64,
    pub base_sd: f64,
    pub new_n: usize,
    pub new_mean: f64,
    pub new_sd: f64,
    /// Change of the mean, %.
    pub change_pct: Option<f64>,
    /// Welch's two-sided p-value (needs two values on each side).
    pub p_value: Option<f64>,
    /// `***`, `**`, `*` or empty.
    pub significance: String,
    /// `better`, `worse`, `same` (not significant at 5%) or `-` (no direction).
    pub verdict: String,
    /// new / base of the means with its 95% interval on the log scale (positive by
    /// construction); absent when a side has fewer than two values or a non-positive one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<crate::analysis::stats::Ratio>,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub base: Vec<String>,
    pub new: Vec<String>,
    /// Environment fields (sysctls, kernel, device queues, versions) that differ between the
    /// two sets: the likely explanation of a change, shown before the numbers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment: Vec<Difference>,
    pub rows: Vec<Row>,
}

/// Compares two sets of results.
pub fn compare(mut base: Vec<RunResult>, mut new: Vec<RunResult>) -> anyhow::Result<Comparison> {
    if base.is_empty() || new.is_empty() {
        return Err(crate::base::error::bad_input(
            "compare needs results on both sides",
        ));
    }
    sort_results(&mut base);
    sort_results(&mut new);
    let environment = env_diff(&base, &new);
    let (bt, _, bc) = cells(&base);
    let (nt, _, nc) = cells(&new);
    let by_label = |a: &Cell, b: &Cell| {
        a.testbed == b.testbed && a.workload == b.workload && a.phase == b.phase
    };
    let loose = bt.len() == 1 && nt.len() == 1 && bt != nt;
    let mut rows = Vec::new();
    for b in &bc {
        let Some(n) = nc.iter().find(|n| {
            if loose {
                n.workload == b.workload && n.phase == b.phase
            } else {
                by_label(b, n)
            }
        }) else {
            continue;
        };
        for bm in &b.metrics {
            let Some(nm) = n.metric(&bm.key) else {
                continue;
            };
            let w = welch(&bm.values, &nm.values);
            let ratio = ratio_of_means(&bm.values, &nm.values).ok();
            let p = w.map(|w| w.p);
            let change = pct_change(bm.summary.mean, nm.summary.mean);
            let significant = p.is_some_and(|p| p < 0.05);
            let verdict = match (bm.better, change) {
                (Better::Neither, _) | (_, None) => "-".to_string(),
                _ if !significant => "same".to_string(),
                (Better::Higher, Some(c)) => if c > 0.0 { "better" } else { "worse" }.to_string(),
                (Better::Lower, Some(c)) => if c < 0.0 { "better" } else { "worse" }.to_string(),
            };
            rows.push(Row {
                testbed: if loose {
                    format!("{} → {}", b.testbed, n.testbed)
                } else {
                    b.testbed.clone()
                },
                workload: b.workload.clone(),
                phase: b.phase.clone(),
                metric: bm.name.clone(),
                unit: bm.unit.clone(),
                better: bm.better,
                base_n: bm.summary.n,
                base_mean: bm.summary.mean,
                base_sd: bm.summary.sd,
                new_n: nm.summary.n,
                new_mean: nm.summary.mean,
                new_sd: nm.summary.sd,
                change_pct: change,
                p_value: p,
                significance: p.map_or(String::new(), |p| significance_mark(p).to_string()),
                verdict,
                ratio,
            });
        }
    }
    if rows.is_empty() {
        return Err(crate::base::error::bad_input(format!(
            "the two sets have no testbed × workload × phase in common (base testbeds: {}; new testbeds: {})",
            bt.join(", "),
            nt.join(", ")
        )));
    }
    Ok(Comparison {
        base: bt,
        new: nt,
        environment,
        rows,
    })
}

impl Comparison {
    /// "these runs differ in: …", one field a line; empty when the environments agree.
    pub fn environment_text(&self) -> String {
        crate::results::differ_text(&self.environment)
    }

    /// Every row with its figures at full precision, as CSV.
    pub fn csv(&self) -> String {
        let headers = [
            "testbed",
            "workload",
            "phase",
            "metric",
            "unit",
            "better",
            "base_n",
            "base_mean",
            "base_sd",
            "new_n",
            "new_mean",
            "new_sd",
            "change_pct",
            "p_value",
            "significance",
            "verdict",
            "ratio",
            "ratio_ci95_low",
            "ratio_ci95_high",
        ]
        .map(String::from)
        .to_vec();
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        let rows = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.testbed.clone(),
                    r.workload.clone(),
                    r.phase.clone(),
                    r.metric.clone(),
                    r.unit.clone(),
                    match r.better {
                        Better::Higher => "higher",
                        Better::Lower => "lower",
                        Better::Neither => "neither",
                    }
                    .to_string(),
                    r.base_n.to_string(),
                    r.base_mean.to_string(),
                    r.base_sd.to_string(),
                    r.new_n.to_string(),
                    r.new_mean.to_string(),
                    r.new_sd.to_string(),
                    opt(r.change_pct),
                    opt(r.p_value),
                    r.significance.clone(),
                    r.verdict.clone(),
                    opt(r.ratio.map(|x| x.ratio)),
                    opt(r.ratio.map(|x| x.low)),
                    opt(r.ratio.map(|x| x.high)),
                ]
            })
            .collect();
        csv_table(&Table {
            title: String::new(),
            label_columns: 6,
            note: String::new(),
            headers,
            rows,
        })
    }

    /// The comparison as a table.
    pub fn table(&self) -> Table {
        let headers = [
            "testbed",
            "workload",
            "phase",
            "metric",
            "base",
            "new",
            "change",
            "ratio (95% CI)",
            "p",
            "sig",
            "verdict",
        ]
        .map(String::from)
        .to_vec();
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let metric = if r.unit.is_empty() {
                    r.metric.clone()
                } else {
                    format!("{} ({})", r.metric, r.unit)
                };
                vec![
                    r.testbed.clone(),
                    r.workload.clone(),
                    r.phase.clone(),
                    metric,
                    format!(
                        "{} ± {} (n={})",
                        fmt_num(r.base_mean),
                        fmt_num(r.base_sd),
                        r.base_n
                    ),
                    format!(
                        "{} ± {} (n={})",
                        fmt_num(r.new_mean),
                        fmt_num(r.new_sd),
                        r.new_n
                    ),
                    r.change_pct.map_or("-".into(), |c| format!("{c:+.1}%")),
                    r.ratio.map_or("-".into(), |x| {
                        format!(
                            "{}× ({}–{})",
                            sig(x.ratio, 3),
                            sig(x.low, 3),
                            sig(x.high, 3)
                        )
                    }),
                    r.p_value.map_or("-".into(), |p| format!("{p:.4}")),
                    r.significance.clone(),
                    r.verdict.clone(),
                ]
            })
            .collect();
        Table {
            title: "Comparison".into(),
            label_columns: 4,
            note: "mean ± sample standard deviation; ratio: new / base of the means with its 95% interval on the log scale (never below 0); p: two-sided Welch's t-test; *** p<0.001, ** p<0.01, * p<0.05; better/worse by each metric's direction, \"same\" when not significant at 5%".into(),
            headers,
            rows,
        }
    }
}
