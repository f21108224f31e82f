//! Plots as SVG text (plotters' SVG backend; text is drawn as SVG `<text>`, so no font files
//! are needed): bars with standard-deviation error bars per phase across testbeds (the
//! journal-size study's figures), lines of the main figure against the worker count per
//! testbed (the block-reservation study's plots), latency histograms from the stored HDR
//! histograms, and per-second time series.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use plotters::coord::ranged1d::AsRangedCoord;
use plotters::prelude::*;
use serde::Serialize;

use super::cells::{Cell, Report};
use crate::measure::{decode, new_histogram};

/// One figure.
#[derive(Debug, Clone, Serialize)]
pub struct Plot {
    pub title: String,
    /// A file-name-safe identifier.
    pub id: String,
    pub svg: String,
}

const W: u32 = 720;
const H: u32 = 360;

/// Qualitative colours (Okabe–Ito), distinguishable for colour-blind readers.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(213, 94, 0),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(240, 228, 66),
];

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Text safe to put in SVG without escaping questions.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '<' | '>' | '&' | '"' => '_',
            c => c,
        })
        .collect()
}

fn ident(parts: &[&str]) -> String {
    let s: String = parts
        .join("-")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let mut out = String::new();
    for c in s.chars() {
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out.trim_matches('-').to_string()
}

type Draw = Result<(), String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// A chart's frame: its caption, its width and the room for the axis labels.
struct Frame<'t> {
    title: &'t str,
    width: u32,
    x_label_area: u32,
    y_label_area: u32,
}

impl<'t> Frame<'t> {
    /// The usual frame: `W` wide, 40 px under the x axis.
    fn new(title: &'t str, y_label_area: u32) -> Self {
        Frame {
            title,
            width: W,
            x_label_area: 40,
            y_label_area,
        }
    }
}

/// Tells a drawing closure that the SVG text (`'s`) outlives the chart drawn into it (`'a`),
/// which plotters' series need and a closure's signature cannot otherwise say.
type Outlives<'a, 's> = PhantomData<&'a &'s ()>;

/// Draws one chart over `x` and `y` into SVG text: the white ground, the caption and the axes'
/// room are the frame's, the rest `draw`'s. `None` where plotters fails.
fn render<X, Y>(
    frame: &Frame,
    x: X,
    y: Y,
    draw: impl for<'r, 'a, 's> FnOnce(
        &'r mut ChartContext<'a, SVGBackend<'s>, Cartesian2d<X::CoordDescType, Y::CoordDescType>>,
        Outlives<'a, 's>,
    ) -> Draw,
) -> Option<String>
where
    X: AsRangedCoord,
    Y: AsRangedCoord,
{
    let mut svg = String::new();
    let drawn: Draw = (|| {
        let root = SVGBackend::with_string(&mut svg, (frame.width, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(clean(frame.title), ("sans-serif", 15))
            .margin(12)
            .x_label_area_size(frame.x_label_area)
            .y_label_area_size(frame.y_label_area)
            .build_cartesian_2d(x, y)
            .map_err(err)?;
        draw(&mut chart, PhantomData)?;
        root.present().map_err(err)
    })();
    drawn.ok()?;
    Some(svg)
}

/// Every plot of the report, in a stable order.
pub fn all(report: &Report) -> Vec<Plot> {
    let mut out = Vec::new();
    let mut keys: Vec<(String, String)> = Vec::new();
    for c in &report.cells {
        let k = (c.workload.clone(), c.phase.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (w, p) in &keys {
        let cells: Vec<&Cell> = report
            .cells
            .iter()
            .filter(|c| &c.workload == w && &c.phase == p)
            .collect();
        if let Some(plot) = bars(w, p, &cells) {
            out.push(plot);
        }
    }
    out.extend(thread_lines(report));
    out.extend(against_lines(report));
    for (w, p) in &keys {
        if let Some(plot) = latency(report, w, p) {
            out.push(plot);
        }
    }
    for (w, p) in &keys {
        if let Some(plot) = series(report, w, p) {
            out.push(plot);
        }
        if let Some(plot) = latency_over_time(report, w, p) {
            out.push(plot);
        }
    }
    out
}

fn bars(workload: &str, phase: &str, cells: &[&Cell]) -> Option<Plot> {
    let main = &cells.first()?.main;
    let data: Vec<(String, f64, f64)> = cells
        .iter()
        .filter_map(|c| {
            c.metric(main)
                .map(|m| (c.testbed.clone(), m.summary.mean, m.summary.sd))
        })
        .collect();
    if data.is_empty() {
        return None;
    }
    let m = cells[0].metric(main)?;
    let unit = if m.unit.is_empty() {
        m.name.clone()
    } else {
        format!("{} ({})", m.name, m.unit)
    };
    let title = format!("{workload} · {phase}: {unit}, mean ± sd");
    let top = data
        .iter()
        .map(|(_, mean, sd)| mean + sd)
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let n = data.len();
    // Wide enough that every testbed's label fits under its bar.
    let longest = data.iter().map(|d| d.0.chars().count()).max().unwrap_or(0) as u32;
    let width = W.max(n as u32 * (longest * 7 + 30).max(60) + 100);
    let frame = Frame {
        title: &title,
        width,
        x_label_area: 50,
        y_label_area: 70,
    };
    // Integer ranges are inclusive here: 0..=last gives one segment per bar (at least two, so
    // the axis has a length).
    let x = (0..(n.max(2) - 1) as i32).into_segmented();
    let svg = render(&frame, x, 0.0..top, |chart, _| {
        let labels: Vec<String> = data.iter().map(|d| clean(&d.0)).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc(clean(&unit))
            .y_label_formatter(&|y| crate::base::text::fmt_num(*y))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(data.iter().enumerate().map(|(i, (_, mean, _))| {
                let mut r = Rectangle::new(
                    [
                        (SegmentValue::Exact(i as i32), 0.0),
                        (SegmentValue::Exact(i as i32 + 1), *mean),
                    ],
                    color(i).mix(0.85).filled(),
                );
                r.set_margin(0, 0, 12, 12);
                r
            }))
            .map_err(err)?;
        chart
            .draw_series(data.iter().enumerate().map(|(i, (_, mean, sd))| {
                ErrorBar::new_vertical(
                    SegmentValue::CenterOf(i as i32),
                    (mean - sd).max(0.0),
                    *mean,
                    mean + sd,
                    BLACK.stroke_width(2),
                    12,
                )
            }))
            .map_err(err)?;
        Ok(())
    })?;
    Some(Plot {
        id: ident(&["bars", workload, phase]),
        title,
        svg,
    })
}

fn thread_lines(report: &Report) -> Vec<Plot> {
    // (series, phase) -> testbed -> [(threads, mean)]
    let mut groups: Vec<(String, String)> = Vec::new();
    let mut data: BTreeMap<(String, String), PerTestbed> = BTreeMap::new();
    let mut units: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut axes: BTreeMap<(String, String), String> = BTreeMap::new();
    for c in &report.cells {
        let Some(m) = c.main_metric() else { continue };
        let k = (c.series.clone(), c.line_phase.clone());
        if !groups.contains(&k) {
            groups.push(k.clone());
        }
        units.insert(k.clone(), format!("{} ({})", m.name, m.unit));
        axes.entry(k.clone()).or_insert_with(|| c.axis.clone());
        data.entry(k)
            .or_default()
            .entry(c.testbed.clone())
            .or_default()
            .push((c.threads as f64, m.summary.mean));
    }
    groups
        .into_iter()
        .filter_map(|k| {
            let unit = units[&k].clone();
            let title = format!("{} · {}: {unit} by threads", k.0, k.1);
            let lines = Lines {
                title,
                id: ident(&["threads", &k.0, &k.1]),
                x_desc: axes[&k].clone(),
                y_desc: unit,
                whole_x: true,
            };
            line_plot(report, &lines, &data[&k])
        })
        .collect()
}

/// The figures kinds registered of metrics against another (aging: layout against usage, the
/// fragmentation study's graphs): one line per testbed.
fn against_lines(report: &Report) -> Vec<Plot> {
    let mut out = Vec::new();
    for (w, a) in &report.against {
        for &(key, name) in a.ys {
            let mut data = PerTestbed::new();
            for c in report.cells.iter().filter(|c| &c.workload == w) {
                if let (Some(u), Some(m)) = (c.metric(a.x), c.metric(key)) {
                    data.entry(c.testbed.clone())
                        .or_default()
                        .push((u.summary.mean, m.summary.mean));
                }
            }
            let lines = Lines {
                title: format!("{w}: {name} against {}", a.x_name),
                id: ident(&[a.x_name, w, key]),
                x_desc: a.x_desc.into(),
                y_desc: name.to_string(),
                whole_x: false,
            };
            out.extend(line_plot(report, &lines, &data));
        }
    }
    out
}

/// Draws one coloured line per `(label, points)`, in order, with a legend; `marks` also marks
/// every point; `corner` places the legend (plotters' default where `None`).
fn draw_lines<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    series: &[(impl AsRef<str>, Vec<(f64, f64)>)],
    marks: bool,
    corner: Option<SeriesLabelPosition>,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, (label, pts)) in series.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            .map_err(err)?
            .label(clean(label.as_ref()))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        if marks {
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))
                .map_err(err)?;
        }
    }
    let mut labels = chart.configure_series_labels();
    labels.background_style(WHITE.mix(0.85)).border_style(BLACK);
    if let Some(corner) = corner {
        labels.position(corner);
    }
    labels.draw().map_err(err)
}

/// testbed -> [(x, y)]
type PerTestbed = BTreeMap<String, Vec<(f64, f64)>>;

/// What a line plot is about.
struct Lines {
    title: String,
    id: String,
    x_desc: String,
    y_desc: String,
    /// X values are whole numbers (threads): label only those.
    whole_x: bool,
}

/// One line per testbed (in the report's testbed order), points marked; none with fewer than
/// two distinct x values.
fn line_plot(report: &Report, lines: &Lines, per_tb: &PerTestbed) -> Option<Plot> {
    let xs: Vec<f64> = per_tb.values().flatten().map(|(x, _)| *x).collect();
    let distinct = {
        let mut v = xs.clone();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v.len()
    };
    if distinct < 2 {
        return None;
    }
    let xmax = xs.iter().copied().fold(1e-9f64, f64::max);
    let ymax = per_tb
        .values()
        .flatten()
        .map(|(_, v)| *v)
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let frame = Frame::new(&lines.title, 70);
    let svg = render(&frame, 0.0..xmax * 1.05, 0.0..ymax, |chart, _| {
        let whole = lines.whole_x;
        chart
            .configure_mesh()
            .x_desc(&lines.x_desc)
            .x_label_formatter(&|x| {
                if !whole {
                    crate::base::text::fmt_num(*x)
                } else if x.fract() == 0.0 {
                    format!("{x:.0}")
                } else {
                    String::new()
                }
            })
            .y_desc(clean(&lines.y_desc))
            .y_label_formatter(&|y| crate::base::text::fmt_num(*y))
            .draw()
            .map_err(err)?;
        let series: Vec<(&str, Vec<(f64, f64)>)> = report
            .testbeds
            .iter()
            .filter_map(|t| per_tb.get(t).map(|p| (t.as_str(), p)))
            .map(|(t, pts)| {
                let mut pts = pts.clone();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                (t, pts)
            })
            .collect();
        draw_lines(chart, &series, true, Some(SeriesLabelPosition::UpperLeft))
    })?;
    Some(Plot {
        id: lines.id.clone(),
        title: lines.title.clone(),
        svg,
    })
}

/// Log-spaced buckets from the merged HDR histogram of every repetition, per testbed: the
/// share of operations (in %) whose latency falls in each bucket.
fn latency(report: &Report, workload: &str, phase: &str) -> Option<Plot> {
    let labels = super::cells::workload_labels(&report.results, &[]);
    let mut per_tb: Vec<(String, crate::measure::LatencyHistogram)> = Vec::new();
    for t in &report.testbeds {
        let mut h = new_histogram();
        for (r, w) in report.results.iter().zip(&labels) {
            if &r.testbed.label != t || w != workload {
                continue;
            }
            for p in r.phases.iter().filter(|p| p.name == phase) {
                if let Some(d) = decode(&p.latency) {
                    let _ = h.add(&d);
                }
            }
        }
        if !h.is_empty() {
            per_tb.push((t.clone(), h));
        }
    }
    if per_tb.is_empty() {
        return None;
    }
    let lo = per_tb.iter().map(|(_, h)| h.min_nz()).min()?.max(1) as f64;
    let hi = per_tb.iter().map(|(_, h)| h.max()).max()?.max(2) as f64;
    let (lo, hi) = (lo * 0.9, hi * 1.1);
    const BUCKETS: usize = 40;
    let step = (hi / lo).ln() / BUCKETS as f64;
    let edges: Vec<f64> = (0..=BUCKETS)
        .map(|i| lo * (step * i as f64).exp())
        .collect();
    let lines: Vec<(String, Vec<(f64, f64)>)> = per_tb
        .iter()
        .map(|(t, h)| {
            let total = h.len() as f64;
            let pts = edges
                .windows(2)
                .map(|e| {
                    let n = h.count_between(e[0].ceil() as u64, e[1].floor() as u64);
                    ((e[0] * e[1]).sqrt() / 1e3, n as f64 * 100.0 / total)
                })
                .collect();
            (t.clone(), pts)
        })
        .collect();
    let ymax = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.1))
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let title = format!("{workload} · {phase}: latency distribution");
    let x = (lo / 1e3..hi / 1e3).log_scale();
    let svg = render(&Frame::new(&title, 60), x, 0.0..ymax, |chart, _| {
        chart
            .configure_mesh()
            .x_desc("latency (µs, log scale)")
            .y_desc("% of operations")
            .x_label_formatter(&|x| crate::base::text::fmt_num(*x))
            .draw()
            .map_err(err)?;
        draw_lines(chart, &lines, false, None)
    })?;
    Some(Plot {
        id: ident(&["latency", workload, phase]),
        title,
        svg,
    })
}

/// Where a series point's interval starts (seconds from the phase start) and how long it
/// really is: the last one ends with the phase (its measured time plus its ramp).
pub(crate) fn interval_span(
    p: &crate::results::PhaseResult,
    s: &crate::results::SeriesPoint,
) -> (f64, f64) {
    let ivl = p.interval_s.unwrap_or(1.0);
    let end = p.wall_s + p.ramp_s.unwrap_or(0.0);
    (s.t, (end - s.t).clamp(0.0, ivl))
}

/// Operations per second over the phase, first repetition of each testbed.
fn series(report: &Report, workload: &str, phase: &str) -> Option<Plot> {
    let labels = super::cells::workload_labels(&report.results, &[]);
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut ramp = 0.0f64;
    for t in &report.testbeds {
        let first = report
            .results
            .iter()
            .zip(&labels)
            .filter(|(r, w)| &r.testbed.label == t && *w == workload)
            .min_by_key(|(r, _)| r.rep)
            .and_then(|(r, _)| r.phases.iter().find(|p| p.name == phase));
        if let Some(p) = first {
            ramp = ramp.max(p.ramp_s.unwrap_or(0.0));
            if p.series.len() >= 2 {
                // The last interval is usually partial: scale it by its real length, and leave
                // it out when it is too short to say anything.
                let pts: Vec<(f64, f64)> = p
                    .series
                    .iter()
                    .filter_map(|s| {
                        let (t, len) = interval_span(p, s);
                        (len >= 0.2 * p.interval_s.unwrap_or(1.0)).then(|| (t, s.ops as f64 / len))
                    })
                    .collect();
                if pts.len() >= 2 {
                    lines.push((t.clone(), pts));
                }
            }
        }
    }
    if lines.is_empty() {
        return None;
    }
    let xmax = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.0))
        .fold(1.0f64, f64::max)
        + 1.0;
    let ymax = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.1))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.15;
    let title = format!("{workload} · {phase}: operations per second over time (first repetition)");
    let svg = render(&Frame::new(&title, 70), 0.0..xmax, 0.0..ymax, |chart, _| {
        chart
            .configure_mesh()
            .x_desc("seconds from phase start")
            .y_desc("ops/s")
            .y_label_formatter(&|y| crate::base::text::fmt_num(*y))
            .draw()
            .map_err(err)?;
        if ramp > 0.0 {
            shade_ramp(chart, ramp.min(xmax), 0.0, ymax)?;
        }
        draw_lines(chart, &lines, false, None)
    })?;
    Some(Plot {
        id: ident(&["series", workload, phase]),
        title,
        svg,
    })
}

/// Shades the ramp, from the phase start to `end`, with its legend entry.
fn shade_ramp<'a, DB, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    end: f64,
    ymin: f64,
    ymax: f64,
) -> Draw
where
    DB: DrawingBackend + 'a,
    Y: Ranged<ValueType = f64>,
{
    let shade = RGBColor(200, 200, 200).mix(0.5);
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(0.0, ymin), (end, ymax)],
            shade.filled(),
        )))
        .map_err(err)?
        .label("ramp (excluded)")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], shade.filled()));
    Ok(())
}

/// Reads one figure of a series interval.
type Pick = fn(&crate::results::SeriesPoint) -> Option<u64>;

/// Runs of lines over time: contiguous stretches of points (an interval without a figure
/// ends a stretch, so it shows as a gap, not as a line to zero).
type Stretches = Vec<Vec<(f64, f64)>>;

/// One latency line per percentile (or per testbed), of a phase's series: for every interval
/// with latency, its start and the figure in milliseconds; intervals without a completed
/// operation are gaps.
pub(crate) fn latency_lines(
    p: &crate::results::PhaseResult,
    pick: impl Fn(&crate::results::SeriesPoint) -> Option<u64>,
) -> Stretches {
    let mut out: Stretches = Vec::new();
    let mut run: Vec<(f64, f64)> = Vec::new();
    for s in &p.series {
        match pick(s) {
            Some(ns) => run.push((s.t, ns.max(1) as f64 / 1e6)),
            None => {
                if !run.is_empty() {
                    out.push(std::mem::take(&mut run));
                }
            }
        }
    }
    if !run.is_empty() {
        out.push(run);
    }
    out
}

/// Each testbed's `phase` of `workload` in its first repetition, kept when it has at least two
/// intervals with latency.
fn first_phases<'a>(
    report: &'a Report,
    workload: &str,
    phase: &str,
) -> Vec<(&'a str, &'a crate::results::PhaseResult)> {
    let labels = super::cells::workload_labels(&report.results, &[]);
    report
        .testbeds
        .iter()
        .filter_map(|t| {
            report
                .results
                .iter()
                .zip(&labels)
                .filter(|(r, w)| &r.testbed.label == t && *w == workload)
                .min_by_key(|(r, _)| r.rep)
                .and_then(|(r, _)| r.phases.iter().find(|p| p.name == phase))
                .filter(|p| p.series.iter().filter(|s| s.latency.is_some()).count() >= 2)
                .map(|p| (t.as_str(), p))
        })
        .collect()
}

/// The lines of the latency-over-time plot (name, stretches, dashed): with one testbed its
/// p50, p99, p99.9 and max (and, under a rate limit, the dashed p99 from the scheduled time);
/// with several, the p99 of each.
fn latency_plot_lines(
    firsts: &[(&str, &crate::results::PhaseResult)],
) -> Vec<(String, Stretches, bool)> {
    use crate::results::SeriesPoint;
    let p99 = |s: &SeriesPoint| s.latency.as_ref().map(|l| l.p99_ns);
    let mut lines: Vec<(String, Stretches, bool)> = Vec::new();
    if let [(_, p)] = firsts {
        let pick: [(&str, Pick); 4] = [
            ("p50", |s| s.latency.as_ref().map(|l| l.p50_ns)),
            ("p99", |s| s.latency.as_ref().map(|l| l.p99_ns)),
            ("p99.9", |s| s.latency.as_ref().map(|l| l.p999_ns)),
            ("max", |s| s.latency.as_ref().map(|l| l.max_ns)),
        ];
        for (name, f) in pick {
            lines.push((name.to_string(), latency_lines(p, f), false));
        }
        if p.series.iter().any(|s| s.scheduled_latency.is_some()) {
            let f = |s: &SeriesPoint| s.scheduled_latency.as_ref().map(|l| l.p99_ns);
            lines.push((
                "p99 from the scheduled time".into(),
                latency_lines(p, f),
                true,
            ));
        }
    } else {
        for (t, p) in firsts {
            lines.push((format!("{t} p99"), latency_lines(p, p99), false));
        }
    }
    lines
}

/// Latency over time of a phase (first repetition): with one testbed its p50, p99, p99.9 and
/// max per interval (and the p99 from the scheduled time under a rate limit); with several,
/// the p99 of each testbed, so that 4-8 lines stay readable. Log scale; the ramp shaded.
fn latency_over_time(report: &Report, workload: &str, phase: &str) -> Option<Plot> {
    let firsts = first_phases(report, workload, phase);
    let mut lines = latency_plot_lines(&firsts);
    lines.retain(|(_, l, _)| !l.is_empty());
    if lines.is_empty() {
        return None;
    }
    let ramp = firsts
        .iter()
        .filter_map(|(_, p)| p.ramp_s)
        .fold(0.0, f64::max);
    let pts = || lines.iter().flat_map(|(_, l, _)| l.iter().flatten());
    let xmax = firsts
        .iter()
        .map(|(_, p)| p.wall_s + p.ramp_s.unwrap_or(0.0))
        .fold(0.0f64, f64::max)
        .max(pts().map(|p| p.0).fold(0.0, f64::max))
        .max(1e-3);
    let ymin = pts().map(|p| p.1).fold(f64::INFINITY, f64::min) * 0.8;
    let ymax = pts().map(|p| p.1).fold(0.0f64, f64::max) * 1.25;
    let title = format!("{workload} · {phase}: latency over time (first repetition)");
    let y = (ymin..ymax).log_scale();
    let svg = render(&Frame::new(&title, 70), 0.0..xmax, y, |chart, _| {
        chart
            .configure_mesh()
            .x_desc("seconds from phase start")
            .y_desc("latency, ms (log)")
            .y_label_formatter(&|y| crate::base::text::fmt_num(*y))
            .draw()
            .map_err(err)?;
        if ramp > 0.0 {
            shade_ramp(chart, ramp.min(xmax), ymin, ymax)?;
        }
        for (i, (label, stretches, dashed)) in lines.iter().enumerate() {
            let c = color(i);
            let style = c.stroke_width(if *dashed { 1 } else { 2 });
            for (k, run) in stretches.iter().enumerate() {
                let drawn = chart
                    .draw_series(LineSeries::new(run.clone(), style))
                    .map_err(err)?;
                if k == 0 {
                    drawn
                        .label(clean(label))
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
                }
                if run.len() == 1 {
                    chart
                        .draw_series(run.iter().map(|p| Circle::new(*p, 2, c.filled())))
                        .map_err(err)?;
                }
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(err)
    })?;
    Some(Plot {
        id: ident(&["latency-over-time", workload, phase]),
        title,
        svg,
    })
}

#[cfg(test)]
mod time_tests {
    use super::*;
    use crate::results::{LatencySummary, PhaseResult, SeriesPoint};

    fn point(t: f64, p99: Option<u64>) -> SeriesPoint {
        SeriesPoint {
            t,
            ops: p99.map_or(0, |_| 10),
            latency: p99.map(|ns| LatencySummary {
                count: 10,
                p99_ns: ns,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn intervals_without_latency_are_gaps() {
        let lat = serde_json::to_value(LatencySummary::default()).unwrap();
        let mut p: PhaseResult = serde_json::from_value(serde_json::json!({
            "name": "x", "wall_s": 2.0, "user_s": 0.0, "sys_s": 0.0, "ops": 30, "bytes": 0,
            "ops_per_s": 15.0, "bytes_per_s": 0.0, "latency": lat, "device": null, "series": []
        }))
        .unwrap();
        p.series = vec![
            point(0.0, Some(2_000_000)),
            point(0.5, Some(4_000_000)),
            point(1.0, None),
            point(1.5, Some(1_000_000)),
        ];
        p.interval_s = Some(0.5);
        let lines = latency_lines(&p, |s| s.latency.as_ref().map(|l| l.p99_ns));
        assert_eq!(lines, vec![vec![(0.0, 2.0), (0.5, 4.0)], vec![(1.5, 1.0)]]);
        let (t, len) = interval_span(
            &PhaseResult {
                wall_s: 1.2,
                ramp_s: Some(0.5),
                ..p.clone()
            },
            &p.series[3],
        );
        assert_eq!(t, 1.5);
        assert!((len - 0.2).abs() < 1e-9, "{len}");
    }
}
