//! A plan's text as its parser reads it — the file it is in (a path, or `preset NAME`), where
//! each line was written when the text was put together from a plan and the preset it extends
//! — and the raw tables TOML gives for its entries. It turns the places and faults of
//! [`super::fault`] into errors at their places ([`Src::locate`]: called once by each entry
//! point that holds a text — the plan's parse, `extends` for a plan and each preset it reads).
//! Nothing here reads the rest of the plan but `fault`.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use toml::Spanned;

use super::fault::{Fault, Location};
use crate::base::error::bad_input;

/// Where a line of a plan put together from a plan and the preset it extends was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Origin {
    /// The file (a path, or `preset NAME`).
    pub(super) file: Arc<str>,
    /// Its line there, from 1.
    pub(super) line: usize,
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

    /// Where each of `tables` starts: the entries' places, which the plan keeps (for messages
    /// that point from one entry to another, and for a question's cell).
    pub(super) fn places(&self, tables: &[RawTable]) -> Vec<Location> {
        tables.iter().map(|t| self.loc(t.span().start)).collect()
    }

    /// `e` with its [`Fault`], if it carries one, put at its place in this text (`file:line:
    /// col: field: message`, as bad input); any other error as it is. Each entry point of the
    /// plan's parts calls it once on what its checks return.
    pub(super) fn locate(&self, e: anyhow::Error) -> anyhow::Error {
        let f = match e.downcast::<Fault>() {
            Ok(f) => f,
            Err(e) => return e,
        };
        let at = self.loc(f.span.start);
        let msg = f.said.text(&at.file);
        let field = match f.field {
            Some(field) => field,
            None => self.key_at(f.span.start).unwrap_or_default(),
        };
        if field.is_empty() {
            bad_input(format!("{at}: {msg}"))
        } else {
            bad_input(format!("{at}: {field}: {msg}"))
        }
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

#[cfg(test)]
mod tests {
    use super::super::fault::{fault, fault_naming};
    use super::*;

    /// A plan that extends a preset: its first line is the preset's, its second the plan's.
    fn joined<'a>(origins: &'a [Origin]) -> Src<'a> {
        Src::with_origins("t.toml", "a = 1\nb = 2\n", Some(origins))
    }

    #[test]
    fn a_fault_is_located_once_where_its_text_was_written() {
        let origins = [
            Origin {
                file: Arc::from("preset base"),
                line: 7,
            },
            Origin {
                file: Arc::from("t.toml"),
                line: 3,
            },
        ];
        let src = joined(&origins);
        let e = src.locate(fault(10..11, "b", "is wrong"));
        assert_eq!(format!("{e:#}"), "t.toml:3:5: b: is wrong");
        let bad = |e: &anyhow::Error| e.chain().any(|c| c.is::<crate::base::error::BadInput>());
        assert!(bad(&e), "{e:#}");
        let e = src.locate(fault(0..1, "", "no field"));
        assert_eq!(format!("{e:#}"), "preset base:7:1: no field");
        // Another entry's line, as the fault's own file names it.
        let other = src.loc(6);
        let naming = |span| fault_naming(span, "a", &other, |at| format!("the other at {at}"));
        let e = src.locate(naming(6..7));
        assert_eq!(format!("{e:#}"), "t.toml:3:1: a: the other at line 3");
        let e = src.locate(naming(0..1));
        assert_eq!(
            format!("{e:#}"),
            "preset base:7:1: a: the other at line 3 of t.toml"
        );
        // Any other error passes as it is.
        let e = src.locate(anyhow::anyhow!("not a fault"));
        assert_eq!(format!("{e:#}"), "not a fault");
    }
}
