//! Terminal text: the warnings and every table of the report, aligned, as the other commands
//! print their tables (`fsgauge report --format table`).

use std::fmt::Write;

use anyhow::Result;

use super::Exporter;
use crate::analysis::report::document::Page;
use crate::analysis::report::model::{environment_table, findings_table, Report};
use crate::analysis::report::table::text;

/// The text exporter.
pub struct Text;

impl Exporter for Text {
    fn extension(&self) -> &'static str {
        "txt"
    }

    fn report(&self, report: &Report) -> Result<Vec<u8>> {
        let mut out = String::new();
        let _ = writeln!(out, "{}", report.title);
        let _ = writeln!(
            out,
            "testbeds: {}; baseline: {}\n",
            report.testbeds.join(", "),
            report.baseline
        );
        out.push_str(&crate::results::differ_text(&report.environment_differs));
        if !report.findings.is_empty() {
            let _ = writeln!(out, "Findings");
            for f in &report.findings {
                let ask = &f.finding.question.ask;
                if !ask.is_empty() {
                    let _ = writeln!(out, "  {ask}");
                }
                let _ = writeln!(out, "    {}", f.sentence);
            }
            out.push('\n');
            out.push_str(&text(&findings_table(&report.findings)));
            out.push('\n');
        }
        for w in &report.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        if !report.warnings.is_empty() {
            out.push('\n');
        }
        for t in &report.tables {
            out.push_str(&text(t));
            out.push('\n');
        }
        out.push_str(&text(&environment_table(&report.environment)));
        Ok(out.into_bytes())
    }

    /// The command's own terminal text, else its tables (title, table, note), a blank line
    /// between them.
    fn page(&self, page: &Page) -> Result<Vec<u8>> {
        let mut out = page.preface.clone();
        out.push_str(&page.sketch);
        match &page.text {
            Some(t) => out.push_str(t),
            None => {
                let tables: Vec<String> = page.tables.iter().map(text).collect();
                out.push_str(&tables.join("\n"));
            }
        }
        Ok(out.into_bytes())
    }
}
