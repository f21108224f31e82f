//! The one document every command prints, in whichever `--format` was asked for, through the
//! one set of exporters ([`super::export`]).
//!
//! A [`Document`] is either a [`Report`] (statistics per cell, findings, plots: `fsgauge
//! report`) or a [`Page`]: what any other command shows — its machine form (the JSON), its
//! tables, and, where the command has one, its own terminal text or CSV (a sweep's own
//! columns). Commands build a page and hand it to [`super::export::render`]; none formats
//! output by hand.

use anyhow::Result;
use serde::Serialize;

use super::model::Report;
use crate::base::text::Table;

/// What a command prints, before it is rendered in a format.
#[derive(Debug)]
pub enum Document {
    /// A report of result files (`fsgauge report`).
    Report(Box<Report>),
    /// Everything else: results of a run, a listing, a comparison, a layout scan.
    Page(Page),
}

/// A command's output as data: rendered as terminal text, JSON, CSV, Markdown or HTML by the
/// exporters, the same way for every command.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// What the page is (the Markdown heading and HTML title; not printed on the terminal).
    pub title: String,
    /// The machine form, already serialised (pretty JSON of the command's own types, with
    /// their field order).
    pub json: String,
    /// The tables, in order: Markdown and HTML show each; CSV and the terminal show them when
    /// the command has no form of its own.
    pub tables: Vec<Table>,
    /// The command's own terminal text, in place of the tables as text.
    pub text: Option<String>,
    /// The command's own CSV (a sweep's own columns), in place of the tables as CSV.
    pub csv: Option<String>,
    /// Text shown before the tables on the terminal, in Markdown and in HTML (not in CSV or
    /// JSON): e.g. how the two sides of a comparison differ.
    pub preface: String,
    /// Figures drawn inline before the tables in HTML (the other formats carry their
    /// figures as tables): e.g. a history's points and change marks.
    pub plots: Vec<super::plots::Plot>,
    /// A figure drawn in text, shown before the tables on the terminal and in Markdown (in a
    /// code block); HTML draws `plots` instead: e.g. a history's intervals as bars.
    pub sketch: String,
}

impl Page {
    /// A page whose JSON is `data` (the command's own serde types, so its field order holds).
    pub fn new(title: impl Into<String>, data: &impl Serialize) -> Result<Self> {
        Ok(Page {
            title: title.into(),
            json: serde_json::to_string_pretty(data)?,
            ..Page::default()
        })
    }

    /// With these tables.
    pub fn tables(mut self, tables: Vec<Table>) -> Self {
        self.tables = tables;
        self
    }

    /// With this table.
    pub fn table(mut self, t: Table) -> Self {
        self.tables.push(t);
        self
    }

    /// With the command's own terminal text.
    pub fn text(mut self, text: String) -> Self {
        self.text = Some(text);
        self
    }

    /// With the command's own CSV.
    pub fn csv(mut self, csv: Option<String>) -> Self {
        self.csv = csv;
        self
    }

    /// With this figure (HTML draws it before the tables).
    pub fn plot(mut self, p: Option<super::plots::Plot>) -> Self {
        self.plots.extend(p);
        self
    }

    /// With this figure in text (the terminal and Markdown show it before the tables).
    pub fn sketch(mut self, sketch: String) -> Self {
        self.sketch = sketch;
        self
    }

    /// With text before the tables.
    pub fn preface(mut self, preface: String) -> Self {
        self.preface = preface;
        self
    }
}

impl From<Page> for Document {
    fn from(p: Page) -> Self {
        Document::Page(p)
    }
}

impl From<Report> for Document {
    fn from(r: Report) -> Self {
        Document::Report(Box::new(r))
    }
}
