//! Plans from the command line without root: dry runs, presets, and bad input refused with
//! its location before anything is made.

use std::path::Path;

use crate::support::Sandbox;
use fsgauge::lab::plan::presets::PRESETS;
use fsgauge::lab::plan::{parse, ParseOptions};
use fsgauge::workload::registry;

const PLAN: &str = r#"name = "small"
reps = 2

[[testbed]]
label = "plain"
fs = "ext4"
size = "256M"

[[testbed]]
label = "noext"
fs = "ext4"
size = "256M"
mkfs = "-O ^extent"

[[workload]]
kind = "tree"
dirs = 2
files = 4
file_size = "64K"
"#;

fn write_plan(sb: &Sandbox, text: &str) -> std::path::PathBuf {
    let p = sb.path().join("plan.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn nothing_made(sb: &Sandbox) {
    assert!(!sb.out().exists(), "results directory was created");
    let left: Vec<_> = std::fs::read_dir(sb.workdir()).unwrap().collect();
    assert!(left.is_empty(), "work directory not empty: {left:?}");
    sb.assert_clean();
}

/// The dry run is a document like every command's output: `--json` is its runs in order and
/// its estimate, `--format md` its runs as a table.
#[test]
fn dry_run_prints_every_format() {
    let sb = Sandbox::new();
    let plan = write_plan(&sb, PLAN);
    let run = |args: &[&str]| {
        let mut all = vec!["run", plan.to_str().unwrap(), "--dry-run"];
        all.extend_from_slice(args);
        sb.bench(&all).output().unwrap()
    };
    let json = crate::support::json_of(&run(&["--json"]));
    let runs = json["runs"].as_array().expect("the runs in order");
    assert_eq!(runs.len(), 2 * 2, "{json}");
    assert_eq!(runs[0]["testbed"], "plain", "{json}");
    assert_eq!(json["estimate_runs"], 4, "{json}");
    let md = String::from_utf8_lossy(&run(&["--format", "md"]).stdout).into_owned();
    assert!(md.contains("### Runs (in order)"), "{md}");
    assert_eq!(
        md.lines().filter(|l| l.contains("| plain ")).count(),
        2,
        "{md}"
    );
    sb.assert_clean();
}

#[test]
fn dry_run_prints_the_matrix_and_an_estimate() {
    let sb = Sandbox::new();
    let plan = write_plan(&sb, PLAN);
    let out = sb
        .bench(&["run", plan.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("runs (in order)"))
        .skip(1)
        .take_while(|l| !l.starts_with("estimate"))
        .collect();
    assert_eq!(runs.len(), 2 * 2, "{text}");
    // Repetitions are interleaved: rep 0 of both testbeds before rep 1.
    assert!(
        runs[0].contains("plain") && runs[0].contains("rep 0"),
        "{text}"
    );
    assert!(
        runs[1].contains("noext") && runs[1].contains("rep 0"),
        "{text}"
    );
    assert!(runs[2].contains("rep 1"), "{text}");
    assert!(text.contains("disk at the peak 256.00 MiB"), "{text}");
    assert!(text.contains("data written 2.03 MiB"), "{text}");
    nothing_made(&sb);
}

#[test]
fn scale_multiplies_the_declared_fields() {
    let sb = Sandbox::new();
    let plan = write_plan(&sb, PLAN);
    let out = sb
        .bench(&[
            "run",
            plan.to_str().unwrap(),
            "--dry-run",
            "--scale",
            "1000",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // file_size 64K x 1000 = 64000K; tree keeps 2 dirs x 4 files; testbeds grow to fit 500M.
    assert!(text.contains("\"file_size\":65536000"), "{text}");
    assert!(text.contains("\"files\":4"), "{text}");
    assert!(text.contains("grown from 256M to 576M"), "{text}");
}

fn refused(text: &str, expect_at: &str, expect_msg: &str) {
    let sb = Sandbox::new();
    let plan = write_plan(&sb, text);
    let out = sb.bench(&["run", plan.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let at = format!("{}:{expect_at}:", plan.display());
    assert!(err.contains(&at), "expected location {at} in: {err}");
    assert!(
        err.contains(expect_msg),
        "expected {expect_msg:?} in: {err}"
    );
    nothing_made(&sb);
}

#[test]
fn malformed_toml_is_refused_with_its_line() {
    refused(
        &PLAN.replace(
            "[[testbed]]\nlabel = \"noext\"",
            "[[testbed]\nlabel = \"noext\"",
        ),
        "9",
        "",
    );
}

#[test]
fn unknown_kinds_are_refused_listing_the_kinds() {
    refused(
        &PLAN.replace("kind = \"tree\"", "kind = \"mdtest\""),
        "16:8",
        "allowed: \"tree\"",
    );
}

#[test]
fn wrong_types_are_refused_inside_the_workload() {
    refused(
        &PLAN.replace("files = 4", "files = \"four\""),
        "18:9",
        "field `files`: invalid type",
    );
    refused(&PLAN.replace("reps = 2", "reps = true"), "2:8", "\"auto\"");
    refused(
        &PLAN.replace("files = 4", "files = 4\nfsync = \"always\""),
        "19:9",
        "none",
    );
}

#[test]
fn unknown_fields_are_refused() {
    refused(
        &PLAN.replace("mkfs = ", "mkfs_options = "),
        "13:1",
        "mkfs_options",
    );
    refused(
        &PLAN.replace("dirs = 2", "dir = 2"),
        "17:1",
        "expected one of",
    );
}

#[test]
fn a_matrix_that_does_not_fit_on_the_disk_is_refused() {
    refused(
        &PLAN.replace("size = \"256M\"\nmkfs", "size = \"900T\"\nmkfs"),
        "12:8",
        "free",
    );
    refused(
        &PLAN.replace("file_size = \"64K\"", "file_size = \"64M\""),
        "7:8",
        "needs about",
    );
}

#[test]
fn age_table_errors_point_at_the_field() {
    refused(
        &format!("{PLAN}\n[age]\nusage = 75\nmode = \"sideways\"\n"),
        "23:8",
        "[age] age field `mode`",
    );
}

/// `[age]` ages each run's fresh filesystem before its workload: the aging checkpoint comes
/// first among the run's phases, with the usage it reached, then the workload's own phases.
/// `run PLAN --layout` as root records each run's layout, as `layout = true` in the plan does.
#[test]
fn run_layout_flag_records_the_layout_on_testbeds() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let text = PLAN.replace("reps = 2", "reps = 1");
    let plan = write_plan(&sb, &text);
    let out = sb
        .bench(&["run", plan.to_str().unwrap(), "--quiet", "--layout"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files: Vec<_> = std::fs::read_dir(sb.out())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 2, "one run per testbed");
    for f in files {
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        assert!(
            doc["layout"].is_object(),
            "{f:?} has no layout: {}",
            doc["layout"]
        );
    }
    sb.assert_clean();
}

#[test]
fn age_table_conditions_every_run_before_its_workload() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let text = format!(
        "{}\n[age]\nmode = \"fill\"\nusage = [40.0]\ndist = \"fixed:256K\"\n",
        PLAN.replace("reps = 2", "reps = 1")
    );
    let plan = write_plan(&sb, &text);
    let out = sb
        .bench(&["run", plan.to_str().unwrap(), "--quiet"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files: Vec<_> = std::fs::read_dir(sb.out())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 2, "one run per testbed");
    for f in files {
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        let names: Vec<&str> = doc["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["age-40", "create", "delete"], "{f:?}");
        let usage = doc["phases"][0]["extra"]["usage_pct"].as_f64().unwrap();
        assert!((usage - 40.0).abs() <= 1.0, "aged to {usage}%");
        assert_eq!(doc["workload"]["kind"], "tree");
    }
    sb.assert_clean();
}

#[test]
fn presets_list_only_runnable_ones_and_show_prints_the_plan() {
    let sb = Sandbox::new();
    let out = sb.cmd().arg("presets").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success());
    let (runnable, waiting) = text.split_once("not runnable").unwrap_or((&text, ""));
    for p in PRESETS {
        let missing: Vec<_> = p
            .kinds()
            .into_iter()
            .filter(|k| registry::find(k).is_none())
            .collect();
        let listed = runnable
            .lines()
            .any(|l| l.split_whitespace().next() == Some(p.name));
        assert_eq!(
            listed,
            missing.is_empty(),
            "{} listed as runnable: {listed}, missing kinds {missing:?}\n{text}",
            p.name
        );
        if !missing.is_empty() {
            assert!(waiting.contains(p.name), "{text}");
        }
    }
    assert!(runnable.contains("quick") && runnable.contains("lowmem"));
    let show = sb
        .cmd()
        .args(["presets", "show", "lowmem"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&show.stdout),
        PRESETS.iter().find(|p| p.name == "lowmem").unwrap().toml
    );
    let bad = sb.cmd().args(["presets", "show", "nope"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    // A preset whose kinds are missing is refused by run, naming them.
    if let Some(p) = PRESETS.iter().find(|p| !p.runnable()) {
        let out = sb.bench(&["run", p.name, "--dry-run"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("does not have"));
    }
}

/// A directory named like a preset (its results folder, say) does not hide the preset, and a
/// directory given as a plan is refused as such.
#[test]
fn a_directory_named_like_a_preset_runs_the_preset() {
    let sb = Sandbox::new();
    let here = sb.path().join("here");
    std::fs::create_dir_all(here.join("quick")).unwrap();
    std::fs::create_dir_all(here.join("results")).unwrap();
    let dry_run = |plan: &str| {
        sb.cmd()
            .current_dir(&here)
            .args(["run", plan, "--dry-run"])
            .output()
            .unwrap()
    };
    let out = dry_run("quick");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("plan quick"), "{stdout}");
    let out = dry_run("results");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "results is a directory, not a plan; give a plan file (TOML) or a preset name (quick, "
        ),
        "{stderr}"
    );
}

/// `run` without a plan runs the quick preset, even where a file named `quick` is here (it was
/// read as the plan).
#[test]
fn run_without_a_plan_runs_the_quick_preset_whatever_files_are_here() {
    let sb = Sandbox::new();
    let here = sb.path().join("here");
    std::fs::create_dir_all(&here).unwrap();
    std::fs::write(here.join("quick"), "not a plan [").unwrap();
    let out = sb
        .cmd()
        .current_dir(&here)
        .args(["run", "--dry-run"])
        .output()
        .unwrap();
    let said = [&out.stdout, &out.stderr].map(|b| String::from_utf8_lossy(b).into_owned());
    assert!(
        out.status.success() && said[0].starts_with("plan quick (preset quick)"),
        "{said:?}"
    );
}

/// Every shipped preset parses; its workloads are checked against the registry where their
/// kind exists, and the rest of the plan (testbeds, reps, cold...) is validated with those
/// workloads left out.
#[test]
fn every_shipped_preset_is_a_valid_plan_for_the_registered_kinds() {
    let opts = ParseOptions {
        scale: None,
        workdir: Some(std::env::temp_dir()),
        ..Default::default()
    };
    for p in PRESETS {
        // The whole plan, with the preset it extends merged in.
        let whole = p
            .plan_text()
            .unwrap_or_else(|e| panic!("preset {}: {e:#}", p.name));
        let mut table: toml::Table = whole
            .parse()
            .unwrap_or_else(|e| panic!("preset {}: {e}", p.name));
        let workloads = table["workload"].as_array().unwrap().clone();
        assert!(!workloads.is_empty(), "preset {} has no workload", p.name);
        let mut kept = Vec::new();
        for w in workloads {
            let kind = w["kind"].as_str().unwrap();
            if let Some(k) = registry::find(kind) {
                let mut params = w.as_table().unwrap().clone();
                params.remove("kind");
                params.remove("label"); // the entry's label, not a parameter
                params.remove("keep_image"); // the image cache's switch, not a parameter
                let json = serde_json::to_value(&params).unwrap();
                let wl = (k.build)(json)
                    .unwrap_or_else(|e| panic!("preset {} workload {kind}: {e}", p.name));
                wl.validate()
                    .unwrap_or_else(|e| panic!("preset {} workload {kind}: {e}", p.name));
                kept.push(w);
            }
        }
        if kept.is_empty() {
            kept.push(toml::Value::Table(toml::toml! { kind = "tree"
            dirs = 1
            files = 1
            file_size = "4K" }));
        }
        table.insert("workload".into(), toml::Value::Array(kept));
        let text = toml::to_string(&table).unwrap();
        parse(&text, p.name, &opts).unwrap_or_else(|e| panic!("preset {}: {e:#}", p.name));
        if p.runnable() {
            parse(p.toml, p.name, &opts).unwrap_or_else(|e| panic!("preset {}: {e:#}", p.name));
        }
    }
}

#[test]
fn the_quick_preset_is_what_run_runs_by_default() {
    let sb = Sandbox::new();
    let out = sb.bench(&["run", "--dry-run"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("plan quick (preset quick)"), "{text}");
    assert!(
        text.contains("\"dirs\":8")
            && text.contains("\"files\":500")
            && text.contains("\"fsync\":\"file\"")
            && text.contains("ext4-journal           ext4 1G -o data=journal"),
        "{text}"
    );
    assert!(Path::new(&sb.workdir())
        .read_dir()
        .unwrap()
        .next()
        .is_none());
}

/// Bytes of memory the kernel says are available now, rounded up to whole MiB.
fn mem_available_mib() -> u64 {
    let s = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("MemAvailable in /proc/meminfo");
    kib.div_ceil(1024)
}

#[test]
fn a_ram_disk_larger_than_the_memory_available_is_refused() {
    // tmpfs may offer more room than there is memory: the check counts MemAvailable. A RAM
    // journal always lives on /dev/shm (a RAM-backed image goes to --workdir, which the
    // sandbox puts on disk).
    let mib = mem_available_mib();
    let text = PLAN.replace(
        "size = \"256M\"\nmkfs",
        &format!("size = \"256M\"\njournal = \"ram:{mib}M\"\nmkfs"),
    );
    refused(&text, "13:11", "MemAvailable");
    // --dry-run refuses it as well, and makes nothing either.
    let sb = Sandbox::new();
    let plan = write_plan(&sb, &text);
    let out = sb
        .bench(&["run", "--dry-run", plan.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("tmpfs: RAM"), "{err}");
    nothing_made(&sb);
}

/// The runs `--dry-run` lists (testbed, workload, rep, hash), and the whole output.
fn dry_run_runs(sb: &Sandbox, plan: &str) -> (Vec<String>, String) {
    let out = sb.bench(&["run", plan, "--dry-run"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{plan}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = text
        .lines()
        .skip_while(|l| !l.starts_with("runs (in order)"))
        .skip(1)
        .take_while(|l| !l.starts_with("estimate"))
        .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        .collect();
    (runs, text)
}

/// A plan file extends a preset and states only what it changes; `presets show` prints an
/// extending preset whole, as a plan that runs as the preset does.
#[test]
fn a_plan_extends_a_preset_with_only_its_changes() {
    let sb = Sandbox::new();
    let plan = write_plan(
        &sb,
        "# Mine: lowmem as published, two configurations, fewer files.\nextends = \"lowmem-as-published\"\nname = \"mine\"\ndrop_testbeds = [\"ordered-noext-dalloc\"]\ndrop_questions = [\"extents-delete-large\", \"extents-delete-many\"]\n\n[[workload]]\nlabel = \"many\"\nfiles = 500\n",
    );
    let (runs, text) = dry_run_runs(&sb, plan.to_str().unwrap());
    assert!(text.starts_with("plan mine ("), "{text}");
    // 2 testbeds x 2 workloads x 3 repetitions (reps = "auto" from lowmem).
    assert_eq!(runs.len(), 12, "{text}");
    assert!(
        text.contains("tree block=1M dirs=14 file_size=52K files=500 fsync=none"),
        "{text}"
    );
    assert!(
        text.contains("ordered-ext-nodalloc   ext4 4G -o data=ordered,nodelalloc,barrier=0"),
        "{text}"
    );
    // What show prints runs as the preset.
    let shown = sb
        .cmd()
        .args(["presets", "show", "lowmem-as-published"])
        .output()
        .unwrap();
    assert!(shown.status.success());
    let shown = String::from_utf8(shown.stdout).unwrap();
    let preset = PRESETS
        .iter()
        .find(|p| p.name == "lowmem-as-published")
        .unwrap();
    let header = &preset.toml[..preset.toml.find("\nextends").unwrap() + 1];
    assert!(shown.starts_with(header), "{shown}");
    assert!(!shown.lines().any(|l| l.starts_with("extends")), "{shown}");
    // The testbeds' shared settings once, the seed's defaults with the published ones over them.
    assert!(shown.contains("\n[testbed_defaults]\nfs = \"ext4\"\nfs_size = \"4G\"\nmount_opts = \"data=ordered,barrier=0\"\nmem_limit = \"96M\"\ndevice_model = \"deskstar-7k250\"\ndevice_offset = \"0\"\n\n[[testbed]]\nlabel = \"ordered-ext-dalloc\"\n\n"), "{shown}");
    let copy = sb.path().join("copy.toml");
    std::fs::write(&copy, &shown).unwrap();
    let (from_copy, _) = dry_run_runs(&sb, copy.to_str().unwrap());
    let (from_preset, _) = dry_run_runs(&sb, "lowmem-as-published");
    assert_eq!(from_copy.len(), 18);
    assert_eq!(from_copy, from_preset);
    nothing_made(&sb);
}

/// An error in a plan that extends a preset points at the line at fault, in the plan or in
/// the preset; an unknown preset is refused at `extends`.
#[test]
fn errors_of_a_plan_that_extends_point_into_the_plan_or_the_preset() {
    let head =
        "extends = \"journal-size\"\nname = \"mine\"\n\n[[testbed]]\nlabel = \"journal-16M\"\n";
    refused(&format!("{head}fs_size = \"1M\"\n"), "6:11", "fs_size: ");
    refused(
        "name = \"mine\"\nextends = \"lowmem-as-publishd\"\n",
        "2:11",
        "extends: no preset \"lowmem-as-publishd\"; extends names a built-in preset (quick, lowmem,",
    );
    // ext2 has no journal: refused at the journal the preset gives the testbed.
    let preset = PRESETS.iter().find(|p| p.name == "journal-size").unwrap();
    let line = preset
        .toml
        .lines()
        .position(|l| l == "journal = \"ram:16M\"")
        .unwrap()
        + 1;
    let sb = Sandbox::new();
    let plan = write_plan(&sb, &format!("{head}fs = \"ext2\"\n"));
    let out = sb.bench(&["run", plan.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "preset journal-size:{line}:11: journal: --journal"
        )),
        "{err}"
    );
    nothing_made(&sb);
}
