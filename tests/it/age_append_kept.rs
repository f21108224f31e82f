//! The append test's agings kept in the aged-image cache (needs root, loop devices, /dev/fuse
//! and mkfs.ext2; skips with a reason otherwise, fails under CI). A plan's `append` workload
//! with `keep_image = true` on an emulated disk, run twice in one state directory: its first
//! repetition ages and keeps one image per usage checkpoint; every later repetition, in that
//! run and the next, ages nothing and starts each checkpoint from its kept image as an
//! overlay, loaded whole before anything is measured, with the kept aging phase, checkpoint
//! digests and manifest, and every phase and row of an aging run. `study append
//! --keep-image` does the same per filesystem.

use std::collections::BTreeSet;
use std::path::Path;

use crate::support::{have_fs, have_fuse, json_of, Sandbox};
use serde_json::Value;

/// 64M: the overlay's base, loaded whole.
const FS_SIZE: u64 = 64 << 20;

const PLAN: &str = r#"name = "append-kept"
reps = 2
cold = "drop"
seed = 3

[[testbed]]
label = "ext2"
fs = "ext2"
size = "64M"
device_model = "ram"

[[workload]]
kind = "append"
usage = [30.0, 60.0]
tree = "4x10"
append = "4K"
keep_image = true
"#;

/// Runs the plan into `out`; its results by repetition, as JSON.
fn run(sb: &Sandbox, plan: &Path, out: &Path) -> Vec<Value> {
    let o = sb
        .cmd()
        .args(["run", plan.to_str().unwrap(), "--quiet", "--workdir"])
        .arg(sb.workdir())
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut docs: Vec<Value> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
        .collect();
    docs.sort_by_key(|d| d["rep"].as_u64());
    docs
}

fn checkpoints(doc: &Value) -> &Vec<Value> {
    doc["layout"]["checkpoints"].as_array().unwrap()
}

fn phase_names(doc: &Value) -> Vec<&str> {
    doc["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect()
}

fn phase<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no phase {name}"))
}

/// The keys of the cache's entries (`STATE/images/KEY.json`).
fn cached_keys(sb: &Sandbox) -> BTreeSet<String> {
    std::fs::read_dir(sb.state().join("images"))
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.strip_suffix(".json").map(String::from)
        })
        .collect()
}

/// A repetition that started every checkpoint from the kept images of `cold` (the aging
/// repetition): each start is an overlay of the same key and digest, its base loaded whole;
/// the aging phases are the kept ones (nothing aged); the manifest, the phases and the rows
/// are as complete as the aging run's.
fn assert_started_from(warm: &Value, cold: &Value) {
    for (w, c) in checkpoints(warm).iter().zip(checkpoints(cold)) {
        let (ws, cs) = (&w["aged_image"], &c["aged_image"]);
        assert_eq!(ws["from"], "image-overlay", "{w}");
        assert_eq!(ws["key"], cs["key"]);
        assert_eq!(ws["digest"], cs["digest"]);
        assert_eq!(w["overlay_loaded_bytes"], FS_SIZE, "{w}");
        assert_eq!(w["aged"], c["aged"], "the kept layout record");
    }
    assert_eq!(checkpoints(warm).len(), 2);
    assert_eq!(
        warm["testbed"]["aged_image"],
        checkpoints(warm)[0]["aged_image"]
    );
    for age in ["age-30", "age-60"] {
        assert_eq!(
            phase(warm, age),
            phase(cold, age),
            "{age} is the kept phase"
        );
    }
    assert_eq!(warm["layout"]["manifest"], cold["layout"]["manifest"]);
    assert_eq!(phase_names(warm), phase_names(cold));
    for name in [
        "read-aged-30",
        "read-fresh-30",
        "read-aged-60",
        "read-fresh-60",
    ] {
        let p = phase(warm, name);
        assert!(p["extra"]["read_kbps"].as_f64().unwrap() > 0.0, "{p}");
        assert!(
            p["extra"]["extents_per_file"].as_f64().unwrap() >= 1.0,
            "{p}"
        );
        assert!(p["device_model"]["reads"].as_u64().unwrap() > 0, "{p}");
    }
    let rows = warm["layout"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for (rw, rc) in rows.iter().zip(cold["layout"]["rows"].as_array().unwrap()) {
        for k in [
            "usage_pct",
            "files",
            "bytes",
            "write_kbps_aging",
            "extents_per_file_aged",
        ] {
            assert_eq!(rw[k], rc[k], "{k}");
        }
        assert!(rw["read_kbps_aged"].as_f64().unwrap() > 0.0, "{rw}");
        assert!(rw["read_kbps_fresh"].as_f64().unwrap() > 0.0, "{rw}");
    }
}

#[test]
fn a_second_run_starts_every_checkpoint_from_its_kept_image() {
    if !have_fs("ext2") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let plan = sb.path().join("append-kept.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let first = run(&sb, &plan, &sb.path().join("first"));
    assert_eq!(first.len(), 2);
    let cold = &first[0];
    let keys: Vec<&str> = checkpoints(cold)
        .iter()
        .map(|c| {
            assert_eq!(c["aged_image"]["from"], "aged", "{c}");
            assert!(c.get("overlay_loaded_bytes").is_none(), "{c}");
            c["aged_image"]["key"].as_str().unwrap()
        })
        .collect();
    assert_eq!(keys.len(), 2);
    assert_ne!(keys[0], keys[1], "one image per checkpoint");
    assert_eq!(cold["testbed"]["aged_image"]["from"], "aged");
    assert_eq!(
        cached_keys(&sb),
        keys.iter().map(|k| k.to_string()).collect()
    );
    // The repetition after the first, in the same run, starts from the images.
    assert_started_from(&first[1], cold);

    let second = run(&sb, &plan, &sb.path().join("second"));
    assert_eq!(second.len(), 2);
    for warm in &second {
        assert_started_from(warm, cold);
    }
    assert_eq!(cached_keys(&sb).len(), 2, "nothing more was kept");
    sb.assert_clean();
}

/// `study append --keep-image`: the first study ages and keeps, the second starts every
/// checkpoint from the kept images, and reports the same aged layout.
#[test]
fn the_append_study_keeps_its_agings() {
    if !have_fs("ext2") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let study = |out: &str| {
        let o = sb
            .cmd()
            .args([
                "study",
                "append",
                "--fs",
                "ext2",
                "--fs-size",
                "64M",
                "--device-model",
                "ram",
                "--usage",
                "40",
                "--files",
                "40",
                "--dirs",
                "4",
                "--read-phases",
                "walk",
                "--seed",
                "5",
                "--keep-image",
                "study-kept",
                "--json",
                "--quiet",
                "--workdir",
            ])
            .arg(sb.workdir())
            .arg("--out")
            .arg(sb.path().join(out))
            .output()
            .unwrap();
        json_of(&o).as_array().unwrap()[0].clone()
    };
    let cold = study("first");
    let warm = study("second");
    let (c, w) = (&checkpoints(&cold)[0], &checkpoints(&warm)[0]);
    assert_eq!(c["aged_image"]["from"], "aged", "{c}");
    assert_eq!(w["aged_image"]["from"], "image-overlay", "{w}");
    assert_eq!(w["aged_image"]["key"], c["aged_image"]["key"]);
    assert_eq!(w["aged_image"]["digest"], c["aged_image"]["digest"]);
    assert_eq!(w["overlay_loaded_bytes"], FS_SIZE);
    assert_eq!(phase(&warm, "age-40"), phase(&cold, "age-40"));
    assert_eq!(phase_names(&warm), phase_names(&cold));
    assert_eq!(warm["testbed"]["aged_image"]["from"], "image-overlay");
    sb.assert_clean();
}
