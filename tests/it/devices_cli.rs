//! `fsgauge devices list|show`: the built-in profiles, every parameter with its source, the
//! model's expectations, user profile files, and bad profiles refused with file:line:column.
//! Needs no root.

use crate::support::{assert_refused, json_of, Sandbox};

#[test]
fn list_names_every_builtin_profile() {
    let sb = Sandbox::new();
    let out = sb.cmd().args(["devices", "list"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "st3500641as",
        "deskstar-7k250",
        "sata-ssd",
        "nvme-ssd",
        "ram",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    assert!(text.contains("500.1 GB") && text.contains("7200"), "{text}");

    let out = sb
        .cmd()
        .args(["devices", "list", "--json"])
        .output()
        .unwrap();
    let doc = json_of(&out);
    let list = doc.as_array().unwrap();
    assert_eq!(list.len(), 5);
    let st = list.iter().find(|p| p["name"] == "st3500641as").unwrap();
    assert_eq!(st["kind"], "hdd");
    assert_eq!(st["rpm"], 7200.0);
    assert_eq!(st["average_seek_ms"], 11.0);
    assert_eq!(st["capacity_bytes"], 500107862016u64);
}

#[test]
fn show_prints_sources_and_expectations() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args(["devices", "show", "st3500641as"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "average_seek_ms",
        "The Tech Report",
        "assumption:",
        "average rotational latency",
        "4.17 ms",
        "QD1 random 4K read, whole disk",
        "QD1 random 4K read, first 1%",
        "outer zone",
        "65.0 MB/s",
        "33.0 MB/s",
    ] {
        assert!(text.contains(needle), "show lacks {needle:?}:\n{text}");
    }

    let out = sb
        .cmd()
        .args(["devices", "show", "deskstar-7k250", "--json"])
        .output()
        .unwrap();
    let doc = json_of(&out);
    let e = &doc["expectations"];
    let avg = e["average_seek_ms"].as_f64().unwrap();
    assert!((avg - 8.2).abs() < 0.02 * 8.2, "{avg}");
    let qd1 = e["qd1_random_4k_read_ms"].as_f64().unwrap();
    // Random-block seek + half a revolution + transfer and overhead.
    assert!(qd1 > 12.0 && qd1 < 13.5, "{qd1}");
    assert!(e["qd1_random_4k_read_1pct_ms"].as_f64().unwrap() < qd1);
    let params = doc["profile"]["sourced"].as_array().unwrap();
    assert_eq!(params.len(), 20);
    assert!(params
        .iter()
        .all(|p| !p["source"].as_str().unwrap().is_empty()));
}

#[test]
fn show_applies_ablations() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args(["devices", "show", "st3500641as:constant=12ms", "--json"])
        .output()
        .unwrap();
    let doc = json_of(&out);
    assert_eq!(doc["ablations"], "constant=12ms");
    assert_eq!(doc["expectations"]["qd1_random_4k_read_ms"], 12.0);
    let out = sb
        .cmd()
        .args(["devices", "show", "st3500641as:rotation=off", "--json"])
        .output()
        .unwrap();
    let doc = json_of(&out);
    assert_eq!(doc["expectations"]["rotational_latency_ms"], 0.0);

    let out = sb
        .cmd()
        .args(["devices", "show", "st3500641as:spin=off"])
        .output()
        .unwrap();
    assert_refused(
        &out,
        "unknown ablation",
        &["unknown ablation \"spin\"", "seek=off"],
    );
    let out = sb
        .cmd()
        .args(["devices", "show", "st3500641as:fast"])
        .output()
        .unwrap();
    assert_refused(
        &out,
        "ablation without value",
        &["ablations after ':' are KEY=VALUE"],
    );
    let out = sb
        .cmd()
        .args(["devices", "show", "floppy"])
        .output()
        .unwrap();
    assert_refused(
        &out,
        "unknown profile",
        &["no device profile \"floppy\"", "st3500641as"],
    );
}

const MINE: &str = r#"name = "mydisk"
kind = "ssd"
description = "my drive"

[parameters]
capacity_bytes = { value = 1000000000, source = "label" }
read_latency_us = { value = 80.0, source = "measured with fio" }
write_latency_us = { value = 20.0, source = "measured with fio" }
read_mb_s = { value = 500.0, source = "measured" }
write_mb_s = { value = 400.0, source = "measured" }
channels = { value = 8, source = "guess" }
write_cache = { value = true, source = "hdparm -W" }
flush_ms = { value = 1.0, source = "measured" }
"#;

#[test]
fn a_user_profile_file_is_read_and_its_errors_located() {
    let sb = Sandbox::new();
    let path = sb.path().join("mydisk.toml");
    std::fs::write(&path, MINE).unwrap();
    let out = sb
        .cmd()
        .args(["devices", "show"])
        .arg(format!("{}:cache=off", path.display()))
        .arg("--json")
        .output()
        .unwrap();
    let doc = json_of(&out);
    assert_eq!(doc["profile"]["name"], "mydisk");
    assert_eq!(doc["expectations"]["qd1_random_4k_read_ms"], 0.08);

    // The built-in profile's text is a valid profile file to start from.
    let out = sb
        .cmd()
        .args(["devices", "show", "deskstar-7k250", "--toml"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let copy = sb.path().join("copy.toml");
    std::fs::write(&copy, &out.stdout).unwrap();
    let out = sb
        .cmd()
        .args(["devices", "show", "--json"])
        .arg(&copy)
        .output()
        .unwrap();
    assert_eq!(json_of(&out)["profile"]["name"], "deskstar-7k250");

    let bad = MINE.replace("value = 8,", "value = \"eight\",");
    std::fs::write(&path, bad).unwrap();
    let out = sb
        .cmd()
        .args(["devices", "show"])
        .arg(&path)
        .output()
        .unwrap();
    let at = format!("{}:11:22: channels: expected a number", path.display());
    assert_refused(&out, "bad value", &[&at]);

    let bad = MINE.replace("flush_ms", "flush_time");
    std::fs::write(&path, bad).unwrap();
    let out = sb
        .cmd()
        .args(["devices", "show"])
        .arg(&path)
        .output()
        .unwrap();
    let at = format!(
        "{}:13:1: flush_time: not a parameter of a kind = \"ssd\" profile",
        path.display()
    );
    assert_refused(&out, "unknown key", &[&at, "flush_ms"]);

    let bad = MINE.replace("source = \"guess\"", "source = \" \"");
    std::fs::write(&path, bad).unwrap();
    let out = sb
        .cmd()
        .args(["devices", "show"])
        .arg(&path)
        .output()
        .unwrap();
    assert_refused(&out, "empty source", &[":11:", "channels: source is empty"]);
}

/// A store the server does not know (`--store`, or `FSGAUGE_DEVICE_STORE` where a command
/// describes its disk) is refused as it is parsed, before the server sets anything up or
/// opens its image (which does not exist here), naming the stores there are; the server
/// itself reads no environment for it.
#[test]
fn the_device_server_refuses_an_unknown_store_before_anything_else() {
    let sb = Sandbox::new();
    let serve = |store: Option<&str>| {
        let mut c = sb.cmd();
        c.env("FSGAUGE_DEVICE_STORE", "disk").args([
            "devices",
            "serve",
            "--profile",
            "ram",
            "--size",
            "1048576",
            "--offset",
            "0",
            "--transport",
            "dev",
        ]);
        c.arg("--image").arg(sb.path().join("no-image"));
        c.arg("--mount").arg(sb.path().join("mnt"));
        if let Some(s) = store {
            c.args(["--store", s]);
        }
        c.output().unwrap()
    };
    let out = serve(Some("disk"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("disk is not a store: give memory, memory:SIZE"),
        "{err}"
    );
    assert!(!err.contains("no-image"), "{err}");
    assert!(!sb.path().join("no-image").exists());
    let out = serve(None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("not a store"),
        "the server read the environment: {err}"
    );
    let out = sb
        .quick_ram_check()
        .env("FSGAUGE_DEVICE_STORE", "disk")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("FSGAUGE_DEVICE_STORE=disk is not a store: give memory, memory:SIZE"),
        "{err}"
    );
    sb.assert_clean();
}
