//! The image cache in a run ([`crate::testbed::images`]): which aging a run keeps, finding
//! the kept image before the target is built, keeping the aged state after the aging, and
//! the record of which happened.

use std::time::Instant;

use anyhow::Result;

use super::request::{Place, Precondition, Rep};
use crate::base::error::bad_input;
use crate::results::AgedStart;
use crate::testbed::images::series::Series;
use crate::testbed::images::{self, Entry, ImageKey, Kept};
use crate::workload::{Target, Workload};

/// The image cache's part in one repetition.
pub(super) enum Keeping {
    /// No image cache.
    Off,
    /// Age, then keep the aged state as entry `key` under `name`.
    Save { key: ImageKey, name: String },
    /// Start from the kept image `entry`.
    Hit { entry: Box<Entry> },
    /// The workload's own aging, kept at each of its checkpoints (the append test): the
    /// workload keeps and starts from the images itself, as the series says.
    Series(Box<Series>),
}

/// The image cache in one repetition: what it does, and how the starting state was made
/// once that is known.
pub(super) struct Start {
    pub keeping: Keeping,
    pub start: Option<AgedStart>,
}

impl Start {
    /// No image cache.
    pub fn off() -> Self {
        Self {
            keeping: Keeping::Off,
            start: None,
        }
    }

    /// The series the workload keeps its aging in, handed over to it (see
    /// [`crate::workload::RunContext::with_kept_series`]).
    pub fn take_series(&mut self) -> Option<Series> {
        match std::mem::replace(&mut self.keeping, Keeping::Off) {
            Keeping::Series(s) => Some(*s),
            other => {
                self.keeping = other;
                None
            }
        }
    }
}

/// The start of a run whose workload kept its aging per checkpoint (`series`, back from the
/// workload): its first checkpoint's (each checkpoint's is in the workload's record).
pub(super) fn first_start(series: Option<Series>) -> Option<AgedStart> {
    series.and_then(|s| s.starts.into_iter().next())
}

/// The aging of a run and the directory its tree lives in: the precondition (a plan's
/// `[age]`), or the workload itself when it is an aging (`fsgauge age`).
fn aging<'a>(r: &Rep<'a>) -> Option<(&'a dyn Workload, String)> {
    match &r.opts.precondition {
        Some(Precondition(p)) => Some((p.as_ref(), format!("fsgauge-pre-{}", p.kind()))),
        None if r.wl.kind() == "age" => Some((r.wl, format!("fsgauge-{}", r.wl.kind()))),
        None => None,
    }
}

/// Whether the aging is the run's workload itself (not a precondition).
pub(super) fn aging_is_workload(r: &Rep<'_>) -> bool {
    r.opts.precondition.is_none()
}

/// What the image cache does in repetition `r`: nothing without `keep_image`; else the key
/// of its aging, and the kept image when the cache has one. Refused (bad input) before
/// anything is made: a run without an aging or not on a testbed fsgauge builds, and a miss
/// whose image the cache has no room for.
pub(super) fn keeping(r: &Rep<'_>) -> Result<Keeping> {
    let Some(name) = &r.opts.keep_image else {
        return Ok(Keeping::Off);
    };
    let Place::Testbed(spec) = r.place else {
        return Err(bad_input(
            "--keep-image keeps a testbed's aged filesystem; with --dir there is no image to keep",
        ));
    };
    if let (None, APPEND) = (&r.opts.precondition, r.wl.kind()) {
        return series(r, spec, name);
    }
    let Some((wl, tree)) = aging(r) else {
        return Err(bad_input(format!(
            "the {} workload has no aging to keep: --keep-image / keep_image apply to `fsgauge age`, plans with [age] and the append workload",
            r.wl.kind()
        )));
    };
    let key = images::key(
        spec,
        &images::Aging {
            kind: wl.kind(),
            params: wl.params(),
            seed: r.seed,
            tree: &tree,
            checkpoint: None,
        },
    )?;
    if let Some(entry) = images::find(&key.key)? {
        images::check_overlay_store(spec)?;
        return Ok(Keeping::Hit {
            entry: Box::new(entry),
        });
    }
    images::check_room(spec.size)?;
    Ok(Keeping::Save {
        key,
        name: name.clone(),
    })
}

/// The plan kind whose aging is its measured workload, kept per checkpoint.
const APPEND: &str = "append";

/// The series of the append test's agings in repetition `r` on `spec`, kept under `name`: a
/// key per usage checkpoint, and the kept images when the cache has every one.
fn series(r: &Rep<'_>, spec: &crate::testbed::TestbedSpec, name: &str) -> Result<Keeping> {
    let params = r.wl.params();
    let usage: Vec<f64> = params
        .get("usage")
        .cloned()
        .map(serde_json::from_value)
        .transpose()?
        .unwrap_or_default();
    let tree = format!("fsgauge-{}", r.wl.kind());
    let aging = images::Aging {
        kind: r.wl.kind(),
        params,
        seed: r.seed,
        tree: &tree,
        checkpoint: None,
    };
    let series = Series::find(spec, &aging, &usage, name)?;
    Ok(Keeping::Series(Box::new(series)))
}

impl Keeping {
    /// The kept image the target is built from, on a hit.
    pub fn hit(&self) -> Option<&Entry> {
        match self {
            Keeping::Hit { entry } => Some(entry),
            _ => None,
        }
    }
}

/// Keeps the target's aged filesystem (after an aging begun at `since`, with `phases` and
/// `layout`) as `keeping` says, while the run directories on it let go of it.
pub(super) fn save(
    target: &mut Target,
    keeping: &Keeping,
    since: Instant,
    phases: &[crate::results::PhaseResult],
    layout: Option<&serde_json::Value>,
) -> Result<Option<AgedStart>> {
    let (Keeping::Save { key, name }, Target::Testbed(t)) = (keeping, target) else {
        return Ok(None);
    };
    let aging_s = since.elapsed().as_secs_f64();
    let kept = Kept {
        name: name.clone(),
        aging_s,
        phases: phases.to_vec(),
        layout: layout.cloned(),
    };
    Ok(Some(t.keep_aged(key, kept, aging_s)?))
}

/// The result of an aging (`fsgauge age`) whose filesystem is its own kept image: nothing
/// runs, the phases and layout are those kept with the image, the testbed is the copy.
pub(super) fn replay(
    target: &Target,
    r: Rep<'_>,
    started: std::time::SystemTime,
    entry: &Entry,
    start: Option<AgedStart>,
) -> Result<crate::results::RunResult> {
    let conditions = crate::results::Conditions {
        cold: r.opts.cold.name().into(),
        ..Default::default()
    };
    let (phases, layout) = (entry.manifest.phases.clone(), entry.manifest.layout.clone());
    let mut result = super::record::assemble(
        target,
        r,
        started,
        conditions,
        phases,
        layout,
        Vec::new(),
        None,
    )?;
    result.testbed.aged_image = start;
    Ok(result)
}
