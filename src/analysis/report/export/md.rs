//! Markdown export: the warnings, every table, and the environment, for pasting into an issue
//! or a mailing-list post (plots are in the HTML report).

use std::fmt::Write;

use anyhow::Result;

use super::Exporter;
use crate::analysis::report::document::Page;
use crate::analysis::report::model::{environment_table, findings_table, Report, Table};

/// One Markdown table cell: pipes escaped, on one line.
pub fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// One Markdown table row.
pub fn md_row<S: AsRef<str>>(cells: &[S]) -> String {
    let cells: Vec<String> = cells.iter().map(|c| md_cell(c.as_ref())).collect();
    format!("| {} |\n", cells.join(" | "))
}

/// A Markdown table's header and alignment lines: the first `label_columns` (at least one)
/// aligned left, the figures right.
pub fn md_header<S: AsRef<str>>(headers: &[S], label_columns: usize) -> String {
    let align: Vec<&str> = (0..headers.len())
        .map(|i| {
            if i < label_columns.max(1) {
                " --- "
            } else {
                " ---: "
            }
        })
        .collect();
    format!("{}|{}|\n", md_row(headers), align.join("|"))
}

/// The Markdown exporter.
pub struct Markdown;

/// One table in Markdown (a table without a title or note goes without them: a listing).
pub fn table(t: &Table) -> String {
    let mut out = String::new();
    if !(t.title.is_empty() && t.note.is_empty()) {
        let _ = writeln!(out, "### {}\n\n{}\n", t.title, t.note);
    }
    out.push_str(&md_header(&t.headers, t.label_columns));
    for r in &t.rows {
        out.push_str(&md_row(r));
    }
    out.push('\n');
    out
}

impl Exporter for Markdown {
    fn extension(&self) -> &'static str {
        "md"
    }

    fn report(&self, report: &Report) -> Result<Vec<u8>> {
        let mut out = String::new();
        let _ = writeln!(out, "# {}\n", report.title);
        let _ = writeln!(
            out,
            "Testbeds: {}. Baseline: {}.\n",
            report.testbeds.join(", "),
            report.baseline
        );
        if !report.environment_differs.is_empty() {
            let _ = writeln!(out, "These runs differ in:\n");
            for d in &report.environment_differs {
                let _ = writeln!(out, "- {}", md_cell(&d.to_string()));
            }
            out.push('\n');
        }
        if !report.findings.is_empty() {
            let _ = writeln!(out, "## Findings\n");
            for f in &report.findings {
                let ask = &f.finding.question.ask;
                if ask.is_empty() {
                    let _ = writeln!(out, "- {}", md_cell(&f.sentence));
                } else {
                    let _ = writeln!(out, "- **{}** {}", md_cell(ask), md_cell(&f.sentence));
                }
            }
            out.push('\n');
            out.push_str(&table(&findings_table(&report.findings)));
        }
        if !report.warnings.is_empty() {
            let _ = writeln!(out, "## Warnings\n");
            for w in &report.warnings {
                let _ = writeln!(out, "- {}", md_cell(w));
            }
            out.push('\n');
        }
        let _ = writeln!(out, "## Tables\n");
        for t in &report.tables {
            out.push_str(&table(t));
        }
        let _ = writeln!(out, "## Environment\n");
        out.push_str(&table(&environment_table(&report.environment)));
        Ok(out.into_bytes())
    }

    /// The preface as it is, then every table (no page heading, so that the output pastes into
    /// a larger document).
    fn page(&self, page: &Page) -> Result<Vec<u8>> {
        let mut out = page.preface.clone();
        if !page.sketch.is_empty() {
            out.push_str(&format!("```text\n{}\n```\n\n", page.sketch.trim_end()));
        }
        // A bare table (a listing, no title or note) ends at its last row; a blank line
        // separates tables.
        let tables: Vec<String> = page
            .tables
            .iter()
            .map(|t| {
                let md = table(t);
                if t.title.is_empty() && t.note.is_empty() {
                    md.trim_end_matches('\n').to_string() + "\n"
                } else {
                    md
                }
            })
            .collect();
        out.push_str(&tables.join("\n"));
        Ok(out.into_bytes())
    }
}
