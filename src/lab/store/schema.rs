//! The store's tables, in SQL that SQLite and PostgreSQL both read, so that one schema serves
//! both and the same queries answer the same from either. Versioned: a store made by another
//! schema version is refused with what to do (`fsgauge store rebuild`), never misread.

/// The schema version this fsgauge writes and reads (kept in `meta`, key `schema_version`).
pub const VERSION: i64 = 3;

/// What a store of an older version is brought to this one by: (from, statements), each in
/// one transaction with the version's change ([`super::Store`] then fills the new columns
/// from the files). Version 2 added the machine's load and the disturbed attempts to `runs`;
/// a run whose file is gone keeps NULL there (not known). Version 3 added `phases`, each
/// phase's load (a run whose file is gone has no rows there: not known).
pub const MIGRATIONS: &[(i64, &[&str])] = &[
    (
        1,
        &[
            "ALTER TABLE runs ADD COLUMN steal DOUBLE PRECISION",
            "ALTER TABLE runs ADD COLUMN cpu_pressure DOUBLE PRECISION",
            "ALTER TABLE runs ADD COLUMN foreign_cache_drops BIGINT",
            "ALTER TABLE runs ADD COLUMN set_aside BIGINT",
        ],
    ),
    (2, &[PHASES]),
];

/// Each phase's load: the machine's CPU steal and CPU pressure during it (shares 0–1, from its
/// `host_load`; NULL where the result does not tell), beside the phase's figures in `metrics`,
/// so that a history of one phase shows and filters that phase's load, not the run's worst.
const PHASES: &str = "CREATE TABLE IF NOT EXISTS phases (
        run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        steal DOUBLE PRECISION,
        cpu_pressure DOUBLE PRECISION,
        PRIMARY KEY (run_id, phase)
    )";

/// The tables, made when missing. `runs` holds one row per run (its identity,
/// [`crate::results::RunResult::identity`], is the key, so adding a result twice adds it
/// once), with the file it came from and that file's size and modification time, by which a
/// file that changed or vanished since it was indexed is found, and what disturbed it: the
/// machine's CPU steal and CPU pressure (shares 0–1, the most of any of its phases; NULL where
/// the result does not tell), the other processes' cache drops during its phases (summed) and
/// the attempts set aside before it (counted). `metrics` holds every figure of
/// every phase; `phases` each phase's load ([`PHASES`]); `params` the workload's scalar
/// parameters (for `--where threads=8`).
pub const TABLES: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY,
        path TEXT NOT NULL,
        file_size BIGINT NOT NULL,
        file_mtime_ns BIGINT NOT NULL,
        started_at TEXT NOT NULL,
        plan TEXT,
        label TEXT,
        testbed TEXT NOT NULL,
        fs TEXT NOT NULL,
        workload TEXT NOT NULL,
        rep BIGINT NOT NULL,
        spec_hash TEXT NOT NULL,
        hostname TEXT NOT NULL,
        kernel TEXT NOT NULL,
        cpu_model TEXT,
        cpus BIGINT NOT NULL,
        version TEXT NOT NULL,
        git_commit TEXT,
        device_profile TEXT,
        steal DOUBLE PRECISION,
        cpu_pressure DOUBLE PRECISION,
        foreign_cache_drops BIGINT,
        set_aside BIGINT
    )",
    "CREATE TABLE IF NOT EXISTS metrics (
        run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        metric TEXT NOT NULL,
        value DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (run_id, phase, metric)
    )",
    PHASES,
    "CREATE TABLE IF NOT EXISTS params (
        run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (run_id, key)
    )",
    "CREATE INDEX IF NOT EXISTS metrics_by_metric ON metrics (metric, phase)",
    "CREATE INDEX IF NOT EXISTS runs_by_started ON runs (started_at)",
];

/// What `store rebuild` drops before making the tables again.
pub const DROP: &[&str] = &[
    "DROP TABLE IF EXISTS params",
    "DROP TABLE IF EXISTS phases",
    "DROP TABLE IF EXISTS metrics",
    "DROP TABLE IF EXISTS runs",
    "DROP TABLE IF EXISTS meta",
];

/// The columns of `runs` in insert order (the index's [`super::index::RunRow`] fields).
pub const RUN_COLUMNS: &[&str] = &[
    "run_id",
    "path",
    "file_size",
    "file_mtime_ns",
    "started_at",
    "plan",
    "label",
    "testbed",
    "fs",
    "workload",
    "rep",
    "spec_hash",
    "hostname",
    "kernel",
    "cpu_model",
    "cpus",
    "version",
    "git_commit",
    "device_profile",
    "steal",
    "cpu_pressure",
    "foreign_cache_drops",
    "set_aside",
];

/// The columns an add that finds the run there already sets again (what the file may say
/// anew: where it is now, and what older indexing did not keep).
pub const UPDATED_COLUMNS: &[&str] = &[
    "path",
    "file_size",
    "file_mtime_ns",
    "plan",
    "label",
    "steal",
    "cpu_pressure",
    "foreign_cache_drops",
    "set_aside",
];

/// The upsert of one run (`?` placeholders; PostgreSQL numbers them).
pub fn upsert_run() -> String {
    let cols = RUN_COLUMNS.join(", ");
    let marks = vec!["?"; RUN_COLUMNS.len()].join(", ");
    let set: Vec<String> = UPDATED_COLUMNS
        .iter()
        .map(|c| format!("{c} = excluded.{c}"))
        .collect();
    format!(
        "INSERT INTO runs ({cols}) VALUES ({marks}) ON CONFLICT (run_id) DO UPDATE SET {}",
        set.join(", ")
    )
}

/// The `--where` keys that name a column (table alias `r` for runs, `m` for metrics), with
/// what each means; any other key is a workload parameter.
pub const KEYS: &[(&str, &str, &str)] = &[
    ("fs", "r.fs", "filesystem kind (ext4, xfs, ...)"),
    ("testbed", "r.testbed", "testbed label"),
    ("workload", "r.workload", "workload kind"),
    ("label", "r.label", "the plan's workload label"),
    ("plan", "r.plan", "plan name"),
    ("phase", "m.phase", "phase name"),
    ("host", "r.hostname", "host name"),
    ("kernel", "r.kernel", "kernel release (uname -r)"),
    ("cpu", "r.cpu_model", "CPU model"),
    ("commit", "r.git_commit", "fsgauge's git commit"),
    ("version", "r.version", "fsgauge's version"),
    ("profile", "r.device_profile", "emulated disk profile"),
    (
        "foreign_cache_drops",
        "r.foreign_cache_drops",
        "other processes' cache drops during the run's phases (0: undisturbed)",
    ),
    (
        "set_aside",
        "r.set_aside",
        "attempts set aside (disturbed) before the run was kept",
    ),
];

/// The `--where` keys that bound a share of the machine's load from above: the run's value
/// must be below the one given (runs that do not tell it are left out).
/// In a metric's history the bound is the figure's phase's load (`ph`, [`PHASES`]); in a
/// query of runs (`compare store:…`), the run's most of any phase.
pub const BELOW: &[(&str, &str, &str)] = &[
    (
        "steal_below",
        "steal",
        "CPU steal below this share (0–1) in the figure's phase (of runs: in every phase)",
    ),
    (
        "pressure_below",
        "cpu_pressure",
        "CPU pressure below this share (0–1) in the figure's phase (of runs: in every phase)",
    ),
];
