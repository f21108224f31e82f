//! The one output format every command takes (`--format table|json|csv|md|html`), below both
//! the pages a command prints ([`super::output`]) and the exporters that render them
//! ([`super::export`]).

crate::choice! {
    /// An output format. Every command that prints results takes `--format` with these names.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum OutputFormat("format") {
        /// Aligned text for the terminal.
        Table = "table" | "text",
        /// JSON: the result documents (the report model for `fsgauge report`).
        Json = "json",
        /// Comma-separated values, RFC 4180, with a header line.
        Csv = "csv",
        /// Markdown tables.
        Md = "md" | "markdown",
        /// One self-contained HTML page (with plots for `fsgauge report`).
        Html = "html" | "htm",
    }
}

impl OutputFormat {
    /// Whether the output is for a program (no progress or notes belong beside it).
    pub fn is_machine(self) -> bool {
        self != Self::Table
    }
}

/// Parses `--format` for clap's `value_parser`: every command renders its document through the
/// one exporter, so every command offers every format.
pub fn parse_format(s: &str) -> Result<OutputFormat, String> {
    s.parse()
        .map_err(|_| format!("unknown format {s:?}; use table, json, csv, md or html"))
}
