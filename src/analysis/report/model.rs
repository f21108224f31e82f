//! The report model: a pure function of result documents. Results are grouped into cells
//! (testbed × workload × phase), every metric of a cell is summarised over its repetitions,
//! and the study-style tables and the warnings are derived from the cells. Ordering is stable
//! (results sorted by start time, testbed, workload, repetition, spec hash; labels in order of
//! first appearance), so the same result files always give the same report, byte for byte.

use std::collections::BTreeMap;

use super::lateness::is_lateness_warning;
use super::metrics::Metric;
use crate::base::units::{format_bytes_human, format_size};
use crate::results::tables::{Against, KindTables};
use crate::results::RunResult;

pub use super::cells::{
    cells, line_phase, sort_results, threads_of, workload_labels, Cell, CellMetric, Environment,
    Report,
};
pub use super::findings_table::findings_table;
pub use crate::base::text::Table;

pub use crate::base::text::fmt_num;

/// `+12.3%` from base to new.
pub fn pct_change(base: f64, new: f64) -> Option<f64> {
    (base != 0.0).then(|| (new - base) / base.abs() * 100.0)
}

fn fmt_pct(p: Option<f64>) -> String {
    p.map_or("-".into(), |p| format!("{p:+.1}%"))
}

/// Builds the report from results (any order; they are sorted here), with the tables each
/// kind registered for its results (`kinds`).
pub fn build(
    mut results: Vec<RunResult>,
    baseline: Option<&str>,
    kinds: &[KindTables],
) -> anyhow::Result<Report> {
    if results.is_empty() {
        return Err(crate::base::error::bad_input(
            "no results to report on; give result files or directories holding them",
        ));
    }
    sort_results(&mut results);
    let (testbeds, workloads, cells) = cells(&results);
    let baseline = match baseline {
        Some(b) if testbeds.iter().any(|t| t == b) => b.to_string(),
        Some(b) => {
            return Err(crate::base::error::bad_input(format!(
                "--baseline {b:?} is not a testbed of these results; testbeds: {}",
                testbeds.join(", ")
            )))
        }
        None => testbeds[0].clone(),
    };
    let labels = workload_labels(&results, &[]);
    let mut against: Vec<(String, Against)> = Vec::new();
    for (r, w) in results.iter().zip(&labels) {
        for k in kinds.iter().filter(|k| k.kind == r.workload.kind) {
            for a in k.against {
                if !against.iter().any(|(w2, a2)| w2 == w && a2.x == a.x) {
                    against.push((w.clone(), *a));
                }
            }
        }
    }
    // In the order of the cells, as the plots are.
    against.sort_by_key(|(w, _)| workloads.iter().position(|x| x == w));
    let mut tables = vec![
        elapsed_table(&testbeds, &cells, any_paused(&results)),
        main_table(&testbeds, &workloads, &cells, &baseline),
    ];
    if let Some(t) = threads_table(&testbeds, &cells, &baseline) {
        tables.push(t);
    }
    if let Some(t) = layout_table(&cells, &against) {
        tables.push(t);
    }
    if let Some(t) = journal_table(&results) {
        tables.push(t);
    }
    // The kinds' own tables (registered with each kind; the command line hands them in).
    tables.extend(crate::results::tables::all(kinds, &results));
    if let Some(t) = crate::analysis::report::ranks::rank_table(&results) {
        tables.push(t);
    }
    if let Some(t) = crate::analysis::report::rate::rate_table(&results) {
        tables.push(t);
    }
    tables.push(stats_table(&cells));
    let warnings = warnings(&results, &cells);
    let findings = crate::analysis::findings::sentence::stated(&results);
    if let Some(t) = crate::analysis::report::lateness::lateness_table(&results) {
        tables.insert(0, t);
    }
    if let Some(t) = crate::analysis::report::durability::durability_table(&results) {
        tables.insert(0, t);
    }
    if let Some(t) = crate::analysis::report::forest::by_disk_table(&findings) {
        tables.insert(0, t);
    }
    let environment = results
        .iter()
        .zip(&labels)
        .map(|(r, w)| environment(r, w))
        .collect();
    Ok(Report {
        title: format!(
            "fsgauge report: {} run(s), {} testbed(s), {} workload(s)",
            results.len(),
            testbeds.len(),
            workloads.len()
        ),
        testbeds,
        workloads,
        baseline,
        cells,
        tables,
        warnings,
        environment,
        environment_differs: crate::results::env_spread(&results),
        findings,
        results,
        against,
    })
}

fn find<'a>(cells: &'a [Cell], t: &str, w: &str, p: &str) -> Option<&'a Cell> {
    cells
        .iter()
        .find(|c| c.testbed == t && c.workload == w && c.phase == p)
}

/// Workload × phase rows in cell order.
fn rows_of(cells: &[Cell]) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = Vec::new();
    for c in cells {
        let k = (c.workload.clone(), c.phase.clone());
        if !rows.contains(&k) {
            rows.push(k);
        }
    }
    rows
}

/// Whether any phase's emulated disk clock stopped: tables then say that their times and
/// rates are on the disk's clock.
pub fn any_paused(results: &[RunResult]) -> bool {
    results
        .iter()
        .flat_map(|r| &r.phases)
        .any(|p| p.times().paused())
}

/// What a table's note adds when some phase's disk clock stopped.
pub const DISK_TIME_NOTE: &str = "; on an emulated disk whose clock stopped while the emulator was behind its model, times and rates are on the disk's clock (disk time = wall time − the pause), and the wall time and pause stand beside them in the statistics";

fn elapsed_table(testbeds: &[String], cells: &[Cell], paused: bool) -> Table {
    let mut headers = vec!["workload".to_string(), "phase".to_string()];
    headers.extend(testbeds.iter().cloned());
    let rows = rows_of(cells)
        .into_iter()
        .map(|(w, p)| {
            let mut row = vec![w.clone(), p.clone()];
            for t in testbeds {
                row.push(match find(cells, t, &w, &p) {
                    Some(c) => match (c.metric("elapsed"), c.metric("sys")) {
                        (Some(e), Some(s)) => {
                            crate::base::text::elapsed_sys(e.summary.mean, s.summary.mean)
                        }
                        _ => "-".into(),
                    },
                    None => "-".into(),
                });
            }
            row
        })
        .collect();
    Table {
        title: "Elapsed (sys) per phase".into(),
        label_columns: 2,
        note: format!(
            "seconds, mean over repetitions: wall time, and in brackets kernel CPU time, as the low-memory study tabulated its configurations{}",
            if paused { DISK_TIME_NOTE } else { "" }
        ),
        headers,
        rows,
    }
}

fn main_table(testbeds: &[String], _w: &[String], cells: &[Cell], baseline: &str) -> Table {
    let mut headers = vec![
        "workload".to_string(),
        "phase".to_string(),
        "metric".to_string(),
    ];
    for t in testbeds {
        headers.push(t.clone());
        if t != baseline {
            headers.push(format!("{t} vs base"));
        }
    }
    let rows = rows_of(cells)
        .into_iter()
        .map(|(w, p)| {
            let main = testbeds
                .iter()
                .find_map(|t| find(cells, t, &w, &p))
                .map(|c| c.main.clone())
                .unwrap_or_default();
            let metric = Metric::core(&main).map(|m| m.label()).unwrap_or_default();
            let base = find(cells, baseline, &w, &p)
                .and_then(|c| c.metric(&main))
                .map(|m| m.summary.mean);
            let mut row = vec![w.clone(), p.clone(), metric];
            for t in testbeds {
                let m = find(cells, t, &w, &p).and_then(|c| c.metric(&main));
                row.push(m.map_or("-".into(), |m| {
                    format!(
                        "{} ± {} (n={})",
                        fmt_num(m.summary.mean),
                        fmt_num(m.summary.sd),
                        m.summary.n
                    )
                }));
                if t != baseline {
                    row.push(fmt_pct(
                        base.zip(m).and_then(|(b, m)| pct_change(b, m.summary.mean)),
                    ));
                }
            }
            row
        })
        .collect();
    Table {
        title: "Mean ± standard deviation per configuration".into(),
        label_columns: 3,
        note: format!("the phase's main figure (throughput when it moved data, else operations per second), mean ± sample standard deviation over the n repetitions read, and the change against the baseline {baseline}"),
        headers,
        rows,
    }
}

fn threads_table(testbeds: &[String], cells: &[Cell], baseline: &str) -> Option<Table> {
    // (series, phase) -> thread counts seen
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut counts: BTreeMap<(String, String), Vec<u64>> = BTreeMap::new();
    for c in cells {
        let k = (c.series.clone(), c.line_phase.clone());
        if !lines.contains(&k) {
            lines.push(k.clone());
        }
        let v = counts.entry(k).or_default();
        if !v.contains(&c.threads) {
            v.push(c.threads);
        }
    }
    lines.retain(|k| counts[k].len() >= 2);
    if lines.is_empty() {
        return None;
    }
    let mut headers = vec![
        "workload".to_string(),
        "phase".to_string(),
        "threads".to_string(),
    ];
    for t in testbeds {
        headers.push(t.clone());
        if t != baseline {
            headers.push(format!("{t} vs base"));
        }
    }
    let mut rows = Vec::new();
    for (s, p) in &lines {
        let mut ts = counts[&(s.clone(), p.clone())].clone();
        ts.sort();
        for n in ts {
            let pick = |t: &str| {
                cells
                    .iter()
                    .find(|c| {
                        c.testbed == t && &c.series == s && &c.line_phase == p && c.threads == n
                    })
                    .and_then(|c| c.main_metric())
            };
            let mut row = vec![s.clone(), p.clone(), n.to_string()];
            let base = pick(baseline).map(|m| m.summary.mean);
            for t in testbeds {
                let m = pick(t);
                row.push(m.map_or("-".into(), |m| {
                    format!("{} {}", fmt_num(m.summary.mean), m.unit)
                }));
                if t != baseline {
                    row.push(fmt_pct(
                        base.zip(m).and_then(|(b, m)| pct_change(b, m.summary.mean)),
                    ));
                }
            }
            rows.push(row);
        }
    }
    Some(Table {
        title: "Throughput by threads".into(),
        label_columns: 2,
        note: format!("mean of the phase's main figure at each thread (or client) count, and the change against the baseline {baseline}, as the block-reservation study tabulated tiobench"),
        headers,
        rows,
    })
}

/// The size of a result's external journal (`ram:16M` → 16 MiB), when it has one.
fn journal_size(r: &RunResult) -> Option<u64> {
    let spec = r.testbed.journal.as_deref()?;
    let size = spec.split_once(':').map_or(spec, |(_, s)| s);
    crate::base::units::parse_size(size).ok().filter(|&s| s > 0)
}

/// How hard each phase worked the external journal: bytes written to the journal device as
/// a multiple of the journal's size, mean over repetitions, one row per workload × phase and
/// a column per testbed (a journal-size study only means something where the smallest
/// journal is written many times over). `None` when no result has an external journal.
pub fn journal_table(results: &[RunResult]) -> Option<Table> {
    let labels = workload_labels(results, &[]);
    let mut testbeds: Vec<String> = Vec::new();
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut values: Vec<((String, String, String), Vec<f64>)> = Vec::new();
    for (r, w) in results.iter().zip(&labels) {
        let Some(size) = journal_size(r) else {
            continue;
        };
        for p in &r.phases {
            let Some(j) = p.journal_device else { continue };
            if !testbeds.contains(&r.testbed.label) {
                testbeds.push(r.testbed.label.clone());
            }
            let row = (w.clone(), p.name.clone());
            if !rows.contains(&row) {
                rows.push(row);
            }
            let key = (w.clone(), p.name.clone(), r.testbed.label.clone());
            let x = j.write_bytes as f64 / size as f64;
            match values.iter_mut().find(|(k, _)| *k == key) {
                Some((_, xs)) => xs.push(x),
                None => values.push((key, vec![x])),
            }
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut headers = vec!["workload".to_string(), "phase".to_string()];
    headers.extend(testbeds.iter().cloned());
    let rows = rows
        .into_iter()
        .map(|(w, p)| {
            let mut row = vec![w.clone(), p.clone()];
            for t in &testbeds {
                let key = (w.clone(), p.clone(), t.clone());
                row.push(
                    match values.iter().find(|(k, _)| *k == key).map(|(_, xs)| xs) {
                        Some(xs) => {
                            let mean = xs.iter().sum::<f64>() / xs.len() as f64;
                            format!("{}×", crate::analysis::findings::sentence::sig(mean, 3))
                        }
                        None => "-".into(),
                    },
                );
            }
            row
        })
        .collect();
    Some(Table {
        title: "Journal writes".into(),
        label_columns: 2,
        note: "bytes written to the external journal device during the phase, as a multiple of the journal's size (mean over repetitions); a phase that writes less than its journal several times over cannot show what the journal's size does".into(),
        headers,
        rows,
    })
}

/// The block-layout figures phases recorded (aging checkpoints, write cells of threaded I/O): one row per
/// testbed × workload × phase, as the fragmentation study tabulated fragmentation against usage.
///
/// The metrics kinds draw their layout against (`against`: aging's usage) lead the figures.
fn layout_table(cells: &[Cell], against: &[(String, Against)]) -> Option<Table> {
    // (column header, metric keys in order of preference)
    const LAYOUT: [(&str, &[&str]); 5] = [
        (
            "extents per file",
            &["extra.extents_per_file", "extra.extents_per_file_mean"],
        ),
        ("layout score", &["extra.layout_score"]),
        ("fragmentation factor", &["extra.fragmentation_factor"]),
        ("free extents", &["extra.free_extents"]),
        ("largest free share", &["extra.largest_free_share"]),
    ];
    let mut leading: Vec<(&str, &[&str])> = Vec::new();
    for (_, a) in against {
        if !leading.iter().any(|(h, _)| *h == a.x_desc) {
            leading.push((a.x_desc, std::slice::from_ref(&a.x)));
        }
    }
    let columns: Vec<(&str, &[&str])> = leading.into_iter().chain(LAYOUT).collect();
    let pick = |c: &Cell, keys: &[&str]| {
        keys.iter()
            .find_map(|k| c.metric(k))
            .map(|m| m.summary.mean)
    };
    let rows: Vec<Vec<String>> = cells
        .iter()
        .filter(|c| pick(c, LAYOUT[0].1).is_some() || pick(c, LAYOUT[1].1).is_some())
        .map(|c| {
            let mut row = vec![c.testbed.clone(), c.workload.clone(), c.phase.clone()];
            row.extend(
                columns
                    .iter()
                    .map(|(_, keys)| pick(c, keys).map_or("-".into(), fmt_num)),
            );
            row
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut headers = vec![
        "testbed".to_string(),
        "workload".to_string(),
        "phase".to_string(),
    ];
    headers.extend(columns.iter().map(|(h, _)| h.to_string()));
    Some(Table {
        title: "Block layout per phase".into(),
        label_columns: 3,
        note: "mean over repetitions of the layout recorded after the phase's writes: extents per file (physically adjacent extents merged, as filefrag counts), layout score (1 = every block follows the previous one), fragmentation factor sum(E - I) / sum(E), free-space extents; first the figure a kind draws its layout against (aging: usage, one row per checkpoint, as the fragmentation study tabulated them)".into(),
        headers,
        rows,
    })
}

fn stats_table(cells: &[Cell]) -> Table {
    let headers = [
        "testbed",
        "workload",
        "phase",
        "metric",
        "n",
        "mean",
        "sd",
        "cv",
        "95% CI",
        "min",
        "median",
        "max",
        "harmonic mean",
    ]
    .map(String::from)
    .to_vec();
    let mut rows = Vec::new();
    for c in cells {
        for m in &c.metrics {
            let s = &m.summary;
            let name = if m.unit.is_empty() {
                m.name.clone()
            } else {
                format!("{} ({})", m.name, m.unit)
            };
            rows.push(vec![
                c.testbed.clone(),
                c.workload.clone(),
                c.phase.clone(),
                name,
                s.n.to_string(),
                fmt_num(s.mean),
                fmt_num(s.sd),
                format!("{:.1}%", s.cv * 100.0),
                format!("{} .. {}", fmt_num(s.ci_low), fmt_num(s.ci_high)),
                fmt_num(s.min),
                fmt_num(s.median),
                fmt_num(s.max),
                m.harmonic_mean.map_or(String::new(), fmt_num),
            ]);
        }
    }
    Table {
        title: "Statistics per cell".into(),
        label_columns: 4,
        note: "testbed × workload × phase × metric over repetitions: sample standard deviation, coefficient of variation, 95% confidence interval of the mean from Student's t; harmonic mean for rates".into(),
        headers,
        rows,
    }
}

/// Coefficient of variation above which a cell is flagged.
pub const HIGH_CV: f64 = 0.10;

/// A measured phase that lasts less than this measures the machine more than the filesystem.
pub const SHORT_PHASE_S: f64 = crate::analysis::findings::SHORT_PHASE_S;
/// What `--scale` advice aims a short phase at.
const AIM_PHASE_S: f64 = 2.0;

/// Plan runs whose phases (those the questions use, when there are questions) last less than
/// [`SHORT_PHASE_S`] on average: one warning per workload × phase, at its shortest testbed,
/// naming the `--scale` that would make it last about [`AIM_PHASE_S`].
pub fn short_phases(results: &[RunResult], cells: &[Cell]) -> Vec<String> {
    let Some(study) = results.iter().find_map(|r| r.study.as_ref()) else {
        return Vec::new();
    };
    let questions = crate::analysis::findings::questions(results);
    let asked = |phase: &str| {
        questions.is_empty()
            || questions.iter().any(|q| {
                q.phase.as_deref() == Some(phase) || q.baseline == phase || q.variant == phase
            })
    };
    let mut shortest: Vec<(&Cell, f64)> = Vec::new();
    for c in cells {
        let Some(mean) = c.metric("elapsed").map(|m| m.summary.mean) else {
            continue;
        };
        if mean <= 0.0 || mean >= SHORT_PHASE_S || !asked(&c.phase) {
            continue;
        }
        match shortest
            .iter_mut()
            .find(|(o, _)| o.workload == c.workload && o.phase == c.phase)
        {
            Some(slot) if mean < slot.1 => *slot = (c, mean),
            Some(_) => {}
            None => shortest.push((c, mean)),
        }
    }
    shortest
        .into_iter()
        .map(|(c, mean)| {
            let scale = study.scale * AIM_PHASE_S / mean;
            format!(
                "{} · {} · {}: the phase lasts {}, under {SHORT_PHASE_S} s, so it measures the machine more than the filesystem; --scale {} would make it about {AIM_PHASE_S} s",
                c.testbed,
                c.workload,
                c.phase,
                crate::base::text::format_secs_unit(mean),
                scale_up(scale)
            )
        })
        .collect()
}

/// A `--scale` rounded up: whole from 1, two significant figures below (`0.41` → `0.41`,
/// `0.123` → `0.13`).
fn scale_up(scale: f64) -> String {
    if scale >= 1.0 {
        format!("{}", scale.ceil())
    } else {
        let step = 10f64.powi(scale.log10().floor() as i32 - 1);
        crate::analysis::findings::sentence::sig((scale / step).ceil() * step, 2)
    }
}

fn warnings(results: &[RunResult], cells: &[Cell]) -> Vec<String> {
    let mut w = Vec::new();
    let few: Vec<String> = cells
        .iter()
        .filter_map(|c| c.main_metric().map(|m| (c, m.summary.n)))
        .filter(|(_, n)| *n < 3)
        .map(|(c, n)| format!("{} · {} · {}: {n}", c.testbed, c.workload, c.phase))
        .collect();
    if !few.is_empty() {
        let shown = few.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
        w.push(format!(
            "{} of {} cell(s) have fewer than 3 repetitions ({shown}{}), so their spread and confidence interval mean little; run with reps = 3 or more (or reps = \"auto\")",
            few.len(),
            cells.len(),
            if few.len() > 3 { "; ..." } else { "" }
        ));
    }
    for c in cells {
        let Some(m) = c.main_metric() else { continue };
        if m.summary.n >= 3 && m.summary.cv > HIGH_CV {
            w.push(format!(
                "{} · {} · {}: {} varies by {:.0}% between repetitions (CV over {:.0}%); use more repetitions (reps = \"auto\"), a quieter machine, or cold = \"drop\"",
                c.testbed,
                c.workload,
                c.phase,
                m.name,
                m.summary.cv * 100.0,
                HIGH_CV * 100.0
            ));
        }
    }
    w.extend(short_phases(results, cells));
    let mut seen_loop = Vec::new();
    for r in results {
        if r.testbed.loop_direct_io == Some(false) && !seen_loop.contains(&r.testbed.label) {
            seen_loop.push(r.testbed.label.clone());
            w.push(format!(
                "{}: the loop device did not use direct I/O on its image, so the host's page cache sits under the filesystem and flatters its figures; use a backing filesystem that supports O_DIRECT (or --loop-direct-io on)",
                r.testbed.label
            ));
        }
    }
    let mut seen_cache = Vec::new();
    for r in results {
        let cache = r
            .conditions
            .mem_limit
            .or(r.testbed.memory_limit)
            .unwrap_or(r.host.memory);
        for p in &r.phases {
            // Read phases: their workload declares the operations that read file data (for
            // results written before operations carried that declaration, as their kind
            // declares them today: `registry::declare_missing_metrics`).
            let read_phase = p.op_stats.values().any(|s| s.primary && s.reads);
            let working_set = p.bytes;
            if read_phase
                && r.conditions.cold == "none"
                && working_set > 0
                && working_set < cache
                && !seen_cache.contains(&(r.testbed.label.clone(), p.name.clone()))
            {
                seen_cache.push((r.testbed.label.clone(), p.name.clone()));
                w.push(format!(
                    "{} · {}: the working set ({}) is smaller than the memory available for the page cache ({}) and caches were not dropped, so reads may come from memory; use cold = \"drop\", a memory limit, or a larger working set",
                    r.testbed.label,
                    p.name,
                    format_bytes_human(working_set as f64),
                    format_bytes_human(cache as f64)
                ));
            }
        }
    }
    for r in results {
        if let Some(why) = r.disturbed() {
            let made = match r.set_aside.len() {
                0 => "it was made once".to_string(),
                n => format!("it was made {} times and disturbed each time", n + 1),
            };
            w.push(format!(
                "{} · {} rep {}: {why}, so its figures measure that process too ({made}); find what disturbs this machine (another benchmark or test suite) and run it again",
                r.testbed.label,
                r.workload.kind,
                r.rep
            ));
        }
    }
    for r in results {
        // Older runs wrote a paragraph per phase the emulator fell behind in; the lateness
        // table holds those figures, read from the same records.
        for e in r.errors.iter().filter(|e| !is_lateness_warning(e)) {
            w.push(format!("{} rep {}: {e}", r.testbed.label, r.rep));
        }
    }
    w
}

fn environment(r: &RunResult, workload: &str) -> Environment {
    let t = &r.testbed;
    Environment {
        testbed: t.label.clone(),
        workload: workload.to_string(),
        rep: r.rep,
        fs: t.fs.clone(),
        size: format_size(t.size),
        mkfs: t.mkfs_args.join(" "),
        mount: t.mount_options.clone(),
        journal: t.journal.clone().unwrap_or_default(),
        memory_limit: r
            .conditions
            .mem_limit
            .or(t.memory_limit)
            .map(format_size)
            .unwrap_or_default(),
        backing: t.backing.clone(),
        device: t.device.clone().unwrap_or_default(),
        loop_direct_io: t
            .loop_direct_io
            .map_or(String::new(), |b| if b { "on" } else { "off" }.into()),
        cold: r.conditions.cold.clone(),
        kernel: r.host.kernel.clone(),
        host: format!(
            "{} ({} CPUs, {})",
            r.host.hostname,
            r.host.cpus,
            format_bytes_human(r.host.memory as f64)
        ),
        tool: format!("{} {}", r.tool.name, r.tool.version),
        started_at: r.started_at.clone(),
        seed: r.seed,
        spec_hash: r.spec_hash.chars().take(12).collect(),
        machine_load: machine_load(r),
        cpu_wait: cpu_wait(r),
    }
}

/// "4.2%": of the thread time of the run's phases that recorded it (threads × wall time,
/// added up), the share fsgauge's threads waited for a CPU; empty when none recorded it.
fn cpu_wait(r: &RunResult) -> String {
    let (mut wait_s, mut thread_s) = (0.0, 0.0);
    for w in r
        .phases
        .iter()
        .filter_map(|p| p.cpu_wait.map(|w| (w, p.wall_s)))
    {
        wait_s += w.0.run_delay_s();
        thread_s += w.1 * w.0.threads as f64;
    }
    if thread_s <= 0.0 {
        return String::new();
    }
    let share = wait_s / thread_s * 100.0;
    let mut s = format!("{share:.1}%");
    if share > crate::results::cpuwait::NOTABLE_CPU_WAIT * 100.0 {
        // A phase with more threads than CPUs queues behind itself: not the machine's alone.
        let most = r
            .phases
            .iter()
            .filter_map(|p| p.cpu_wait)
            .map(|w| w.threads)
            .max();
        match most {
            Some(t) if t > r.host.cpus.max(1) => {
                s.push_str(&format!(" ({t} threads on {} CPUs)", r.host.cpus.max(1)))
            }
            _ => s.push_str(" (the machine slowed the run)"),
        }
    }
    s
}

/// "steal 0.1%, CPU pressure 12%": the wall-time weighted means over the run's phases that
/// recorded them; empty when no phase recorded either. Steal is counted in `/proc/stat`'s 10 ms
/// ticks: a run whose phases each passed between two ticks has none, said as "steal unknown"
/// beside its pressure rather than left out.
fn machine_load(r: &RunResult) -> String {
    let mean = |f: &dyn Fn(&crate::results::HostLoad) -> Option<f64>| {
        let (mut sum, mut wall) = (0.0, 0.0);
        for p in &r.phases {
            if let Some(v) = p.host_load.as_ref().and_then(f) {
                sum += v * p.wall_s;
                wall += p.wall_s;
            }
        }
        (wall > 0.0).then(|| sum / wall)
    };
    let pct = |v: f64| {
        if v > 0.0 && v < 0.001 {
            format!("{:.2}%", v * 100.0)
        } else {
            format!("{:.1}%", v * 100.0)
        }
    };
    let pressure = mean(&|l| l.cpu_pressure).map(|v| format!("CPU pressure {}", pct(v)));
    let steal = match mean(&|l| l.steal) {
        Some(v) => Some(format!("steal {}", pct(v))),
        None => pressure
            .is_some()
            .then(|| "steal unknown (phases under a 10 ms tick)".to_string()),
    };
    [steal, pressure]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ")
}

/// The environment as a table.
pub fn environment_table(env: &[Environment]) -> Table {
    let headers = [
        "testbed",
        "workload",
        "rep",
        "fs",
        "size",
        "mkfs",
        "mount",
        "journal",
        "mem limit",
        "backing",
        "device",
        "loop dio",
        "cold",
        "kernel",
        "host",
        "tool",
        "started",
        "seed",
        "spec",
    ]
    .map(String::from)
    .to_vec();
    // Results written before fsgauge recorded the machine's load keep their table as it was.
    let loaded = env.iter().any(|e| !e.machine_load.is_empty());
    let waited = env.iter().any(|e| !e.cpu_wait.is_empty());
    let mut headers = headers;
    if loaded {
        headers.push("machine load".into());
    }
    if waited {
        headers.push("CPU wait".into());
    }
    let rows = env
        .iter()
        .map(|e| {
            vec![
                e.testbed.clone(),
                e.workload.clone(),
                e.rep.to_string(),
                e.fs.clone(),
                e.size.clone(),
                e.mkfs.clone(),
                e.mount.clone(),
                e.journal.clone(),
                e.memory_limit.clone(),
                e.backing.clone(),
                e.device.clone(),
                e.loop_direct_io.clone(),
                e.cold.clone(),
                e.kernel.clone(),
                e.host.clone(),
                e.tool.clone(),
                e.started_at.clone(),
                e.seed.to_string(),
                e.spec_hash.clone(),
            ]
            .into_iter()
            .chain(loaded.then(|| e.machine_load.clone()))
            .chain(waited.then(|| e.cpu_wait.clone()))
            .collect()
        })
        .collect();
    let mut note = String::from("as recorded in each result file");
    if loaded {
        note.push_str("; machine load: the share of all CPU time the hypervisor stole and of the wall time some task waited for a CPU, over the measured phases");
    }
    if waited {
        note.push_str(&format!(
            "; CPU wait: the share of the measured phases' thread time (threads × wall time) fsgauge's own threads were runnable but waited for a CPU, from their schedstat; over {:.0}% the machine, not the filesystem, slowed the run",
            crate::results::cpuwait::NOTABLE_CPU_WAIT * 100.0
        ));
    }
    Table {
        title: "Environment of every run".into(),
        label_columns: 19 + loaded as usize + waited as usize,
        note,
        headers,
        rows,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A run of a workload of kind `x` with these parameters and declarations, one phase of
    /// `workers` workers that moved `mb` MB in 1 s.
    fn run(
        params: serde_json::Value,
        declared: serde_json::Value,
        workers: u32,
        mb: u64,
    ) -> RunResult {
        let mut workload = serde_json::json!({"kind": "x", "params": params});
        if let (Some(w), Some(d)) = (workload.as_object_mut(), declared.as_object()) {
            w.extend(d.clone());
        }
        let lat = serde_json::to_value(crate::results::LatencySummary::default()).unwrap();
        let mut r: RunResult = serde_json::from_value(serde_json::json!({
            "schema": crate::results::SCHEMA, "tool": {"name": "fsgauge", "version": "0.1.0"},
            "host": {"hostname": "h", "kernel": "6.1", "cpus": 2, "memory": 1},
            "testbed": crate::results::TestbedInfo::default(), "workload": workload,
            "rep": 0, "seed": 1, "started_at": "", "spec_hash": "", "conditions": {"cold": "drop"},
            "phases": [{"name": "write", "wall_s": 1.0, "user_s": 0.0, "sys_s": 0.0, "ops": 1,
                "bytes": mb * 1_000_000, "ops_per_s": 1.0, "bytes_per_s": (mb * 1_000_000) as f64,
                "latency": lat, "device": null, "series": []}],
            "errors": []
        }))
        .unwrap();
        r.phases[0].workers = (0..workers)
            .map(|w| crate::results::WorkerSummary {
                worker: w,
                ..Default::default()
            })
            .collect();
        r.testbed.label = "a".into();
        r
    }

    #[test]
    fn only_parameters_declared_sizes_show_as_sizes() {
        let declared = serde_json::json!({"size_params": ["chunk"]});
        let rs = [
            run(
                serde_json::json!({"blocksize_x": 4096, "chunk": 8192}),
                declared.clone(),
                1,
                1,
            ),
            run(
                serde_json::json!({"blocksize_x": 8192, "chunk": 4096}),
                declared,
                1,
                1,
            ),
        ];
        assert_eq!(
            workload_labels(&rs, &[]),
            ["x blocksize_x=4096 chunk=8K", "x blocksize_x=8192 chunk=4K"]
        );
    }

    #[test]
    fn the_declared_line_axis_is_the_thread_axis_whatever_its_name() {
        let declared = serde_json::json!({"sweep_axes": ["depth"], "line_axis": "depth"});
        let rs: Vec<RunResult> = [1, 4, 8]
            .into_iter()
            .map(|d| {
                run(
                    serde_json::json!({"depth": d, "threads": 2}),
                    declared.clone(),
                    3,
                    d,
                )
            })
            .collect();
        let (_, _, cs) = cells(&rs);
        let depths: Vec<u64> = cs.iter().map(|c| c.threads).collect();
        assert_eq!(depths, [1, 4, 8]);
        assert!(cs.iter().all(|c| c.series == "x"), "{cs:?}");
        assert!(cs.iter().all(|c| c.axis == "depth"), "{cs:?}");
        let report = build(rs.clone(), None, &[]).unwrap();
        let t = report
            .tables
            .iter()
            .find(|t| t.title == "Throughput by threads")
            .expect("a table along the declared axis");
        let axis: Vec<&str> = t.rows.iter().map(|r| r[2].as_str()).collect();
        assert_eq!(axis, ["1", "4", "8"]);
        // Without a declared axis, a parameter named `threads` is no axis: the workers count.
        let plain: Vec<RunResult> = rs
            .into_iter()
            .map(|mut r| {
                r.workload.line_axis = None;
                r
            })
            .collect();
        let (_, _, cs) = cells(&plain);
        assert!(
            cs.iter().all(|c| c.threads == 3 && c.axis == "workers"),
            "{cs:?}"
        );
    }

    #[test]
    fn sweep_suffixes_come_off_phase_names_and_nothing_else_does() {
        assert_eq!(line_phase("seqwrite-4K-t4"), "seqwrite-4K");
        assert_eq!(line_phase("randread-128K-t64"), "randread-128K");
        assert_eq!(line_phase("mix-c8"), "mix");
        assert_eq!(line_phase("create"), "create");
        assert_eq!(line_phase("usage-75"), "usage-75");
        assert_eq!(line_phase("dir-t"), "dir-t");
        assert_eq!(line_phase("file-create"), "file-create");
    }

    #[test]
    fn a_steal_no_phase_could_count_is_said_unknown_never_left_out() {
        let load = |steal, cpu_pressure| {
            Some(crate::results::HostLoad {
                steal,
                cpu_pressure,
            })
        };
        let mut r = run(serde_json::json!({}), serde_json::json!({}), 1, 1);
        assert_eq!(machine_load(&r), "");
        r.phases[0].host_load = load(Some(0.002), Some(0.125));
        assert_eq!(machine_load(&r), "steal 0.2%, CPU pressure 12.5%");
        r.phases[0].host_load = load(None, Some(0.125));
        assert_eq!(
            machine_load(&r),
            "steal unknown (phases under a 10 ms tick), CPU pressure 12.5%"
        );
        r.phases[0].host_load = load(Some(0.0005), None);
        assert_eq!(machine_load(&r), "steal 0.05%");
    }

    #[test]
    fn the_environment_states_the_cpu_wait_beside_the_machine_load_only_where_recorded() {
        let wait = |run_delay_ns| crate::results::CpuWait {
            run_delay_ns,
            on_cpu_ns: 0,
            threads: 1,
        };
        let old = run(serde_json::json!({}), serde_json::json!({}), 1, 1);
        let t = environment_table(&[environment(&old, "x")]);
        assert!(
            !t.headers.iter().any(|h| h == "CPU wait"),
            "{:?}",
            t.headers
        );
        assert_eq!(t.note, "as recorded in each result file");
        let (mut quiet, mut busy) = (old.clone(), old);
        quiet.phases[0].cpu_wait = Some(wait(10_000_000));
        busy.phases[0].cpu_wait = Some(wait(250_000_000));
        let t = environment_table(&[environment(&quiet, "x"), environment(&busy, "x")]);
        assert_eq!(t.headers.last().map(String::as_str), Some("CPU wait"));
        assert_eq!(t.label_columns, t.headers.len());
        let cells: Vec<&str> = t.rows.iter().map(|r| r[r.len() - 1].as_str()).collect();
        assert_eq!(cells, ["1.0%", "25.0% (the machine slowed the run)"]);
        assert!(t.note.contains("; CPU wait: "), "{}", t.note);
        // More threads than CPUs queue behind each other: said as such, not as the machine.
        let mut own = busy.clone();
        own.host.cpus = 2;
        own.phases[0].cpu_wait = Some(crate::results::CpuWait {
            run_delay_ns: 2_000_000_000,
            on_cpu_ns: 0,
            threads: 8,
        });
        let t = environment_table(&[environment(&own, "x")]);
        let cell = &t.rows[0][t.rows[0].len() - 1];
        assert!(cell.ends_with("% (8 threads on 2 CPUs)"), "{cell}");
    }
}
