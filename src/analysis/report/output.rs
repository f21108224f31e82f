//! How a command prints what it made: one output-format enum for every command
//! (`--format table|json|csv|md|html`), and the pages of results and listings that the one
//! exporter ([`super::export`]) renders.
//!
//! `table` is the command's own terminal table; `json` the result documents themselves (one
//! document for one run, a list otherwise); `csv` and `md` one row per run × phase with every
//! core metric and every figure the workloads declared, under the declared keys and units
//! ([`crate::results::metric`]) — the same declarations the report reads.

use anyhow::Result;

use super::document::Page;
use super::metrics::{self, Metric};
use super::model::{fmt_num, workload_labels, Table};
use crate::results::RunResult;

pub use super::export::{csv_field, csv_table, md_cell, md_header, md_row};
pub use super::format::{parse_format, OutputFormat};

/// One row per run × phase: the run's testbed, workload label, repetition and phase, then
/// every metric that any phase has, core ones first (headers `key (unit)` for Markdown,
/// `key` for CSV). `exact` keeps full precision (CSV); otherwise figures are rounded for
/// reading.
pub fn phase_rows(results: &[RunResult], exact: bool) -> Table {
    let labels = workload_labels(results, &[]);
    let pairs: Vec<(&RunResult, &crate::results::PhaseResult)> = results
        .iter()
        .flat_map(|r| r.phases.iter().map(move |p| (r, p)))
        .collect();
    let ms: Vec<Metric> = metrics::present(pairs.iter().copied());
    let mut headers: Vec<String> = ["testbed", "workload", "rep", "phase"]
        .map(String::from)
        .to_vec();
    headers.extend(ms.iter().map(|m| if exact { m.key() } else { m.label() }));
    let mut rows = Vec::new();
    for (r, label) in results.iter().zip(&labels) {
        for p in &r.phases {
            let mut row = vec![
                r.testbed.label.clone(),
                label.clone(),
                r.rep.to_string(),
                p.name.clone(),
            ];
            row.extend(ms.iter().map(|m| match m.value(p) {
                Some(v) if exact => v.to_string(),
                Some(v) => fmt_num(v),
                None => String::new(),
            }));
            rows.push(row);
        }
    }
    Table {
        title: "Results per run and phase".into(),
        label_columns: 4,
        note: "every core metric of each phase and every figure its workload declared, one row per run and phase".into(),
        headers,
        rows,
    }
}

/// The result documents as JSON: the document itself for one run, a list otherwise.
pub fn results_json(results: &[RunResult]) -> Result<String> {
    Ok(match results {
        [one] => serde_json::to_string_pretty(one)?,
        _ => serde_json::to_string_pretty(results)?,
    })
}

/// A way of showing a set of results as text.
pub type View<'a> = &'a dyn Fn(&[RunResult]) -> String;

/// How a command shows its results as a table, and (when it has one) its own CSV.
pub struct ResultViews<'a> {
    /// The command's terminal table.
    pub table: View<'a>,
    /// The command's own CSV (a sweep's own columns), in place of [`phase_rows`].
    pub csv: Option<View<'a>>,
}

/// The page of a set of results: its JSON the result documents (`json_list` keeps a list even
/// for one run, for commands that always printed a list), its table the command's terminal
/// table, its CSV the command's own or one row per run × phase ([`phase_rows`]), its
/// Markdown and HTML the rows per run × phase.
pub fn results_page(results: &[RunResult], views: &ResultViews, json_list: bool) -> Result<Page> {
    let json = if json_list {
        serde_json::to_string_pretty(results)?
    } else {
        results_json(results)?
    };
    Ok(Page {
        title: "fsgauge results".into(),
        json,
        text: Some((views.table)(results)),
        csv: Some(match views.csv {
            Some(csv) => csv(results),
            None => csv_table(&phase_rows(results, true)),
        }),
        tables: vec![phase_rows(results, false)],
        preface: String::new(),
        plots: Vec::new(),
        sketch: String::new(),
    })
}

/// A set of results in a format, through the one exporter ([`results_page`]).
pub fn render_results(
    results: &[RunResult],
    format: OutputFormat,
    views: &ResultViews,
    json_list: bool,
) -> Result<String> {
    let page = results_page(results, views, json_list)?;
    let bytes = super::export::render(&page.into(), format)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A listing (testbeds, presets: not results) as a page: its JSON `data`, its terminal text
/// `text`, and one table row per entry for CSV, Markdown and HTML.
pub fn listing(
    title: &str,
    data: &impl serde::Serialize,
    text: String,
    headers: &[&str],
    rows: Vec<Vec<String>>,
) -> Result<Page> {
    Ok(Page::new(title, data)?.text(text).table(Table {
        title: String::new(),
        label_columns: headers.len(),
        note: String::new(),
        headers: headers.iter().map(|h| h.to_string()).collect(),
        rows,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_aliases_still_work() {
        for f in [
            OutputFormat::Table,
            OutputFormat::Json,
            OutputFormat::Csv,
            OutputFormat::Md,
            OutputFormat::Html,
        ] {
            assert_eq!(f.name().parse::<OutputFormat>(), Ok(f));
        }
        assert_eq!("markdown".parse(), Ok(OutputFormat::Md));
        assert_eq!("HTM".parse(), Ok(OutputFormat::Html));
        assert!("xml".parse::<OutputFormat>().is_err());
        assert_eq!(parse_format("html"), Ok(OutputFormat::Html));
        assert_eq!(parse_format("md"), Ok(OutputFormat::Md));
        assert!(parse_format("xml").is_err());
    }

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        let t = Table {
            title: String::new(),
            label_columns: 1,
            note: String::new(),
            headers: vec!["a".into(), "b".into()],
            rows: vec![vec!["x,y".into(), "say \"hi\"".into()]],
        };
        assert_eq!(csv_table(&t), "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n");
    }
}
