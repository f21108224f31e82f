//! Plain text for the terminal, shared by the workloads' own tables and the report: columns
//! aligned under their headers, latencies and rates in readable units. Knows nothing of results.

use std::fmt::Write;

use serde::Serialize;

/// A table as rows of text, rendered by every exporter (terminal text, CSV, Markdown, HTML).
/// It lives here, below every layer, so that a workload kind can build its own tables
/// (registered with its kind) without knowing of the report that shows them.
#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub title: String,
    /// How many leading columns hold names rather than figures (aligned left).
    pub label_columns: usize,
    /// What the figures are, how they were made.
    pub note: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// The table for the terminal: its title, the aligned table, its note in brackets (a
    /// table without a title or a note goes without that line).
    pub fn text(&self) -> String {
        let h: Vec<&str> = self.headers.iter().map(String::as_str).collect();
        let mut out = String::new();
        if !self.title.is_empty() {
            out.push_str(&self.title);
            out.push('\n');
        }
        out.push_str(&render(&h, &self.rows));
        if !self.note.is_empty() {
            out.push_str(&format!("({})\n", self.note));
        }
        out
    }

    /// Tables for the terminal, a blank line between them.
    pub fn texts(tables: &[Table]) -> String {
        let t: Vec<String> = tables.iter().map(Table::text).collect();
        t.join("\n")
    }
}

/// A latency in the most readable unit: `850ns`, `12.3us`, `4.56ms`, `1.20s`.
pub fn format_ns(ns: u64) -> String {
    let n = ns as f64;
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{:.1}us", n / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2}ms", n / 1e6)
    } else {
        format!("{:.2}s", n / 1e9)
    }
}

/// Seconds for a table whose column is in seconds, never rounded to `0.00` when not zero:
/// two decimals from 1 s (`12.00`), three significant figures below (`0.240`, `0.0312`), and
/// below 10 ms the figure carries its own unit (`3.00ms`, `41.2µs`). A zero is `0`.
pub fn format_secs(v: f64) -> String {
    let a = v.abs();
    let sig3 = |x: f64| {
        let decimals = (2 - x.abs().log10().floor() as i32).max(0) as usize;
        format!("{x:.decimals$}")
    };
    if a == 0.0 || !a.is_finite() {
        format!("{v}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        sig3(v)
    } else if a >= 1e-3 {
        format!("{}ms", sig3(v * 1e3))
    } else {
        format!("{}µs", sig3(v * 1e6))
    }
}

/// Seconds in prose: [`format_secs`] with its unit always written (`0.240 s`, `3.00ms`).
pub fn format_secs_unit(v: f64) -> String {
    let t = format_secs(v);
    if t.ends_with('s') {
        t
    } else {
        format!("{t} s")
    }
}

/// A rate with a thousands-friendly precision.
pub fn format_rate(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// `elapsed (sys)` of a phase as the seed studies print it: `12.00 (1.00)`, `0.240 (0.0312)`.
pub fn elapsed_sys(elapsed: f64, sys: f64) -> String {
    format!("{} ({})", format_secs(elapsed), format_secs(sys))
}

/// Renders rows under headers, first column left-aligned, the others right-aligned.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<String>, out: &mut String| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let w = widths.get(i).copied().unwrap_or(0);
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(headers.iter().map(|s| s.to_string()).collect(), &mut out);
    line(widths.iter().map(|w| "-".repeat(*w)).collect(), &mut out);
    for r in rows {
        line(r.clone(), &mut out);
    }
    out
}

/// A figure with a sensible number of digits.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_never_print_as_zero_when_they_are_not() {
        assert_eq!(format_secs(0.0), "0");
        assert_eq!(format_secs(12.0), "12.00");
        assert_eq!(format_secs(1.004), "1.00");
        assert_eq!(format_secs(0.24), "0.240");
        assert_eq!(format_secs(0.0312), "0.0312");
        assert_eq!(format_secs(0.003), "3.00ms");
        assert_eq!(format_secs(0.0000412), "41.2µs");
        assert_eq!(format_secs(0.0000004), "0.400µs");
        assert_eq!(format_secs_unit(0.24), "0.240 s");
        assert_eq!(format_secs_unit(12.0), "12.00 s");
        assert_eq!(format_secs_unit(0.003), "3.00ms");
        // The lowmem delete phases: 3 ms with 2 ms of sys time.
        assert_eq!(elapsed_sys(0.003, 0.002), "3.00ms (2.00ms)");
        assert_eq!(elapsed_sys(12.0, 1.0), "12.00 (1.00)");
    }
}
