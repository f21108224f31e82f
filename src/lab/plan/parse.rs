//! Reading a plan: TOML with spans, so that every error — malformed TOML, an unknown field, a
//! wrong type, a value out of range, even inside a workload's own parameters — names the file,
//! line and column and the field, and lists what is allowed.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::limits::Tally;
use super::question::{self, RawQuestion};
use super::{
    scale, Fresh, Plan, PlanTestbed, PlanWorkload, Reps, AUTO_CV_TARGET, AUTO_MAX_REPS,
    AUTO_MIN_REPS,
};
use crate::base::error::bad_input;
use crate::base::units::{format_size, parse_size};
use crate::device::ProfileRef;
use crate::lab::runner::admit;
use crate::lab::runner::params::{RepsSetting, RunSettings, DEFAULT_REPS, MAX_REPS};
use crate::testbed::params::{plan_keys, SIZE_KEY};
use crate::testbed::{default_workdir, Backing, FsKind, TestbedParams, TestbedSpec};
use crate::workload::registry::{self, sweep};
use crate::workload::Workload;

/// A place in a plan: the file (a path, or `preset NAME`) and the line and column, both from
/// 1. A plan that extends a preset has entries written in the preset: their places name it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Location {
    pub file: Arc<str>,
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// Where a line of a plan put together from a plan and the preset it extends was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Origin {
    /// The file (a path, or `preset NAME`).
    pub(super) file: Arc<str>,
    /// Its line there, from 1.
    pub(super) line: usize,
}

impl Location {
    /// `line 14`, or `line 14 of preset lowmem` when it is not in the file `here` (the file of
    /// the message's own place, or the plan's): how one entry of a plan points at another.
    pub fn line_in(&self, here: &str) -> String {
        if *self.file == *here {
            format!("line {}", self.line)
        } else {
            format!("line {} of {}", self.line, self.file)
        }
    }
}

/// A plan's TOML as its raw tables: `Q` is how a `[[question]]` is read — as a question, or,
/// for a plan that extends a preset or is extended, as a table that may state only some keys.
/// The plan's own keys are its fields ([`OWN_KEYS`]); every other top-level key is in
/// `settings`, read as the run settings ([`RunSettings`]) by [`read_settings`], which refuses
/// a key that is not one.
#[derive(Deserialize)]
pub(super) struct RawPlan<Q = Spanned<RawQuestion>> {
    /// `extends = "PRESET"`: the plan states only what it changes of it (see [`super::extends`]).
    pub(super) extends: Option<Spanned<String>>,
    /// Entries of the preset extended that the plan leaves out, by label (questions by id).
    pub(super) drop_testbeds: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) drop_workloads: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) drop_questions: Option<Spanned<Vec<Spanned<String>>>>,
    name: Option<Spanned<String>>,
    description: Option<Spanned<String>>,
    cv_target: Option<Spanned<f64>>,
    max_reps: Option<Spanned<i64>>,
    fresh: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) testbed: Vec<RawWorkload>,
    #[serde(default)]
    pub(super) workload: Vec<RawWorkload>,
    pub(super) age: Option<RawWorkload>,
    #[serde(default = "Vec::new")]
    pub(super) question: Vec<Q>,
    /// The other top-level keys: the run settings, under their flags' names.
    #[serde(flatten)]
    settings: BTreeMap<String, toml::Value>,
}

/// The keys of a plan's top level that are the plan's own, [`RawPlan`]'s fields: the others
/// are the run settings, which the command line also takes as flags.
pub(crate) const OWN_KEYS: [&str; 13] = [
    "extends",
    "drop_testbeds",
    "drop_workloads",
    "drop_questions",
    "name",
    "description",
    "cv_target",
    "max_reps",
    "fresh",
    "testbed",
    "workload",
    "age",
    "question",
];

/// The keys of a `[[testbed]]` that are not testbed settings ([`TestbedParams`]): which
/// testbed it is (`fs`, `label`) and what only a plan says of it.
const PLAN_TESTBED_KEYS: [&str; 4] = ["fs", "label", "optional", "mem_limit"];

/// The entry of a table written under one of `keys` (a setting and its old names), if any.
fn entry<'a>(
    t: &'a RawWorkload,
    keys: &[&str],
) -> Option<(&'a Spanned<String>, &'a Spanned<toml::Value>)> {
    t.get_ref()
        .iter()
        .find(|(k, _)| keys.contains(&k.get_ref().as_str()))
}

/// The plan text and its name, for locating errors.
pub(super) struct Src<'a> {
    pub(super) name: &'a str,
    pub(super) text: &'a str,
    /// Where each line of `text` was written, when the text was put together from a plan and
    /// the preset it extends; `None`: every line is `name`'s own.
    pub(super) origins: Option<&'a [Origin]>,
    /// The byte offset at which each line of `text` starts, found on first use. Every entry's
    /// place is looked up ([`Src::loc`]); counting newlines from the top each time made reading
    /// a plan of many entries quadratic in its size.
    starts: OnceLock<Vec<usize>>,
}

impl<'a> Src<'a> {
    /// A plan's own text.
    pub(super) fn new(name: &'a str, text: &'a str) -> Self {
        Self::with_origins(name, text, None)
    }

    /// A text put together from several files, `origins` saying where each line comes from.
    pub(super) fn with_origins(
        name: &'a str,
        text: &'a str,
        origins: Option<&'a [Origin]>,
    ) -> Self {
        Src {
            name,
            text,
            origins,
            starts: OnceLock::new(),
        }
    }

    /// The line (from 0) that holds byte `offset`, and the offset at which that line starts:
    /// a binary search of the lines' starts, so `O(log lines)` a lookup.
    pub(super) fn line_of(&self, offset: usize) -> (usize, usize) {
        let starts = self.starts.get_or_init(|| {
            std::iter::once(0)
                .chain(self.text.match_indices('\n').map(|(i, _)| i + 1))
                .collect()
        });
        let offset = offset.min(self.text.len());
        // starts[0] = 0 <= offset, so at least one start is at or before it.
        let line = starts.partition_point(|&s| s <= offset) - 1;
        (line, starts[line])
    }

    pub(super) fn loc(&self, offset: usize) -> Location {
        let offset = offset.min(self.text.len());
        let (line0, line_start) = self.line_of(offset);
        let line = line0 + 1;
        let column = self.text[line_start..offset].chars().count() + 1;
        match self.origins.and_then(|o| o.get(line - 1).or(o.last())) {
            Some(o) => Location {
                file: o.file.clone(),
                line: o.line,
                column,
            },
            None => Location {
                file: Arc::from(self.name),
                line,
                column,
            },
        }
    }

    /// `file:line:col: field: message`, as bad input.
    pub(super) fn err(
        &self,
        span: Range<usize>,
        field: &str,
        msg: impl std::fmt::Display,
    ) -> anyhow::Error {
        let at = self.loc(span.start);
        if field.is_empty() {
            bad_input(format!("{at}: {msg}"))
        } else {
            bad_input(format!("{at}: {field}: {msg}"))
        }
    }

    /// `line N` of `at`, as a message about the place at `offset` names it (with its file when
    /// that is another: a plan and the preset it extends).
    pub(super) fn seen_from(&self, at: &Location, offset: usize) -> String {
        at.line_in(&self.loc(offset).file)
    }

    /// The key written at the start of the line holding `offset` (`size = ...` → `size`).
    fn key_at(&self, offset: usize) -> Option<String> {
        let offset = offset.min(self.text.len());
        let start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let line = self.text[start..].lines().next()?;
        let (key, _) = line.split_once('=')?;
        let key = key.trim().trim_matches('"');
        (!key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)))
        .then(|| key.to_string())
    }
}

/// What the command line adds to a plan.
#[derive(Debug, Clone, Default)]
pub struct ParseOptions {
    /// `--scale F` (1 when absent).
    pub scale: Option<f64>,
    /// `--workdir DIR`: where images go, for every testbed.
    pub workdir: Option<PathBuf>,
    /// `--device-model PROFILE`: every testbed on this emulated disk (each keeps its
    /// `device_offset` and `device_model_during`).
    pub device_model: Option<ProfileRef>,
    /// The run settings given as flags (`--reps`, `--seed`, `--cold`, `--layout`): each one
    /// given wins over the plan's key of the same name.
    pub settings: RunSettings,
    /// `--mem-limit SIZE`: every testbed's memory limit, over its `mem_limit`.
    pub mem_limit: Option<u64>,
}

/// Parses and validates a plan whose `extends` is resolved (see [`super::parse`]).
pub(super) fn parse_src(src: &Src, opts: &ParseOptions) -> Result<Plan> {
    let raw: RawPlan = read_raw(src)?;
    let own = read_settings(src, &raw)?;
    let source = src.name;
    let scale_f = opts.scale.unwrap_or(1.0);
    if !(scale_f.is_finite() && scale_f > 0.0) {
        return Err(bad_input(format!(
            "--scale {scale_f} must be a number above 0 (e.g. 0.5, 2, 10)"
        )));
    }

    // [age]: the parameters of the `age` workload, run on each run's filesystem before its
    // workload (the workload then finds the filesystem aged).
    let age = match &raw.age {
        Some(a) => {
            let kind = registry::find("age").expect("the age workload is registered");
            Some(build_workload(src, a, kind, scale_f, "[age]")?)
        }
        None => None,
    };
    let keep_image = keep_image(src, raw.age.as_ref())?;
    // The command line's flags over the plan's keys: the one place they meet.
    let given = opts.settings.over(own);
    let reps = parse_reps(src, &raw, own.reps, given.reps)?;
    let fresh = parse_fresh(src, &raw)?;
    require_entries(src, &raw)?;

    let workloads = parse_workloads(src, &raw, fresh, scale_f, reps)?;
    let (mut testbeds, spans) = parse_testbeds(src, &raw, opts)?;
    let mut notes = Vec::new();
    for ((tb, at), raw_tb) in testbeds.iter_mut().zip(spans).zip(&raw.testbed) {
        crate::base::signals::check()?;
        fit_testbed(src, tb, &at, &workloads, scale_f, &mut notes)?;
        fit_inodes(src, tb, &workloads, &mut notes)?;
        fit_memory(
            src,
            tb,
            entry(raw_tb, &["mem_limit"]).map(|e| e.1),
            &workloads,
        )?;
        check_disk(src, tb, &at, written(&tb.spec, &workloads, age.is_some()))?;
    }
    // --mem-limit replaces every testbed's limit as given, as it limits a bench run.
    if let Some(m) = opts.mem_limit {
        for tb in &mut testbeds {
            tb.mem_limit = Some(m);
        }
    }

    let questions = question::resolve(src, &raw.question, &testbeds, &workloads, age.as_ref())?;
    if fresh == Fresh::PerTestbed && !questions.is_empty() {
        check_disk_together(
            src,
            &testbeds,
            &workloads,
            age.is_some(),
            raw.fresh.as_ref().map(|f| f.span()),
        )?;
    }

    let name = raw.name.as_ref().map_or_else(
        || {
            Path::new(source)
                .file_stem()
                .map_or_else(|| "plan".into(), |s| s.to_string_lossy().into_owned())
        },
        |n| n.get_ref().clone(),
    );
    Ok(Plan {
        source: source.to_string(),
        name,
        description: raw
            .description
            .as_ref()
            .map(|d| d.get_ref().clone())
            .unwrap_or_default(),
        testbeds,
        workloads,
        reps,
        fresh,
        cold: given.cold.or_default(),
        seed: given.seed.in_a_plan(),
        scale: scale_f,
        notes,
        layout: given.layout,
        crash: given.crash(),
        age,
        keep_image,
        questions,
    })
}

/// `[age] keep_image`: the aging is kept in the image cache and later runs of the same aging
/// start from it (see [`crate::testbed::images`]); not a parameter of the aging itself. In an
/// `append` workload's table, the same switch keeps the append test's own agings, one image
/// per usage checkpoint ([`crate::testbed::images::series`]).
const KEEP_IMAGE: &str = "keep_image";

/// The plan kind whose own aging `keep_image` keeps.
const APPEND: &str = "append";

/// Whether `key` of a `what` table of `kind` is the image cache's switch, not a parameter.
fn is_keep_switch(key: &str, what: &str, kind: &str) -> bool {
    key == KEEP_IMAGE && (what == "[age]" || (what == "[[workload]]" && kind == APPEND))
}

/// The `[age] keep_image` switch: a boolean, false when absent.
fn keep_image(src: &Src, age: Option<&RawWorkload>) -> Result<bool> {
    Ok(switch(src, age, "[age] keep_image")?.is_some_and(|(on, _)| on))
}

/// The `keep_image` switch of `table`: its value and where it is written, `None` when
/// absent; anything but a boolean is refused at its value, as `label`.
fn switch(
    src: &Src,
    table: Option<&RawWorkload>,
    label: &str,
) -> Result<Option<(bool, Range<usize>)>> {
    let Some((k, v)) =
        table.and_then(|a| a.get_ref().iter().find(|(k, _)| k.get_ref() == KEEP_IMAGE))
    else {
        return Ok(None);
    };
    match v.get_ref() {
        toml::Value::Boolean(b) => Ok(Some((*b, k.span()))),
        other => Err(src.err(
            v.span(),
            label,
            format!("must be true or false, not {other}"),
        )),
    }
}

/// An `append` workload's `keep_image` switch. Refused in a plan with `[age]`: its runs start
/// from the `[age]` aging, which `[age] keep_image` keeps.
fn append_keep_image(src: &Src, w: &RawWorkload, has_age: bool) -> Result<bool> {
    let label = "[[workload]] append field `keep_image`";
    match switch(src, Some(w), label)? {
        Some((true, at)) if has_age => Err(src.err(
            at,
            label,
            "keeps the append test's own agings, but this plan ages every filesystem first with [age]; keep that aging with [age] keep_image = true instead, or leave out [age]",
        )),
        Some((on, _)) => Ok(on),
        None => Ok(false),
    }
}

/// The plan's TOML as its raw tables, a syntax or type error at its line and column.
pub(super) fn read_raw<Q: serde::de::DeserializeOwned>(src: &Src) -> Result<RawPlan<Q>> {
    toml::from_str(src.text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let mut msg = e.message().trim().replace('\n', " ");
        if src.text[span.start.min(src.text.len())..]
            .trim_start()
            .starts_with("[[question]]")
        {
            msg.push_str(&question::missing_field_hint(&msg));
        }
        let field = src.key_at(span.start).unwrap_or_default();
        src.err(span, &field, msg)
    })
}

/// The plan's `fresh`, [`Fresh::PerRun`] when it names none.
fn parse_fresh(src: &Src, raw: &RawPlan) -> Result<Fresh> {
    let Some(s) = &raw.fresh else {
        return Ok(Fresh::PerRun);
    };
    s.get_ref().parse::<Fresh>().map_err(|_| {
        src.err(
            s.span(),
            "fresh",
            format!(
                "unknown value {:?}; allowed: {}",
                s.get_ref(),
                Fresh::ALL.map(|f| format!("\"{}\"", f.name())).join(", ")
            ),
        )
    })
}

/// The run settings the plan's top level writes (`reps`, `seed`, `cold`, `layout`), read as
/// [`RunSettings`]: the type that declares their flags, so that a key and its flag have one
/// parser and one bound. A key that is neither the plan's own nor a run setting is refused at
/// itself, a bad value at itself.
fn read_settings<Q>(src: &Src, raw: &RawPlan<Q>) -> Result<RunSettings> {
    if raw.settings.is_empty() {
        return Ok(RunSettings::default());
    }
    // Where each key is written: serde's flatten keeps the values but not their places.
    let top: BTreeMap<Spanned<String>, Spanned<toml::Value>> =
        toml::from_str(src.text).map_err(|e| src.err(e.span().unwrap_or(0..0), "", e.message()))?;
    let at = |key: &str| top.iter().find(|(k, _)| k.get_ref() == key);
    let keys = setting_keys();
    if let Some(k) = raw.settings.keys().find(|k| !keys.contains(k)) {
        let quoted = |ks: &mut dyn Iterator<Item = &str>| {
            ks.map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
        };
        return Err(src.err(
            at(k).map_or(0..0, |(k, _)| k.span()),
            k,
            format!(
                "unknown field `{k}`, expected one of {}, or a run setting: {}",
                quoted(&mut OWN_KEYS.into_iter()),
                quoted(&mut keys.iter().map(String::as_str))
            ),
        ));
    }
    let given: serde_json::Map<String, serde_json::Value> = raw
        .settings
        .iter()
        .map(|(k, v)| (k.clone(), toml_to_json(v)))
        .collect();
    serde_path_to_error::deserialize::<_, RunSettings>(serde_json::Value::Object(given)).map_err(
        |e| {
            let key = e.path().iter().find_map(|seg| match seg {
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                _ => None,
            });
            let span = key.as_deref().and_then(at).map_or(0..0, |(_, v)| v.span());
            src.err(span, key.as_deref().unwrap_or(""), e.into_inner())
        },
    )
}

/// The keys of the run settings: their flags' names with `_` for `-` (clap's ids).
pub(crate) fn setting_keys() -> Vec<String> {
    let cmd = <RunSettings as clap::Args>::augment_args(clap::Command::new("keys"));
    cmd.get_arguments()
        .map(|a| a.get_id().as_str().to_string())
        .collect()
}

/// A plan needs at least one `[[workload]]` and one `[[testbed]]`.
fn require_entries(src: &Src, raw: &RawPlan) -> Result<()> {
    // At the top of the plan's own file: with `extends`, the text's first line may be the
    // preset's, but what is missing is missing from the plan (its drop_* left nothing).
    let err = |field: &str, msg: String| bad_input(format!("{}:1:1: {field}: {msg}", src.name));
    if raw.workload.is_empty() {
        return Err(err(
            "workload",
            format!(
                "the plan has no [[workload]]; add one, e.g. [[workload]] kind = \"tree\" (kinds: {})",
                kind_names()
            ),
        ));
    }
    if raw.testbed.is_empty() {
        return Err(err(
            "testbed",
            "the plan has no [[testbed]]; add one, e.g. [[testbed]] fs = \"ext4\" size = \"1G\""
                .into(),
        ));
    }
    Ok(())
}

/// The plan's workloads, labelled, each split into its sweep's cells when every run gets a
/// fresh testbed.
/// The sweeps' cells and the plan's runs are counted (see [`super::limits`]) before any
/// sweep is split.
fn parse_workloads(
    src: &Src,
    raw: &RawPlan,
    fresh: Fresh,
    scale_f: f64,
    reps: Reps,
) -> Result<Vec<PlanWorkload>> {
    let testbed_labels = testbed_labels(src, &raw.testbed);
    let labels = question::workload_labels(src, &raw.workload, &testbed_labels)?;
    let mut tally = Tally::new(raw.testbed.len(), reps);
    let mut built = Vec::with_capacity(raw.workload.len());
    for (w, label) in raw.workload.iter().zip(labels) {
        crate::base::signals::check()?;
        let mut pw = parse_workload(src, w, scale_f)?;
        pw.label = label;
        if pw.kind == APPEND {
            pw.keep_image = append_keep_image(src, w, raw.age.is_some())?;
        }
        let split = fresh == Fresh::PerRun && sweep::splits(&*pw.workload);
        tally.add(src, w, &*pw.workload, split)?;
        built.push((w, pw, split));
    }
    let mut workloads = Vec::new();
    for (w, pw, split) in built {
        crate::base::signals::check()?;
        if split {
            workloads.extend(split_cells(src, w, pw)?);
        } else {
            workloads.push(pw);
        }
    }
    Ok(workloads)
}

/// The plan's testbeds (labels unique), with where each one's size was given.
fn parse_testbeds(
    src: &Src,
    raw: &RawPlan,
    opts: &ParseOptions,
) -> Result<(Vec<PlanTestbed>, Vec<FieldSpans>)> {
    let mut testbeds: Vec<PlanTestbed> = Vec::new();
    let mut spans = Vec::new();
    // Each label's entry, so that a repeated label is found without a scan of every entry.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for t in &raw.testbed {
        crate::base::signals::test_pause("plan-entry");
        crate::base::signals::check()?;
        let (tb, size_span) = parse_testbed(src, t, opts)?;
        if let Some(prev) = seen.get(&tb.spec.label).map(|&i| &testbeds[i]) {
            let span = entry(t, &["label"]).map_or(t.span(), |(_, l)| l.span());
            return Err(src.err(
                span.clone(),
                "label",
                format!(
                    "two testbeds are labelled {:?} (the other at {}); give each [[testbed]] its own label",
                    tb.spec.label,
                    src.seen_from(&prev.at, span.start)
                ),
            ));
        }
        spans.push(size_span);
        seen.insert(tb.spec.label.clone(), testbeds.len());
        testbeds.push(tb);
    }
    Ok((testbeds, spans))
}

/// The label each `[[testbed]]` will have (its `label`, or its fs name) and where it is, as
/// far as the raw entries tell; for workload labels, which must differ from them.
fn testbed_labels(src: &Src, raw: &[RawWorkload]) -> Vec<(String, Location)> {
    raw.iter()
        .map(|t| {
            let label = entry(t, &["label"])
                .or_else(|| entry(t, &["fs"]))
                .and_then(|(_, v)| v.get_ref().as_str())
                .unwrap_or_default()
                .to_string();
            (label, src.loc(t.span().start))
        })
        .collect()
}

fn kind_names() -> String {
    registry::kinds()
        .iter()
        .map(|k| k.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The reps of the plan's runs: `given`, the plan's `own` with the command line's `--reps`
/// over it ([`RunSettings::over`]); `cv_target` and `max_reps` go with the plan's own
/// `reps = "auto"`.
fn parse_reps(
    src: &Src,
    raw: &RawPlan,
    own: Option<RepsSetting>,
    given: Option<RepsSetting>,
) -> Result<Reps> {
    if own != Some(RepsSetting::Auto) {
        for (what, span) in [
            ("cv_target", raw.cv_target.as_ref().map(|c| c.span())),
            ("max_reps", raw.max_reps.as_ref().map(|c| c.span())),
        ] {
            if let Some(span) = span {
                return Err(src.err(
                    span,
                    what,
                    "only applies with reps = \"auto\"; remove it or set reps = \"auto\"",
                ));
            }
        }
    }
    let reps = match given {
        None => Reps::Fixed(DEFAULT_REPS),
        Some(RepsSetting::Count(n)) => Reps::Fixed(n),
        Some(RepsSetting::Auto) => Reps::Auto {
            cv: AUTO_CV_TARGET,
            max: AUTO_MAX_REPS,
        },
    };
    let Reps::Auto { mut cv, mut max } = reps else {
        return Ok(reps);
    };
    if let Some(c) = &raw.cv_target {
        cv = *c.get_ref();
        if !(cv > 0.0 && cv < 1.0) {
            return Err(src.err(
                c.span(),
                "cv_target",
                format!("{cv} is out of range; give a fraction between 0 and 1, e.g. 0.05 for 5%"),
            ));
        }
    }
    if let Some(m) = &raw.max_reps {
        let v = *m.get_ref();
        if !(i64::from(AUTO_MIN_REPS)..=i64::from(MAX_REPS)).contains(&v) {
            return Err(src.err(
                m.span(),
                "max_reps",
                format!("{v} is out of range; give {AUTO_MIN_REPS} to {MAX_REPS}"),
            ));
        }
        max = v as u32;
    }
    Ok(Reps::Auto { cv, max })
}

/// A size written as a number of bytes or as size text (`"64M"`).
fn size_value(src: &Src, v: &Spanned<toml::Value>, field: &str) -> Result<u64> {
    match v.get_ref() {
        toml::Value::Integer(n) if *n >= 0 => Ok(*n as u64),
        toml::Value::String(s) => parse_size(s).map_err(|e| src.err(v.span(), field, e)),
        other => Err(src.err(
            v.span(),
            field,
            format!("{other} is not a size; write a byte count or size text like \"64M\""),
        )),
    }
}

/// Where a testbed's size and journal are written (the table when absent), and the key its
/// size is written under (its flag's name when absent), for errors about room.
struct FieldSpans {
    size: Range<usize>,
    size_key: String,
    journal: Range<usize>,
}

/// A plan-only string of a `[[testbed]]` (`fs`, `label`).
fn text_value<'a>(
    src: &Src,
    t: &'a RawWorkload,
    key: &str,
) -> Result<Option<&'a Spanned<toml::Value>>> {
    match entry(t, &[key]) {
        Some((_, v)) if v.get_ref().is_str() => Ok(Some(v)),
        Some((_, v)) => Err(src.err(
            v.span(),
            key,
            format!("{} is not text; write it in quotes", v.get_ref()),
        )),
        None => Ok(None),
    }
}

/// Reads a `[[testbed]]`: its settings through [`TestbedParams`] (the flags' names, defaults
/// and parsers; the old key names are aliases), with every error at the key or value at fault.
fn parse_testbed(
    src: &Src,
    t: &RawWorkload,
    opts: &ParseOptions,
) -> Result<(PlanTestbed, FieldSpans)> {
    let Some(fs_v) = text_value(src, t, "fs")? else {
        return Err(src.err(
            t.span(),
            "fs",
            format!(
                "missing field `fs` in this [[testbed]]; add fs = \"ext4\" (allowed: {})",
                FsKind::ALL.map(|k| k.name()).join(", ")
            ),
        ));
    };
    let fs_name = fs_v.get_ref().as_str().unwrap_or_default();
    let fs: FsKind = fs_name.parse().map_err(|_| {
        src.err(
            fs_v.span(),
            "fs",
            format!(
                "unknown filesystem {fs_name:?}; allowed: {}",
                FsKind::ALL.map(|k| format!("\"{}\"", k.name())).join(", ")
            ),
        )
    })?;
    let label = text_value(src, t, "label")?.and_then(|l| l.get_ref().as_str().map(String::from));
    let optional = match entry(t, &["optional"]) {
        None => false,
        Some((_, v)) => v.get_ref().as_bool().ok_or_else(|| {
            src.err(
                v.span(),
                "optional",
                format!("{} is not true or false", v.get_ref()),
            )
        })?,
    };
    let mem_limit = match entry(t, &["mem_limit"]) {
        Some((_, m)) => {
            let v = size_value(src, m, "mem_limit")?;
            if v < (16 << 20) {
                return Err(src.err(
                    m.span(),
                    "mem_limit",
                    format!(
                        "{} is too small to run anything in; give 16M or more",
                        format_size(v)
                    ),
                ));
            }
            Some(v)
        }
        None => None,
    };
    let mut params = testbed_params(src, t)?;
    if let Some(w) = &opts.workdir {
        params.workdir = Some(w.clone());
    }
    if let Some(m) = &opts.device_model {
        params.device_model = Some(m.clone());
    }
    let written = |keys: &[&str]| entry(t, keys);
    let spec = params
        .input(fs, label, None)
        .and_then(TestbedSpec::build)
        .and_then(|spec| {
            crate::testbed::check_workdir(&spec.workdir)?;
            Ok(spec)
        })
        .map_err(|e| {
            // The field the error names, where the plan writes it (the table when absent).
            let field = crate::base::error::bad_field(&e);
            let at = match field {
                // A --workdir of the command line overrides the plan's; then the table is meant.
                Some("workdir") if opts.workdir.is_some() => None,
                Some("device_model") if opts.device_model.is_some() => None,
                Some("label") => written(&["label"]),
                Some(f) => written(plan_keys(f)),
                None => None,
            };
            let name = at.map(|(k, _)| k.get_ref().as_str()).or(field);
            src.err(
                at.map_or(t.span(), |(_, v)| v.span()),
                name.unwrap_or("testbed"),
                format!("{e:#}"),
            )
        })?;
    let size_at = written(plan_keys(SIZE_KEY));
    Ok((
        PlanTestbed {
            spec,
            mem_limit,
            optional,
            at: src.loc(t.span().start),
        },
        FieldSpans {
            size: size_at.map_or(t.span(), |(_, v)| v.span()),
            size_key: size_at.map_or(SIZE_KEY.to_string(), |(k, _)| k.get_ref().clone()),
            journal: written(&["journal"]).map_or(t.span(), |(_, v)| v.span()),
        },
    ))
}

/// The testbed settings of a `[[testbed]]`: every key but [`PLAN_TESTBED_KEYS`], read as the
/// flags read them; an unknown key fails at itself, a bad value at its value.
fn testbed_params(src: &Src, t: &RawWorkload) -> Result<TestbedParams> {
    let mut given = serde_json::Map::new();
    for (k, v) in t.get_ref() {
        if PLAN_TESTBED_KEYS.contains(&k.get_ref().as_str()) {
            continue;
        }
        let keys = testbed_keys();
        if !keys
            .iter()
            .any(|a| a == k.get_ref() || plan_keys(a).contains(&k.get_ref().as_str()))
        {
            return Err(src.err(
                k.span(),
                k.get_ref(),
                format!(
                    "unknown field `{}` of a [[testbed]]; allowed: {}, {} (the testbed flags' names with _ for -; the old names {} still work)",
                    k.get_ref(),
                    PLAN_TESTBED_KEYS.join(", "),
                    keys.join(", "),
                    keys.iter()
                        .flat_map(|n| plan_keys(n).iter().skip(1))
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        given.insert(k.get_ref().clone(), toml_to_json(v.get_ref()));
    }
    serde_path_to_error::deserialize::<_, TestbedParams>(serde_json::Value::Object(given)).map_err(
        |e| {
            let key = e.path().iter().find_map(|seg| match seg {
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                _ => None,
            });
            let at = key.as_deref().and_then(|k| entry(t, &[k]));
            src.err(
                at.map_or(t.span(), |(_, v)| v.span()),
                key.as_deref().unwrap_or("testbed"),
                e.into_inner(),
            )
        },
    )
}

/// The keys of the testbed settings: the flags' names with `_` for `-` (clap's ids).
fn testbed_keys() -> Vec<String> {
    let cmd = <TestbedParams as clap::Args>::augment_args(clap::Command::new("keys"));
    cmd.get_arguments()
        .map(|a| a.get_id().as_str().to_string())
        .collect()
}

pub(super) fn toml_to_json(v: &toml::Value) -> serde_json::Value {
    match v {
        toml::Value::String(s) => serde_json::Value::String(s.clone()),
        toml::Value::Integer(i) => serde_json::Value::from(*i),
        toml::Value::Float(f) => serde_json::Value::from(*f),
        toml::Value::Boolean(b) => serde_json::Value::Bool(*b),
        toml::Value::Datetime(d) => serde_json::Value::String(d.to_string()),
        toml::Value::Array(a) => serde_json::Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => serde_json::Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}

pub(super) type RawWorkload = Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>;

fn parse_workload(src: &Src, w: &RawWorkload, scale_f: f64) -> Result<PlanWorkload> {
    let table = w.get_ref();
    let Some((_, kind_v)) = table.iter().find(|(k, _)| k.get_ref() == "kind") else {
        return Err(src.err(
            w.span(),
            "kind",
            format!(
                "this [[workload]] has no kind; add kind = \"...\" (kinds: {})",
                kind_names()
            ),
        ));
    };
    let toml::Value::String(kind_name) = kind_v.get_ref() else {
        return Err(src.err(
            kind_v.span(),
            "kind",
            format!("must be a string naming a workload kind: {}", kind_names()),
        ));
    };
    let Some(kind) = registry::find(kind_name) else {
        return Err(src.err(
            kind_v.span(),
            "kind",
            format!(
                "unknown workload kind {kind_name:?}; allowed: {}",
                registry::kinds()
                    .iter()
                    .map(|k| format!("\"{}\"", k.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    };
    build_workload(src, w, kind, scale_f, "[[workload]]")
}

/// Builds a workload of `kind` from a table's fields (`kind` itself skipped), with errors that
/// point at the field; `what` names the table in messages (`[[workload]]`, `[age]`).
fn build_workload(
    src: &Src,
    w: &RawWorkload,
    kind: &'static registry::WorkloadKind,
    scale_f: f64,
    what: &str,
) -> Result<PlanWorkload> {
    let table = w.get_ref();
    let ranks = ranks(src, w, kind, what)?;
    // `label` names a [[workload]] entry for questions and results; it is not a parameter.
    let fields: Vec<(&Spanned<String>, &Spanned<toml::Value>)> = table
        .iter()
        .filter(|(k, _)| {
            k.get_ref() != "kind"
                && k.get_ref() != "ranks"
                && !(k.get_ref() == "label" && what == "[[workload]]")
                && !is_keep_switch(k.get_ref(), what, kind.name)
        })
        .collect();
    let mut given = serde_json::Map::new();
    for (k, v) in &fields {
        given.insert(k.get_ref().clone(), toml_to_json(v.get_ref()));
    }
    let given = serde_json::Value::Object(given);
    let scaled = scale::apply(kind.name, &given, scale_f);
    let scaled_note = if scale_f != 1.0 {
        format!(" (after --scale {scale_f})")
    } else {
        String::new()
    };
    let field_label = |k: &str| format!("{what} {} field `{k}`", kind.name);
    // Where a parameter is written (its value, or its key when `key`), from the parse tree;
    // the whole table when the error names no parameter of it.
    let at = |field: Option<&str>, key: bool| -> (Range<usize>, String) {
        match field.and_then(|f| fields.iter().find(|(k, _)| k.get_ref() == f)) {
            Some((k, v)) => (
                if key { k.span() } else { v.span() },
                field_label(k.get_ref()),
            ),
            None => (w.span(), format!("{what} {}", kind.name)),
        }
    };
    if kind.name == "exercise" {
        check_exercise_file(src, &fields, &field_label)?;
    }
    let workload: Box<dyn Workload> = match (kind.build)(scaled) {
        Ok(w) => w,
        Err(e) => {
            // An unknown field fails at its key, before its value is read.
            let key = e
                .field
                .as_deref()
                .is_some_and(|f| !kind_fields(kind).contains(&f.to_string()));
            let (span, label) = at(e.field.as_deref(), key);
            return Err(src.err(span, &label, format!("{}{scaled_note}", e.msg)));
        }
    };
    if let Err(e) = workload.validate() {
        let fields_at_fault = crate::base::error::bad_fields(&e);
        if let [_, _, ..] = fields_at_fault.as_slice() {
            // Only the combination is at fault (levels with dirs_per_level): name them all, at
            // the first that is written in the plan.
            let names: Vec<String> = fields_at_fault.iter().map(|f| format!("`{f}`")).collect();
            let span = fields_at_fault
                .iter()
                .find_map(|f| fields.iter().find(|(k, _)| k.get_ref() == f))
                .map_or_else(|| w.span(), |(_, v)| v.span());
            return Err(src.err(
                span,
                &format!("{what} {} fields {}", kind.name, names.join(" and ")),
                format!("{e}{scaled_note}"),
            ));
        }
        let (span, label) = at(crate::base::error::bad_field(&e), false);
        return Err(src.err(span, &label, format!("{e}{scaled_note}")));
    }
    // Estimates over 64 bits are refused here, at the workload's table, so nothing later (the
    // testbed fit, --dry-run's estimate, the runs) sees a wrapped figure.
    if let Err(e) = workload
        .space_needed()
        .and_then(|_| workload.memory_needed())
    {
        return Err(src.err(
            w.span(),
            &format!("{what} {}", kind.name),
            format!("{e}{scaled_note}"),
        ));
    }
    Ok(PlanWorkload {
        kind: kind.name,
        label: kind.name.to_string(),
        ranks,
        given,
        workload: Arc::from(workload),
        at: src.loc(w.span().start),
        keep_image: false,
    })
}

/// `ranks` of a workload's table: it documents the MPI job the workload is meant for and is not
/// a workload parameter; a whole number from 1 to 1,000,000 when given.
fn ranks(
    src: &Src,
    w: &RawWorkload,
    kind: &'static registry::WorkloadKind,
    what: &str,
) -> Result<Option<u32>> {
    let Some((k, v)) = w.get_ref().iter().find(|(k, _)| k.get_ref() == "ranks") else {
        return Ok(None);
    };
    match v.get_ref().as_integer() {
        Some(n) if (1..=1_000_000).contains(&n) => Ok(Some(n as u32)),
        _ => Err(src.err(
            v.span(),
            &format!("{what} {} field `{}`", kind.name, k.get_ref()),
            "must be a whole number of MPI ranks, 1 or more (e.g. ranks = 16)",
        )),
    }
}

/// A plan's workloads run on its testbeds: the exerciser's `file` is a name on the testbed,
/// never a path on the host (as `fsgauge exercise --fs` refuses one).
fn check_exercise_file(
    src: &Src,
    fields: &[(&Spanned<String>, &Spanned<toml::Value>)],
    field_label: &dyn Fn(&str) -> String,
) -> Result<()> {
    let Some((k, v)) = fields.iter().find(|(k, _)| k.get_ref() == "file") else {
        return Ok(());
    };
    match v.get_ref() {
        toml::Value::String(f) if f.contains('/') => Err(src.err(
            k.span(),
            &field_label(k.get_ref()),
            format!(
                "{f:?} is a path, but a plan's exerciser writes its file on the plan's testbed, not on the host; give a plain name (e.g. file = \"exercise.dat\")"
            ),
        )),
        _ => Ok(()),
    }
}

/// With `fresh = "per-run"`, a workload whose sweep has several cells becomes one entry per
/// cell, so that each cell runs on its own fresh testbed with its own result, as
/// `fsgauge bench KIND --fs` runs it. Each cell's `given` shows its own value on every axis.
fn split_cells(src: &Src, w: &RawWorkload, pw: PlanWorkload) -> Result<Vec<PlanWorkload>> {
    if !sweep::splits(&*pw.workload) {
        return Ok(vec![pw]);
    }
    let cells = sweep::cells(&*pw.workload)
        .map_err(|e| src.err(w.span(), &format!("[[workload]] {}", pw.kind), e))?;
    Ok(cells
        .into_iter()
        .map(|cell| {
            let mut given = pw.given.clone();
            let params = cell.workload.params();
            if let Some(map) = given.as_object_mut() {
                for (axis, i) in &cell.at {
                    let value = match map.get(*axis) {
                        Some(serde_json::Value::Array(v)) => v.get(*i).cloned(),
                        Some(_) => None,
                        None => params[*axis].get(0).cloned(),
                    };
                    if let Some(v) = value {
                        map.insert((*axis).to_string(), v);
                    }
                }
            }
            PlanWorkload {
                kind: pw.kind,
                label: pw.label.clone(),
                ranks: pw.ranks,
                given,
                workload: Arc::from(cell.workload),
                at: pw.at.clone(),
                keep_image: pw.keep_image,
            }
        })
        .collect())
}

/// The parameter names of a kind: the keys of its defaults.
fn kind_fields(kind: &registry::WorkloadKind) -> Vec<String> {
    (kind.build)(serde_json::json!({}))
        .ok()
        .and_then(|w| w.params().as_object().map(|m| m.keys().cloned().collect()))
        .unwrap_or_default()
}

/// The smallest testbed `--scale` below 1 shrinks an image to, unless its mkfs needs more
/// (xfs refuses less than 300M): small enough that a smoke run of an aging study (whose data
/// is a share of its filesystem) takes seconds even on an emulated disk.
const MIN_SCALED_SIZE: u64 = 64 << 20;

/// Checks that every workload fits on the testbed. As written (scale 1) a testbed too small is
/// an error at its `size`; under `--scale` testbeds grow to fit (rounded up to 64M), with a note.
/// Below scale 1 an image testbed first shrinks with the scale (to at least
/// [`MIN_SCALED_SIZE`], its mkfs's minimum and twice the biggest workload's estimate): a
/// workload whose work is a share of its filesystem (aging to a usage)
/// shrinks with it, and mkfs and the fit checks work on the smaller size.
fn fit_testbed(
    src: &Src,
    tb: &mut PlanTestbed,
    at: &FieldSpans,
    workloads: &[PlanWorkload],
    scale_f: f64,
    notes: &mut Vec<String>,
) -> Result<()> {
    // Every workload's estimate was checked when it was parsed (an overflow is refused there).
    let need_of = |w: &PlanWorkload| w.workload.space_needed().unwrap_or(u64::MAX);
    let Some(big) = workloads.iter().max_by_key(|w| need_of(w)) else {
        return Ok(());
    };
    let need = need_of(big);
    if scale_f < 1.0 && tb.spec.device.is_none() {
        // Twice the estimate: a filesystem's own metadata (inode tables, journal, directory
        // blocks of a deep tree) is not in it, and the run's check after mkfs is exact.
        let scaled = ((tb.spec.size as f64 * scale_f) as u64)
            .max(MIN_SCALED_SIZE)
            .max(tb.spec.fs.min_size())
            .max(need.saturating_mul(2))
            .next_multiple_of(64 << 20);
        if scaled < tb.spec.size {
            notes.push(format!(
                "testbed {} shrunk from {} to {} with --scale {scale_f}",
                tb.spec.label,
                format_size(tb.spec.size),
                format_size(scaled)
            ));
            tb.spec.size = scaled;
        }
    }
    if need <= admit::usable(tb.spec.size) {
        return Ok(());
    }
    if scale_f == 1.0 {
        // As written, the plan is admitted or refused as `bench` would be on this testbed.
        return admit::space(&tb.spec, &*big.workload).map_err(|e| {
            src.err(
                at.size.clone(),
                &at.size_key,
                format!(
                    "testbed {:?}: {e} (the workload at {})",
                    tb.spec.label,
                    src.seen_from(&big.at, at.size.start)
                ),
            )
        });
    }
    let Some(grown) = admit::fitting_size(need) else {
        return Err(src.err(
            at.size.clone(),
            &at.size_key,
            format!(
                "the scaled workload at {} ({}) needs about {}, more than any testbed can be; use a smaller --scale",
                src.seen_from(&big.at, at.size.start),
                big.kind,
                crate::base::units::format_bytes_human(need as f64)
            ),
        ));
    };
    notes.push(format!(
        "testbed {} grown from {} to {} to fit the scaled {} workload",
        tb.spec.label,
        format_size(tb.spec.size),
        format_size(grown),
        big.kind
    ));
    tb.spec.size = grown;
    Ok(())
}

/// Checks that a testbed's memory limit holds what each workload needs for itself (fsgauge's
/// own memory plus the workload's buffers: the figure the run checks again before it starts),
/// so a limit too small is refused at its `mem_limit` before anything is made.
fn fit_memory(
    src: &Src,
    tb: &PlanTestbed,
    limit_at: Option<&Spanned<toml::Value>>,
    workloads: &[PlanWorkload],
) -> Result<()> {
    let (Some(limit), Some(at)) = (tb.mem_limit, limit_at) else {
        return Ok(());
    };
    for w in workloads {
        admit::memory(limit, &*w.workload, crate::lab::runner::TOOL_RSS_ESTIMATE).map_err(|e| {
            src.err(
                at.span(),
                "mem_limit",
                format!(
                    "testbed {:?} is limited to {}; for the workload at {} ({}): {e}",
                    tb.spec.label,
                    format_size(limit),
                    src.seen_from(&w.at, at.span().start),
                    w.kind
                ),
            )
        })?;
    }
    Ok(())
}

/// Checks that every workload's files fit in the inodes the testbed's mkfs will make. An ext
/// testbed whose mkfs options say nothing about inodes gets `-N` when its default would be
/// too few (with a note; the result's mkfs command line records it); an explicit `-N` or
/// `-i` that is too small is refused, naming the `-N` that fits.
fn fit_inodes(
    src: &Src,
    tb: &mut PlanTestbed,
    workloads: &[PlanWorkload],
    notes: &mut Vec<String>,
) -> Result<()> {
    let Some(big) = workloads.iter().max_by_key(|w| w.workload.inodes_needed()) else {
        return Ok(());
    };
    match admit::inodes(&mut tb.spec, &*big.workload) {
        Ok(note) => {
            notes.extend(
                note.map(|n| format!("{n} (the workload at {})", big.at.line_in(src.name))),
            );
            Ok(())
        }
        Err(e) => Err(bad_input(format!(
            "{}: mkfs: {e} (the workload at {})",
            tb.at,
            big.at.line_in(&tb.at.file)
        ))),
    }
}

/// With `fresh = "per-testbed"` and questions, runs alternate between the testbeds (so drift
/// hits both sides of a question alike), and every testbed's filesystem exists at once: the
/// disk (and the RAM disk) must hold them all together.
fn check_disk_together(
    src: &Src,
    testbeds: &[PlanTestbed],
    workloads: &[PlanWorkload],
    aged: bool,
    fresh_span: Option<Range<usize>>,
) -> Result<()> {
    let mut need: BTreeMap<PathBuf, u64> = BTreeMap::new();
    for tb in testbeds {
        let s = &tb.spec;
        let mut add = |backing: Backing, bytes: u64| {
            let base = match backing {
                Backing::File => crate::testbed::room::nearest_existing(&s.workdir),
                Backing::Ram => {
                    crate::testbed::room::nearest_existing(&default_workdir(Backing::Ram))
                }
            };
            let e = need.entry(base).or_default();
            *e = e.saturating_add(bytes);
        };
        add(s.backing, s.image_room(written(s, workloads, aged)));
        if let Some(j) = s.journal {
            add(j.backing, j.size);
        }
    }
    for (base, bytes) in need {
        let Some(avail) = crate::testbed::room::free_space(&base) else {
            continue;
        };
        if bytes > avail {
            return Err(src.err(
                fresh_span.clone().unwrap_or(0..0),
                "fresh",
                format!(
                    "with questions, fresh = \"per-testbed\" keeps every testbed's filesystem at once (runs alternate between them), which needs {} in {} but it has only {} free; use fresh = \"per-run\", smaller sizes, or --workdir on a bigger filesystem",
                    crate::base::units::format_bytes_human(bytes as f64),
                    crate::testbed::room::describe(&base),
                    crate::base::units::format_bytes_human(avail as f64)
                ),
            ));
        }
    }
    Ok(())
}

/// What the plan's runs write on a testbed at most, for the room a sparse image takes: the
/// largest workload's estimate, or the whole testbed when it is aged (aging fills it).
fn written(spec: &TestbedSpec, workloads: &[PlanWorkload], aged: bool) -> u64 {
    if aged {
        return spec.size;
    }
    workloads
        .iter()
        .map(|w| w.workload.space_needed().unwrap_or(u64::MAX))
        .max()
        .unwrap_or(0)
}

/// Runs are made one at a time, so the disk must hold each testbed's image (and its journal
/// image) at once: refused as the run's own check refuses it, at the key at fault.
fn check_disk(src: &Src, tb: &PlanTestbed, at: &FieldSpans, written: u64) -> Result<()> {
    crate::testbed::room::check(&tb.spec, written).map_err(|e| {
        let (span, key) = match crate::base::error::bad_field(&e) {
            Some("journal") => (at.journal.clone(), "journal"),
            _ => (at.size.clone(), at.size_key.as_str()),
        };
        src.err(span, key, format!("{e:#}"))
    })
}

/// Parses `text` as the plan file `t.toml`, scaled by `scale`, with the system's temporary
/// directory as its workdir: the plans of the unit tests.
/// The run settings a plan `text` (the file `t.toml`) gives, as its parser reads them.
#[cfg(test)]
pub(crate) fn settings_of(text: &str) -> Result<RunSettings> {
    let src = Src::new("t.toml", text);
    let raw: RawPlan = read_raw(&src)?;
    read_settings(&src, &raw)
}

#[cfg(test)]
pub(crate) fn parse_test(text: &str, scale: Option<f64>) -> Result<Plan> {
    let opts = ParseOptions {
        scale,
        workdir: Some(std::env::temp_dir()),
        ..Default::default()
    };
    super::parse(text, "t.toml", &opts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::plan::parse;
    use crate::workload::ColdMode;

    fn p(text: &str) -> Result<Plan> {
        parse_test(text, None)
    }

    fn err(text: &str) -> String {
        format!("{:#}", p(text).expect_err("must fail"))
    }

    const OK: &str = r#"
name = "x"
reps = 2
cold = "drop"

[[testbed]]
label = "a"
fs = "ext4"
size = "256M"
mkfs = "-O ^extent"
mount = "data=writeback"
mem_limit = "64M"

[[testbed]]
fs = "ext4"
size = 268435456

[[workload]]
kind = "tree"
dirs = 2
files = 3
file_size = "64K"
"#;

    /// Every testbed flag, found in clap's metadata (so a new one is covered as it is added),
    /// is the plan key of the same name with `_` for `-`: `--KEY VALUE` on the command line
    /// and `KEY = "VALUE"` in a `[[testbed]]` give the same testbed, unlike the default one.
    #[test]
    fn every_testbed_flag_is_the_plan_key_of_the_same_name() {
        use clap::{Args, Command, FromArgMatches};
        let tmp = std::env::temp_dir().to_string_lossy().into_owned();
        // A value unlike the default for each setting; a new flag needs one here, with the
        // other settings it needs to mean something (given to both sides and to the default).
        type Sample<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);
        let samples: [Sample; 13] = [
            ("fs_size", "320M", &[]),
            ("mkfs_opts", "-O ^extent -I 256", &[]),
            ("mount_opts", "noatime", &[]),
            ("journal", "file:8M", &[]),
            ("backing", "ram", &[]),
            ("image_alloc", "sparse", &[]),
            ("workdir", &tmp, &[]),
            ("loop_direct_io", "off", &[]),
            ("device_model", "deskstar-7k250:cache=off", &[]),
            ("device_offset", "100G", &[("device_model", "st3500641as")]),
            ("device_model_during", "always", &[("device_model", "ram")]),
            ("journal_device_model", "ram", &[("journal", "file:8M")]),
            ("image_start", "overlay", &[]),
        ];
        let flags_cmd =
            || crate::cli::TestbedArgs::augment_args(Command::new("bench").no_binary_name(true));
        let base = |extra: &[String]| {
            // Small images, so that the plan's check of free space passes anywhere.
            let mut args = vec!["--fs".to_string(), "ext4".to_string()];
            if !extra.iter().any(|a| a == "--fs-size") {
                args.extend(["--fs-size".to_string(), "256M".to_string()]);
            }
            args.extend(extra.iter().cloned());
            let m = flags_cmd().try_get_matches_from(args).expect("flags parse");
            let mut flags = crate::cli::TestbedArgs::from_arg_matches(&m).expect("flags read");
            // As `age --keep-image` sets it: only a command that keeps its aging takes
            // `--image-start overlay`, and this walk gives every flag.
            flags.keeps_image = true;
            flags
                .spec()
                .expect("a valid testbed")
                .expect("--fs is given")
        };
        let params = TestbedParams::augment_args(Command::new("params"));
        let mut walked = 0;
        for arg in params.get_arguments() {
            let key = arg.get_id().as_str();
            let flag = format!(
                "--{}",
                arg.get_long().expect("testbed settings are long flags")
            );
            assert_eq!(flag.trim_start_matches("--").replace('-', "_"), key);
            let (_, value, context) = samples
                .iter()
                .find(|(k, _, _)| *k == key)
                .unwrap_or_else(|| panic!("{flag} has no sample value in this test; add one"));
            let context_flags: Vec<String> = context
                .iter()
                .flat_map(|(k, v)| [format!("--{}", k.replace('_', "-")), v.to_string()])
                .collect();
            let context_keys: String = context
                .iter()
                .map(|(k, v)| format!("{k} = {v:?}\n"))
                .collect();
            let default = base(&context_flags);
            let mut with = context_flags.clone();
            with.extend([flag.clone(), value.to_string()]);
            let from_flags = base(&with);
            assert_ne!(from_flags, default, "{flag} {value} changes nothing");
            let size = if key == "fs_size" {
                ""
            } else {
                "fs_size = \"256M\"\n"
            };
            let plan = format!(
                "[[testbed]]\nfs = \"ext4\"\n{size}{context_keys}{key} = {value:?}\n\n[[workload]]\nkind = \"tree\"\ndirs = 1\nfiles = 1\nfile_size = \"4K\"\n"
            );
            let from_plan = parse(&plan, "t.toml", &ParseOptions::default())
                .unwrap_or_else(|e| panic!("{plan}: {e:#}"))
                .testbeds
                .remove(0)
                .spec;
            assert_eq!(
                from_flags, from_plan,
                "{flag} {value} and {key} = {value:?}"
            );
            walked += 1;
        }
        assert_eq!(walked, samples.len(), "every sample is a flag");
    }

    const INTERLEAVE: &str = "[[testbed]]\nlabel = \"e\"\nfs = \"ext4\"\nsize = \"1G\"\nMKFS\n\n[[workload]]\nkind = \"interleave\"\ndirs = 9890\nfiles = 14\n";

    #[test]
    fn an_ext_testbed_short_of_inodes_gets_enough_from_mkfs() {
        // The issue's inode-interleave run: 9890 dirs x 14 files = 148350 inodes on a 1G ext4,
        // whose default is 65536.
        let plan = p(&INTERLEAVE.replace("MKFS", "")).unwrap();
        let opts = &plan.testbeds[0].spec.mkfs_opts;
        let n: u64 = opts[opts.iter().position(|o| o == "-N").unwrap() + 1]
            .parse()
            .unwrap();
        assert!(n >= 148350 + crate::testbed::inodes::RESERVED, "{opts:?}");
        assert!(
            plan.notes.iter().any(|n| n.contains("added -N")),
            "{:?}",
            plan.notes
        );
        // Enough already: nothing added.
        let plan = p(&INTERLEAVE.replace("MKFS", "mkfs = \"-N 300000\"")).unwrap();
        assert_eq!(plan.testbeds[0].spec.mkfs_opts, ["-N", "300000"]);
        // Too few, explicitly: refused at the testbed, naming the -N that fits.
        let e = err(&INTERLEAVE.replace("MKFS", "mkfs = \"-i 65536\""));
        assert!(
            e.starts_with("t.toml:1:1: mkfs: testbed \"e\" gets 16384 inodes"),
            "{e}"
        );
        assert!(e.contains("makes 148350; use -N 164221"), "{e}");
        // xfs makes inodes as it goes.
        let plan = p(&INTERLEAVE.replace("ext4", "xfs").replace("MKFS", "")).unwrap();
        assert!(plan.testbeds[0].spec.mkfs_opts.is_empty());
    }

    #[test]
    fn a_good_plan_parses_with_defaults() {
        let plan = p(OK).unwrap();
        assert_eq!(plan.name, "x");
        assert_eq!(plan.reps, Reps::Fixed(2));
        assert_eq!(plan.cold, ColdMode::Drop);
        assert_eq!(plan.fresh, Fresh::PerRun);
        assert_eq!(plan.seed, crate::lab::runner::params::Seed::IN_A_PLAN);
        assert_eq!(plan.testbeds.len(), 2);
        assert_eq!(plan.testbeds[0].spec.mkfs_opts, vec!["-O", "^extent"]);
        assert_eq!(plan.testbeds[0].mem_limit, Some(64 << 20));
        assert_eq!(plan.testbeds[1].spec.label, "ext4");
        assert_eq!(plan.testbeds[1].at.line, 14);
        let params = plan.workloads[0].workload.params();
        assert_eq!(params["file_size"], 65536);
        assert_eq!(params["block"], 1 << 20, "defaults filled in");
    }

    #[test]
    fn malformed_toml_points_at_the_line() {
        let e = err("reps = 3\n[[testbed]\nfs = \"ext4\"\n");
        assert!(e.starts_with("t.toml:2:"), "{e}");
    }

    #[test]
    fn unknown_fields_are_errors_with_their_line() {
        let e = err(&OK.replace("cold = \"drop\"", "colde = \"drop\""));
        assert!(e.starts_with("t.toml:4:1:"), "{e}");
        assert!(e.contains("colde"), "{e}");
        let e = err(&OK.replace("mount = ", "mounts = "));
        assert!(e.starts_with("t.toml:11:1:"), "{e}");
    }

    #[test]
    fn workload_parameter_errors_point_inside_the_workload() {
        let e = err(&OK.replace("files = 3", "filez = 3"));
        assert!(e.starts_with("t.toml:21:1:"), "{e}");
        assert!(e.contains("filez") && e.contains("dirs"), "{e}");
        let e = err(&OK.replace("files = 3", "files = \"three\""));
        assert!(e.starts_with("t.toml:21:9:"), "{e}");
        assert!(e.contains("`files`"), "{e}");
        let e = err(&OK.replace("file_size = \"64K\"", "file_size = 3.5"));
        assert!(
            e.starts_with("t.toml:22:13:") && e.contains("size text"),
            "{e}"
        );
        let e = err(&OK.replace("file_size = \"64K\"", "file_size = \"64Q\""));
        assert!(e.starts_with("t.toml:22:13:"), "{e}");
        assert!(e.contains("file_size"), "{e}");
        let e = err(&OK.replace("dirs = 2", "dirs = 0"));
        assert!(e.starts_with("t.toml:20:8:"), "{e}");
        // A validation error names its parameter (typed), found in the table by that name.
        let e = err(&OK.replace("file_size = \"64K\"", "file_size = \"64K\"\nblock = \"2G\""));
        assert!(
            e.starts_with("t.toml:23:9: [[workload]] tree field `block`: --block over 1G"),
            "{e}"
        );
        let e = err(&OK.replace("kind = \"tree\"", "kind = \"trees\""));
        assert!(e.starts_with("t.toml:19:8:"), "{e}");
        assert!(e.contains("\"tree\""), "{e}");
    }

    #[test]
    fn wrong_values_list_the_allowed_ones() {
        // The flag's own message: one parser for --cold and cold.
        let e = err(&OK.replace("cold = \"drop\"", "cold = \"icy\""));
        assert_eq!(
            e,
            "t.toml:4:8: cold: unknown cold-cache mode \"icy\"; use none, drop or remount"
        );
        let e = err(&OK.replace("reps = 2", "reps = 2\nseed = -1"));
        assert_eq!(
            e,
            "t.toml:4:8: seed: -1 is not a seed; give a whole number from 0 to 18446744073709551615"
        );
        let e = err(&OK.replace(
            "fs = \"ext4\"\nsize = \"256M\"",
            "fs = \"zfs\"\nsize = \"256M\"",
        ));
        assert!(
            e.starts_with("t.toml:8:6:") && e.contains("\"btrfs\""),
            "{e}"
        );
        let e = err(&OK.replace("reps = 2", "reps = \"many\""));
        assert!(e.starts_with("t.toml:3:8:") && e.contains("auto"), "{e}");
        let e = err(&OK.replace("reps = 2", "reps = 2.5"));
        assert!(e.starts_with("t.toml:3:8:"), "{e}");
        let e = err(&OK.replace("reps = 2", "reps = 2\nfresh = \"never\""));
        assert!(e.contains("per-testbed"), "{e}");
    }

    #[test]
    fn testbed_problems_point_at_the_field() {
        let e = err(&OK.replace("size = \"256M\"", "size = \"1M\""));
        assert!(
            e.starts_with("t.toml:9:8:") && e.contains("too small"),
            "{e}"
        );
        let e = err(&OK.replace("label = \"a\"", "label = \"ext4\""));
        assert!(e.contains("two testbeds"), "{e}");
        // The spec's own checks name their field; the plan points at where it is written.
        let e = err(&OK.replace("label = \"a\"", "label = \"a b\""));
        assert!(e.starts_with("t.toml:7:9: label: testbed label"), "{e}");
        let e = err(&OK
            .replace("mount = \"data=writeback\"", "journal = \"ram:1M\"")
            .replace(
                "fs = \"ext4\"\nsize = \"256M\"",
                "fs = \"ext2\"\nsize = \"256M\"",
            ));
        assert!(e.starts_with("t.toml:11:11: journal: --journal"), "{e}");
        let e = err(&OK.replace("mkfs = \"-O ^extent\"", "mkfs = \"-O '^extent\""));
        assert!(e.starts_with("t.toml:10:8: mkfs:"), "{e}");
        let e = err(&OK.replace("file_size = \"64K\"", "file_size = \"100M\""));
        assert!(
            e.starts_with("t.toml:9:8:") && e.contains("needs about"),
            "{e}"
        );
        let e = err(&OK.replace("size = \"256M\"", "size = \"64P\""));
        assert!(e.contains("free"), "{e}");
        let e = err(&OK.replace("mount = \"data=writeback\"", "journal = \"ram:900T\""));
        assert!(
            e.starts_with("t.toml:11:11:") && e.contains("RAM disk"),
            "{e}"
        );
    }

    /// The emulated disk's settings without one, a loop device without direct I/O under one,
    /// and ablations that do not apply are refused at the key that says them, as the flags are.
    #[test]
    fn device_settings_that_do_not_apply_are_refused_at_their_key() {
        let at = |line: &str| OK.replace("mount = \"data=writeback\"", line);
        let e = err(&at("device_offset = \"100G\""));
        assert!(
            e.starts_with("t.toml:11:17: device_offset: --device-offset 100G places the filesystem on an emulated disk, but there is none: add --device-model PROFILE"),
            "{e}"
        );
        let e = err(&at("device_model_during = \"always\""));
        assert!(
            e.starts_with("t.toml:11:23: device_model_during: --device-model-during always says when the emulated disk of --device-model applies, but there is none"),
            "{e}"
        );
        let e = err(&at("device_model = \"ram\"\nloop_direct_io = false"));
        assert!(
            e.starts_with("t.toml:12:18: loop_direct_io: --loop-direct-io off: the emulated disk of --device-model ram needs its loop device to do direct I/O"),
            "{e}"
        );
        let e = err(&at("device_model = \"ram:seek=off\""));
        assert!(
            e.starts_with("t.toml:11:16: device_model: ablation seek=off does not apply to ram"),
            "{e}"
        );
        let e = err(&at("device_model = \"deskstar-7k250:seek=off,seek=on\""));
        assert!(
            e.starts_with("t.toml:11:16: device_model: ablation seek is given twice"),
            "{e}"
        );
        let e = err(&at("device_model = \"deskstar-7k250:constant=99999999h\""));
        assert!(
            e.starts_with(
                "t.toml:11:16: device_model: ablation constant=99999999h is out of range"
            ) && e.contains("above 0 and at most 10s, e.g. constant=12ms"),
            "{e}"
        );
        // With a disk, they apply; a disk given on the command line (`run PLAN
        // --device-model`) is the testbed's disk, so its offset and span apply to it.
        p(&at(
            "device_model = \"st3500641as\"\ndevice_offset = \"100G\"",
        ))
        .expect("with a disk");
        let opts = ParseOptions {
            workdir: Some(std::env::temp_dir()),
            device_model: Some("st3500641as".parse().expect("a profile")),
            ..Default::default()
        };
        let plan = parse(&at("device_offset = \"100G\""), "t.toml", &opts).expect("--device-model");
        let m = plan.testbeds[0].spec.device_model.clone().expect("a disk");
        assert_eq!(m.offset, 100 << 30);
    }

    #[test]
    fn reps_and_max_reps_share_the_flag_s_limit() {
        let e = err(&OK.replace("reps = 2", "reps = 10001"));
        assert!(
            e.starts_with("t.toml:3:8: reps:") && e.contains("from 1 to 10000"),
            "{e}"
        );
        let plan = p(&OK.replace("reps = 2", "reps = 10000")).expect("the limit");
        assert_eq!(plan.reps, Reps::Fixed(MAX_REPS));
        let e = err(&OK.replace("reps = 2", "reps = \"auto\"\nmax_reps = 10001"));
        assert!(
            e.contains("max_reps: 10001 is out of range; give 3 to 10000"),
            "{e}"
        );
    }

    #[test]
    fn a_memory_limit_below_the_workloads_own_need_is_refused_at_mem_limit() {
        // 8 threads with 64M requests hold 512M of buffers: a 64M limit cannot run them.
        let tio = OK.replace(
            "kind = \"tree\"\ndirs = 2\nfiles = 3\nfile_size = \"64K\"",
            "kind = \"tio\"\nthreads = [8]\nmode = [\"seqwrite\"]\nblock = \"64M\"\nfile_size = \"64M\"",
        );
        let big = tio.replace("size = \"256M\"", "size = \"1G\"");
        let e = err(&big.replace("size = 268435456", "size = \"1G\""));
        assert!(
            e.starts_with("t.toml:12:13: mem_limit: testbed \"a\" is limited to 64M")
                && e.contains("workload at line 18 (tio)")
                && e.contains("give at least"),
            "{e}"
        );
        // The same workload with small requests fits.
        let small = big
            .replace("size = 268435456", "size = \"1G\"")
            .replace("block = \"64M\"", "block = \"4K\"");
        assert!(
            p(&small).is_ok(),
            "{:#}",
            p(&small).err().map_or(String::new(), |e| e.to_string())
        );
    }

    #[test]
    fn ranks_document_the_mpi_job_and_are_checked() {
        let plan = p(&OK.replace("kind = \"tree\"", "kind = \"tree\"\nranks = 16")).unwrap();
        assert_eq!(plan.workloads[0].ranks, Some(16));
        assert!(plan.workloads[0].describe().contains("ranks=16"));
        assert_eq!(plan.workloads[0].workload.params().get("ranks"), None);
        let e = err(&OK.replace("kind = \"tree\"", "kind = \"tree\"\nranks = 0"));
        assert!(
            e.contains("field `ranks`") && e.contains("whole number"),
            "{e}"
        );
    }

    #[test]
    fn auto_reps_and_its_settings() {
        let plan =
            p(&OK.replace("reps = 2", "reps = \"auto\"\ncv_target = 0.1\nmax_reps = 6")).unwrap();
        assert_eq!(plan.reps, Reps::Auto { cv: 0.1, max: 6 });
        assert_eq!(plan.reps.initial(), 3);
        let e = err(&OK.replace("reps = 2", "reps = 2\ncv_target = 0.1"));
        assert!(e.contains("only applies"), "{e}");
    }

    /// `[age] keep_image` is the plan's switch for the image cache, not an aging parameter:
    /// kept off the workload's parameters (so the cache key and spec hash are the aging's),
    /// false when absent, and a boolean.
    #[test]
    fn age_keep_image_is_a_switch_not_a_parameter() {
        let plan = p(&format!(
            "{OK}\n[age]\nmode = \"fill\"\nusage = [50.0]\nkeep_image = true\n"
        ))
        .unwrap();
        assert!(plan.keep_image);
        let age = plan.age.expect("[age] is kept");
        assert_eq!(age.workload.params().get("keep_image"), None);
        let plan = p(&format!("{OK}\n[age]\nusage = [50.0]\n")).unwrap();
        assert!(!plan.keep_image);
        let e = err(&format!(
            "{OK}\n[age]\nusage = [50.0]\nkeep_image = \"yes\"\n"
        ));
        assert!(
            e.contains("t.toml:26:") && e.contains("keep_image") && e.contains("true or false"),
            "{e}"
        );
    }

    /// An append workload's `keep_image` is the image cache's switch for its own agings: kept
    /// off its parameters (the cache keys and the spec hash are the workload's), false when
    /// absent, a boolean, refused beside [age] (whose aging the runs start from) and, in
    /// another kind's table, an unknown field of that kind.
    #[test]
    fn append_keep_image_is_a_switch_not_a_parameter() {
        let append = "[[workload]]\nkind = \"append\"\nusage = [50.0]\ntree = \"2x5\"\n";
        let plan = p(&format!("{OK}\n{append}keep_image = true\n")).unwrap();
        let w = plan.workloads.iter().find(|w| w.kind == "append").unwrap();
        assert!(w.keep_image);
        assert_eq!(w.workload.params().get("keep_image"), None);
        assert!(
            !plan
                .workloads
                .iter()
                .find(|w| w.kind == "tree")
                .unwrap()
                .keep_image
        );
        assert!(!plan.keep_image, "the plan's [age] switch stays off");
        let plan = p(&format!("{OK}\n{append}")).unwrap();
        assert!(!plan.workloads.iter().any(|w| w.keep_image));
        let e = err(&format!("{OK}\n{append}keep_image = 1\n"));
        assert!(
            e.contains("t.toml:28:14:")
                && e.contains("`keep_image`")
                && e.contains("true or false"),
            "{e}"
        );
        let e = err(&format!(
            "{OK}\n{append}keep_image = true\n[age]\nusage = [20.0]\n"
        ));
        assert!(
            e.contains("t.toml:28:1:") && e.contains("[age] keep_image = true instead"),
            "{e}"
        );
        let e = err(&format!("{OK}keep_image = true\n"));
        assert!(e.contains("keep_image"), "{e}");
    }

    #[test]
    fn age_builds_the_age_workload_and_layout_is_taken() {
        let plan = p(&format!("{OK}\n[age]\nmode = \"fill\"\nusage = [50.0]\n")).unwrap();
        let age = plan.age.expect("[age] is kept");
        assert_eq!(age.kind, "age");
        assert_eq!(age.workload.params()["usage"], serde_json::json!([50.0]));
        let e = err(&format!("{OK}\n[age]\nusge = 50\n"));
        assert!(
            e.contains("t.toml:25:1") && e.contains("[age] age field `usge`"),
            "{e}"
        );
        let plan = p(&OK.replace("reps = 2", "reps = 2\nlayout = true")).unwrap();
        assert!(plan.layout);
        let e = err(&OK.replace("reps = 2", "reps = 2\nlayout = 3"));
        assert!(e.contains("layout"), "{e}");
        let e = err(&OK.replace("reps = 2", "reps = 2\nage = 3"));
        assert!(e.contains("age"), "{e}");
    }

    #[test]
    fn scaling_multiplies_declared_fields_and_grows_testbeds() {
        let plan = parse_test(OK, Some(1000.0)).unwrap();
        let params = plan.workloads[0].workload.params();
        assert_eq!(params["files"], 3, "tree keeps its shape");
        assert_eq!(params["dirs"], 2, "dirs keep their value");
        assert_eq!(params["file_size"], 64000 << 10);
        assert!(plan.testbeds[0].spec.size > 256 << 20);
        assert!(!plan.notes.is_empty());
    }

    #[test]
    fn scaling_down_shrinks_image_testbeds_to_the_floor_or_the_mkfs_minimum() {
        let big = OK
            .replace("size = \"256M\"", "size = \"6G\"")
            .replace("size = 268435456", "size = \"6G\"");
        // 6G x 0.05 = 307M, rounded up to 320M; x 0.002 = 12M, below the 64M floor.
        let plan = parse_test(&big, Some(0.05)).unwrap();
        assert!(plan.testbeds.iter().all(|t| t.spec.size == 320 << 20));
        let plan = parse_test(&big, Some(0.002)).unwrap();
        assert!(plan.testbeds.iter().all(|t| t.spec.size == 64 << 20));
        assert!(
            plan.notes
                .iter()
                .any(|n| n.contains("shrunk from 6G to 64M")),
            "{:?}",
            plan.notes
        );
        // xfs: not below the 300M its mkfs needs (rounded up to 320M).
        let xfs = big.replace("fs = \"ext4\"", "fs = \"xfs\"");
        let plan = parse_test(&xfs, Some(0.002)).unwrap();
        assert!(plan.testbeds.iter().all(|t| t.spec.size == 320 << 20));
        let plan = parse_test(&big, Some(0.5)).unwrap();
        assert_eq!(plan.testbeds[0].spec.size, 3 << 30);
    }
}
