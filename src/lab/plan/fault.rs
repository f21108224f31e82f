//! The bottom of `plan/`: places in a plan ([`Location`]: `file:line:column`, the file a path
//! or `preset NAME`) and the faults found at them. The parts of a plan (testbeds, workloads,
//! questions, the caps, `extends`) return a [`Fault`] at a span of the text and never locate it
//! themselves: the entry point that holds the text ([`super::source::Src::locate`]) turns it
//! into the error at its place (`file:line:column: field: message`), once. Nothing here reads
//! the rest of the plan.

use std::ops::Range;
use std::sync::Arc;

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

/// A fault found in a plan's text before it is located: the bytes at fault, the field and what
/// is wrong. The checks of testbeds, workloads, questions and `extends` return it (inside an
/// `anyhow::Error`) instead of reaching for the text at each place; the entry point that read
/// the text locates it once ([`super::source::Src::locate`]), so a plan's errors still read
/// `file:line:col: field: message`.
#[derive(Debug)]
pub(super) struct Fault {
    pub(super) span: Range<usize>,
    /// The field at fault (empty: none); `None`: the key written on the span's line, which
    /// [`super::source::Src::locate`] reads there (TOML's own errors name no field).
    pub(super) field: Option<String>,
    pub(super) said: Said,
}

/// What a [`Fault`] says: a text, or a text that names another entry's line, which is written
/// as `line N`, or `line N of preset NAME` when the entry is in another file than the fault.
pub(super) enum Said {
    Text(String),
    Naming(Box<dyn Fn(&str) -> String + Send + Sync>),
}

impl Said {
    /// The message, for a fault in the file `here`.
    pub(super) fn text(&self, here: &str) -> String {
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
