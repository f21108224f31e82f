//! The emulated disk's own clock against injected stalls (`FSGAUGE_DEVICE_STALLS`, the server's
//! test hook): a short `devices check` whose timing thread sleeps 3 ms before every reply. The
//! disk's clock stops for each stall: the pause accounts for the stalls injected, and the QD1
//! reads' disk time (wall − pause) does not carry them. No tight timing: a busy machine only
//! adds lateness, which the pause takes too. Root, loop devices and /dev/fuse, skipped
//! without them; a bad transport needs nothing.

use crate::support::{assert_refused, have_fuse, Sandbox};

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
