//! Testbeds on emulated disks (`--device-model`; needs root, loop devices, /dev/fuse and
//! mkfs): the result records the model and, per measured phase, what the disk served and how
//! late; set-up (mkfs, aging, the fresh copy) runs at native speed unless
//! `device_model_during = "always"`; nothing is left behind.

use std::path::Path;

use fsgauge::results::RunResult;

use crate::support::{have_fs, Sandbox};

fn have_fuse() -> bool {
    if Path::new("/dev/fuse").exists() {
        return true;
    }
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false") {
        panic!("CI must run every test, but: needs /dev/fuse");
    }
    eprintln!("skipped: needs /dev/fuse");
    false
}

fn results(sb: &Sandbox) -> Vec<RunResult> {
    let mut out: Vec<RunResult> = std::fs::read_dir(sb.out())
        .unwrap()
        .map(|e| fsgauge::results::load(&e.unwrap().path()).unwrap())
        .collect();
    out.sort_by_key(|r| r.rep);
    out
}

/// The device servers' FUSE mounts of the fsgauge process `pid`.
fn server_mounts(pid: u32) -> Vec<String> {
    let tag = format!("fsgauge-device-{pid}-");
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&tag))
        .map(str::to_string)
        .collect()
}

fn run_ok(sb: &Sandbox, args: &[&str]) -> u32 {
    let child = sb
        .bench(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    pid
}

#[test]
fn a_bench_on_an_emulated_disk_records_the_model_and_each_phase() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let pid = run_ok(
        &sb,
        &[
            "bench",
            "interleave",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--device-model",
            "deskstar-7k250:cache=off",
            "--device-offset",
            "100G",
            "--dirs",
            "10",
            "--files",
            "20",
            "--cold",
            "drop",
            "--quiet",
        ],
    );
    let runs = results(&sb);
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    let m = r
        .testbed
        .device_model
        .as_ref()
        .expect("the model is recorded");
    assert_eq!(m.profile, "deskstar-7k250");
    assert_eq!(m.reference, "deskstar-7k250:cache=off");
    assert_eq!(m.ablations, "cache=off");
    assert_eq!(m.kind, "hdd");
    assert_eq!(m.offset, 100 << 30);
    assert_eq!(m.during, "phases");
    assert_eq!(m.hash.len(), 64);
    assert!(m.parameters.as_array().is_some_and(|a| !a.is_empty()));
    assert_eq!(r.testbed.loop_direct_io, Some(true));
    // The cold remove reads the tree from the disk: the model served it, each request after
    // a seek and a rotation (no cache), and on time.
    let remove = r
        .phases
        .iter()
        .find(|p| p.name == "remove")
        .expect("remove");
    let d = remove.device_model.as_ref().expect("a record of the phase");
    assert!(d.counts.reads > 0, "{d:?}");
    assert_eq!(d.counts.cache_hits, 0, "cache=off: {d:?}");
    assert_eq!(d.counts.unmodelled, 0, "the phase is modelled: {d:?}");
    assert!(d.service_ns.mean > 1e6, "a seek and a rotation each: {d:?}");
    assert!(d.lateness_p99_ms < 5.0, "{d:?}");
    assert_eq!(d.counts.early, 0);
    assert!(d.service_ns.hdr.len() > 10 && d.seek_cylinders.count > 0);
    // The phase took at least what the disk did for it.
    let busy_s = d.service_ns.mean * d.service_ns.count as f64 / 1e9;
    assert!(
        remove.wall_s >= busy_s * 0.9,
        "{} < {busy_s}",
        remove.wall_s
    );
    assert!(server_mounts(pid).is_empty(), "{:?}", server_mounts(pid));
    sb.assert_clean();
}

/// The append test on an emulated disk: the aging and the copy to the fresh twin are set-up
/// (no model, no record), the reads are measured under the model, on both testbeds; with
/// `always` the set-up is modelled too.
#[test]
fn set_up_runs_at_native_speed_unless_the_model_applies_always() {
    if !have_fs("ext2") || !have_fuse() {
        return;
    }
    for during in ["phases", "always"] {
        let sb = Sandbox::new();
        let plan = sb.path().join("append.toml");
        std::fs::write(
            &plan,
            format!(
                r#"name = "append-emulated"
reps = 1
cold = "drop"

[[testbed]]
label = "ext2"
fs = "ext2"
fs_size = "64M"
device_model = "ram"
device_model_during = "{during}"

[[workload]]
kind = "append"
usage = [30.0]
tree = "4x10"
append = "4K"
"#
            ),
        )
        .unwrap();
        let pid = run_ok(&sb, &["run", plan.to_str().unwrap(), "--quiet"]);
        let runs = results(&sb);
        assert_eq!(runs.len(), 1);
        let r = &runs[0];
        assert_eq!(r.testbed.device_model.as_ref().unwrap().during, during);
        for p in &r.phases {
            let measured = p.name.starts_with("read-");
            let modelled = p
                .device_model
                .as_ref()
                .is_some_and(|d| d.counts.reads + d.counts.writes > 0);
            if measured || during == "always" {
                assert!(modelled, "{during}: phase {} has no record", p.name);
            } else {
                assert!(
                    !modelled,
                    "{during}: set-up phase {} was modelled: {:?}",
                    p.name, p.device_model
                );
            }
        }
        assert!(server_mounts(pid).is_empty());
        sb.assert_clean();
    }
}

#[test]
fn bad_device_models_are_refused_before_anything_is_made() {
    let sb = Sandbox::new();
    for (args, want) in [
        (
            vec!["--device-model", "no-such-disk"],
            "no device profile \"no-such-disk\"",
        ),
        (
            vec!["--device-model", "deskstar-7k250:spin=off"],
            "unknown ablation",
        ),
        (
            vec![
                "--device-model",
                "deskstar-7k250",
                "--device-offset",
                "249G",
            ],
            "does not fit on deskstar-7k250",
        ),
        (vec!["--journal-device-model", "ram"], "there is none"),
    ] {
        let mut all = vec!["bench", "tree", "--fs", "ext4", "--fs-size", "2G"];
        all.extend(&args);
        let out = sb.bench(&all).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    sb.assert_clean();
}

#[test]
fn testbed_create_refuses_an_emulated_disk_before_building_anything() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "testbed",
            "create",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--device-model",
            "ram",
            "--workdir",
        ])
        .arg(sb.workdir())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot leave one behind"), "{err}");
    sb.assert_clean();
}
