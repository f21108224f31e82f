//! What the machine's neighbours did to a run. A run whose phase another process disturbed by
//! dropping the kernel's caches (`drop_caches`, as every `cold = "drop"` benchmark does) or by
//! changing the host's writeback settings (`vm.dirty_*`) is made again, and its result is kept
//! aside, out of every table and finding. Both are injected with debug hooks,
//! `FSGAUGE_TEST_FOREIGN_DROPS` and `FSGAUGE_TEST_WRITEBACK_CHANGES` (a real drop would empty
//! the caches of the tests beside, a real change their writeback).
//! Every phase records the machine's CPU steal and CPU pressure, and the report's environment
//! table states them per run. A run takes nice -20 so that its neighbours take less of its CPU.
//! Needs root, loop devices and mkfs.ext4.

use std::path::Path;

use crate::support::Sandbox;

const PLAN: &str = r#"name = "disturbed"
reps = 1

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

fn jsons(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn run_plan(sb: &Sandbox, drops: &str) -> (String, std::path::PathBuf) {
    run_plan_text(sb, PLAN, drops)
}

fn run_plan_text(sb: &Sandbox, text: &str, drops: &str) -> (String, std::path::PathBuf) {
    run_plan_with(sb, text, drops, &[])
}

fn run_plan_with(
    sb: &Sandbox,
    text: &str,
    drops: &str,
    extra: &[&str],
) -> (String, std::path::PathBuf) {
    run_plan_env(sb, text, ("FSGAUGE_TEST_FOREIGN_DROPS", drops), extra)
}

/// `fsgauge run` of `text`, written as the sandbox's plan, into its `results` (returned beside
/// the command), with the debug hook `hook` (name, value) set and `extra` arguments.
fn plan_command(
    sb: &Sandbox,
    text: &str,
    hook: (&str, &str),
    extra: &[&str],
) -> (std::process::Command, std::path::PathBuf) {
    let plan = sb.path().join("plan.toml");
    std::fs::write(&plan, text).unwrap();
    let out = sb.path().join("results");
    let mut c = sb.cmd();
    c.args(["run", plan.to_str().unwrap(), "--quiet", "--out"])
        .arg(&out)
        .args(extra)
        .env(hook.0, hook.1);
    (c, out)
}

/// Runs `text` as a plan with the debug hook `hook` (name, value) set; asserts it succeeded.
fn run_plan_env(
    sb: &Sandbox,
    text: &str,
    hook: (&str, &str),
    extra: &[&str],
) -> (String, std::path::PathBuf) {
    let (mut c, out) = plan_command(sb, text, hook, extra);
    let o = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    (stderr, out)
}

fn drops_in(path: &Path) -> Vec<u64> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["foreign_cache_drops"].as_u64().unwrap_or(0))
        .collect()
}

#[test]
fn a_run_another_process_disturbed_is_made_again_and_kept_aside() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    // The first phase of the first attempt sees one foreign drop; the second attempt none.
    let (stderr, out) = run_plan(&sb, "1");
    assert!(
        stderr.contains("another process dropped the kernel's caches during phase")
            && stderr.contains("the run is made again (attempt 2 of 3)"),
        "{stderr}"
    );
    // One result, of the second attempt, saying why the first was set aside; nothing else
    // in the results directory.
    let kept = jsons(&out);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
    let path = out.join(&kept[0]);
    assert!(drops_in(&path).iter().all(|&d| d == 0));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let aside = v["set_aside"].as_array().expect("set_aside");
    assert_eq!(aside.len(), 1, "{aside:?}");
    let line = aside[0].as_str().unwrap();
    assert!(
        line.starts_with("attempt 1, started ")
            && line.contains("another process dropped the kernel's caches during phase")
            && line.contains("(1×)"),
        "{line}"
    );
}

/// Another process that changes the host's writeback settings during a phase (a benchmark
/// turning periodic writeback off; another memory-limited run's dirty thresholds) disturbs the
/// run as a cache drop does: it is made again and the first attempt is set aside, naming the
/// setting. Injected with the debug hook `FSGAUGE_TEST_WRITEBACK_CHANGES`.
#[test]
fn a_run_whose_writeback_settings_another_process_changed_is_made_again() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let (stderr, out) = run_plan_env(&sb, PLAN, ("FSGAUGE_TEST_WRITEBACK_CHANGES", "1"), &[]);
    let said = "another process changed the host's writeback settings during the phase (vm.dirty_writeback_centisecs 500 → 0)";
    assert!(
        stderr.contains(said) && stderr.contains("the run is made again (attempt 2 of 3)"),
        "{stderr}"
    );
    let kept = jsons(&out);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join(&kept[0])).unwrap()).unwrap();
    assert!(
        v["phases"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p.get("writeback_changed").is_none()),
        "{v}"
    );
    let aside = v["set_aside"].as_array().expect("set_aside");
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(aside[0].as_str().unwrap().contains(said), "{aside:?}");
}

#[test]
fn a_run_disturbed_every_time_keeps_its_last_attempt_and_says_so() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let (stderr, out) = run_plan(&sb, "1000");
    assert!(stderr.contains("in each of 3 attempts"), "{stderr}");
    assert_eq!(jsons(&out).len(), 1);
    let path = out.join(&jsons(&out)[0]);
    assert!(drops_in(&path).iter().all(|&d| d == 1));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(v["set_aside"].as_array().map(Vec::len), Some(2));
    // The report names the run that stayed disturbed.
    let o = sb
        .cmd()
        .args(["report", out.to_str().unwrap()])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(
        text.contains("plain · tree rep 0: another process dropped the kernel's caches"),
        "{text}"
    );
}

/// `--attempts N` sets how many times a disturbed run is made; 1 keeps the first with the
/// warning (a test suite beside the run, where a remake would only be disturbed again).
#[test]
fn attempts_sets_how_often_a_disturbed_run_is_made() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let (stderr, out) = run_plan_with(&sb, PLAN, "1000", &["--attempts", "1"]);
    assert!(
        stderr.contains("the run is kept (--attempts 1)"),
        "{stderr}"
    );
    assert!(!stderr.contains("made again"), "{stderr}");
    let path = out.join(&jsons(&out)[0]);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(v["set_aside"].as_array().map_or(0, Vec::len), 0, "{v}");
    let sb = Sandbox::new();
    let (stderr, out) = run_plan_with(&sb, PLAN, "1000", &["--attempts", "2"]);
    assert!(stderr.contains("in each of 2 attempts"), "{stderr}");
    let path = out.join(&jsons(&out)[0]);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(v["set_aside"].as_array().map(Vec::len), Some(1));
    // Out of range: refused before anything is made.
    let plan = sb.path().join("plan.toml");
    for bad in ["0", "11", "x"] {
        let o = sb
            .cmd()
            .args(["run", plan.to_str().unwrap(), "--attempts", bad, "--out"])
            .arg(sb.path().join("refused"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "--attempts {bad}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--attempts"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!sb.path().join("refused").exists());
    }
}

/// A run on a filesystem the plan keeps between runs would leave its files for the next
/// attempt: it is kept as it was made, with the warning, and the report names it.
#[test]
fn a_disturbed_run_on_a_kept_filesystem_is_kept_and_named() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let text = PLAN.replace("reps = 1\n", "reps = 1\nfresh = \"per-testbed\"\n");
    let (stderr, out) = run_plan_text(&sb, &text, "1");
    assert!(
        stderr.contains("the run is kept (it ages, or its filesystem is kept between runs"),
        "{stderr}"
    );
    assert!(!stderr.contains("made again"), "{stderr}");
    assert_eq!(jsons(&out).len(), 1);
    let o = sb
        .cmd()
        .args(["report", out.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(text.contains("(it was made once)"), "{text}");
}

/// The nice a run started under `start` recorded, and its filesystem's kernel threads'.
fn nice_of_a_run(sb: &Sandbox, start: i32) -> (i64, serde_json::Value) {
    use std::os::unix::process::CommandExt;
    let (mut c, out) = plan_command(sb, PLAN, ("FSGAUGE_TEST_FOREIGN_DROPS", "0"), &[]);
    // SAFETY: only setpriority, async-signal-safe, between fork and exec.
    unsafe {
        c.pre_exec(move || {
            if libc::setpriority(libc::PRIO_PROCESS, 0, start) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join(&jsons(&out)[0])).unwrap()).unwrap();
    let env = &v["environment"];
    let nice = env["nice"]
        .as_i64()
        .unwrap_or_else(|| panic!("no nice in {env}"));
    (nice, env["kernel_threads"].clone())
}

/// The one journal thread (`jbd2/loopN-8`) in a result's `kernel_threads`, and its nice.
fn journal_thread_nice(threads: &serde_json::Value) -> i64 {
    let m = threads
        .as_object()
        .unwrap_or_else(|| panic!("no kernel threads recorded: {threads}"));
    assert_eq!(m.len(), 1, "ext4 has one journal thread: {threads}");
    let (name, nice) = m.iter().next().unwrap();
    assert!(
        name.starts_with("jbd2/loop") && name.ends_with("-8"),
        "{name}"
    );
    nice.as_i64().unwrap()
}

/// A run takes nice -20 from the default 0, so that a build or a test suite beside it takes
/// less of the CPU its threads want, and records it; one started under another nice keeps it.
/// The testbed's journal thread takes the run's raised nice, and keeps the default 0 when the
/// run's nice is not raised.
#[test]
fn a_run_takes_nice_minus_20_from_0_and_keeps_a_nice_it_was_started_under() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let (nice, threads) = nice_of_a_run(&Sandbox::new(), 0);
    assert_eq!(nice, -20);
    assert_eq!(journal_thread_nice(&threads), -20);
    let (nice, threads) = nice_of_a_run(&Sandbox::new(), 5);
    assert_eq!(nice, 5);
    assert_eq!(journal_thread_nice(&threads), 0);
}

#[test]
fn an_undisturbed_run_is_made_once() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let (stderr, out) = run_plan(&sb, "0");
    assert!(!stderr.contains("dropped the kernel's caches"), "{stderr}");
    assert_eq!(jsons(&out).len(), 1);
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join(&jsons(&out)[0])).unwrap()).unwrap();
    assert!(v.get("set_aside").is_none(), "{v}");
}

#[test]
fn every_phase_records_the_machines_steal_and_cpu_pressure_and_the_report_states_them() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    // /proc/stat counts steal in 10 ms ticks: PLAN's phases of a few milliseconds may pass
    // between two and know none. 16,000 files make a create phase of about a second.
    let plan = PLAN
        .replace("files = 8\n", "files = 4000\n")
        .replace("dirs = 2\n", "dirs = 4\n");
    let plan = plan.replace("file_size = \"64K\"", "file_size = \"4K\"");
    let (_, out) = run_plan_text(&sb, &plan, "0");
    let name = &jsons(&out)[0];
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join(name)).unwrap()).unwrap();
    let phases = v["phases"].as_array().unwrap();
    assert!(
        phases.iter().any(|p| p["wall_s"].as_f64().unwrap() > 0.1),
        "no phase long enough to count steal: {v}"
    );
    for p in phases {
        let load = &p["host_load"];
        assert!(load.is_object(), "{p}");
        // /proc/stat counts in ticks of 10 ms per CPU: a phase shorter than a few of them may
        // see none, and then its steal is not known (absent, never a made-up 0).
        if p["wall_s"].as_f64().unwrap() > 0.1 {
            let steal = load["steal"].as_f64().expect("steal from /proc/stat");
            assert!((0.0..=1.0).contains(&steal), "{load}");
        }
        if std::path::Path::new("/proc/pressure/cpu").exists() {
            let pressure = load["cpu_pressure"].as_f64().expect("PSI");
            assert!((0.0..=1.0).contains(&pressure), "{load}");
        }
    }
    let o = sb
        .cmd()
        .args(["report", out.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("machine load"), "{text}");
    let steal = text
        .split("steal ")
        .nth(1)
        .unwrap_or_else(|| panic!("no steal in {text}"));
    assert!(steal.starts_with(|c: char| c.is_ascii_digit()), "{text}");
}
