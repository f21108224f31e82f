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
//!
//! The test itself is [`crate::workload::age::append::run_append`], the engine of the plan kind `append`
//! too; this module makes the testbeds per filesystem and append size and writes the results.

use std::path::Path;
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::base::error::bad_input;
use crate::base::text::{fmt_num, Table};
use crate::measure::Progress;
use crate::results::tables::KindTables;
use crate::results::{write_result, Conditions, RunRecord, RunResult, WorkloadInfo};
use crate::testbed::images::{self, series::Series};
use crate::testbed::{preflight, Testbed, TestbedSpec};
pub use crate::workload::age::append::Row;
use crate::workload::age::append::{declared_metrics, run_append, AppendParams, Naming};
use crate::workload::age::TreeShape;
use crate::workload::readtest::ReadPhase;
use crate::workload::{ColdMode, RunContext, Target};

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
    /// Keep the agings in the image cache under this name, one image per checkpoint, and
    /// start from them when every checkpoint is kept (`--keep-image`).
    #[serde(default)]
    pub keep_image: Option<String>,
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
            let p = self.params(*a).age_params();
            p.validate()?;
            for spec in &self.testbeds {
                spec.validate()?;
                p.check_fits(spec.size, 4096)?;
            }
        }
        for spec in &self.testbeds {
            preflight(spec)?;
            // A testbed the cache cannot keep, or a cache without room, before anything ages.
            if let Some(name) = &self.keep_image {
                for a in &self.append {
                    self.series(spec, &self.params(*a), name)?;
                }
            }
        }
        Ok(())
    }

    fn params(&self, append: u64) -> AppendParams {
        AppendParams {
            usage: self.usage.clone().into(),
            tree: TreeShape {
                dirs: self.dirs,
                files: self.files / self.dirs.max(1),
            },
            append,
            prealloc: self.prealloc,
            read: self.read_phases.clone().into(),
            ..AppendParams::default()
        }
    }

    /// Runs the study; one result per testbed and append size, written to `out` if given.
    /// Returns the results and the files written (for the results store).
    pub fn run(
        &self,
        out: Option<&Path>,
        progress: Progress,
    ) -> Result<(Vec<RunResult>, Vec<std::path::PathBuf>)> {
        self.check()?;
        let mut results = Vec::new();
        let mut written = Vec::new();
        for spec in &self.testbeds {
            for &append in &self.append {
                crate::base::signals::check()?;
                progress.note(&format!(
                    "append study: {} ({}), {} appends",
                    spec.label,
                    spec.describe(),
                    crate::base::units::format_size(append)
                ));
                let r = self.run_one(spec, append, progress)?;
                if let Some(dir) = out {
                    written.push(write_result(dir, &r)?);
                }
                results.push(r);
            }
        }
        Ok((results, written))
    }

    /// The image cache's series of the agings of `params` on `spec`, kept as `name`: the
    /// aging of the plan kind `append` in the study's tree directory.
    fn series(&self, spec: &TestbedSpec, params: &AppendParams, name: &str) -> Result<Series> {
        let aging = images::Aging {
            kind: "append",
            params: serde_json::to_value(params)?,
            seed: self.seed,
            tree: TREE,
            checkpoint: None,
        };
        Series::find(spec, &aging, &params.usage, name)
    }

    fn run_one(&self, spec: &TestbedSpec, append: u64, progress: Progress) -> Result<RunResult> {
        let started = SystemTime::now();
        let params = self.params(append);
        let mut aged = Target::Testbed(Testbed::create(spec)?);
        let root_a = aged.path().join(TREE);
        std::fs::create_dir(&root_a).with_context(|| format!("mkdir {}", root_a.display()))?;
        let mut ctx = RunContext::new(&mut aged, root_a, self.seed, ColdMode::Drop, progress);
        if let Some(name) = &self.keep_image {
            ctx = ctx.with_kept_series(Some(self.series(spec, &params, name)?));
        }
        let out = run_append(&mut ctx, &params, Naming::Study)?;
        let series = ctx.take_kept_series();
        let (phases, warnings) = ctx.into_parts();
        let mut testbed = aged.info();
        testbed.aged_image = series.and_then(|s| s.starts.first().cloned());
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
            crash: None,
            testbed,
            workload: WorkloadInfo {
                kind: KIND.into(),
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
                "rows": out.rows,
                "checkpoints": out.checkpoints,
                "manifest": { "sha256": out.digest, "ops": out.ops },
            })),
            errors: warnings,
            mpi: None,
            environment,
        }))
    }
}

/// The directory of the aged tree on each aged testbed.
const TREE: &str = "fsgauge-age";

/// The rows of a study result.
pub fn rows_of(r: &RunResult) -> Vec<Row> {
    r.layout
        .as_ref()
        .and_then(|l| l.get("rows"))
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// The `workload.kind` of the append study's results.
pub const KIND: &str = "study-append";

/// The append study's table, registered with its kind: `fsgauge report` shows it.
pub const TABLES: KindTables = KindTables {
    kind: KIND,
    tables: aged_fresh_tables,
    against: &[],
};

/// One checkpoint row of an append-study result.
type StudyRow = serde_json::Map<String, serde_json::Value>;

/// The append study's comparison (`fsgauge study append` results keep one row per usage
/// checkpoint under `layout.rows`): aged tree against its fresh copy, means over repetitions,
/// in the six parts of the fragmentation study's graphs.
fn aged_fresh_tables(results: &[RunResult]) -> Vec<Table> {
    // (testbed, checkpoint) -> rows of all repetitions, in result order.
    let mut groups: Vec<((String, String), Vec<&StudyRow>)> = Vec::new();
    for r in results.iter().filter(|r| r.workload.kind == KIND) {
        let rows = r
            .layout
            .as_ref()
            .and_then(|l| l.get("rows"))
            .and_then(|v| v.as_array());
        for row in rows.into_iter().flatten().filter_map(|v| v.as_object()) {
            let target = row
                .get("usage_target_pct")
                .and_then(|v| v.as_f64())
                .unwrap_or(f64::NAN);
            let key = (r.testbed.label.clone(), fmt_num(target));
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(row),
                None => groups.push((key, vec![row])),
            }
        }
    }
    if groups.is_empty() {
        return Vec::new();
    }
    let mean = |rows: &[&StudyRow], k: &str| -> Option<f64> {
        let xs: Vec<f64> = rows
            .iter()
            .filter_map(|r| r.get(k).and_then(|v| v.as_f64()))
            .collect();
        (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
    };
    let pair = |rows: &[&StudyRow], a: &str, b: &str| match (mean(rows, a), mean(rows, b)) {
        (Some(x), Some(y)) => format!("{} / {}", fmt_num(x), fmt_num(y)),
        _ => "-".into(),
    };
    let pct = |rows: &[&StudyRow], a: &str, b: &str| match (mean(rows, a), mean(rows, b)) {
        (Some(x), Some(y)) if y > 0.0 => format!("{:.0}%", 100.0 * x / y),
        _ => "-".into(),
    };
    let headers = [
        "testbed",
        "usage % (target)",
        "usage %",
        "write KiB/s aging / copy",
        "read KiB/s aged / fresh",
        "read aged/fresh",
        "random KiB/s aged / fresh",
        "random aged/fresh",
        "stat/s aged / fresh",
        "extents per file aged / fresh",
        "layout score aged / fresh",
        "runtime s aged / fresh",
    ]
    .map(String::from)
    .to_vec();
    let rows = groups
        .iter()
        .map(|((testbed, target), rows)| {
            vec![
                testbed.clone(),
                target.clone(),
                mean(rows, "usage_pct").map_or("-".into(), fmt_num),
                pair(rows, "write_kbps_aging", "write_kbps_copy"),
                pair(rows, "read_kbps_aged", "read_kbps_fresh"),
                pct(rows, "read_kbps_aged", "read_kbps_fresh"),
                pair(rows, "random_kbps_aged", "random_kbps_fresh"),
                pct(rows, "random_kbps_aged", "random_kbps_fresh"),
                pair(rows, "stat_per_s_aged", "stat_per_s_fresh"),
                pair(rows, "extents_per_file_aged", "extents_per_file_fresh"),
                pair(rows, "layout_score_aged", "layout_score_fresh"),
                pair(rows, "runtime_aged_s", "runtime_fresh_s"),
            ]
        })
        .collect();
    vec![Table {
        title: "Aged vs fresh copy".into(),
        label_columns: 2,
        note: "the append study: the tree aged by round-robin appends against its copy on a freshly made filesystem of the same size and options, per usage checkpoint, means over repetitions; read speeds count read time only".into(),
        headers,
        rows,
    }]
}
