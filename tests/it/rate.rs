//! Rate limits (`--rate-iops`, `--rate`, `--rate-per`) on tio and clients: the achieved rate,
//! latency from the scheduled time as well as from submission, "rate not reached", and bad
//! input refused. The `--dir` tests need nothing; the stalled-device test needs root, loop
//! devices, mkfs.ext4 and fsfreeze (it skips with a printed reason otherwise; fails under CI).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{assert_refused, assert_schema, have_fs, have_program, json_of, Sandbox};
use serde_json::Value;

fn dir(sb: &Sandbox) -> PathBuf {
    let d = sb.path().join("target");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `fsgauge bench KIND --dir D ARGS --json`: the output.
fn bench_in(sb: &Sandbox, kind: &str, d: &Path, args: &[&str]) -> std::process::Output {
    sb.cmd()
        .args(["bench", kind, "--quiet", "--dir"])
        .arg(d)
        .args(args)
        .args(["--json", "--out"])
        .arg(sb.out())
        .output()
        .unwrap()
}

const RANDREAD: [&str; 8] = [
    "--mode",
    "randread",
    "--block",
    "4K",
    "--file-size",
    "4M",
    "--threads",
    "1",
];

/// RANDREAD on two threads, time-based for `time`, then `extra`.
fn randread_2_threads<'a>(time: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = RANDREAD.to_vec();
    args[7] = "2";
    args.extend(["--time", time, "--time-based"]);
    args.extend(extra);
    args
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Every worker of `phase` achieved its asked rate within 1 %, and asked `asked`.
fn every_worker_reached(phase: &Value, asked: f64, unit: &str) {
    let rate = &phase["rate"];
    assert_eq!(rate["unit"], unit, "{rate}");
    for w in rate["workers"].as_array().unwrap() {
        assert_eq!(f(&w["asked"]), asked, "{w}");
        let got = f(&w["achieved"]);
        assert!(
            (got - asked).abs() <= 0.01 * asked,
            "worker {} achieved {got} of {asked}",
            w["worker"]
        );
    }
}

/// Scheduled latency is there for the phase, its primary kind and every second with
/// operations, and counts what the submission latency counts.
fn scheduled_latency_counts_every_request(phase: &Value, kind: &str) {
    let s = &phase["scheduled_latency"];
    assert_eq!(s["count"], phase["latency"]["count"], "{s}");
    assert_eq!(
        phase["op_stats"][kind]["scheduled_latency"]["count"],
        s["count"]
    );
    let mut per_second = 0;
    for p in phase["series"].as_array().unwrap() {
        if u(&p["ops"]) > 0 {
            assert_eq!(
                p["scheduled_latency"]["count"], p["ops"],
                "second {}",
                p["t"]
            );
            per_second += u(&p["ops"]);
        }
    }
    assert_eq!(per_second, u(&phase["ops"]));
    // From the due time is never shorter than from submission (the request waits for its
    // due time before it is submitted).
    for k in ["min_ns", "p50_ns", "p99_ns", "max_ns"] {
        assert!(
            u(&s[k]) >= u(&phase["latency"][k]),
            "{k}: {s} vs {}",
            phase["latency"]
        );
    }
}

#[test]
fn a_rate_limited_tio_run_reaches_its_rate_within_one_percent() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let out = bench_in(
        &sb,
        "tio",
        &d,
        &[
            &RANDREAD[..],
            &["--time", "3s", "--time-based", "--rate-iops", "2000"],
        ]
        .concat(),
    );
    let r = json_of(&out);
    assert_schema(&r);
    let p = &r["phases"][0];
    every_worker_reached(p, 2000.0, "ops/s");
    // Counted independently of the rate record: 3 s at 2000 requests/s, within 1 %.
    let ops = u(&p["ops"]);
    assert!(
        (5940..=6000).contains(&ops),
        "{ops} requests in 3 s at 2000/s"
    );
    scheduled_latency_counts_every_request(p, "read");
    assert_eq!(r["workload"]["params"]["rate_iops"], 2000.0);
    let warnings = r["errors"].to_string();
    assert!(!warnings.contains("rate not reached"), "{warnings}");
}

#[test]
fn a_run_rate_in_bytes_is_split_over_the_workers() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    // 8 MiB/s over two threads: 4 MiB/s (1024 4K requests/s) each, for 2 s.
    let out = bench_in(
        &sb,
        "tio",
        &d,
        &randread_2_threads("2s", &["--rate", "8M/s", "--rate-per", "run"]),
    );
    let r = json_of(&out);
    assert_schema(&r);
    let p = &r["phases"][0];
    every_worker_reached(p, (4 << 20) as f64, "B/s");
    let bytes = u(&p["bytes"]);
    let want = 2 * (4u64 << 20) * 2;
    assert!(
        bytes <= want && bytes * 100 >= want * 99,
        "{bytes} bytes in 2 s at 8 MiB/s"
    );
    assert_eq!(r["workload"]["params"]["rate"], 8u64 << 20);
    assert_eq!(r["workload"]["params"]["rate_per"], "run");
}

#[test]
fn a_rate_limited_clients_run_reaches_its_rate() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let out = bench_in(
        &sb,
        "clients",
        &d,
        &["--clients", "2", "--time", "2s", "--rate-iops", "500"],
    );
    let r = json_of(&out);
    assert_schema(&r);
    let p = r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "clients-2")
        .unwrap();
    every_worker_reached(p, 500.0, "ops/s");
    let ops = u(&p["ops"]);
    assert!(
        (1980..=2000).contains(&ops),
        "{ops} operations in 2 s at 2 × 500/s"
    );
    let s = &p["scheduled_latency"];
    assert_eq!(s["count"], p["latency"]["count"]);
    // Every kind the clients did has both latencies.
    for (kind, st) in p["op_stats"].as_object().unwrap() {
        if u(&st["count"]) > 0 {
            assert_eq!(st["scheduled_latency"]["count"], st["count"], "{kind}");
        }
    }
    // The untimed setup phase is not rate-limited.
    let setup = &r["phases"][0];
    assert!(setup.get("rate").is_none() && setup.get("scheduled_latency").is_none());
}

#[test]
fn without_a_rate_limit_nothing_changes() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let out = bench_in(&sb, "tio", &d, &RANDREAD);
    let r = json_of(&out);
    let p = &r["phases"][0];
    for k in ["rate", "scheduled_latency"] {
        assert!(p.get(k).is_none(), "{k} in {p}");
    }
    assert!(p["op_stats"]["read"].get("scheduled_latency").is_none());
    assert!(p["series"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s.get("scheduled_latency").is_none()));
    let params = r["workload"]["params"].as_object().unwrap();
    for k in ["rate_iops", "rate", "rate_per"] {
        assert!(!params.contains_key(k), "{k} in the parameters");
    }
}

#[test]
fn a_rate_the_device_cannot_reach_is_reported_per_worker() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    // A hundred million page-cache reads a second: no machine's system calls go that fast.
    let out = bench_in(
        &sb,
        "tio",
        &d,
        &randread_2_threads("1s", &["--rate-iops", "100000000"]),
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r = json_of(&out);
    let p = &r["phases"][0];
    let workers = p["rate"]["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    for w in workers {
        assert!(f(&w["achieved"]) < 0.99 * f(&w["asked"]), "{w}");
        assert!(f(&w["achieved"]) > 0.0, "{w}");
    }
    // Behind all along, it still stopped at its time.
    assert!(f(&p["wall_s"]) < 1.5, "{}", p["wall_s"]);
    let warning = r["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|w| w.contains("rate not reached"))
        .unwrap_or_else(|| panic!("no warning in {}", r["errors"]));
    assert!(
        warning.contains("worker 0") && warning.contains("worker 1"),
        "{warning}"
    );
    assert!(warning.contains("of 100000000.0 ops/s"), "{warning}");
    // Printed as a warning when the output is for people.
    let out = sb
        .cmd()
        .args(["bench", "tio", "--quiet", "--dir"])
        .arg(&d)
        .args(RANDREAD)
        .args(["--time", "300ms", "--rate-iops", "100000000", "--out"])
        .arg(sb.out())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: randread-4K-t1: rate not reached: worker 0"),
        "{stderr}"
    );
}

#[test]
fn bad_rates_are_refused_with_the_reason() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let cases: [(&[&str], &str); 6] = [
        (&["--rate-iops", "0"], "more than 0"),
        (&["--rate", "0"], "more than 0"),
        (&["--rate", "10Q/s"], "unknown unit"),
        (&["--rate-iops", "fast"], "requests per second"),
        (&["--rate-iops", "100", "--rate", "1M/s"], "give one"),
        (
            &["--rate-iops", "100", "--rate-per", "everyone"],
            "worker or run",
        ),
    ];
    for (args, needle) in cases {
        let out = bench_in(&sb, "tio", &d, &[&RANDREAD[..], args].concat());
        assert_refused(&out, &format!("{args:?}"), &[needle]);
    }
    let out = bench_in(
        &sb,
        "tio",
        &d,
        &[
            &RANDREAD[..],
            &["--rate-iops", "100", "--engine", "io_uring"],
        ]
        .concat(),
    );
    assert_refused(&out, "io_uring", &["--engine psync"]);
    let out = bench_in(
        &sb,
        "clients",
        &d,
        &["--clients", "1", "--time", "1s", "--rate-iops", "0"],
    );
    assert_refused(&out, "clients", &["more than 0"]);
    // Nothing was left in the directory.
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
    assert!(!sb.out().exists());
}

#[test]
fn a_bad_rate_in_a_plan_is_refused_at_its_line() {
    let sb = Sandbox::new();
    let plan = sb.path().join("plan.toml");
    std::fs::write(
        &plan,
        "name = \"rate\"\nreps = 1\n\n[[testbed]]\nlabel = \"plain\"\nfs = \"ext4\"\nsize = \"256M\"\n\n[[workload]]\nkind = \"tio\"\nthreads = 1\nrate_iops = 0\n",
    )
    .unwrap();
    let out = sb.bench(&["run", plan.to_str().unwrap()]).output().unwrap();
    let at = format!("{}:12:", plan.display());
    assert_refused(&out, "plan", &[&at, "more than 0"]);
    assert!(!sb.out().exists());
    sb.assert_clean();
}

/// A testbed made with `fsgauge testbed create`, destroyed on drop.
struct Bed<'a> {
    sb: &'a Sandbox,
    name: String,
    mnt: PathBuf,
}

impl<'a> Bed<'a> {
    fn ext4(sb: &'a Sandbox) -> Self {
        let out = sb
            .cmd()
            .args(["testbed", "create", "--fs", "ext4", "--fs-size", "256M"])
            .arg("--workdir")
            .arg(sb.workdir())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "testbed create failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let field = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()))
                .unwrap_or_else(|| panic!("no {k} in {text}"))
        };
        Bed {
            sb,
            name: field("name:"),
            mnt: PathBuf::from(field("mountpoint:")),
        }
    }
}

impl Drop for Bed<'_> {
    fn drop(&mut self) {
        let _ = Command::new("fsfreeze").arg("-u").arg(&self.mnt).output();
        let _ = self
            .sb
            .cmd()
            .args(["testbed", "destroy", &self.name])
            .output();
    }
}

/// The stalled device: a rate-limited write run on ext4, and the filesystem frozen (FIFREEZE,
/// via fsfreeze) for 300 ms a second into it. Writes block while it is frozen; the requests
/// that fell due meanwhile are issued when it thaws, each fast from its submission but late
/// from its due time. Scheduled-time latency must show that queue and submission-time
/// latency must not: were the scheduled latency measured from submission, the two would be
/// the same and this test would fail.
#[test]
fn a_stalled_device_shows_in_scheduled_latency_not_in_submission_latency() {
    if !have_fs("ext4") || !have_program("fsfreeze") {
        return;
    }
    let sb = Sandbox::new();
    let bed = Bed::ext4(&sb);
    let child = sb
        .cmd()
        .args(["bench", "tio", "--quiet", "--dir"])
        .arg(&bed.mnt)
        .args([
            "--mode",
            "randwrite",
            "--block",
            "4K",
            "--file-size",
            "8M",
            "--threads",
            "1",
            "--fsync",
            "none",
            "--time",
            "3s",
            "--time-based",
            "--rate-iops",
            "2000",
            "--json",
            "--out",
        ])
        .arg(sb.out())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(1000));
    let frozen = Command::new("fsfreeze")
        .arg("-f")
        .arg(&bed.mnt)
        .status()
        .unwrap();
    assert!(frozen.success(), "fsfreeze -f {}", bed.mnt.display());
    std::thread::sleep(Duration::from_millis(300));
    let thawed = Command::new("fsfreeze")
        .arg("-u")
        .arg(&bed.mnt)
        .status()
        .unwrap();
    assert!(thawed.success(), "fsfreeze -u {}", bed.mnt.display());
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "the freeze came too late"
    );
    let out = child.wait_with_output().unwrap();
    let r = json_of(&out);
    assert_schema(&r);
    let p = &r["phases"][0];
    let (sub, sched) = (&p["latency"], &p["scheduled_latency"]);
    // About 600 requests fell due during the 300 ms: ~10 % of 6000, waiting 0–300 ms.
    assert!(u(&sched["p99_ns"]) >= 100_000_000, "scheduled {sched}");
    assert!(
        u(&sub["p99_ns"]) * 10 <= u(&sched["p99_ns"]),
        "submission p99 {} vs scheduled p99 {}",
        sub["p99_ns"],
        sched["p99_ns"]
    );
    // The one write that met the freeze waited it out from its submission too.
    assert!(u(&sub["max_ns"]) >= 200_000_000, "submission {sub}");
    // The second of the stall shows the queue in its own scheduled latency.
    let worst = p["series"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s.get("scheduled_latency"))
        .map(|l| u(&l["p90_ns"]))
        .max()
        .unwrap();
    assert!(
        worst >= 50_000_000,
        "no second shows the stall: {}",
        p["series"]
    );
    // It caught up: all due requests were issued.
    let ops = u(&p["ops"]);
    assert!((5940..=6000).contains(&ops), "{ops}");
    drop(bed);
}
