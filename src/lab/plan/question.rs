//! A plan's `[[question]]` entries and its workloads' labels: each question resolved against
//! the plan (what its baseline and variant name, the cell it is about, its metric), so that a
//! question that cannot be answered is refused, at its line and column, before anything runs.
//!
//! Phase names are not known before a run: a workload's phases depend on its parameters (a
//! sweep's cells, aging checkpoints), and neither the `Workload` trait nor the registry lists
//! them. A question's phases are therefore checked against the first result of each cell it
//! uses ([`check_phases`]), before that result is written; the error names the question's
//! `phase` (or, for two phases, its `baseline`) at its line and column.

use std::collections::BTreeMap;
use std::ops::Range;

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::fault::{fault, fault_naming, Location};
use super::source::toml_to_json;
use super::{PlanTestbed, PlanWorkload};
use crate::base::error::bad_input;
use crate::results::metric::CORE;
use crate::results::{Compares, Question, RunResult, DEFAULT_EPSILON};

/// One `[[question]]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawQuestion {
    id: Option<Spanned<String>>,
    ask: Option<Spanned<String>>,
    baseline: Spanned<String>,
    variant: Spanned<String>,
    testbed: Option<Spanned<String>>,
    workload: Option<Spanned<String>>,
    phase: Option<Spanned<String>>,
    metric: Spanned<String>,
    #[serde(rename = "where")]
    filter: Option<Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>>,
    published: Option<Spanned<toml::Value>>,
    source: Option<Spanned<String>>,
    epsilon: Option<Spanned<toml::Value>>,
}

/// A question of a plan, resolved, with where it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanQuestion {
    pub question: Question,
    /// The `[[question]]` table.
    pub at: Location,
    /// Where its phase is written: `phase`, or `baseline` when it compares two phases.
    pub phase_at: Location,
}

impl PlanQuestion {
    /// `journal-16M -> journal-1G, workload deep-4K, phase dir_remove, ops_per_s`: the
    /// question as resolved, one line.
    pub fn describe(&self) -> String {
        let q = &self.question;
        let mut s = format!(
            "{}: {} -> {} ({})",
            q.id,
            q.baseline,
            q.variant,
            match q.compares {
                Compares::Testbeds => "testbeds",
                Compares::Workloads => "workloads",
                Compares::Phases => "phases",
            }
        );
        if let Some(t) = &q.testbed {
            s.push_str(&format!(", testbed {t}"));
        }
        if let Some(w) = &q.workload {
            s.push_str(&format!(", workload {w}"));
        }
        for (k, v) in &q.filter {
            s.push_str(&format!(", {k} = {v}"));
        }
        if let Some(p) = &q.phase {
            s.push_str(&format!(", phase {p}"));
        }
        s.push_str(&format!(", metric {}", q.metric));
        if let Some(p) = q.published {
            s.push_str(&format!(", published {p}"));
        }
        s
    }
}

/// What to add when TOML reports a required field of a `[[question]]` missing.
pub(super) fn missing_field_hint(msg: &str) -> String {
    let hint = if msg.contains("missing field `metric`") {
        format!(
            "add metric = \"...\": a core metric ({}) or one of the workload's own figures",
            CORE.iter()
                .map(|m| m.def.key.as_ref())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else if msg.contains("missing field `baseline`") || msg.contains("missing field `variant`") {
        "add baseline = \"...\" and variant = \"...\": two testbed labels, two workload labels, or two phase names".to_string()
    } else {
        return String::new();
    };
    format!(" in this [[question]]; {hint}")
}

/// `"a", "b"`: names for messages.
fn listed(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A number of a question (`published`, `epsilon`): an integer or a float.
fn number(v: &Spanned<toml::Value>) -> Option<f64> {
    match v.get_ref() {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// A parameter value as a result records it: one value on a sweep axis is a list of one.
fn unwrap_one(v: &serde_json::Value) -> &serde_json::Value {
    match v {
        serde_json::Value::Array(a) if a.len() == 1 => &a[0],
        other => other,
    }
}

/// Where a `[[question]]`'s phase is written, as an offset in the plan's text: its `phase`, or
/// its `baseline` when it has none (then it compares two phases; any other question without
/// a phase is refused).
pub(super) fn phase_offset(rq: &Spanned<RawQuestion>) -> usize {
    let r = rq.get_ref();
    r.phase
        .as_ref()
        .map_or(r.baseline.span(), |p| p.span())
        .start
}

/// Where a `[[question]]` is written: the table, and its phase ([`phase_offset`]).
pub(super) struct QuestionAt {
    pub(super) at: Location,
    pub(super) phase_at: Location,
}

/// Resolves every `[[question]]` (written at `at`) against the plan's testbeds and workloads
/// (with their labels).
pub(super) fn resolve(
    raw: &[Spanned<RawQuestion>],
    at: &[QuestionAt],
    testbeds: &[PlanTestbed],
    workloads: &[PlanWorkload],
    age: Option<&PlanWorkload>,
) -> Result<Vec<PlanQuestion>> {
    let mut out: Vec<PlanQuestion> = Vec::new();
    let mut ids: Vec<(String, Location)> = Vec::new();
    for ((i, rq), q_at) in raw.iter().enumerate().zip(at) {
        let q = resolve_one(rq, q_at, i, testbeds, workloads, age)?;
        let id_span = rq.get_ref().id.as_ref().map_or(rq.span(), |s| s.span());
        if let Some((_, at)) = ids.iter().find(|(id, _)| *id == q.question.id) {
            let id = q.question.id.clone();
            return Err(fault_naming(
                id_span,
                "[[question]] field `id`",
                at,
                move |other| {
                    format!(
                    "two questions have the id {id:?} (the other at {other}); give each [[question]] its own id = \"...\" (ids default to q1, q2, ... by position)"
                )
                },
            ));
        }
        ids.push((q.question.id.clone(), q.at.clone()));
        out.push(q);
    }
    Ok(out)
}

fn resolve_one(
    rq: &Spanned<RawQuestion>,
    at: &QuestionAt,
    index: usize,
    testbeds: &[PlanTestbed],
    workloads: &[PlanWorkload],
    age: Option<&PlanWorkload>,
) -> Result<PlanQuestion> {
    let r = rq.get_ref();
    let q = Resolver::new(rq, index, testbeds, workloads)?;
    let compares = q.compares()?;
    let testbed = q.coordinate(&q.testbeds, &r.testbed, compares)?;
    let workload = q.coordinate(&q.workloads, &r.workload, compares)?;
    let phase = q.phase(compares)?;
    let entries = q.entries(compares, workload.as_deref(), workloads);
    let metric = q.metric(&entries, age)?;
    let filter = q.filter(&entries)?;
    let published = q.published()?;
    let epsilon = q.epsilon()?;
    let text = |v: &Option<Spanned<String>>| v.as_ref().map(|s| s.get_ref().clone());
    Ok(PlanQuestion {
        question: Question {
            id: q.id,
            ask: text(&r.ask).unwrap_or_default(),
            baseline: r.baseline.get_ref().clone(),
            variant: r.variant.get_ref().clone(),
            compares,
            testbed,
            workload,
            phase,
            metric,
            filter,
            published,
            source: text(&r.source).unwrap_or_default(),
            epsilon,
            // Set for the run by `plan::questions_as_run`, which knows the repetitions.
            looks: None,
        },
        at: at.at.clone(),
        phase_at: at.phase_at.clone(),
    })
}

/// The testbeds or the workloads of a plan, as a question names them: the field that names
/// one (`testbed`, `workload`), its labels, and what a question comparing them is.
struct Side<'p> {
    field: &'static str,
    plural: &'static str,
    labels: Vec<&'p str>,
    compared: Compares,
    /// Said after the labels when a name is not one of them.
    label_hint: &'static str,
}

impl Side<'_> {
    fn has(&self, label: &str) -> bool {
        self.labels.contains(&label)
    }
}

/// One `[[question]]` being resolved: each derived value of the question has its own method,
/// in the order `resolve_one` calls them (a later one may use what an earlier one returned).
struct Resolver<'p> {
    rq: &'p Spanned<RawQuestion>,
    id: String,
    testbeds: Side<'p>,
    workloads: Side<'p>,
}

/// The workload entries a question reads: per label, every cell of its split sweep.
type Entries<'p> = Vec<(&'p str, Vec<&'p PlanWorkload>)>;

impl<'p> Resolver<'p> {
    /// The question's id (`q1`, `q2`, ... by position unless given) and the plan's labels.
    fn new(
        rq: &'p Spanned<RawQuestion>,
        index: usize,
        testbeds: &'p [PlanTestbed],
        workloads: &'p [PlanWorkload],
    ) -> Result<Self> {
        let r = rq.get_ref();
        let id =
            r.id.as_ref()
                .map_or_else(|| format!("q{}", index + 1), |s| s.get_ref().clone());
        if id.trim().is_empty() {
            let span = r.id.as_ref().map_or(rq.span(), |s| s.span());
            return Err(fault(
                span,
                "[[question]] field `id`",
                "is empty; give a short name, e.g. id = \"dir-remove\"",
            ));
        }
        let mut wl_labels: Vec<&str> = Vec::new();
        for w in workloads {
            if !wl_labels.contains(&w.label.as_str()) {
                wl_labels.push(&w.label);
            }
        }
        Ok(Self {
            rq,
            id,
            testbeds: Side {
                field: "testbed",
                plural: "testbeds",
                labels: testbeds.iter().map(|t| t.spec.label.as_str()).collect(),
                compared: Compares::Testbeds,
                label_hint: "",
            },
            workloads: Side {
                field: "workload",
                plural: "workloads",
                labels: wl_labels,
                compared: Compares::Workloads,
                label_hint: " (a [[workload]]'s label is its label = ..., or its kind, with #N when a kind appears more than once)",
            },
        })
    }

    /// The error of field `name` of this question, at `span`.
    fn err(&self, span: Range<usize>, name: &str, msg: String) -> anyhow::Error {
        fault(
            span,
            &format!("[[question]] {} field `{name}`", self.id),
            msg,
        )
    }

    fn labels_note(&self) -> String {
        format!(
            "testbeds: {}; workloads: {}",
            listed(&self.testbeds.labels),
            listed(&self.workloads.labels)
        )
    }

    /// What baseline and variant name: two testbeds, two workloads, or (neither) two phases.
    fn compares(&self) -> Result<Compares> {
        let r = self.rq.get_ref();
        let (base, var) = (&r.baseline, &r.variant);
        if base.get_ref() == var.get_ref() {
            return Err(self.err(
                var.span(),
                "variant",
                format!(
                    "is the baseline {:?} again; name the configuration to compare it with ({})",
                    base.get_ref(),
                    self.labels_note()
                ),
            ));
        }
        let (tb, wl) = (&self.testbeds, &self.workloads);
        let names = |s: &str| (tb.has(s), wl.has(s));
        match (names(base.get_ref()), names(var.get_ref())) {
            ((true, _), (true, _)) => Ok(Compares::Testbeds),
            ((_, true), (_, true)) => Ok(Compares::Workloads),
            ((false, false), (false, false)) => Ok(Compares::Phases),
            ((base_tb, _), (false, false)) => {
                let side = if base_tb { tb } else { wl };
                Err(self.err(
                    var.span(),
                    "variant",
                    format!(
                        "{:?} is not a {} label, but the baseline {:?} is; {}: {}",
                        var.get_ref(),
                        side.field,
                        base.get_ref(),
                        side.plural,
                        listed(&side.labels)
                    ),
                ))
            }
            ((false, false), _) => Err(self.err(
                base.span(),
                "baseline",
                format!(
                    "{:?} is not a label of the plan, but the variant {:?} is; {}",
                    base.get_ref(),
                    var.get_ref(),
                    self.labels_note()
                ),
            )),
            _ => Err(self.err(
                var.span(),
                "variant",
                format!(
                    "baseline {:?} and variant {:?} name a testbed and a workload; a question compares two testbeds, two workloads, or two phases of the same runs ({})",
                    base.get_ref(),
                    var.get_ref(),
                    self.labels_note()
                ),
            )),
        }
    }

    /// The testbed (or workload) the question is about when it does not compare them: as
    /// given, or none when the plan has only one.
    fn coordinate(
        &self,
        side: &Side<'_>,
        given: &Option<Spanned<String>>,
        compares: Compares,
    ) -> Result<Option<String>> {
        match given {
            Some(t) if compares == side.compared => Err(self.err(
                t.span(),
                side.field,
                format!(
                    "baseline and variant are {} already; remove {} = ...",
                    side.plural, side.field
                ),
            )),
            Some(t) if !side.has(t.get_ref()) => Err(self.err(
                t.span(),
                side.field,
                format!(
                    "{:?} is not a {} label of the plan; {}: {}{}",
                    t.get_ref(),
                    side.field,
                    side.plural,
                    listed(&side.labels),
                    side.label_hint
                ),
            )),
            Some(t) => Ok(Some(t.get_ref().clone())),
            None if compares == side.compared => Ok(None),
            None if side.labels.len() > 1 => Err(self.err(
                self.rq.span(),
                side.field,
                format!(
                    "the plan has {} {}; name the one this question is about, e.g. {} = {:?} ({}: {})",
                    side.labels.len(),
                    side.plural,
                    side.field,
                    side.labels[0],
                    side.plural,
                    listed(&side.labels)
                ),
            )),
            None => Ok(None),
        }
    }

    /// The phase whose metric is compared (none when baseline and variant are phases; where
    /// it is written is [`phase_offset`]).
    fn phase(&self, compares: Compares) -> Result<Option<String>> {
        let r = self.rq.get_ref();
        match (&r.phase, compares) {
            (Some(p), Compares::Phases) => Err(self.err(
                p.span(),
                "phase",
                "baseline and variant are phases already; remove phase = ...".into(),
            )),
            (None, Compares::Phases) => Ok(None),
            (Some(p), _) if p.get_ref().trim().is_empty() => Err(self.err(
                p.span(),
                "phase",
                "is empty; name a phase of the workload, e.g. phase = \"create\"".into(),
            )),
            (Some(p), _) => Ok(Some(p.get_ref().clone())),
            (None, _) => Err(self.err(
                self.rq.span(),
                "phase",
                "missing; name the phase whose metric is compared, e.g. phase = \"create\" (`fsgauge bench KIND` or a result's phases list a workload's phase names)".into(),
            )),
        }
    }

    /// The workload entries (every cell of a split sweep) the question reads.
    fn entries<'e>(
        &'e self,
        compares: Compares,
        workload: Option<&'e str>,
        workloads: &'e [PlanWorkload],
    ) -> Entries<'e> {
        let r = self.rq.get_ref();
        let labels: Vec<&'e str> = match (compares, workload) {
            (Compares::Workloads, _) => vec![r.baseline.get_ref(), r.variant.get_ref()],
            (_, Some(w)) => vec![w],
            (_, None) => self.workloads.labels.clone(),
        };
        labels
            .into_iter()
            .map(|l| (l, workloads.iter().filter(|w| w.label == l).collect()))
            .collect()
    }

    /// The metric: a core metric, or a figure every workload the question reads declares.
    fn metric(&self, entries: &Entries<'_>, age: Option<&PlanWorkload>) -> Result<String> {
        let r = self.rq.get_ref();
        let metric = r.metric.get_ref().clone();
        if CORE.iter().any(|m| m.def.key == metric) {
            return Ok(metric);
        }
        let declared = |w: &PlanWorkload| {
            w.workload.metrics().iter().any(|m| m.key == metric)
                || age.is_some_and(|a| a.workload.metrics().iter().any(|m| m.key == metric))
        };
        let Some((l, es)) = entries
            .iter()
            .find(|(_, es)| !es.iter().all(|w| declared(w)))
        else {
            return Ok(metric);
        };
        let mut allowed: Vec<&str> = CORE.iter().map(|m| m.def.key.as_ref()).collect();
        if let Some(w) = es.first() {
            allowed.extend(w.workload.metrics().iter().map(|m| m.key.as_ref()));
        }
        if let Some(a) = age {
            allowed.extend(a.workload.metrics().iter().map(|m| m.key.as_ref()));
        }
        Err(self.err(
            r.metric.span(),
            "metric",
            format!(
                "{metric:?} is neither a core metric nor a figure of workload {l:?}; allowed: {}",
                allowed.join(", ")
            ),
        ))
    }

    /// `where`: parameters of the workload, at values its sweep has, as results record them.
    fn filter(&self, entries: &Entries<'_>) -> Result<BTreeMap<String, serde_json::Value>> {
        let mut filter = BTreeMap::new();
        if let Some(f) = &self.rq.get_ref().filter {
            for (key, want) in f.get_ref() {
                if let Some(v) = self.filter_value(key, want, entries)? {
                    filter.insert(key.get_ref().clone(), v);
                }
            }
        }
        Ok(filter)
    }

    /// The value `key = want` of `where` selects, as the results record it: every entry read
    /// must have the parameter and a cell with that value.
    fn filter_value(
        &self,
        key: &Spanned<String>,
        want: &Spanned<toml::Value>,
        entries: &Entries<'_>,
    ) -> Result<Option<serde_json::Value>> {
        let want_json = toml_to_json(want.get_ref());
        let mut resolved: Option<serde_json::Value> = None;
        for (l, es) in entries {
            let Some(first) = es.first() else { continue };
            let params = first.workload.params();
            if params.get(key.get_ref()).is_none() {
                let names: Vec<String> = params
                    .as_object()
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default();
                return Err(self.err(
                    key.span(),
                    "where",
                    format!(
                        "{:?} is not a parameter of workload {l:?} ({}); parameters: {}",
                        key.get_ref(),
                        first.kind,
                        names.join(", ")
                    ),
                ));
            }
            let values = self.cell_values(key, l, es)?;
            match values
                .iter()
                .find(|(written, recorded)| *written == want_json || *recorded == want_json)
            {
                Some((_, recorded)) => {
                    resolved.get_or_insert_with(|| recorded.clone());
                }
                None => {
                    let mut shown: Vec<String> =
                        values.iter().map(|(w, _)| w.to_string()).collect();
                    shown.dedup();
                    return Err(self.err(
                        want.span(),
                        "where",
                        format!(
                            "workload {l:?} has no cell with {} = {want_json}; its values: {}",
                            key.get_ref(),
                            shown.join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(resolved)
    }

    /// Parameter `key` of each entry labelled `l` (a cell of a split sweep has one value), as
    /// written and as the result records it.
    fn cell_values(
        &self,
        key: &Spanned<String>,
        l: &str,
        es: &[&PlanWorkload],
    ) -> Result<Vec<(serde_json::Value, serde_json::Value)>> {
        let mut values = Vec::new();
        for w in es {
            let have = w.workload.params()[key.get_ref()].clone();
            if let serde_json::Value::Array(a) = &have {
                if a.len() > 1 {
                    return Err(self.err(
                        key.span(),
                        "where",
                        format!(
                            "{:?} of workload {l:?} is a sweep whose cells are phases of one run here (fresh = \"per-testbed\", or the workload keeps its cells in one run); name the cell's phase instead, e.g. phase = \"...-t4\"",
                            key.get_ref()
                        ),
                    ));
                }
            }
            let as_written = w
                .given
                .get(key.get_ref())
                .cloned()
                .unwrap_or_else(|| unwrap_one(&have).clone());
            values.push((as_written, unwrap_one(&have).clone()));
        }
        Ok(values)
    }

    /// `published`: the published ratio variant / baseline, above 0.
    fn published(&self) -> Result<Option<f64>> {
        let Some(p) = &self.rq.get_ref().published else {
            return Ok(None);
        };
        match number(p) {
            Some(v) if v.is_finite() && v > 0.0 => Ok(Some(v)),
            _ => Err(self.err(
                p.span(),
                "published",
                format!(
                    "{} is not a ratio above 0; give the published variant / baseline, e.g. 3.67 for +267%",
                    p.get_ref()
                ),
            )),
        }
    }

    /// `epsilon`: the "no change" band, a fraction between 0 and 1.
    fn epsilon(&self) -> Result<f64> {
        let Some(e) = &self.rq.get_ref().epsilon else {
            return Ok(DEFAULT_EPSILON);
        };
        match number(e) {
            Some(v) if v > 0.0 && v < 1.0 => Ok(v),
            _ => Err(self.err(
                e.span(),
                "epsilon",
                format!(
                    "{} is out of range; give the \"no change\" band as a fraction between 0 and 1, e.g. 0.05 for ±5%",
                    e.get_ref()
                ),
            )),
        }
    }
}

/// Checks that a result has the phases of every question it is part of; the error points at
/// the question's phase (in the file that wrote it).
pub fn check_phases(questions: &[PlanQuestion], r: &RunResult) -> Result<()> {
    for pq in questions {
        let q = &pq.question;
        if !crate::analysis::findings::uses(q, r) {
            continue;
        }
        let wanted: Vec<&str> = match q.compares {
            Compares::Phases => vec![q.baseline.as_str(), q.variant.as_str()],
            _ => q.phase.as_deref().into_iter().collect(),
        };
        for want in wanted {
            if r.phases.iter().any(|p| p.name == want) {
                continue;
            }
            let have: Vec<&str> = r.phases.iter().map(|p| p.name.as_str()).collect();
            let (what, hint) = match q.compares {
                Compares::Phases => (
                    "baseline",
                    "(baseline and variant name no testbed or workload of the plan, so they are read as two phases of the same runs)",
                ),
                _ => ("phase", ""),
            };
            return Err(bad_input(format!(
                "{}: [[question]] {} field `{what}`: the run of testbed {:?} with workload {:?} has no phase {want:?}; its phases: {}{}{hint}",
                pq.phase_at,
                q.id,
                r.testbed.label,
                r.study.as_ref().map_or("", |s| s.workload.as_str()),
                listed(&have),
                if hint.is_empty() { "" } else { " " },
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::lab::plan::parse::testing::{err, p};
    use crate::results::Compares;

    /// Two testbeds, two workloads (a tree, and a tio sweep labelled "io"), one question on
    /// lines 27-32.
    const Q: &str = r#"reps = 2

[[testbed]]
label = "a"
fs = "ext4"
size = "256M"

[[testbed]]
label = "b"
fs = "ext4"
size = "256M"
mount = "data=journal"

[[workload]]
kind = "tree"
dirs = 2
files = 3
file_size = "64K"

[[workload]]
kind = "tio"
label = "io"
threads = [1, 4]
mode = "seqwrite"
file_size = "1M"

[[question]]
baseline = "a"
variant = "b"
workload = "tree"
phase = "create"
metric = "ops_per_s"
"#;

    /// Asserts the error starts at `at` and says `what`.
    fn refused(text: &str, at: &str, what: &str) {
        let e = err(text);
        assert!(e.starts_with(&format!("t.toml:{at}: ")), "{e}");
        assert!(e.contains(what), "{e}");
    }

    #[test]
    fn two_testbeds_are_compared_in_one_workload_and_phase() {
        let plan = p(Q).unwrap();
        assert_eq!(plan.questions.len(), 1);
        let q = &plan.questions[0].question;
        assert_eq!(q.id, "q1");
        assert_eq!(q.compares, Compares::Testbeds);
        assert_eq!(
            (q.testbed.as_deref(), q.workload.as_deref()),
            (None, Some("tree"))
        );
        assert_eq!(q.phase.as_deref(), Some("create"));
        assert_eq!(q.epsilon, crate::results::DEFAULT_EPSILON);
        assert_eq!(plan.questions[0].at.line, 27);
        assert_eq!(plan.questions[0].phase_at.to_string(), "t.toml:31:9");
        let labels: Vec<&str> = plan.workloads.iter().map(|w| w.label.as_str()).collect();
        // tio's sweep (threads x block) runs as 4 cells, each with the entry's label.
        assert_eq!(
            labels,
            ["tree", "io", "io", "io", "io"],
            "the sweep's cells share the label"
        );
        assert_eq!(
            plan.workloads[1].workload.params().get("label"),
            None,
            "label is not a workload parameter"
        );
    }

    #[test]
    fn two_workloads_are_compared_on_one_testbed() {
        let plan = p(&Q.replace(
            "baseline = \"a\"\nvariant = \"b\"\nworkload = \"tree\"",
            "id = \"w\"\nbaseline = \"tree\"\nvariant = \"io\"\ntestbed = \"b\"\npublished = 2\nepsilon = 0.1",
        ))
        .unwrap();
        let q = &plan.questions[0].question;
        assert_eq!(q.id, "w");
        assert_eq!(q.compares, Compares::Workloads);
        assert_eq!(q.testbed.as_deref(), Some("b"));
        assert_eq!(q.workload, None);
        assert_eq!(q.published, Some(2.0));
        assert_eq!(q.epsilon, 0.1);
        assert!(q.filter.is_empty());
    }

    #[test]
    fn two_phases_of_the_same_runs_are_compared() {
        let plan = p(&Q
            .replace(
                "baseline = \"a\"\nvariant = \"b\"",
                "baseline = \"create\"\nvariant = \"delete\"\ntestbed = \"a\"",
            )
            .replace("phase = \"create\"\n", ""))
        .unwrap();
        let q = &plan.questions[0].question;
        assert_eq!(q.compares, Compares::Phases);
        assert_eq!(q.phase, None);
        assert_eq!(
            (q.testbed.as_deref(), q.workload.as_deref()),
            (Some("a"), Some("tree"))
        );
        assert_eq!(
            plan.questions[0].phase_at.to_string(),
            "t.toml:28:12",
            "the phases are checked at the baseline"
        );
    }

    #[test]
    fn sizes_in_where_match_the_cell_as_written_or_recorded() {
        let text = Q
            .replace(
                "threads = [1, 4]",
                "threads = 4\nblock = [\"4K\", \"128K\"]",
            )
            .replace(
                "workload = \"tree\"",
                "workload = \"io\"\nwhere = { block = \"128K\" }",
            );
        let plan = p(&text).unwrap();
        assert_eq!(
            plan.questions[0].question.filter["block"],
            serde_json::json!(131072)
        );
        let plan = p(&text.replace("\"128K\" }", "131072 }")).unwrap();
        assert_eq!(
            plan.questions[0].question.filter["block"],
            serde_json::json!(131072)
        );
    }

    #[test]
    fn ids_default_by_position_and_are_unique() {
        let two = format!("{Q}\n[[question]]\nbaseline = \"b\"\nvariant = \"a\"\nworkload = \"tree\"\nphase = \"delete\"\nmetric = \"elapsed\"\n");
        let plan = p(&two).unwrap();
        let ids: Vec<&str> = plan
            .questions
            .iter()
            .map(|q| q.question.id.as_str())
            .collect();
        assert_eq!(ids, ["q1", "q2"]);
        refused(
            &two.replace(
                "[[question]]\nbaseline = \"b\"",
                "[[question]]\nid = \"q1\"\nbaseline = \"b\"",
            ),
            "35:6",
            "two questions have the id \"q1\" (the other at line 27)",
        );
    }

    #[test]
    fn baseline_and_variant_must_name_two_of_a_kind() {
        refused(
            &Q.replace("variant = \"b\"", "variant = \"c\""),
            "29:11",
            "[[question]] q1 field `variant`: \"c\" is not a testbed label, but the baseline \"a\" is; testbeds: \"a\", \"b\"",
        );
        refused(
            &Q.replace("baseline = \"a\"", "baseline = \"x\""),
            "28:12",
            "field `baseline`: \"x\" is not a label of the plan, but the variant \"b\" is; testbeds: \"a\", \"b\"; workloads: \"tree\", \"io\"",
        );
        refused(
            &Q.replace("variant = \"b\"", "variant = \"io\""),
            "29:11",
            "name a testbed and a workload",
        );
        refused(
            &Q.replace("variant = \"b\"", "variant = \"a\""),
            "29:11",
            "is the baseline \"a\" again",
        );
        refused(
            &Q.replace("baseline = \"a\"\nvariant = \"b\"", "baseline = \"tree\"\nvariant = \"zz\"")
                .replace("workload = \"tree\"\n", "testbed = \"a\"\n"),
            "29:11",
            "\"zz\" is not a workload label, but the baseline \"tree\" is; workloads: \"tree\", \"io\"",
        );
    }

    #[test]
    fn the_cell_must_be_named_when_the_plan_has_several() {
        refused(
            &Q.replace("workload = \"tree\"\n", ""),
            "27:1",
            "field `workload`: the plan has 2 workloads; name the one this question is about, e.g. workload = \"tree\" (workloads: \"tree\", \"io\")",
        );
        refused(
            &Q.replace("baseline = \"a\"\nvariant = \"b\"\nworkload = \"tree\"", "baseline = \"tree\"\nvariant = \"io\""),
            "27:1",
            "field `testbed`: the plan has 2 testbeds; name the one this question is about, e.g. testbed = \"a\"",
        );
        refused(
            &Q.replace("workload = \"tree\"", "workload = \"trees\""),
            "30:12",
            "\"trees\" is not a workload label of the plan; workloads: \"tree\", \"io\"",
        );
        refused(
            &Q.replace(
                "workload = \"tree\"",
                "workload = \"tree\"\ntestbed = \"a\"",
            ),
            "31:11",
            "field `testbed`: baseline and variant are testbeds already",
        );
        refused(
            &Q.replace(
                "baseline = \"a\"\nvariant = \"b\"\nworkload = \"tree\"",
                "baseline = \"tree\"\nvariant = \"io\"\ntestbed = \"c\"",
            ),
            "30:11",
            "\"c\" is not a testbed label of the plan; testbeds: \"a\", \"b\"",
        );
        refused(
            &Q.replace("phase = \"create\"\n", ""),
            "27:1",
            "field `phase`: missing",
        );
        refused(
            &Q.replace(
                "baseline = \"a\"\nvariant = \"b\"",
                "baseline = \"create\"\nvariant = \"delete\"\ntestbed = \"a\"",
            ),
            "32:9",
            "field `phase`: baseline and variant are phases already",
        );
    }

    #[test]
    fn the_metric_must_be_core_or_the_workloads_own() {
        refused(
            &Q.replace("metric = \"ops_per_s\"", "metric = \"speed\""),
            "32:10",
            "\"speed\" is neither a core metric nor a figure of workload \"tree\"; allowed: elapsed, sys,",
        );
        // tio's own figure: not one of tree's, but io's.
        refused(
            &Q.replace("metric = \"ops_per_s\"", "metric = \"iops\""),
            "32:10",
            "figure of workload \"tree\"",
        );
        let plan = p(&Q
            .replace("metric = \"ops_per_s\"", "metric = \"iops\"")
            .replace("workload = \"tree\"", "workload = \"io\""))
        .unwrap();
        assert_eq!(plan.questions[0].question.metric, "iops");
    }

    #[test]
    fn where_names_a_parameter_at_a_value_of_its_sweep() {
        refused(
            &Q.replace(
                "workload = \"tree\"",
                "workload = \"io\"\nwhere = { thread = 4 }",
            ),
            "31:11",
            "field `where`: \"thread\" is not a parameter of workload \"io\" (tio); parameters: ",
        );
        refused(
            &Q.replace(
                "workload = \"tree\"",
                "workload = \"io\"\nwhere = { threads = 8 }",
            ),
            "31:21",
            "workload \"io\" has no cell with threads = 8; its values: 1, 4",
        );
        refused(
            &format!(
                "fresh = \"per-testbed\"\n{}",
                Q.replace(
                    "workload = \"tree\"",
                    "workload = \"io\"\nwhere = { threads = 4 }"
                )
            ),
            "32:11",
            "cells are phases of one run here",
        );
    }

    #[test]
    fn required_fields_say_what_to_add() {
        refused(
            &Q.replace("metric = \"ops_per_s\"\n", ""),
            "27:1",
            "missing field `metric` in this [[question]]; add metric = \"...\": a core metric (elapsed, sys,",
        );
        refused(
            &Q.replace("variant = \"b\"\n", ""),
            "27:1",
            "missing field `variant` in this [[question]]; add baseline = \"...\" and variant = \"...\"",
        );
    }

    #[test]
    fn published_and_epsilon_are_checked() {
        refused(
            &Q.replace(
                "metric = \"ops_per_s\"",
                "metric = \"ops_per_s\"\npublished = 0",
            ),
            "33:13",
            "field `published`: 0 is not a ratio above 0",
        );
        refused(
            &Q.replace(
                "metric = \"ops_per_s\"",
                "metric = \"ops_per_s\"\nepsilon = 1.5",
            ),
            "33:11",
            "field `epsilon`: 1.5 is out of range",
        );
        refused(
            &Q.replace(
                "metric = \"ops_per_s\"",
                "metric = \"ops_per_s\"\nepsilonn = 1",
            ),
            "33:1",
            "epsilonn",
        );
    }

    #[test]
    fn workload_labels_default_to_the_kind_and_are_unique() {
        let two_trees = Q
            .replace("kind = \"tio\"\nlabel = \"io\"\nthreads = [1, 4]\nmode = \"seqwrite\"\nfile_size = \"1M\"", "kind = \"tree\"\ndirs = 1\nfiles = 1\nfile_size = \"4K\"")
            .replace("workload = \"tree\"", "workload = \"tree#2\"");
        let plan = p(&two_trees).unwrap();
        let labels: Vec<&str> = plan.workloads.iter().map(|w| w.label.as_str()).collect();
        assert_eq!(labels, ["tree#1", "tree#2"]);
        refused(
            &Q.replace("label = \"io\"", "label = \"tree\""),
            "22:9",
            "two workloads are labelled \"tree\" (the other at line 14)",
        );
        refused(
            &Q.replace("label = \"io\"", "label = \"b\""),
            "22:9",
            "\"b\" is also the label of the testbed at line 8",
        );
        refused(
            &Q.replace("label = \"io\"", "label = 3"),
            "22:9",
            "must be a string",
        );
    }

    #[test]
    fn a_question_does_not_change_the_spec_hash_of_a_run() {
        let with = p(Q).unwrap();
        let without =
            p(&Q[..Q.find("[[question]]").unwrap()].replace("label = \"io\"\n", "")).unwrap();
        assert!(without.questions.is_empty());
        for (t, w) in [(0, 0), (1, 0), (0, 1), (1, 2)] {
            assert_eq!(
                crate::lab::plan::run_hash(&with, t, w, 1),
                crate::lab::plan::run_hash(&without, t, w, 1)
            );
        }
    }
}
