//! Sweeps belong to the workload: a workload names its list-valued parameters that are sweep
//! axes ([`Workload::sweep_axes`]), and every combination of their values is one cell — a
//! workload of the same kind with one value on each axis. `fsgauge bench KIND --fs` and a
//! plan with `fresh = "per-run"` run each cell on its own fresh testbed with its own result
//! (the block-reservation study's "each time on a fresh created filesystem").

use crate::base::error::bad_input;
use crate::workload::registry;
use crate::workload::Workload;

/// One cell of a sweep.
pub struct Cell {
    /// The workload with one value on each axis.
    pub workload: Box<dyn Workload>,
    /// Per axis (in [`Workload::sweep_axes`] order): its name, and the index of the cell's
    /// value in the whole sweep's list.
    pub at: Vec<(&'static str, usize)>,
}

/// The most cells one sweep may have (the product of its axes' lengths), from flags and from
/// plans alike. A sweep is counted by multiplying its axes' lengths before any cell is made:
/// 2,000 `threads` × 2,000 `block` values are 16 KB of plan but 4,000,000 cells, which took
/// gigabytes to expand. 10,000 cells of a second each are already close to three hours.
pub const MAX_CELLS: u64 = 10_000;

/// How many cells `wl`'s sweep has, and its axes as a product (`2000 threads × 2000 block`);
/// `None` as the count when the product does not fit in 64 bits.
pub fn count(wl: &dyn Workload) -> (Option<u64>, String) {
    let params = wl.params();
    let mut n = Some(1u64);
    let mut product = Vec::new();
    for &a in wl.sweep_axes() {
        let len = params[a].as_array().map_or(1, Vec::len) as u64;
        if len > 1 {
            product.push(format!("{len} {a}"));
        }
        n = n.and_then(|n| n.checked_mul(len));
    }
    (n, product.join(" × "))
}

/// The number of `wl`'s cells, or why there are too many ([`MAX_CELLS`]); counted, not
/// expanded.
pub fn check_count(wl: &dyn Workload) -> anyhow::Result<u64> {
    match count(wl) {
        (Some(n), _) if n <= MAX_CELLS => Ok(n),
        (n, product) => Err(bad_input(format!(
            "the {} sweep has {product} = {} cells, more than the {MAX_CELLS} one sweep may have; sweep fewer values (each cell is a run, or a phase of one), or split the sweep over several runs",
            wl.kind(),
            n.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
        ))),
    }
}

/// The cells of `wl`'s sweep, in run order (the last axis varies fastest); one cell, the
/// workload itself rebuilt, when it has no axis with more than one value. A sweep of more
/// than [`MAX_CELLS`] cells is refused before any is made.
pub fn cells(wl: &dyn Workload) -> anyhow::Result<Vec<Cell>> {
    check_count(wl)?;
    let params = wl.params();
    let kind = registry::find(wl.kind())
        .ok_or_else(|| bad_input(format!("workload kind {:?} is not registered", wl.kind())))?;
    let axes: Vec<(&'static str, Vec<serde_json::Value>)> = wl
        .sweep_axes()
        .iter()
        .map(|&a| {
            let values = match &params[a] {
                serde_json::Value::Array(v) => v.clone(),
                other => vec![other.clone()],
            };
            (a, values)
        })
        .collect();
    let mut combos: Vec<Vec<usize>> = vec![Vec::new()];
    for (_, values) in &axes {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                (0..values.len()).map(move |i| {
                    let mut c = c.clone();
                    c.push(i);
                    c
                })
            })
            .collect();
    }
    combos
        .into_iter()
        .map(|combo| {
            let mut p = params.clone();
            let mut at = Vec::new();
            for ((name, values), &i) in axes.iter().zip(&combo) {
                p[*name] = serde_json::Value::Array(vec![values[i].clone()]);
                at.push((*name, i));
            }
            let workload = (kind.build)(p)
                .map_err(|e| bad_input(format!("{}: a cell of the sweep: {e}", kind.name)))?;
            Ok(Cell { workload, at })
        })
        .collect()
}

/// True when `wl` runs as one run per cell on fresh testbeds.
pub fn splits(wl: &dyn Workload) -> bool {
    wl.fresh_per_cell()
        && wl
            .sweep_axes()
            .iter()
            .map(|&a| wl.params()[a].as_array().map_or(1, Vec::len))
            .product::<usize>()
            > 1
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    #[test]
    fn a_sweep_runs_each_cell_on_its_own_testbed_when_fresh_per_run() {
        let tio = "[[testbed]]\nfs = \"ext4\"\nsize = \"1G\"\n\n[[workload]]\nkind = \"tio\"\nthreads = [1, 4]\nmode = \"seqwrite\"\nblock = [\"4K\", \"128K\"]\nfile_size = \"1M\"\n";
        let p = |text: &str| crate::lab::plan::parse_test(text, None);
        let plan = p(tio).unwrap();
        let described: Vec<String> = plan.workloads.iter().map(|w| w.describe()).collect();
        assert_eq!(
            described,
            [
                "tio block=4K file_size=1M mode=seqwrite threads=1",
                "tio block=4K file_size=1M mode=seqwrite threads=4",
                "tio block=128K file_size=1M mode=seqwrite threads=1",
                "tio block=128K file_size=1M mode=seqwrite threads=4",
            ]
        );
        assert_eq!(
            plan.workloads[3].workload.params()["block"],
            serde_json::json!([131072])
        );
        assert!(plan.workloads.iter().all(|w| w.at.line == 5));
        let one = p(&format!("fresh = \"per-testbed\"\n{tio}")).unwrap();
        assert_eq!(
            one.workloads.len(),
            1,
            "one filesystem: the cells are phases of one run"
        );
        let off = p(&format!("{tio}fresh_fs = false\n")).unwrap();
        assert_eq!(
            off.workloads.len(),
            1,
            "fresh_fs = false keeps the cells in one run"
        );
    }
}
