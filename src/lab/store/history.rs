//! `fsgauge history`: one metric over kernels, fsgauge commits, versions, hosts or days, with
//! the changes that are outside the noise marked.
//!
//! The method: the runs are grouped (by kernel, say), the groups put in the order of their
//! first run, and each group is compared with the one before by Welch's unequal-variance
//! t-test. With k groups that is k − 1 tests, so Holm's step-down correction is applied to
//! their p-values: the chance of marking any change that is not there stays at most α (5%
//! unless `--alpha` says otherwise), however many groups there are (family-wise error).

use anyhow::Result;
use serde::Serialize;

use super::query::Hit;
use crate::analysis::stats::{summarize, welch};
use crate::base::error::bad_input;
use crate::results::Better;

/// What the runs are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    /// The kernel release (`uname -r`).
    Kernel,
    /// fsgauge's git commit (as built).
    Commit,
    /// fsgauge's version.
    Version,
    /// The host name.
    Host,
    /// The day the run started (UTC).
    Date,
}

impl By {
    fn key(self, h: &Hit) -> String {
        match self {
            By::Kernel => h.kernel.clone(),
            By::Commit => h.commit.clone().unwrap_or_else(|| "(unknown)".into()),
            By::Version => h.version.clone(),
            By::Host => h.hostname.clone(),
            By::Date => h.started_at.chars().take(10).collect(),
        }
    }
}

/// The method, as `--help` and the table's note name it.
pub const METHOD: &str = "Welch's t-test between each group and the one before, Holm-corrected over all those comparisons (family-wise error at most alpha)";

/// One group's figures and its comparison with the group before.
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub key: String,
    /// When its first run started.
    pub first: String,
    pub n: usize,
    pub mean: f64,
    pub sd: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Against the group before; absent for the first.
    pub change: Option<Change>,
    /// What disturbed the group's runs ([`Load`]).
    pub load: Load,
}

/// What the machine did beside a group's runs, as the store has it per run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Load {
    /// The most CPU steal of any run in the figures' phase (a share 0–1); absent where no run
    /// tells it.
    pub steal: Option<f64>,
    /// The most CPU pressure of any run, as `steal`.
    pub cpu_pressure: Option<f64>,
    /// Runs during whose phases another process dropped the kernel's caches.
    pub disturbed: usize,
    /// Attempts set aside (disturbed, made again) before the group's runs were kept.
    pub set_aside: i64,
    /// Runs the store knows neither of (indexed before it kept them, their file gone since).
    #[serde(skip_serializing_if = "is_zero")]
    pub unknown: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Load {
    fn of(hits: &[&Hit]) -> Self {
        let most = |f: fn(&Hit) -> Option<f64>| {
            hits.iter()
                .filter_map(|h| f(h))
                .filter(|v| v.is_finite())
                .reduce(f64::max)
        };
        Load {
            steal: most(|h| h.steal),
            cpu_pressure: most(|h| h.cpu_pressure),
            disturbed: hits
                .iter()
                .filter(|h| h.foreign_cache_drops.is_some_and(|n| n > 0))
                .count(),
            set_aside: hits.iter().filter_map(|h| h.set_aside).sum(),
            unknown: hits
                .iter()
                .filter(|h| h.foreign_cache_drops.is_none() || h.set_aside.is_none())
                .count(),
        }
    }

    /// `steal 0.2%, psi 3.1%, 1 disturbed, 2 set aside` for the table's column.
    fn text(&self) -> String {
        let pct = |x: Option<f64>| x.map_or("-".into(), |v| format!("{:.1}%", v * 100.0));
        let mut s = format!("{} / {}", pct(self.steal), pct(self.cpu_pressure));
        if self.disturbed > 0 {
            s.push_str(&format!(", {} disturbed", self.disturbed));
        }
        if self.set_aside > 0 {
            s.push_str(&format!(", {} set aside", self.set_aside));
        }
        if self.unknown > 0 {
            s.push_str(&format!(", {} unknown", self.unknown));
        }
        s
    }
}

/// A group against the one before it.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// mean / previous mean.
    pub ratio: f64,
    /// Welch's two-sided p; absent when either group has fewer than 2 runs.
    pub p: Option<f64>,
    /// Holm-adjusted p.
    pub p_holm: Option<f64>,
    /// Outside the noise: p_holm < alpha.
    pub significant: bool,
    /// `better`, `worse` or `changed` (no direction declared) when significant.
    pub verdict: String,
}

/// The history of one metric.
#[derive(Debug, Clone, Serialize)]
pub struct History {
    pub metric: String,
    pub testbed: String,
    pub workload: String,
    pub phase: String,
    pub by: By,
    pub alpha: f64,
    pub method: &'static str,
    pub groups: Vec<Group>,
}

/// The history of the figures in `hits` (one metric, oldest first).
pub fn history(hits: &[Hit], metric: &str, by: By, alpha: f64) -> Result<History> {
    let cell = one_cell(hits, metric)?;
    let mut keys: Vec<(String, String, Vec<f64>, Vec<&Hit>)> = Vec::new();
    for h in hits {
        let k = by.key(h);
        let v = h.value.unwrap_or(f64::NAN);
        match keys.iter_mut().find(|(g, _, _, _)| *g == k) {
            Some((_, _, xs, hs)) => {
                xs.push(v);
                hs.push(h);
            }
            None => keys.push((k, h.started_at.clone(), vec![v], vec![h])),
        }
    }
    let better = crate::results::metric::core(metric).map(|c| c.def.better);
    let mut groups: Vec<Group> = Vec::new();
    let mut ps: Vec<(usize, f64)> = Vec::new();
    for (i, (key, first, xs, hs)) in keys.iter().enumerate() {
        let s = summarize(xs).ok_or_else(|| {
            bad_input(format!(
                "{metric}: the group {key} has a figure that is not a number"
            ))
        })?;
        let change = (i > 0).then(|| {
            let prev = &keys[i - 1].2;
            let p = welch(prev, xs).map(|w| w.p);
            if let Some(p) = p {
                ps.push((i, p));
            }
            let prev_mean = prev.iter().sum::<f64>() / prev.len() as f64;
            Change {
                ratio: s.mean / prev_mean,
                p,
                p_holm: None,
                significant: false,
                verdict: String::new(),
            }
        });
        groups.push(Group {
            key: key.clone(),
            first: first.clone(),
            n: s.n,
            mean: s.mean,
            sd: s.sd,
            ci_low: s.ci_low,
            ci_high: s.ci_high,
            change,
            load: Load::of(hs),
        });
    }
    for (i, adj) in holm(&ps) {
        if let Some(c) = groups[i].change.as_mut() {
            c.p_holm = Some(adj);
            c.significant = adj < alpha;
            c.verdict = verdict(c.significant, c.ratio, better);
        }
    }
    Ok(History {
        metric: metric.to_string(),
        testbed: cell.0,
        workload: cell.1,
        phase: cell.2,
        by,
        alpha,
        method: METHOD,
        groups,
    })
}

fn verdict(significant: bool, ratio: f64, better: Option<Better>) -> String {
    if !significant {
        return String::new();
    }
    match (better, ratio > 1.0) {
        (Some(Better::Higher), true) | (Some(Better::Lower), false) => "better".into(),
        (Some(Better::Higher), false) | (Some(Better::Lower), true) => "worse".into(),
        _ => "changed".into(),
    }
}

/// Holm's step-down adjustment of (index, p) pairs: (index, adjusted p).
pub fn holm(ps: &[(usize, f64)]) -> Vec<(usize, f64)> {
    let m = ps.len();
    let mut sorted = ps.to_vec();
    sorted.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut running: f64 = 0.0;
    sorted
        .into_iter()
        .enumerate()
        .map(|(j, (i, p))| {
            running = running.max(((m - j) as f64 * p).min(1.0));
            (i, running)
        })
        .collect()
}

/// The one (testbed, workload, phase) the figures are of; figures of several are refused,
/// naming them and the `--where` that picks one.
fn one_cell(hits: &[Hit], metric: &str) -> Result<(String, String, String)> {
    let mut cells: Vec<(String, String, String)> = hits
        .iter()
        .map(|h| (h.testbed.clone(), h.workload.clone(), h.phase.clone()))
        .collect();
    cells.sort();
    cells.dedup();
    match cells.len() {
        0 => Err(bad_input(format!("{metric}: no run matches"))),
        1 => Ok(cells.remove(0)),
        _ => {
            let list: Vec<String> = cells
                .iter()
                .take(12)
                .map(|(t, w, p)| format!("testbed={t},workload={w},phase={p}"))
                .collect();
            Err(bad_input(format!(
                "{metric}: the query matches {} cells, and a history is of one: add --where with one of: {}{}",
                cells.len(),
                list.join("; "),
                if cells.len() > 12 { "; …" } else { "" }
            )))
        }
    }
}

/// The history as a table for the terminal (and CSV, Markdown, HTML).
pub fn table(h: &History) -> crate::base::text::Table {
    let fig = |x: f64| crate::base::text::fmt_num(x);
    let rows = h
        .groups
        .iter()
        .map(|g| {
            let c = g.change.as_ref();
            vec![
                g.key.clone(),
                g.first.clone(),
                g.n.to_string(),
                fig(g.mean),
                format!("{} .. {}", fig(g.ci_low), fig(g.ci_high)),
                c.map_or(String::new(), |c| {
                    format!("{:+.1}%", (c.ratio - 1.0) * 100.0)
                }),
                c.and_then(|c| c.p)
                    .map_or(String::new(), |p| format!("{p:.3}")),
                c.and_then(|c| c.p_holm)
                    .map_or(String::new(), |p| format!("{p:.3}")),
                c.map_or(String::new(), |c| {
                    if c.significant {
                        format!("* {}", c.verdict)
                    } else if c.p.is_none() {
                        "n < 2".into()
                    } else {
                        String::new()
                    }
                }),
                g.load.text(),
            ]
        })
        .collect();
    crate::base::text::Table {
        title: format!(
            "{} of {} / {} / {} by {}",
            h.metric,
            h.testbed,
            h.workload,
            h.phase,
            serde_json::to_value(h.by)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ),
        label_columns: 2,
        note: format!(
            "mean and 95% interval per group; steal / psi: the most CPU steal and CPU pressure of any run of the group in the phase of its figures, with its runs another process's cache drops disturbed and the attempts set aside before them; * marks a change outside the noise: {}, alpha = {}",
            METHOD, h.alpha
        ),
        headers: [
            "group",
            "first run",
            "n",
            "mean",
            "95% CI",
            "vs before",
            "p",
            "p (Holm)",
            "change",
            "steal / psi",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holm_multiplies_the_smallest_p_by_the_count_and_keeps_order() {
        let adj = holm(&[(1, 0.01), (2, 0.04), (3, 0.03)]);
        let get = |i| adj.iter().find(|(j, _)| *j == i).expect("index").1;
        assert!((get(1) - 0.03).abs() < 1e-12);
        assert!((get(3) - 0.06).abs() < 1e-12);
        // 0.04 * 1 = 0.04, raised to the running maximum 0.06
        assert!((get(2) - 0.06).abs() < 1e-12);
    }
}
