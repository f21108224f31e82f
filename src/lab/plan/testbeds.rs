//! A plan's `[[testbed]]` entries: each read through the testbed flags' own settings
//! ([`TestbedParams`]: one name, default and parser for a key and its flag), with every error
//! at the key that says the value at fault, and with where each field is written for
//! [`super::fit`], which fits them to the plan's workloads.

use std::collections::HashMap;
use std::ops::Range;

use anyhow::Result;
use toml::Spanned;

use super::fault::{fault, fault_naming, Location};
use super::source::{toml_to_json, RawTable};
use super::{ParseOptions, PlanTestbed};
use crate::base::units::{format_size, parse_size};
use crate::testbed::params::{plan_keys, SIZE_KEY};
use crate::testbed::{FsKind, TestbedParams, TestbedSpec};

/// The keys of a `[[testbed]]` that are not testbed settings ([`TestbedParams`]): which
/// testbed it is (`fs`, `label`) and what only a plan says of it.
const PLAN_TESTBED_KEYS: [&str; 4] = ["fs", "label", "optional", "mem_limit"];

/// The entry of a table written under one of `keys` (a setting and its old names), if any.
fn entry<'a>(
    t: &'a RawTable,
    keys: &[&str],
) -> Option<(&'a Spanned<String>, &'a Spanned<toml::Value>)> {
    t.get_ref()
        .iter()
        .find(|(k, _)| keys.contains(&k.get_ref().as_str()))
}

/// The plan's testbeds as written (labels unique), with where each one's fields are, for
/// [`super::fit::fitted`].
pub(super) fn parse_testbeds(
    raw: &[RawTable],
    places: &[Location],
    opts: &ParseOptions,
) -> Result<(Vec<PlanTestbed>, Vec<FieldSpans>)> {
    let mut testbeds: Vec<PlanTestbed> = Vec::new();
    let mut spans = Vec::new();
    // Each label's entry, so that a repeated label is found without a scan of every entry.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (t, at) in raw.iter().zip(places.iter().cloned()) {
        crate::base::signals::test_pause("plan-entry");
        crate::base::signals::check()?;
        let (tb, size_span) = parse_testbed(t, at, opts)?;
        if let Some(prev) = seen.get(&tb.spec.label).map(|&i| &testbeds[i]) {
            let span = entry(t, &["label"]).map_or(t.span(), |(_, l)| l.span());
            let label = tb.spec.label.clone();
            return Err(fault_naming(span, "label", &prev.at, move |other| {
                format!(
                    "two testbeds are labelled {label:?} (the other at {other}); give each [[testbed]] its own label"
                )
            }));
        }
        spans.push(size_span);
        seen.insert(tb.spec.label.clone(), testbeds.len());
        testbeds.push(tb);
    }
    Ok((testbeds, spans))
}

/// The label each `[[testbed]]` will have (its `label`, or its fs name) and where it is, as
/// far as the raw entries tell; for workload labels, which must differ from them.
pub(super) fn testbed_labels(raw: &[RawTable], places: &[Location]) -> Vec<(String, Location)> {
    raw.iter()
        .zip(places)
        .map(|(t, at)| {
            let label = entry(t, &["label"])
                .or_else(|| entry(t, &["fs"]))
                .and_then(|(_, v)| v.get_ref().as_str())
                .unwrap_or_default()
                .to_string();
            (label, at.clone())
        })
        .collect()
}

/// A size written as a number of bytes or as size text (`"64M"`).
fn size_value(v: &Spanned<toml::Value>, field: &str) -> Result<u64> {
    match v.get_ref() {
        toml::Value::Integer(n) if *n >= 0 => Ok(*n as u64),
        toml::Value::String(s) => parse_size(s).map_err(|e| fault(v.span(), field, e)),
        other => Err(fault(
            v.span(),
            field,
            format!("{other} is not a size; write a byte count or size text like \"64M\""),
        )),
    }
}

/// Where a testbed's size and journal are written (the table when absent), the key its size is
/// written under (its flag's name when absent), and where its memory limit is, for errors
/// about room and memory.
pub(super) struct FieldSpans {
    pub(super) size: Range<usize>,
    pub(super) size_key: String,
    pub(super) journal: Range<usize>,
    /// Where `mem_limit` is written, if it is.
    pub(super) mem_limit: Option<Range<usize>>,
}

/// A plan-only string of a `[[testbed]]` (`fs`, `label`).
fn text_value<'a>(t: &'a RawTable, key: &str) -> Result<Option<&'a Spanned<toml::Value>>> {
    match entry(t, &[key]) {
        Some((_, v)) if v.get_ref().is_str() => Ok(Some(v)),
        Some((_, v)) => Err(fault(
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
    t: &RawTable,
    at: Location,
    opts: &ParseOptions,
) -> Result<(PlanTestbed, FieldSpans)> {
    let fs = fs_of(t)?;
    let label = text_value(t, "label")?.and_then(|l| l.get_ref().as_str().map(String::from));
    let (optional, mem_limit) = plan_only(t)?;
    let mut params = testbed_params(t)?;
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
            fault(
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
            at,
        },
        FieldSpans {
            size: size_at.map_or(t.span(), |(_, v)| v.span()),
            size_key: size_at.map_or(SIZE_KEY.to_string(), |(k, _)| k.get_ref().clone()),
            journal: written(&["journal"]).map_or(t.span(), |(_, v)| v.span()),
            mem_limit: written(&["mem_limit"]).map(|(_, v)| v.span()),
        },
    ))
}

/// A `[[testbed]]`'s `fs`: required, and one of the filesystems fsgauge makes.
fn fs_of(t: &RawTable) -> Result<FsKind> {
    let Some(fs_v) = text_value(t, "fs")? else {
        return Err(fault(
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
        fault(
            fs_v.span(),
            "fs",
            format!(
                "unknown filesystem {fs_name:?}; allowed: {}",
                FsKind::ALL.map(|k| format!("\"{}\"", k.name())).join(", ")
            ),
        )
    })?;
    Ok(fs)
}

/// What only a plan says of a testbed: whether it is `optional`, and its `mem_limit`.
fn plan_only(t: &RawTable) -> Result<(bool, Option<u64>)> {
    let optional = match entry(t, &["optional"]) {
        None => false,
        Some((_, v)) => v.get_ref().as_bool().ok_or_else(|| {
            fault(
                v.span(),
                "optional",
                format!("{} is not true or false", v.get_ref()),
            )
        })?,
    };
    let mem_limit = match entry(t, &["mem_limit"]) {
        Some((_, m)) => {
            let v = size_value(m, "mem_limit")?;
            if v < (16 << 20) {
                return Err(fault(
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
    Ok((optional, mem_limit))
}

/// A key of a testbed table (`table`: `a [[testbed]]`, `[testbed_defaults]`): a plan-only key,
/// or a testbed setting under its flag's name or an old name; anything else is refused at
/// itself, with the keys there are.
fn check_key(k: &Spanned<String>, table: &str) -> Result<()> {
    let key = k.get_ref().as_str();
    let keys = testbed_keys();
    if PLAN_TESTBED_KEYS.contains(&key)
        || keys.iter().any(|a| a == key || plan_keys(a).contains(&key))
    {
        return Ok(());
    }
    Err(fault(
        k.span(),
        key,
        format!(
            "unknown field `{key}` of {table}; allowed: {}, {} (the testbed flags' names with _ for -; the old names {} still work)",
            PLAN_TESTBED_KEYS.join(", "),
            keys.join(", "),
            keys.iter()
                .flat_map(|n| plan_keys(n).iter().skip(1))
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ))
}

/// The plan's `[[testbed]]` tables with its `[testbed_defaults]` under each: every key of the
/// defaults that a testbed does not write itself (under that name or another name of the same
/// setting) becomes the testbed's, with the place the defaults write it, so that an error in
/// it points there. The defaults take the keys of a `[[testbed]]` but `label`, each testbed's
/// own; an unknown key is refused at itself.
pub(super) fn with_defaults(
    testbeds: &[RawTable],
    defaults: Option<&RawTable>,
) -> Result<Vec<RawTable>> {
    let Some(d) = defaults else {
        return Ok(testbeds.to_vec());
    };
    for k in d.get_ref().keys() {
        if k.get_ref() == "label" {
            return Err(fault(
                k.span(),
                "label",
                "labels are each testbed's own (no two testbeds share one): write it in each [[testbed]], not in [testbed_defaults]",
            ));
        }
        check_key(k, "[testbed_defaults]")?;
    }
    let under = |t: &RawTable| {
        let mut table = t.get_ref().clone();
        for (k, v) in d.get_ref() {
            let names = plan_keys(k.get_ref());
            let own = if names.is_empty() {
                entry(t, &[k.get_ref().as_str()])
            } else {
                entry(t, names)
            };
            if own.is_none() {
                table.insert(k.clone(), v.clone());
            }
        }
        Spanned::new(t.span(), table)
    };
    Ok(testbeds.iter().map(under).collect())
}

/// The testbed settings of a `[[testbed]]`: every key but [`PLAN_TESTBED_KEYS`], read as the
/// flags read them; an unknown key fails at itself, a bad value at its value.
fn testbed_params(t: &RawTable) -> Result<TestbedParams> {
    let mut given = serde_json::Map::new();
    for (k, v) in t.get_ref() {
        if PLAN_TESTBED_KEYS.contains(&k.get_ref().as_str()) {
            continue;
        }
        check_key(k, "a [[testbed]]")?;
        given.insert(k.get_ref().clone(), toml_to_json(v.get_ref()));
    }
    serde_path_to_error::deserialize::<_, TestbedParams>(serde_json::Value::Object(given)).map_err(
        |e| {
            let key = e.path().iter().find_map(|seg| match seg {
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                _ => None,
            });
            let at = key.as_deref().and_then(|k| entry(t, &[k]));
            fault(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::plan::parse::testing::{err, p};
    use crate::lab::plan::parse::{parse_test, OK};
    use crate::lab::plan::{parse, Plan};

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
        let samples: [Sample; 15] = [
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
            ("device_transport", "dev", &[("device_model", "ram")]),
            ("device_store", "file", &[("device_model", "ram")]),
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

    /// Two testbeds that say only what differs: the defaults under each.
    const DEFAULTS: &str = r#"[testbed_defaults]
fs = "ext4"
fs_size = "256M"
mount_opts = "data=writeback"
mem_limit = "64M"

[[testbed]]
label = "a"

[[testbed]]
label = "b"
size = "320M"
mount_opts = "data=ordered"
mem_limit = "128M"

[[testbed]]
fs = "xfs"
fs_size = "320M"

[[workload]]
kind = "tree"
dirs = 2
files = 3
file_size = "64K"
"#;

    #[test]
    fn testbed_defaults_go_under_each_testbed_whose_own_keys_win() {
        let plan = p(DEFAULTS).unwrap();
        let got: Vec<(&str, &str, u64, &str, Option<u64>)> = plan
            .testbeds
            .iter()
            .map(|t| {
                let s = &t.spec;
                let fs = s.fs.name();
                (
                    s.label.as_str(),
                    fs,
                    s.size >> 20,
                    s.mount_opts.as_str(),
                    t.mem_limit.map(|m| m >> 20),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a", "ext4", 256, "data=writeback", Some(64)),
                // `size` is `fs_size`'s old name: the testbed's own, over the default's.
                ("b", "ext4", 320, "data=ordered", Some(128)),
                ("xfs", "xfs", 320, "data=writeback", Some(64)),
            ]
        );
        // Each testbed is where its own table is.
        assert_eq!(plan.testbeds[1].at.line, 10);
        // The same plan with every key written in every testbed runs the same testbeds.
        let written = OK.replace("mount = \"data=writeback\"\n", "");
        let a = p(&written).unwrap();
        let b = p(&written.replace("fs = \"ext4\"\n", "").replacen(
            "[[testbed]]",
            "[testbed_defaults]\nfs = \"ext4\"\n\n[[testbed]]",
            1,
        ))
        .unwrap();
        let specs = |p: &Plan| {
            p.testbeds
                .iter()
                .map(|t| t.spec.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(specs(&a), specs(&b));
    }

    /// A default at fault is refused where the defaults write it, as a testbed's own key is.
    #[test]
    fn testbed_defaults_errors_point_at_the_default() {
        let e = err(&DEFAULTS.replace("fs_size = \"256M\"\nmount", "fs_size = \"1M\"\nmount"));
        assert!(
            e.starts_with("t.toml:3:11: fs_size: --fs-size 1M is too small"),
            "{e}"
        );
        let e = err(&DEFAULTS.replace("mem_limit = \"64M\"", "mem_limit = \"1M\""));
        assert!(
            e.starts_with("t.toml:5:13: mem_limit: 1M is too small"),
            "{e}"
        );
        let e = err(&DEFAULTS.replace("mem_limit = \"64M\"", "mem_limits = \"64M\""));
        assert!(
            e.starts_with("t.toml:5:1: mem_limits: unknown field `mem_limits` of [testbed_defaults]; allowed: fs, label"),
            "{e}"
        );
        let e = err(&DEFAULTS.replace("fs = \"ext4\"", "fs = \"ext5\""));
        assert!(
            e.starts_with("t.toml:2:6: fs: unknown filesystem \"ext5\""),
            "{e}"
        );
        let e = err(&DEFAULTS.replace("fs = \"ext4\"", "label = \"all\""));
        assert!(
            e.starts_with("t.toml:2:1: label: labels are each testbed's own"),
            "{e}"
        );
        let e = err(&DEFAULTS.replace("[testbed_defaults]", "testbed_defaults = 3"));
        assert!(e.starts_with("t.toml:1:20:"), "{e}");
    }
}
