//! Settings with their limits, and settings that do not apply refused (issue 29, items 5, 6 and
//! 12): `--reps` and a plan's `reps` share one bound; `constant=` is bounded, an ablation is
//! given once and only of a part the profile has; `--device-offset` and
//! `--device-model-during` need a `--device-model` (flag or plan key); an emulated disk needs
//! direct I/O; and a sparse image that does not fit is not told to be sparse. Each refusal is
//! exit 2 with a message naming the value and what to do, nothing made. Needs nothing of the
//! machine: every command here is refused before it would need root.

use std::path::PathBuf;
use std::process::Output;

use crate::support::{assert_refused, refused, Sandbox};

const TREE: [&str; 9] = [
    "--dirs",
    "1",
    "--files",
    "1",
    "--file-size",
    "4K",
    "--quiet",
    "--fs-size",
    "256M",
];

/// `fsgauge bench tree --fs ext4 ARGS` with the sandbox's work and results directories.
fn bench(args: &[&str]) -> Vec<String> {
    ["bench", "tree", "--fs", "ext4"]
        .iter()
        .chain(args)
        .chain(&TREE)
        .map(|s| s.to_string())
        .collect()
}

fn refused_bench(sb: &Sandbox, args: &[&str], needles: &[&str]) {
    let words = bench(args);
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    refused(sb, &words, needles);
}

/// `fsgauge run PLAN --out OUT [--dry-run]` of a plan with one `[[testbed]]` holding `keys`.
fn run_plan(sb: &Sandbox, keys: &str, dry: bool) -> (Output, PathBuf) {
    let p = sb.path().join("plan.toml");
    std::fs::write(
        &p,
        format!(
            "[[testbed]]\nfs = \"ext4\"\nfs_size = \"256M\"\nworkdir = {:?}\n{keys}\n\n[[workload]]\nkind = \"tree\"\ndirs = 1\nfiles = 1\nfile_size = \"4K\"\n",
            sb.workdir().to_str().unwrap()
        ),
    )
    .unwrap();
    let mut c = sb.cmd();
    c.arg("run").arg(&p).arg("--out").arg(sb.out());
    if dry {
        c.arg("--dry-run");
    }
    (c.output().unwrap(), p)
}

fn refused_clean(sb: &Sandbox, out: &Output, what: &str, needles: &[&str]) {
    assert_refused(out, what, needles);
    assert!(!sb.out().exists(), "{what}: a result directory was made");
    sb.assert_clean();
}

#[test]
fn reps_beyond_the_plans_limit_are_refused_on_the_command_line_too() {
    let sb = Sandbox::new();
    // Before: 10001 ran (a plan's reps stops at 10000), and 4294967295 grew the dry run's
    // matrix past 868 MB.
    for n in ["10001", "4294967295", "0"] {
        let out = sb
            .cmd()
            .args(["run", "quick", "--dry-run", "--reps", n, "--out"])
            .arg(sb.out())
            .output()
            .unwrap();
        refused_clean(
            &sb,
            &out,
            &format!("run --reps {n}"),
            &[
                "--reps <N>",
                &format!("{n} repetitions are out of range; give 1 to 10000, e.g. --reps 5"),
            ],
        );
    }
    let d = sb.path().join("target");
    std::fs::create_dir(&d).unwrap();
    let out = sb
        .cmd()
        .args([
            "bench", "tree", "--quiet", "--dirs", "1", "--files", "1", "--dir",
        ])
        .arg(&d)
        .args(["--reps", "10001", "--out"])
        .arg(sb.out())
        .output()
        .unwrap();
    refused_clean(&sb, &out, "bench --reps 10001", &["10001 repetitions"]);
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
    // The plan's key has the same bound, at its line and column.
    let p = sb.path().join("reps.toml");
    std::fs::write(
        &p,
        "reps = 10001\n[[workload]]\nkind = \"tree\"\ndirs = 1\nfiles = 1\n",
    )
    .unwrap();
    let out = sb
        .cmd()
        .arg("run")
        .arg(&p)
        .args(["--dry-run", "--out"])
        .arg(sb.out())
        .output()
        .unwrap();
    let at = format!("{}:1:8: reps:", p.display());
    refused_clean(&sb, &out, "reps = 10001", &[&at, "from 1 to 10000"]);
}

#[test]
fn ablations_out_of_bounds_repeated_or_of_a_missing_part_are_refused() {
    let sb = Sandbox::new();
    let cases: [(&str, &[&str]); 5] = [
        (
            "deskstar-7k250:constant=99999999h",
            &[
                "ablation constant=99999999h is out of range",
                "give a duration above 0 and at most 10s, e.g. constant=12ms",
            ],
        ),
        (
            "ram:seek=off",
            &[
                "ablation seek=off does not apply to ram",
                "the ablations of ram are constant=DURATION",
            ],
        ),
        (
            "deskstar-7k250:seek=off,seek=on",
            &[
                "ablation seek is given twice in \"seek=off,seek=on\"",
                "give each ablation once",
            ],
        ),
        (
            "sata-ssd:rotation=off",
            &["ablation rotation=off does not apply to sata-ssd"],
        ),
        (
            "st3500641as:constant=12ms,cache=off",
            &[
                "cache=off changes nothing with constant=12.00ms",
                "give constant= alone",
            ],
        ),
    ];
    for (reference, needles) in cases {
        let out = sb
            .cmd()
            .args(["devices", "show", reference])
            .output()
            .unwrap();
        assert_refused(&out, &format!("devices show {reference}"), needles);
        assert!(out.stdout.is_empty(), "{reference}: printed a profile");
        refused_bench(&sb, &["--device-model", reference], needles);
        let (out, p) = run_plan(&sb, &format!("device_model = {reference:?}"), true);
        let at = format!("{}:5:16: device_model:", p.display());
        let mut with_at = needles.to_vec();
        with_at.push(&at);
        refused_clean(&sb, &out, &format!("plan {reference}"), &with_at);
    }
}

#[test]
fn device_model_settings_without_a_device_model_are_refused() {
    let sb = Sandbox::new();
    refused_bench(
        &sb,
        &["--device-offset", "100G"],
        &[
            "--device-offset 100G places the filesystem on an emulated disk, but there is none",
            "add --device-model PROFILE",
            "or leave --device-offset out",
        ],
    );
    // Given explicitly, the default too does nothing without a disk.
    refused_bench(
        &sb,
        &["--device-offset", "0"],
        &["--device-offset 0 places"],
    );
    refused_bench(
        &sb,
        &["--device-model-during", "always"],
        &[
            "--device-model-during always says when the emulated disk of --device-model applies, but there is none",
            "or leave --device-model-during out",
        ],
    );
    // A journal's disk alone does not take it either.
    refused_bench(
        &sb,
        &[
            "--journal",
            "file:8M",
            "--journal-device-model",
            "ram",
            "--device-model-during",
            "always",
        ],
        &["it does not apply to --journal-device-model alone"],
    );
    for dry in [true, false] {
        for (keys, at, needle) in [
            (
                "device_offset = \"100G\"",
                "5:17: device_offset:",
                "--device-offset 100G places the filesystem on an emulated disk, but there is none",
            ),
            (
                "device_model_during = \"always\"",
                "5:23: device_model_during:",
                "--device-model-during always says when",
            ),
        ] {
            let (out, p) = run_plan(&sb, keys, dry);
            let at = format!("{}:{at}", p.display());
            refused_clean(&sb, &out, &format!("{keys} dry {dry}"), &[&at, needle]);
        }
    }
}

#[test]
fn an_emulated_disk_without_direct_io_is_refused() {
    let sb = Sandbox::new();
    refused_bench(
        &sb,
        &["--device-model", "ram", "--loop-direct-io", "off"],
        &[
            "--loop-direct-io off: the emulated disk of --device-model ram needs its loop device to do direct I/O",
            "leave --loop-direct-io out",
        ],
    );
    let (out, p) = run_plan(&sb, "device_model = \"ram\"\nloop_direct_io = false", false);
    let at = format!("{}:6:18: loop_direct_io:", p.display());
    refused_clean(
        &sb,
        &out,
        "plan",
        &[&at, "needs its loop device to do direct I/O"],
    );
    // On: the default, given explicitly, is fine (the dry run lists the testbed).
    let (out, _) = run_plan(&sb, "device_model = \"ram\"\nloop_direct_io = true", true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_sparse_image_that_does_not_fit_is_not_told_to_be_sparse() {
    let sb = Sandbox::new();
    let free = fsgauge::testbed::room::free_space(&sb.workdir()).expect("statvfs");
    // A filesystem and writes far beyond the sandbox's free space.
    let mib = (free >> 20).max(1);
    let size = format!("{}M", mib * 1000);
    let written = format!("{}M", mib * 100);
    let args = |alloc: &str| -> Vec<String> {
        [
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            &size,
            "--image-alloc",
            alloc,
            "--dirs",
            "1",
            "--files",
            "1",
            "--file-size",
            &written,
            "--quiet",
        ]
        .map(str::to_string)
        .to_vec()
    };
    let sparse = args("sparse");
    let out = sb
        .bench(&sparse.iter().map(String::as_str).collect::<Vec<_>>())
        .output()
        .unwrap();
    refused_clean(
        &sb,
        &out,
        "sparse",
        &[
            "free; the image is sparse already",
            "pass --workdir on a bigger filesystem, or have the workload write less",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("--image-alloc"), "{err}");
    // A full image is still told it may be sparse.
    let full = args("full");
    let out = sb
        .bench(&full.iter().map(String::as_str).collect::<Vec<_>>())
        .output()
        .unwrap();
    refused_clean(
        &sb,
        &out,
        "full",
        &["keep the image sparse (--image-alloc sparse"],
    );
}

/// Issue 41, item 6: every duration setting has one bound, a week, on the command line and in
/// a plan. Before, `--time 18446744073709551615s` panicked adding it to an `Instant` (exit
/// 101) and `999999999999h` was taken and ran without end.
#[test]
fn durations_beyond_a_week_are_refused_on_every_flag_and_plan_key() {
    let sb = Sandbox::new();
    let d = sb.path().join("target");
    std::fs::create_dir(&d).unwrap();
    let dir = d.to_str().unwrap();
    let huge = "18446744073709551615s";
    let long = "999999999999h";
    let cases: [(&[&str], &str); 6] = [
        (&["bench", "tio", "--time-based", "--time", huge], huge),
        (&["bench", "tio", "--time-based", "--time", long], long),
        (&["bench", "clients", "--time", huge], huge),
        (&["bench", "tio", "--time", "2s", "--ramp", long], long),
        (&["exercise", "--time", huge], huge),
        (&["exercise", "--time", "8d"], "8d"),
    ];
    for (args, value) in cases {
        let mut c = sb.cmd();
        c.args(args).args(["--dir", dir, "--out"]).arg(sb.out());
        let out = crate::support::run_within(c, 120, &format!("{args:?}"));
        refused_clean(
            &sb,
            &out,
            &format!("{args:?}"),
            &[&format!(
                "duration \"{value}\" is too long; give at most 7d (168h)"
            )],
        );
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0, "{args:?}");
    }
    // The plan's `time` has the same bound, text or number, at its line and column.
    for (value, shown) in [
        ("\"999999999999h\"", "999999999999h"),
        ("1e30", "1000000000000000000000000000000"),
    ] {
        let p = sb.path().join("time.toml");
        std::fs::write(
            &p,
            format!(
                "[[testbed]]\nfs = \"ext4\"\nfs_size = \"1G\"\n\n[[workload]]\nkind = \"tio\"\ntime = {value}\n"
            ),
        )
        .unwrap();
        let mut c = sb.cmd();
        c.arg("run")
            .arg(&p)
            .args(["--dry-run", "--workdir"])
            .arg(sb.workdir())
            .arg("--out")
            .arg(sb.out());
        let out = crate::support::run_within(c, 120, "plan time");
        let at = format!("{}:7:", p.display());
        refused_clean(
            &sb,
            &out,
            &format!("time = {value}"),
            &[&at, "time", &format!("\"{shown}\" is too long")],
        );
    }
}
