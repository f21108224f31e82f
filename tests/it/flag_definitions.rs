//! A setting that several commands take is declared once (issue 31): wherever `--seed`,
//! `--out`, `--cold`, `--workdir` or `--device-model` appears in the command tree it has the
//! same help, default, value name and value parser, so that no copy can drift from the others;
//! and every `--fsync` of a tree workload takes its modes from the one type, each mode with its
//! one meaning. Walks the clap command itself: needs nothing of the machine.

use std::collections::BTreeMap;

use clap::{Arg, Command, CommandFactory};
use fsgauge::cli::Cli;
use fsgauge::workload::fsync::FsyncMode;

/// The flags declared once and taken by several commands.
const SHARED: [&str; 5] = ["seed", "out", "cold", "workdir", "device-model"];

/// Flags of a shared name that are another setting, with why.
const EXCEPTIONS: [(&str, &str, &str); 1] = [(
    "devices fit",
    "out",
    "the file the fitted profile is written to (--out FILE), not a results directory",
)];

/// Commands each shared flag must be found in, so that the walk cannot pass by finding none.
const EXPECTED: [(&str, &[&str]); 5] = [
    (
        "seed",
        &[
            "run",
            "bench tree",
            "bench fdtree",
            "exercise",
            "age",
            "read",
            "study append",
            "devices check",
            "devices fit",
        ],
    ),
    (
        "out",
        &[
            "run",
            "bench tree",
            "exercise",
            "age",
            "read",
            "study append",
        ],
    ),
    ("cold", &["run", "bench tree", "bench tio", "age", "read"]),
    (
        "workdir",
        &["run", "bench tree", "testbed create", "age", "study append"],
    ),
    (
        "device-model",
        &["run", "bench tree", "testbed create", "age", "study append"],
    ),
];

/// All that makes up a flag's declaration, as `--help` and the parser see it.
#[derive(Debug, Clone, PartialEq)]
struct Declaration {
    id: String,
    help: Option<String>,
    long_help: Option<String>,
    defaults: Vec<String>,
    value_names: Vec<String>,
    parser: String,
    possible_values: Vec<String>,
    action: String,
    required: bool,
}

impl Declaration {
    fn of(a: &Arg) -> Self {
        Self {
            id: a.get_id().to_string(),
            help: a.get_help().map(|h| h.to_string()),
            long_help: a.get_long_help().map(|h| h.to_string()),
            defaults: a
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect(),
            value_names: a
                .get_value_names()
                .unwrap_or_default()
                .iter()
                .map(|v| v.to_string())
                .collect(),
            parser: format!("{:?}", a.get_value_parser().type_id()),
            possible_values: a
                .get_possible_values()
                .iter()
                .map(|p| p.get_name().to_string())
                .collect(),
            action: format!("{:?}", a.get_action()),
            required: a.is_required_set(),
        }
    }
}

/// Every (command path, flag) of the tree whose long name is `long`.
fn every(cmd: &Command, path: &str, long: &str, out: &mut Vec<(String, Arg)>) {
    for a in cmd.get_arguments() {
        if a.get_long() == Some(long) {
            out.push((path.to_string(), a.clone()));
        }
    }
    for sub in cmd.get_subcommands() {
        let p = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        every(sub, &p, long, out);
    }
}

fn tree() -> Command {
    let mut cmd = Cli::command();
    cmd.build();
    cmd
}

#[test]
fn each_shared_flag_is_declared_the_same_wherever_it_appears() {
    let cmd = tree();
    for long in SHARED {
        let mut found = Vec::new();
        every(&cmd, "", long, &mut found);
        let (paths, exceptions): (Vec<_>, Vec<_>) = found
            .into_iter()
            .partition(|(p, _)| !EXCEPTIONS.iter().any(|(ep, el, _)| ep == p && *el == long));
        let (first_path, first) = paths
            .first()
            .unwrap_or_else(|| panic!("--{long} is in no command"));
        let want = Declaration::of(first);
        for (path, a) in &paths {
            assert_eq!(
                Declaration::of(a),
                want,
                "--{long} of `fsgauge {path}` is declared otherwise than in `fsgauge {first_path}`"
            );
        }
        let (_, expected) = EXPECTED.iter().find(|(l, _)| *l == long).unwrap();
        for e in *expected {
            assert!(
                paths.iter().any(|(p, _)| p == e),
                "--{long} is missing from `fsgauge {e}`"
            );
        }
        // An exception that no longer exists is taken off the list.
        for (ep, el, why) in EXCEPTIONS.iter().filter(|(_, l, _)| *l == long) {
            assert!(
                exceptions.iter().any(|(p, _)| p == ep),
                "--{el} of `fsgauge {ep}` ({why}) is listed as an exception but is not there"
            );
        }
    }
}

#[test]
fn read_s_cold_default_and_devices_seed_default_are_in_the_one_help() {
    let cmd = tree();
    let help = |long: &str| {
        let mut found = Vec::new();
        every(&cmd, "", long, &mut found);
        found[0].1.get_help().unwrap().to_string()
    };
    assert!(
        help("cold").contains("[default: none, but drop for `read`"),
        "{}",
        help("cold")
    );
    assert!(
        help("seed").contains("`devices check` and `fit`: 1]"),
        "{}",
        help("seed")
    );
    // A plan's defaults too, written from the constants the plan's parser applies.
    assert!(
        help("cold").contains("with a plan, the plan's cold, none when it names none]"),
        "{}",
        help("cold")
    );
    assert!(
        help("seed").contains("with a plan, the plan's seed, 1 when it names none"),
        "{}",
        help("seed")
    );
}

#[test]
fn every_tree_workload_s_fsync_is_the_one_type_with_one_meaning_per_mode() {
    let cmd = tree();
    let mut found = Vec::new();
    every(&cmd, "", "fsync", &mut found);
    let meanings: BTreeMap<&str, &str> = FsyncMode::ALL
        .iter()
        .map(|m| (m.name(), m.meaning()))
        .collect();
    let mut checked = Vec::new();
    for (path, a) in &found {
        let values = a.get_possible_values();
        if !["bench tree", "bench create", "bench fdtree"].contains(&path.as_str()) {
            // tio and clients force out I/O, not trees: none|end|every:N, another type.
            assert!(values.is_empty(), "`fsgauge {path}` --fsync: {values:?}");
            continue;
        }
        assert!(
            !values.is_empty(),
            "`fsgauge {path}` --fsync lists no modes"
        );
        for v in &values {
            assert_eq!(
                v.get_help().map(|h| h.to_string()).as_deref(),
                meanings.get(v.get_name()).copied(),
                "`fsgauge {path}` --fsync {}",
                v.get_name()
            );
        }
        let names: Vec<&str> = values.iter().map(|v| v.get_name()).collect();
        assert_eq!(
            a.get_value_names().unwrap()[0].as_str(),
            names.join("|"),
            "`fsgauge {path}` --fsync shows the modes it takes"
        );
        checked.push(path.as_str());
    }
    assert_eq!(checked, ["bench tree", "bench fdtree", "bench create"]);
}
