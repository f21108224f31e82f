//! The bottom of `plan/`: a plan's text as its parser reads it — the file it is in (a path, or
//! `preset NAME`), where each line was written when the text was put together from a plan and
//! the preset it extends, places in it ([`Location`]) and errors at those places (`file:line:
//! column: field: message`) — and the raw tables TOML gives for its entries. Everything else of
//! the plan reads from here and nothing here reads the rest, so that every part of a plan
//! (testbeds, workloads, questions, the caps, `extends`) locates its errors one way.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use toml::Spanned;

use crate::base::error::bad_input;

/// A place in a plan: the file (a path, or `preset NAME`) and the line and column, both from
/// 1. A plan that extends a preset has entries written in the preset: their places name it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Location {
    pub file: Arc<str>,
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// Where a line of a plan put together from a plan and the preset it extends was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Origin {
    /// The file (a path, or `preset NAME`).
    pub(super) file: Arc<str>,
    /// Its line there, from 1.
    pub(super) line: usize,
}

impl Location {
    /// `line 14`, or `line 14 of preset lowmem` when it is not in the file `here` (the file of
    /// the message's own place, or the plan's): how one entry of a plan points at another.
    pub fn line_in(&self, here: &str) -> String {
        if *self.file == *here {
            format!("line {}", self.line)
        } else {
            format!("line {} of {}", self.line, self.file)
        }
    }
}

/// The plan text and its name, for locating errors.
pub(super) struct Src<'a> {
    pub(super) name: &'a str,
    pub(super) text: &'a str,
    /// Where each line of `text` was written, when the text was put together from a plan and
    /// the preset it extends; `None`: every line is `name`'s own.
    pub(super) origins: Option<&'a [Origin]>,
    /// The byte offset at which each line of `text` starts, found on first use. Every entry's
    /// place is looked up ([`Src::loc`]); counting newlines from the top each time made reading
    /// a plan of many entries quadratic in its size.
    starts: OnceLock<Vec<usize>>,
}

impl<'a> Src<'a> {
    /// A plan's own text.
    pub(super) fn new(name: &'a str, text: &'a str) -> Self {
        Self::with_origins(name, text, None)
    }

    /// A text put together from several files, `origins` saying where each line comes from.
    pub(super) fn with_origins(
        name: &'a str,
        text: &'a str,
        origins: Option<&'a [Origin]>,
    ) -> Self {
        Src {
            name,
            text,
            origins,
            starts: OnceLock::new(),
        }
    }

    /// The line (from 0) that holds byte `offset`, and the offset at which that line starts:
    /// a binary search of the lines' starts, so `O(log lines)` a lookup.
    pub(super) fn line_of(&self, offset: usize) -> (usize, usize) {
        let starts = self.starts.get_or_init(|| {
            std::iter::once(0)
                .chain(self.text.match_indices('\n').map(|(i, _)| i + 1))
                .collect()
        });
        let offset = offset.min(self.text.len());
        // starts[0] = 0 <= offset, so at least one start is at or before it.
        let line = starts.partition_point(|&s| s <= offset) - 1;
        (line, starts[line])
    }

    pub(super) fn loc(&self, offset: usize) -> Location {
        let offset = offset.min(self.text.len());
        let (line0, line_start) = self.line_of(offset);
        let line = line0 + 1;
        let column = self.text[line_start..offset].chars().count() + 1;
        match self.origins.and_then(|o| o.get(line - 1).or(o.last())) {
            Some(o) => Location {
                file: o.file.clone(),
                line: o.line,
                column,
            },
            None => Location {
                file: Arc::from(self.name),
                line,
                column,
            },
        }
    }

    /// `file:line:col: field: message`, as bad input.
    pub(super) fn err(
        &self,
        span: Range<usize>,
        field: &str,
        msg: impl std::fmt::Display,
    ) -> anyhow::Error {
        let at = self.loc(span.start);
        if field.is_empty() {
            bad_input(format!("{at}: {msg}"))
        } else {
            bad_input(format!("{at}: {field}: {msg}"))
        }
    }

    /// `line N` of `at`, as a message about the place at `offset` names it (with its file when
    /// that is another: a plan and the preset it extends).
    pub(super) fn seen_from(&self, at: &Location, offset: usize) -> String {
        at.line_in(&self.loc(offset).file)
    }

    /// The key written at the start of the line holding `offset` (`size = ...` → `size`).
    pub(super) fn key_at(&self, offset: usize) -> Option<String> {
        let offset = offset.min(self.text.len());
        let start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let line = self.text[start..].lines().next()?;
        let (key, _) = line.split_once('=')?;
        let key = key.trim().trim_matches('"');
        (!key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)))
        .then(|| key.to_string())
    }
}

/// A table of a plan (a `[[testbed]]`, `[[workload]]`, `[age]`, ...) as TOML gives it: every
/// key and value with where it is written.
pub(super) type RawTable = Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>;

pub(super) fn toml_to_json(v: &toml::Value) -> serde_json::Value {
    match v {
        toml::Value::String(s) => serde_json::Value::String(s.clone()),
        toml::Value::Integer(i) => serde_json::Value::from(*i),
        toml::Value::Float(f) => serde_json::Value::from(*f),
        toml::Value::Boolean(b) => serde_json::Value::Bool(*b),
        toml::Value::Datetime(d) => serde_json::Value::String(d.to_string()),
        toml::Value::Array(a) => serde_json::Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => serde_json::Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}
