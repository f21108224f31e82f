//! JSON export: the report model (cells with every value and its summary, tables, warnings,
//! environment), for other tools.

use anyhow::Result;

use super::Exporter;
use crate::analysis::report::document::Page;
use crate::analysis::report::model::Report;

/// The JSON exporter.
pub struct Json;

impl Exporter for Json {
    fn extension(&self) -> &'static str {
        "json"
    }

    fn report(&self, report: &Report) -> Result<Vec<u8>> {
        let mut out = serde_json::to_vec_pretty(report)?;
        out.push(b'\n');
        Ok(out)
    }

    fn page(&self, page: &Page) -> Result<Vec<u8>> {
        Ok(format!("{}\n", page.json).into_bytes())
    }
}
