//! The SQLite store: one file, the library built in (rusqlite's `bundled`), nothing to start.
//! Writers wait for each other (WAL, a 60 s busy timeout, one immediate transaction per add),
//! so two runs indexing into one file at once lose nothing.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use super::index::Indexed;
use super::query::Hit;
use super::Db;

pub struct Sqlite {
    conn: Connection,
}

impl Sqlite {
    /// Opens the store at `path` as `mode` says. A query opens it read-only and writes
    /// nothing (not even the journal mode), so a store a reader may not write, or a file of
    /// mode 0444, answers as any other.
    pub fn open(path: &Path, mode: Mode) -> Result<Self> {
        let flags = OpenFlags::SQLITE_OPEN_NO_MUTEX
            | match mode {
                Mode::Read => OpenFlags::SQLITE_OPEN_READ_ONLY,
                Mode::Write => OpenFlags::SQLITE_OPEN_READ_WRITE,
                Mode::Create => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
            };
        let mut conn = Connection::open_with_flags(path, flags)?;
        conn.busy_timeout(BUSY)?;
        if mode == Mode::Read {
            conn = readable(conn, path)?;
        } else {
            wal(&conn)?;
        }
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        Ok(Self { conn })
    }
}

/// A read-only connection that can read the store. A WAL store needs its `-shm` file beside
/// it, which the last writer removed on closing and a reader who may not write the directory
/// cannot make: SQLite then refuses to read at all. Such a store is opened as immutable
/// instead, but only when no `-wal` file is beside it (no writer holds it open, and nothing
/// committed waits in a log that immutable reading would not see).
fn readable(conn: Connection, path: &Path) -> Result<Connection> {
    let probe = conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    });
    let Err(rusqlite::Error::SqliteFailure(e, _)) = &probe else {
        probe?;
        return Ok(conn);
    };
    let no_shm = [READONLY_CANTINIT, READONLY_DIRECTORY].contains(&e.extended_code);
    let mut wal_file = path.as_os_str().to_owned();
    wal_file.push("-wal");
    if !no_shm || Path::new(&wal_file).exists() {
        probe?;
        return Ok(conn);
    }
    drop(conn);
    let uri = format!("file:{}?immutable=1", uri_path(path));
    let conn = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    Ok(conn)
}

/// SQLITE_READONLY_CANTINIT and SQLITE_READONLY_DIRECTORY: a read-only connection could not
/// make the WAL's shared-memory file.
const READONLY_CANTINIT: std::ffi::c_int = 8 | (5 << 8);
const READONLY_DIRECTORY: std::ffi::c_int = 8 | (6 << 8);

/// A path as a SQLite URI's path: `%`, `?` and `#` escaped, made absolute.
fn uri_path(path: &Path) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = String::new();
    for c in abs.to_string_lossy().chars() {
        match c {
            '%' | '?' | '#' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// How a store is opened: to query it, to write a store that is there, or to write one made
/// when missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
    Create,
}

/// How long a writer waits for another.
const BUSY: Duration = Duration::from_secs(60);

/// Puts the store in WAL mode. Switching a new file's journal mode takes its exclusive lock,
/// and SQLite answers BUSY at once there instead of calling the busy handler (it could
/// deadlock otherwise), so two first adds at once retry it for as long as a writer waits.
fn wal(conn: &Connection) -> Result<()> {
    let start = std::time::Instant::now();
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Ok(()) => return Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy && start.elapsed() < BUSY =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

impl Db for Sqlite {
    fn batch(&mut self, statements: &[&str]) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for s in statements {
            tx.execute(s, [])
                .with_context(|| format!("SQLite: {}", first_line(s)))?;
        }
        tx.commit()?;
        Ok(())
    }

    fn create(&mut self, statements: &[&str], version: &str) -> Result<()> {
        // An immediate transaction holds the write lock: another maker waits, then finds the
        // version there.
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let made: bool = tx.query_row(
            "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
            [],
            |r| r.get(0),
        )? && tx
            .query_row("SELECT 1 FROM meta WHERE key = 'schema_version'", [], |r| {
                r.get::<_, i64>(0)
            })
            .optional()?
            .is_some();
        if !made {
            for s in statements {
                tx.execute(s, [])
                    .with_context(|| format!("SQLite: {}", first_line(s)))?;
            }
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?1) ON CONFLICT (key) DO NOTHING",
                [version],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    fn migrate(&mut self, from: i64, statements: &[&str]) -> Result<bool> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let now: Option<String> = tx
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        if now.as_deref() != Some(from.to_string().as_str()) {
            return Ok(false);
        }
        for s in statements {
            tx.execute(s, [])
                .with_context(|| format!("SQLite: {}", first_line(s)))?;
        }
        tx.execute(
            "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
            [(from + 1).to_string()],
        )?;
        tx.commit()?;
        Ok(true)
    }

    fn meta(&mut self, key: &str) -> Result<Option<String>> {
        let has: bool = self.conn.query_row(
            "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
            [],
            |r| r.get(0),
        )?;
        if !has {
            return Ok(None);
        }
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    }

    fn add(&mut self, runs: &[Indexed]) -> Result<usize> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut new = 0;
        {
            let mut run = tx.prepare(&super::schema::upsert_run())?;
            let mut known = tx.prepare("SELECT 1 FROM runs WHERE run_id = ?1")?;
            let mut metric = tx.prepare(
                "INSERT INTO metrics (run_id, phase, metric, value) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
            )?;
            let mut phase = tx.prepare(
                "INSERT INTO phases (run_id, phase, steal, cpu_pressure) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (run_id, phase) DO UPDATE SET steal = excluded.steal, cpu_pressure = excluded.cpu_pressure",
            )?;
            let mut param = tx.prepare(
                "INSERT INTO params (run_id, key, value) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
            )?;
            for i in runs {
                let r = &i.run;
                if !known.exists([&r.run_id])? {
                    new += 1;
                }
                run.execute(params![
                    r.run_id,
                    r.path,
                    r.file_size,
                    r.file_mtime_ns,
                    r.started_at,
                    r.plan,
                    r.label,
                    r.testbed,
                    r.fs,
                    r.workload,
                    r.rep,
                    r.spec_hash,
                    r.hostname,
                    r.kernel,
                    r.cpu_model,
                    r.cpus,
                    r.version,
                    r.git_commit,
                    r.device_profile,
                    r.steal,
                    r.cpu_pressure,
                    r.foreign_cache_drops,
                    r.set_aside
                ])?;
                for (phase, m, v) in &i.metrics {
                    metric.execute(params![r.run_id, phase, m, v])?;
                }
                for (name, steal, pressure) in &i.phases {
                    phase.execute(params![r.run_id, name, steal, pressure])?;
                }
                for (k, v) in &i.params {
                    param.execute(params![r.run_id, k, v])?;
                }
            }
        }
        tx.commit()?;
        Ok(new)
    }

    fn hits(&mut self, sql: &str, args: &[String]) -> Result<Vec<Hit>> {
        let mut st = self.conn.prepare(sql)?;
        let rows = st.query_map(rusqlite::params_from_iter(args.iter()), |r| {
            Ok(Hit {
                run_id: r.get(0)?,
                path: r.get(1)?,
                file_size: r.get(2)?,
                file_mtime_ns: r.get(3)?,
                started_at: r.get(4)?,
                kernel: r.get(5)?,
                commit: r.get(6)?,
                version: r.get(7)?,
                hostname: r.get(8)?,
                testbed: r.get(9)?,
                workload: r.get(10)?,
                phase: r.get(11)?,
                value: r.get(12)?,
                steal: r.get(13)?,
                cpu_pressure: r.get(14)?,
                foreign_cache_drops: r.get(15)?,
                set_aside: r.get(16)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<Hit>>>()?)
    }

    fn count(&mut self, table: &str) -> Result<i64> {
        Ok(self
            .conn
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))?)
    }
}

/// The first line of a statement, for messages.
pub fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}
