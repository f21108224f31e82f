//! The results store: indexing result files into SQLite (always) and PostgreSQL (a server
//! named by FSGAUGE_TEST_POSTGRES; `.ci/run` starts one), `history` with its change marks,
//! `compare`/`report` from store queries, rebuild, files that changed or vanished, two adds at
//! once, and `run --store`.

use std::path::{Path, PathBuf};

use fsgauge::results::RunResult;

use crate::report_fixtures::{phase, result, write_all};
use crate::support::{json_of, Sandbox};

/// `n` runs of a tree workload on kernel `kernel` whose create phase does about `ops_per_s`
/// (±1%, so the noise is known), started on day `day`.
fn runs(kernel: &str, day: u32, ops_per_s: f64, n: u32) -> Vec<RunResult> {
    (0..n)
        .map(|rep| {
            let wall = 10.0;
            let ops = (ops_per_s * wall * (1.0 + 0.01 * (rep as f64 - 2.0))) as u64;
            let mut r = result(
                "xfs",
                "tree",
                serde_json::json!({"dirs": 2, "files": 10, "threads": 1}),
                rep,
                vec![
                    phase("file_create", wall, 1.0, ops, 0, &[1000, 2000], &[1], 1),
                    phase("file_remove", wall, 1.0, ops, 0, &[1000, 2000], &[1], 1),
                ],
            );
            r.host.kernel = kernel.into();
            r.testbed.fs = "xfs".into();
            r.started_at = format!("2026-01-{day:02}T00:00:{rep:02}Z");
            disturb(&mut r);
            r
        })
        .collect()
}

/// What the machine did beside a run, by its repetition: CPU steal of 1% × (rep + 1) in
/// file_create (half that in file_remove), CPU pressure 10% but for the last rep (not told);
/// rep 3 saw another process drop the caches twice, and rep 4 was kept after one attempt was
/// set aside.
fn disturb(r: &mut RunResult) {
    let rep = r.rep;
    for (i, p) in r.phases.iter_mut().enumerate() {
        p.host_load = Some(fsgauge::results::HostLoad {
            steal: Some(0.01 * f64::from(rep + 1) / (i as f64 + 1.0)),
            cpu_pressure: (rep < 4).then_some(0.1),
        });
        if rep == 3 && i == 0 {
            p.foreign_cache_drops = 2;
        }
    }
    if rep == 4 {
        r.set_aside = vec!["attempt 1: another process dropped the kernel's caches".into()];
    }
}

/// Two kernels' results in two directories: file_create 30% slower on the second.
fn two_kernels(sb: &Sandbox) -> (PathBuf, PathBuf) {
    let (a, b) = (sb.path().join("k61"), sb.path().join("k68"));
    write_all(&a, &runs("6.1.0", 1, 1000.0, 5));
    write_all(&b, &runs("6.8.0", 2, 700.0, 5));
    (a, b)
}

fn fsgauge(sb: &Sandbox, store: &str, args: &[&str]) -> std::process::Output {
    let out = sb
        .cmd()
        .args(args)
        .args(["--store", store])
        .env_remove("FSGAUGE_STORE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `store add --json`: files read, runs new, runs held.
fn add(sb: &Sandbox, store: &str, dirs: &[&Path]) -> (u64, u64, u64) {
    let mut args = vec!["store", "add", "--json"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    let j = json_of(&fsgauge(sb, store, &args));
    let n = |k: &str| j[k].as_u64().unwrap_or_else(|| panic!("{k} in {j}"));
    (n("files"), n("new"), n("runs"))
}

/// Runs the store holds (`store status --json`).
fn runs_held(sb: &Sandbox, store: &str) -> u64 {
    let j = json_of(&fsgauge(sb, store, &["store", "status", "--json"]));
    j["runs"].as_u64().unwrap()
}

fn history(sb: &Sandbox, store: &str, filter: &str) -> serde_json::Value {
    json_of(&fsgauge(
        sb,
        store,
        &["history", "ops_per_s", "--where", filter, "--json"],
    ))
}

/// The checks every backend must pass, on a store `store` of its kind.
fn store_answers(sb: &Sandbox, store: &str) -> (serde_json::Value, serde_json::Value) {
    let (a, b) = two_kernels(sb);
    assert_eq!(add(sb, store, &[&a, &b]), (10, 10, 10));
    assert_eq!(add(sb, store, &[&a]), (5, 0, 10));
    assert_eq!(runs_held(sb, store), 10);
    let h = history(sb, store, "fs=xfs,phase=file_create");
    let groups = h["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{h}");
    assert_eq!(groups[0]["key"], "6.1.0");
    assert_eq!(groups[1]["n"], 5);
    assert_eq!(groups[1]["change"]["significant"], true, "{h}");
    assert_eq!(groups[1]["change"]["verdict"], "worse", "{h}");
    // The store keeps what disturbed each run: the most of any phase, counted per group.
    assert_eq!(
        groups[1]["load"],
        serde_json::json!({"steal": 0.05, "cpu_pressure": 0.1, "disturbed": 1, "set_aside": 1}),
        "{h}"
    );
    // ...and a history can leave out the disturbed runs, and those of a loaded machine.
    let quiet = history(
        sb,
        store,
        "phase=file_create,foreign_cache_drops=0,set_aside=0",
    );
    assert_eq!(quiet["groups"][1]["n"], 3, "{quiet}");
    let calm = history(sb, store, "phase=file_create,steal_below=0.035");
    assert_eq!(calm["groups"][1]["n"], 3, "{calm}");
    assert_eq!(calm["groups"][1]["load"]["steal"], 0.03, "{calm}");
    // A phase's history shows and filters that phase's load, not the run's most: file_remove
    // had half file_create's steal, so every run of it is under 3.5%.
    let remove = history(sb, store, "phase=file_remove,steal_below=0.035");
    assert_eq!(remove["groups"][1]["n"], 5, "{remove}");
    assert_eq!(remove["groups"][1]["load"]["steal"], 0.025, "{remove}");
    assert_eq!(remove["groups"][1]["load"]["cpu_pressure"], 0.1, "{remove}");
    let cmp = json_of(&fsgauge(
        sb,
        store,
        &[
            "compare",
            "store:kernel=6.1.0",
            "store:kernel=6.8.0,phase=file_create",
            "--json",
        ],
    ));
    (h, cmp)
}

#[test]
fn sqlite_store_indexes_once_and_history_marks_the_drop() {
    let sb = Sandbox::new();
    let db = sb.path().join("store.sqlite");
    let (_, cmp) = store_answers(&sb, db.to_str().unwrap());
    // The comparison from the store is the comparison of the two directories.
    let dirs = json_of(
        &sb.cmd()
            .args(["compare", "k61", "k68", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(cmp, dirs);
    // A report of a store query reads the runs it names.
    let report = json_of(&fsgauge(
        &sb,
        db.to_str().unwrap(),
        &["report", "store:kernel=6.8.0", "--format", "json"],
    ));
    assert!(report.to_string().contains("file_remove"), "{report}");
}

#[test]
fn rebuild_gives_the_same_answers_and_a_changed_file_is_named() {
    let sb = Sandbox::new();
    let db = sb.path().join("store.sqlite");
    let db = db.to_str().unwrap();
    let (a, b) = two_kernels(&sb);
    add(&sb, db, &[&a, &b]);
    let before = history(&sb, db, "phase=file_remove");
    fsgauge(
        &sb,
        db,
        &["store", "rebuild", a.to_str().unwrap(), b.to_str().unwrap()],
    );
    assert_eq!(history(&sb, db, "phase=file_remove"), before);
    // One file vanishes, one changes: both are named and left out.
    let mut files: Vec<PathBuf> = std::fs::read_dir(&b)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    std::fs::remove_file(&files[0]).unwrap();
    let mut text = std::fs::read_to_string(&files[1]).unwrap();
    text.push(' ');
    std::fs::write(&files[1], text).unwrap();
    let out = fsgauge(
        &sb,
        db,
        &[
            "history",
            "ops_per_s",
            "--where",
            "phase=file_remove",
            "--json",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    for (f, why) in [(&files[0], "vanished"), (&files[1], "changed")] {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(
            err.lines().any(|l| l.contains(name) && l.contains(why)),
            "{name} {why}: {err}"
        );
    }
    assert_eq!(json_of(&out)["groups"][1]["n"], 3);
}

#[test]
fn two_adds_at_once_lose_nothing() {
    let sb = Sandbox::new();
    let db = sb.path().join("store.sqlite");
    let dirs: Vec<PathBuf> = (0..4).map(|i| sb.path().join(format!("d{i}"))).collect();
    for (i, d) in dirs.iter().enumerate() {
        write_all(d, &runs(&format!("6.{i}.0"), i as u32 + 1, 1000.0, 10));
    }
    let children: Vec<_> = dirs
        .iter()
        .map(|d| {
            sb.cmd()
                .args(["store", "add", d.to_str().unwrap(), "--store"])
                .arg(&db)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    assert_eq!(runs_held(&sb, db.to_str().unwrap()), 40);
}

#[test]
fn bad_store_input_exits_2_saying_what_to_do() {
    let sb = Sandbox::new();
    let (a, _) = two_kernels(&sb);
    let db = sb.path().join("store.sqlite");
    let a = a.to_str().unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["history".into(), "ops_per_s".into()], "no store given"),
        (
            vec![
                "history".into(),
                "ops_per_s".into(),
                "--store".into(),
                db.display().to_string(),
            ],
            "no such store",
        ),
        (
            vec![
                "store".into(),
                "add".into(),
                a.into(),
                "--store".into(),
                "postgres://nobody@127.0.0.1:1/none".into(),
            ],
            "cannot connect",
        ),
        (
            vec![
                "store".into(),
                "add".into(),
                a.into(),
                "--store".into(),
                "mysql://x/y".into(),
            ],
            "not a store",
        ),
        (
            vec![
                "history".into(),
                "ops_per_s".into(),
                "--where".into(),
                "fs".into(),
                "--store".into(),
                db.display().to_string(),
            ],
            "not KEY=VALUE",
        ),
    ];
    for (args, needle) in cases {
        let out = sb
            .cmd()
            .args(&args)
            .env_remove("FSGAUGE_STORE")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // Nothing was made by the refusals.
    assert!(!db.exists());
    // A history of two cells names them.
    add(&sb, db.to_str().unwrap(), &[Path::new(a)]);
    let out = sb
        .cmd()
        .args(["history", "ops_per_s", "--store"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("phase=file_remove"));
}

/// A PostgreSQL database of its own for one test, dropped after.
struct PgDb {
    admin: String,
    name: String,
    url: String,
}

impl PgDb {
    fn new(tag: &str) -> Option<Self> {
        let Some(admin) = std::env::var("FSGAUGE_TEST_POSTGRES")
            .ok()
            .filter(|s| !s.is_empty())
        else {
            crate::support::skip("needs FSGAUGE_TEST_POSTGRES (a PostgreSQL URL of a role that may create databases; .ci/run sets it)");
            return None;
        };
        let name = format!("fsgauge_test_{tag}_{}", std::process::id());
        let mut c = postgres::Client::connect(&admin, postgres::NoTls).expect("the test server");
        for sql in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            c.batch_execute(&sql).expect("a test database");
        }
        let (base, _) = admin.rsplit_once('/').expect("a URL with a database");
        let url = format!("{base}/{name}");
        Some(Self { admin, name, url })
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

#[test]
fn postgres_answers_as_sqlite_does() {
    let Some(pg) = PgDb::new("same") else {
        return;
    };
    let (sb1, sb2) = (Sandbox::new(), Sandbox::new());
    let db = sb1.path().join("store.sqlite");
    let (mut h_lite, cmp_lite) = store_answers(&sb1, db.to_str().unwrap());
    let (mut h_pg, cmp_pg) = store_answers(&sb2, &pg.url);
    assert_eq!(cmp_lite, cmp_pg);
    // The same figures: only the sandboxes' paths differ, and no path is in a history.
    h_lite["groups"][0]["first"] = serde_json::Value::Null;
    h_pg["groups"][0]["first"] = serde_json::Value::Null;
    assert_eq!(h_lite, h_pg);
}

#[test]
fn postgres_two_adds_at_once_and_rebuild() {
    let Some(pg) = PgDb::new("race") else {
        return;
    };
    let sb = Sandbox::new();
    // Six first adds into an empty database at once: each makes the tables, the others wait
    // or insert (CI once met "deadlock detected" between a first add's indexes and another's
    // inserts with three).
    let dirs: Vec<PathBuf> = (0..6).map(|i| sb.path().join(format!("d{i}"))).collect();
    for (i, d) in dirs.iter().enumerate() {
        write_all(d, &runs(&format!("6.{i}.0"), i as u32 + 1, 1000.0, 10));
    }
    let children: Vec<_> = dirs
        .iter()
        .map(|d| {
            sb.cmd()
                .args(["store", "add", d.to_str().unwrap(), "--store", &pg.url])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    assert_eq!(runs_held(&sb, &pg.url), 60);
    let before = history(&sb, &pg.url, "phase=file_create");
    let mut args = vec!["store", "rebuild"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    fsgauge(&sb, &pg.url, &args);
    assert_eq!(history(&sb, &pg.url, "phase=file_create"), before);
}

const PLAN: &str = r#"name = "stored"
reps = 2

[[testbed]]
label = "plain"
fs = "ext4"
size = "256M"

[[workload]]
kind = "tree"
dirs = 2
files = 8
file_size = "64K"
"#;

#[test]
fn run_with_a_store_indexes_what_it_writes() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let plan = sb.path().join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let db = sb.path().join("store.sqlite");
    // An unusable store is refused before anything runs.
    let out = sb
        .bench(&[
            "run",
            plan.to_str().unwrap(),
            "--quiet",
            "--store",
            "postgres://x@127.0.0.1:1/y",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!sb.out().exists() || std::fs::read_dir(sb.out()).unwrap().next().is_none());
    let out = sb
        .bench(&[
            "run",
            plan.to_str().unwrap(),
            "--store",
            db.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(runs_held(&sb, db.to_str().unwrap()), 2);
    sb.assert_clean();
}

/// `history --format html` draws the history: one point per kernel with its interval, and
/// one change mark, on the second kernel (30% slower, flagged `* worse`).
#[test]
fn history_html_draws_one_point_per_group_and_marks_the_flagged_change() {
    let sb = Sandbox::new();
    let db = sb.path().join("store.sqlite");
    let db = db.to_str().unwrap();
    let (a, b) = two_kernels(&sb);
    add(&sb, db, &[&a, &b]);
    let out = fsgauge(
        &sb,
        db,
        &[
            "history",
            "ops_per_s",
            "--where",
            "fs=xfs,phase=file_create",
            "--format",
            "html",
        ],
    );
    let html = String::from_utf8_lossy(&out.stdout);
    let svg = &html[html.find("<svg").expect("an inline SVG")..html.find("</svg>").unwrap()];
    assert_eq!(svg.matches("class=\"point\"").count(), 2, "{svg}");
    assert_eq!(svg.matches("class=\"interval\"").count(), 2, "{svg}");
    let marks: Vec<&str> = svg
        .lines()
        .filter(|l| l.contains("class=\"change\""))
        .collect();
    assert_eq!(marks.len(), 1, "{svg}");
    assert!(
        marks[0].contains("data-group=\"1\"") && marks[0].contains("6.8.0"),
        "{svg}"
    );
    assert!(marks[0].contains("<title>worse -30.0%"), "{svg}");
    // The table follows the figure, as before.
    assert!(html.find("</svg>") < html.find("<table>"), "{html}");
}

/// The columns schema version 2 added to `runs`.
const V2_COLUMNS: [&str; 4] = ["steal", "cpu_pressure", "foreign_cache_drops", "set_aside"];

/// Indexes two kernels' results, turns the store back into one of schema version `from` (1:
/// before it kept what disturbed a run; 2: before it kept each phase's load) by `downgrade`,
/// and checks that a query refuses it untouched (exit 2, naming `store migrate`), that
/// `store migrate` migrates it once (the tables made again and filled from the files, a note
/// said) and that it then answers as before, each phase's load included.
fn migrates(sb: &Sandbox, store: &str, from: u32, downgrade: impl Fn()) {
    let (a, b) = two_kernels(sb);
    add(sb, store, &[&a, &b]);
    let before = history(sb, store, "phase=file_create");
    let remove = history(sb, store, "phase=file_remove");
    downgrade();
    let refused = sb
        .cmd()
        .args(["history", "ops_per_s", "--where", "phase=file_create"])
        .args(["--store", store])
        .env_remove("FSGAUGE_STORE")
        .output()
        .unwrap();
    assert_refused_as_old(&refused, &shown(store), from);
    let out = fsgauge(sb, store, &["store", "migrate", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("was of schema version {from}; brought to version 3"))
            && err.contains("of 10 runs (the machine's load, each phase's, and the disturbed attempts) read from their files"),
        "{err}"
    );
    assert_eq!(history(sb, store, "phase=file_create"), before);
    // Each phase's load is read again from the files too.
    assert_eq!(history(sb, store, "phase=file_remove"), remove);
    assert_eq!(remove["groups"][1]["load"]["steal"], 0.025, "{remove}");
    let again = fsgauge(sb, store, &["store", "migrate"]);
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("nothing to migrate"),
        "{again:?}"
    );
    assert_eq!(add(sb, store, &[&a]), (5, 0, 10));
}

/// A store as messages show it (a URL's password left out).
fn shown(store: &str) -> String {
    fsgauge::lab::store::Location::parse(store)
        .expect("a store")
        .shown()
}

/// A query of a store of an older version was refused with exit 2, naming the store, its version and
/// the command that migrates it.
fn assert_refused_as_old(out: &std::process::Output, shown: &str, version: u32) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "--store {shown}: its index is of schema version {version}"
        )) && err.contains(&format!("fsgauge store migrate --store {shown}")),
        "{err}"
    );
}

/// The statements that turn a store back into one of schema version `to` (1 or 2): version 3's
/// `phases` dropped, and for 1 version 2's columns.
fn downgrade(to: u32) -> Vec<String> {
    let mut sql = vec!["DROP TABLE phases".to_string()];
    if to == 1 {
        sql.extend(V2_COLUMNS.map(|c| format!("ALTER TABLE runs DROP COLUMN {c}")));
    }
    sql.push(format!(
        "UPDATE meta SET value = '{to}' WHERE key = 'schema_version'"
    ));
    sql
}

/// Turns a SQLite store back into one of schema version `to`.
fn downgrade_sqlite(db: &Path, to: u32) {
    let c = rusqlite::Connection::open(db).unwrap();
    for sql in downgrade(to) {
        c.execute(&sql, []).unwrap();
    }
}

/// Turns a PostgreSQL store back into one of schema version `to`.
fn downgrade_postgres(url: &str, to: u32) {
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    for sql in downgrade(to) {
        c.batch_execute(&sql).unwrap();
    }
}

#[test]
fn stores_of_versions_1_and_2_are_migrated_on_sqlite() {
    for from in [1, 2] {
        let sb = Sandbox::new();
        let db = sb.path().join("store.sqlite");
        migrates(&sb, db.to_str().unwrap(), from, || {
            downgrade_sqlite(&db, from)
        });
    }
}

#[test]
fn stores_of_versions_1_and_2_are_migrated_on_postgres() {
    for from in [1, 2] {
        let Some(pg) = PgDb::new(&format!("migrate{from}")) else {
            return;
        };
        let sb = Sandbox::new();
        migrates(&sb, &pg.url, from, || downgrade_postgres(&pg.url, from));
    }
}

/// A reader's queries (`reader` runs fsgauge with those arguments against the store, as one
/// that may not write it) answer as the writer's on a store of this schema version; on one
/// of version 1 they are refused, the store left as it was, until the writer migrates it.
/// `grant` lets the reader read the tables there are.
fn read_only_queries(
    sb: &Sandbox,
    store: &str,
    reader_store: &str,
    reader: impl Fn(&[&str]) -> std::process::Output,
    grant: impl Fn(),
    downgrade: impl Fn(),
) {
    let (a, b) = two_kernels(sb);
    add(sb, store, &[&a, &b]);
    grant();
    let ok = |args: &[&str]| {
        let out = reader(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        json_of(&out)
    };
    let q = [
        "history",
        "ops_per_s",
        "--where",
        "phase=file_create",
        "--json",
    ];
    let before = history(sb, store, "phase=file_create");
    assert_eq!(ok(&q), before);
    let cmp = [
        "compare",
        "store:kernel=6.1.0",
        "store:kernel=6.8.0",
        "--json",
    ];
    assert_eq!(ok(&cmp), json_of(&fsgauge(sb, store, &cmp)));
    assert_eq!(ok(&["store", "status", "--json"])["runs"], 10);
    downgrade();
    assert_refused_as_old(&reader(&q), &shown(reader_store), 1);
    assert_refused_as_old(&reader(&cmp), &shown(reader_store), 1);
    let out = fsgauge(sb, store, &["store", "migrate"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("was of schema version 1"),
        "the refused queries left the store as it was: {out:?}"
    );
    grant();
    assert_eq!(ok(&q), before);
}

/// A SQLite store of mode 0444, in a directory the reader may not write, answers an
/// unprivileged user's queries.
#[test]
fn a_read_only_sqlite_store_answers_queries_and_is_never_written() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let Some((_, _)) = crate::support::as_nobody(&sb) else {
        return;
    };
    let dir = sb.path().join("shared");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = dir.join("store.sqlite");
    let store = db.to_str().unwrap();
    let bin = sb.path().join("fsgauge-copy");
    let reader = |args: &[&str]| {
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args(["env", "HOME=/tmp"])
            .arg(&bin)
            .args(args)
            .args(["--store", store])
            .env_remove("FSGAUGE_STORE")
            .output()
            .unwrap()
    };
    let read_only =
        || std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    read_only_queries(&sb, store, store, reader, read_only, || {
        downgrade_sqlite(&db, 1);
        read_only();
        eprintln!(
            "DEBUG {:?}",
            std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect::<Vec<_>>()
        );
    });
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["store.sqlite"], "nothing left beside the store");
}

/// A PostgreSQL role that may only SELECT (made for the test, dropped after).
struct PgReader {
    admin: String,
    role: String,
    url: String,
}

impl PgReader {
    fn new(pg: &PgDb) -> Self {
        let role = format!("{}_reader", pg.name);
        let (scheme, rest) = pg.url.split_once("://").unwrap();
        let (_, host) = rest.split_once('@').unwrap();
        let url = format!("{scheme}://{role}:reader@{host}");
        let mut c = postgres::Client::connect(&pg.url, postgres::NoTls).unwrap();
        c.batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN PASSWORD 'reader'; GRANT CONNECT ON DATABASE {} TO {role}",
            pg.name
        ))
        .unwrap();
        Self {
            admin: pg.url.clone(),
            role,
            url,
        }
    }

    /// SELECT on every table there is now.
    fn grant(&self) {
        let mut c = postgres::Client::connect(&self.admin, postgres::NoTls).unwrap();
        c.batch_execute(&format!(
            "GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}",
            self.role
        ))
        .unwrap();
    }
}

impl Drop for PgReader {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            // Its grants go first (DROP OWNED would need membership of the role).
            let (role, db) = (
                &self.role,
                self.admin.rsplit('/').next().unwrap_or_default(),
            );
            for sql in [
                format!("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}"),
                format!("REVOKE ALL ON DATABASE {db} FROM {role}"),
                format!("DROP ROLE IF EXISTS {role}"),
            ] {
                if let Err(e) = c.batch_execute(&sql) {
                    eprintln!("{sql}: {e}");
                }
            }
        }
    }
}

/// A PostgreSQL role granted only SELECT answers queries as the writer does.
#[test]
fn a_read_only_postgres_role_answers_queries_and_is_never_written() {
    let Some(pg) = PgDb::new("readonly") else {
        return;
    };
    let ro = PgReader::new(&pg);
    let sb = Sandbox::new();
    let reader = |args: &[&str]| {
        sb.cmd()
            .args(args)
            .args(["--store", &ro.url])
            .env_remove("FSGAUGE_STORE")
            .output()
            .unwrap()
    };
    read_only_queries(
        &sb,
        &pg.url,
        &ro.url,
        reader,
        || ro.grant(),
        || downgrade_postgres(&pg.url, 1),
    );
}

/// `bench` indexes the results it writes into `--store`, as `run` with a plan does (it had no
/// `--store`, and `FSGAUGE_STORE` was not read), and refuses a store it cannot open before
/// anything runs.
#[test]
fn bench_indexes_what_it_writes() {
    let sb = Sandbox::new();
    let dir = sb.path().join("bench-dir");
    std::fs::create_dir(&dir).unwrap();
    let db = sb.path().join("store.sqlite");
    let bench = |store: &str| {
        sb.bench(&["bench", "create", "--dir", dir.to_str().unwrap()])
            .args(["--files", "50", "--reps", "2", "--quiet"])
            .env("FSGAUGE_STORE", store)
            .output()
            .unwrap()
    };
    let out = bench("postgres://x@127.0.0.1:1/y");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(!sb.out().exists() || std::fs::read_dir(sb.out()).unwrap().next().is_none());
    let out = bench(db.to_str().unwrap());
    assert!(out.status.success(), "{out:?}");
    assert_eq!(runs_held(&sb, db.to_str().unwrap()), 2);
    // Only what it wrote: a result of another run in the same directory is not indexed.
    write_all(&sb.out(), &runs("6.1.0", 1, 1000.0, 1));
    assert!(bench(db.to_str().unwrap()).status.success());
    assert_eq!(runs_held(&sb, db.to_str().unwrap()), 4);
}

/// `run` without a plan as a user (the quick study on a temporary directory) indexes what it
/// writes, as a root plan run does (it returned before the store was opened).
#[test]
fn run_as_a_user_indexes_what_it_writes() {
    let sb = Sandbox::new();
    let Some((out_dir, mut nobody)) = crate::support::as_nobody(&sb) else {
        return;
    };
    let db = out_dir.join("store.sqlite");
    let out = nobody
        .args(["run", "--reps", "1", "--out"])
        .arg(&out_dir)
        .arg("--store")
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("indexed 1 results (1 new) in the store"),
        "{err}"
    );
    assert_eq!(runs_held(&sb, db.to_str().unwrap()), 1);
}

/// A store of a schema version this fsgauge cannot read is refused, saying to rebuild it, and
/// `store rebuild` then remakes it (it opened the store as any add does, and was refused too).
#[test]
fn rebuild_remakes_a_store_of_another_version() {
    let sb = Sandbox::new();
    let db = sb.path().join("store.sqlite");
    let store = db.to_str().unwrap();
    let (a, b) = two_kernels(&sb);
    add(&sb, store, &[&a, &b]);
    let before = history(&sb, store, "phase=file_create");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE meta SET value = '99' WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
    let out = sb
        .cmd()
        .args(["history", "ops_per_s", "--store", store])
        .env_remove("FSGAUGE_STORE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("schema version 99; this fsgauge reads version 3: make it again with fsgauge store rebuild"),
        "{out:?}"
    );
    fsgauge(
        &sb,
        store,
        &["store", "rebuild", a.to_str().unwrap(), b.to_str().unwrap()],
    );
    assert_eq!(history(&sb, store, "phase=file_create"), before);
}

/// `read`, `age`, `study append` and `exercise` index the results they write into `--store`,
/// as `run` and `bench` do: each refuses a store it cannot open before anything runs, then
/// indexes what it wrote and nothing else of its `--out` (a result of another run there stays
/// out). A command whose place needs a filesystem this machine cannot make skips.
#[test]
fn every_command_that_writes_results_indexes_them() {
    let tree = |sb: &Sandbox| {
        let t = sb.path().join("tree");
        std::fs::create_dir_all(t.join("d")).unwrap();
        for i in 0..8 {
            std::fs::write(t.join("d").join(format!("f{i}")), vec![7u8; 9000]).unwrap();
        }
        t.to_str().unwrap().to_string()
    };
    let exercised = |sb: &Sandbox| {
        let d = sb.path().join("ex");
        std::fs::create_dir_all(&d).unwrap();
        d.to_str().unwrap().to_string()
    };
    type Args = Box<dyn Fn(&Sandbox) -> Vec<String>>;
    let cases: Vec<(&str, Option<&str>, Args)> = vec![
        (
            "read",
            None,
            Box::new(move |sb| vec!["read".into(), tree(sb), "--cold".into(), "none".into()]),
        ),
        (
            "exercise",
            None,
            Box::new(move |sb| {
                ["exercise", "--ops", "200", "--dir"]
                    .map(String::from)
                    .into_iter()
                    .chain([exercised(sb)])
                    .collect()
            }),
        ),
        (
            "age",
            Some("ext4"),
            Box::new(|_| {
                [
                    "age",
                    "--fs",
                    "ext4",
                    "--fs-size",
                    "128M",
                    "--usage",
                    "5",
                    "--seed",
                    "1",
                ]
                .map(String::from)
                .to_vec()
            }),
        ),
        (
            "study append",
            Some("ext4"),
            Box::new(|sb| {
                [
                    "study",
                    "append",
                    "--backing",
                    "ram",
                    "--fs",
                    "ext4",
                    "--fs-size",
                    "64M",
                    "--usage",
                    "20",
                    "--files",
                    "20",
                    "--read-phases",
                    "walk",
                    "--workdir",
                ]
                .map(String::from)
                .into_iter()
                .chain([sb.workdir().to_str().unwrap().to_string()])
                .collect()
            }),
        ),
    ];
    for (name, fs, args) in cases {
        if fs.is_some_and(|fs| !crate::support::have_fs(fs)) {
            continue;
        }
        let sb = Sandbox::new();
        let db = sb.path().join("store.sqlite");
        let args = args(&sb);
        let go = |store: &str| {
            sb.cmd()
                .args(&args)
                .arg("--out")
                .arg(sb.out())
                .args(["--quiet", "--store", store])
                .env_remove("FSGAUGE_STORE")
                .output()
                .unwrap()
        };
        write_all(&sb.out(), &runs("6.1.0", 1, 1000.0, 1));
        let out = go("postgres://x@127.0.0.1:1/y");
        assert_eq!(out.status.code(), Some(2), "{name}: {out:?}");
        assert_eq!(
            std::fs::read_dir(sb.out()).unwrap().count(),
            1,
            "{name}: nothing made"
        );
        let out = go(db.to_str().unwrap());
        assert!(out.status.success(), "{name}: {out:?}");
        let written = std::fs::read_dir(sb.out()).unwrap().count() as u64 - 1;
        assert!(written > 0, "{name} wrote results");
        assert_eq!(
            runs_held(&sb, db.to_str().unwrap()),
            written,
            "{name}: {out:?}"
        );
        sb.assert_clean();
    }
}
