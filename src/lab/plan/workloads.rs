//! A plan's `[[workload]]` entries and its `[age]`: each built as the workload's own command
//! line builds it (the registry's serde struct, under its flags' names), scaled, labelled,
//! counted against the plan's caps and split into its sweep's cells when each cell is a run
//! of its own, with every error at the parameter at fault.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use anyhow::Result;
use toml::Spanned;

use super::fault::{fault, fault_naming, Location};
use super::limits::Tally;
use super::source::{toml_to_json, RawTable};
use super::{scale, Fresh, PlanWorkload, Reps};
use crate::workload::registry::{self, sweep};
use crate::workload::Workload;

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
pub(super) fn keep_image(age: Option<&RawTable>) -> Result<bool> {
    Ok(switch(age, "[age] keep_image")?.is_some_and(|(on, _)| on))
}

/// The `keep_image` switch of `table`: its value and where it is written, `None` when
/// absent; anything but a boolean is refused at its value, as `label`.
fn switch(table: Option<&RawTable>, label: &str) -> Result<Option<(bool, Range<usize>)>> {
    let Some((k, v)) =
        table.and_then(|a| a.get_ref().iter().find(|(k, _)| k.get_ref() == KEEP_IMAGE))
    else {
        return Ok(None);
    };
    match v.get_ref() {
        toml::Value::Boolean(b) => Ok(Some((*b, k.span()))),
        other => Err(fault(
            v.span(),
            label,
            format!("must be true or false, not {other}"),
        )),
    }
}

/// An `append` workload's `keep_image` switch. Refused in a plan with `[age]`: its runs start
/// from the `[age]` aging, which `[age] keep_image` keeps.
fn append_keep_image(w: &RawTable, has_age: bool) -> Result<bool> {
    let label = "[[workload]] append field `keep_image`";
    match switch(Some(w), label)? {
        Some((true, at)) if has_age => Err(fault(
            at,
            label,
            "keeps the append test's own agings, but this plan ages every filesystem first with [age]; keep that aging with [age] keep_image = true instead, or leave out [age]",
        )),
        Some((on, _)) => Ok(on),
        None => Ok(false),
    }
}

/// The plan's workloads, labelled, each split into its sweep's cells when every run gets a
/// fresh testbed.
/// The sweeps' cells and the plan's runs are counted (see [`super::limits`]) before any
/// sweep is split.
/// `[age]`: the parameters of the `age` workload, run on each run's filesystem before its
/// workload (the workload then finds the filesystem aged).
/// `age`: the table and where it is.
pub(super) fn parse_age(
    age: Option<(&RawTable, Location)>,
    scale_f: f64,
) -> Result<Option<PlanWorkload>> {
    let Some((a, at)) = age else {
        return Ok(None);
    };
    let kind = registry::find("age").expect("the age workload is registered");
    build_workload(a, at, kind, scale_f, "[age]").map(Some)
}

/// The label of every `[[workload]]` entry: its `label`, or its kind, with `#N` (1-based among
/// the entries of that kind) when the kind appears more than once. Labels are unique and are
/// not testbed labels (a question's baseline and variant must say which they name).
fn workload_labels(
    entries: &[RawTable],
    places: &[Location],
    testbed_labels: &[(String, Location)],
) -> Result<Vec<String>> {
    let kind_of = |w: &RawTable| -> Option<String> {
        w.get_ref()
            .iter()
            .find(|(k, _)| k.get_ref() == "kind")
            .and_then(|(_, v)| v.get_ref().as_str().map(str::to_string))
    };
    let kinds: Vec<Option<String>> = entries.iter().map(kind_of).collect();
    // How many entries each kind has, and the running count that numbers them (`tree#2`);
    // the labels given so far and the testbeds' labels, by name: each entry is looked up,
    // never compared with every other, so that a plan's reading stays linear in its size.
    let mut of_kind: HashMap<Option<&str>, usize> = HashMap::new();
    for k in &kinds {
        *of_kind.entry(k.as_deref()).or_default() += 1;
    }
    let mut numbered: HashMap<Option<&str>, usize> = HashMap::new();
    let testbed_at: HashMap<&str, &Location> = testbed_labels
        .iter()
        .rev()
        .map(|(t, at)| (t.as_str(), at))
        .collect();
    let mut given: HashMap<String, usize> = HashMap::new();
    let mut labels: Vec<String> = Vec::new();
    for (i, w) in entries.iter().enumerate() {
        crate::base::signals::check()?;
        let n = numbered.entry(kinds[i].as_deref()).or_default();
        *n += 1;
        let n = *n;
        let written = w.get_ref().iter().find(|(k, _)| k.get_ref() == "label");
        let (label, span) = match written {
            Some((_, v)) => {
                let Some(text) = v.get_ref().as_str() else {
                    return Err(fault(
                        v.span(),
                        "[[workload]] field `label`",
                        "must be a string naming the entry, e.g. label = \"deep-4K\"",
                    ));
                };
                if text.trim().is_empty() || text.chars().any(char::is_control) {
                    return Err(fault(
                        v.span(),
                        "[[workload]] field `label`",
                        format!("{text:?} is not a usable label; give a short name without control characters, e.g. label = \"deep-4K\""),
                    ));
                }
                (text.to_string(), v.span())
            }
            None => {
                let kind = kinds[i].clone().unwrap_or_default();
                let label = if of_kind[&kinds[i].as_deref()] > 1 {
                    format!("{kind}#{n}")
                } else {
                    kind
                };
                (label, w.span())
            }
        };
        if let Some(&j) = given.get(&label) {
            return Err(fault_naming(
                span,
                "[[workload]] field `label`",
                &places[j],
                move |other| {
                    format!(
                    "two workloads are labelled {label:?} (the other at {other}); give each [[workload]] its own label = \"...\""
                )
                },
            ));
        }
        if let Some(at) = testbed_at.get(label.as_str()) {
            return Err(fault_naming(
                span,
                "[[workload]] field `label`",
                at,
                move |other| {
                    format!(
                    "{label:?} is also the label of the testbed at {other}; a question's baseline and variant must name one or the other: give this [[workload]] another label = \"...\""
                )
                },
            ));
        }
        given.insert(label.clone(), i);
        labels.push(label);
    }
    Ok(labels)
}

/// `testbeds` are the labels of the plan's `[[testbed]]` tables and where they are (workload
/// labels must differ from them; their count counts runs); `aged`: the plan has an `[age]`.
pub(super) fn parse_workloads(
    raw: &[RawTable],
    places: &[Location],
    testbeds: &[(String, Location)],
    aged: bool,
    fresh: Fresh,
    scale_f: f64,
    reps: Reps,
) -> Result<Vec<PlanWorkload>> {
    let labels = workload_labels(raw, places, testbeds)?;
    let mut tally = Tally::new(testbeds.len(), reps);
    let mut built = Vec::with_capacity(raw.len());
    for ((w, label), at) in raw.iter().zip(labels).zip(places.iter().cloned()) {
        crate::base::signals::check()?;
        let mut pw = parse_workload(w, at, scale_f)?;
        pw.label = label;
        if pw.kind == APPEND {
            pw.keep_image = append_keep_image(w, aged)?;
        }
        let split = fresh == Fresh::PerRun && sweep::splits(&*pw.workload);
        tally.add(w.span(), &*pw.workload, split)?;
        built.push((w, pw, split));
    }
    let mut workloads = Vec::new();
    for (w, pw, split) in built {
        crate::base::signals::check()?;
        if split {
            workloads.extend(split_cells(w, pw)?);
        } else {
            workloads.push(pw);
        }
    }
    Ok(workloads)
}

pub(super) fn kind_names() -> String {
    registry::kinds()
        .iter()
        .map(|k| k.name)
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse_workload(w: &RawTable, at: Location, scale_f: f64) -> Result<PlanWorkload> {
    let table = w.get_ref();
    let Some((_, kind_v)) = table.iter().find(|(k, _)| k.get_ref() == "kind") else {
        return Err(fault(
            w.span(),
            "kind",
            format!(
                "this [[workload]] has no kind; add kind = \"...\" (kinds: {})",
                kind_names()
            ),
        ));
    };
    let toml::Value::String(kind_name) = kind_v.get_ref() else {
        return Err(fault(
            kind_v.span(),
            "kind",
            format!("must be a string naming a workload kind: {}", kind_names()),
        ));
    };
    let Some(kind) = registry::find(kind_name) else {
        return Err(fault(
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
    build_workload(w, at, kind, scale_f, "[[workload]]")
}

/// Builds a workload of `kind` from a table's fields (`kind` itself skipped), with errors that
/// point at the field; `what` names the table in messages (`[[workload]]`, `[age]`).
fn build_workload(
    w: &RawTable,
    place: Location,
    kind: &'static registry::WorkloadKind,
    scale_f: f64,
    what: &str,
) -> Result<PlanWorkload> {
    let table = w.get_ref();
    let ranks = ranks(w, kind, what)?;
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
        check_exercise_file(&fields, &field_label)?;
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
            return Err(fault(span, &label, format!("{}{scaled_note}", e.msg)));
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
            return Err(fault(
                span,
                &format!("{what} {} fields {}", kind.name, names.join(" and ")),
                format!("{e}{scaled_note}"),
            ));
        }
        let (span, label) = at(crate::base::error::bad_field(&e), false);
        return Err(fault(span, &label, format!("{e}{scaled_note}")));
    }
    // Estimates over 64 bits are refused here, at the workload's table, so nothing later (the
    // testbed fit, --dry-run's estimate, the runs) sees a wrapped figure.
    if let Err(e) = workload
        .space_needed()
        .and_then(|_| workload.memory_needed())
    {
        return Err(fault(
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
        at: place,
        keep_image: false,
    })
}

/// `ranks` of a workload's table: it documents the MPI job the workload is meant for and is not
/// a workload parameter; a whole number from 1 to 1,000,000 when given.
fn ranks(w: &RawTable, kind: &'static registry::WorkloadKind, what: &str) -> Result<Option<u32>> {
    let Some((k, v)) = w.get_ref().iter().find(|(k, _)| k.get_ref() == "ranks") else {
        return Ok(None);
    };
    match v.get_ref().as_integer() {
        Some(n) if (1..=1_000_000).contains(&n) => Ok(Some(n as u32)),
        _ => Err(fault(
            v.span(),
            &format!("{what} {} field `{}`", kind.name, k.get_ref()),
            "must be a whole number of MPI ranks, 1 or more (e.g. ranks = 16)",
        )),
    }
}

/// A plan's workloads run on its testbeds: the exerciser's `file` is a name on the testbed,
/// never a path on the host (as `fsgauge exercise --fs` refuses one).
fn check_exercise_file(
    fields: &[(&Spanned<String>, &Spanned<toml::Value>)],
    field_label: &dyn Fn(&str) -> String,
) -> Result<()> {
    let Some((k, v)) = fields.iter().find(|(k, _)| k.get_ref() == "file") else {
        return Ok(());
    };
    match v.get_ref() {
        toml::Value::String(f) if f.contains('/') => Err(fault(
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
fn split_cells(w: &RawTable, pw: PlanWorkload) -> Result<Vec<PlanWorkload>> {
    if !sweep::splits(&*pw.workload) {
        return Ok(vec![pw]);
    }
    let cells = sweep::cells(&*pw.workload)
        .map_err(|e| fault(w.span(), &format!("[[workload]] {}", pw.kind), e))?;
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

#[cfg(test)]
mod tests {
    use crate::lab::plan::parse::testing::{err, p};
    use crate::lab::plan::parse::OK;

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
}
