//! The `age` workload kind: ages the workload root to each usage checkpoint, one measured
//! phase per checkpoint (`age-25`, `age-50`, … and `churn-1x`, … in churn mode). Each phase's
//! `extra` holds the checkpoint's figures (usage reached, files, bytes, write KiB/s so far,
//! extents per file, layout score, free extents); the result's `layout` holds the full layout
//! and free-space summary of every checkpoint, and the manifest digest of the operations.

use crate::results::tables::{no_tables, Against, KindTables};
use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::engine::{pct_label, AgeMode, AgeParams, Ager, Checkpoint, AGE_OPS};
use crate::measure::{PhaseMeter, Progress};
use crate::results::{Combine, MetricDef};
use crate::workload::{RunContext, Workload};

/// The aging workload (plan kind `age`); its parameters are [`AgeParams`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(transparent)]
pub struct Age(pub AgeParams);

/// The layout record of a checkpoint: the checkpoint, the tree's layout summary and the
/// filesystem's free space (`{"error": …}` where it cannot be read).
pub fn layout_record(cp: &Checkpoint, root: &Path, mountpoint: &Path) -> Result<serde_json::Value> {
    let mut snap = crate::layout::snapshot(root, mountpoint)?;
    snap["checkpoint"] = serde_json::to_value(cp)?;
    Ok(snap)
}

fn num(v: &serde_json::Value, path: &[&str]) -> Option<f64> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_f64()
}

/// The aging checkpoints the runs did not reach: one line per run whose aging ENOSPC stopped
/// short of a checkpoint, with the usage reached (from the phase extras that
/// [`checkpoint_extra`] writes, so aging as a workload, as a plan's `[age]` and in the append
/// study are judged alike). Empty when every checkpoint was reached.
pub fn unreached_checkpoints(results: &[crate::results::RunResult]) -> Vec<String> {
    let mut out = Vec::new();
    for r in results {
        let stopped = r.phases.iter().find(|ph| {
            ph.extra.contains_key("usage_target_pct")
                && ph.extra.get("enospc").is_some_and(|&e| e > 0.0)
        });
        if let Some(ph) = stopped {
            let x = |k: &str| ph.extra.get(k).copied().unwrap_or(0.0);
            out.push(format!(
                "{} rep {}: ENOSPC stopped aging at {:.1}% used, short of the {}% checkpoint ({}); later checkpoints were not run",
                r.testbed.label,
                r.rep,
                x("usage_pct"),
                pct_label(x("usage_target_pct")),
                ph.name
            ));
        }
    }
    out
}

/// [`unreached_checkpoints`] as an error of the measured system (exit 1): the filesystem
/// could not be aged to what was asked. The results themselves are written before this check.
pub fn check_checkpoints_reached(results: &[crate::results::RunResult]) -> Result<()> {
    let missed = unreached_checkpoints(results);
    if missed.is_empty() {
        return Ok(());
    }
    Err(anyhow::Error::new(crate::base::error::SystemFailure(format!(
        "aging did not reach its target: {}; the result files are written; use a lower --usage or a larger {}",
        missed.join("; "),
        crate::testbed::params::SIZE_FLAG
    ))))
}

/// The figures of a checkpoint as phase extras (with the layout record's headline metrics).
pub fn checkpoint_extra(cp: &Checkpoint, record: &serde_json::Value) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    m.insert("usage_target_pct".into(), cp.target_pct);
    m.insert("usage_pct".into(), cp.usage_pct);
    m.insert("usage_error_pct".into(), cp.usage_pct - cp.target_pct);
    m.insert("files".into(), cp.files as f64);
    m.insert("bytes".into(), cp.bytes as f64);
    m.insert("written_bytes".into(), cp.written as f64);
    m.insert("write_kbps".into(), cp.write_kbps());
    m.insert("aging_s".into(), cp.seconds);
    m.insert("age_ops".into(), cp.ops as f64);
    m.insert("enospc".into(), if cp.enospc { 1.0 } else { 0.0 });
    for (k, path) in [
        ("extents_per_file", &["tree", "extents_per_file_mean"][..]),
        ("layout_score", &["tree", "layout_score"][..]),
        (
            "fragmentation_factor",
            &["tree", "fragmentation_factor"][..],
        ),
        ("free_extents", &["free_space", "free_extents"][..]),
        (
            "largest_free_share",
            &["free_space", "largest_free_share"][..],
        ),
    ] {
        if let Some(x) = num(record, path) {
            m.insert(k.into(), x);
        }
    }
    m
}

impl Age {
    /// Ages with measured phases in `ctx`; returns the checkpoints (the study reuses it).
    fn age(&self, ctx: &mut RunContext) -> Result<Vec<Checkpoint>> {
        let p = &self.0;
        let root = ctx.root().to_path_buf();
        let mount = ctx.target().reach();
        let mut ager = Ager::new(p, &root, ctx.seed(), ctx.progress().enabled())?;
        ager.check_targets()?;
        let devices = ctx.target().devices();
        let mut records = Vec::new();
        let mut cps = Vec::new();
        let mut stopped = false;
        for &pct in &p.usage {
            let name = format!("age-{}", pct_label(pct));
            let meter = PhaseMeter::start(&name, &AGE_OPS, &devices, None, &Progress::hidden());
            let mut rec = meter.recorder(0);
            let cp = ager.run_to(pct, &mut rec)?;
            rec.finish();
            let mut phase = meter.finish(vec![rec]);
            let record = layout_record(&cp, &root, &mount)?;
            phase.extra.extend(checkpoint_extra(&cp, &record));
            ctx.push_phase(phase);
            records.push(record);
            if let Some(w) = cp.overshoot() {
                ctx.warn(w);
            }
            let enospc = cp.enospc;
            cps.push(cp);
            if enospc {
                let last = cps.last().expect("just pushed");
                ctx.warn(format!(
                    "ENOSPC at {:.1}% used, before the {}% checkpoint: aging stopped there ({} files, {} bytes); later checkpoints were not reached",
                    last.usage_pct,
                    pct_label(pct),
                    last.files,
                    last.bytes
                ));
                stopped = true;
                break;
            }
        }
        if p.mode == AgeMode::Churn && !stopped {
            let pct = *p.usage.last().expect("validated");
            let steps = p.churn.ceil() as u64;
            for i in 1..=steps {
                let until = (i as f64).min(p.churn);
                let name = format!("churn-{}x", pct_label((until * 100.0).round() / 100.0));
                let meter = PhaseMeter::start(&name, &AGE_OPS, &devices, None, &Progress::hidden());
                let mut rec = meter.recorder(0);
                let cp = ager.churn_step(pct, until, &mut rec)?;
                rec.finish();
                let mut phase = meter.finish(vec![rec]);
                let record = layout_record(&cp, &root, &mount)?;
                phase.extra.extend(checkpoint_extra(&cp, &record));
                phase.extra.insert("churn_multiple".into(), until);
                ctx.push_phase(phase);
                records.push(record);
                let enospc = cp.enospc;
                cps.push(cp);
                if enospc {
                    ctx.warn(format!(
                        "ENOSPC during churn before {until}x of the filesystem size was written; churn stopped there"
                    ));
                    break;
                }
            }
        }
        let last = records.last().cloned().unwrap_or_default();
        ctx.set_layout(serde_json::json!({
            "root": root.display().to_string(),
            "tree": last.get("tree"),
            "free_space": last.get("free_space"),
            "fs_size": ager.fs_size(),
            "checkpoints": records,
            "manifest": { "sha256": ager.digest(), "ops": ager.ops() },
        }));
        Ok(cps)
    }
}

/// What the report draws of aging results: the layout at each checkpoint against the usage
/// reached, one line per testbed (the fragmentation study's graphs).
pub const VIEWS: KindTables = KindTables {
    kind: "age",
    tables: no_tables,
    against: &[Against {
        x: "extra.usage_pct",
        x_name: "usage",
        x_desc: "usage %",
        ys: &[
            ("extra.extents_per_file", "extents per file"),
            ("extra.layout_score", "layout score"),
        ],
    }],
};

/// The figures of an aging checkpoint phase (see [`checkpoint_extra`]).
pub const METRICS: &[MetricDef] = &[
    MetricDef::count("usage_target_pct", "usage target", "%"),
    MetricDef::count("usage_pct", "usage", "%"),
    MetricDef::count("usage_error_pct", "usage off target", "%"),
    MetricDef::count("files", "files", ""),
    MetricDef::count("bytes", "bytes", "B"),
    MetricDef::count("written_bytes", "bytes written", "B"),
    MetricDef::rate("write_kbps", "write rate", "KiB/s"),
    MetricDef::lower("aging_s", "aging time", "s"),
    MetricDef::count("age_ops", "aging operations", ""),
    MetricDef::count("enospc", "ran out of space", ""),
    MetricDef::lower("extents_per_file", "extents per file", "").combine(Combine::Mean),
    MetricDef::higher("layout_score", "layout score", "").combine(Combine::Mean),
    MetricDef::lower("fragmentation_factor", "fragmentation factor", ""),
    MetricDef::count("free_extents", "free extents", ""),
    MetricDef::higher("largest_free_share", "largest free extent share", ""),
    MetricDef::count("churn_multiple", "churn multiple", ""),
];

impl Workload for Age {
    fn metrics(&self) -> &'static [MetricDef] {
        METRICS
    }

    fn kind(&self) -> &'static str {
        "age"
    }

    fn params(&self) -> serde_json::Value {
        serde_json::to_value(&self.0).expect("plain struct serializes")
    }

    fn validate(&self) -> Result<()> {
        self.0.validate()
    }

    fn memory_needed(&self) -> Result<u64, crate::base::units::Overflow> {
        // The tree shape is at most 10^9 files and the block at most 1G (validated), so this
        // fits; checked all the same, as every estimate is.
        self.0
            .tree
            .total_files()
            .checked_mul(16)
            .and_then(|m| m.checked_add(self.0.block))
            .and_then(|m| m.checked_add(4 << 20))
            .ok_or_else(crate::base::units::Overflow::of(
                "age",
                "memory estimate",
                format!("--tree {} --block {}", self.0.tree, self.0.block),
                "--tree or --block",
            ))
    }

    fn run(&self, ctx: &mut RunContext) -> Result<()> {
        self.age(ctx).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::{Age, AgeParams};
    use crate::workload::params::from_flags;
    use crate::workload::registry::find;
    use crate::workload::Workload;

    /// `fsgauge age` flags and a plan's `kind = "age"` table give the same parameters; the
    /// defaults, now written once in the flags, are those the plan and the flags had.
    #[test]
    fn flags_and_plan_give_the_same_age() {
        let age = find("age").unwrap();
        let flags = Age(from_flags::<AgeParams>(&[]).unwrap()).params();
        assert_eq!(flags, (age.build)(serde_json::json!({})).unwrap().params());
        assert_eq!(
            flags,
            serde_json::json!({
                "usage": [25.0, 50.0, 75.0, 99.0], "mode": "fill", "dist": "agrawal",
                "tree": "10x100", "depth_dist": null, "append": 4096, "append_dist": null,
                "prealloc": false, "churn": 3.0, "delete": "oldest", "fallocate_only": false,
                "block": 1 << 20
            })
        );
        let args = [
            "--usage",
            "20, 40.5",
            "--mode",
            "append",
            "--tree",
            "2x30",
            "--append",
            "8K",
            "--prealloc",
            "--churn",
            "0.5x",
            "--delete",
            "random",
            "--block",
            "64K",
            "--depth-dist",
            "poisson:3",
            "--append-dist",
            "fixed:4K",
            "--fallocate-only",
            "--dist",
            "fixed:16K",
        ];
        let table = serde_json::json!({
            "usage": [20, 40.5], "mode": "append", "tree": "2x30", "append": "8K",
            "prealloc": true, "churn": 0.5, "delete": "random", "block": "64K",
            "depth_dist": "poisson:3", "append_dist": "fixed:4K", "fallocate_only": true,
            "dist": "fixed:16K"
        });
        let flags = Age(from_flags::<AgeParams>(&args).unwrap());
        flags.validate().unwrap();
        assert_eq!(flags.params(), (age.build)(table).unwrap().params());
        // A bad value is refused by the flag's parser, naming the flag.
        let e = from_flags::<AgeParams>(&["--churn", "0x"]).unwrap_err();
        assert!(e.to_string().contains("--churn"), "{e}");
        let e = from_flags::<AgeParams>(&["--usage", "25,,50"]).unwrap_err();
        assert!(e.to_string().contains("--usage"), "{e}");
    }

    #[test]
    fn age_and_read_build_from_plan_parameters() {
        let age = find("age").unwrap();
        let w = (age.build)(serde_json::json!({
            "usage": [25, 50.5], "mode": "append", "tree": "2x30", "append": "8K", "prealloc": true
        }))
        .unwrap();
        let p = w.params();
        assert_eq!(p["tree"], "2x30");
        assert_eq!(p["append"], 8192);
        assert_eq!(p["dist"], "agrawal");
        assert_eq!(p["usage"][1], 50.5);
        w.validate().unwrap();
        let e = (age.build)(serde_json::json!({"usage": [25], "tre": "2x3"}))
            .err()
            .unwrap();
        assert!(e.to_string().contains("tre"), "{e}");
        let bad = (age.build)(serde_json::json!({"usage": [120]})).unwrap();
        assert!(bad.validate().unwrap_err().to_string().contains("120"));
        let read = find("read").unwrap();
        let r =
            (read.build)(serde_json::json!({"phases": ["walk", "stat"], "block": "64K"})).unwrap();
        assert_eq!(r.params()["phases"][1], "stat");
        assert_eq!(r.params()["block"], 65536);
        assert!((read.build)(serde_json::json!({"phases": ["sideways"]})).is_err());
    }
}
