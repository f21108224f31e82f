//! Reading a plan: TOML with spans, so that every error — malformed TOML, an unknown field, a
//! wrong type, a value out of range, even inside a workload's own parameters — names the file,
//! line and column and the field, and lists what is allowed. This file reads the plan's top
//! level (its own keys and the run settings) and puts the plan together; its testbeds are read
//! in [`super::testbeds`] and fitted to its workloads in [`super::fit`], its workloads are read
//! in [`super::workloads`], its questions in [`super::question`].

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::fault::{fault, fault_at_key};
use super::question::{self, RawQuestion};
use super::source::{toml_to_json, RawTable, Src};
use super::{fit, room, testbeds, workloads};
use super::{Fresh, ParseOptions, Plan, Reps, AUTO_CV_TARGET, AUTO_MAX_REPS, AUTO_MIN_REPS};
use crate::base::error::bad_input;
use crate::lab::runner::params::{RepsSetting, RunSettings, DEFAULT_REPS, MAX_REPS};

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
    /// `[testbed_defaults]`: keys of a `[[testbed]]` that every testbed has unless it writes
    /// them itself ([`testbeds::with_defaults`]).
    pub(super) testbed_defaults: Option<RawTable>,
    #[serde(default)]
    pub(super) testbed: Vec<RawTable>,
    #[serde(default)]
    pub(super) workload: Vec<RawTable>,
    pub(super) age: Option<RawTable>,
    #[serde(default = "Vec::new")]
    pub(super) question: Vec<Q>,
    /// The other top-level keys: the run settings, under their flags' names.
    #[serde(flatten)]
    settings: BTreeMap<String, toml::Value>,
}

/// The keys of a plan's top level that are the plan's own, [`RawPlan`]'s fields: the others
/// are the run settings, which the command line also takes as flags.
pub(crate) const OWN_KEYS: [&str; 14] = [
    "extends",
    "drop_testbeds",
    "drop_workloads",
    "drop_questions",
    "name",
    "description",
    "cv_target",
    "max_reps",
    "fresh",
    "testbed_defaults",
    "testbed",
    "workload",
    "age",
    "question",
];

/// Parses and validates a plan whose `extends` is resolved (see [`super::parse`]): the one
/// place its parts' faults are located in its text ([`Src::locate`]).
pub(super) fn parse_src(src: &Src, opts: &ParseOptions) -> Result<Plan> {
    plan_of(src, opts).map_err(|e| src.locate(e))
}

/// The plan `src` holds; a fault in it unlocated.
fn plan_of(src: &Src, opts: &ParseOptions) -> Result<Plan> {
    let raw: RawPlan = read_raw(src.text)?;
    let own = read_settings(src, &raw)?;
    let source = src.name;
    let scale_f = opts.scale.unwrap_or(1.0);
    if !(scale_f.is_finite() && scale_f > 0.0) {
        return Err(bad_input(format!(
            "--scale {scale_f} must be a number above 0 (e.g. 0.5, 2, 10)"
        )));
    }

    // Where each entry is: all that the plan's parts keep of its text, located here once
    // (`[testbed_defaults]` keeps each testbed's place).
    let testbeds_at = src.places(&raw.testbed);
    let workloads_at = src.places(&raw.workload);
    let questions_at: Vec<_> = raw
        .question
        .iter()
        .map(|q| question::QuestionAt {
            at: src.loc(q.span().start),
            phase_at: src.loc(question::phase_offset(q)),
        })
        .collect();
    let age_at = raw.age.as_ref().map(|a| (a, src.loc(a.span().start)));
    let age = workloads::parse_age(age_at, scale_f)?;
    let keep_image = workloads::keep_image(raw.age.as_ref())?;
    // The command line's flags over the plan's keys: the one place they meet.
    let given = opts.settings.over(own);
    let reps = parse_reps(&raw, own.reps, given.reps)?;
    let fresh = parse_fresh(&raw)?;
    require_entries(src.name, &raw)?;

    let tables = &testbeds::with_defaults(&raw.testbed, raw.testbed_defaults.as_ref())?;
    let labels = testbeds::testbed_labels(tables, &testbeds_at);
    let workloads = workloads::parse_workloads(
        &raw.workload,
        &workloads_at,
        &labels,
        age.is_some(),
        fresh,
        scale_f,
        reps,
    )?;
    let read = testbeds::parse_testbeds(tables, &testbeds_at, opts)?;
    let mut notes = Vec::new();
    let testbeds = fit::fitted(
        read,
        src.name,
        (scale_f, opts.mem_limit),
        &workloads,
        age.is_some(),
        &mut notes,
    )?;

    let questions = question::resolve(
        &raw.question,
        &questions_at,
        &testbeds,
        &workloads,
        age.as_ref(),
    )?;
    if fresh == Fresh::PerTestbed && !questions.is_empty() {
        room::check_disk_together(
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
        dirty_expire: given.dirty_expire,
        age,
        keep_image,
        questions,
    })
}

/// The plan's TOML as its raw tables; a syntax or type error a fault at its place (about the
/// key written there).
pub(super) fn read_raw<Q: serde::de::DeserializeOwned>(text: &str) -> Result<RawPlan<Q>> {
    toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let mut msg = e.message().trim().replace('\n', " ");
        if text[span.start.min(text.len())..]
            .trim_start()
            .starts_with("[[question]]")
        {
            msg.push_str(&question::missing_field_hint(&msg));
        }
        fault_at_key(span, msg)
    })
}

/// The plan's `fresh`, [`Fresh::PerRun`] when it names none.
fn parse_fresh(raw: &RawPlan) -> Result<Fresh> {
    let Some(s) = &raw.fresh else {
        return Ok(Fresh::PerRun);
    };
    s.get_ref().parse::<Fresh>().map_err(|_| {
        fault(
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
        toml::from_str(src.text).map_err(|e| fault(e.span().unwrap_or(0..0), "", e.message()))?;
    let at = |key: &str| top.iter().find(|(k, _)| k.get_ref() == key);
    let keys = setting_keys();
    if let Some(k) = raw.settings.keys().find(|k| !keys.contains(k)) {
        let quoted = |ks: &mut dyn Iterator<Item = &str>| {
            ks.map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
        };
        return Err(fault(
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
            fault(span, key.as_deref().unwrap_or(""), e.into_inner())
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
fn require_entries(plan_file: &str, raw: &RawPlan) -> Result<()> {
    // At the top of the plan's own file: with `extends`, the text's first line may be the
    // preset's, but what is missing is missing from the plan (its drop_* left nothing).
    let err = |field: &str, msg: String| bad_input(format!("{plan_file}:1:1: {field}: {msg}"));
    if raw.workload.is_empty() {
        return Err(err(
            "workload",
            format!(
                "the plan has no [[workload]]; add one, e.g. [[workload]] kind = \"tree\" (kinds: {})",
                workloads::kind_names()
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

/// The reps of the plan's runs: `given`, the plan's `own` with the command line's `--reps`
/// over it ([`RunSettings::over`]); `cv_target` and `max_reps` go with the plan's own
/// `reps = "auto"`.
fn parse_reps(raw: &RawPlan, own: Option<RepsSetting>, given: Option<RepsSetting>) -> Result<Reps> {
    if own != Some(RepsSetting::Auto) {
        for (what, span) in [
            ("cv_target", raw.cv_target.as_ref().map(|c| c.span())),
            ("max_reps", raw.max_reps.as_ref().map(|c| c.span())),
        ] {
            if let Some(span) = span {
                return Err(fault(
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
            return Err(fault(
                c.span(),
                "cv_target",
                format!("{cv} is out of range; give a fraction between 0 and 1, e.g. 0.05 for 5%"),
            ));
        }
    }
    if let Some(m) = &raw.max_reps {
        let v = *m.get_ref();
        if !(i64::from(AUTO_MIN_REPS)..=i64::from(MAX_REPS)).contains(&v) {
            return Err(fault(
                m.span(),
                "max_reps",
                format!("{v} is out of range; give {AUTO_MIN_REPS} to {MAX_REPS}"),
            ));
        }
        max = v as u32;
    }
    Ok(Reps::Auto { cv, max })
}
/// Parses `text` as the plan file `t.toml`, scaled by `scale`, with the system's temporary
/// directory as its workdir: the plans of the unit tests.
/// The run settings a plan `text` (the file `t.toml`) gives, as its parser reads them.
/// The plan of the unit tests: two testbeds (one with old key names) and a tree.
#[cfg(test)]
pub(crate) const OK: &str = r#"
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

#[cfg(test)]
pub(crate) fn settings_of(text: &str) -> Result<RunSettings> {
    let src = Src::new("t.toml", text);
    read_raw(src.text)
        .and_then(|raw: RawPlan| read_settings(&src, &raw))
        .map_err(|e| src.locate(e))
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

/// The plan tests' two shorthands, shared by the tests of every part of the plan.
#[cfg(test)]
pub(crate) mod testing {
    use super::{parse_test, Plan, Result};

    /// The plan `text` (the file `t.toml`), as written.
    pub(crate) fn p(text: &str) -> Result<Plan> {
        parse_test(text, None)
    }

    /// The whole message with which the plan `text` is refused.
    pub(crate) fn err(text: &str) -> String {
        format!("{:#}", p(text).expect_err("must be refused"))
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{err, p};
    use super::*;
    use crate::workload::ColdMode;

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
    fn auto_reps_and_its_settings() {
        let plan =
            p(&OK.replace("reps = 2", "reps = \"auto\"\ncv_target = 0.1\nmax_reps = 6")).unwrap();
        assert_eq!(plan.reps, Reps::Auto { cv: 0.1, max: 6 });
        assert_eq!(plan.reps.initial(), 3);
        let e = err(&OK.replace("reps = 2", "reps = 2\ncv_target = 0.1"));
        assert!(e.contains("only applies"), "{e}");
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
}
