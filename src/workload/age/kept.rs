//! The append test's agings in the aged-image cache ([`crate::testbed::images::series`]): with
//! `keep_image`, a run that ages keeps the aged filesystem at every checkpoint, right after
//! the aging step and its layout walk (before the copy and the reads touch it), with the
//! step's `age-P` phase, its checkpoint and layout record and the aging's manifest so far; a
//! run whose checkpoints are all kept ages nothing and builds each checkpoint's aged testbed
//! from its image, replaying what was kept, so its result is as complete as an aging run's.
//!
//! An emulated disk serves a kept image as an overlay that loads each 1 MiB chunk on first
//! touch, and counts that load as lateness; the copy and the reads of the aged tree would pay
//! it inside measured phases where an aging run does not. So a start from an overlay loads
//! every chunk before anything is measured ([`Testbed::load_overlay`]).

use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::engine::{Ager, Checkpoint};
use crate::measure::Progress;
use crate::results::{AgedStart, PhaseResult};
use crate::testbed::images::series::Series;
use crate::testbed::images::Kept;
use crate::testbed::{Testbed, TestbedSpec};
use crate::workload::{RunContext, Target};

/// What a checkpoint's entry keeps besides its image and its `age-P` phase (the entry's
/// `layout`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    checkpoint: Checkpoint,
    /// The aged tree's layout and free-space record at the checkpoint.
    layout: serde_json::Value,
    /// The aging's manifest digest and operation count up to the checkpoint.
    manifest: Manifest,
}

/// The manifest digest of the aging operations and their count.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub sha256: String,
    pub ops: u64,
}

/// Keeps the run's testbed (in `ctx`), aged to checkpoint `i` of `series` as `cp` says, with
/// its phase and layout record: unmounted with the ager's root let go of, kept, and mounted
/// again. Returns how the state was made (aged, with the aging's seconds so far).
pub(super) fn keep(
    ctx: &mut RunContext,
    ager: &mut Ager,
    series: &Series,
    i: usize,
    cp: &Checkpoint,
    phase: &PhaseResult,
    layout: &serde_json::Value,
) -> Result<AgedStart> {
    let key = &series.keys[i];
    let record = Record {
        checkpoint: cp.clone(),
        layout: layout.clone(),
        manifest: Manifest {
            sha256: ager.digest(),
            ops: ager.ops(),
        },
    };
    let kept = Kept {
        name: series.name.clone(),
        aging_s: cp.seconds,
        phases: vec![phase.clone()],
        layout: Some(serde_json::to_value(&record)?),
    };
    let Target::Testbed(t) = ctx.target_mut() else {
        anyhow::bail!("the append test keeps its agings only on a testbed it built");
    };
    let start = ager
        .without_root(|| t.keep_aged(key, kept, cp.seconds))
        .with_context(|| {
            format!(
                "keeping the aged filesystem at {}% as image {}",
                cp.target_pct, key.key
            )
        })?;
    ctx.progress().note(&format!(
        "  {}%: {}",
        super::pct_label(cp.target_pct),
        start.describe()
    ));
    Ok(start)
}

/// Checkpoint `i` started from its kept image: the aged testbed, the aged tree's root on it,
/// how it started, and what was kept with it.
pub(super) struct Started {
    pub target: Target,
    pub root: PathBuf,
    pub start: AgedStart,
    /// Bytes of the overlay's base loaded before anything was measured (0: no overlay).
    pub loaded: u64,
    pub checkpoint: Checkpoint,
    pub phase: PhaseResult,
    pub layout: serde_json::Value,
    pub manifest: Manifest,
}

/// Builds the aged testbed of checkpoint `i` of `series` (which starts from kept images)
/// from its image, on a testbed of `spec`, with every chunk of an overlay loaded (timed,
/// the loading included); returns it with what was kept.
pub(super) fn start(
    spec: &TestbedSpec,
    series: &Series,
    i: usize,
    progress: Progress,
) -> Result<Started> {
    let entry = series
        .hit(i)
        .context("the run starts from kept images but has none for this checkpoint")?;
    let what = || {
        format!(
            "the kept image {} ({})",
            entry.manifest.key,
            entry.image.display()
        )
    };
    let record: Record = entry
        .manifest
        .layout
        .clone()
        .map(serde_json::from_value)
        .transpose()
        .with_context(|| format!("reading the checkpoint kept with {}", what()))?
        .with_context(|| format!("{} was kept without its checkpoint record", what()))?;
    let phase = entry
        .manifest
        .phases
        .first()
        .cloned()
        .with_context(|| format!("{} was kept without its aging phase", what()))?;
    let (t, loaded, start) = Testbed::start_from_kept(spec, entry, Testbed::load_overlay)?;
    progress.note(&format!(
        "  {}%: {}",
        super::pct_label(record.checkpoint.target_pct),
        start.describe()
    ));
    let target = Target::Testbed(t);
    let root = target.path().join(&series.tree);
    Ok(Started {
        target,
        root,
        start,
        loaded,
        checkpoint: record.checkpoint,
        phase,
        layout: record.layout,
        manifest: record.manifest,
    })
}
