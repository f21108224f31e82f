//! Comparing two sets of results (a base and a new one): per cell and metric, base mean ± sd,
//! new mean ± sd, the change in %, the two-sided p-value of Welch's t-test, a significance
//! mark, and whether the change is better or worse by the metric's declared direction.
//!
//! Cells are matched by testbed × workload × phase; when the two sets have one testbed each
//! under different labels (the usual "before and after a patch"), they are matched by workload
//! × phase alone.

use serde::Serialize;

use super::compare_machines::{self, Machines};
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
    /// Over several machines (each with both sides), `ratio` is the pooled one of pairs
    /// within each machine, and this says how, with each machine's ratio
    /// ([`super::compare_machines`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<crate::analysis::stats::Ratio>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machines: Option<Machines>,
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
            let (ratio, machines) = match compare_machines::pooled(bm, nm) {
                Some((r, m)) => (Some(r), Some(m)),
                None => (ratio_of_means(&bm.values, &nm.values).ok(), None),
            };
            // Over machines, the test and the direction are the pooled ratio's (pairs within
            // each machine); Welch's over all runs would count the machines' offsets as noise.
            let pooled = ratio.filter(|r| machines.is_some() && r.p.is_finite());
            let p = pooled.map_or(w.map(|w| w.p), |r| Some(r.p));
            let change = pct_change(bm.summary.mean, nm.summary.mean);
            let direction = pooled.map_or(change, |r| Some((r.ratio - 1.0) * 100.0));
            let significant = p.is_some_and(|p| p < 0.05);
            let verdict = match (bm.better, direction) {
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
                machines,
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

/// Figures named by (testbed / workload / phase, metric).
type Figures<'a> = Vec<(String, &'a str)>;

/// Figures as `place: metric, metric; place: metric`, the metrics of one place together.
fn by_place(figures: &[(String, &str)]) -> String {
    let mut out: Vec<(String, Vec<&str>)> = Vec::new();
    for (place, metric) in figures {
        match out.iter_mut().find(|(p, _)| p == place) {
            Some((_, ms)) => ms.push(metric),
            None => out.push((place.clone(), vec![metric])),
        }
    }
    out.iter()
        .map(|(p, ms)| format!("{p}: {}", ms.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

impl Comparison {
    /// "these runs differ in: …", one field a line; empty when the environments agree.
    pub fn environment_text(&self) -> String {
        crate::results::differ_text(&self.environment)
    }

    /// One warning, said before the numbers, naming every figure whose machines disagree
    /// beyond their intervals and the machines that do (the pooled ratio of each then
    /// averages machines that differ; each such row says `disagrees` under it); empty when
    /// they agree everywhere. One, not one per figure: a machine that differs usually does in
    /// every figure of a phase (its time, rate and latency move together), and a warning a
    /// figure buried the table under the same sentence repeated.
    pub fn machines_text(&self) -> String {
        // (disagreeing machines, [(testbed / workload / phase, metric)]), in row order.
        let mut groups: Vec<(&[String], Figures)> = Vec::new();
        for r in &self.rows {
            let Some(p) = r
                .machines
                .as_ref()
                .map(|m| &m.pooled)
                .filter(|p| p.disagree())
            else {
                continue;
            };
            let place = format!("{} / {} / {}", r.testbed, r.workload, r.phase);
            let who = p.disagreeing.as_slice();
            match groups.iter_mut().find(|(w, _)| *w == who) {
                Some((_, figures)) => figures.push((place, &r.metric)),
                None => groups.push((who, vec![(place, &r.metric)])),
            }
        }
        if groups.is_empty() {
            return String::new();
        }
        let n: usize = groups.iter().map(|(_, f)| f.len()).sum();
        let said: Vec<String> = groups
            .iter()
            .map(|(who, figures)| format!("{} ({})", who.join(" and "), by_place(figures)))
            .collect();
        format!(
            "warning: the machines disagree beyond their intervals (F test of the machine, p < {}) in {n} figure{}: {}; the pooled ratio of each averages machines that differ (their rows say disagrees)\n\n",
            crate::analysis::stats::blocked::HETEROGENEITY_ALPHA,
            if n == 1 { "" } else { "s" },
            said.join("; ")
        )
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
            .flat_map(|r| {
                let mut out = vec![vec![
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
                ]];
                out.extend(machine_csv_rows(r));
                out
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
        let rows = self.rows.iter().flat_map(table_rows).collect();
        let mut note = "mean ± sample standard deviation; ratio: new / base of the means with its 95% interval on the log scale (never below 0); p: two-sided Welch's t-test; *** p<0.001, ** p<0.01, * p<0.05; better/worse by each metric's direction, \"same\" when not significant at 5%".to_string();
        if self.rows.iter().any(|r| r.machines.is_some()) {
            note.push_str(compare_machines::NOTE);
        }
        Table {
            title: "Comparison".into(),
            label_columns: 4,
            note,
            headers,
            rows,
        }
    }
}

/// `mean ± sd (n=N)`.
fn figure(mean: f64, sd: f64, n: usize) -> String {
    format!("{} ± {} (n={n})", fmt_num(mean), fmt_num(sd))
}

/// `1.5× (1.45–1.55)`.
pub(super) fn ratio_text(x: &crate::analysis::stats::Ratio) -> String {
    format!(
        "{}× ({}–{})",
        sig(x.ratio, 3),
        sig(x.low, 3),
        sig(x.high, 3)
    )
}

/// A row of the table, and under a row pooled over machines one row per machine.
fn table_rows(r: &Row) -> Vec<Vec<String>> {
    let metric = if r.unit.is_empty() {
        r.metric.clone()
    } else {
        format!("{} ({})", r.metric, r.unit)
    };
    let mut ratio = r.ratio.as_ref().map_or("-".into(), ratio_text);
    let mut verdict = r.verdict.clone();
    if let (Some(m), Some(x)) = (&r.machines, &r.ratio) {
        ratio.push_str(&format!(
            ", {} pairs on {} machines",
            x.n_base,
            m.pooled.machines.len()
        ));
        if m.pooled.disagree() {
            verdict.push_str(&format!(
                ", machines disagree: {}",
                m.pooled.disagreeing.join(", ")
            ));
        }
    }
    let mut out = vec![vec![
        r.testbed.clone(),
        r.workload.clone(),
        r.phase.clone(),
        metric.clone(),
        figure(r.base_mean, r.base_sd, r.base_n),
        figure(r.new_mean, r.new_sd, r.new_n),
        r.change_pct.map_or("-".into(), |c| format!("{c:+.1}%")),
        ratio,
        r.p_value.map_or("-".into(), |p| format!("{p:.4}")),
        r.significance.clone(),
        verdict,
    ]];
    for (f, m) in r.machines.iter().flat_map(|m| m.each()) {
        let disagrees = r
            .machines
            .as_ref()
            .is_some_and(|x| x.pooled.disagreeing.contains(&f.host));
        out.push(vec![
            format!("{} · {}", r.testbed, f.host),
            r.workload.clone(),
            r.phase.clone(),
            metric.clone(),
            figure(f.base_mean, f.base_sd, f.base_n),
            figure(f.new_mean, f.new_sd, f.new_n),
            pct_change(f.base_mean, f.new_mean).map_or("-".into(), |c| format!("{c:+.1}%")),
            format!(
                "{}, {} pair{}",
                ratio_text(&m.ratio),
                m.ratio.n_base,
                if m.ratio.n_base == 1 { "" } else { "s" }
            ),
            "-".into(),
            String::new(),
            if disagrees { "disagrees" } else { "" }.into(),
        ]);
    }
    out
}

/// Under a row pooled over machines, one CSV line per machine: its figures and its ratio
/// (no p: the machines' agreement is the pooled row's).
fn machine_csv_rows(r: &Row) -> Vec<Vec<String>> {
    let Some(m) = &r.machines else {
        return Vec::new();
    };
    m.each()
        .map(|(f, x)| {
            let better = match r.better {
                Better::Higher => "higher",
                Better::Lower => "lower",
                Better::Neither => "neither",
            };
            vec![
                format!("{} · {}", r.testbed, f.host),
                r.workload.clone(),
                r.phase.clone(),
                r.metric.clone(),
                r.unit.clone(),
                better.to_string(),
                f.base_n.to_string(),
                f.base_mean.to_string(),
                f.base_sd.to_string(),
                f.new_n.to_string(),
                f.new_mean.to_string(),
                f.new_sd.to_string(),
                pct_change(f.base_mean, f.new_mean).map_or(String::new(), |c| c.to_string()),
                String::new(),
                String::new(),
                if m.pooled.disagreeing.contains(&f.host) {
                    "disagrees"
                } else {
                    ""
                }
                .to_string(),
                x.ratio.ratio.to_string(),
                x.ratio.low.to_string(),
                x.ratio.high.to_string(),
            ]
        })
        .collect()
}
