//! `fsgauge bench clients` in an existing directory (no root needed): the same operation
//! counts per kind as the real dbench on the same loadfile, the built-in mix, and malformed
//! loadfiles refused with their line number.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{have_program, json_of, Sandbox};

const CLIENT_TXT: &str = "/usr/share/dbench/client.txt";

fn dir(sb: &Sandbox, name: &str) -> PathBuf {
    let d = sb.path().join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The first `n` lines of dbench's own loadfile.
fn small_loadfile(sb: &Sandbox, n: usize) -> Option<PathBuf> {
    let text = match std::fs::read_to_string(CLIENT_TXT) {
        Ok(t) => t,
        Err(_) => {
            have_program("dbench"); // skips (or fails under CI) with the reason
            return None;
        }
    };
    let p = sb.path().join("small.txt");
    let lines: Vec<&str> = text.lines().take(n).collect();
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    Some(p)
}

/// Parses dbench's results table: operation → count.
fn dbench_counts(stdout: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut in_table = false;
    for l in stdout.lines() {
        if l.trim_start().starts_with("Operation") {
            in_table = true;
            continue;
        }
        if in_table {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() == 4 {
                if let Ok(c) = f[1].parse::<u64>() {
                    out.insert(f[0].to_string(), c);
                }
            } else if f.is_empty() {
                break;
            }
        }
    }
    out
}

fn fsgauge_counts(v: &serde_json::Value) -> BTreeMap<String, u64> {
    let p = &v["phases"][0];
    assert_eq!(p["name"], "clients-3");
    p["op_stats"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, s)| (k.clone(), s["count"].as_u64().unwrap()))
        .filter(|(_, c)| *c > 0)
        .collect()
}

#[test]
fn same_operation_counts_as_dbench_on_the_same_loadfile() {
    if !have_program("dbench") {
        return;
    }
    let sb = Sandbox::new();
    let Some(lf) = small_loadfile(&sb, 3000) else {
        return;
    };

    // dbench loops over its loadfile until the time is up; a long Sleep at the end (not an
    // operation) holds every client in its first pass past the 1 s limit, so each client
    // makes exactly one pass.
    let once = sb.path().join("once.txt");
    let mut text = std::fs::read_to_string(&lf).unwrap();
    text.push_str("Sleep 3000000 NT_STATUS_OK\n");
    std::fs::write(&once, text).unwrap();
    let dd = dir(&sb, "dbench");
    let out = Command::new("dbench")
        .arg("-c")
        .arg(&once)
        .arg("-D")
        .arg(&dd)
        .args(["-t", "1", "3"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "dbench failed: {stdout}");
    let theirs = dbench_counts(&stdout);
    assert!(theirs.len() >= 10, "dbench table not found in: {stdout}");

    let fd = dir(&sb, "fsgauge");
    let out = sb
        .cmd()
        .args(["bench", "clients", "--dir"])
        .arg(&fd)
        .args(["--clients", "3", "--loops", "1", "--json", "--out"])
        .arg(sb.out())
        .arg("--loadfile")
        .arg(&lf)
        .output()
        .unwrap();
    let v = json_of(&out);
    let ours = fsgauge_counts(&v);
    assert_eq!(ours, theirs, "per-kind operation counts, fsgauge vs dbench");
    assert_eq!(v["phases"][0]["extra"]["passes"], 3.0);
    assert_eq!(v["phases"][0]["extra"]["unexpected_status"], 0.0);
    let bytes = v["phases"][0]["bytes"].as_u64().unwrap();
    assert!(bytes > 0);
    assert_eq!(std::fs::read_dir(&fd).unwrap().count(), 0, "cleaned up");
}

#[test]
fn the_whole_installed_loadfile_parses() {
    if !Path::new(CLIENT_TXT).exists() {
        have_program("dbench");
        return;
    }
    let sb = Sandbox::new();
    let d = dir(&sb, "t");
    // A tiny time limit: the parse is what is checked, and that the replay starts cleanly.
    let out = sb
        .cmd()
        .args(["bench", "clients", "--dir"])
        .arg(&d)
        .args(["--clients", "2", "--time", "0.3s", "--json", "--out"])
        .arg(sb.out())
        .args(["--loadfile", CLIENT_TXT])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert!(v["phases"][0]["ops"].as_u64().unwrap() > 0);
}

#[test]
fn built_in_mix_reports_every_kind_with_latencies() {
    let sb = Sandbox::new();
    let d = dir(&sb, "t");
    let out = sb
        .cmd()
        .args(["bench", "clients", "--dir"])
        .arg(&d)
        .args([
            "--clients",
            "1,4",
            "--loops",
            "2",
            "--mix-files",
            "20",
            "--mix-ops",
            "400",
        ])
        .args(["--seed", "4", "--json", "--out"])
        .arg(sb.out())
        .output()
        .unwrap();
    let v = json_of(&out);
    let ph = v["phases"].as_array().unwrap();
    let names: Vec<&str> = ph.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["setup-c1", "clients-1", "setup-c4", "clients-4"]);
    let one = &ph[1];
    let four = &ph[3];
    // Exactly two passes per client: four clients do four times the operations of one.
    assert_eq!(
        four["ops"].as_u64().unwrap(),
        4 * one["ops"].as_u64().unwrap()
    );
    assert_eq!(
        four["bytes"].as_u64().unwrap(),
        4 * one["bytes"].as_u64().unwrap()
    );
    for k in [
        "NTCreateX",
        "Close",
        "ReadX",
        "WriteX",
        "Unlink",
        "Qpathinfo",
        "Find",
        "Flush",
        "Rename",
    ] {
        let s = &one["op_stats"][k];
        assert!(s["count"].as_u64().unwrap() > 0, "{k}");
        assert!(
            s["latency"]["max_ns"].as_u64().unwrap() >= s["latency"]["p50_ns"].as_u64().unwrap()
        );
    }
    assert_eq!(
        one["op_stats"]["NTCreateX"]["count"],
        one["op_stats"]["Close"]["count"]
    );
    assert_eq!(one["extra"]["unexpected_status"], 0.0);
}

#[test]
fn malformed_loadfiles_are_refused_with_the_line_number() {
    let sb = Sandbox::new();
    let d = dir(&sb, "t");
    let lf = sb.path().join("bad.txt");
    std::fs::write(
        &lf,
        "Mkdir \"\\clients\" NT_STATUS_OK\n\n# a comment\nWriteX 1 0 4096 NT_STATUS_OK\n",
    )
    .unwrap();
    let out = sb
        .cmd()
        .args(["bench", "clients", "--dir"])
        .arg(&d)
        .args(["--clients", "1", "--loops", "1", "--out"])
        .arg(sb.out())
        .arg("--loadfile")
        .arg(&lf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("line 4") && err.contains("WriteX needs"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
}
