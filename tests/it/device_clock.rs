//! The emulated disk's own clock against injected stalls (`FSGAUGE_DEVICE_STALLS`, the server's
//! test hook): a short `devices check` whose timing thread sleeps 3 ms before every reply. The
//! disk's clock stops for each stall: the pause accounts for the stalls injected, and the QD1
//! reads' disk time (wall − pause) does not carry them. No tight timing: a busy machine only
//! adds lateness, which the pause takes too. Root, loop devices and /dev/fuse, skipped
//! without them; a bad transport needs nothing.

use crate::support::{assert_refused, have_fuse, have_program, Sandbox, TEST_TRANSPORT};

const STALL_MS: f64 = 3.0;

#[test]
fn a_stalled_check_pauses_the_disk_clock_for_every_stall_and_its_disk_time_keeps_the_model() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "devices",
            "check",
            "deskstar-7k250",
            "--seconds",
            "1",
            "--json",
            "-q",
        ])
        .env("FSGAUGE_DEVICE_STALLS", "3:100:1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "devices check failed: {stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let whole = &doc["lateness"];
    let (requests, pause_ms, pauses) = (
        whole["requests"].as_u64().unwrap(),
        whole["pause_ms"].as_f64().unwrap(),
        whole["pauses"].as_u64().unwrap(),
    );
    assert!(requests > 0, "{doc}");
    // Every reply was stalled 3 ms: every one stopped the clock, for its stall at least.
    assert_eq!(pauses, requests, "{whole}");
    assert!(pause_ms >= 0.9 * STALL_MS * requests as f64, "{whole}");
    let qd1 = &doc["benches"][0];
    assert_eq!(qd1["name"], "QD1 random 4K read, whole stroke");
    let n = qd1["requests"].as_u64().unwrap() as f64;
    let (wall, modelled) = (
        qd1["measured"].as_f64().unwrap(),
        qd1["modelled"].as_f64().unwrap(),
    );
    let disk = wall - qd1["lateness"]["pause_ms"].as_f64().unwrap() / n;
    // On the wall each read took its stall too; on the disk's clock it did not.
    assert!(wall >= modelled + 0.9 * STALL_MS, "{qd1}");
    assert!(disk < modelled + 0.5 * STALL_MS, "disk {disk} ms: {qd1}");
    sb.assert_clean();
}

#[test]
fn a_bad_transport_is_refused_before_anything_is_made() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args(["devices", "check", "deskstar-7k250", "--seconds", "1"])
        .env("FSGAUGE_DEVICE_TRANSPORT", "bogus")
        .output()
        .unwrap();
    assert_refused(
        &out,
        "devices check",
        &["FSGAUGE_DEVICE_TRANSPORT=\"bogus\"", "give auto"],
    );
    // A bench on an emulated disk: refused before its testbed is made.
    let out = sb
        .bench(&[
            "bench",
            "tio",
            "--fs",
            "ext2",
            "--device-model",
            "deskstar-7k250",
        ])
        .env("FSGAUGE_DEVICE_TRANSPORT", "bogus")
        .output()
        .unwrap();
    assert_refused(
        &out,
        "bench tio",
        &["FSGAUGE_DEVICE_TRANSPORT=\"bogus\"", "give auto"],
    );
    sb.assert_clean();
}

/// The short stall table (`scripts/bench_device_stalls.py --short`, what `scripts/bench-device
/// --stalls` runs at full size): each of its four cases once plain and once with every reply
/// stalled 3 ms. Only what a busy machine cannot break is asserted: every case ran in both
/// arms, and each stalled phase's pause holds every stall injected (3 ms for each of its
/// requests: a busy machine only adds lateness, which the pause also takes), so the stalls
/// are not in its disk time; periodic writeback, held off for the cases on a filesystem, is
/// as it was after. Whether disk time stalled equals disk time plain within 3% is the
/// benchmark's question, on a quiet machine, not this test's.
#[test]
fn the_short_stall_table_runs_every_case_and_keeps_every_stall_off_the_disk_clock() {
    if !have_fuse() || !have_program("python3") {
        return;
    }
    const WRITEBACK: &str = "/proc/sys/vm/dirty_writeback_centisecs";
    let writeback = std::fs::read_to_string(WRITEBACK).expect("writeback interval");
    let sb = Sandbox::new();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench_device_stalls.py");
    let (outdir, json) = (sb.path().join("stalls"), sb.path().join("stalls.json"));
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_fsgauge"))
        .arg(&outdir)
        .args(["1", "3:100:1", "", "--short", "--json"])
        .arg(&json)
        .arg("--workdir")
        .arg(sb.workdir())
        .env("FSGAUGE_STATE_DIR", sb.state())
        .env("FSGAUGE_DEVICE_TRANSPORT", TEST_TRANSPORT)
        .current_dir(sb.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(WRITEBACK).expect("writeback interval"),
        writeback,
        "periodic writeback put back"
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("the table's JSON")).expect("JSON");
    let rows = doc["rows"].as_object().expect("rows");
    let cases = ["qd1-read", "tio-seqwrite-t8", "clients-4", "tree-remove"];
    assert_eq!(rows.len(), cases.len(), "{doc}");
    for case in cases {
        let row = &rows[case];
        assert!(
            stdout.contains(&format!("\n{case} | ")),
            "{case} in the table: {stdout}"
        );
        for arm in ["plain", "stalled"] {
            assert_eq!(row[arm].as_array().map(Vec::len), Some(1), "{case}: {row}");
        }
        let s = &row["stalled"][0];
        let f = |k: &str| s[k].as_f64().expect("a number");
        assert!(f("requests") > 0.0, "{case}: {s}");
        assert!(
            f("pause_ms") >= 0.9 * STALL_MS * f("requests"),
            "{case}: every reply was stalled {STALL_MS} ms: {s}"
        );
        // Disk time is the wall's less the pause: the stalls are not in it (QD1 reads: ms per
        // read, each stalled; the others: seconds over all their requests).
        let stalled = if case == "qd1-read" {
            STALL_MS
        } else {
            STALL_MS * f("requests") / 1000.0
        };
        assert!(f("disk") <= f("wall") - 0.9 * stalled, "{case}: {s}");
    }
    assert!(!stdout.contains("(failed)"), "{stdout}");
    sb.assert_clean();
}
