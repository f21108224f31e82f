//! A plan's testbeds fitted to its workloads, once both are read: room on the filesystem
//! (grown or shrunk under `--scale`), inodes, memory, and room for each image on the disk that
//! holds it ([`super::room`]), each refusal at the key of the `[[testbed]]` that says the value
//! at fault.

use std::ops::Range;

use anyhow::Result;

use super::fault::fault_naming;
use super::room;
use super::testbeds::FieldSpans;
use super::{PlanTestbed, PlanWorkload};
use crate::base::error::bad_input;
use crate::base::units::format_size;
use crate::lab::runner::admit;

/// The plan's testbeds as [`super::testbeds::parse_testbeds`] read them, fitted to its workloads (room,
/// inodes, memory, the disk that holds their images; `aged`: the plan ages every filesystem
/// first), each refusal at the key at fault; `notes` gets what fitting changed. `scale_f` is
/// `--scale`; `--mem-limit` (`mem_limit`) then replaces every testbed's limit. `plan_file`: the
/// plan's (a path, or `preset NAME`), for notes.
pub(super) fn fitted(
    (mut testbeds, spans): (Vec<PlanTestbed>, Vec<FieldSpans>),
    plan_file: &str,
    (scale_f, mem_limit): (f64, Option<u64>),
    workloads: &[PlanWorkload],
    aged: bool,
    notes: &mut Vec<String>,
) -> Result<Vec<PlanTestbed>> {
    for (tb, at) in testbeds.iter_mut().zip(spans) {
        crate::base::signals::check()?;
        fit_testbed(tb, &at, workloads, scale_f, notes)?;
        fit_inodes(plan_file, tb, workloads, notes)?;
        fit_memory(tb, at.mem_limit.clone(), workloads)?;
        let writes = room::written(&tb.spec, workloads, aged);
        room::check_disk(tb, &at, writes)?;
    }
    // --mem-limit replaces every testbed's limit as given, as it limits a bench run.
    if let Some(m) = mem_limit {
        for tb in &mut testbeds {
            tb.mem_limit = Some(m);
        }
    }
    Ok(testbeds)
}

/// The smallest testbed `--scale` below 1 shrinks an image to, unless its mkfs needs more
/// (xfs refuses less than 300M): small enough that a smoke run of an aging study (whose data
/// is a share of its filesystem) takes seconds even on an emulated disk.
const MIN_SCALED_SIZE: u64 = 64 << 20;

/// Checks that every workload fits on the testbed. As written (scale 1) a testbed too small is
/// an error at its `size`; under `--scale` testbeds grow to fit (rounded up to 64M), with a note.
/// Below scale 1 an image testbed first shrinks with the scale (to at least
/// [`MIN_SCALED_SIZE`], its mkfs's minimum and twice the biggest workload's estimate): a
/// workload whose work is a share of its filesystem (aging to a usage)
/// shrinks with it, and mkfs and the fit checks work on the smaller size.
fn fit_testbed(
    tb: &mut PlanTestbed,
    at: &FieldSpans,
    workloads: &[PlanWorkload],
    scale_f: f64,
    notes: &mut Vec<String>,
) -> Result<()> {
    // Every workload's estimate was checked when it was parsed (an overflow is refused there).
    let need_of = |w: &PlanWorkload| w.workload.space_needed().unwrap_or(u64::MAX);
    let Some(big) = workloads.iter().max_by_key(|w| need_of(w)) else {
        return Ok(());
    };
    let need = need_of(big);
    if scale_f < 1.0 && tb.spec.device.is_none() {
        // Twice the estimate: a filesystem's own metadata (inode tables, journal, directory
        // blocks of a deep tree) is not in it, and the run's check after mkfs is exact.
        let scaled = ((tb.spec.size as f64 * scale_f) as u64)
            .max(MIN_SCALED_SIZE)
            .max(tb.spec.fs.min_size())
            .max(need.saturating_mul(2))
            .next_multiple_of(64 << 20);
        if scaled < tb.spec.size {
            notes.push(format!(
                "testbed {} shrunk from {} to {} with --scale {scale_f}",
                tb.spec.label,
                format_size(tb.spec.size),
                format_size(scaled)
            ));
            tb.spec.size = scaled;
        }
    }
    if need <= admit::usable(tb.spec.size) {
        return Ok(());
    }
    if scale_f == 1.0 {
        // As written, the plan is admitted or refused as `bench` would be on this testbed.
        return admit::space(&tb.spec, &*big.workload).map_err(|e| {
            let (label, e) = (tb.spec.label.clone(), e.to_string());
            fault_naming(at.size.clone(), &at.size_key, &big.at, move |w| {
                format!("testbed {label:?}: {e} (the workload at {w})")
            })
        });
    }
    let Some(grown) = admit::fitting_size(need) else {
        let (kind, need) = (
            big.kind,
            crate::base::units::format_bytes_human(need as f64),
        );
        return Err(fault_naming(
            at.size.clone(),
            &at.size_key,
            &big.at,
            move |w| {
                format!(
                "the scaled workload at {w} ({kind}) needs about {need}, more than any testbed can be; use a smaller --scale"
            )
            },
        ));
    };
    notes.push(format!(
        "testbed {} grown from {} to {} to fit the scaled {} workload",
        tb.spec.label,
        format_size(tb.spec.size),
        format_size(grown),
        big.kind
    ));
    tb.spec.size = grown;
    Ok(())
}

/// Checks that a testbed's memory limit holds what each workload needs for itself (fsgauge's
/// own memory plus the workload's buffers: the figure the run checks again before it starts),
/// so a limit too small is refused at its `mem_limit` before anything is made.
fn fit_memory(
    tb: &PlanTestbed,
    limit_at: Option<Range<usize>>,
    workloads: &[PlanWorkload],
) -> Result<()> {
    let (Some(limit), Some(at)) = (tb.mem_limit, limit_at) else {
        return Ok(());
    };
    for w in workloads {
        admit::memory(limit, &*w.workload, admit::TOOL_RSS_ESTIMATE).map_err(|e| {
            let (label, kind, e) = (tb.spec.label.clone(), w.kind, e.to_string());
            let limit = format_size(limit);
            fault_naming(at.clone(), "mem_limit", &w.at, move |wl| {
                format!(
                    "testbed {label:?} is limited to {limit}; for the workload at {wl} ({kind}): {e}"
                )
            })
        })?;
    }
    Ok(())
}

/// Checks that every workload's files fit in the inodes the testbed's mkfs will make. An ext
/// testbed whose mkfs options say nothing about inodes gets `-N` when its default would be
/// too few (with a note; the result's mkfs command line records it); an explicit `-N` or
/// `-i` that is too small is refused, naming the `-N` that fits.
fn fit_inodes(
    plan_file: &str,
    tb: &mut PlanTestbed,
    workloads: &[PlanWorkload],
    notes: &mut Vec<String>,
) -> Result<()> {
    let Some(big) = workloads.iter().max_by_key(|w| w.workload.inodes_needed()) else {
        return Ok(());
    };
    match admit::inodes(&mut tb.spec, &*big.workload) {
        Ok(note) => {
            notes.extend(
                note.map(|n| format!("{n} (the workload at {})", big.at.line_in(plan_file))),
            );
            Ok(())
        }
        Err(e) => Err(bad_input(format!(
            "{}: mkfs: {e} (the workload at {})",
            tb.at,
            big.at.line_in(&tb.at.file)
        ))),
    }
}
