//! Exporters: one small trait, one file per format (as hyperfine's `export/*.rs`). Each turns
//! the same [`Report`] model into bytes; none adds anything that is not in the result files
//! (no generation time), so the same results always export to the same bytes.

mod csv;
mod html;
mod json;
mod md;

use std::str::FromStr;

use anyhow::Result;

use super::model::{Report, Table};

/// One table as Markdown.
pub fn md_table(t: &Table) -> String {
    md::table(t)
}

/// Turns a report into a document.
pub trait Exporter {
    /// The file extension of the format.
    fn extension(&self) -> &'static str;
    /// The document.
    fn render(&self, report: &Report) -> Result<Vec<u8>>;
}

/// The formats `fsgauge report --format` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One self-contained HTML page with tables and inline SVG plots; works offline.
    Html,
    /// Markdown tables.
    Md,
    /// The statistics per cell, one row per testbed × workload × phase × metric.
    Csv,
    /// The whole report model.
    Json,
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "html" | "htm" => Ok(Self::Html),
            "md" | "markdown" => Ok(Self::Md),
            "csv" => Ok(Self::Csv),
            "json" => Ok(Self::Json),
            _ => Err(format!("unknown format {s:?}; use html, md, csv or json")),
        }
    }
}

impl Format {
    /// The exporter of the format.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Self::Html => Box::new(html::Html),
            Self::Md => Box::new(md::Markdown),
            Self::Csv => Box::new(csv::Csv),
            Self::Json => Box::new(json::Json),
        }
    }
}
