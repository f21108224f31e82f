//! `--format`, `--json` and `--quiet` are declared once and every command that prints results
//! or progress takes them: the test walks every subcommand's `--help` (bench's kinds included)
//! and runs `frag` with each of them. Needs no root.

use crate::support::Sandbox;

/// Leaves of the command tree that print neither results nor progress: they take no output
/// flags. Anything else must.
const WITHOUT_OUTPUT: &[&str] = &["help", "presets show", "testbed destroy", "testbed cleanup"];

/// The subcommands a `--help` lists under "Commands:".
fn subcommands(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in help.lines() {
        if line.starts_with("Commands:") {
            inside = true;
            continue;
        }
        if inside {
            if line.trim().is_empty() || !line.starts_with(' ') {
                break;
            }
            // A command's name starts at column 2; continuation lines are indented further.
            if line.starts_with("  ") && !line.starts_with("   ") {
                if let Some(name) = line.split_whitespace().next() {
                    out.push(name.to_string());
                }
            }
        }
    }
    out
}

fn help_of(sb: &Sandbox, path: &[String]) -> String {
    let out = sb.cmd().args(path).arg("--help").output().unwrap();
    assert!(out.status.success(), "{path:?} --help: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Every leaf command, as the words that name it.
fn leaves(sb: &Sandbox, path: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let help = help_of(sb, &path);
    let subs = subcommands(&help);
    if subs.is_empty() {
        out.push((path, help));
        return;
    }
    for s in subs {
        let mut p = path.clone();
        p.push(s.clone());
        if s == "help" {
            continue;
        }
        leaves(sb, p, out);
    }
    // A command with subcommands that also runs without one (presets) lists its own flags.
    if help.contains("--format") {
        out.push((path, help));
    }
}

#[test]
fn every_command_that_prints_takes_format_json_and_quiet() {
    let sb = Sandbox::new();
    let mut all = Vec::new();
    leaves(&sb, Vec::new(), &mut all);
    let names: Vec<String> = all.iter().map(|(p, _)| p.join(" ")).collect();
    // The walk found what it must: a bench kind, the listings, the readers.
    for must in [
        "run",
        "presets",
        "report",
        "compare",
        "bench tree",
        "exercise",
        "testbed create",
        "testbed list",
        "frag",
        "age",
        "read",
        "study append",
    ] {
        assert!(
            names.iter().any(|n| n == must),
            "{must} not found in {names:?}"
        );
    }
    let mut missing = Vec::new();
    for (path, help) in &all {
        let name = path.join(" ");
        if WITHOUT_OUTPUT.contains(&name.as_str()) {
            continue;
        }
        for flag in ["--format <", "--json", "--quiet"] {
            if !help.contains(flag) {
                missing.push(format!("{name}: {}", flag.trim_end_matches(" <")));
            }
        }
        assert!(
            help.contains("table|json|csv|md|html"),
            "{name} offers the five formats of the one exporter:\n{help}"
        );
    }
    assert!(
        missing.is_empty(),
        "commands without output flags: {missing:?}"
    );
}

#[test]
fn frag_takes_quiet_and_every_format() {
    let sb = Sandbox::new();
    let tree = sb.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("a"), vec![7u8; 10_000]).unwrap();
    let run = |args: &[&str]| {
        let out = sb.cmd().arg("frag").args(args).arg(&tree).output().unwrap();
        assert!(out.status.success(), "frag {args:?}: {out:?}");
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (table, _) = run(&["--quiet"]);
    assert!(table.contains("files"), "{table}");
    let (json, _) = run(&["-q", "--json", "--method", "fiemap"]);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["summary"]["files"], 1, "{json}");
    let (csv, _) = run(&["--format", "csv", "--quiet"]);
    assert!(csv.starts_with("metric,value\nfiles,1\n"), "{csv}");
    let (md, _) = run(&["--format", "md"]);
    assert!(
        md.starts_with("| metric | value |\n| --- | ---: |\n| files | 1 |"),
        "{md}"
    );
    let (html, _) = run(&["--format", "html"]);
    assert!(
        html.starts_with("<!DOCTYPE html>") && html.contains("<td class=\"l\">files</td>"),
        "{html}"
    );
}
