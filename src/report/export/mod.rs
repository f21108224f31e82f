//! Exporters: one small trait, one file per format (as hyperfine's `export/*.rs`). Each turns
//! the same [`Report`] model into bytes; none adds anything that is not in the result files
//! (no generation time), so the same results always export to the same bytes.

mod csv;
mod html;
mod json;
mod md;
mod text;

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

/// The formats `fsgauge report --format` offers: the one output-format enum every command
/// uses (`table` is the report's tables as terminal text; `html` one self-contained page with
/// tables and inline SVG plots; `md` Markdown tables; `csv` the statistics per cell, one row
/// per testbed × workload × phase × metric; `json` the whole report model).
pub use super::output::OutputFormat as Format;

impl Format {
    /// The exporter of the format.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Self::Table => Box::new(text::Text),
            Self::Html => Box::new(html::Html),
            Self::Md => Box::new(md::Markdown),
            Self::Csv => Box::new(csv::Csv),
            Self::Json => Box::new(json::Json),
        }
    }
}
