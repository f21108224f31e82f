//! The results directory: one JSON file per run, written atomically (temporary file, fsync,
//! rename), named so that a listing sorts by time.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};

use super::{RunResult, SCHEMA};
use crate::base::atomic::OutDir;
use crate::base::bounded::{read_regular, ReadError, RESULT_LIMIT};
use crate::base::error::bad_input;

/// A result and where it was read from.
#[derive(Debug, Clone)]
pub struct ResultFile {
    pub path: PathBuf,
    pub result: RunResult,
}

/// A result that could not be written into its results directory and was saved elsewhere.
#[derive(Debug, Clone)]
pub struct Unsaved {
    /// The results directory it was meant for.
    pub wanted: PathBuf,
    /// Where it is instead.
    pub saved: PathBuf,
    /// Why it is not in `wanted`.
    pub why: String,
}

/// The results of this process that went to the fallback directory (see [`write_result`]).
static UNSAVED: Mutex<Vec<Unsaved>> = Mutex::new(Vec::new());

/// The results of this process saved outside their results directory so far; a command that
/// ran anything ends with exit 1 when there are any ([`unsaved_exit`]).
pub fn unsaved() -> Vec<Unsaved> {
    UNSAVED.lock().map(|u| u.clone()).unwrap_or_default()
}

/// Warns about every result saved outside its results directory and returns exit status 1 if
/// there was one: the measurement is kept, but not where the user asked.
pub fn unsaved_exit() -> Option<std::process::ExitCode> {
    let u = unsaved();
    if u.is_empty() {
        return None;
    }
    for x in &u {
        eprintln!(
            "error: the result could not be written into {} ({}); it is saved as {} — move it there when the directory is writable",
            x.wanted.display(),
            x.why,
            x.saved.display()
        );
    }
    Some(std::process::ExitCode::from(1))
}

/// The file name a result is first offered under: a listing sorts by time.
fn result_name(r: &RunResult, n: u32) -> String {
    let stamp: String = r
        .started_at
        .chars()
        .filter(|c| c.is_ascii_digit())
        .take(14)
        .collect();
    let tail = if n == 0 {
        String::new()
    } else {
        format!("-{}", n + 1)
    };
    format!(
        "{stamp}-{}-{}-rep{}-{}{tail}.json",
        r.testbed.label,
        r.workload.kind,
        r.rep,
        &r.spec_hash[..r.spec_hash.len().min(10)]
    )
}

/// Refuses a results directory that cannot hold results, before anything runs: one that is
/// not a directory (`/dev/null`), one reached through another user's link
/// ([`crate::base::sys::chase`]), one on /proc or /sys, or one where no file can be created (found by
/// creating a temporary file there). A directory that does not exist yet is not made here (a
/// run refused later leaves nothing): its nearest existing ancestor is checked instead, and the
/// directory is made when the first result is written.
pub fn check_out_dir(dir: &Path) -> Result<()> {
    check_dir_for(dir, "--out", "the result files")
}

/// [`check_out_dir`] for any output directory: `flag` names it in messages (`--out`,
/// `--log`), `what` says what goes there.
pub fn check_dir_for(dir: &Path, flag: &str, what: &str) -> Result<()> {
    let shown = dir.display();
    let c = crate::base::sys::chase::chase(dir, crate::base::sys::chase::Opts::FOLLOW)
        .map_err(|e| bad_input(format!("{flag} {shown}: {e:#}")))?;
    match (c.rest.as_slice(), c.st) {
        ([_], Some(st)) => {
            return Err(bad_input(format!(
                "{flag} {shown} is {}, not a directory: {flag} names the directory {what} go into (one per run); give a directory, or a path that does not exist yet",
                crate::base::bounded::kind_of(st.st_mode)
            )))
        }
        ([_, ..], Some(_)) => {
            return Err(bad_input(format!(
                "{flag} {shown} cannot be made: {} is not a directory",
                c.path().display()
            )))
        }
        _ => {}
    }
    let d = OutDir::from_chased(&c).map_err(|e| bad_input(format!("{flag} {shown}: {e:#}")))?;
    if let Some(kernel) = d.kernel_interface() {
        return Err(bad_input(format!(
            "{flag} {shown} is on {kernel}, a kernel interface, not a place for {what}; give a directory on a real filesystem"
        )));
    }
    d.probe().map_err(|e| {
        bad_input(format!(
            "{flag} {shown} is not writable: {e:#}; give a directory you can write (nothing was run)"
        ))
    })
}

/// The trusted place for results that could not be written where asked: `unsaved/` in the
/// state directory (`$FSGAUGE_STATE_DIR`, else `/var/lib/fsgauge` for root, else the user's
/// runtime directory), each directory made 0700 and checked to be this user's and writable by
/// no one else.
fn fallback_dir() -> Result<OutDir> {
    let uid = nix::unistd::geteuid();
    let (base, parts): (PathBuf, Vec<String>) =
        if let Some(d) = std::env::var_os("FSGAUGE_STATE_DIR") {
            (PathBuf::from(d), vec!["unsaved".into()])
        } else if uid.is_root() {
            ("/var/lib".into(), vec!["fsgauge".into(), "unsaved".into()])
        } else if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
            (PathBuf::from(d), vec!["fsgauge".into(), "unsaved".into()])
        } else {
            (
                "/tmp".into(),
                vec![format!("fsgauge-{uid}"), "fsgauge".into(), "unsaved".into()],
            )
        };
    let path = parts.iter().fold(base, |p, part| p.join(part));
    let fd = crate::base::sys::trust::own_dir(&path).with_context(|| {
        format!(
            "fsgauge keeps unsaved results only in a directory of its own user (uid {uid}) that no one else can write: {}",
            path.display()
        )
    })?;
    let dir = OutDir::from_fd(fd, path);
    Ok(dir)
}

/// Writes a result into `dir` (created if needed) under a name no other file has (a taken
/// name gets `-2`, `-3`, …; nothing is ever replaced) and returns its path.
///
/// When the result cannot be written there (the directory filled up or went away during the
/// run), it is saved in the fallback directory instead ([`fallback_dir`]), a warning names
/// where, and [`unsaved_exit`] makes the command end with exit 1: a measurement is never lost
/// for want of a place to write it.
pub fn write_result(dir: &Path, r: &RunResult) -> Result<PathBuf> {
    let mut bytes = serde_json::to_vec_pretty(r)?;
    bytes.push(b'\n');
    // A run stopped before its result is written has no result: the file exists only for runs
    // that finished before the signal, and then it is whole (written atomically).
    crate::base::signals::test_pause("result");
    crate::base::signals::check()?;
    let path = match write_into(dir, r, &bytes) {
        Ok(p) => p,
        Err(e) => {
            let why = format!("{e:#}");
            let fb = fallback_dir()
                .and_then(|d| {
                    let name = d.create_new(|n| result_name(r, n), &bytes)?;
                    Ok(d.path().join(name))
                })
                .with_context(|| {
                    format!(
                        "the result of {} rep {} could not be written into {} ({why}), nor saved in the fallback directory",
                        r.testbed.label,
                        r.rep,
                        dir.display()
                    )
                })?;
            eprintln!(
                "warning: the result of {} rep {} could not be written into {} ({why}); saved as {} instead",
                r.testbed.label,
                r.rep,
                dir.display(),
                fb.display()
            );
            if let Ok(mut u) = UNSAVED.lock() {
                u.push(Unsaved {
                    wanted: dir.to_path_buf(),
                    saved: fb.clone(),
                    why,
                });
            }
            fb
        }
    };
    crate::base::signals::note_result_written(&path, r.rep);
    crate::base::signals::test_pause("result");
    Ok(path)
}

fn write_into(dir: &Path, r: &RunResult, bytes: &[u8]) -> Result<PathBuf> {
    let d =
        OutDir::make(dir).with_context(|| format!("the results directory {}", dir.display()))?;
    let name = d.create_new(|n| result_name(r, n), bytes)?;
    Ok(dir.join(name))
}

/// Reads a result file's bytes: a regular file of at most [`RESULT_LIMIT`] bytes.
fn read_result_bytes(path: &Path) -> Result<Vec<u8>, ReadError> {
    read_regular(path, RESULT_LIMIT, "results")
}

/// Reads one result file, checking the schema tag.
pub fn load(path: &Path) -> Result<RunResult> {
    let bytes = read_result_bytes(path)?;
    parse_result(&bytes, path)
}

/// Reads the bytes of a result file (`path` names it in errors), checking the schema tag.
///
/// The memory this takes is the bytes (the caller's) and the typed result, never a
/// `serde_json::Value` of the whole document beside them: the schema tag is read by a pass
/// that keeps nothing else, then the document is read once into [`RunResult`]. (Reading it as
/// a `Value` first, then converting, held about 8× the file.)
pub fn parse_result(bytes: &[u8], path: &Path) -> Result<RunResult> {
    match schema_of(bytes) {
        Err(e) => Err(e).with_context(|| format!("{} is not JSON", path.display())),
        Ok(Some(s)) if s == SCHEMA => serde_json::from_slice(bytes)
            .with_context(|| format!("{} does not match schema {SCHEMA}", path.display())),
        Ok(Some(other)) => bail!(
            "{} has schema {other:?}; this fsgauge reads {SCHEMA}",
            path.display()
        ),
        Ok(None) => bail!(
            "{} is not an fsgauge result (no \"schema\" field)",
            path.display()
        ),
    }
}

/// The `schema` tag of a JSON document (a tag that is not text as its JSON): `None` when it
/// has none or is not an object, an error when the bytes are not JSON. One streaming pass that keeps only
/// the tag.
fn schema_of(bytes: &[u8]) -> serde_json::Result<Option<String>> {
    serde_json::from_slice::<SchemaTag>(bytes).map(|t| t.0)
}

/// The `schema` tag of any JSON document, every other value skipped as it is read.
struct SchemaTag(Option<String>);

impl<'de> serde::Deserialize<'de> for SchemaTag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct Tag;
        impl<'de> Visitor<'de> for Tag {
            type Value = SchemaTag;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON document")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<SchemaTag, A::Error> {
                let mut tag = None;
                while let Some(key) = m.next_key::<String>()? {
                    if key == "schema" && tag.is_none() {
                        tag = Some(match m.next_value::<serde_json::Value>()? {
                            serde_json::Value::String(s) => s,
                            other => other.to_string(),
                        });
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(SchemaTag(tag))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<SchemaTag, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(SchemaTag(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<SchemaTag, E> {
                Ok(SchemaTag(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<SchemaTag, E> {
                Ok(SchemaTag(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<SchemaTag, E> {
                Ok(SchemaTag(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<SchemaTag, E> {
                Ok(SchemaTag(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<SchemaTag, E> {
                Ok(SchemaTag(None))
            }
            fn visit_unit<E>(self) -> Result<SchemaTag, E> {
                Ok(SchemaTag(None))
            }
        }
        d.deserialize_any(Tag)
    }
}

/// A `*.json` file of a results directory that was not used as a result.
#[derive(Debug, Clone)]
pub struct Skipped {
    pub path: PathBuf,
    /// Why, with the parse error's line and column where there is one.
    pub why: String,
    /// True when the file is damaged (unreadable, empty, truncated, not JSON); false when it is
    /// a JSON document that claims to be a result but is of another schema or does not match.
    pub damaged: bool,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.why)
    }
}

/// What a results directory holds: the results, sorted by file name, the `*.json` files that
/// are not usable results, and the JSON documents without a `schema` tag (not results at all:
/// a report exported next to the results, a file of another tool), which the reader names in a
/// warning rather than drop without a word.
#[derive(Debug, Clone, Default)]
pub struct DirResults {
    pub results: Vec<ResultFile>,
    pub skipped: Vec<Skipped>,
    /// `*.json` documents with no `schema` key.
    pub foreign: Vec<PathBuf>,
}

/// Reads every `*.json` result in a directory (not recursive), sorted by file name; the one
/// place results are read from a directory (reports, comparisons, plan resumption). A file
/// that is not a result is never dropped without a trace: it is listed in
/// [`DirResults::skipped`] with the reason, for the caller to warn about or refuse.
pub fn load_dir(dir: &Path) -> Result<DirResults> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading results directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    paths.sort();
    let mut out = DirResults::default();
    for path in paths {
        // A directory of many large files is read promptly, and SIGINT/SIGTERM end it.
        crate::base::signals::check()?;
        let bytes = match read_result_bytes(&path) {
            Ok(b) => b,
            Err(e) => {
                out.skipped.push(Skipped {
                    why: format!("cannot be read: {e}")
                        .replace(&format!("{}: ", path.display()), "")
                        .replace(&format!("{} ", path.display()), ""),
                    path,
                    damaged: true,
                });
                continue;
            }
        };
        let schema = match schema_of(&bytes) {
            Ok(s) => s,
            Err(e) => {
                // serde_json's message ends "at line L column C".
                let why = if bytes.iter().all(u8::is_ascii_whitespace) {
                    format!("is empty ({e})")
                } else {
                    format!("is not valid JSON (truncated or damaged): {e}")
                };
                out.skipped.push(Skipped {
                    path,
                    why,
                    damaged: true,
                });
                continue;
            }
        };
        if schema.is_none() {
            out.foreign.push(path);
            continue;
        }
        match parse_result(&bytes, &path) {
            Ok(result) => out.results.push(ResultFile { path, result }),
            Err(e) => out.skipped.push(Skipped {
                why: format!("{e:#}")
                    .strip_prefix(&format!("{}", path.display()))
                    .map_or_else(|| format!("{e:#}"), |s| s.trim_start().to_string()),
                path,
                damaged: false,
            }),
        }
    }
    Ok(out)
}
