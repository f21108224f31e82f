//! The results store: an index of result files in SQLite (one file, nothing to start; the
//! default) or PostgreSQL (a server a team shares), with one schema and the same queries.
//!
//! The JSON result files stay the source of truth. The store keeps each run's identity, the
//! file it came from (with that file's size and modification time), where and what it ran
//! (host, kernel, CPU model, fsgauge version and commit, testbed, workload, plan) and every
//! figure of every phase, so that a history over thousands of runs is one query instead of
//! reading every file. `store rebuild` makes the index again from the files alone; a result
//! whose file changed or vanished is named and left out, never served from the index.

mod index;
mod pg;
mod query;
mod schema;
mod sqlite;

pub mod history;
pub mod history_plot;
pub mod history_sketch;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::base::error::bad_input;

pub use index::{Indexed, RunRow};
pub use query::{key_names, Filter, Hit};
use sqlite::Mode;

/// What a backend does; the SQL is shared ([`schema`], [`query`]).
trait Db {
    /// Runs statements in one transaction.
    fn batch(&mut self, statements: &[&str]) -> Result<()>;
    /// Makes the tables and records the schema version, in one transaction that first waits
    /// for any other maker and does nothing when the version is there by then (two first
    /// adds at once make the tables once).
    fn create(&mut self, statements: &[&str], version: &str) -> Result<()>;
    /// Brings a store of schema version `from` to `from + 1` by `statements`, in one
    /// transaction that first waits for any other writer and does nothing when the version is
    /// not `from` by then (two migrations at once change the tables once); whether it did.
    fn migrate(&mut self, from: i64, statements: &[&str]) -> Result<bool>;
    /// A `meta` value; `None` when the store has no tables yet.
    fn meta(&mut self, key: &str) -> Result<Option<String>>;
    /// Adds runs in one transaction; returns how many were not there before.
    fn add(&mut self, runs: &[Indexed]) -> Result<usize>;
    /// Runs a query whose columns are [`Hit`]'s, in order.
    fn hits(&mut self, sql: &str, args: &[String]) -> Result<Vec<Hit>>;
    fn count(&mut self, table: &str) -> Result<i64>;
}

/// Where a store is: `--store` / `FSGAUGE_STORE`.
#[derive(Debug, Clone, PartialEq)]
pub enum Location {
    /// A SQLite file (`PATH` or `sqlite:PATH`).
    Sqlite(PathBuf),
    /// A PostgreSQL URL (`postgres://…`, `postgresql://…`).
    Postgres(String),
}

impl Location {
    pub fn parse(s: &str) -> Result<Self> {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(Self::Postgres(s.to_string()));
        }
        if let Some((scheme, _)) = s.split_once("://") {
            return Err(bad_input(format!(
                "--store {s:?}: {scheme}:// is not a store this fsgauge knows; give a SQLite file's path (or sqlite:PATH) or a postgres://USER@HOST/DB URL"
            )));
        }
        let path = s.strip_prefix("sqlite:").unwrap_or(s);
        if path.is_empty() {
            return Err(bad_input(
                "--store is empty: give a SQLite file's path or a postgres://USER@HOST/DB URL",
            ));
        }
        Ok(Self::Sqlite(PathBuf::from(path)))
    }

    /// The location for messages, a password left out.
    pub fn shown(&self) -> String {
        match self {
            Self::Sqlite(p) => p.display().to_string(),
            Self::Postgres(url) => redact(url),
        }
    }
}

/// A URL with the password of its user part replaced by `***`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((user, host)) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or("");
            format!("{scheme}://{name}:***@{host}")
        }
        _ => url.to_string(),
    }
}

/// An open store.
pub struct Store {
    db: Box<dyn Db>,
    pub location: Location,
}

/// What an add did.
#[derive(Debug, Clone, Default)]
pub struct Added {
    /// Result files read.
    pub files: usize,
    /// Runs the store did not hold before.
    pub new: usize,
    /// Files that are not results (named with why).
    pub skipped: Vec<String>,
}

impl Store {
    /// Opens a store to add to: a missing SQLite file is made, the tables too; a store of an
    /// older schema version is migrated first (adding writes anyway).
    pub fn open_for_writing(loc: &Location) -> Result<Self> {
        let mut s = Self::connect(loc, Mode::Create)?;
        s.prepare()?;
        Ok(s)
    }

    /// Opens a store to make again (`store rebuild`): its index is dropped and made anew
    /// whatever schema version it holds, without migrating it first (a store of a version this
    /// fsgauge does not read is what rebuild is for).
    pub fn open_for_rebuild(loc: &Location) -> Result<Self> {
        let mut s = Self::connect(loc, Mode::Create)?;
        s.db.batch(schema::DROP)?;
        s.db.create(schema::TABLES, &schema::VERSION.to_string())?;
        Ok(s)
    }

    /// Opens a store to query: it must exist and hold an index of this schema version. A
    /// query never writes (a read-only role or file answers as any other), so a store of an
    /// older version is refused, untouched, naming the command that migrates it.
    pub fn open_for_reading(loc: &Location) -> Result<Self> {
        let mut s = Self::open_existing(loc, Mode::Read)?;
        match s.stored_version()? {
            Some(schema::VERSION) => Ok(s),
            Some(v) if migratable(v) => Err(bad_input(format!(
                "--store {}: its index is of schema version {v}; this fsgauge reads version {}, and a query does not change a store: bring it to version {} with fsgauge store migrate --store {} (as a user that may write it; it reads the result files again), or make it again with fsgauge store rebuild --store {} RESULTS_DIR...",
                loc.shown(),
                schema::VERSION,
                schema::VERSION,
                loc.shown(),
                loc.shown()
            ))),
            Some(v) => Err(s.unreadable(v)),
            None => Err(no_index(loc)),
        }
    }

    /// Opens a store to bring to this fsgauge's schema version (`store migrate`); the version
    /// it was of when it had to be migrated.
    pub fn open_for_migrating(loc: &Location) -> Result<(Self, Option<i64>)> {
        let mut s = Self::open_existing(loc, Mode::Write)?;
        let from = s.stored_version()?;
        match s.version()? {
            None => Err(no_index(loc)),
            Some(_) => Ok((s, from.filter(|v| *v != schema::VERSION))),
        }
    }

    /// Opens a store that must be there already (a SQLite file that is missing is named).
    fn open_existing(loc: &Location, mode: Mode) -> Result<Self> {
        if let Location::Sqlite(p) = loc {
            if !p.is_file() {
                return Err(bad_input(format!(
                    "--store {}: no such store; make one with: fsgauge store add --store {} RESULTS_DIR",
                    loc.shown(),
                    loc.shown()
                )));
            }
        }
        Self::connect(loc, mode)
    }

    fn connect(loc: &Location, mode: Mode) -> Result<Self> {
        let db: Box<dyn Db> = match loc {
            Location::Sqlite(p) => Box::new(sqlite::Sqlite::open(p, mode).map_err(|e| {
                bad_input(format!(
                    "--store {}: cannot open it as a SQLite store: {e:#}; give a file you can {}",
                    loc.shown(),
                    if mode == Mode::Read {
                        "read"
                    } else {
                        "write (it is made when missing)"
                    }
                ))
            })?),
            Location::Postgres(url) => Box::new(pg::Postgres::connect(url).map_err(|e| {
                bad_input(format!(
                    "--store {}: cannot connect: {e:#}; check that the server runs and the URL names a user and database it accepts (postgres://USER[:PASSWORD]@HOST[:PORT]/DB)",
                    loc.shown()
                ))
            })?),
        };
        Ok(Self {
            db,
            location: loc.clone(),
        })
    }

    /// The schema version the store holds, as it is (-1 when not a number); `None` when it
    /// has no tables yet.
    fn stored_version(&mut self) -> Result<Option<i64>> {
        Ok(self
            .db
            .meta("schema_version")?
            .map(|v| v.parse().unwrap_or(-1)))
    }

    /// The schema version the store holds, an older one migrated
    /// ([`schema::MIGRATIONS`]); a store of a version this fsgauge cannot bring to its own is
    /// refused.
    fn version(&mut self) -> Result<Option<i64>> {
        let Some(mut v) = self.stored_version()? else {
            return Ok(None);
        };
        if v != schema::VERSION && self.migrate(v)? {
            v = schema::VERSION;
        }
        if v != schema::VERSION {
            return Err(self.unreadable(v));
        }
        Ok(Some(v))
    }

    /// The refusal of a store of a version no migration leads from.
    fn unreadable(&self, v: i64) -> anyhow::Error {
        bad_input(format!(
            "--store {}: its index is of schema version {v}; this fsgauge reads version {}: make it again with fsgauge store rebuild --store {} RESULTS_DIR...",
            self.location.shown(),
            schema::VERSION,
            self.location.shown()
        ))
    }

    /// Brings a store of version `from` to this fsgauge's, then fills what the new version
    /// keeps from the result files (a run whose file changed or vanished keeps it unknown);
    /// false when no migration leads from `from`.
    fn migrate(&mut self, from: i64) -> Result<bool> {
        let mut v = from;
        let mut changed = false;
        for (old, statements) in schema::MIGRATIONS {
            if v == *old {
                changed |= self.db.migrate(*old, statements)?;
                v = old + 1;
            }
        }
        if v != schema::VERSION {
            return Ok(false);
        }
        if changed {
            let (n, unread) = self.refill()?;
            eprintln!(
                "note: the store {} was of schema version {from}; brought to version {}, what it keeps of {n} runs (the machine's load, each phase's, and the disturbed attempts) read from their files{}",
                self.location.shown(),
                schema::VERSION,
                if unread == 0 {
                    String::new()
                } else {
                    format!(" ({unread} files changed, vanished or unreadable: their runs keep them unknown until fsgauge store rebuild)")
                }
            );
        }
        Ok(true)
    }

    /// Indexes again every run whose file is as it was indexed (a migration's new columns);
    /// (runs read, files that could not be).
    fn refill(&mut self) -> Result<(usize, usize)> {
        let (fresh, stale) = self.runs(&Filter::default())?;
        let mut paths: Vec<String> = fresh.into_iter().map(|h| h.path).collect();
        paths.sort();
        paths.dedup();
        let (mut read, mut unread) = (0, stale.len());
        let mut batch: Vec<Indexed> = Vec::new();
        for p in paths {
            let p = PathBuf::from(p);
            match crate::results::load(&p).and_then(|r| index::index(&p, &r)) {
                Ok(i) => batch.push(i),
                Err(_) => unread += 1,
            }
            if batch.len() >= 500 {
                read += batch.len();
                self.db.add(&batch)?;
                batch.clear();
            }
        }
        read += batch.len();
        if !batch.is_empty() {
            self.db.add(&batch)?;
        }
        Ok((read, unread))
    }

    /// Makes the tables when missing.
    fn prepare(&mut self) -> Result<()> {
        if self.version()?.is_none() {
            self.db
                .create(schema::TABLES, &schema::VERSION.to_string())?;
        }
        Ok(())
    }

    /// Adds the results of files and directories of them (not recursive). Adding a result
    /// twice adds it once.
    pub fn add(&mut self, paths: &[PathBuf]) -> Result<Added> {
        let mut added = Added::default();
        let mut batch: Vec<Indexed> = Vec::new();
        for p in paths {
            for (path, r) in read_results(p, &mut added.skipped)? {
                crate::base::signals::check()?;
                batch.push(index::index(&path, &r)?);
                added.files += 1;
                if batch.len() >= 500 {
                    added.new += self.db.add(&batch)?;
                    batch.clear();
                }
            }
        }
        if !batch.is_empty() {
            added.new += self.db.add(&batch)?;
        }
        Ok(added)
    }

    /// Runs and figures held.
    pub fn counts(&mut self) -> Result<(i64, i64)> {
        Ok((self.db.count("runs")?, self.db.count("metrics")?))
    }

    /// One metric's figures under a filter, files checked ([`query::check_files`]).
    pub fn metric(&mut self, metric: &str, f: &Filter) -> Result<(Vec<Hit>, Vec<String>)> {
        let (sql, args) = query::metric_sql(metric, f);
        let hits = self.db.hits(&sql, &args)?;
        Ok(query::check_files(hits))
    }

    /// The runs under a filter, files checked.
    pub fn runs(&mut self, f: &Filter) -> Result<(Vec<Hit>, Vec<String>)> {
        let (sql, args) = query::runs_sql(f);
        let hits = self.db.hits(&sql, &args)?;
        Ok(query::check_files(hits))
    }
}

/// Whether a migration leads from schema version `v` to this fsgauge's.
fn migratable(v: i64) -> bool {
    schema::MIGRATIONS
        .first()
        .is_some_and(|(first, _)| (*first..schema::VERSION).contains(&v))
}

/// The refusal of a store that holds no index.
fn no_index(loc: &Location) -> anyhow::Error {
    bad_input(format!(
        "--store {}: holds no fsgauge index; add results with: fsgauge store add --store {} RESULTS_DIR",
        loc.shown(),
        loc.shown()
    ))
}

/// The results of a file or a directory of them, with their paths; files of a directory
/// that are not results are named in `skipped`.
fn read_results(
    p: &Path,
    skipped: &mut Vec<String>,
) -> Result<Vec<(PathBuf, crate::results::RunResult)>> {
    let md = std::fs::metadata(p).map_err(|e| bad_input(format!("{}: {e}", p.display())))?;
    if !md.is_dir() {
        let r = crate::results::load(p).map_err(|e| bad_input(format!("{e:#}")))?;
        let mut one = vec![r];
        crate::workload::registry::declare_missing_metrics(&mut one);
        return Ok(one.into_iter().map(|r| (p.to_path_buf(), r)).collect());
    }
    let dir = crate::results::load_dir(p).with_context(|| format!("{}", p.display()))?;
    skipped.extend(dir.skipped.iter().map(|s| s.to_string()));
    let (paths, mut results): (Vec<PathBuf>, Vec<_>) =
        dir.results.into_iter().map(|f| (f.path, f.result)).unzip();
    // Results written before workloads declared their figures read as reports read them.
    crate::workload::registry::declare_missing_metrics(&mut results);
    Ok(paths.into_iter().zip(results).collect())
}

/// The paths of the runs a query names (for `compare` and `report`): `store:KEY=VALUE,…`,
/// against `--store`/`FSGAUGE_STORE`. Files that changed or vanished are named on stderr and
/// left out; a query that matches nothing is refused.
pub fn query_paths(query: &str, loc: Option<&str>) -> Result<Vec<PathBuf>> {
    let Some(loc) = loc else {
        return Err(bad_input(format!(
            "{query:?} is a store query, but no store is given: set --store or FSGAUGE_STORE"
        )));
    };
    let loc = Location::parse(loc)?;
    let f = Filter::parse(&[query.trim_start_matches("store:").to_string()])?;
    let mut store = Store::open_for_reading(&loc)?;
    let (hits, stale) = store.runs(&f)?;
    for s in &stale {
        eprintln!("warning: {s}");
    }
    if hits.is_empty() {
        return Err(bad_input(format!(
            "{query}: no run in {} matches",
            loc.shown()
        )));
    }
    Ok(hits.into_iter().map(|h| PathBuf::from(h.path)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_and_redaction() {
        assert_eq!(
            Location::parse("x.sqlite").expect("path"),
            Location::Sqlite("x.sqlite".into())
        );
        assert_eq!(
            Location::parse("sqlite:/a/b").expect("path"),
            Location::Sqlite("/a/b".into())
        );
        assert!(Location::parse("mysql://x").is_err());
        let pg = Location::parse("postgres://u:secret@h/db").expect("url");
        assert_eq!(pg.shown(), "postgres://u:***@h/db");
    }
}
