//! The history drawn: one point per group (kernel, commit, version, host or day) at its mean
//! with its 95% interval as a bar, the means joined in order, and a triangle over each group
//! whose change from the one before is outside the noise (the history's Welch + Holm flags),
//! pointing the way the figure moved and coloured by better / worse. Inline SVG text, as the
//! report's forest plot is written, so that the HTML page stays one self-contained file and a
//! test can count the points and marks by their classes.

use std::fmt::Write;

use super::history::{Group, History};
use crate::analysis::report::export::esc;
use crate::analysis::report::plots::Plot;
use crate::base::text::fmt_num;

const W: f64 = 720.0;
const H: f64 = 360.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 80.0;

/// A step of 1, 2 or 5 × 10^k giving about five ticks over `span`.
fn tick_step(span: f64) -> f64 {
    let raw = span / 5.0;
    let decade = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * decade)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * decade)
}

/// The y range: every interval, with a margin; a flat history gets a span around its value.
fn y_range(groups: &[Group]) -> (f64, f64) {
    let lo = groups
        .iter()
        .map(|g| g.ci_low)
        .fold(f64::INFINITY, f64::min);
    let hi = groups
        .iter()
        .map(|g| g.ci_high)
        .fold(f64::NEG_INFINITY, f64::max);
    let span = (hi - lo).max(hi.abs() * 0.02).max(1e-9);
    (lo - span * 0.15, hi + span * 0.25)
}

/// The history as an SVG plot; `None` without groups.
pub fn plot(h: &History) -> Option<Plot> {
    if h.groups.is_empty() || h.groups.iter().any(|g| !g.mean.is_finite()) {
        return None;
    }
    let (lo, hi) = y_range(&h.groups);
    let n = h.groups.len() as f64;
    let x = |i: usize| LEFT + (i as f64 + 0.5) / n * (W - LEFT - RIGHT);
    let y = |v: f64| TOP + (hi - v) / (hi - lo) * (H - TOP - BOTTOM);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>"
    );
    axes(&mut svg, h, lo, hi, &y);
    let trend: Vec<String> = h
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| format!("{:.1},{:.1}", x(i), y(g.mean)))
        .collect();
    let _ = writeln!(
        svg,
        "<polyline class=\"trend\" points=\"{}\" fill=\"none\" stroke=\"#999\"/>",
        trend.join(" ")
    );
    for (i, g) in h.groups.iter().enumerate() {
        group(&mut svg, i, g, x(i), &y);
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">mean and 95% interval per group; triangle: a change outside the noise (Welch, Holm, alpha {})</text>\n</svg>",
        LEFT + (W - LEFT - RIGHT) / 2.0,
        H - 8.0,
        h.alpha
    );
    let by = serde_json::to_value(h.by)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    Some(Plot {
        title: format!(
            "{} of {} / {} / {} by {by}: mean and 95% interval, changes outside the noise marked",
            h.metric, h.testbed, h.workload, h.phase
        ),
        id: "history".into(),
        svg,
    })
}

/// The y axis with its ticks and grid lines, and the metric's name.
fn axes(svg: &mut String, h: &History, lo: f64, hi: f64, y: &dyn Fn(f64) -> f64) {
    let step = tick_step(hi - lo);
    let mut t = (lo / step).ceil() * step;
    while t <= hi {
        let (right, ty, label) = (W - RIGHT, y(t), fmt_num(t));
        let _ = writeln!(
            svg,
            "<line class=\"tick\" x1=\"{LEFT}\" x2=\"{right:.1}\" y1=\"{ty:.1}\" y2=\"{ty:.1}\" stroke=\"#e4e4e4\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>",
            LEFT - 6.0,
            ty + 4.0,
        );
        t += step;
    }
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{:.1}\" stroke=\"#000\"/><text x=\"16\" y=\"{:.1}\" transform=\"rotate(-90 16 {:.1})\" text-anchor=\"middle\">{}</text>",
        H - BOTTOM,
        (TOP + H - BOTTOM) / 2.0,
        (TOP + H - BOTTOM) / 2.0,
        esc(&h.metric)
    );
}

/// One group: its interval bar, its mean, its label under the axis, and the mark of a change
/// outside the noise.
fn group(svg: &mut String, i: usize, g: &Group, gx: f64, y: &dyn Fn(f64) -> f64) {
    let _ = write!(
        svg,
        "<g class=\"group\" data-group=\"{i}\"><line class=\"interval\" x1=\"{gx:.1}\" x2=\"{gx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#0072B2\" stroke-width=\"2\"/><circle class=\"point\" cx=\"{gx:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"#0072B2\"><title>{}: {} ({} .. {}), n = {}</title></circle><text x=\"{gx:.1}\" y=\"{:.1}\" text-anchor=\"end\" transform=\"rotate(-30 {gx:.1} {:.1})\">{}</text>",
        y(g.ci_low),
        y(g.ci_high),
        y(g.mean),
        esc(&g.key),
        fmt_num(g.mean),
        fmt_num(g.ci_low),
        fmt_num(g.ci_high),
        g.n,
        H - BOTTOM + 16.0,
        H - BOTTOM + 16.0,
        esc(&g.key)
    );
    if let Some(c) = g.change.as_ref().filter(|c| c.significant) {
        let colour = match c.verdict.as_str() {
            "better" => "#009E73",
            "worse" => "#D55E00",
            _ => "#555",
        };
        // Over the bar, pointing the way the figure moved.
        let top = y(g.ci_high) - 10.0;
        let (tip, base) = if c.ratio >= 1.0 {
            (top - 8.0, top)
        } else {
            (top, top - 8.0)
        };
        let _ = write!(
            svg,
            "<path class=\"change\" d=\"M{:.1} {base:.1} L{gx:.1} {tip:.1} L{:.1} {base:.1} Z\" fill=\"{colour}\"><title>{} {:+.1}% against the group before (p Holm {})</title></path>",
            gx - 6.0,
            gx + 6.0,
            esc(&c.verdict),
            (c.ratio - 1.0) * 100.0,
            c.p_holm.map_or("-".into(), |p| format!("{p:.3}"))
        );
    }
    svg.push_str("</g>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::store::history::{By, Change};

    fn group(key: &str, mean: f64, change: Option<(f64, bool, &str)>) -> Group {
        Group {
            key: key.into(),
            first: String::new(),
            n: 5,
            mean,
            sd: 1.0,
            ci_low: mean - 1.0,
            ci_high: mean + 1.0,
            load: Default::default(),
            change: change.map(|(ratio, significant, verdict)| Change {
                ratio,
                p: Some(0.5),
                p_holm: Some(if significant { 0.001 } else { 0.9 }),
                significant,
                verdict: verdict.into(),
            }),
        }
    }

    #[test]
    fn one_point_per_group_and_a_mark_on_the_flagged_change_only() {
        let h = History {
            metric: "ops_per_s".into(),
            testbed: "xfs".into(),
            workload: "tree".into(),
            phase: "create".into(),
            by: By::Kernel,
            alpha: 0.05,
            method: super::super::history::METHOD,
            groups: vec![
                group("6.1", 100.0, None),
                group("6.6", 100.5, Some((1.005, false, ""))),
                group("6.8", 80.0, Some((0.8, true, "worse"))),
            ],
        };
        let p = plot(&h).expect("a plot");
        assert_eq!(p.svg.matches("class=\"point\"").count(), 3);
        assert_eq!(p.svg.matches("class=\"change\"").count(), 1);
        let marked = p.svg.lines().find(|l| l.contains("class=\"change\""));
        assert!(
            marked.is_some_and(|l| l.contains("data-group=\"2\"") && l.contains("#D55E00")),
            "{}",
            p.svg
        );
        // The mark points down: its tip is below its base.
        assert!(p.svg.contains("worse -20.0% against the group before"));
        assert!(tick_step(37.0) == 10.0 && tick_step(0.9) == 0.2);
    }
}
