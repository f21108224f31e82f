//! The findings in numbers: one row per question with its ratio, interval, p, repetitions
//! per side, decision and the published figure, and — where a compared phase ran on an
//! emulated disk whose clock stopped — the same ratio on the wall clock beside the one decided
//! on the disk's clock. Every format shows this one table after the findings' sentences.

use crate::analysis::findings::sentence::Stated;
use crate::base::text::Table;

/// A decision as results write it (`larger`, `no-change`, ...), or `not answered`.
pub fn decision_name(d: Option<crate::analysis::stats::Decision>) -> String {
    d.and_then(|d| serde_json::to_value(d).ok())
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "not answered".into())
}

/// The findings as a table: one row per question with its ratio, interval, p, repetitions
/// per side, decision and the published figure.
pub fn findings_table(findings: &[Stated]) -> Table {
    use crate::analysis::findings::sentence::{p_value, sig};
    let rows = findings
        .iter()
        .map(|s| {
            let f = &s.finding;
            let q = &f.question;
            let (ratio, ci, p) = match f.ratio {
                Some(r) => (
                    format!("{}×", sig(r.ratio, 3)),
                    format!("{}–{}×", sig(r.low, 3), sig(r.high, 3)),
                    p_value(r.p),
                ),
                None => ("-".into(), "-".into(), "-".into()),
            };
            let decision = decision_name(f.decision);
            vec![
                q.id.clone(),
                q.baseline.clone(),
                q.variant.clone(),
                q.metric.clone(),
                ratio,
                ci,
                p,
                match f.ratio {
                    Some(r) if r.paired => format!("{} pairs", r.n_base),
                    _ => format!("{} + {}", f.base_values.len(), f.variant_values.len()),
                } + &q.looks.map_or(String::new(), |l| format!(" (≤{})", l.last)),
                decision,
                q.published
                    .map_or("-".into(), |p| format!("{}×", sig(p, 3))),
                match f.agrees {
                    Some(_) => f.verdict().to_string(),
                    None => "-".into(),
                },
            ]
        })
        .collect();
    let table = Table {
        title: "Findings in numbers".into(),
        label_columns: 4,
        note: "ratio = variant / baseline of the metric's mean over repetitions, 95% interval on the log scale (positive by construction), Welch degrees of freedom, n = repetitions of baseline + variant; with n pairs (repetition k of both sides, run one after the other): the geometric mean of the per-pair ratios and the t interval of their logarithms (n − 1 degrees of freedom), so drift of the machine between repetitions cancels; n (≤N): reps = \"auto\" looked after every round up to N and stopped once decided, so the interval is the repeated one over those looks (each at the level that makes the chance of any look deciding wrongly 5%, Pocock-style, found by simulation of the t statistics) and p is scaled to it (p < 0.05 exactly when the interval excludes 1)".into(),
        headers: [
            "question", "baseline", "variant", "metric", "ratio", "95% CI", "p", "n", "decision",
            "published", "agrees",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    };
    with_machine_rows(with_wall_column(table, findings), findings)
}

/// The findings table with a row per machine under each finding pooled over machines (the
/// finding's own row then states the pooled ratio and `N pairs on k machines`); unchanged
/// when every finding's results come from one machine.
fn with_machine_rows(mut t: Table, findings: &[Stated]) -> Table {
    use crate::analysis::findings::sentence::{p_value, sig};
    if findings.iter().all(|s| s.finding.pooled.is_none()) {
        return t;
    }
    let wall = t.headers.iter().any(|h| h == "wall clock");
    let mut rows = Vec::new();
    for (mut row, s) in std::mem::take(&mut t.rows).into_iter().zip(findings) {
        let Some(p) = &s.finding.pooled else {
            rows.push(row);
            continue;
        };
        let at_n = if wall { 8 } else { 7 };
        row[at_n] = format!("{} on {} machines", row[at_n], p.machines.len());
        if p.disagree() {
            row[at_n + 1] = format!(
                "{}, machines disagree: {}",
                row[at_n + 1],
                p.disagreeing.join(", ")
            );
        }
        rows.push(row.clone());
        for m in &p.machines {
            let r = m.ratio;
            let mut cells = vec![
                format!("{} · {}", s.finding.question.id, m.host),
                row[1].clone(),
                row[2].clone(),
                row[3].clone(),
                format!("{}×", sig(r.ratio, 3)),
                format!("{}–{}×", sig(r.low, 3), sig(r.high, 3)),
            ];
            if wall {
                cells.push("-".into());
            }
            cells.push(p_value(r.p));
            cells.push(format!("{} pairs", r.n_base));
            let mut decision = serde_json::to_value(r.decide(s.finding.question.epsilon))
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            if p.disagreeing.contains(&m.host) {
                decision.push_str(", disagrees");
            }
            cells.extend([decision, "-".into(), "-".into()]);
            rows.push(cells);
        }
    }
    t.rows = rows;
    t.note.push_str("; QUESTION · HOST: where the results come from several machines, pairs are formed within each machine (repetition k of both sides on one host), each machine's ratio is shown under the pooled one, its interval from the variance within machines pooled over all pairs (N − k degrees of freedom); the pooled ratio is exp of the unweighted mean of the machines' mean log ratios (the machine a fixed block); the machines disagree where the F test of the machine term gives p < 0.05, and those whose interval lies off the machines' median are named");
    t
}

/// The findings table with the wall clock's ratio beside the interval, when any finding's
/// compared phases ran on an emulated disk whose clock stopped (the ratio and interval are
/// then the disk clock's).
fn with_wall_column(mut t: Table, findings: &[Stated]) -> Table {
    use crate::analysis::findings::sentence::sig;
    if findings.iter().all(|s| s.finding.wall.is_none()) {
        return t;
    }
    let at = 6;
    t.headers.insert(at, "wall clock".into());
    for (row, s) in t.rows.iter_mut().zip(findings) {
        let cell = match s.finding.wall.as_ref().map(|w| (w.ratio, w.decision)) {
            None => "-".into(),
            Some((None, _)) => "not answered".into(),
            Some((Some(r), d)) => format!(
                "{}× ({}–{}×{})",
                sig(r.ratio, 3),
                sig(r.low, 3),
                sig(r.high, 3),
                if d == s.finding.decision {
                    String::new()
                } else {
                    format!(
                        ", {}",
                        d.and_then(|d| serde_json::to_value(d).ok())
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default()
                    )
                }
            ),
        };
        row.insert(at, cell);
    }
    t.note.push_str("; wall clock: where a compared phase ran on an emulated disk whose clock stopped, the ratio and interval are on the disk's clock (wall time less the pause) and this column is the same ratio on the wall clock, with its decision where it differs");
    t
}
