//! Room for a plan's images on the machine's disks: each testbed's image (and its journal's)
//! while its runs are made, or every testbed's at once where runs alternate between them
//! (`fresh = "per-testbed"` with questions); refused before anything is made, at the key at
//! fault.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;

use anyhow::Result;

use super::fault::fault;
use super::testbeds::FieldSpans;
use super::{PlanTestbed, PlanWorkload};
use crate::testbed::{default_workdir, Backing, TestbedSpec};

/// With `fresh = "per-testbed"` and questions, runs alternate between the testbeds (so drift
/// hits both sides of a question alike), and every testbed's filesystem exists at once: the
/// disk (and the RAM disk) must hold them all together.
pub(super) fn check_disk_together(
    testbeds: &[PlanTestbed],
    workloads: &[PlanWorkload],
    aged: bool,
    fresh_span: Option<Range<usize>>,
) -> Result<()> {
    let mut need: BTreeMap<PathBuf, u64> = BTreeMap::new();
    for tb in testbeds {
        let s = &tb.spec;
        let image = s.image_room(written(s, workloads, aged));
        let mut add = |backing: Backing, bytes: u64| {
            let base = match backing {
                Backing::File => crate::testbed::room::nearest_existing(&s.workdir),
                Backing::Ram => {
                    crate::testbed::room::nearest_existing(&default_workdir(Backing::Ram))
                }
            };
            let e = need.entry(base).or_default();
            *e = e.saturating_add(bytes);
        };
        add(s.backing, image);
        if let Some(j) = s.journal {
            add(j.backing, j.size);
        }
    }
    for (base, bytes) in need {
        let Some(avail) = crate::testbed::room::free_space(&base) else {
            continue;
        };
        if bytes > avail {
            return Err(fault(
                fresh_span.clone().unwrap_or(0..0),
                "fresh",
                format!(
                    "with questions, fresh = \"per-testbed\" keeps every testbed's filesystem at once (runs alternate between them), which needs {} in {} but it has only {} free; use fresh = \"per-run\", smaller sizes, or --workdir on a bigger filesystem",
                    crate::base::units::format_bytes_human(bytes as f64),
                    crate::testbed::room::describe(&base),
                    crate::base::units::format_bytes_human(avail as f64)
                ),
            ));
        }
    }
    Ok(())
}

/// What the plan's runs write on a testbed at most, for the room a sparse image takes: the
/// largest workload's estimate, or the whole testbed when it is aged (aging fills it).
pub(super) fn written(spec: &TestbedSpec, workloads: &[PlanWorkload], aged: bool) -> u64 {
    if aged {
        return spec.size;
    }
    workloads
        .iter()
        .map(|w| w.workload.space_needed().unwrap_or(u64::MAX))
        .max()
        .unwrap_or(0)
}

/// Runs are made one at a time, so the disk must hold each testbed's image (and its journal
/// image) at once: refused as the run's own check refuses it, at the key at fault.
pub(super) fn check_disk(tb: &PlanTestbed, at: &FieldSpans, written: u64) -> Result<()> {
    crate::testbed::room::check(&tb.spec, written).map_err(|e| {
        let (span, key) = match crate::base::error::bad_field(&e) {
            Some("journal") => (at.journal.clone(), "journal"),
            _ => (at.size.clone(), at.size_key.as_str()),
        };
        fault(span, key, format!("{e:#}"))
    })
}
