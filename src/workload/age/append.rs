//! The append test of the journaling-filesystem fragmentation project (seed study 3): create an
//! N×C tree and append to its files round-robin until each usage checkpoint; at each checkpoint
//! copy the aged tree onto a twin filesystem made fresh for it (same kind, size, mkfs and mount
//! options: the study's `cp -R . /partition2`), then read both trees cold and record both
//! layouts. One engine ([`run_append`]) for the plan kind `append` ([`Append`]) and for
//! `fsgauge study append`.
//!
//! Why a twin testbed and not a sibling directory: the question is what aging costs a reader
//! compared with the same files laid out by an allocator that sees an empty filesystem. A copy
//! into a directory of the aged filesystem would be allocated from its fragmented free space (at
//! 75% usage, only the remaining quarter), so it would not be fresh. The twin is built, used and
//! torn down inside the run, recorded in the ledger like every testbed.
//!
//! Phases of the plan kind, per checkpoint P: `age-P` (aging, with the aged layout),
//! `copy-P` (the copy onto the twin, with the fresh layout), `read-aged-P` and `read-fresh-P`
//! (walk order; `random-aged-P`, `blockorder-aged-P`, `stat-aged-P` for the other read phases).
//! Every read phase carries the layout of the tree it read (`extents_per_file`,
//! `layout_score`, `fragmentation_factor`), so one pair of phases answers both "how much slower"
//! and "how much more fragmented". The study names its read phases `aged-P-walk`, ….

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::copy::{copy_tree, COPY_OPS};
use super::engine::{pct_label, AgeMode, AgeParams, Ager, Checkpoint, AGE_OPS};
use super::kept;
use super::shape::TreeShape;
use super::workload::{checkpoint_extra, layout_record};
use crate::base::error::{bad_input, bad_param};
use crate::measure::{PhaseMeter, Progress};
use crate::results::{AgedStart, MetricDef, PhaseResult};
use crate::testbed::images::series::Series;
use crate::testbed::{Testbed, TestbedSpec};
use crate::workload::params::{self, CommaList};
use crate::workload::readtest::{ReadPhase, ReadTest};
use crate::workload::{ColdMode, RunContext, Target, Workload};

/// Parameters of the append test (plan kind `append`; flag names with `_` for `-`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct AppendParams {
    /// Usage checkpoints: percentages of the filesystem's blocks (statvfs), ascending.
    #[arg(long, value_name = "PCT,...", default_value = "25,50,75")]
    pub usage: CommaList<f64>,
    /// Tree shape: N directories × C files each.
    #[arg(long, value_name = "NxC", default_value = "20x50")]
    pub tree: TreeShape,
    /// Bytes per append.
    #[arg(long, value_name = "SIZE", default_value = "4K", value_parser = params::size)]
    #[serde(deserialize_with = "crate::base::units::de_size")]
    pub append: u64,
    /// fallocate every file to its expected final length first (the study's preallocation runs).
    #[arg(long)]
    pub prealloc: bool,
    /// Read phases run on the aged tree and on its fresh copy at every checkpoint, each after
    /// dropping the caches: walk, random, blockorder, stat.
    #[arg(long, value_name = "LIST", default_value = "walk")]
    pub read: CommaList<ReadPhase>,
    /// Size of each read(2) of the read phases.
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = params::size)]
    #[serde(deserialize_with = "crate::base::units::de_size")]
    pub read_block: u64,
}

impl Default for AppendParams {
    fn default() -> Self {
        params::defaults()
    }
}

impl AppendParams {
    /// The aging half of the test.
    pub fn age_params(&self) -> AgeParams {
        AgeParams {
            usage: self.usage.clone(),
            mode: AgeMode::Append,
            tree: self.tree,
            append: self.append,
            prealloc: self.prealloc,
            ..AgeParams::default()
        }
    }

    fn read_test(&self) -> ReadTest {
        ReadTest {
            phases: self.read.clone(),
            block: self.read_block,
            ..ReadTest::default()
        }
    }

    /// Checks everything that does not need the filesystem. Errors are bad input.
    pub fn validate(&self) -> Result<()> {
        self.age_params().validate()?;
        if self.read.is_empty() {
            return Err(bad_param(
                "read",
                "--read needs at least one of walk,random,blockorder,stat",
            ));
        }
        params::check_block("read_block", self.read_block)
    }
}

/// How the read phases are named: the plan kind's `read-aged-50`, or the study's `aged-50-walk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    Kind,
    Study,
}

impl Naming {
    /// The name of read phase `ph` of `tree` (`aged` or `fresh`) at checkpoint `label`.
    pub fn read_phase(self, tree: &str, label: &str, ph: ReadPhase) -> String {
        match (self, ph) {
            (Naming::Study, _) => format!("{tree}-{label}-{}", ph.name()),
            (Naming::Kind, ReadPhase::Walk) => format!("read-{tree}-{label}"),
            (Naming::Kind, _) => format!("{}-{tree}-{label}", ph.name()),
        }
    }
}

/// One checkpoint of the test: the row of the study's graphs.
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

/// What the test produced besides its phases (which it pushes into the run context).
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub rows: Vec<Row>,
    /// Per checkpoint: `{usage, aged, fresh}` layout and free-space records.
    pub checkpoints: Vec<serde_json::Value>,
    /// The manifest digest of the aging operations and their count.
    pub digest: String,
    pub ops: u64,
}

/// The figures of the test's phases: aging checkpoints and the copy (the age workload's
/// declarations), and the read passes (the read workload's), each declared once.
pub fn declared_metrics() -> Vec<MetricDef> {
    let mut out: Vec<MetricDef> = Vec::new();
    for m in super::workload::METRICS
        .iter()
        .chain(crate::workload::readtest::METRICS)
    {
        if !out.iter().any(|o| o.key == m.key) {
            out.push(m.clone());
        }
    }
    out
}

fn get(v: &serde_json::Value, a: &str, b: &str) -> Option<f64> {
    v.get(a)?.get(b)?.as_f64()
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

/// The layout figures of a tree, as they go into its read phases.
fn layout_extra(rec: &serde_json::Value) -> Vec<(&'static str, f64)> {
    [
        ("extents_per_file", "extents_per_file_mean"),
        ("layout_score", "layout_score"),
        ("fragmentation_factor", "fragmentation_factor"),
    ]
    .into_iter()
    .filter_map(|(k, src)| get(rec, "tree", src).map(|x| (k, x)))
    .collect()
}

/// Reads `root` on `target` with the read phases (caches dropped before each), names them by
/// `naming` and adds the tree's layout figures to each.
fn read_tree(
    target: &mut Target,
    root: &Path,
    seed: u64,
    progress: Progress,
    test: &ReadTest,
    names: impl Fn(ReadPhase) -> String,
    layout: &serde_json::Value,
) -> Result<(Vec<PhaseResult>, Vec<String>)> {
    let test = ReadTest {
        path: Some(root.to_path_buf()),
        ..test.clone()
    };
    // The read tests are the measured part: an emulated disk models them, not the aging and
    // the copy before them.
    target.measuring(true)?;
    let mut ctx = RunContext::new(target, root.to_path_buf(), seed, ColdMode::Drop, progress);
    let ran = test.run(&mut ctx);
    let (mut phases, warnings) = ctx.into_parts();
    target.check_devices()?;
    target.measuring(false)?;
    ran?;
    for (p, ph) in phases.iter_mut().zip(&test.phases) {
        p.name = names(*ph);
        for (k, x) in layout_extra(layout) {
            p.extra.insert(k.into(), x);
        }
    }
    Ok((phases, warnings))
}

/// One tree at a checkpoint: its layout record, the wall time of the phase that made it (the
/// aging or the copy), its write rate and its read phases.
struct Tree {
    layout: serde_json::Value,
    wall_s: f64,
    write_kbps: f64,
    reads: Vec<PhaseResult>,
}

/// Runs the append test in `ctx`: ages `ctx.root()` on the run's testbed, and at each checkpoint
/// copies the tree onto a twin testbed (made from the run's testbed spec and destroyed after
/// the checkpoint) and reads both cold. The phases go into `ctx`.
///
/// With a kept series in `ctx` ([`RunContext::with_kept_series`], `keep_image`), each
/// checkpoint's aged filesystem is kept in the image cache after its aging; when the cache
/// holds every checkpoint already, nothing ages: each checkpoint's aged tree is on a testbed
/// built from its image (see [`super::kept`]), and the copy and the reads run as always. The
/// series goes back into `ctx` with how each checkpoint started.
pub fn run_append(ctx: &mut RunContext, p: &AppendParams, naming: Naming) -> Result<Outcome> {
    let spec = twin_spec(ctx.target())?;
    let reads = p.read_test();
    let seed = ctx.seed();
    let progress = ctx.progress();
    let mut series = ctx.take_kept_series();
    // Started from kept images, nothing ages: no ager, which would make its tree.
    let mut ager = if series.as_ref().is_some_and(|s| s.is_warm()) {
        None
    } else {
        let a = Ager::new(&p.age_params(), ctx.root(), seed, progress.enabled())?;
        a.check_targets()?;
        Some(a)
    };
    let mut out = Outcome::default();
    let mut aging_wall_before = 0.0;
    for (i, &pc) in p.usage.iter().enumerate() {
        crate::base::signals::check()?;
        let label = pct_label(pc);
        let mut at = aged_at(ctx, ager.as_mut(), series.as_mut(), i, pc, &spec)?;
        let (root_a, start) = (at.root.clone(), at.start.clone());
        let (mut twin, root_b, mut fresh) = copy_to_twin(ctx, &spec, &root_a, &label)?;

        progress.note(&format!(
            "  {label}%: read tests on the aged and the fresh tree"
        ));
        let aged_target = match at.own.as_mut() {
            Some(t) => t,
            None => ctx.target_mut(),
        };
        let (pa, wa) = read_tree(
            aged_target,
            &root_a,
            seed,
            progress,
            &reads,
            |ph| naming.read_phase("aged", &label, ph),
            &at.tree.layout,
        )?;
        let (pf, wf) = read_tree(
            &mut twin,
            &root_b,
            seed,
            progress,
            &reads,
            |ph| naming.read_phase("fresh", &label, ph),
            &fresh.layout,
        )?;
        at.tree.reads = pa;
        fresh.reads = pf;
        let (cp, aged) = (&at.cp, &at.tree);
        out.rows
            .push(row(pc, cp, aged, &fresh, naming, aging_wall_before));
        aging_wall_before += aged.wall_s;
        for ph in at.tree.reads.drain(..).chain(fresh.reads) {
            ctx.push_phase(ph);
        }
        for w in wa.into_iter().chain(wf) {
            ctx.warn(w);
        }
        let mut record =
            serde_json::json!({ "usage": pc, "aged": at.tree.layout, "fresh": fresh.layout });
        if let Some(s) = &start {
            record["aged_image"] = serde_json::to_value(s)?;
        }
        if let Some(b) = at.loaded {
            record["overlay_loaded_bytes"] = serde_json::json!(b);
        }
        out.checkpoints.push(record);
        for t in [Some(twin), at.own.take()].into_iter().flatten() {
            if let Target::Testbed(t) = t {
                t.destroy()?;
            }
        }
        if let Some(m) = at.manifest.take() {
            (out.digest, out.ops) = (m.sha256, m.ops);
        }
        if at.cp.enospc {
            ctx.warn(format!(
                "ENOSPC at {:.1}% used before the {label}% checkpoint; the append test stopped there",
                at.cp.usage_pct
            ));
            break;
        }
    }
    if let Some(a) = &ager {
        (out.digest, out.ops) = (a.digest(), a.ops());
    }
    if let Some(s) = series {
        ctx.put_kept_series(s);
    }
    Ok(out)
}

/// The aged tree at a checkpoint: its checkpoint, the tree, where it is, the testbed it is
/// on when that is not the run's own (started from a kept image), how its state was made
/// with the image cache and, started from a kept image, the aging's manifest kept with it.
struct AgedAt {
    cp: Checkpoint,
    tree: Tree,
    root: PathBuf,
    own: Option<Target>,
    start: Option<AgedStart>,
    /// Started from a kept image: the bytes of an overlay's base loaded before the copy.
    loaded: Option<u64>,
    manifest: Option<kept::Manifest>,
}

/// The aged tree at checkpoint `i` (`pc`%): aged by `ager` on the run's testbed (and kept,
/// with a `series`), or started from its kept image when there is no ager. Its `age-P`
/// phase (aged or kept) goes into `ctx`.
fn aged_at(
    ctx: &mut RunContext,
    ager: Option<&mut Ager>,
    series: Option<&mut Series>,
    i: usize,
    pc: f64,
    spec: &TestbedSpec,
) -> Result<AgedAt> {
    let Some(ager) = ager else {
        let series = series.expect("only a run started from kept images has no ager");
        let s = kept::start(spec, series, i, ctx.progress())?;
        series.starts.push(s.start.clone());
        if let Some(w) = s.checkpoint.overshoot() {
            ctx.warn(w);
        }
        let tree = Tree {
            wall_s: s.phase.wall_s,
            write_kbps: s.checkpoint.write_kbps(),
            layout: s.layout,
            reads: Vec::new(),
        };
        ctx.push_phase(s.phase);
        return Ok(AgedAt {
            cp: s.checkpoint,
            tree,
            root: s.root,
            own: Some(s.target),
            start: Some(s.start),
            loaded: Some(s.loaded),
            manifest: Some(s.manifest),
        });
    };
    let mount = ctx.target().reach();
    let (cp, tree, phase) = age_to(ctx, ager, pc, &mount)?;
    let start = match series {
        Some(series) => {
            let s = kept::keep(ctx, ager, series, i, &cp, &phase, &tree.layout)?;
            series.starts.push(s.clone());
            Some(s)
        }
        None => None,
    };
    ctx.push_phase(phase);
    if let Some(w) = cp.overshoot() {
        ctx.warn(w);
    }
    Ok(AgedAt {
        cp,
        tree,
        root: ctx.root().to_path_buf(),
        own: None,
        start,
        loaded: None,
        manifest: None,
    })
}

/// The spec of the twin testbed: the run's own, which must be a loop testbed (a real device
/// or an existing directory has no twin).
fn twin_spec(target: &Target) -> Result<TestbedSpec> {
    match target {
        Target::Testbed(t) if t.spec().device.is_none() => Ok(t.spec().clone()),
        Target::Testbed(_) => Err(bad_input(
            "the append test copies the aged tree onto a fresh twin filesystem of the same kind and size; a real --device has no twin: use --fs (a loop testbed)",
        )),
        Target::Dir(d) => Err(bad_input(format!(
            "the append test copies the aged tree onto a fresh twin filesystem it builds; {} is an existing directory: use --fs (a testbed)",
            d.display()
        ))),
    }
}

/// Ages the run's tree to `pc`% usage as phase `age-P` (with the aged layout); returns the
/// checkpoint, the aged tree and the phase.
fn age_to(
    ctx: &mut RunContext,
    ager: &mut Ager,
    pc: f64,
    mount: &Path,
) -> Result<(Checkpoint, Tree, PhaseResult)> {
    let meter = PhaseMeter::start(
        &format!("age-{}", pct_label(pc)),
        &AGE_OPS,
        &ctx.target().devices(),
        None,
        &Progress::hidden(),
    );
    let mut rec = meter.recorder(0);
    let cp = ager.run_to(pc, &mut rec)?;
    rec.finish();
    let mut phase = meter.finish(vec![rec]);
    let layout = layout_record(&cp, ctx.root(), mount)?;
    phase.extra.extend(checkpoint_extra(&cp, &layout));
    let tree = Tree {
        layout,
        wall_s: phase.wall_s,
        write_kbps: cp.write_kbps(),
        reads: Vec::new(),
    };
    Ok((cp, tree, phase))
}

/// Copies the aged tree `root_a` onto a twin testbed made from `spec` for checkpoint `label`,
/// as phase `copy-P` (with the fresh layout, pushed into `ctx`); returns the twin, the copy's
/// root on it and the fresh tree.
fn copy_to_twin(
    ctx: &mut RunContext,
    spec: &TestbedSpec,
    root_a: &Path,
    label: &str,
) -> Result<(Target, PathBuf, Tree)> {
    let twin = Target::Testbed(Testbed::create(spec)?);
    let root_b = twin.path().join("fsgauge-age");
    std::fs::create_dir(&root_b).with_context(|| format!("mkdir {}", root_b.display()))?;
    ctx.progress().note(&format!(
        "  {label}%: copying the aged tree onto a fresh {}",
        spec.label
    ));
    let meter = PhaseMeter::start(
        &format!("copy-{label}"),
        &COPY_OPS,
        &twin.devices(),
        None,
        &Progress::hidden(),
    );
    let mut rec = meter.recorder(0);
    let t0 = Instant::now();
    let stats = copy_tree(root_a, &root_b, &mut rec)?;
    crate::testbed::syncfs(&root_b)?;
    let copy_s = t0.elapsed().as_secs_f64();
    rec.finish();
    let mut phase = meter.finish(vec![rec]);
    phase.extra.insert("files".into(), stats.files as f64);
    phase.extra.insert("bytes".into(), stats.bytes as f64);
    let write_kbps = stats.bytes as f64 / 1024.0 / copy_s.max(1e-9);
    phase.extra.insert("write_kbps".into(), write_kbps);
    let layout = crate::layout::snapshot(&root_b, twin.path())?;
    for (k, x) in layout_extra(&layout) {
        phase.extra.insert(k.into(), x);
    }
    let wall_s = phase.wall_s;
    ctx.push_phase(phase);
    let tree = Tree {
        layout,
        wall_s,
        write_kbps,
        reads: Vec::new(),
    };
    Ok((twin, root_b, tree))
}

/// The row of checkpoint `pc` of the study's table, from the aged tree and its fresh copy
/// (both read). `aging_wall_before` is the aging time of the earlier checkpoints.
fn row(
    pc: f64,
    cp: &Checkpoint,
    aged: &Tree,
    fresh: &Tree,
    naming: Naming,
    aging_wall_before: f64,
) -> Row {
    let label = pct_label(pc);
    let ra = |k: &str, ph| extra(&aged.reads, &naming.read_phase("aged", &label, ph), k);
    let rf = |k: &str, ph| extra(&fresh.reads, &naming.read_phase("fresh", &label, ph), k);
    let (aged_rec, fresh_rec) = (&aged.layout, &fresh.layout);
    use ReadPhase::{Blockorder, Random, Stat, Walk};
    Row {
        usage_target_pct: pc,
        usage_pct: cp.usage_pct,
        files: cp.files,
        bytes: cp.bytes,
        write_kbps_aging: aged.write_kbps,
        write_kbps_copy: fresh.write_kbps,
        read_kbps_aged: ra("read_kbps", Walk),
        read_kbps_fresh: rf("read_kbps", Walk),
        read_pct: pct(ra("read_kbps", Walk), rf("read_kbps", Walk)),
        walk_kbps_aged: ra("total_kbps", Walk),
        walk_kbps_fresh: rf("total_kbps", Walk),
        random_kbps_aged: ra("read_kbps", Random),
        random_kbps_fresh: rf("read_kbps", Random),
        random_pct: pct(ra("read_kbps", Random), rf("read_kbps", Random)),
        blockorder_kbps_aged: ra("read_kbps", Blockorder),
        blockorder_kbps_fresh: rf("read_kbps", Blockorder),
        stat_per_s_aged: ra("meta_files_per_s", Walk).or(ra("files_per_s", Stat)),
        stat_per_s_fresh: rf("meta_files_per_s", Walk).or(rf("files_per_s", Stat)),
        extents_per_file_aged: get(aged_rec, "tree", "extents_per_file_mean"),
        extents_per_file_fresh: get(fresh_rec, "tree", "extents_per_file_mean"),
        layout_score_aged: get(aged_rec, "tree", "layout_score"),
        layout_score_fresh: get(fresh_rec, "tree", "layout_score"),
        fragmentation_factor_aged: get(aged_rec, "tree", "fragmentation_factor"),
        fragmentation_factor_fresh: get(fresh_rec, "tree", "fragmentation_factor"),
        runtime_aged_s: aging_wall_before
            + aged.wall_s
            + aged.reads.iter().map(|x| x.wall_s).sum::<f64>(),
        runtime_fresh_s: fresh.wall_s + fresh.reads.iter().map(|x| x.wall_s).sum::<f64>(),
    }
}

/// The append test as a plan workload (kind `append`): one run ages its testbed and compares
/// the aged tree with a fresh copy on a twin at every checkpoint; repetitions come from the
/// plan. The result's `layout` holds the rows of the study's table and both layouts per
/// checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(transparent)]
pub struct Append(pub AppendParams);

impl Workload for Append {
    fn metrics(&self) -> &'static [MetricDef] {
        &METRICS
    }

    fn kind(&self) -> &'static str {
        "append"
    }

    fn params(&self) -> serde_json::Value {
        serde_json::to_value(&self.0).expect("plain struct serializes")
    }

    fn validate(&self) -> Result<()> {
        self.0.validate()
    }

    fn op_kinds(&self) -> Vec<crate::measure::OpDef> {
        crate::workload::readtest::ReadTest::default().op_kinds()
    }

    fn memory_needed(&self) -> Result<u64, crate::base::units::Overflow> {
        let age = super::Age(self.0.age_params()).memory_needed()?;
        age.checked_add(self.0.read_block)
            .and_then(|m| m.checked_add(16 << 20))
            .ok_or_else(crate::base::units::Overflow::of(
                "append",
                "memory estimate",
                format!("--tree {} --read-block {}", self.0.tree, self.0.read_block),
                "--tree or --read-block",
            ))
    }

    fn sets_up_inside(&self) -> bool {
        true
    }

    fn run(&self, ctx: &mut RunContext) -> Result<()> {
        let out = run_append(ctx, &self.0, Naming::Kind)?;
        ctx.set_layout(serde_json::json!({
            "root": ctx.shown_root().display().to_string(),
            "rows": out.rows,
            "checkpoints": out.checkpoints,
            "manifest": { "sha256": out.digest, "ops": out.ops },
        }));
        Ok(())
    }
}

/// The figures of the append test's phases: [`declared_metrics`], made once.
static METRICS: std::sync::LazyLock<Vec<MetricDef>> = std::sync::LazyLock::new(declared_metrics);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::registry::find;

    /// The plan kind builds from a table with the flags' defaults, and refuses bad values
    /// naming the field.
    #[test]
    fn append_builds_from_plan_parameters() {
        let k = find("append").unwrap();
        let w = (k.build)(serde_json::json!({})).unwrap();
        assert_eq!(
            w.params(),
            serde_json::json!({
                "usage": [25.0, 50.0, 75.0], "tree": "20x50", "append": 4096,
                "prealloc": false, "read": ["walk"], "read_block": 1 << 20
            })
        );
        let w = (k.build)(serde_json::json!({
            "usage": [10, 30], "tree": "2x5", "append": "8K", "read": ["walk", "random"]
        }))
        .unwrap();
        w.validate().unwrap();
        assert_eq!(w.params()["append"], 8192);
        assert!((k.build)(serde_json::json!({"mode": "fill"})).is_err());
        let bad = (k.build)(serde_json::json!({"read": []})).unwrap();
        assert!(bad.validate().unwrap_err().to_string().contains("--read"));
        let bad = (k.build)(serde_json::json!({"usage": [50, 20]})).unwrap();
        assert!(bad.validate().is_err());
    }

    /// Every figure the phases record is declared, once, by the same declarations the age and
    /// read workloads use.
    #[test]
    fn declared_metrics_cover_age_and_read() {
        let d = Append::default().metrics();
        for m in super::super::workload::METRICS
            .iter()
            .chain(crate::workload::readtest::METRICS)
        {
            assert_eq!(d.iter().filter(|x| x.key == m.key).count(), 1, "{}", m.key);
        }
        for k in [
            "read_kbps",
            "extents_per_file",
            "layout_score",
            "write_kbps",
        ] {
            assert!(d.iter().any(|x| x.key == k), "{k}");
        }
    }

    /// On an existing directory there is no twin filesystem to copy onto: refused as bad input
    /// before anything is written.
    #[test]
    fn a_directory_target_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut target = Target::Dir(dir.path().to_path_buf());
        let mut ctx = RunContext::new(
            &mut target,
            dir.path().to_path_buf(),
            1,
            ColdMode::Drop,
            Progress::hidden(),
        );
        let e = run_append(&mut ctx, &AppendParams::default(), Naming::Kind).unwrap_err();
        assert!(e.to_string().contains("twin"), "{e}");
        assert_eq!(crate::base::error::exit_code(&e), 2);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn phase_names() {
        assert_eq!(
            Naming::Kind.read_phase("aged", "50", ReadPhase::Walk),
            "read-aged-50"
        );
        assert_eq!(
            Naming::Kind.read_phase("fresh", "12.5", ReadPhase::Random),
            "random-fresh-12.5"
        );
        assert_eq!(
            Naming::Study.read_phase("aged", "25", ReadPhase::Walk),
            "aged-25-walk"
        );
    }
}
