//! The bottom of `plan/`: a plan's text as its parser reads it — the file it is in (a path, or
//! `preset NAME`), where each line was written when the text was put together from a plan and
//! the preset it extends, places in it ([`Location`]) and errors at those places (`file:line:
//! column: field: message`) — and the raw tables TOML gives for its entries. Everything else of
//! the plan reads from here and nothing here reads the rest. The parts of a plan (testbeds,
//! workloads, questions, the caps, `extends`) return a [`Fault`] at a span of the text and never
//! locate it themselves: the entry point that holds the text ([`Src::locate`]: the plan's parse,
//! `extends` for a plan and each preset it reads) turns it into the error at its place, once.

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

/// A fault found in a plan's text before it is located: the bytes at fault, the field and what
/// is wrong. The checks of testbeds, workloads, questions and `extends` return it (inside an
/// `anyhow::Error`) instead of reaching back here for each place; the entry point that read the
/// text locates it once ([`Src::locate`]), so a plan's errors still read `file:line:col:
/// field: message`.
#[derive(Debug)]
pub(super) struct Fault {
    span: Range<usize>,
    /// The field at fault (empty: none); `None`: the key written on the span's line, which
    /// [`Src::locate`] reads there (TOML's own errors name no field).
    field: Option<String>,
    said: Said,
}

/// What a [`Fault`] says: a text, or a text that names another entry's line, which is written
/// as `line N`, or `line N of preset NAME` when the entry is in another file than the fault.
enum Said {
    Text(String),
    Naming(Box<dyn Fn(&str) -> String + Send + Sync>),
}

impl Said {
    /// The message, for a fault in the file `here`.
    fn text(&self, here: &str) -> String {
        match self {
            Said::Text(t) => t.clone(),
            Said::Naming(f) => f(here),
        }
    }
}

impl std::fmt::Debug for Said {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text("?"))
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Unlocated: only a check's own tests see it so.
        write!(
            f,
            "bytes {:?}: {}: {}",
            self.span,
            self.field.as_deref().unwrap_or("?"),
            self.said.text("?")
        )
    }
}

impl std::error::Error for Fault {}

/// A fault at `span` of the plan's text about `field` (empty: none): `msg`.
pub(super) fn fault(span: Range<usize>, field: &str, msg: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(Fault {
        span,
        field: Some(field.to_string()),
        said: Said::Text(msg.to_string()),
    })
}

/// A fault at `span` about the key written on its line, if any (a syntax or type error TOML
/// found there): `msg`.
pub(super) fn fault_at_key(span: Range<usize>, msg: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(Fault {
        span,
        field: None,
        said: Said::Text(msg.to_string()),
    })
}

/// A fault whose message names another entry's place: `msg` gets that place as the fault's own
/// file names it ([`Location::line_in`]).
pub(super) fn fault_naming(
    span: Range<usize>,
    field: &str,
    other: &Location,
    msg: impl Fn(String) -> String + Send + Sync + 'static,
) -> anyhow::Error {
    let other = other.clone();
    anyhow::Error::new(Fault {
        span,
        field: Some(field.to_string()),
        said: Said::Naming(Box::new(move |here| msg(other.line_in(here)))),
    })
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
