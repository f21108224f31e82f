//! `devices fit` as a page: its JSON the fit report, its terminal text the fitted profile file
//! (what a user saves), and as tables the check it was made from, the fitted seek curve, the
//! comparison with an emulated profile's own figures, and the fit's notes and warnings.

use anyhow::Result;

use super::{ms, opt, signed_pct, tables};
use crate::analysis::report::document::Page;
use crate::base::text::Table;
use crate::device::calibrate::fit::FitReport;

/// The fit as a page.
pub fn fit_page(r: &FitReport) -> Result<Page> {
    let mut all = tables(&r.check);
    all.push(seek_table(r));
    if !r.comparison.is_empty() {
        all.push(comparison_table(r));
    }
    if let Some(t) = notes_table(r) {
        all.push(t);
    }
    Ok(
        Page::new(format!("fsgauge devices fit {}", r.check.target), r)?
            .text(r.profile_toml.clone())
            .tables(all),
    )
}

fn seek_table(r: &FitReport) -> Table {
    Table {
        title: "Fitted seek curve".into(),
        label_columns: 1,
        note: format!(
            "{} cylinders in the fitted geometry; time less the fixed part and half a revolution",
            r.fitted.cylinders
        ),
        headers: ["cylinders", "seek ms", "pairs"].map(String::from).to_vec(),
        rows: r
            .fitted
            .seek
            .iter()
            .map(|p| {
                vec![
                    format!("{:.0}", p.cylinders),
                    ms(p.seek_ms),
                    p.pairs.to_string(),
                ]
            })
            .collect(),
    }
}

fn comparison_table(r: &FitReport) -> Table {
    Table {
        title: format!("Fitted against profile {}", r.template),
        label_columns: 1,
        note: "error is fitted / profile - 1".into(),
        headers: ["parameter", "fitted", "profile", "error %"]
            .map(String::from)
            .to_vec(),
        rows: r
            .comparison
            .iter()
            .map(|c| {
                vec![
                    c.parameter.to_string(),
                    format!("{:.3}", c.fitted),
                    format!("{:.3}", c.profile),
                    signed_pct(c.error),
                ]
            })
            .collect(),
    }
}

fn notes_table(r: &FitReport) -> Option<Table> {
    let rows: Vec<Vec<String>> = r
        .fitted
        .notes
        .iter()
        .map(|n| vec!["note".to_string(), n.clone()])
        .chain(r.warnings.iter().map(|w| vec!["warning".into(), w.clone()]))
        .collect();
    (!rows.is_empty()).then(|| Table {
        title: "Notes".into(),
        label_columns: 2,
        note: String::new(),
        headers: ["kind", "text"].map(String::from).to_vec(),
        rows,
    })
}

/// The fit as the terminal shows it beside the profile file (on stderr): the fitted seek
/// curve, notes and warnings, and the comparison.
pub fn fit_text(r: &FitReport) -> String {
    let f = &r.fitted;
    let mut s = format!(
        "\nfitted seek curve ({} cylinders in the fitted geometry; time less the fixed part and half a revolution)\n{:>10}  {:>10}  {:>6}\n",
        f.cylinders, "cylinders", "seek", "pairs"
    );
    for p in &f.seek {
        s.push_str(&format!(
            "{:>10.0}  {:>7} ms  {:>6}\n",
            p.cylinders,
            ms(p.seek_ms),
            p.pairs
        ));
    }
    for n in &f.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    for w in &r.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    if !r.comparison.is_empty() {
        s.push_str(&format!(
            "\nfitted against profile {}\n{:<18}  {:>14}  {:>14}  {:>7}\n",
            r.template, "parameter", "fitted", "profile", "error"
        ));
        for c in &r.comparison {
            s.push_str(&format!(
                "{:<18}  {:>14.3}  {:>14.3}  {:>6}%\n",
                c.parameter,
                c.fitted,
                c.profile,
                opt(Some(c.error), signed_pct)
            ));
        }
    }
    s.push('\n');
    s
}
