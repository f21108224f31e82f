//! The durability table: what the runs' crash points found (each result's `crash` record),
//! one row per workload, testbed, filesystem options and cache choice, beside the speed
//! findings.

use crate::base::text::Table;
use crate::results::crash::CrashClass;
use crate::results::RunResult;

/// One row per workload, testbed, mount options and cache choice (their runs summed); none
/// without
/// crash points.
pub fn durability_table(results: &[RunResult]) -> Option<Table> {
    let mut rows: Vec<(Vec<String>, [u64; 6], Option<String>)> = Vec::new();
    let labels = super::cells::workload_labels(results, &[]);
    for (r, w) in results.iter().zip(labels) {
        let Some(c) = &r.crash else { continue };
        let key = vec![
            w,
            r.testbed.label.clone(),
            r.testbed.fs.clone(),
            r.testbed.mount_options.clone(),
            c.cache.clone(),
        ];
        let class = |k: CrashClass| c.by_class.get(k.name()).copied().unwrap_or(0);
        let add = [
            c.states,
            c.failures.len() as u64,
            class(CrashClass::LostDurable),
            class(CrashClass::Foreign),
            class(CrashClass::CheckerError),
            class(CrashClass::MountFailure),
        ];
        let replay = c.failures.first().map(|f| f.replay.clone());
        match rows.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, sums, first)) => {
                for (s, a) in sums.iter_mut().zip(add) {
                    *s += a;
                }
                if first.is_none() {
                    *first = replay;
                }
            }
            None => rows.push((key, add, replay)),
        }
    }
    if rows.is_empty() {
        return None;
    }
    let headers = [
        "workload",
        "testbed",
        "fs",
        "mount options",
        "cache",
        "states",
        "failed",
        "lost-durable",
        "foreign",
        "checker-error",
        "mount-failure",
    ]
    .map(String::from)
    .to_vec();
    let firsts: Vec<String> = rows
        .iter()
        .filter_map(|(k, _, first)| first.as_ref().map(|f| format!("{}: {f}", k[1])))
        .collect();
    let mut note = "crash states judged after each run (--crash-points: cuts of the emulated disk; --crash-shutdown: the kernel's shutdown, cache none (shutdown)): mounted, compared with what the workload made durable, checked read-only".to_string();
    if !firsts.is_empty() {
        note.push_str("; the first failure of each, checked again by: ");
        note.push_str(&firsts.join("; "));
    }
    Some(Table {
        title: "Durability: crash points".into(),
        label_columns: 5,
        note,
        headers,
        rows: rows
            .into_iter()
            .map(|(k, sums, _)| {
                let mut row = k;
                row.extend(sums.iter().map(u64::to_string));
                row
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::crash::{CrashFailure, CrashReport};

    #[test]
    fn runs_of_one_testbed_and_cache_sum_into_a_row_with_the_first_replay() {
        let mut c = CrashReport {
            states: 10,
            cache: "random".into(),
            ..Default::default()
        };
        c.name_all_classes();
        c.fail(CrashFailure {
            cut: 3,
            class: CrashClass::LostDurable,
            detail: "x".into(),
            replay: "fsgauge exercise --crash-at 3".into(),
        });
        let base: RunResult = serde_json::from_value(serde_json::json!({
            "schema": crate::results::SCHEMA, "tool": {"name": "fsgauge", "version": "0.1.0"},
            "host": {"hostname": "h", "kernel": "6.1", "cpus": 2, "memory": 1},
            "testbed": crate::results::TestbedInfo::default(),
            "workload": {"kind": "exercise", "params": {}},
            "rep": 0, "seed": 1, "started_at": "", "spec_hash": "", "conditions": {"cold": "none"},
            "phases": []
        }))
        .expect("a result");
        let mut a = base.clone();
        a.crash = Some(c.clone());
        let mut b = base.clone();
        b.crash = Some(c);
        assert!(durability_table(std::slice::from_ref(&base)).is_none());
        let t = durability_table(&[a, b, base]).expect("a table");
        assert_eq!(t.rows.len(), 1);
        assert_eq!(&t.rows[0][5..], ["20", "2", "2", "0", "0", "0"]);
        assert!(
            t.note.contains("fsgauge exercise --crash-at 3"),
            "{}",
            t.note
        );
    }
}
