//! CSV export: one row per testbed × workload × phase × metric with its statistics — the long
//! form that spreadsheets and R read directly.

use std::fmt::Write as _;

use anyhow::Result;

use super::Exporter;
use crate::analysis::report::document::Page;
use crate::analysis::report::model::Report;
use crate::base::text::Table;

/// Quotes a CSV field when it needs it (RFC 4180).
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A table as CSV: the header line, then one line per row.
pub fn csv_table(t: &Table) -> String {
    let mut out = String::new();
    for row in std::iter::once(&t.headers).chain(&t.rows) {
        let fields: Vec<String> = row.iter().map(|f| csv_field(f)).collect();
        let _ = writeln!(out, "{}", fields.join(","));
    }
    out
}

/// The CSV exporter.
pub struct Csv;

impl Exporter for Csv {
    fn extension(&self) -> &'static str {
        "csv"
    }

    fn report(&self, report: &Report) -> Result<Vec<u8>> {
        let mut out = String::from(
            "testbed,workload,phase,threads,metric,unit,better,n,mean,sd,cv,ci95_low,ci95_high,min,median,max,harmonic_mean\n",
        );
        for c in &report.cells {
            for m in &c.metrics {
                let s = &m.summary;
                let better = serde_json::to_value(m.better)?
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let row = [
                    csv_field(&c.testbed),
                    csv_field(&c.workload),
                    csv_field(&c.phase),
                    c.threads.to_string(),
                    csv_field(&m.key),
                    csv_field(&m.unit),
                    better,
                    s.n.to_string(),
                    s.mean.to_string(),
                    s.sd.to_string(),
                    s.cv.to_string(),
                    s.ci_low.to_string(),
                    s.ci_high.to_string(),
                    s.min.to_string(),
                    s.median.to_string(),
                    s.max.to_string(),
                    m.harmonic_mean.map_or(String::new(), |h| h.to_string()),
                ];
                out.push_str(&row.join(","));
                out.push('\n');
            }
        }
        Ok(out.into_bytes())
    }

    /// The command's own CSV, else its tables, a blank line between them.
    fn page(&self, page: &Page) -> Result<Vec<u8>> {
        if let Some(csv) = &page.csv {
            return Ok(csv.clone().into_bytes());
        }
        let tables: Vec<String> = page.tables.iter().map(csv_table).collect();
        Ok(tables.join("\n").into_bytes())
    }
}
