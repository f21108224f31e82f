//! `--format table|json|csv|md` (and `--json`) on every command that prints results or
//! listings, and metric declarations
//! read from result files. bench, report, compare and frag need no root; `run` needs root,
//! loop devices and mkfs.ext4 (it skips with a printed reason without them).

use std::path::Path;
use std::process::{Command, Output};

use crate::report_fixtures::*;
use crate::support::{json_of, Sandbox};

fn fsgauge() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fsgauge"))
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Parses RFC 4180 CSV (quoted fields with doubled quotes, commas and newlines inside), and
/// checks every record has as many fields as the header.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\n') => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (false, '\r') => {}
            (false, c) => field.push(c),
        }
    }
    assert!(!quoted, "unterminated quoted field in {text}");
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push(record);
    }
    assert!(!records.is_empty(), "empty CSV");
    let width = records[0].len();
    for r in &records {
        assert_eq!(r.len(), width, "ragged CSV record {r:?} in\n{text}");
    }
    records
}

/// Checks that the text is Markdown tables: every non-empty line of a table starts and ends
/// with a pipe, and each table's second line aligns columns. Returns the tables' lines.
fn assert_md_tables(text: &str) -> Vec<Vec<String>> {
    let mut tables: Vec<Vec<String>> = Vec::new();
    let mut current: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with('|') {
            assert!(line.ends_with('|'), "not a table row: {line}");
            current.push(line.to_string());
        } else if !current.is_empty() {
            tables.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        tables.push(current);
    }
    assert!(!tables.is_empty(), "no Markdown table in\n{text}");
    for t in &tables {
        assert!(t.len() >= 2, "a table without its alignment line: {t:?}");
        assert!(
            t[1].split('|')
                .filter(|c| !c.is_empty())
                .all(|c| c.trim().trim_end_matches(':') == "---"),
            "second line is not the alignment line: {}",
            t[1]
        );
        let cols = t[0].matches('|').count();
        for l in t {
            assert_eq!(
                l.replace("\\|", "").matches('|').count(),
                cols,
                "row width differs: {l}"
            );
        }
    }
    tables
}

fn col(records: &[Vec<String>], name: &str) -> usize {
    records[0]
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {:?}", records[0]))
}

fn bench_create(sb: &Sandbox, dir: &Path, extra: &[&str]) -> Output {
    sb.cmd()
        .args([
            "bench",
            "create",
            "--quiet",
            "--files",
            "40",
            "--file-size",
            "4K",
            "--dir",
        ])
        .arg(dir)
        .arg("--out")
        .arg(sb.out())
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn bench_prints_every_format_and_json_is_the_result_document() {
    let sb = Sandbox::new();
    let dir = sb.path().join("target");
    std::fs::create_dir_all(&dir).unwrap();

    let doc = json_of(&bench_create(&sb, &dir, &["--format", "json"]));
    assert_eq!(doc["schema"], "fsgauge.run/1");
    // --json is the short form of --format json: the same document shape.
    let short = json_of(&bench_create(&sb, &dir, &["--json"]));
    assert_eq!(short["schema"], "fsgauge.run/1");
    let phases = doc["phases"].as_array().unwrap().len();
    assert_eq!(short["phases"].as_array().unwrap().len(), phases);
    // The workload's declarations ride along in the result.
    let decl = doc["workload"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["key"] == "kib_per_s")
        .expect("create declares kib_per_s");
    assert_eq!(decl["unit"], "KiB/s");
    assert_eq!(decl["better"], "higher");
    assert_eq!(decl["rate"], true);

    let csv = ok(&bench_create(&sb, &dir, &["--format", "csv"]));
    let records = parse_csv(&csv);
    assert_eq!(
        records.len(),
        1 + phases,
        "header and a row per phase:\n{csv}"
    );
    let create = records
        .iter()
        .find(|r| r[col(&records, "phase")] == "create")
        .expect("a create row");
    assert_eq!(create[col(&records, "extra.files")], "40", "{csv}");
    let ops: f64 = create[col(&records, "ops_per_s")].parse().unwrap();
    assert!(ops > 0.0, "{csv}");

    let md = ok(&bench_create(&sb, &dir, &["--format", "md"]));
    let tables = assert_md_tables(&md);
    assert!(tables[0][0].contains("file data rate (KiB/s)"), "{md}");
    assert_eq!(
        tables[0].len(),
        2 + phases,
        "header, alignment, phases:\n{md}"
    );

    let table = ok(&bench_create(&sb, &dir, &["--format", "table"]));
    assert!(table.lines().any(|l| l.starts_with("testbed")), "{table}");

    // Every command renders through the one exporter, html included: one page with the rows
    // per run and phase.
    let html = ok(&bench_create(&sb, &dir, &["--format", "html"]));
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(
        html.contains("<h3>Results per run and phase</h3>"),
        "{html}"
    );
    assert_eq!(html.matches("<tr>").count(), 1 + phases, "{html}");
    let out = bench_create(&sb, &dir, &["--format", "json", "--json"]);
    assert_eq!(out.status.code(), Some(2), "--format and --json conflict");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn report_prints_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    write_all(&res, &tree_study());
    let report = |format: &str| {
        ok(&fsgauge()
            .arg("report")
            .arg(&res)
            .args(["--format", format])
            .output()
            .unwrap())
    };
    let csv = report("csv");
    let records = parse_csv(&csv);
    assert!(records.len() > 1);
    assert_eq!(records[0][0], "testbed");
    assert_md_tables(&report("md"));
    let json: serde_json::Value = serde_json::from_str(&report("json")).unwrap();
    assert!(json["cells"].as_array().is_some_and(|c| !c.is_empty()));
    let short = ok(&fsgauge()
        .arg("report")
        .arg(&res)
        .arg("--json")
        .output()
        .unwrap());
    let short: serde_json::Value = serde_json::from_str(&short).unwrap();
    assert_eq!(short["cells"], json["cells"]);
    let table = report("table");
    assert!(
        table.contains("Mean ± standard deviation per configuration"),
        "{table}"
    );
    assert!(!table.contains("<html"), "{table}");
    // The report's own names keep working.
    assert!(report("markdown").starts_with("# fsgauge report"));
    assert!(report("html").contains("<html"));
}

#[test]
fn compare_prints_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let (base, new) = (dir.path().join("base"), dir.path().join("new"));
    let all = tree_study();
    let side = |l: &str| -> Vec<_> {
        all.iter()
            .filter(|r| r.testbed.label == l)
            .cloned()
            .collect()
    };
    write_all(&base, &side("a"));
    write_all(&new, &side("b"));
    let cmp = |format: &str| {
        ok(&fsgauge()
            .arg("compare")
            .arg(&base)
            .arg(&new)
            .args(["--format", format])
            .output()
            .unwrap())
    };
    let csv = cmp("csv");
    let records = parse_csv(&csv);
    let (m, v) = (col(&records, "metric"), col(&records, "verdict"));
    let elapsed = records
        .iter()
        .find(|r| r[m] == "elapsed" && r[col(&records, "phase")] == "create")
        .expect("an elapsed row");
    assert_eq!(elapsed[v], "worse");
    let json: serde_json::Value = serde_json::from_str(&cmp("json")).unwrap();
    assert_eq!(
        json["rows"].as_array().unwrap().len(),
        records.len() - 1,
        "one CSV line per compared row"
    );
    assert_md_tables(&cmp("md"));
    assert!(cmp("table").contains("verdict"));
    let short = ok(&fsgauge()
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .arg("--json")
        .output()
        .unwrap());
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&short).unwrap(),
        json
    );
    let html = cmp("html");
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(html.contains("<th>verdict</th>"), "{html}");
}

/// Result files written before declarations were recorded take their kind's declarations;
/// a figure nobody declares claims no direction, whatever its name.
#[test]
fn report_reads_directions_from_declarations_not_names() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("results");
    let mut runs = Vec::new();
    for rep in 0..2u32 {
        let mut p = phase("walk", 2.0, 0.1, 10, 1 << 20, &[1000, 2000], &[10], 1);
        p.extra.insert("read_kbps".into(), 512.0 + rep as f64);
        runs.push(result("a", "read", serde_json::json!({}), rep, vec![p]));
        let mut p = phase("x", 2.0, 0.1, 10, 0, &[1000], &[10], 1);
        p.extra.insert("files_per_s".into(), 5.0 + rep as f64);
        runs.push(result("a", "nope", serde_json::json!({}), rep, vec![p]));
    }
    write_all(&res, &runs);
    let csv = ok(&fsgauge()
        .arg("report")
        .arg(&res)
        .args(["--format", "csv"])
        .output()
        .unwrap());
    let records = parse_csv(&csv);
    let (m, b, u, h) = (
        col(&records, "metric"),
        col(&records, "better"),
        col(&records, "unit"),
        col(&records, "harmonic_mean"),
    );
    let row = |key: &str| {
        records
            .iter()
            .find(|r| r[m] == key)
            .unwrap_or_else(|| panic!("no {key} in\n{csv}"))
    };
    // The read workload declares read_kbps a rate in KiB/s (its name says neither).
    let kbps = row("extra.read_kbps");
    assert_eq!((kbps[b].as_str(), kbps[u].as_str()), ("higher", "KiB/s"));
    assert!(!kbps[h].is_empty(), "a rate has its harmonic mean");
    // An undeclared figure ending in _per_s is no longer taken for a rate.
    let fps = row("extra.files_per_s");
    assert_eq!((fps[b].as_str(), fps[u].as_str()), ("neither", ""));
    assert!(fps[h].is_empty());
}

#[test]
fn frag_prints_markdown_csv_and_json() {
    let sb = Sandbox::new();
    let root = sb.path().join("t");
    std::fs::create_dir_all(&root).unwrap();
    for (name, size) in [("b,1", 3000usize), ("a|2", 100), ("c", 9000)] {
        std::fs::write(root.join(name), vec![b'z'; size]).unwrap();
    }
    let frag = |args: &[&str]| {
        ok(&sb
            .cmd()
            .arg("frag")
            .args(args)
            .args(["--threads", "1"])
            .arg(&root)
            .output()
            .unwrap())
    };
    for sorted in [&["--sort", "path"][..], &[][..]] {
        let mut args = vec!["--per-file", "--format", "md"];
        args.extend_from_slice(sorted);
        let md = frag(&args);
        let tables = assert_md_tables(&md);
        assert_eq!(tables.len(), 2, "files and summary:\n{md}");
        assert_eq!(tables[0].len(), 2 + 3, "three files:\n{md}");
        assert!(md.contains("a\\|2"), "pipes escaped:\n{md}");
        assert!(
            tables[1].iter().any(|l| l.starts_with("| files | 3 |")),
            "{md}"
        );
    }
    let csv = frag(&["--per-file", "--sort", "path", "--format", "csv"]);
    let files = parse_csv(csv.split("\n\n").next().unwrap());
    assert_eq!(files.len(), 4);
    assert!(
        files[1][0].ends_with("a|2") && files[2][0].ends_with("b,1"),
        "{csv}"
    );
    let json: serde_json::Value = serde_json::from_str(&frag(&["--format", "json"])).unwrap();
    assert_eq!(json["summary"]["files"], 3);
    let short: serde_json::Value = serde_json::from_str(&frag(&["--json"])).unwrap();
    assert_eq!(short["summary"], json["summary"]);
}

#[test]
fn run_prints_every_format() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let plan = sb.path().join("plan.toml");
    std::fs::write(
        &plan,
        r#"
reps = 1
[[testbed]]
label = "ext4"
fs = "ext4"
size = "64M"
[[workload]]
kind = "tree"
dirs = 2
files = 4
file_size = "16K"
"#,
    )
    .unwrap();
    let run = |format: &str| {
        sb.bench(&["run", plan.to_str().unwrap(), "--quiet", "--format", format])
            .output()
            .unwrap()
    };
    let json = json_of(&run("json"));
    let docs = json
        .as_array()
        .expect("run prints a list of result documents");
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0]["schema"], "fsgauge.run/1");
    let phases = docs[0]["phases"].as_array().unwrap().len();
    let csv = ok(&run("csv"));
    let records = parse_csv(&csv);
    assert_eq!(records.len(), 1 + phases, "{csv}");
    assert_eq!(records[1][col(&records, "testbed")], "ext4");
    let md = ok(&run("md"));
    assert_eq!(assert_md_tables(&md)[0].len(), 2 + phases, "{md}");
    sb.assert_clean();
}

/// The page-cache warning follows the operations a workload declares as reading file data,
/// not the phase's name (results without any such declaration get their kind's declarations).
#[test]
fn cache_warning_follows_declared_read_operations() {
    let dir = tempfile::tempdir().unwrap();
    let op = |reads: bool| fsgauge::results::OpStats {
        count: 10,
        bytes: 1 << 20,
        primary: true,
        reads,
        ..Default::default()
    };
    let mut scan = phase("scan", 1.0, 0.1, 10, 1 << 20, &[1000], &[10], 1);
    scan.op_stats.insert("file".into(), op(true));
    let mut named = phase("reader", 1.0, 0.1, 10, 1 << 20, &[1000], &[10], 1);
    named.op_stats.insert("write".into(), op(false));
    let mut r = result("c", "x", serde_json::json!({}), 0, vec![scan, named]);
    r.conditions.cold = "none".into();
    write_all(dir.path(), &[r]);
    let md = ok(&fsgauge()
        .arg("report")
        .arg(dir.path())
        .args(["--format", "md"])
        .output()
        .unwrap());
    let warned = |phase: &str| {
        md.lines().any(|l| {
            l.contains(&format!("c · {phase}: the working set")) && l.contains("page cache")
        })
    };
    assert!(
        warned("scan"),
        "a phase of declared reads is warned about:\n{md}"
    );
    assert!(
        !warned("reader"),
        "a name alone does not make a read phase:\n{md}"
    );
}

/// The subcommands listed under "Commands:" in a help text (clap indents them by two spaces;
/// wrapped descriptions are indented deeper).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|c| c != "help")
        .collect()
}

#[test]
fn every_command_that_prints_takes_format_json_and_quiet() {
    // Commands that print no results or listings: they change the machine and say what they
    // did, or print a plan file to copy.
    const PRINT_NOTHING_TO_FORMAT: [&str; 5] = [
        "testbed destroy",
        "testbed cleanup",
        "testbed snapshot",
        "testbed restore",
        "presets show",
    ];
    let mut todo = vec![Vec::<String>::new()];
    let mut checked = Vec::new();
    while let Some(path) = todo.pop() {
        let help = ok(&fsgauge().args(&path).arg("--help").output().unwrap());
        let children = subcommands(&help);
        todo.extend(children.iter().map(|c| {
            let mut p = path.clone();
            p.push(c.clone());
            p
        }));
        let name = path.join(" ");
        // A group whose subcommand is required (`bench <COMMAND>`) prints nothing itself.
        let usage = help.lines().find(|l| l.starts_with("Usage:")).unwrap_or("");
        if path.is_empty()
            || usage.contains("<COMMAND>")
            || PRINT_NOTHING_TO_FORMAT.contains(&name.as_str())
        {
            continue;
        }
        let format = help
            .lines()
            .find(|l| l.trim_start().starts_with("--format"))
            .unwrap_or_else(|| panic!("fsgauge {name} has no --format:\n{help}"));
        for f in ["table", "json", "csv", "md", "html"] {
            assert!(
                format.contains(f),
                "fsgauge {name} --format lacks {f}: {format}"
            );
        }
        assert!(
            help.lines().any(|l| l.trim_start().starts_with("--json")),
            "fsgauge {name} has no --json:\n{help}"
        );
        assert!(
            help.lines().any(|l| l.contains("--quiet")),
            "fsgauge {name} has no --quiet:\n{help}"
        );
        checked.push(name);
    }
    // The walk found the commands (a change in clap's help layout would otherwise pass).
    for c in [
        "bench tree",
        "bench tio",
        "run",
        "report",
        "compare",
        "frag",
        "study append",
        "testbed list",
        "testbed create",
        "presets",
        "age",
        "read",
        "exercise",
        "bench clients",
    ] {
        assert!(
            checked.iter().any(|n| n == c),
            "{c} not checked: {checked:?}"
        );
    }
}

#[test]
fn listings_print_every_format() {
    let sb = Sandbox::new();
    let json = json_of(&sb.cmd().args(["presets", "--json"]).output().unwrap());
    let names: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"quick") && names.contains(&"reservation"),
        "{names:?}"
    );
    let same = json_of(
        &sb.cmd()
            .args(["presets", "--format", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(same, json);
    let csv = parse_csv(&ok(&sb
        .cmd()
        .args(["presets", "--format", "csv"])
        .output()
        .unwrap()));
    assert_eq!(csv[0], ["name", "about", "runnable", "needs", "minutes"]);
    let csv_names: Vec<&str> = csv[1..].iter().map(|r| r[0].as_str()).collect();
    assert_eq!(csv_names, names);
    let md = assert_md_tables(&ok(&sb
        .cmd()
        .args(["presets", "--format", "md"])
        .output()
        .unwrap()));
    assert_eq!(md[0].len(), 2 + names.len());
    let table = ok(&sb.cmd().arg("presets").output().unwrap());
    assert!(table.lines().any(|l| l.starts_with("quick ")), "{table}");
    let both = sb
        .cmd()
        .args(["presets", "--json", "--format", "csv"])
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2));

    // The sandbox's own ledger is empty: a header and no rows, an empty list.
    let csv = parse_csv(&ok(&sb
        .cmd()
        .args(["testbed", "list", "--format", "csv"])
        .output()
        .unwrap()));
    assert_eq!(
        csv,
        [["name", "owner", "fs", "size", "device", "mountpoint"]]
    );
    let json = json_of(
        &sb.cmd()
            .args(["testbed", "list", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(json, serde_json::json!([]));
    let json = json_of(
        &sb.cmd()
            .args(["testbed", "list", "--format", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(json, serde_json::json!([]));
}

/// A run's findings are part of its one document: Markdown and HTML show them as a table
/// before the results, as the terminal shows them before its table.
#[test]
fn run_findings_are_in_every_document_format() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let plan = sb.path().join("plan.toml");
    std::fs::write(
        &plan,
        r#"
reps = 1
[[testbed]]
label = "plain"
fs = "ext4"
size = "64M"
[[testbed]]
label = "journal"
fs = "ext4"
size = "64M"
mount = "data=journal"
[[workload]]
kind = "tree"
dirs = 2
files = 4
file_size = "16K"
[[question]]
baseline = "plain"
variant = "journal"
phase = "create"
metric = "dev_write_mb"
"#,
    )
    .unwrap();
    let run = |format: &str| {
        sb.bench(&["run", plan.to_str().unwrap(), "--quiet", "--format", format])
            .output()
            .unwrap()
    };
    let text = ok(&run("table"));
    assert!(text.starts_with("Findings\n"), "{text}");
    let md = ok(&run("md"));
    let findings = md
        .find("Findings in numbers")
        .expect("findings in Markdown");
    assert!(
        findings < md.find("Results per run and phase").unwrap(),
        "{md}"
    );
    let html = ok(&run("html"));
    assert!(html.contains("Findings in numbers"), "{html}");
    let json = json_of(&run("json"));
    assert_eq!(json.as_array().map(Vec::len), Some(2), "{json}");
    sb.assert_clean();
}
