//! Exporters: one small trait, one file per format (as hyperfine's `export/*.rs`). Each turns
//! the same [`Report`] model into bytes; none adds anything that is not in the result files
//! (no generation time), so the same results always export to the same bytes.

mod csv;
mod html;
mod json;
mod md;
mod text;

use anyhow::Result;

pub use csv::{csv_field, csv_table};
pub use html::esc;
pub use md::{md_cell, md_header, md_row};

use super::document::{Document, Page};
use super::model::{Report, Table};

/// One table as Markdown.
pub fn md_table(t: &Table) -> String {
    md::table(t)
}

/// Renders a document in one format: a report its own way, a command's page as tables.
pub trait Exporter {
    /// The file extension of the format.
    fn extension(&self) -> &'static str;
    /// A report of result files.
    fn report(&self, report: &Report) -> Result<Vec<u8>>;
    /// Any other command's output.
    fn page(&self, page: &Page) -> Result<Vec<u8>>;
    /// The document, whichever it is.
    fn render(&self, doc: &Document) -> Result<Vec<u8>> {
        match doc {
            Document::Report(r) => self.report(r),
            Document::Page(p) => self.page(p),
        }
    }
}

/// A document in a format: the one way every command prints what it made.
pub fn render(doc: &Document, format: Format) -> Result<Vec<u8>> {
    format.exporter().render(doc)
}

/// Prints a document in a format on stdout.
pub fn print(doc: &Document, format: Format) -> Result<()> {
    use std::io::Write;
    let bytes = render(doc, format)?;
    let mut out = std::io::stdout().lock();
    out.write_all(&bytes)?;
    out.flush()?;
    Ok(())
}

/// The formats `fsgauge report --format` offers: the one output-format enum every command
/// uses (`table` is the report's tables as terminal text; `html` one self-contained page with
/// tables and inline SVG plots; `md` Markdown tables; `csv` the statistics per cell, one row
/// per testbed × workload × phase × metric; `json` the whole report model).
pub use super::format::OutputFormat as Format;

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
