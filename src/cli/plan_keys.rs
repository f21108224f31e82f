//! Every flag of `fsgauge run` and every key of a plan's top level, walked (issue 31). A name
//! that is both is one declaration, a run setting ([`RunSettings`]): `run`'s flag is that
//! declaration (same help, default, parser), and the plan's key reads every value to the same
//! setting the flag does, up to the same bound. A flag a plan does not take is refused in a
//! plan as an unknown field, so a plan key added under a flag's name but parsed apart from it
//! fails here; and each of the plan's own keys is no flag of `run`.

use clap::{Arg, Args, Command, CommandFactory};

use crate::cli::Cli;
use crate::lab::plan::{parse, setting_keys, settings_of, ParseOptions, Plan, Reps, OWN_KEYS};
use crate::lab::runner::params::{RunSettings, Seed, DEFAULT_REPS, MAX_REPS};
use crate::workload::params::from_flags;
use crate::workload::ColdMode;

/// Flags of `run` that a plan's top level does not take, with why.
const COMMAND_LINE_ONLY: [(&str, &str); 19] = [
    ("plan", "names the plan itself"),
    ("dry_run", "what the command does with the plan"),
    ("resume", "what the command does with the plan"),
    (
        "attempts",
        "how often a run the machine's neighbours disturbed is remade is the machine's, not the study's",
    ),
    ("scale", "the size the plan is run at, chosen per run of it"),
    (
        "workdir",
        "a [[testbed]] key, declared by the testbed settings",
    ),
    (
        "device_model",
        "a [[testbed]] key, declared by the testbed settings",
    ),
    ("mem_limit", "a [[testbed]]'s mem_limit"),
    ("mem_charge", "one workload's; refused with a plan"),
    ("out", "where results go is the command's"),
    (
        "store",
        "where results are indexed is the machine's (FSGAUGE_STORE), not the study's",
    ),
    ("json", "how the command prints"),
    ("format", "how the command prints"),
    ("quiet", "how the command prints"),
    (
        "on",
        "where the plan runs (a Slurm array, mpirun ranks) is the lab's, not the study's",
    ),
    (
        "machines",
        "how many machines an array takes at once is the lab's",
    ),
    ("wait", "what the command does with the plan"),
    ("block", "one task of an array: the array's own"),
    (
        "blocks_by_rank",
        "one rank of --on mpirun: the launch's own",
    ),
];

/// A workload and a testbed, so that a plan's top level is all a test varies.
const BODY: &str = "\n[[testbed]]\nfs = \"ext4\"\nfs_size = \"256M\"\n\n[[workload]]\nkind = \"tree\"\ndirs = 1\nfiles = 1\nfile_size = \"4K\"\n";

/// Each run setting: a value unlike its default, as a flag and as a plan's TOML; and values
/// that are out of its bounds or of the wrong form, for both. A new setting needs its line.
type Sample = (
    &'static str,
    Vec<String>,
    String,
    Vec<(Vec<String>, String)>,
);

fn samples() -> Vec<Sample> {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let max = MAX_REPS.to_string();
    let over = (MAX_REPS + 1).to_string();
    vec![
        (
            "reps",
            v(&["--reps", &max]),
            max.clone(),
            vec![
                (v(&["--reps", "0"]), "0".into()),
                (v(&["--reps", &over]), over.clone()),
                (v(&["--reps", "2.5"]), "2.5".into()),
            ],
        ),
        (
            "seed",
            v(&["--seed", &i64::MAX.to_string()]),
            i64::MAX.to_string(),
            vec![(v(&["--seed", "-1"]), "-1".into())],
        ),
        (
            "cold",
            v(&["--cold", "remount"]),
            "\"remount\"".into(),
            vec![(v(&["--cold", "icy"]), "\"icy\"".into())],
        ),
        (
            "layout",
            v(&["--layout"]),
            "true".into(),
            vec![(v(&["--layout=yes"]), "\"yes\"".into())],
        ),
        (
            "crash_points",
            v(&["--crash-points", "200"]),
            "200".into(),
            vec![(v(&["--crash-points", "-1"]), "-1".into())],
        ),
        (
            "crash_choose",
            v(&["--crash-choose", "flushes"]),
            "\"flushes\"".into(),
            vec![(v(&["--crash-choose", "often"]), "\"often\"".into())],
        ),
        (
            "crash_cache",
            v(&["--crash-cache", "keep-all"]),
            "\"keep-all\"".into(),
            vec![(v(&["--crash-cache", "some"]), "\"some\"".into())],
        ),
        (
            "crash_at",
            v(&["--crash-at", "17"]),
            "17".into(),
            vec![(v(&["--crash-at", "x"]), "\"x\"".into())],
        ),
        (
            "crash_log_limit",
            v(&["--crash-log-limit", "64M"]),
            "\"64M\"".into(),
            vec![(v(&["--crash-log-limit", "lots"]), "\"lots\"".into())],
        ),
        (
            "crash_shutdown",
            v(&["--crash-shutdown"]),
            "true".into(),
            vec![(v(&["--crash-shutdown=yes"]), "\"yes\"".into())],
        ),
        (
            "dirty_expire",
            v(&["--dirty-expire", "5min"]),
            "\"300s\"".into(),
            vec![
                (v(&["--dirty-expire", "0.5s"]), "0.5".into()),
                (v(&["--dirty-expire", "2d"]), "\"2d\"".into()),
                (v(&["--dirty-expire", "soon"]), "\"soon\"".into()),
            ],
        ),
    ]
}

/// The run settings a plan's top level `keys` (TOML lines) give, as the plan's parser reads
/// them.
fn from_plan(keys: &str) -> anyhow::Result<RunSettings> {
    settings_of(&format!("{keys}\n{BODY}"))
}

fn flags(args: &[String]) -> Result<RunSettings, clap::Error> {
    from_flags(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// What `--help` and the parser see of a flag.
fn declaration(a: &Arg) -> String {
    format!(
        "{:?} {:?} {:?} {:?} {:?} {:?}",
        a.get_help().map(ToString::to_string),
        a.get_long_help().map(ToString::to_string),
        a.get_default_values(),
        a.get_value_names(),
        a.get_action(),
        a.get_value_parser().type_id()
    )
}

fn run_command() -> Command {
    let mut cli = Cli::command();
    cli.build();
    cli.find_subcommand("run")
        .expect("fsgauge has a run command")
        .clone()
}

/// Whether a plan's top level takes `key` at all: anything but "unknown field" means it does.
fn a_plan_takes(key: &str) -> bool {
    let text = format!("{key} = {{ probe = 1 }}\n{BODY}");
    match parse(&text, "t.toml", &ParseOptions::default()) {
        Ok(_) => true,
        Err(e) => !format!("{e:#}").contains(&format!("unknown field `{key}`")),
    }
}

#[test]
fn every_flag_of_run_and_every_plan_key_is_defined_once() {
    let run = run_command();
    let settings = setting_keys();
    // Built as the command tree is, so that clap fills in the same implied defaults.
    let mut declared = RunSettings::augment_args(Command::new("settings"));
    declared.build();
    let mut walked = Vec::new();
    for arg in run.get_arguments() {
        let id = arg.get_id().as_str();
        if ["help", "version"].contains(&id) {
            continue;
        }
        walked.push(id.to_string());
        if settings.iter().any(|s| s == id) {
            let own = declared
                .get_arguments()
                .find(|a| a.get_id() == id)
                .expect("a setting key is a flag of the settings");
            assert_eq!(
                declaration(arg),
                declaration(own),
                "--{id} of `run` is declared otherwise than the run setting {id}"
            );
            continue;
        }
        assert!(
            !a_plan_takes(id),
            "a plan takes `{id}` apart from `run`'s flag of that name: read it as a run setting (a field of RunSettings) instead"
        );
        assert!(
            COMMAND_LINE_ONLY.iter().any(|(k, _)| *k == id),
            "--{id}: take it in plans as a run setting (a field of RunSettings) or name it command-line only here"
        );
    }
    for (k, why) in COMMAND_LINE_ONLY {
        assert!(
            walked.iter().any(|w| w == k),
            "{k} ({why}) is listed as a flag of run but is not one"
        );
    }
    for key in OWN_KEYS {
        assert!(
            !walked.iter().any(|w| w == key),
            "the plan's own key `{key}` is also a flag of run"
        );
        assert!(a_plan_takes(key), "`{key}` is listed as a plan key");
    }
    for key in &settings {
        assert!(
            walked.iter().any(|w| w == key),
            "the run setting {key} is no flag of run"
        );
        assert!(
            a_plan_takes(key),
            "a plan does not take the run setting {key}"
        );
    }
    assert!(!a_plan_takes("no_such_key"), "the probe finds unknown keys");
}

#[test]
fn a_run_setting_reads_the_same_from_its_flag_and_its_plan_key() {
    let samples = samples();
    let keys = setting_keys();
    assert_eq!(
        samples.iter().map(|s| s.0).collect::<Vec<_>>(),
        keys,
        "every run setting has a sample here, and only they"
    );
    // Left out: the same default on both sides.
    assert_eq!(flags(&[]).unwrap(), RunSettings::default());
    assert_eq!(from_plan("").unwrap(), RunSettings::default());
    for (key, flag, value, wrong) in samples {
        let given = flags(&flag).unwrap_or_else(|e| panic!("{flag:?}: {e}"));
        assert_ne!(given, RunSettings::default(), "{flag:?} changes nothing");
        let written = from_plan(&format!("{key} = {value}"))
            .unwrap_or_else(|e| panic!("{key} = {value}: {e:#}"));
        assert_eq!(given, written, "{flag:?} and {key} = {value}");
        for (flag, value) in wrong {
            assert!(flags(&flag).is_err(), "{flag:?} is taken");
            let e = from_plan(&format!("{key} = {value}"))
                .map(|s| format!("taken as {s:?}"))
                .unwrap_or_else(|e| format!("{e:#}"));
            assert!(e.starts_with("t.toml:1:"), "{key} = {value}: {e}");
            assert!(e.contains(&format!(": {key}: ")), "{key} = {value}: {e}");
        }
    }
}

/// The defaults a plan's runs take when neither the plan nor the command line names them,
/// and that `--help` states, are the one constant of each.
#[test]
fn the_defaults_of_a_plan_are_the_ones_the_help_states() {
    let plan = parse(BODY, "t.toml", &ParseOptions::default()).unwrap();
    assert_eq!(plan.reps, Reps::Fixed(DEFAULT_REPS));
    assert_eq!(plan.seed, Seed::IN_A_PLAN);
    assert_eq!((plan.cold, plan.layout), (ColdMode::None, false));
    let run = run_command();
    let help = |id: &str| {
        run.get_arguments()
            .find(|a| a.get_id() == id)
            .and_then(|a| a.get_help())
            .map(ToString::to_string)
            .unwrap_or_default()
    };
    assert!(
        help("seed").contains(&format!(
            "with a plan, the plan's seed, {} when it names none",
            Seed::IN_A_PLAN
        )),
        "{}",
        help("seed")
    );
    assert!(
        help("reps").contains(&format!("[default: {DEFAULT_REPS}; with a plan")),
        "{}",
        help("reps")
    );
}

/// The command line's run settings win over the plan's keys, in the plan's parser: the one
/// place they meet; a plan's `cv_target` still goes with its own `reps = "auto"`.
#[test]
fn the_flags_given_win_over_the_plan_s_keys() {
    let text = format!("reps = \"auto\"\nmax_reps = 6\nseed = 3\ncold = \"drop\"\n{BODY}");
    let with = |args: &[&str]| -> Plan {
        let opts = ParseOptions {
            settings: from_flags(args).unwrap(),
            ..Default::default()
        };
        parse(&text, "t.toml", &opts).unwrap()
    };
    let plan = with(&[]);
    assert_eq!(plan.reps, Reps::Auto { cv: 0.05, max: 6 });
    assert_eq!(
        (plan.seed, plan.cold, plan.layout),
        (3, ColdMode::Drop, false)
    );
    let plan = with(&[
        "--reps", "4", "--seed", "9", "--cold", "remount", "--layout",
    ]);
    assert_eq!(plan.reps, Reps::Fixed(4));
    assert_eq!(
        (plan.seed, plan.cold, plan.layout),
        (9, ColdMode::Remount, true)
    );
    let opts = ParseOptions {
        settings: from_flags(&["--reps", "4"]).unwrap(),
        ..Default::default()
    };
    let e = parse(&format!("max_reps = 6\n{BODY}"), "t.toml", &opts).unwrap_err();
    assert!(
        format!("{e:#}").starts_with("t.toml:1:12: max_reps: only applies with reps = \"auto\""),
        "{e:#}"
    );
}
