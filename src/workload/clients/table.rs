//! Tables of the clients workload: MB/s by client count (rows) and testbed (columns), as the
//! block-reservation study tabulated dbench, and per phase dbench's own table — operation,
//! count, mean and max latency — with percentiles added.

use crate::base::text::{format_ns, Table};
use crate::results::tables::KindTables;
use crate::results::RunResult;
use crate::workload::tio::table::{sweep_tables_of, SweepPoint};

fn client_count(name: &str) -> Option<u64> {
    name.strip_prefix("clients-")?.parse().ok()
}

/// Throughput points: one per `clients-N` phase.
pub fn points(results: &[RunResult]) -> Vec<SweepPoint> {
    results
        .iter()
        .flat_map(|r| {
            r.phases.iter().filter_map(move |p| {
                client_count(&p.name).map(|n| SweepPoint {
                    group: "clients".into(),
                    x: n,
                    label: r.testbed.label.clone(),
                    // On the disk's clock on an emulated disk (PhaseResult::times).
                    value: p
                        .times()
                        .rate(p.bytes_per_s, crate::results::clock::Clock::Disk)
                        / 1e6,
                })
            })
        })
        .collect()
}

/// The clients workload's tables, registered with its kind: `bench clients` prints them and
/// `report` shows them.
pub const TABLES: KindTables = KindTables {
    kind: "clients",
    tables,
    against: &[],
};

/// The sweep table, then dbench's operation table for every measured phase.
pub fn tables(results: &[RunResult]) -> Vec<Table> {
    let mut out = sweep_tables_of(&points(results), "clients", "MB/s (10^6 bytes/s)");
    for r in results {
        for p in r.phases.iter().filter(|p| client_count(&p.name).is_some()) {
            let title = format!(
                "{} rep {} {}: {:.2} MB/s, {} operations in {:.2} s",
                r.testbed.label,
                r.rep,
                p.name,
                p.times()
                    .rate(p.bytes_per_s, crate::results::clock::Clock::Disk)
                    / 1e6,
                p.ops,
                p.times().disk_s
            );
            let headers = [
                "Operation",
                "Count",
                "AvgLat",
                "MaxLat",
                "p50",
                "p99",
                "p99.9",
            ];
            let rows: Vec<Vec<String>> = p
                .op_stats
                .iter()
                .filter(|(_, s)| s.count > 0)
                .map(|(name, s)| {
                    let l = &s.latency;
                    vec![
                        name.clone(),
                        s.count.to_string(),
                        format_ns(l.mean_ns as u64),
                        format_ns(l.max_ns),
                        format_ns(l.p50_ns),
                        format_ns(l.p99_ns),
                        format_ns(l.p999_ns),
                    ]
                })
                .collect();
            out.push(Table {
                title,
                label_columns: 1,
                note: String::new(),
                headers: headers.map(String::from).to_vec(),
                rows,
            });
        }
    }
    out
}

/// The client-count sweep as CSV: one line per run and client count.
pub fn csv(results: &[RunResult]) -> String {
    let mut csv = String::from("testbed,fs,rep,clients,mb_per_s,ops,wall_s\n");
    for r in results {
        for p in &r.phases {
            if let Some(n) = p.name.strip_prefix("clients-") {
                csv.push_str(&format!(
                    "{},{},{},{n},{},{},{}\n",
                    r.testbed.label,
                    r.testbed.fs,
                    r.rep,
                    p.bytes_per_s / 1e6,
                    p.ops,
                    p.wall_s
                ));
            }
        }
    }
    csv
}
