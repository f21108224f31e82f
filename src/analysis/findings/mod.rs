//! Findings: the answer to each question of a study, computed from result files alone.
//!
//! A [`Question`] names a baseline and a variant (testbeds or workloads), a phase and a metric;
//! its finding is the ratio variant / baseline of the metric's means over the repetitions, with
//! a 95% interval that stays positive ([`crate::analysis::stats::ratio`]) — a repeated one when
//! `reps = "auto"` stopped as soon as it decided ([`crate::analysis::stats::sequential`]) — the decision
//! that interval supports at the question's ε, and whether it points the way the published figure did.
//! Everything here is a pure function of the results: the report, `fsgauge run`'s summary and
//! `reps = "auto"` all call [`findings`] or [`evaluate`], and give the same numbers.
//!
//! On an emulated disk a finding is decided on the disk's own clock: elapsed times and rates
//! of each phase over its disk time, wall − the clock's pause
//! ([`crate::results::PhaseResult::times`]), which the emulator falling behind its model does
//! not lengthen. Where any compared phase paused, the finding carries the same question
//! answered on the wall clock ([`WallFinding`]) and its sentence states that ratio beside the
//! decided one, saying first when the two clocks decide differently or a compared phase's
//! clock stood still for over a quarter of its wall time. The emulator's lateness stays in
//! the record ([`Finding::emulator_behind`]) and withholds nothing.

pub mod cpuwait;
pub mod machines;
pub mod sentence;

use serde::{Deserialize, Serialize};

use crate::analysis::stats::sequential::{self, FAMILY_ALPHA};
use crate::analysis::stats::{paired_with_level, ratio_with_level, Decision, Ratio};
use crate::results::clock::Clock;
use crate::results::metric::{Better, CORE};
use crate::results::{Compares, PhaseResult, Question, RunResult};

/// The answer to one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub question: Question,
    /// The metric's unit, e.g. `ops/s`, `s`.
    pub unit: String,
    /// Which way is better for the metric.
    pub better: Better,
    /// The values per repetition of each side, in result order.
    pub base_values: Vec<f64>,
    pub variant_values: Vec<f64>,
    /// The ratio variant / baseline with its interval; `None` when it cannot be computed
    /// (see `problem`).
    pub ratio: Option<Ratio>,
    /// What the interval says at the question's ε; `None` without a ratio.
    pub decision: Option<Decision>,
    /// Whether the measured ratio points the same way as the published one (both above 1 or
    /// both below); `None` without a published figure, or while undecided.
    pub agrees: Option<bool>,
    /// Why there is no ratio (too few repetitions, no matching results, a zero value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Mean seconds of the shorter of the two phases compared ([`shorter_phase_s`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_s: Option<f64>,
    /// The compared phases whose emulated disk fell behind its model ([`emulator_behind`]),
    /// worst first: a record of the emulator's lateness. The finding does not rest on it: it
    /// is decided on the disk's clock, which stood still while the emulator was behind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub emulator_behind: Vec<LatePhase>,
    /// The compared phases whose emulated disk's clock stopped ([`paused_phases`]), largest
    /// share of wall time first; empty when none did (and in results from before the disk
    /// had a clock), and then the finding reads the same on both clocks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paused: Vec<PausedPhase>,
    /// The same question on the wall clock, stated beside the finding (decided on the
    /// disk's clock) when any compared phase paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall: Option<WallFinding>,
    /// The emulated disk the results ran on (`testbed.device_model.reference`, e.g.
    /// `st3500641as`); absent on this machine's own storage. Runs on different disks are
    /// never pooled: each disk has a finding of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Where the results come from two machines or more: each machine's ratio, and whether
    /// they agree; `ratio` is then the pooled one, pairs formed within each machine
    /// ([`machines`]). Absent for one machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooled: Option<machines::Pooled>,
    /// For a question that times its phases (elapsed time or a rate): how long each side's
    /// compared phases waited for a CPU ([`cpuwait`]); empty otherwise, and in results from
    /// before fsgauge recorded it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_wait: Vec<cpuwait::SideWait>,
}

/// The disk a result ran on: its emulated disk's profile reference, or none for this
/// machine's own storage.
pub fn device_of(r: &RunResult) -> Option<String> {
    r.testbed.device_model.as_ref().map(|m| m.reference.clone())
}

/// How a disk is named in findings and tables.
pub fn device_name(device: Option<&str>) -> &str {
    device.unwrap_or("this machine")
}

/// A compared phase whose emulated disk replied late (lateness p99 over
/// [`crate::results::device::LATE_P99_MS`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatePhase {
    pub phase: String,
    pub testbed: String,
    pub rep: u32,
    pub lateness_p99_ms: f64,
}

/// A compared phase whose emulated disk's clock stopped: how long, against its wall time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PausedPhase {
    pub phase: String,
    pub testbed: String,
    pub rep: u32,
    /// The disk clock's pause, seconds ([`PhaseResult::times`]).
    pub pause_s: f64,
    /// The phase's wall time, seconds.
    pub wall_s: f64,
}

impl PausedPhase {
    /// The share of the phase's wall time the disk's clock stood still.
    pub fn share(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.pause_s / self.wall_s
        } else {
            0.0
        }
    }
}

/// A share of a compared phase's wall time above which a finding says, before its figures,
/// how long the disk's clock stood still: a quarter.
pub const LARGE_PAUSE_SHARE: f64 = 0.25;

/// A question's answer on the wall clock: the metric's elapsed time and rates as measured,
/// with the emulator's pauses in them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WallFinding {
    pub base_values: Vec<f64>,
    pub variant_values: Vec<f64>,
    pub ratio: Option<Ratio>,
    pub decision: Option<Decision>,
}

/// Whether a decision agrees with a published ratio: a larger or smaller finding where the
/// study found the same direction, a no-change where the published figure is within ±ε of 1.
/// None when there is nothing to compare (no published figure, or undecided).
pub fn agreement(published: Option<f64>, decision: Option<Decision>, epsilon: f64) -> Option<bool> {
    match (published, decision) {
        (Some(p), Some(Decision::Larger)) => Some(p > 1.0),
        (Some(p), Some(Decision::Smaller)) => Some(p < 1.0),
        (Some(p), Some(Decision::NoChange)) => Some((p - 1.0).abs() <= epsilon),
        _ => None,
    }
}

impl Finding {
    /// How the finding stands against the published figure, in words: "same direction",
    /// "opposite direction", "no effect here, where the study found one" (a decided no-change
    /// against a published effect beyond ε), "no effect, as published", or "not yet
    /// comparable" (undecided, or no published figure).
    pub fn verdict(&self) -> &'static str {
        match (self.agrees, self.decision) {
            (Some(true), Some(Decision::NoChange)) => "no effect, as published",
            (Some(true), _) => "same direction",
            (Some(false), Some(Decision::NoChange)) => "no effect here, where the study found one",
            (Some(false), _) => "opposite direction",
            (None, _) => "not yet comparable",
        }
    }

    /// Whether the finding times a phase that lasts under [`SHORT_PHASE_S`]: its figures
    /// measure the machine (scheduling, caches, timer) more than the filesystem. Counted
    /// figures (bytes written, extents) of a short phase are not affected.
    pub fn too_short(&self) -> bool {
        timed(&self.unit) && self.phase_s.is_some_and(|t| t < SHORT_PHASE_S)
    }

    /// Whether the disk's clock and the wall clock decide the question differently.
    pub fn clocks_disagree(&self) -> bool {
        self.wall
            .as_ref()
            .is_some_and(|w| w.decision != self.decision)
    }

    /// The compared phase whose disk clock stood still for the largest share of its wall
    /// time, when that share is over [`LARGE_PAUSE_SHARE`].
    pub fn large_pause(&self) -> Option<&PausedPhase> {
        self.paused
            .first()
            .filter(|p| p.share() > LARGE_PAUSE_SHARE)
    }

    /// Whether more repetitions could still change the answer (`reps = "auto"` stops when no
    /// question is undecided). A question without any matching results is not undecided:
    /// more repetitions of the same plan cannot give it values.
    pub fn undecided(&self) -> bool {
        match self.decision {
            Some(d) => d == Decision::Undecided,
            None => !self.base_values.is_empty() && !self.variant_values.is_empty(),
        }
    }
}

/// Whether a metric of this unit times its phase: a time, or a rate per second.
fn timed(unit: &str) -> bool {
    matches!(unit, "s" | "ms" | "µs" | "us") || unit.ends_with("/s")
}

/// The per-look confidence level of a question's interval: 95%, or the repeated interval's
/// level when `reps = "auto"` looked at it after every round ([`sequential`]).
pub fn confidence_level(q: &Question) -> f64 {
    match q.looks {
        Some(l) => sequential::repeated_level(l.first as usize, l.last as usize),
        None => 1.0 - FAMILY_ALPHA,
    }
}

/// The questions the results carry, each once (by plan and id), in the order first seen.
pub fn questions(results: &[RunResult]) -> Vec<Question> {
    questions_of_plans(results)
        .into_iter()
        .map(|(_, q)| q)
        .collect()
}

/// [`questions`] with the name of the plan each came from.
fn questions_of_plans(results: &[RunResult]) -> Vec<(String, Question)> {
    let mut out: Vec<(String, Question)> = Vec::new();
    for r in results {
        let Some(study) = &r.study else { continue };
        for q in &study.questions {
            if !out.iter().any(|(p, o)| *p == study.plan && o.id == q.id) {
                out.push((study.plan.clone(), q.clone()));
            }
        }
    }
    out
}

/// The finding of every question the results carry, each over the results of its own plan
/// (a results directory may hold the runs of several plans with the same labels).
pub fn findings(results: &[RunResult]) -> Vec<Finding> {
    let mut devices: Vec<Option<String>> = Vec::new();
    for r in results {
        let d = device_of(r);
        if !devices.contains(&d) {
            devices.push(d);
        }
    }
    let mut out = Vec::new();
    for (plan, q) in &questions_of_plans(results) {
        for device in &devices {
            let own: Vec<RunResult> = results
                .iter()
                .filter(|r| r.study.as_ref().is_some_and(|s| s.plan == *plan))
                .filter(|r| device_of(r) == *device)
                .cloned()
                .collect();
            // A plan that never ran on this disk has nothing to say about it.
            if own.is_empty() && devices.len() > 1 {
                continue;
            }
            let mut f = evaluate(q, &own);
            f.device = device.clone();
            out.push(f);
        }
    }
    out
}

/// The value of a question's metric in one phase, its elapsed time and rates on `clock`.
fn metric_value(q: &Question, r: &RunResult, p: &PhaseResult, clock: Clock) -> Option<f64> {
    if let Some(m) = CORE.iter().find(|m| m.def.key == q.metric) {
        return (m.get)(p, clock);
    }
    let def = r.workload.metric(&q.metric)?;
    let v = *p.extra.get(&q.metric)?;
    Some(crate::results::metric::extra_on(def, p, v, clock))
}

/// The unit and direction of a question's metric, from the first result that declares it.
fn metric_decl(q: &Question, results: &[RunResult]) -> (String, Better) {
    if let Some(m) = CORE.iter().find(|m| m.def.key == q.metric) {
        return (m.def.unit.to_string(), m.def.better);
    }
    results
        .iter()
        .find_map(|r| r.workload.metric(&q.metric))
        .map(|d| (d.unit.to_string(), d.better))
        .unwrap_or_default()
}

/// Whether a result is in the question's cell (testbed, workload, sweep cell), whatever side.
fn in_cell(q: &Question, r: &RunResult) -> bool {
    let Some(study) = r.study.as_ref() else {
        return false;
    };
    let fixed = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
    let testbed_ok = q.compares == Compares::Testbeds || fixed(&q.testbed, &r.testbed.label);
    let workload_ok = q.compares == Compares::Workloads || fixed(&q.workload, &study.workload);
    testbed_ok
        && workload_ok
        && q.filter
            .iter()
            .all(|(key, want)| param_is(r.workload.params.get(key), want))
}

/// Whether a recorded parameter has the value a question's `where` asks for: a sweep cell
/// records its value on an axis as a list of one.
fn param_is(have: Option<&serde_json::Value>, want: &serde_json::Value) -> bool {
    have.is_some_and(|v| {
        v == want || matches!(v, serde_json::Value::Array(a) if a.len() == 1 && a[0] == *want)
    })
}

/// Whether a result is on one side of the question (in its cell, and the baseline or the
/// variant; for two phases, every result in the cell): `reps = "auto"` repeats the cells of
/// undecided questions, and a plan checks the phases of each.
pub fn uses(q: &Question, r: &RunResult) -> bool {
    in_cell(q, r)
        && match label(q, r) {
            None => q.compares == Compares::Phases,
            Some(l) => l == q.baseline || l == q.variant,
        }
}

/// A phase shorter than this on average measures the machine more than the filesystem.
pub const SHORT_PHASE_S: f64 = 1.0;

/// The mean disk time ([`PhaseResult::times`]: the wall time off an emulated disk) of the
/// shorter of the two phases a question reads (per side: the mean
/// over the results that side has), or None without results of both. `reps = "auto"` does not
/// repeat a question whose phase is shorter than [`SHORT_PHASE_S`]: more repetitions of a
/// phase that lasts milliseconds measure the machine's noise more precisely, not the
/// filesystem (the run warns with the `--scale` that would make it long enough).
pub fn shorter_phase_s(q: &Question, results: &[RunResult]) -> Option<f64> {
    let mut sides = [(0.0, 0usize), (0.0, 0usize)];
    for r in results.iter().filter(|r| uses(q, r)) {
        let named: [(usize, &str); 2] = match (q.compares, label(q, r), q.phase.as_deref()) {
            (Compares::Phases, _, _) => [(0, &q.baseline), (1, &q.variant)],
            (_, Some(l), Some(p)) if l == q.baseline => [(0, p), (0, "")],
            (_, Some(_), Some(p)) => [(1, p), (1, "")],
            _ => continue,
        };
        for (side, name) in named {
            if let Some(p) = r.phases.iter().find(|p| !name.is_empty() && p.name == name) {
                sides[side].0 += p.times().disk_s;
                sides[side].1 += 1;
            }
        }
    }
    let mean = |(sum, n): (f64, usize)| (n > 0).then(|| sum / n as f64);
    Some(mean(sides[0])?.min(mean(sides[1])?))
}

/// The label a result has on the compared axis (for phases: none, both sides are in it).
fn label<'a>(q: &Question, r: &'a RunResult) -> Option<&'a str> {
    match q.compares {
        Compares::Testbeds => Some(&r.testbed.label),
        Compares::Workloads => r.study.as_ref().map(|s| s.workload.as_str()),
        Compares::Phases => None,
    }
}

/// The question's metric in the named phase of a result, on `clock`.
fn value_in(q: &Question, r: &RunResult, phase: &str, clock: Clock) -> Option<f64> {
    r.phases
        .iter()
        .find(|p| p.name == phase)
        .and_then(|p| metric_value(q, r, p, clock))
}

/// (repetition, value) of each side of a question, its metric read on `clock`.
type Sides = (Vec<(u32, f64)>, Vec<(u32, f64)>);

fn sides<'a>(
    q: &Question,
    results: impl IntoIterator<Item = &'a RunResult>,
    clock: Clock,
) -> Sides {
    let (mut base, mut variant) = (Vec::new(), Vec::new());
    for r in results.into_iter().filter(|r| in_cell(q, r)) {
        let rep = r.rep;
        let at = |phase: &str| value_in(q, r, phase, clock).map(|v| (rep, v));
        match (q.compares, label(q, r), q.phase.as_deref()) {
            (Compares::Phases, _, _) => {
                base.extend(at(&q.baseline));
                variant.extend(at(&q.variant));
            }
            (_, Some(l), Some(phase)) if l == q.baseline => base.extend(at(phase)),
            (_, Some(l), Some(phase)) if l == q.variant => variant.extend(at(phase)),
            _ => {}
        }
    }
    (base, variant)
}

/// The ratio of the two sides at the question's level (paired when they pair up), or why
/// there is none.
fn ratio_of(q: &Question, (base, variant): &Sides) -> Result<Ratio, String> {
    let level = confidence_level(q);
    match pairs(base, variant) {
        Some(p) => paired_with_level(&p, level),
        None => ratio_with_level(&values(base), &values(variant), level),
    }
    .map(|r| on_level_scale(r, level))
    .map_err(|e| e.to_string())
}

/// A ratio whose p is on the same scale as its interval: p < 0.05 exactly when the interval
/// at `level` excludes 1.
fn on_level_scale(r: Ratio, level: f64) -> Ratio {
    Ratio {
        p: (r.p * FAMILY_ALPHA / (1.0 - level)).min(1.0),
        ..r
    }
}

/// The question's ratio on `clock`: pooled over machines, pairs within each, when its
/// results come from two machines or more; otherwise as for one machine ([`ratio_of`]).
fn ratio_on(
    q: &Question,
    results: &[RunResult],
    clock: Clock,
) -> (Sides, Result<Ratio, String>, Option<machines::Pooled>) {
    let on = sides(q, results, clock);
    let level = confidence_level(q);
    match machines::pooled(q, results, clock, level) {
        Some(Ok((r, p))) => (on, Ok(on_level_scale(r, level)), Some(p)),
        Some(Err(e)) => (on, Err(e), None),
        None => {
            let r = ratio_of(q, &on);
            (on, r, None)
        }
    }
}

/// The finding of one question over a set of results (results of other plans, testbeds or
/// phases are ignored): decided on the disk's clock, with the wall clock's answer beside it
/// when any compared phase's disk clock stopped.
pub fn evaluate(q: &Question, results: &[RunResult]) -> Finding {
    let (unit, better) = metric_decl(q, results);
    let (on_disk, ratio, pooled) = ratio_on(q, results, Clock::Disk);
    let (ratio, problem) = match ratio {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e)),
    };
    let decision = ratio.map(|r| r.decide(q.epsilon));
    let paused = paused_phases(q, results);
    let wall = (!paused.is_empty()).then(|| {
        let (on_wall, ratio, _) = ratio_on(q, results, Clock::Wall);
        let ratio = ratio.ok();
        WallFinding {
            base_values: values(&on_wall.0),
            variant_values: values(&on_wall.1),
            ratio,
            decision: ratio.map(|r| r.decide(q.epsilon)),
        }
    });
    Finding {
        question: q.clone(),
        unit: unit.clone(),
        better,
        base_values: values(&on_disk.0),
        variant_values: values(&on_disk.1),
        ratio,
        decision,
        agrees: agreement(q.published, decision, q.epsilon),
        problem,
        phase_s: shorter_phase_s(q, results),
        emulator_behind: emulator_behind(q, results),
        paused,
        wall,
        device: None,
        pooled,
        cpu_wait: if timed(&unit) {
            cpuwait::side_waits(q, results)
        } else {
            Vec::new()
        },
    }
}

/// Every phase a question compares, with its result.
fn compared_phases<'a>(
    q: &'a Question,
    results: &'a [RunResult],
) -> impl Iterator<Item = (&'a RunResult, &'a PhaseResult)> + 'a {
    results.iter().filter(|r| uses(q, r)).flat_map(move |r| {
        let names: Vec<&str> = match (q.compares, q.phase.as_deref()) {
            (Compares::Phases, _) => vec![&q.baseline, &q.variant],
            (_, Some(p)) => vec![p],
            _ => Vec::new(),
        };
        r.phases
            .iter()
            .filter(move |p| names.contains(&p.name.as_str()))
            .map(move |p| (r, p))
    })
}

/// The phases a question compares whose emulated disk's clock stopped, largest share of
/// their wall time first.
pub fn paused_phases(q: &Question, results: &[RunResult]) -> Vec<PausedPhase> {
    let mut out: Vec<PausedPhase> = compared_phases(q, results)
        .filter_map(|(r, p)| {
            let t = p.times();
            t.paused().then(|| PausedPhase {
                phase: p.name.clone(),
                testbed: r.testbed.label.clone(),
                rep: r.rep,
                pause_s: t.pause_s,
                wall_s: t.wall_s,
            })
        })
        .collect();
    out.sort_by(|a, b| b.share().total_cmp(&a.share()));
    out
}

/// The phases a question compares whose emulated disk (main or journal) fell behind its
/// model, worst first.
pub fn emulator_behind(q: &Question, results: &[RunResult]) -> Vec<LatePhase> {
    let mut late: Vec<LatePhase> = Vec::new();
    for (r, p) in compared_phases(q, results) {
        let worst = [&p.device_model, &p.journal_device_model]
            .into_iter()
            .flatten()
            .filter(|d| d.fell_behind())
            .map(|d| d.lateness_p99_ms)
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
        if let Some(ms) = worst {
            late.push(LatePhase {
                phase: p.name.clone(),
                testbed: r.testbed.label.clone(),
                rep: r.rep,
                lateness_p99_ms: ms,
            });
        }
    }
    late.sort_by(|a, b| b.lateness_p99_ms.total_cmp(&a.lateness_p99_ms));
    late
}

/// The smallest number of pairs worth pairing: with fewer, the unpaired interval is used.
pub const MIN_PAIRS: usize = 3;

fn values(side: &[(u32, f64)]) -> Vec<f64> {
    side.iter().map(|&(_, v)| v).collect()
}

/// The two sides as (baseline, variant) pairs of the same repetition, when they pair up
/// exactly: each repetition once on each side, the same repetitions on both, at least
/// [`MIN_PAIRS`]. A plan with questions runs repetition k of every testbed and workload of a
/// question in one round, one after the other, so the runs of a pair were made close in time.
fn pairs(base: &[(u32, f64)], variant: &[(u32, f64)]) -> Option<Vec<(f64, f64)>> {
    let index = |side: &[(u32, f64)]| {
        let mut m = std::collections::BTreeMap::new();
        side.iter()
            .all(|&(rep, v)| m.insert(rep, v).is_none())
            .then_some(m)
    };
    let (b, v) = (index(base)?, index(variant)?);
    if b.len() < MIN_PAIRS || !b.keys().eq(v.keys()) {
        return None;
    }
    Some(b.iter().map(|(rep, &x)| (x, v[rep])).collect())
}

#[cfg(test)]
mod tests {
    use super::sentence::sentence;
    use super::*;
    use crate::results::device::ModelledIo;

    /// Repetition `rep` of testbed `tb`: a create phase of 10 s wall time doing `ops`
    /// operations on an emulated disk whose clock stopped for `pause_s`.
    fn run(tb: &str, rep: u32, ops: u64, pause_s: f64) -> RunResult {
        let mut r = crate::results::clock::bare_result(tb, rep, "tree");
        r.study = Some(crate::results::StudyInfo {
            plan: "p".into(),
            workload: "w".into(),
            questions: Vec::new(),
            scale: 1.0,
        });
        let mut p = crate::measure::PhaseTotals::new("create").into_result(&[]);
        p.wall_s = 10.0;
        p.ops = ops;
        p.ops_per_s = ops as f64 / 10.0;
        p.device_model = Some(ModelledIo {
            pause_ns: (pause_s * 1e9) as u64,
            pauses: (pause_s * 100.0) as u64,
            ..Default::default()
        });
        r.phases.push(p);
        r
    }

    fn question(metric: &str) -> Question {
        Question {
            id: "q".into(),
            ask: String::new(),
            baseline: "a".into(),
            variant: "b".into(),
            compares: Compares::Testbeds,
            testbed: None,
            workload: None,
            phase: Some("create".into()),
            metric: metric.into(),
            filter: Default::default(),
            published: None,
            source: String::new(),
            epsilon: 0.05,
            looks: None,
        }
    }

    /// Baseline `a` at about 100 ops/s with no pause; variant `b` doing the `b_ops` in the
    /// same wall time with its disk clock stopped for `pauses`.
    fn study(b_ops: [u64; 4], pauses: [f64; 4]) -> Vec<RunResult> {
        let a_ops = [1000, 1010, 990, 1005];
        (0..4u32)
            .flat_map(|i| {
                let k = i as usize;
                [run("a", i, a_ops[k], 0.0), run("b", i, b_ops[k], pauses[k])]
            })
            .collect()
    }

    /// The pause takes `b`'s rate to twice `a`'s on the disk's clock, while on the wall
    /// clock the two are the same: the finding decides on the disk's clock and says first
    /// that the clocks disagree and that the clock stood still for half the phase.
    #[test]
    fn a_finding_decides_on_disk_time_and_says_first_where_the_wall_clock_differs() {
        let rs = study([1002, 1008, 991, 1004], [5.0, 5.1, 4.9, 5.2]);
        let f = evaluate(&question("ops_per_s"), &rs);
        let r = f.ratio.expect("a ratio");
        assert!((r.ratio - 2.0).abs() < 0.05, "{r:?}");
        assert_eq!(f.decision, Some(Decision::Larger));
        let w = f.wall.as_ref().expect("the wall clock's answer");
        assert!((w.ratio.expect("a wall ratio").ratio - 1.0).abs() < 0.01);
        assert_eq!(w.decision, Some(Decision::NoChange));
        assert!(f.clocks_disagree());
        let worst = f.large_pause().expect("a pause over a quarter");
        assert_eq!((worst.rep, worst.pause_s), (3, 5.2));
        let s = sentence(&f);
        assert!(
            s.starts_with("the disk's clock and the wall clock decide differently (larger on the disk's clock, no change on the wall clock); the emulated disk's clock stood still for 52% of a compared phase's wall time (worst: create on b, repetition 3, 5.20 s of 10.00 s): b has 2.0"),
            "{s}"
        );
        assert!(
            s.contains(" the op rate of a in create, on the disk's clock (95% CI "),
            "{s}"
        );
        assert!(
            s.contains(": b is better; on the wall clock 1.00× (95% CI "),
            "{s}"
        );
        assert!(s.ends_with(", no change)."), "{s}");
        // The elapsed time decides the same way on the disk's clock: 10 s against about 5.
        let f = evaluate(&question("elapsed"), &rs);
        assert_eq!(f.decision, Some(Decision::Smaller));
        assert_eq!(f.wall.and_then(|w| w.decision), Some(Decision::NoChange));
    }

    /// A small pause in both clocks' agreement: no warning before the figures, the wall
    /// clock's ratio beside them.
    #[test]
    fn a_small_pause_states_the_wall_ratio_beside_the_finding_only() {
        let rs = study([1500, 1520, 1490, 1505], [1.0, 0.9, 1.1, 1.0]);
        let f = evaluate(&question("ops_per_s"), &rs);
        assert!(!f.clocks_disagree() && f.large_pause().is_none());
        assert_eq!(f.paused.len(), 4);
        let s = sentence(&f);
        assert!(
            s.starts_with("b has 1.67× the op rate of a in create, on the disk's clock (95% CI "),
            "{s}"
        );
        assert!(s.contains("; on the wall clock 1.50× (95% CI "), "{s}");
        assert!(s.ends_with(", larger)."), "{s}");
    }

    /// Each of the two things said first, alone: the clocks disagreeing under a small pause,
    /// and a pause over a quarter where they agree.
    #[test]
    fn the_clocks_disagreeing_and_a_long_pause_are_each_said_first_on_their_own() {
        // 15% pause: about 1.2× on the disk's clock, no change on the wall clock.
        let rs = study([1002, 1012, 991, 1004], [1.5, 1.6, 1.4, 1.5]);
        let f = evaluate(&question("ops_per_s"), &rs);
        assert_eq!(f.decision, Some(Decision::Larger));
        assert!(f.clocks_disagree() && f.large_pause().is_none());
        let s = sentence(&f);
        assert!(
            s.starts_with("the disk's clock and the wall clock decide differently (larger on the disk's clock, no change on the wall clock): b has 1.1"),
            "{s}"
        );
        assert!(!s.contains("stood still"), "{s}");
        // 30% pause: larger on both clocks, said for the pause alone.
        let rs = study([2000, 2020, 1980, 2010], [3.0, 3.1, 2.9, 3.0]);
        let f = evaluate(&question("ops_per_s"), &rs);
        assert!(!f.clocks_disagree());
        let s = sentence(&f);
        assert!(
            s.starts_with("the emulated disk's clock stood still for 31% of a compared phase's wall time (worst: create on b, repetition 1, 3.10 s of 10.00 s): b has 2.8"),
            "{s}"
        );
        assert!(s.ends_with(", larger)."), "{s}");
    }

    /// Without a pause (and in results from before the disk had a clock) a finding reads as
    /// it always did, and lateness alone withholds nothing.
    #[test]
    fn without_a_pause_a_finding_reads_as_before_whatever_the_lateness() {
        let mut rs = study([1500, 1520, 1490, 1505], [0.0; 4]);
        for r in &mut rs {
            let d = r.phases[0].device_model.as_mut().expect("a disk");
            d.lateness_p99_ms = 7.0;
            d.counts.late = 300;
        }
        let f = evaluate(&question("ops_per_s"), &rs);
        assert!(f.wall.is_none() && f.paused.is_empty());
        assert_eq!(
            f.emulator_behind.len(),
            8,
            "the lateness stays in the record"
        );
        let s = sentence(&f);
        assert!(
            s.starts_with("b has 1.50× the op rate of a in create (95% CI "),
            "{s}"
        );
        assert!(s.ends_with(": b is better."), "{s}");
        assert!(
            !s.contains("clock") && !s.contains("not yet a finding"),
            "{s}"
        );
    }
}
