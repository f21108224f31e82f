//! The sentence of a finding: what a reviewer could quote, made from the finding's numbers
//! alone.
//!
//! The rule for words: the ratio is always variant / baseline of the metric as declared, so
//! "journal-1G has 2.1× the op rate of journal-16M"; when the metric has a direction, the
//! sentence adds what that means ("higher is better: journal-1G is better"). A ratio is printed
//! with three significant figures, so it never reads 0.00 or 1.00 when it is not.

use super::Finding;
use crate::analysis::stats::Decision;
use crate::results::metric::{Better, CORE};
use crate::results::Compares;

/// A finding with its sentence, as reports and `--format json` carry it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Stated {
    #[serde(flatten)]
    pub finding: Finding,
    pub sentence: String,
}

/// The findings of every question the results carry, each with its sentence.
pub fn stated(results: &[crate::results::RunResult]) -> Vec<Stated> {
    super::findings(results)
        .into_iter()
        .map(|finding| Stated {
            sentence: sentence(&finding),
            finding,
        })
        .collect()
}

/// `x` with `sig` significant figures, without exponent for everyday magnitudes.
pub fn sig(x: f64, sig: usize) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let magnitude = x.abs().log10().floor() as i32;
    let decimals = (sig as i32 - 1 - magnitude).max(0) as usize;
    format!("{x:.decimals$}")
}

/// A signed percentage change from a ratio: `+6.0%`, `−4.1%`, with two significant figures
/// at least one decimal.
pub fn pct(ratio: f64) -> String {
    let p = (ratio - 1.0) * 100.0;
    let shown = if p.abs() >= 10.0 {
        format!("{:.0}", p.abs())
    } else {
        format!("{:.1}", p.abs())
    };
    let sign = if p < 0.0 { "−" } else { "+" };
    format!("{sign}{shown}%")
}

/// A p-value as a reviewer reads it: `p < 0.001`, `p = 0.03`, `p = 0.41`.
pub fn p_value(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".into()
    } else if p < 0.01 {
        format!("p = {p:.3}")
    } else {
        format!("p = {p:.2}")
    }
}

/// The metric's name: the core metric's, or the workload figure's key.
fn metric_name(f: &Finding) -> String {
    let name = CORE
        .iter()
        .find(|m| m.def.key == f.question.metric)
        .map(|m| m.def.name.to_string())
        .unwrap_or_else(|| f.question.metric.clone());
    if f.unit == "s" && !name.ends_with("time") {
        format!("{name} time")
    } else {
        name
    }
}

/// Where the comparison is made: `in phase dir_remove of deep-4K on ext4`.
fn cell(f: &Finding) -> String {
    let q = &f.question;
    let mut parts = Vec::new();
    if let Some(p) = &q.phase {
        parts.push(format!("in {p}"));
    }
    if q.compares != Compares::Workloads {
        if let Some(w) = &q.workload {
            parts.push(format!("of {w}"));
        }
    }
    if q.compares != Compares::Testbeds {
        if let Some(t) = &q.testbed {
            parts.push(format!("on {t}"));
        }
    }
    for (k, v) in &q.filter {
        parts.push(format!("{k}={v}"));
    }
    if let Some(d) = &f.device {
        parts.push(format!("on the emulated disk {d}"));
    }
    parts.join(" ")
}

/// One sentence for the finding.
pub fn sentence(f: &Finding) -> String {
    let q = &f.question;
    let name = metric_name(f);
    let where_ = cell(f);
    let where_ = if where_.is_empty() {
        String::new()
    } else {
        format!(" {where_}")
    };
    let Some(r) = f.ratio else {
        let why = if f.base_values.is_empty() {
            format!("no results for the baseline {}", q.baseline)
        } else if f.variant_values.is_empty() {
            format!("no results for the variant {}", q.variant)
        } else {
            f.problem.clone().unwrap_or_else(|| "no ratio".into())
        };
        return format!(
            "{}: not answered{where_}: {why} (n = {} + {}).",
            q.id,
            f.base_values.len(),
            f.variant_values.len()
        );
    };
    let mut n = if let Some(p) = &f.pooled {
        format!("n = {} pairs on {} machines", r.n_base, p.machines.len())
    } else if r.paired {
        format!("n = {} pairs", r.n_base)
    } else {
        format!("n = {} + {}", r.n_base, r.n_variant)
    };
    if let Some(l) = q.looks {
        // reps = "auto" stopped when this decided: the interval is the repeated one.
        n.push_str(&format!(" of up to {}, sequential", l.last));
    }
    let ci = format!("95% CI {}–{}×", sig(r.low, 3), sig(r.high, 3));
    // Figures of a phase whose disk clock stopped are on the disk's clock; say which.
    let clock = if f.wall.is_some() {
        ", on the disk's clock"
    } else {
        ""
    };
    let head = format!(
        "{} has {}× the {name} of {}{where_}{clock}",
        q.variant,
        sig(r.ratio, 3),
        q.baseline
    );
    let decision = f.decision.unwrap_or(Decision::Undecided);
    let mut s = match decision {
        Decision::Larger | Decision::Smaller => {
            let judged = match (f.better, decision) {
                (Better::Higher, Decision::Larger) | (Better::Lower, Decision::Smaller) => {
                    format!(": {} is better", q.variant)
                }
                (Better::Higher, Decision::Smaller) | (Better::Lower, Decision::Larger) => {
                    format!(": {} is worse", q.variant)
                }
                _ => String::new(),
            };
            format!("{head} ({ci}, {}, {n}){judged}", p_value(r.p))
        }
        Decision::NoChange => format!(
            "{head}: no change (CI {} … {}, {n}): no effect larger than {:.0}%",
            pct(r.low),
            pct(r.high),
            (r.largest_change() * 100.0).ceil()
        ),
        Decision::Undecided => format!(
            "{head}: undecided ({ci}, {}, {n}): a change of up to {} is still possible",
            p_value(r.p),
            pct(if r.high - 1.0 >= 1.0 - r.low {
                r.high
            } else {
                r.low
            })
        ),
    };
    if let Some(t) = f.phase_s.filter(|_| f.too_short()) {
        s.push_str(&format!(
            "; the phase lasts {}, too short to measure the filesystem more than the machine",
            crate::base::text::format_secs_unit(t)
        ));
    }
    if let Some(w) = &f.wall {
        s.push_str(&format!("; on the wall clock {}", wall_figure(w)));
    }
    if let Some(p) = &f.pooled {
        s.push_str(&by_machine(p));
    }
    let mut warn = clock_warnings(f);
    warn.extend(f.pooled.as_ref().and_then(machines_disagree));
    if !warn.is_empty() {
        // Said first: a reader must not take the figures before what qualifies them.
        s = format!("{}: {s}", warn.join("; "));
    }
    if let Some(p) = q.published {
        s.push_str(&format!("; published {}×: {}", sig(p, 3), f.verdict()));
    }
    s.push('.');
    s
}

/// Each machine's ratio after a pooled finding: `; by machine: node1 1.31× (1.22–1.40×, 4
/// pairs), node2 …`, and the runs left out without a partner on their machine.
fn by_machine(p: &super::machines::Pooled) -> String {
    let each: Vec<String> = p
        .machines
        .iter()
        .map(|m| {
            format!(
                "{} {}, {} pair{})",
                m.host,
                machine_figure(m),
                m.ratio.n_base,
                if m.ratio.n_base == 1 { "" } else { "s" }
            )
        })
        .collect();
    let mut s = format!("; by machine (pairs within each): {}", each.join(", "));
    if p.p_heterogeneity.is_none() {
        s.push_str("; one pair per machine, so the machines are the replicates and whether they disagree is not tested");
    }
    if p.unpaired > 0 {
        s.push_str(&format!(
            "; {} run{} without a partner of the same repetition on the same machine left out",
            p.unpaired,
            if p.unpaired == 1 { "" } else { "s" }
        ));
    }
    s
}

/// A machine's ratio and interval, the bracket left open: `1.50× (1.48–1.52×`.
fn machine_figure(m: &super::machines::MachineRatio) -> String {
    format!(
        "{}× ({}–{}×",
        sig(m.ratio.ratio, 3),
        sig(m.ratio.low, 3),
        sig(m.ratio.high, 3)
    )
}

/// What a pooled finding says first when its machines disagree beyond their intervals: which
/// machines, against the machines' median.
pub(crate) fn machines_disagree(p: &super::machines::Pooled) -> Option<String> {
    if !p.disagree() {
        return None;
    }
    let named: Vec<String> = p
        .machines
        .iter()
        .filter(|m| p.disagreeing.contains(&m.host))
        .map(|m| format!("{} has {})", m.host, machine_figure(m)))
        .collect();
    Some(format!(
        "the machines disagree beyond their intervals ({}, F test of the machine, {}): {} against the machines' median {}×, so the pooled ratio averages machines that differ",
        p.disagreeing.join(" and "),
        p.p_heterogeneity.map_or_else(|| "-".into(), p_value),
        named.join(", "),
        sig(p.median(), 3)
    ))
}

/// A decision in a word: `larger`, `smaller`, `no change`, `undecided`, `not answered`.
fn decision_word(d: Option<Decision>) -> &'static str {
    match d {
        Some(Decision::Larger) => "larger",
        Some(Decision::Smaller) => "smaller",
        Some(Decision::NoChange) => "no change",
        Some(Decision::Undecided) => "undecided",
        None => "not answered",
    }
}

/// The wall clock's ratio with its interval and decision: `1.85× (95% CI 1.70–2.01×,
/// larger)`.
fn wall_figure(w: &super::WallFinding) -> String {
    match w.ratio {
        Some(r) => format!(
            "{}× (95% CI {}–{}×, {})",
            sig(r.ratio, 3),
            sig(r.low, 3),
            sig(r.high, 3),
            decision_word(w.decision)
        ),
        None => "not answered".into(),
    }
}

/// What a finding says before its figures: on an emulated disk, that the two clocks decide
/// differently, and that the disk's clock stood still for over a quarter of a compared
/// phase's wall time; anywhere, that a side's phases waited for a CPU over the threshold
/// ([`super::cpuwait`]).
fn clock_warnings(f: &Finding) -> Vec<String> {
    let mut out: Vec<String> = super::cpuwait::warning(&f.cpu_wait).into_iter().collect();
    if let Some(w) = f.wall.as_ref().filter(|_| f.clocks_disagree()) {
        out.push(format!(
            "the disk's clock and the wall clock decide differently ({} on the disk's clock, {} on the wall clock)",
            decision_word(f.decision),
            decision_word(w.decision)
        ));
    }
    if let Some(p) = f.large_pause() {
        out.push(format!(
            "the emulated disk's clock stood still for {:.0}% of a compared phase's wall time (worst: {} on {}, repetition {}, {} of {})",
            p.share() * 100.0,
            p.phase,
            p.testbed,
            p.rep,
            crate::base::text::format_secs_unit(p.pause_s),
            crate::base::text::format_secs_unit(p.wall_s)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::findings::evaluate;
    use crate::analysis::stats::ratio_of_means;
    use crate::results::{Question, DEFAULT_EPSILON};

    fn question(metric: &str, published: Option<f64>) -> Question {
        Question {
            id: "q1".into(),
            ask: String::new(),
            baseline: "journal-16M".into(),
            variant: "journal-1G".into(),
            compares: Compares::Testbeds,
            testbed: None,
            workload: None,
            phase: Some("dir_remove".into()),
            metric: metric.into(),
            filter: Default::default(),
            published,
            source: String::new(),
            epsilon: DEFAULT_EPSILON,
            looks: None,
        }
    }

    fn finding(metric: &str, published: Option<f64>, base: &[f64], variant: &[f64]) -> Finding {
        let q = question(metric, published);
        let mut f = evaluate(&q, &[]);
        f.base_values = base.to_vec();
        f.variant_values = variant.to_vec();
        f.ratio = ratio_of_means(base, variant).ok();
        f.decision = f.ratio.map(|r| r.decide(q.epsilon));
        f.unit = CORE
            .iter()
            .find(|m| m.def.key == metric)
            .map(|m| m.def.unit.to_string())
            .unwrap_or_default();
        f.better = CORE
            .iter()
            .find(|m| m.def.key == metric)
            .map(|m| m.def.better)
            .unwrap_or_default();
        f.agrees = crate::analysis::findings::agreement(published, f.decision, DEFAULT_EPSILON);
        f
    }

    #[test]
    fn significant_figures_never_round_to_zero_or_one() {
        assert_eq!(sig(2.1234, 3), "2.12");
        assert_eq!(sig(0.004567, 3), "0.00457");
        assert_eq!(sig(1.0049, 3), "1.00");
        assert_eq!(sig(1.0049, 4), "1.005");
        assert_eq!(sig(1849.0, 3), "1849");
        assert_eq!(pct(1.06), "+6.0%");
        assert_eq!(pct(0.959), "−4.1%");
        assert_eq!(pct(3.67), "+267%");
        assert_eq!(p_value(0.0004), "p < 0.001");
        assert_eq!(p_value(0.0312), "p = 0.03");
        assert_eq!(p_value(0.0042), "p = 0.004");
    }

    #[test]
    fn a_clear_effect_reads_with_its_interval_and_the_published_figure() {
        let f = finding(
            "ops_per_s",
            Some(3.67),
            &[500.0, 510.0, 490.0, 505.0],
            &[1050.0, 1040.0, 1060.0, 1045.0],
        );
        let s = sentence(&f);
        assert!(
            s.starts_with("journal-1G has 2.09× the op rate of journal-16M in dir_remove (95% CI "),
            "{s}"
        );
        assert!(
            s.contains(
                "p < 0.001, n = 4 + 4): journal-1G is better; published 3.67×: same direction."
            ),
            "{s}"
        );
    }

    #[test]
    fn a_faster_time_is_better_and_an_opposite_finding_says_so() {
        let f = finding("elapsed", Some(2.0), &[10.0, 10.2, 9.9], &[5.0, 5.1, 4.9]);
        let s = sentence(&f);
        assert!(
            s.contains("journal-1G has 0.498× the elapsed time of journal-16M"),
            "{s}"
        );
        assert!(
            s.contains("journal-1G is better; published 2.00×: opposite direction."),
            "{s}"
        );
    }

    #[test]
    fn no_change_names_the_largest_effect_ruled_out() {
        let f = finding(
            "ops_per_s",
            None,
            &[100.0, 101.0, 99.0, 100.5, 99.5],
            &[100.2, 100.8, 99.4, 100.1, 99.9],
        );
        assert_eq!(f.decision, Some(Decision::NoChange));
        let s = sentence(&f);
        assert!(s.contains(": no change (CI −"), "{s}");
        assert!(s.contains("no effect larger than 2%."), "{s}");
        // Against a published effect, a decided no-change says it found none (not that the
        // effect went the other way); against a published 1.0, it agrees.
        let values = (
            [100.0, 101.0, 99.0, 100.5, 99.5],
            [100.2, 100.8, 99.4, 100.1, 99.9],
        );
        let f = finding("ops_per_s", Some(2.12), &values.0, &values.1);
        assert!(
            sentence(&f).ends_with("published 2.12×: no effect here, where the study found one."),
            "{}",
            sentence(&f)
        );
        let f = finding("ops_per_s", Some(1.0), &values.0, &values.1);
        assert!(
            sentence(&f).ends_with("published 1.00×: no effect, as published."),
            "{}",
            sentence(&f)
        );
    }

    #[test]
    fn undecided_and_unanswered_say_why() {
        let f = finding("ops_per_s", None, &[100.0, 150.0], &[120.0, 90.0]);
        assert_eq!(f.decision, Some(Decision::Undecided));
        let s = sentence(&f);
        assert!(s.contains(": undecided (95% CI "), "{s}");
        assert!(s.contains("is still possible."), "{s}");
        // A phase of milliseconds says so, whatever the decision.
        let mut short = f.clone();
        short.phase_s = Some(0.003);
        assert!(
            sentence(&short).ends_with(
                "is still possible; the phase lasts 3.00ms, too short to measure the filesystem more than the machine."
            ),
            "{}",
            sentence(&short)
        );
        short.phase_s = Some(2.5);
        assert_eq!(sentence(&short), s);
        let f = finding("ops_per_s", None, &[100.0, 101.0], &[]);
        assert_eq!(
            sentence(&f),
            "q1: not answered in dir_remove: no results for the variant journal-1G (n = 2 + 0)."
        );
    }
}
