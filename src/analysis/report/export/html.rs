//! HTML export: one self-contained page (inline CSS and SVG, no scripts, no external
//! resources), so it opens offline and can be mailed as one file.

use std::fmt::Write;

use anyhow::Result;

use super::Exporter;
use crate::analysis::report::document::Page;
use crate::analysis::report::model::{environment_table, findings_table, Report, Table};
use crate::analysis::report::plots;

/// The HTML exporter.
pub struct Html;

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222;max-width:1400px}\
h1{font-size:1.5em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}\
h3{font-size:1.05em}p.note{color:#555;font-size:.9em}\
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.85em}\
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right;white-space:nowrap}\
th:first-child,td:first-child,td.l{text-align:left}th{background:#f0f0f0}\
tr:nth-child(even) td{background:#fafafa}\
ul.warnings li{color:#8a4b00;margin:.2em 0}\
figure{display:inline-block;margin:.5em;border:1px solid #ddd;padding:.3em;vertical-align:top}\
figure svg{display:block}figcaption{font-size:.8em;color:#555}\
div.scroll{overflow-x:auto}";

fn table(out: &mut String, t: &Table) {
    let _ = write!(
        out,
        "<h3>{}</h3>\n<p class=\"note\">{}</p>\n<div class=\"scroll\"><table>\n<tr>",
        esc(&t.title),
        esc(&t.note)
    );
    for h in &t.headers {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    for r in &t.rows {
        out.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            if i < t.label_columns {
                let _ = write!(out, "<td class=\"l\">{}</td>", esc(c));
            } else {
                let _ = write!(out, "<td>{}</td>", esc(c));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div>\n");
}

/// A plot as an inline figure: its SVG (from the `<svg` element on, without an XML
/// declaration) and its caption.
fn figure(out: &mut String, p: &plots::Plot) {
    let svg = p.svg.find("<svg").map_or(p.svg.as_str(), |i| &p.svg[i..]);
    let _ = write!(
        out,
        "<figure class=\"plot\" id=\"{}\">\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
        esc(&p.id),
        svg.trim_end(),
        esc(&p.title)
    );
}

impl Exporter for Html {
    fn extension(&self) -> &'static str {
        "html"
    }

    fn report(&self, report: &Report) -> Result<Vec<u8>> {
        let mut out = String::new();
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<link rel=\"icon\" href=\"data:,\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n<p>Testbeds: {}. Workloads: {}. Baseline for percentages: {}.</p>\n",
            esc(&report.title),
            esc(&report.title),
            esc(&report.testbeds.join(", ")),
            esc(&report.workloads.join("; ")),
            esc(&report.baseline)
        );
        if !report.environment_differs.is_empty() {
            out.push_str("<p>These runs differ in:</p>\n<ul class=\"env-differs\">\n");
            for d in &report.environment_differs {
                let _ = writeln!(out, "<li>{}</li>", esc(&d.to_string()));
            }
            out.push_str("</ul>\n");
        }
        if !report.findings.is_empty() {
            out.push_str("<h2>Findings</h2>\n<ul class=\"findings\">\n");
            for f in &report.findings {
                let ask = &f.finding.question.ask;
                let source = &f.finding.question.source;
                let _ = writeln!(
                    out,
                    "<li>{}{}{}</li>",
                    if ask.is_empty() {
                        String::new()
                    } else {
                        format!("<b>{}</b> ", esc(ask))
                    },
                    esc(&f.sentence),
                    if source.is_empty() {
                        String::new()
                    } else {
                        format!(" <small>(published: {})</small>", esc(source))
                    }
                );
            }
            out.push_str("</ul>\n");
            if let Some(p) = crate::analysis::report::forest::forest(&report.findings) {
                figure(&mut out, &p);
            }
            table(&mut out, &findings_table(&report.findings));
        }
        out.push_str("<h2>Warnings</h2>\n");
        if report.warnings.is_empty() {
            out.push_str("<p>None.</p>\n");
        } else {
            out.push_str("<ul class=\"warnings\">\n");
            for w in &report.warnings {
                let _ = writeln!(out, "<li>{}</li>", esc(w));
            }
            out.push_str("</ul>\n");
        }
        out.push_str("<h2>Tables</h2>\n");
        for t in &report.tables {
            table(&mut out, t);
        }
        out.push_str("<h2>Plots</h2>\n");
        for p in plots::all(report) {
            figure(&mut out, &p);
        }
        out.push_str("<h2>Environment</h2>\n");
        table(&mut out, &environment_table(&report.environment));
        out.push_str("</body>\n</html>\n");
        Ok(out.into_bytes())
    }

    /// One self-contained page: the title, the preface, every figure, every table.
    fn page(&self, page: &Page) -> Result<Vec<u8>> {
        let mut out = String::new();
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<link rel=\"icon\" href=\"data:,\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
            esc(&page.title),
            esc(&page.title)
        );
        if !page.preface.is_empty() {
            let _ = writeln!(out, "<pre>{}</pre>", esc(&page.preface));
        }
        for p in &page.plots {
            figure(&mut out, p);
        }
        for t in &page.tables {
            table(&mut out, t);
        }
        out.push_str("</body>\n</html>\n");
        Ok(out.into_bytes())
    }
}
