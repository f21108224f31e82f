//! A plan file as [`super`] merges it: its opening comments, its top-level `key = value`s
//! and its tables, each a run of whole lines that keeps the file and line it was written at;
//! and a merged plan written back as one text.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Result;
use toml::Spanned;

use super::Resolved;
use crate::lab::plan::fault::fault;
use crate::lab::plan::parse::RawPlan;
use crate::lab::plan::source::{Origin, RawTable, Src};
use crate::testbed::params::plan_keys;

/// One line of a plan and where it was written.
#[derive(Debug, Clone)]
pub(super) struct Line {
    text: String,
    from: Origin,
}

/// One `key = value` (whole lines) with the comment lines right above it.
#[derive(Debug, Clone)]
pub(super) struct Piece {
    /// The key (a testbed setting's flag name where it has old names too).
    pub(super) key: String,
    value: toml::Value,
    lines: Vec<Line>,
}

/// One table: a `[[testbed]]`, `[[workload]]`, `[[question]]` or the `[age]`.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) comments: Vec<Line>,
    /// The `[[testbed]]` line.
    pub(super) head: Line,
    pub(super) pieces: Vec<Piece>,
}

impl Entry {
    pub(super) fn get(&self, key: &str) -> Option<&str> {
        let p = self.pieces.iter().find(|p| p.key == key)?;
        p.value.as_str()
    }
}

/// The lists of entries a plan has, each merged by its entries' labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum List {
    Testbed,
    Workload,
    Question,
}

pub(super) const LISTS: [List; 3] = [List::Testbed, List::Workload, List::Question];

impl List {
    pub(super) fn table(self) -> &'static str {
        match self {
            List::Testbed => "testbed",
            List::Workload => "workload",
            List::Question => "question",
        }
    }

    pub(super) fn drop_key(self) -> &'static str {
        match self {
            List::Testbed => "drop_testbeds",
            List::Workload => "drop_workloads",
            List::Question => "drop_questions",
        }
    }

    /// The label of each entry: as the plan's parser gives it when `effective` (a preset's
    /// entries: `kind#N` for a kind written more than once, `qN` for a question without an
    /// id), else only as written (`label`, or `fs` / `kind`; a question's `id`). A testbed
    /// that writes neither `label` nor `fs` has the `fs` of `defaults` (`[testbed_defaults]`).
    pub(super) fn labels(
        self,
        entries: &[Entry],
        effective: bool,
        defaults: Option<&Entry>,
    ) -> Vec<Option<String>> {
        let kind = |e: &Entry| e.get("kind").map(str::to_string);
        entries
            .iter()
            .enumerate()
            .map(|(i, e)| match self {
                List::Testbed => e
                    .get("label")
                    .or_else(|| e.get("fs"))
                    .or_else(|| defaults.and_then(|d| d.get("fs")))
                    .map(String::from),
                List::Workload => e.get("label").map(String::from).or_else(|| {
                    let k = kind(e)?;
                    let same: Vec<usize> = (0..entries.len())
                        .filter(|&j| kind(&entries[j]).as_deref() == Some(k.as_str()))
                        .collect();
                    match same.iter().position(|&j| j == i) {
                        Some(n) if effective && same.len() > 1 => Some(format!("{k}#{}", n + 1)),
                        _ => Some(k),
                    }
                }),
                List::Question => e
                    .get("id")
                    .map(String::from)
                    .or_else(|| effective.then(|| format!("q{}", i + 1))),
            })
            .collect()
    }
}

/// A plan file read into its pieces.
#[derive(Debug, Clone)]
pub(super) struct Layer {
    /// The comment lines the file opens with.
    pub(super) header: Vec<Line>,
    pub(super) top: Vec<Piece>,
    /// `[testbed_defaults]`.
    pub(super) defaults: Option<Entry>,
    pub(super) age: Option<Entry>,
    pub(super) lists: [Vec<Entry>; 3],
}

/// The layer as one text, each line with where it was written; a blank line between tables.
pub(super) fn emit(layer: &Layer) -> Resolved {
    let mut lines: Vec<Line> = layer.header.clone();
    lines.extend(layer.top.iter().flat_map(|p| p.lines.iter().cloned()));
    let entries = layer
        .defaults
        .iter()
        .chain(&layer.age)
        .chain(layer.lists.iter().flatten());
    for e in entries {
        let first = e.comments.first().unwrap_or(&e.head);
        if !lines.is_empty() {
            lines.push(Line {
                text: String::new(),
                from: first.from.clone(),
            });
        }
        lines.extend(e.comments.iter().cloned());
        lines.push(e.head.clone());
        lines.extend(e.pieces.iter().flat_map(|p| p.lines.iter().cloned()));
    }
    let mut text = String::new();
    for l in &lines {
        text.push_str(&l.text);
        text.push('\n');
    }
    Resolved {
        text,
        origins: lines.into_iter().map(|l| l.from).collect(),
    }
}

/// A plan file's text cut into lines, for reading its pieces.
struct Cut<'a> {
    src: &'a Src<'a>,
    lines: Vec<&'a str>,
    /// Lines before this one are the file's opening comments.
    body: usize,
    file: Arc<str>,
}

impl<'a> Cut<'a> {
    fn new(src: &'a Src<'a>) -> Self {
        let lines: Vec<&str> = src.text.split('\n').collect();
        let body = lines
            .iter()
            .position(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .unwrap_or(lines.len());
        Cut {
            src,
            lines,
            body,
            file: Arc::from(src.name),
        }
    }

    /// The line (from 0) that holds byte `offset`.
    fn line_of(&self, offset: usize) -> usize {
        self.src.line_of(offset).0
    }

    fn line(&self, i: usize) -> Line {
        Line {
            text: self.lines[i].to_string(),
            from: Origin {
                file: self.file.clone(),
                line: i + 1,
            },
        }
    }

    /// The comment lines right above line `i` (not the file's opening ones).
    fn comments_above(&self, i: usize) -> Vec<Line> {
        let mut first = i;
        while first > self.body && self.lines[first - 1].trim_start().starts_with('#') {
            first -= 1;
        }
        (first..i).map(|j| self.line(j)).collect()
    }

    fn header(&self) -> Vec<Line> {
        let mut end = self.body;
        while end > 0 && self.lines[end - 1].trim().is_empty() {
            end -= 1;
        }
        (0..end).map(|j| self.line(j)).collect()
    }

    /// `key = value` as the whole lines it is written on, with the comments above them;
    /// refused when those lines are not that alone (a dotted key, a sub-table).
    fn piece(
        &self,
        key: &Spanned<String>,
        value: &Spanned<toml::Value>,
        canon: &str,
    ) -> Result<Piece> {
        let first = self.line_of(key.span().start);
        let last = self.line_of(value.span().end.saturating_sub(1)).max(first);
        let text = self.lines[first..=last].join("\n");
        let alone = text
            .parse::<toml::Table>()
            .ok()
            .is_some_and(|t| t.len() == 1 && t.get(key.get_ref()) == Some(value.get_ref()));
        if !alone {
            return Err(fault(
                key.span(),
                key.get_ref(),
                "a plan that extends a preset, or is extended, is merged line by line: write each key as key = value on lines of its own (not as a dotted key or a [sub-table])",
            ));
        }
        let mut lines = self.comments_above(first);
        lines.extend((first..=last).map(|j| self.line(j)));
        Ok(Piece {
            key: canon.to_string(),
            value: value.get_ref().clone(),
            lines,
        })
    }

    /// A `[[testbed]]` (or `[age]`, `[testbed_defaults]`) table: its table line, comments and
    /// pieces, a testbed setting's keyed by its flag's name (`list`: whose keys they are).
    fn entry(&self, t: &RawTable, table: &str, list: Option<List>) -> Result<Entry> {
        let head = self.line_of(t.span().start);
        let written: String = self.lines[head]
            .split('#')
            .next()
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if written != table {
            return Err(fault(
                t.span(),
                table,
                format!("a plan that extends a preset, or is extended, is merged line by line: write each entry under a {table} line of its own, not inline"),
            ));
        }
        let mut keys: Vec<(&Spanned<String>, &Spanned<toml::Value>)> = t.get_ref().iter().collect();
        keys.sort_by_key(|(k, _)| k.span().start);
        let pieces = keys
            .into_iter()
            .map(|(k, v)| {
                let canon = match list {
                    Some(List::Testbed) => plan_keys(k.get_ref()).first().copied(),
                    _ => None,
                };
                self.piece(k, v, canon.unwrap_or(k.get_ref()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Entry {
            comments: self.comments_above(head),
            head: self.line(head),
            pieces,
        })
    }
}

/// Keys of a plan that are not pieces of its top: its tables and what it says of the preset it
/// extends.
const NOT_TOP: [&str; 9] = [
    "testbed_defaults",
    "testbed",
    "workload",
    "question",
    "age",
    "extends",
    "drop_testbeds",
    "drop_workloads",
    "drop_questions",
];

/// Reads a plan file (`raw`, read from `src`) into its pieces.
pub(super) fn read_layer(src: &Src, raw: &RawPlan<RawTable>) -> Result<Layer> {
    let cut = Cut::new(src);
    let top: BTreeMap<Spanned<String>, Spanned<toml::Value>> =
        toml::from_str(src.text).map_err(|e| fault(e.span().unwrap_or(0..0), "", e.message()))?;
    let mut top: Vec<_> = top
        .iter()
        .filter(|(k, _)| !NOT_TOP.contains(&k.get_ref().as_str()))
        .collect();
    top.sort_by_key(|(k, _)| k.span().start);
    let mut lists: [Vec<Entry>; 3] = Default::default();
    for (list, out) in LISTS.iter().zip(lists.iter_mut()) {
        let entries = match list {
            List::Testbed => &raw.testbed,
            List::Workload => &raw.workload,
            List::Question => &raw.question,
        };
        *out = entries
            .iter()
            .map(|t| cut.entry(t, &format!("[[{}]]", list.table()), Some(*list)))
            .collect::<Result<_>>()?;
    }
    Ok(Layer {
        header: cut.header(),
        top: top
            .into_iter()
            .map(|(k, v)| cut.piece(k, v, k.get_ref()))
            .collect::<Result<_>>()?,
        defaults: raw
            .testbed_defaults
            .as_ref()
            .map(|d| cut.entry(d, "[testbed_defaults]", Some(List::Testbed)))
            .transpose()?,
        age: raw
            .age
            .as_ref()
            .map(|a| cut.entry(a, "[age]", None))
            .transpose()?,
        lists,
    })
}
