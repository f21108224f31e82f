//! The append test of the journaling-filesystem fragmentation project (seed study 3,
//! Loizides): per filesystem, make a testbed, create N×C files and append to them round-robin
//! (fixed append size, optionally preallocating first) until each usage checkpoint; at each
//! checkpoint copy the tree onto a freshly made testbed of the same size and options (the
//! study's `cp -R . /partition2`, here fsgauge's own copy), then measure both: block layout
//! (extents per file, layout score, fragmentation factor) and the read test (walk, random,
//! block order, stat), each after a cold cache.
//!
//! One result per filesystem and append size. Its phases are `age-P`, `copy-P`,
//! `aged-P-walk`, `fresh-P-walk`, …; `layout.rows` holds the table the study plotted (write
//! KiB/s aging vs copying, read and random read of both and aged/fresh %, files stat'ed per
//! second, fragmentation of both, runtimes) and `layout.checkpoints` the full layout and
//! free-space summaries of both trees.

use std::path::Path;
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::age::copy::{copy_tree, COPY_OPS};
use crate::age::{
    checkpoint_extra, layout_record, pct_label, AgeMode, AgeParams, Ager, TreeShape, AGE_OPS,
};
use crate::error::bad_input;
use crate::measure::{PhaseMeter, Progress};
use crate::results::MetricDef;
use crate::results::{write_result, Conditions, PhaseResult, RunRecord, RunResult, WorkloadInfo};
use crate::testbed::{preflight, Testbed, TestbedSpec};
use crate::workload::readtest::{ReadPhase, ReadTest};
use crate::workload::{ColdMode, RunContext, Target, Workload};

/// The study's parameters.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AppendStudy {
    /// Testbeds to compare (kind, size, options); one aged and one fresh of each.
    pub testbeds: Vec<TestbedSpec>,
    /// Usage checkpoints, percent, ascending.
    pub usage: Vec<f64>,
    /// Append sizes; one study run per size.
    pub append: Vec<u64>,
    /// Files in total, spread over `dirs` directories.
    pub files: u64,
    pub dirs: u64,
    pub prealloc: bool,
    pub seed: u64,
    /// Read phases run on both trees.
    pub read_phases: Vec<ReadPhase>,
}

/// One checkpoint of the study: the row of the study's graphs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Row {
    pub usage_target_pct: f64,
    pub usage_pct: f64,
    pub files: u64,
    pub bytes: u64,
    /// Write KiB/s of aging so far (appended bytes / aging time) and of the copy.
    pub write_kbps_aging: f64,
    pub write_kbps_copy: f64,
    /// Walk read KiB/s (read time only) of aged and fresh, and aged/fresh × 100.
    pub read_kbps_aged: Option<f64>,
    pub read_kbps_fresh: Option<f64>,
    pub read_pct: Option<f64>,
    /// Walk KiB/s counting the whole walk.
    pub walk_kbps_aged: Option<f64>,
    pub walk_kbps_fresh: Option<f64>,
    /// Random-order read KiB/s (read time only).
    pub random_kbps_aged: Option<f64>,
    pub random_kbps_fresh: Option<f64>,
    pub random_pct: Option<f64>,
    /// Block-order read KiB/s (read time only).
    pub blockorder_kbps_aged: Option<f64>,
    pub blockorder_kbps_fresh: Option<f64>,
    /// Files stat'ed per second during the walk (time outside read(2)).
    pub stat_per_s_aged: Option<f64>,
    pub stat_per_s_fresh: Option<f64>,
    pub extents_per_file_aged: Option<f64>,
    pub extents_per_file_fresh: Option<f64>,
    pub layout_score_aged: Option<f64>,
    pub layout_score_fresh: Option<f64>,
    pub fragmentation_factor_aged: Option<f64>,
    pub fragmentation_factor_fresh: Option<f64>,
    /// Seconds: aging to this checkpoint plus the read tests; copying plus the read tests.
    pub runtime_aged_s: f64,
    pub runtime_fresh_s: f64,
}

fn get(v: &serde_json::Value, a: &str, b: &str) -> Option<f64> {
    v.get(a)?.get(b)?.as_f64()
}

/// The figures of the study's phases: aging checkpoints and the copy (the age workload's
/// declarations), and the read passes over the aged tree and its copy (the read workload's).
fn declared_metrics() -> Vec<MetricDef> {
    let mut out: Vec<MetricDef> = Vec::new();
    for m in crate::age::workload::METRICS
        .iter()
        .chain(crate::workload::readtest::METRICS)
    {
        if !out.iter().any(|o| o.key == m.key) {
            out.push(m.clone());
        }
    }
    out
}

fn extra(phases: &[PhaseResult], name: &str, key: &str) -> Option<f64> {
    phases
        .iter()
        .find(|p| p.name == name)
        .and_then(|p| p.extra.get(key).copied())
}

fn pct(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b * 100.0),
        _ => None,
    }
}

impl AppendStudy {
    /// Checks everything before any testbed is made. Errors are bad input.
    pub fn check(&self) -> Result<()> {
        if !nix::unistd::geteuid().is_root() {
            return Err(bad_input(
                "the append study builds testbeds and drops caches: run it as root",
            ));
        }
        if self.testbeds.is_empty() || self.append.is_empty() {
            return Err(bad_input("give at least one --fs and one --append size"));
        }
        if self.dirs == 0 || self.files < self.dirs || self.files % self.dirs != 0 {
            return Err(bad_input(format!(
                "--files {} must be a positive multiple of --dirs {}",
                self.files, self.dirs
            )));
        }
        for a in &self.append {
            let p = self.params(*a);
            p.validate()?;
            for spec in &self.testbeds {
                spec.validate()?;
                p.check_fits(spec.size, 4096)?;
            }
        }
        for spec in &self.testbeds {
            preflight(spec)?;
        }
        Ok(())
    }

    fn params(&self, append: u64) -> AgeParams {
        AgeParams {
            usage: self.usage.clone(),
            mode: AgeMode::Append,
            tree: TreeShape {
                dirs: self.dirs,
                files: self.files / self.dirs.max(1),
            },
            append,
            prealloc: self.prealloc,
            ..AgeParams::default()
        }
    }

    /// Runs the study; one result per testbed and append size, written to `out` if given.
    pub fn run(&self, out: Option<&Path>, progress: Progress) -> Result<Vec<RunResult>> {
        self.check()?;
        let mut results = Vec::new();
        for spec in &self.testbeds {
            for &append in &self.append {
                crate::signals::check()?;
                progress.note(&format!(
                    "append study: {} ({}), {} appends",
                    spec.label,
                    spec.describe(),
                    crate::units::format_size(append)
                ));
                let r = self.run_one(spec, append, progress)?;
                if let Some(dir) = out {
                    write_result(dir, &r)?;
                }
                results.push(r);
            }
        }
        Ok(results)
    }

    fn read_test(
        &self,
        target: &mut Target,
        root: &Path,
        prefix: String,
        progress: Progress,
    ) -> Result<(Vec<PhaseResult>, Vec<String>)> {
        let rt = ReadTest {
            path: Some(root.to_path_buf()),
            phases: self.read_phases.clone(),
            prefix,
            ..ReadTest::default()
        };
        let mut ctx = RunContext::new(
            target,
            root.to_path_buf(),
            self.seed,
            ColdMode::Drop,
            progress,
        );
        rt.run(&mut ctx)?;
        Ok(ctx.into_parts())
    }

    fn run_one(&self, spec: &TestbedSpec, append: u64, progress: Progress) -> Result<RunResult> {
        let started = SystemTime::now();
        let params = self.params(append);
        let mut aged = Target::Testbed(Testbed::create(spec)?);
        let root_a = aged.path().join("fsgauge-age");
        std::fs::create_dir(&root_a).with_context(|| format!("mkdir {}", root_a.display()))?;
        let mut ager = Ager::new(&params, &root_a, self.seed, progress.enabled())?;
        ager.check_targets()?;
        let devices_a = aged.devices();
        let mut phases: Vec<PhaseResult> = Vec::new();
        let mut warnings: Vec<String> = Vec::new();
        let mut rows = Vec::new();
        let mut checkpoints = Vec::new();
        let mut aging_wall_before = 0.0;
        for &p in &self.usage {
            let label = pct_label(p);
            let name = format!("age-{label}");
            let meter = PhaseMeter::start(&name, &AGE_OPS, &devices_a, None, &Progress::hidden());
            let mut rec = meter.recorder(0);
            let cp = ager.run_to(p, &mut rec)?;
            rec.finish();
            let mut phase = meter.finish(vec![rec]);
            let aged_rec = layout_record(&cp, &root_a, aged.path())?;
            phase.extra.extend(checkpoint_extra(&cp, &aged_rec));
            let age_wall = phase.wall_s;
            phases.push(phase);
            if let Some(w) = cp.overshoot() {
                warnings.push(w);
            }

            // The fresh copy.
            let mut fresh = Target::Testbed(Testbed::create(spec)?);
            let root_b = fresh.path().join("fsgauge-age");
            std::fs::create_dir(&root_b).with_context(|| format!("mkdir {}", root_b.display()))?;
            progress.note(&format!(
                "  {}%: copying the aged tree onto a fresh {}",
                label, spec.label
            ));
            let meter = PhaseMeter::start(
                &format!("copy-{label}"),
                &COPY_OPS,
                &fresh.devices(),
                None,
                &Progress::hidden(),
            );
            let mut rec = meter.recorder(0);
            let t0 = Instant::now();
            let stats = copy_tree(&root_a, &root_b, &mut rec)?;
            crate::testbed::syncfs(&root_b)?;
            let copy_s = t0.elapsed().as_secs_f64();
            rec.finish();
            let mut copy_phase = meter.finish(vec![rec]);
            copy_phase.extra.insert("files".into(), stats.files as f64);
            copy_phase.extra.insert("bytes".into(), stats.bytes as f64);
            let copy_kbps = stats.bytes as f64 / 1024.0 / copy_s.max(1e-9);
            copy_phase.extra.insert("write_kbps".into(), copy_kbps);
            let copy_wall = copy_phase.wall_s;
            let fresh_rec = crate::layout::snapshot(&root_b, fresh.path())?;
            phases.push(copy_phase);

            progress.note(&format!(
                "  {label}%: read tests on the aged and the fresh tree"
            ));
            let (pa, wa) =
                self.read_test(&mut aged, &root_a, format!("aged-{label}-"), progress)?;
            let (pf, wf) =
                self.read_test(&mut fresh, &root_b, format!("fresh-{label}-"), progress)?;
            let ra = |k: &str, ph: &str| extra(&pa, &format!("aged-{label}-{ph}"), k);
            let rf = |k: &str, ph: &str| extra(&pf, &format!("fresh-{label}-{ph}"), k);
            let row = Row {
                usage_target_pct: p,
                usage_pct: cp.usage_pct,
                files: cp.files,
                bytes: cp.bytes,
                write_kbps_aging: cp.write_kbps(),
                write_kbps_copy: copy_kbps,
                read_kbps_aged: ra("read_kbps", "walk"),
                read_kbps_fresh: rf("read_kbps", "walk"),
                read_pct: pct(ra("read_kbps", "walk"), rf("read_kbps", "walk")),
                walk_kbps_aged: ra("total_kbps", "walk"),
                walk_kbps_fresh: rf("total_kbps", "walk"),
                random_kbps_aged: ra("read_kbps", "random"),
                random_kbps_fresh: rf("read_kbps", "random"),
                random_pct: pct(ra("read_kbps", "random"), rf("read_kbps", "random")),
                blockorder_kbps_aged: ra("read_kbps", "blockorder"),
                blockorder_kbps_fresh: rf("read_kbps", "blockorder"),
                stat_per_s_aged: ra("meta_files_per_s", "walk").or(ra("files_per_s", "stat")),
                stat_per_s_fresh: rf("meta_files_per_s", "walk").or(rf("files_per_s", "stat")),
                extents_per_file_aged: get(&aged_rec, "tree", "extents_per_file_mean"),
                extents_per_file_fresh: get(&fresh_rec, "tree", "extents_per_file_mean"),
                layout_score_aged: get(&aged_rec, "tree", "layout_score"),
                layout_score_fresh: get(&fresh_rec, "tree", "layout_score"),
                fragmentation_factor_aged: get(&aged_rec, "tree", "fragmentation_factor"),
                fragmentation_factor_fresh: get(&fresh_rec, "tree", "fragmentation_factor"),
                runtime_aged_s: aging_wall_before
                    + age_wall
                    + pa.iter().map(|x| x.wall_s).sum::<f64>(),
                runtime_fresh_s: copy_wall + pf.iter().map(|x| x.wall_s).sum::<f64>(),
            };
            aging_wall_before += age_wall;
            phases.extend(pa);
            phases.extend(pf);
            warnings.extend(wa);
            warnings.extend(wf);
            checkpoints
                .push(serde_json::json!({ "usage": p, "aged": aged_rec, "fresh": fresh_rec }));
            rows.push(row);
            if let Target::Testbed(t) = fresh {
                t.destroy()?;
            }
            if cp.enospc {
                warnings.push(format!(
                    "ENOSPC at {:.1}% used before the {label}% checkpoint; the study stopped there",
                    cp.usage_pct
                ));
                break;
            }
        }
        let digest = ager.digest();
        let ops = ager.ops();
        drop(ager);
        let testbed = aged.info();
        let environment = Some(crate::results::Environment::collect(&testbed));
        if let Target::Testbed(t) = aged {
            t.destroy()?;
        }
        let params_v = serde_json::json!({
            "fs": spec.fs.name(),
            "fs_size": spec.size,
            "usage": self.usage,
            "append": append,
            "files": self.files,
            "dirs": self.dirs,
            "prealloc": self.prealloc,
            "read_phases": self.read_phases,
        });
        Ok(RunResult::assemble(RunRecord {
            testbed,
            workload: WorkloadInfo {
                kind: "study-append".into(),
                params: params_v.clone(),
                metrics: declared_metrics(),
                sweep_axes: Some(Vec::new()),
                line_axis: None,
                size_params: Some(vec!["fs_size".into()]),
            },
            rep: 0,
            seed: self.seed,
            started,
            spec: serde_json::json!({"study": "append", "spec": spec, "params": params_v, "seed": self.seed}),
            conditions: Conditions {
                cold: ColdMode::Drop.name().into(),
                ..Default::default()
            },
            phases,
            layout: Some(serde_json::json!({
                "rows": rows,
                "checkpoints": checkpoints,
                "manifest": { "sha256": digest, "ops": ops },
            })),
            errors: warnings,
            mpi: None,
            environment,
        }))
    }
}

/// The rows of a study result.
pub fn rows_of(r: &RunResult) -> Vec<Row> {
    r.layout
        .as_ref()
        .and_then(|l| l.get("rows"))
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}
