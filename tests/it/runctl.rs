//! Run control and provenance: the environment every result records and `compare` naming what
//! differs. The testbed tests need root, loop devices and mkfs.ext4 (they skip with a printed
//! reason otherwise; fail under CI); the `--dir` ones need nothing.

use crate::support::{assert_schema, have_fs, json_of, Sandbox};
use serde_json::Value;

fn dir(sb: &Sandbox) -> std::path::PathBuf {
    let d = sb.path().join("target");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `bench tio --dir D ARGS --json --out OUT` in this sandbox: its result document.
fn tio_dir(sb: &Sandbox, args: &[&str]) -> Value {
    let d = dir(sb);
    let out = sb
        .cmd()
        .args(["bench", "tio", "--dir"])
        .arg(&d)
        .args(args)
        .args(["--json", "--out"])
        .arg(sb.out())
        .output()
        .unwrap();
    json_of(&out)
}

fn small_tio(sb: &Sandbox) -> Value {
    tio_dir(
        sb,
        &[
            "--mode",
            "seqwrite",
            "--block",
            "4K",
            "--file-size",
            "64K",
            "--threads",
            "1",
        ],
    )
}

fn proc_sys(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/vm/{name}"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn a_result_records_sysctls_cpu_cmdline_and_build() {
    let sb = Sandbox::new();
    let r = small_tio(&sb);
    assert_schema(&r);
    let env = &r["environment"];
    for k in [
        "dirty_ratio",
        "dirty_background_bytes",
        "swappiness",
        "min_free_kbytes",
    ] {
        assert_eq!(env["sysctl"][format!("vm.{k}")], proc_sys(k), "vm.{k}");
    }
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap();
    assert_eq!(env["kernel_cmdline"], cmdline.trim());
    assert_eq!(env["build"]["version"], env!("CARGO_PKG_VERSION"));
    let commit = env["build"]["commit"].as_str().unwrap();
    assert!(
        commit == "unknown"
            || (commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{commit}"
    );
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    if let Some(model) = cpuinfo.lines().find_map(|l| {
        l.strip_prefix("model name")
            .map(|v| v.trim_start_matches([' ', '\t', ':']))
    }) {
        assert_eq!(env["cpu_model"], model.trim());
    }
}

#[test]
fn a_loop_testbed_records_its_queue_backing_device_and_mkfs() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .bench(&["bench", "tio", "--fs", "ext4", "--fs-size", "64M"])
        .args([
            "--mode",
            "seqwrite",
            "--block",
            "4K",
            "--file-size",
            "64K",
            "--threads",
            "1",
        ])
        .arg("--json")
        .output()
        .unwrap();
    let r = json_of(&out);
    sb.assert_clean();
    assert_schema(&r);
    let env = &r["environment"];
    let dev = env["device"]["name"].as_str().unwrap();
    assert!(dev.starts_with("loop"), "{dev}");
    assert!(env["device"]["scheduler"].is_string(), "{env}");
    assert!(env["device"]["read_ahead_kb"].is_u64(), "{env}");
    assert_eq!(env["loop_dio"], r["testbed"]["loop_direct_io"]);
    let mkfs = env["mkfs_version"].as_str().unwrap();
    assert!(mkfs.starts_with("mke2fs"), "{mkfs}");
    // The image lives in the sandbox's work directory: its filesystem's block device, if it has
    // one, is the backing device.
    let st = std::os::unix::fs::MetadataExt::dev(&std::fs::metadata(sb.workdir()).unwrap());
    if libc_major(st) != 0 {
        let b = env["backing_device"]["name"].as_str().unwrap();
        assert!(
            std::path::Path::new("/sys/block")
                .join(b)
                .join("queue")
                .is_dir(),
            "{b}"
        );
        assert!(env["backing_device"]["nr_requests"].is_u64(), "{env}");
    } else {
        assert!(env["backing_device"].is_null(), "{env}");
    }
}

fn libc_major(dev: u64) -> u64 {
    // The glibc encoding of dev_t (gnu_dev_major).
    ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff)
}

#[test]
fn compare_names_a_differing_sysctl_before_the_numbers() {
    let sb = Sandbox::new();
    let r = small_tio(&sb);
    let base = sb.path().join("base.json");
    let new = sb.path().join("new.json");
    std::fs::write(&base, serde_json::to_string(&r).unwrap()).unwrap();
    let was = r["environment"]["sysctl"]["vm.dirty_ratio"]
        .as_str()
        .unwrap()
        .to_string();
    let other = if was == "7" { "13" } else { "7" };
    let mut changed = r.clone();
    changed["environment"]["sysctl"]["vm.dirty_ratio"] = other.into();
    std::fs::write(&new, serde_json::to_string(&changed).unwrap()).unwrap();

    let out = sb
        .cmd()
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = format!("vm.dirty_ratio {was} → {other}");
    let at = text
        .find(&line)
        .unwrap_or_else(|| panic!("{line:?} not in:\n{text}"));
    let table = text.find("Comparison").unwrap_or(text.len());
    assert!(
        at < table,
        "the difference comes before the numbers:\n{text}"
    );
    // Only what differs is named.
    assert!(!text.contains("vm.swappiness"), "{text}");

    let out = sb
        .cmd()
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(
        v["environment"],
        serde_json::json!([{ "field": "vm.dirty_ratio", "base": [was], "new": [other] }])
    );

    // Equal environments: nothing is listed.
    let out = sb
        .cmd()
        .arg("compare")
        .arg(&base)
        .arg(&base)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("differ in"));
}

#[test]
fn a_time_based_run_lasts_the_asked_time_wrapping_around_the_file() {
    let sb = Sandbox::new();
    for mode in ["randread", "seqwrite"] {
        let r = tio_dir(
            &sb,
            &[
                "--mode",
                mode,
                "--block",
                "4K",
                "--file-size",
                "256K",
                "--threads",
                "2",
                "--fsync",
                "none",
                "--time",
                "2s",
                "--time-based",
            ],
        );
        let p = &r["phases"][0];
        let wall = p["wall_s"].as_f64().unwrap();
        // ± one series interval (1 s).
        assert!((wall - 2.0).abs() <= 1.0, "{mode}: wall {wall}");
        assert!(wall >= 2.0, "{mode}: stopped before its time: {wall}");
        // 2 threads × 64 blocks is done in a few milliseconds: the rest went around again.
        let ops = p["ops"].as_u64().unwrap();
        assert!(ops > 2 * 64 * 4, "{mode}: only {ops} requests in {wall} s");
        assert_eq!(p["bytes"].as_u64().unwrap(), ops * 4096, "{mode}");
        assert_eq!(p["extra"]["complete"], 1.0, "{mode}");
        assert_eq!(r["workload"]["params"]["time_based"], true);
    }
}

#[test]
fn a_time_based_io_uring_run_lasts_the_asked_time() {
    let sb = Sandbox::new();
    let r = randread(
        &sb,
        "1",
        &[
            "--engine",
            "io_uring",
            "--iodepth",
            "4",
            "--engine-fallback",
            "--time",
            "1500ms",
            "--time-based",
        ],
    );
    let p = &r["phases"][0];
    let wall = p["wall_s"].as_f64().unwrap();
    assert!((1.5..=2.5).contains(&wall), "wall {wall}");
    assert!(p["ops"].as_u64().unwrap() > 64 * 4);
}

#[test]
fn clients_time_based_runs_for_its_time_and_refuses_loops() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let out = sb
        .cmd()
        .args(["bench", "clients", "--dir"])
        .arg(&d)
        .args([
            "--clients",
            "1",
            "--time",
            "1s",
            "--time-based",
            "--cpus",
            "0",
            "--json",
            "--out",
        ])
        .arg(sb.out())
        .output()
        .unwrap();
    let r = json_of(&out);
    let wall = r["phases"].as_array().unwrap().last().unwrap()["wall_s"]
        .as_f64()
        .unwrap();
    assert!((1.0..=2.0).contains(&wall), "wall {wall}");
    assert_eq!(r["workload"]["params"]["cpus"], serde_json::json!([0]));
    let out = sb
        .cmd()
        .args(["bench", "clients", "--dir"])
        .arg(&d)
        .args([
            "--clients",
            "1",
            "--time",
            "1s",
            "--loops",
            "2",
            "--time-based",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--loops"));
}

/// `bench tio --dir` with `args`: its exit code and stderr.
fn tio_fails(sb: &Sandbox, args: &[&str]) -> (Option<i32>, String) {
    let d = dir(sb);
    let out = sb
        .cmd()
        .args(["bench", "tio", "--dir"])
        .arg(&d)
        .args([
            "--mode",
            "randread",
            "--block",
            "4K",
            "--file-size",
            "64K",
            "--threads",
            "1",
        ])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_run_control_is_refused_with_the_reason() {
    let sb = Sandbox::new();
    let (code, err) = tio_fails(&sb, &["--time-based"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--time-based needs --time"), "{err}");
    let (code, err) = tio_fails(&sb, &["--cpus", ""]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("empty"), "{err}");
    let (code, err) = tio_fails(&sb, &["--cpus", "0,100000"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("CPU 100000 does not exist"), "{err}");
    // Nothing was left in the directory.
    assert_eq!(std::fs::read_dir(dir(&sb)).unwrap().count(), 0);
}

#[test]
fn pinned_workers_record_their_cpus() {
    let sb = Sandbox::new();
    let r = tio_dir(
        &sb,
        &[
            "--mode",
            "randread",
            "--block",
            "4K",
            "--file-size",
            "64K",
            "--threads",
            "2",
            "--cpus",
            "0",
        ],
    );
    assert_eq!(r["workload"]["params"]["cpus"], serde_json::json!([0]));
    assert_eq!(r["phases"][0]["ops"], 2 * 16);
}

#[test]
fn every_second_of_the_series_carries_its_latency_and_the_seconds_add_up() {
    let sb = Sandbox::new();
    let r = randread(&sb, "2", &["--time", "2500ms", "--time-based"]);
    assert_schema(&r);
    for p in r["phases"].as_array().unwrap() {
        let series = p["series"].as_array().unwrap();
        assert!(!series.is_empty(), "{}: no series", p["name"]);
        let (mut ops, mut bytes, mut counted) = (0, 0, 0);
        for s in series {
            ops += s["ops"].as_u64().unwrap();
            bytes += s["bytes"].as_u64().unwrap();
            if s["ops"].as_u64().unwrap() == 0 {
                continue;
            }
            let l = &s["latency"];
            assert_eq!(l["count"], s["ops"], "{}: second {}", p["name"], s["t"]);
            counted += l["count"].as_u64().unwrap();
            let q = |k: &str| l[k].as_u64().unwrap();
            assert!(q("p50_ns") <= q("p99_ns") && q("p99_ns") <= q("p999_ns"));
            assert!(
                q("p999_ns") <= q("max_ns")
                    && q("max_ns") <= p["latency"]["max_ns"].as_u64().unwrap()
            );
        }
        assert_eq!(ops, p["ops"].as_u64().unwrap(), "{}", p["name"]);
        assert_eq!(bytes, p["bytes"].as_u64().unwrap(), "{}", p["name"]);
        assert_eq!(
            counted,
            p["latency"]["count"].as_u64().unwrap(),
            "{}",
            p["name"]
        );
    }
    let measured = &r["phases"].as_array().unwrap().last().unwrap()["series"];
    assert!(measured.as_array().unwrap().len() >= 3, "{measured}");
}

/// A 4K random read of a 256K file on `threads` workers, with `extra` flags.
fn randread(sb: &Sandbox, threads: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "--mode",
        "randread",
        "--block",
        "4K",
        "--file-size",
        "256K",
        "--threads",
        threads,
    ];
    args.extend_from_slice(extra);
    tio_dir(sb, &args)
}

/// A time-based random read with a ramp, cut into 250 ms intervals.
fn ramped(sb: &Sandbox, extra: &[&str]) -> Value {
    let mut args = vec!["--time", "1500ms", "--time-based", "--interval", "250ms"];
    args.extend_from_slice(extra);
    randread(sb, "2", &args)
}

#[test]
fn an_interval_cuts_the_series_and_a_ramp_comes_off_every_figure() {
    let sb = Sandbox::new();
    let r = ramped(&sb, &["--ramp", "500ms"]);
    assert_schema(&r);
    let p = r["phases"].as_array().unwrap().last().unwrap();
    assert_eq!(p["interval_s"], 0.25);
    assert_eq!(p["ramp_s"], 0.5);
    // The phase ran the ramp plus its time: 2 s, 8 intervals (a 9th holds the last few
    // requests when the deadline falls just past a boundary).
    let series = p["series"].as_array().unwrap();
    assert!((8..=9).contains(&series.len()), "{}", series.len());
    let wall = p["wall_s"].as_f64().unwrap();
    assert!(
        (wall - 1.5).abs() < 0.25,
        "measured time {wall} (the ramp left out)"
    );
    for (i, s) in series.iter().enumerate() {
        assert!(
            (s["t"].as_f64().unwrap() - 0.25 * i as f64).abs() < 1e-9,
            "{s}"
        );
        assert_eq!(s["ramp"].as_bool().unwrap_or(false), i < 2, "{s}");
    }
    // Totals minus the ramp's are the phase's figures, exactly.
    let sum = |key: &str, ramp: bool| -> u64 {
        series
            .iter()
            .filter(|s| s["ramp"].as_bool().unwrap_or(false) == ramp)
            .map(|s| s[key].as_u64().unwrap())
            .sum()
    };
    let totals = &p["ramp_totals"];
    assert_eq!(totals["ops"].as_u64().unwrap(), sum("ops", true));
    assert_eq!(totals["bytes"].as_u64().unwrap(), sum("bytes", true));
    assert_eq!(p["ops"].as_u64().unwrap(), sum("ops", false));
    assert_eq!(p["bytes"].as_u64().unwrap(), sum("bytes", false));
    assert!(totals["ops"].as_u64().unwrap() > 0);
    assert_eq!(p["latency"]["count"], p["ops"]);
    assert_eq!(totals["latency"]["count"], totals["ops"]);
    assert_eq!(p["op_stats"]["read"]["count"], p["ops"]);
    let rate = p["ops_per_s"].as_f64().unwrap();
    assert!((rate - p["ops"].as_f64().unwrap() / wall).abs() < 1e-6 * rate);
    // The report plots latency over time with the ramp shaded.
    let html = sb.path().join("r.html");
    let out = sb
        .cmd()
        .arg("report")
        .arg(sb.out())
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(
        html.contains("latency over time (first repetition)"),
        "no latency plot"
    );
    // Shaded in both plots over time: throughput and latency.
    assert!(
        html.matches("ramp (excluded)").count() >= 2,
        "ramp not marked in both"
    );
    assert!(html.contains("p99.9"), "percentile lines");
}

#[test]
fn one_interval_has_the_phases_own_percentiles() {
    let sb = Sandbox::new();
    let r = randread(
        &sb,
        "1",
        &["--time", "400ms", "--time-based", "--interval", "1s"],
    );
    let p = r["phases"].as_array().unwrap().last().unwrap();
    let series = p["series"].as_array().unwrap();
    assert_eq!(series.len(), 1, "{series:?}");
    for k in ["count", "p50_ns", "p99_ns", "p999_ns", "max_ns", "min_ns"] {
        assert_eq!(series[0]["latency"][k], p["latency"][k], "{k}");
    }
    // The default interval is left out of the result.
    assert!(p.get("interval_s").is_none(), "{p}");
}

#[test]
fn bad_intervals_and_ramps_are_refused_with_the_reason() {
    let sb = Sandbox::new();
    for (args, want) in [
        (&["--interval", "0s"][..], "1ms to 1h"),
        (&["--ramp", "300ms"][..], "not a whole number of --interval"),
        (&["--ramp", "0s"][..], "longer than zero"),
        (
            &["--time", "1s", "--ramp", "2s"][..],
            "not shorter than --time",
        ),
    ] {
        let (code, err) = tio_fails(&sb, args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // Work that ends inside the ramp measured nothing: exit 2 after the run, nothing kept.
    let (code, err) = tio_fails(&sb, &["--ramp", "5s"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("inside its --ramp 5.00 s"), "{err}");
    assert!(!sb.out().exists() || std::fs::read_dir(sb.out()).unwrap().count() == 0);
    assert_eq!(std::fs::read_dir(dir(&sb)).unwrap().count(), 0);
}

#[test]
fn the_exerciser_runs_for_its_time_with_a_ramp() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let out = sb
        .cmd()
        .args(["exercise", "--dir"])
        .arg(&d)
        .args([
            "--ops",
            "10",
            "--time",
            "1s",
            "--time-based",
            "--ramp",
            "500ms",
            "--interval",
            "250ms",
            "--json",
            "--out",
        ])
        .arg(sb.out())
        .output()
        .unwrap();
    let r = json_of(&out);
    let p = &r["phases"][0];
    // --time-based: --ops 10 does not end it; it ran the ramp plus 1 s.
    assert!(p["ops"].as_u64().unwrap() > 10, "{p}");
    let wall = p["wall_s"].as_f64().unwrap();
    // At least its time; how much longer depends on how busy the machine is (an operation in
    // flight at the deadline finishes), so only an end that never came is a failure.
    assert!((0.95..10.0).contains(&wall), "{wall}");
    assert_eq!(p["ramp_s"], 0.5);
    assert!(p["ramp_totals"]["ops"].as_u64().unwrap() > 0);
}

#[test]
fn plan_keys_interval_and_ramp_are_checked_at_their_line() {
    let sb = Sandbox::new();
    let plan = sb.path().join("p.toml");
    std::fs::write(
        &plan,
        "name = \"r\"\n[[testbed]]\nfs = \"ext4\"\nsize = \"256M\"\n[[workload]]\nkind = \"tio\"\nmode = \"randread\"\nfile_size = \"64K\"\ntime = \"1s\"\ntime_based = true\ninterval = \"500ms\"\nramp = \"700ms\"\n",
    )
    .unwrap();
    let out = sb
        .bench(&["run", "--dry-run", plan.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{}:12:8", plan.display())), "{err}");
    assert!(err.contains("not a whole number of --interval"), "{err}");
}
