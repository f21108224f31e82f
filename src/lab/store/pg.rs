//! The PostgreSQL store, for a team sharing one: the `postgres` crate (the synchronous client
//! of rust-postgres; fsgauge has no async runtime of its own to give sqlx). The same tables
//! and queries as SQLite ([`super::schema`]); a run's figures go in as arrays (`unnest`), one
//! statement per table per add, so indexing thousands of results is not thousands of round
//! trips.

use anyhow::{Context, Result};
use postgres::{Client, NoTls};

use super::index::Indexed;
use super::query::Hit;
use super::Db;

pub struct Postgres {
    client: Client,
}

/// The advisory lock that orders schema changes against adds. Making or dropping the tables
/// holds it alone; every add holds it shared. Without it, a first add making the indexes
/// (a share lock on each table in turn) and another add already inserting (row locks on
/// `runs`, then `metrics`) wait for each other, and PostgreSQL kills one: "deadlock detected".
const SCHEMA_LOCK: i64 = 7444;

impl Postgres {
    pub fn connect(url: &str) -> Result<Self> {
        let client = Client::connect(url, NoTls)?;
        Ok(Self { client })
    }

    /// Runs `f` holding [`SCHEMA_LOCK`] alone. The lock is a session lock taken *before* the
    /// transaction starts, so every statement of `f` sees what the adds before it committed
    /// (a lock taken inside the transaction would leave its first look at the catalog
    /// older than the wait). It is given back whether `f` succeeds or not; a connection that
    /// drops gives it back too.
    fn with_schema_lock<T>(&mut self, f: impl FnOnce(&mut Client) -> Result<T>) -> Result<T> {
        self.client
            .execute("SELECT pg_advisory_lock($1)", &[&SCHEMA_LOCK])?;
        let out = f(&mut self.client);
        let unlocked = self
            .client
            .execute("SELECT pg_advisory_unlock($1)", &[&SCHEMA_LOCK]);
        let out = out?;
        unlocked?;
        Ok(out)
    }
}

/// `?` placeholders as PostgreSQL's `$1`, `$2`, … (the queries are written once, for both).
pub fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push_str(&format!("${n}"));
        } else {
            out.push(c);
        }
    }
    out
}

impl Db for Postgres {
    fn batch(&mut self, statements: &[&str]) -> Result<()> {
        self.with_schema_lock(|client| {
            let mut tx = client.transaction()?;
            for s in statements {
                tx.batch_execute(s)
                    .with_context(|| format!("PostgreSQL: {}", super::sqlite::first_line(s)))?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    fn create(&mut self, statements: &[&str], version: &str) -> Result<()> {
        self.with_schema_lock(|client| {
            let mut tx = client.transaction()?;
            let made = tx
                .query_one("SELECT to_regclass('meta') IS NOT NULL", &[])?
                .get::<_, bool>(0)
                && tx
                    .query_opt("SELECT 1 FROM meta WHERE key = 'schema_version'", &[])?
                    .is_some();
            if !made {
                for s in statements {
                    tx.batch_execute(s).with_context(|| {
                        format!("PostgreSQL: {}", super::sqlite::first_line(s))
                    })?;
                }
                tx.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', $1) ON CONFLICT (key) DO NOTHING",
                    &[&version],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    fn migrate(&mut self, from: i64, statements: &[&str]) -> Result<bool> {
        self.with_schema_lock(|client| {
            let mut tx = client.transaction()?;
            let now: Option<String> = tx
                .query_opt("SELECT value FROM meta WHERE key = 'schema_version'", &[])?
                .map(|r| r.get(0));
            if now.as_deref() != Some(from.to_string().as_str()) {
                return Ok(false);
            }
            for s in statements {
                tx.batch_execute(s)
                    .with_context(|| format!("PostgreSQL: {}", super::sqlite::first_line(s)))?;
            }
            tx.execute(
                "UPDATE meta SET value = $1 WHERE key = 'schema_version'",
                &[&(from + 1).to_string()],
            )?;
            tx.commit()?;
            Ok(true)
        })
    }

    fn meta(&mut self, key: &str) -> Result<Option<String>> {
        let has = self
            .client
            .query_one("SELECT to_regclass('meta') IS NOT NULL", &[])?
            .get::<_, bool>(0);
        if !has {
            return Ok(None);
        }
        let row = self
            .client
            .query_opt("SELECT value FROM meta WHERE key = $1", &[&key])?;
        Ok(row.map(|r| r.get(0)))
    }

    fn add(&mut self, runs: &[Indexed]) -> Result<usize> {
        let mut tx = self.client.transaction()?;
        // Shared: adds run side by side, but never beside a schema change (see SCHEMA_LOCK).
        tx.execute("SELECT pg_advisory_xact_lock_shared($1)", &[&SCHEMA_LOCK])?;
        let mut new = 0;
        let run = tx.prepare(&format!(
            "{} RETURNING (xmax = 0)",
            numbered(&super::schema::upsert_run())
        ))?;
        let (mut m_id, mut m_phase, mut m_name, mut m_value) = (vec![], vec![], vec![], vec![]);
        let (mut p_id, mut p_key, mut p_value) = (vec![], vec![], vec![]);
        let (mut ph_id, mut ph_name, mut ph_steal, mut ph_pressure) =
            (vec![], vec![], vec![], vec![]);
        for i in runs {
            let r = &i.run;
            let inserted: bool = tx
                .query_one(
                    &run,
                    &[
                        &r.run_id,
                        &r.path,
                        &r.file_size,
                        &r.file_mtime_ns,
                        &r.started_at,
                        &r.plan,
                        &r.label,
                        &r.testbed,
                        &r.fs,
                        &r.workload,
                        &r.rep,
                        &r.spec_hash,
                        &r.hostname,
                        &r.kernel,
                        &r.cpu_model,
                        &r.cpus,
                        &r.version,
                        &r.git_commit,
                        &r.device_profile,
                        &r.steal,
                        &r.cpu_pressure,
                        &r.foreign_cache_drops,
                        &r.set_aside,
                    ],
                )?
                .get(0);
            new += usize::from(inserted);
            for (phase, m, v) in &i.metrics {
                m_id.push(r.run_id.as_str());
                m_phase.push(phase.as_str());
                m_name.push(m.as_str());
                m_value.push(*v);
            }
            for (name, steal, pressure) in &i.phases {
                ph_id.push(r.run_id.as_str());
                ph_name.push(name.as_str());
                ph_steal.push(*steal);
                ph_pressure.push(*pressure);
            }
            for (k, v) in &i.params {
                p_id.push(r.run_id.as_str());
                p_key.push(k.as_str());
                p_value.push(v.as_str());
            }
        }
        tx.execute(
            "INSERT INTO metrics (run_id, phase, metric, value) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[]) ON CONFLICT DO NOTHING",
            &[&m_id, &m_phase, &m_name, &m_value],
        )?;
        tx.execute(
            "INSERT INTO phases (run_id, phase, steal, cpu_pressure) SELECT * FROM unnest($1::text[], $2::text[], $3::float8[], $4::float8[]) ON CONFLICT (run_id, phase) DO UPDATE SET steal = excluded.steal, cpu_pressure = excluded.cpu_pressure",
            &[&ph_id, &ph_name, &ph_steal, &ph_pressure],
        )?;
        tx.execute(
            "INSERT INTO params (run_id, key, value) SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) ON CONFLICT DO NOTHING",
            &[&p_id, &p_key, &p_value],
        )?;
        tx.commit()?;
        Ok(new)
    }

    fn hits(&mut self, sql: &str, args: &[String]) -> Result<Vec<Hit>> {
        let params: Vec<&(dyn postgres::types::ToSql + Sync)> = args
            .iter()
            .map(|a| a as &(dyn postgres::types::ToSql + Sync))
            .collect();
        let rows = self.client.query(&numbered(sql), &params)?;
        Ok(rows
            .iter()
            .map(|r| Hit {
                run_id: r.get(0),
                path: r.get(1),
                file_size: r.get(2),
                file_mtime_ns: r.get(3),
                started_at: r.get(4),
                kernel: r.get(5),
                commit: r.get(6),
                version: r.get(7),
                hostname: r.get(8),
                testbed: r.get(9),
                workload: r.get(10),
                phase: r.get(11),
                value: r.get(12),
                steal: r.get(13),
                cpu_pressure: r.get(14),
                foreign_cache_drops: r.get(15),
                set_aside: r.get(16),
            })
            .collect())
    }

    fn count(&mut self, table: &str) -> Result<i64> {
        Ok(self
            .client
            .query_one(&format!("SELECT COUNT(*) FROM {table}"), &[])?
            .get(0))
    }
}
