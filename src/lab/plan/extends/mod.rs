//! `extends = "PRESET"`: a plan that states only what it changes of a built-in preset (the
//! as-published presets extend their seed presets this way). The rule, as the README's "Plans"
//! gives it:
//!
//! - a top-level key replaces the preset's, but for `name`, which is the plan's own (by default
//!   its file's name); `reps` also drops the preset's `cv_target` and `max_reps`, which go with
//!   its `reps`;
//! - a `[[testbed]]`, `[[workload]]` or `[[question]]` with the label of one of the preset's
//!   (testbed: `label`, else `fs`; workload: `label`, else `kind`; question: `id`) is merged
//!   into it key by key, the plan's keys winning; the others are added after the preset's;
//!   `[age]` and `[testbed_defaults]` are merged key by key (the merged defaults then go under
//!   every testbed, the preset's and the plan's, whose own keys win);
//! - `drop_testbeds`, `drop_workloads` and `drop_questions` list the preset's entries to leave
//!   out, by label (questions by id).
//!
//! The merge is made on the text, line by line: the resolved plan is the preset's lines and the
//! plan's, each `key = value` copied whole with the comment lines right above it, and every line
//! keeps the file and line it was written at ([`Origin`]), so that an error in the resolved
//! plan points into the file that wrote the line at fault. The resolved text is also what
//! `fsgauge presets show` prints: a plan without `extends`, to copy, run and edit.
//!
//! `extends` names a built-in preset, not a file: a plan file stays whole on its own (what a
//! reader opens is what runs, with the preset it names printed by `presets show`), and a chain
//! of presets cannot reach outside the binary. A chain of presets is resolved from the bottom;
//! one that comes back to a preset it passed is refused.

mod layer;

use anyhow::Result;
use toml::Spanned;

use super::fault::fault;
use super::parse::{read_raw, RawPlan};
use super::source::{Origin, RawTable, Src};
use layer::{emit, read_layer, Entry, Layer, List, Piece, LISTS};

/// A plan with its `extends` resolved: one text, and where each of its lines was written.
pub(super) struct Resolved {
    pub(super) text: String,
    pub(super) origins: Vec<Origin>,
}

/// Finds a preset by name: the name it has in messages (`preset NAME`) and its text; or, when
/// there is none of that name, the names there are, for the message.
pub(super) type Lookup<'a> = &'a dyn Fn(&str) -> std::result::Result<(String, String), String>;

/// Resolves the plan's `extends`: `None` when it has none (then it may not drop anything).
/// A fault is located here, in the plan's text, or where a preset's text is read.
pub(super) fn resolve(src: &Src, lookup: Lookup) -> Result<Option<Resolved>> {
    let layer = read_raw(src.text).and_then(|raw: RawPlan<RawTable>| {
        if raw.extends.is_none() {
            return refuse_drops(&raw).map(|()| None);
        }
        layered(src, &raw, lookup, &mut Vec::new()).map(Some)
    });
    Ok(layer.map_err(|e| src.locate(e))?.map(|l| emit(&l)))
}

/// Drops where nothing is extended are refused at their key.
fn refuse_drops(raw: &RawPlan<RawTable>) -> Result<()> {
    for (list, d) in LISTS.iter().zip(drops(raw)) {
        if let Some(d) = d {
            return Err(fault(
                d.span(),
                list.drop_key(),
                "leaves out entries of the preset a plan extends, but this plan extends none; add extends = \"PRESET\" or remove it",
            ));
        }
    }
    Ok(())
}

fn drops<Q>(raw: &RawPlan<Q>) -> [Option<&Spanned<Vec<Spanned<String>>>>; 3] {
    [
        raw.drop_testbeds.as_ref(),
        raw.drop_workloads.as_ref(),
        raw.drop_questions.as_ref(),
    ]
}

/// The plan `src` (read as `raw`) with the presets it extends merged in, from the bottom of the
/// chain up; `chain` holds the presets extended so far, to refuse a cycle.
fn layered(
    src: &Src,
    raw: &RawPlan<RawTable>,
    lookup: Lookup,
    chain: &mut Vec<String>,
) -> Result<Layer> {
    let own = read_layer(src, raw)?;
    let Some(ext) = &raw.extends else {
        refuse_drops(raw)?;
        return Ok(own);
    };
    let name = ext.get_ref();
    if chain.contains(name) {
        return Err(fault(
            ext.span(),
            "extends",
            format!(
                "preset {name:?} makes a cycle ({} -> {name}): a plan cannot extend itself, directly or through the presets it extends",
                chain.join(" -> ")
            ),
        ));
    }
    let (base_name, base_text) = lookup(name).map_err(|names| {
        fault(
            ext.span(),
            "extends",
            format!(
                "no preset {name:?}; extends names a built-in preset ({names}), not a file: to start from a plan file, copy it"
            ),
        )
    })?;
    chain.push(name.clone());
    let base_src = Src::new(&base_name, &base_text);
    // The preset's faults are located in its own text.
    let base = read_raw(base_src.text)
        .and_then(|base_raw: RawPlan<RawTable>| layered(&base_src, &base_raw, lookup, chain))
        .map_err(|e| base_src.locate(e))?;
    merge(base, own, raw, &base_name)
}

/// The preset's layer with the plan's changes.
fn merge(base: Layer, own: Layer, raw: &RawPlan<RawTable>, base_name: &str) -> Result<Layer> {
    // The plan is not the preset: its name is its own (by default its file's). cv_target and
    // max_reps go with the preset's reps = "auto": a plan that sets reps sets them.
    let resets = own.top.iter().any(|p| p.key == "reps");
    let base_top: Vec<Piece> = base
        .top
        .into_iter()
        .filter(|p| p.key != "name")
        .filter(|p| !(resets && ["cv_target", "max_reps"].contains(&p.key.as_str())))
        .collect();
    let age = merge_table(base.age, own.age);
    let defaults = merge_table(base.defaults, own.defaults);
    let mut lists: [Vec<Entry>; 3] = Default::default();
    let lists_in = LISTS.iter().zip(base.lists).zip(own.lists).zip(drops(raw));
    for (out, (((list, base_entries), own_entries), dropped)) in lists.iter_mut().zip(lists_in) {
        let merging = Merging {
            list: *list,
            base_name,
            defaults: defaults.as_ref(),
        };
        *out = merge_list(&merging, base_entries, own_entries, dropped)?;
    }
    refuse_drops_a_question_reads(raw, &lists[2], base_name)?;
    // The plan's name on top, where a reader looks for it.
    let mut top = merge_pieces(base_top, own.top);
    top.sort_by_key(|p| p.key != "name");
    Ok(Layer {
        header: own.header,
        top,
        defaults,
        age,
        lists,
    })
}

/// A table of which a plan has one (`[age]`, `[testbed_defaults]`): the preset's with the
/// plan's keys merged in, or whichever of the two there is.
fn merge_table(base: Option<Entry>, own: Option<Entry>) -> Option<Entry> {
    match (base, own) {
        (Some(b), Some(o)) => Some(merge_entry(b, o)),
        (b, o) => o.or(b),
    }
}

/// What merging one list of entries needs: which list, the plan (for errors at its drops),
/// the preset's name, and the merged `[testbed_defaults]` (a testbed's `fs`, for its label).
struct Merging<'a> {
    list: List,
    base_name: &'a str,
    defaults: Option<&'a Entry>,
}

/// A testbed or workload dropped while a question kept from the preset still names it is
/// refused at the drop, in the plan's own file (the question's line is the preset's, but the
/// plan's drop is what left it without its entry).
fn refuse_drops_a_question_reads(
    raw: &RawPlan<RawTable>,
    questions: &[Entry],
    base_name: &str,
) -> Result<()> {
    let [testbeds, workloads, _] = drops(raw);
    for (list, dropped) in [(List::Testbed, testbeds), (List::Workload, workloads)] {
        for d in dropped.map_or(&[][..], |d| d.get_ref()) {
            let reads = |q: &&Entry| {
                ["baseline", "variant", "testbed", "workload"]
                    .iter()
                    .any(|k| q.get(k) == Some(d.get_ref().as_str()))
            };
            if let Some((i, q)) = questions.iter().enumerate().find(|(_, q)| reads(q)) {
                // A question is named by its id, as drop_questions takes it (`qN`, its place
                // among the preset's questions, when it has none).
                let name = q
                    .get("id")
                    .map(String::from)
                    .unwrap_or_else(|| format!("q{}", i + 1));
                return Err(fault(
                    d.span(),
                    list.drop_key(),
                    format!(
                        "{base_name}'s question {name:?} still reads the {} labelled {:?}; drop the question too (drop_questions = [{name:?}]) or keep the {}",
                        list.table(),
                        d.get_ref(),
                        list.table()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The preset's entries of one list without those dropped, each with the plan's entry of the
/// same label merged in; then the plan's other entries.
fn merge_list(
    m: &Merging,
    base: Vec<Entry>,
    own: Vec<Entry>,
    dropped: Option<&Spanned<Vec<Spanned<String>>>>,
) -> Result<Vec<Entry>> {
    let Merging {
        list,
        base_name,
        defaults,
    } = *m;
    let labels = list.labels(&base, true, defaults);
    let dropped: &[Spanned<String>] = dropped.map_or(&[], |d| d.get_ref());
    for d in dropped {
        if !labels.iter().any(|l| l.as_deref() == Some(d.get_ref())) {
            return Err(fault(
                d.span(),
                list.drop_key(),
                format!(
                    "{base_name} has no {} labelled {:?}; its {}s: {}",
                    list.table(),
                    d.get_ref(),
                    list.table(),
                    labels
                        .iter()
                        .flatten()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    let mut out: Vec<(Option<String>, Entry, bool)> = labels
        .into_iter()
        .zip(base)
        .filter(|(l, _)| !dropped.iter().any(|d| l.as_deref() == Some(d.get_ref())))
        .map(|(l, e)| (l, e, false))
        .collect();
    for (label, e) in list.labels(&own, false, defaults).into_iter().zip(own) {
        // A second entry of the same label is added, for the parser to refuse as a duplicate.
        let same = out
            .iter_mut()
            .find(|(l, _, merged)| label.is_some() && *l == label && !merged);
        match same {
            Some((_, b, merged)) => {
                *b = merge_entry(b.clone(), e);
                *merged = true;
            }
            None => out.push((label, e, true)),
        }
    }
    Ok(out.into_iter().map(|(_, e, _)| e).collect())
}

/// A preset's entry with the plan's: the plan's table line (and its comments, when it has
/// some), the preset's keys in their order with the plan's values, then the plan's new keys.
fn merge_entry(base: Entry, own: Entry) -> Entry {
    Entry {
        comments: if own.comments.is_empty() {
            base.comments
        } else {
            own.comments
        },
        head: own.head,
        pieces: merge_pieces(base.pieces, own.pieces),
    }
}

/// The preset's pieces with the plan's values, then the plan's keys the preset has not.
fn merge_pieces(base: Vec<Piece>, own: Vec<Piece>) -> Vec<Piece> {
    let mut out: Vec<Piece> = base
        .into_iter()
        .map(|b| own.iter().find(|o| o.key == b.key).cloned().unwrap_or(b))
        .collect();
    for o in own {
        if !out.iter().any(|p| p.key == o.key) {
            out.push(o);
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::lab::plan::parse::parse_src;
    use crate::lab::plan::source::Src;
    use crate::lab::plan::{ParseOptions, Plan};

    /// The presets of these tests: `base`, and `a` and `b`, which extend each other.
    const BASE: &str = r#"# The base: its header.
name = "base"
reps = "auto"
max_reps = 6
cold = "drop"

[[testbed]]
label = "one"
fs = "ext4"
fs_size = "256M"
mount_opts = "data=ordered"
journal = "ram:16M"

[[testbed]]
fs = "xfs"
fs_size = "320M"

[[testbed]]
label = "three"
fs = "ext4"
fs_size = "256M"

# The tree.
[[workload]]
kind = "tree"
dirs = 2
files = 3
file_size = "64K"

[[workload]]
kind = "tio"
label = "io"
threads = [1]
mode = "seqwrite"
file_size = "1M"

[age]
mode = "fill"
usage = [50.0]

[[question]]
id = "q-create"
baseline = "one"
variant = "xfs"
workload = "tree"
phase = "create"
metric = "elapsed"
published = 0.5
"#;

    /// A preset whose testbeds say only what differs from its `[testbed_defaults]`.
    const DEFAULTS: &str = r#"# Defaults.
[testbed_defaults]
fs = "ext4"
fs_size = "256M"
journal = "ram:16M"

[[testbed]]
label = "one"

[[testbed]]
label = "two"
mount_opts = "data=journal"

[[workload]]
kind = "tree"
dirs = 2
files = 3
file_size = "64K"
"#;

    /// The preset's defaults, then the plan's (key by key), go under every testbed, the
    /// preset's and the plan's; a testbed's own key wins over both; an error in a default
    /// points at the file that wrote it.
    #[test]
    fn testbed_defaults_merge_through_extends() {
        let mine = "extends = \"defaults\"\n\n[testbed_defaults]\nsize = \"320M\"\n\n[[testbed]]\nlabel = \"two\"\njournal = \"ram:32M\"\n\n[[testbed]]\nlabel = \"three\"\nmount_opts = \"noatime\"\n";
        let merged = plan(mine).unwrap();
        let got: Vec<(&str, u64, u64, &str)> = merged
            .testbeds
            .iter()
            .map(|t| {
                let s = &t.spec;
                let journal = s.journal.map_or(0, |j| j.size >> 20);
                (
                    s.label.as_str(),
                    s.size >> 20,
                    journal,
                    s.mount_opts.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("one", 320, 16, ""),
                ("two", 320, 32, "data=journal"),
                ("three", 320, 16, "noatime")
            ]
        );
        let r = resolved(mine).unwrap();
        assert_eq!(
            r.text.matches("[testbed_defaults]").count(),
            1,
            "{}",
            r.text
        );
        assert!(
            r.text
                .contains("[testbed_defaults]\nfs = \"ext4\"\nsize = \"320M\"\njournal"),
            "{}",
            r.text
        );
        // A preset's default made wrong by the plan's change is refused where the preset
        // writes it; the plan's own default, where the plan does.
        let e = refused("extends = \"defaults\"\n\n[[testbed]]\nlabel = \"one\"\nfs = \"ext2\"\n");
        assert!(
            e.starts_with("preset defaults:5:11: journal: --journal"),
            "{e}"
        );
        let e = refused("extends = \"defaults\"\n\n[testbed_defaults]\nfs_size = \"1M\"\n");
        assert!(e.starts_with("t.toml:4:11: fs_size:"), "{e}");
        // A testbed without label or fs is named by the defaults' fs.
        let unlabelled =
            plan("extends = \"defaults\"\n\n[[testbed]]\nmount_opts = \"noatime\"\n").unwrap();
        assert_eq!(unlabelled.testbeds[2].spec.label, "ext4");
    }

    fn lookup(name: &str) -> std::result::Result<(String, String), String> {
        let text = match name {
            "base" => BASE,
            "a" => "extends = \"b\"\nname = \"a\"\n",
            "b" => "# b\nextends = \"a\"\nname = \"b\"\n",
            "self" => "extends = \"self\"\n",
            "broken" => "reps = 3\n[[testbed]\nfs = \"ext4\"\n",
            "defaults" => DEFAULTS,
            _ => return Err("base, a, b, self, broken, defaults".into()),
        };
        Ok((format!("preset {name}"), text.to_string()))
    }

    fn resolved(text: &str) -> Result<Resolved> {
        resolve(&Src::new("t.toml", text), &lookup).map(|r| r.expect("extends"))
    }

    fn plan(text: &str) -> Result<Plan> {
        let r = resolved(text)?;
        let src = Src::with_origins("t.toml", &r.text, Some(&r.origins));
        let opts = ParseOptions {
            workdir: Some(std::env::temp_dir()),
            ..Default::default()
        };
        parse_src(&src, &opts)
    }

    fn refused(text: &str) -> String {
        let e = plan(text).expect_err("must be refused");
        assert_eq!(crate::base::error::exit_code(&e), 2, "{e:#}");
        format!("{e:#}")
    }

    /// A plan that extends `base` and changes a little of everything.
    const MINE: &str = r#"# Mine: only what changes.
extends = "base"
name = "mine"
cold = "remount"
drop_testbeds = ["three"]

[[testbed]]
label = "one"
size = "512M"
mount_opts = "data=writeback"

[[testbed]]
fs = "xfs"
mount_opts = "noatime"

[[testbed]]
label = "four"
fs = "ext2"
fs_size = "256M"

[[workload]]
kind = "tree"
files = 5

[age]
usage = [60.0]

[[question]]
id = "q-create"
published = 0.25

[[question]]
id = "q-new"
baseline = "one"
variant = "four"
workload = "io"
phase = "seqwrite-4K-t1"
metric = "mb_per_s"
"#;

    #[test]
    fn the_plan_s_keys_replace_the_preset_s_and_entries_merge_by_label() {
        let text = MINE;
        let plan = plan(text).unwrap();
        // Top-level: replaced (cold), kept (reps, max_reps), new (name).
        assert_eq!((plan.name.as_str(), plan.cold.name()), ("mine", "remount"));
        assert_eq!(plan.reps, crate::lab::plan::Reps::Auto { cv: 0.05, max: 6 });
        // Testbeds: "three" dropped, "one" and "xfs" merged key by key (`size` is
        // `fs_size`'s old name, so it replaces it), "four" added at the end.
        let tb: Vec<(&str, u64, &str)> = plan
            .testbeds
            .iter()
            .map(|t| {
                (
                    t.spec.label.as_str(),
                    t.spec.size >> 20,
                    t.spec.mount_opts.as_str(),
                )
            })
            .collect();
        assert_eq!(
            tb,
            [
                ("one", 512, "data=writeback"),
                ("xfs", 320, "noatime"),
                ("four", 256, "")
            ]
        );
        assert!(
            plan.testbeds[0].spec.journal.is_some(),
            "the preset's journal stays"
        );
        // Workloads: the unlabelled tree merged by its kind, io kept as it was.
        let params = plan.workloads[0].workload.params();
        assert_eq!(
            (params["dirs"].clone(), params["files"].clone()),
            (2.into(), 5.into())
        );
        assert_eq!(plan.workloads.last().unwrap().label, "io");
        let age = plan.age.unwrap().workload.params();
        assert_eq!(
            (age["mode"].clone(), age["usage"].clone()),
            ("fill".into(), serde_json::json!([60.0]))
        );
        // Questions: merged by id, then the new one.
        let q: Vec<(&str, Option<f64>, &str)> = plan
            .questions
            .iter()
            .map(|q| {
                (
                    q.question.id.as_str(),
                    q.question.published,
                    q.question.variant.as_str(),
                )
            })
            .collect();
        assert_eq!(
            q,
            [("q-create", Some(0.25), "xfs"), ("q-new", None, "four")]
        );
        // Each entry is where its table line is: the plan's, or the preset's when the plan
        // does not name it.
        assert_eq!(plan.testbeds[0].at.to_string(), "t.toml:7:1");
        assert_eq!(
            plan.workloads.last().unwrap().at.to_string(),
            "preset base:30:1"
        );
    }

    #[test]
    fn the_resolved_text_is_the_plan_whole_under_its_own_header() {
        let r = resolved("# Mine.\nextends = \"base\"\nmax_reps = 3\n\n[[workload]]\nlabel = \"io\"\nfile_size = \"2M\"\n").unwrap();
        assert!(
            r.text.starts_with("# Mine.\nreps = \"auto\"\n"),
            "{}",
            r.text
        );
        assert!(
            !r.text.contains("extends") && !r.text.contains("The base"),
            "{}",
            r.text
        );
        assert!(
            r.text.contains("max_reps = 3\ncold = \"drop\"\n"),
            "{}",
            r.text
        );
        assert!(
            r.text
                .contains("\n# The tree.\n[[workload]]\nkind = \"tree\"\n"),
            "{}",
            r.text
        );
        assert!(
            r.text.contains(
                "label = \"io\"\nthreads = [1]\nmode = \"seqwrite\"\nfile_size = \"2M\"\n"
            ),
            "{}",
            r.text
        );
        assert_eq!(r.origins.len(), r.text.lines().count());
        let at = |needle: &str| {
            let i = r.text.lines().position(|l| l == needle).unwrap();
            let o = &r.origins[i];
            format!("{}:{}", o.file, o.line)
        };
        assert_eq!(at("file_size = \"2M\""), "t.toml:7");
        assert_eq!(at("mode = \"seqwrite\""), "preset base:34");
        // The resolved text is a plan on its own, the same as the plan that extends.
        let opts = ParseOptions {
            workdir: Some(std::env::temp_dir()),
            ..Default::default()
        };
        let whole = crate::lab::plan::parse(&r.text, "whole.toml", &opts).unwrap();
        let a = plan("# Mine.\nextends = \"base\"\nmax_reps = 3\n\n[[workload]]\nlabel = \"io\"\nfile_size = \"2M\"\n").unwrap();
        let hashes = |p: &Plan| -> Vec<String> {
            crate::lab::plan::matrix(p)
                .runs
                .iter()
                .map(|r| r.hash.clone())
                .collect()
        };
        assert_eq!(hashes(&whole), hashes(&a));
    }

    #[test]
    fn reps_takes_the_preset_s_auto_settings_with_it_and_the_name_is_the_plan_s() {
        let plan = plan("extends = \"base\"\nreps = 2\n").unwrap();
        assert_eq!(plan.reps, crate::lab::plan::Reps::Fixed(2));
        // The name is not the preset's: the plan's file's, when it gives none.
        assert_eq!(plan.name, "t");
        // Without reps, the preset's max_reps stays and is the plan's to change.
        let plan = plan_max("extends = \"base\"\nmax_reps = 9\n");
        assert_eq!(plan, 9);
    }

    fn plan_max(text: &str) -> u32 {
        plan(text).unwrap().reps.max()
    }

    #[test]
    fn errors_point_into_the_file_that_wrote_the_line() {
        // In the plan: its own line and column.
        let e = refused("extends = \"base\"\n\n[[testbed]]\nlabel = \"one\"\nfs_size = \"1M\"\n");
        assert!(
            e.starts_with("t.toml:5:11: fs_size:") && e.contains("too small"),
            "{e}"
        );
        let e = refused("extends = \"base\"\ncolde = 1\n");
        assert!(
            e.starts_with("t.toml:2:1: colde: unknown field `colde`"),
            "{e}"
        );
        // A new question missing a field: at the plan's table, with the hint.
        let e = refused("extends = \"base\"\n\n[[question]]\nid = \"new\"\nbaseline = \"one\"\nvariant = \"xfs\"\n");
        assert!(
            e.starts_with("t.toml:3:1:") && e.contains("missing field `metric`"),
            "{e}"
        );
        // In the preset: a key the plan's change made wrong is pointed at where the preset
        // writes it (an external journal on ext2), naming the preset.
        let e = refused("extends = \"base\"\n\n[[testbed]]\nlabel = \"one\"\nfs = \"ext2\"\n");
        assert!(
            e.starts_with("preset base:12:11: journal: --journal"),
            "{e}"
        );
        // One entry naming another in the other file says which file.
        let e = refused("extends = \"base\"\n\n[[testbed]]\nlabel = \"io\"\nfs = \"ext4\"\nfs_size = \"256M\"\n");
        assert!(
            e.starts_with("preset base:32:9: [[workload]] field `label`: \"io\" is also the label of the testbed at line 3 of t.toml"),
            "{e}"
        );
        // A syntax error in the preset itself is the preset's.
        let e = refused("extends = \"broken\"\n");
        assert!(e.starts_with("preset broken:2:"), "{e}");
    }

    #[test]
    fn an_unknown_preset_and_a_cycle_are_refused_at_extends() {
        let e = refused("name = \"x\"\nextends = \"nope\"\n");
        assert!(
            e.starts_with("t.toml:2:11: extends: no preset \"nope\"; extends names a built-in preset (base, a, b, self, broken, defaults), not a file"),
            "{e}"
        );
        let e = refused("extends = \"a\"\n");
        assert!(
            e.starts_with("preset b:2:11: extends: preset \"a\" makes a cycle (a -> b -> a)"),
            "{e}"
        );
        let e = refused("extends = \"self\"\n");
        assert!(
            e.contains("preset \"self\" makes a cycle (self -> self)"),
            "{e}"
        );
    }

    #[test]
    fn drops_name_entries_of_the_preset() {
        let e = refused("extends = \"base\"\ndrop_workloads = [\"io\", \"trees\"]\n");
        assert!(
            e.starts_with("t.toml:2:25: drop_workloads: preset base has no workload labelled \"trees\"; its workloads: tree, io"),
            "{e}"
        );
        let plan = plan(
            "extends = \"base\"\ndrop_workloads = [\"io\"]\ndrop_questions = [\"q-create\"]\n",
        )
        .unwrap();
        assert_eq!(plan.workloads.len(), 1);
        assert!(plan.questions.is_empty());
        // Without extends there is nothing to drop.
        let e = crate::lab::plan::parse_test(
            &BASE.replace(
                "name = \"base\"",
                "name = \"base\"\ndrop_testbeds = [\"one\"]",
            ),
            None,
        )
        .unwrap_err();
        assert!(
            format!("{e:#}").starts_with("t.toml:3:17: drop_testbeds: leaves out entries of the preset a plan extends, but this plan extends none"),
            "{e:#}"
        );
    }

    #[test]
    fn dropping_a_testbed_a_question_reads_names_the_question_as_drop_questions_takes_it() {
        let e = refused("extends = \"base\"\ndrop_testbeds = [\"one\"]\n");
        assert!(
            e.contains("base's question \"q-create\" still reads the testbed labelled \"one\"; drop the question too (drop_questions = [\"q-create\"])"),
            "{e}"
        );
        // The advice, followed, is taken.
        let plan = plan(
            "extends = \"base\"\ndrop_testbeds = [\"one\"]\ndrop_questions = [\"q-create\"]\n",
        )
        .unwrap();
        assert!(plan.questions.is_empty());
        assert_eq!(plan.testbeds.len(), 2);
    }

    #[test]
    fn an_entry_written_inline_is_refused_where_it_is() {
        let e = refused("extends = \"base\"\ntestbed = [{ label = \"one\", fs_size = \"1G\" }]\n");
        assert!(
            e.starts_with("t.toml:2:12: [[testbed]]: a plan that extends a preset, or is extended, is merged line by line"),
            "{e}"
        );
        // Two entries of one label: the second is added, for the parser to refuse.
        let e = refused("extends = \"base\"\n[[testbed]]\nlabel = \"one\"\n[[testbed]]\nlabel = \"one\"\nfs = \"ext4\"\n");
        assert!(e.contains("two testbeds are labelled \"one\""), "{e}");
    }
}
