//! `fsgauge bench clients` on real ext4, xfs and btrfs testbeds (needs root, loop devices and
//! each mkfs; skips with a printed reason otherwise, fails under CI): the built-in mix and a
//! small dbench loadfile, each on a fresh filesystem.

use crate::support::{have_fs, json_of, size_of, Sandbox};

fn clients(fs: &str) {
    if !have_fs(fs) {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .bench(&["bench", "clients", "--fs", fs, "--fs-size", size_of(fs)])
        .args([
            "--clients",
            "1,3",
            "--loops",
            "1",
            "--mix-files",
            "30",
            "--mix-ops",
            "300",
        ])
        .args(["--seed", "8", "--json"])
        .output()
        .unwrap();
    let v = json_of(&out);
    let runs = v.as_array().expect("a run per client count");
    assert_eq!(runs.len(), 2);
    let measured: Vec<&serde_json::Value> = runs
        .iter()
        .map(|r| {
            assert_eq!(r["testbed"]["fs"], fs);
            let p = &r["phases"][1];
            assert!(p["name"].as_str().unwrap().starts_with("clients-"));
            assert_eq!(
                p["extra"]["unexpected_status"], 0.0,
                "{fs}: {}",
                r["errors"]
            );
            assert!(p["bytes_per_s"].as_f64().unwrap() > 0.0);
            p
        })
        .collect();
    assert_eq!(
        measured[1]["ops"].as_u64().unwrap(),
        3 * measured[0]["ops"].as_u64().unwrap()
    );
    sb.assert_clean();

    let text = match std::fs::read_to_string("/usr/share/dbench/client.txt") {
        Ok(t) => t,
        Err(_) => {
            crate::support::have_program("dbench");
            return;
        }
    };
    let lf = sb.path().join("small.txt");
    std::fs::write(&lf, text.lines().take(2000).collect::<Vec<_>>().join("\n")).unwrap();
    let out = sb
        .bench(&["bench", "clients", "--fs", fs, "--fs-size", size_of(fs)])
        .args(["--clients", "2", "--loops", "1", "--json", "--loadfile"])
        .arg(&lf)
        .output()
        .unwrap();
    let v = json_of(&out);
    let p = &v["phases"][0];
    assert_eq!(p["name"], "clients-2");
    assert_eq!(p["extra"]["passes"], 2.0);
    for k in ["NTCreateX", "WriteX", "ReadX", "Close"] {
        assert!(p["op_stats"][k]["count"].as_u64().unwrap() > 0, "{fs} {k}");
    }
    sb.assert_clean();
}

#[test]
fn ext4_clients_mix_and_loadfile() {
    clients("ext4");
}

#[test]
fn xfs_clients_mix_and_loadfile() {
    clients("xfs");
}

#[test]
fn btrfs_clients_mix_and_loadfile() {
    clients("btrfs");
}
