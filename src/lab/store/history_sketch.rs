//! The history drawn in text, for the terminal and Markdown (HTML has the SVG of
//! [`super::history_plot`]): one row per group with its mean and, on one scale shared by all
//! rows, its 95% interval as a bar with the mean on it (`├──●──┤`), and the change outside the
//! noise flagged as the table flags it (`* worse`). A fixed width, so that it reads the same
//! in any terminal of 80 columns and pastes into a code block; `--ascii` draws `|--o--|` for a
//! terminal or font without box-drawing characters.

use super::history::History;
use crate::base::text::fmt_num;

/// Columns of the bar area.
pub const WIDTH: usize = 40;

/// The characters a bar is drawn with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charset {
    /// `├──●──┤`, the axis `└`, `┘`.
    Unicode,
    /// `|--o--|`, the axis `+`.
    Ascii,
}

struct Glyphs {
    left: char,
    right: char,
    line: char,
    point: char,
    corner_left: char,
    corner_right: char,
}

impl Charset {
    fn glyphs(self) -> Glyphs {
        match self {
            Charset::Unicode => Glyphs {
                left: '├',
                right: '┤',
                line: '─',
                point: '●',
                corner_left: '└',
                corner_right: '┘',
            },
            Charset::Ascii => Glyphs {
                left: '|',
                right: '|',
                line: '-',
                point: 'o',
                corner_left: '+',
                corner_right: '+',
            },
        }
    }
}

/// The scale: every interval; a flat history gets a span around its value.
fn scale(h: &History) -> (f64, f64) {
    let lo = h
        .groups
        .iter()
        .map(|g| g.ci_low)
        .fold(f64::INFINITY, f64::min);
    let hi = h
        .groups
        .iter()
        .map(|g| g.ci_high)
        .fold(f64::NEG_INFINITY, f64::max);
    if hi - lo > hi.abs().max(lo.abs()) * 1e-9 {
        return (lo, hi);
    }
    let pad = (hi.abs() * 0.01).max(1e-9);
    (lo - pad, hi + pad)
}

/// One group's bar: the interval from `├` to `┤` with the mean's `●` on it, on `WIDTH`
/// columns of the scale `lo .. hi`.
fn bar(low: f64, mean: f64, high: f64, (lo, hi): (f64, f64), g: &Glyphs) -> String {
    let col = |v: f64| {
        let x = ((v - lo) / (hi - lo) * (WIDTH - 1) as f64).round();
        x.clamp(0.0, (WIDTH - 1) as f64) as usize
    };
    let (a, m, b) = (col(low), col(mean), col(high));
    let mut row = vec![' '; WIDTH];
    for c in row.iter_mut().take(b + 1).skip(a) {
        *c = g.line;
    }
    if a < b {
        row[a] = g.left;
        row[b] = g.right;
    }
    row[m] = g.point;
    row.into_iter().collect::<String>().trim_end().to_string()
}

/// The history as text: a heading, a row per group, the scale's ends under the bars; empty
/// without groups or with a mean that is not a number.
pub fn sketch(h: &History, charset: Charset) -> String {
    if h.groups.is_empty() || h.groups.iter().any(|g| !g.mean.is_finite()) {
        return String::new();
    }
    let g = charset.glyphs();
    let range = scale(h);
    let flags: Vec<String> = h
        .groups
        .iter()
        .map(|grp| {
            grp.change
                .as_ref()
                .filter(|c| c.significant)
                .map_or(String::new(), |c| format!("* {}", c.verdict))
        })
        .collect();
    let means: Vec<String> = h.groups.iter().map(|grp| fmt_num(grp.mean)).collect();
    let key_w = h
        .groups
        .iter()
        .map(|grp| grp.key.chars().count())
        .max()
        .unwrap_or(0);
    let mean_w = means.iter().map(|m| m.chars().count()).max().unwrap_or(0);
    let flag_w = flags.iter().map(|f| f.chars().count()).max().unwrap_or(0);
    let by = serde_json::to_value(h.by)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut out = format!(
        "{} of {} / {} / {} by {by}: mean {} in its 95% interval {}{}{}{}{}, one scale; * a change outside the noise\n",
        h.metric, h.testbed, h.workload, h.phase, g.point, g.left, g.line, g.point, g.line, g.right
    );
    for (i, grp) in h.groups.iter().enumerate() {
        let line = format!(
            "{:<key_w$}  {:>mean_w$}  {:<flag_w$}  {}",
            grp.key,
            means[i],
            flags[i],
            bar(grp.ci_low, grp.mean, grp.ci_high, range, &g)
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let indent = key_w + mean_w + flag_w + 6;
    let (lo, hi) = (fmt_num(range.0), fmt_num(range.1));
    let axis: String = std::iter::once(g.corner_left)
        .chain(std::iter::repeat_n(g.line, WIDTH - 2))
        .chain(std::iter::once(g.corner_right))
        .collect();
    out.push_str(&format!("{:indent$}{axis}\n", ""));
    let gap = WIDTH
        .saturating_sub(lo.chars().count() + hi.chars().count())
        .max(1);
    out.push_str(&format!("{:indent$}{lo}{:gap$}{hi}\n\n", "", ""));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_spans_its_interval_with_the_mean_on_it() {
        let g = Charset::Unicode.glyphs();
        let b = bar(10.0, 15.0, 20.0, (0.0, 39.0), &g);
        assert_eq!(b, format!("{}├────●────┤", " ".repeat(10)));
        let a = bar(0.0, 0.0, 0.0, (0.0, 39.0), &Charset::Ascii.glyphs());
        assert_eq!(a, "o");
        let full = bar(0.0, 39.0, 39.0, (0.0, 39.0), &Charset::Ascii.glyphs());
        assert_eq!(full.chars().count(), WIDTH);
        assert!(full.starts_with("|---") && full.ends_with("-o"), "{full}");
    }
}
