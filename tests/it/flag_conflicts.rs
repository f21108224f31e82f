//! Flags that contradict each other are refused before anything is made (issue 22, items 12
//! and 13): the testbed flags with `--dir`, `--fs-size`/`--backing` with `--device`,
//! `--destroy-data` without `--device`, `--rate-per` without a rate, rates no schedule can pace,
//! and a plan's `workdir` that is no directory, under `--dry-run` as in the run. Each refusal is
//! exit 2 with a message naming both sides (or the bad value) and saying what to do. Needs
//! nothing of the machine: every command here is refused before it would need root.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{assert_refused, Sandbox};

fn dir(sb: &Sandbox) -> PathBuf {
    let d = sb.path().join("target");
    std::fs::create_dir_all(&d).unwrap();
    d
}

const TREE: [&str; 6] = ["--dirs", "1", "--files", "1", "--file-size", "4K"];

/// `fsgauge bench KIND ARGS --out OUT` (no --workdir of the sandbox: it is one of the flags
/// under test).
fn bench(sb: &Sandbox, kind: &str, args: &[&str]) -> Output {
    sb.cmd()
        .args(["bench", kind, "--quiet"])
        .args(args)
        .arg("--out")
        .arg(sb.out())
        .output()
        .unwrap()
}

/// Refused with every needle in stderr, and nothing made: no result directory, nothing left
/// in `d` (when given) or in the sandbox's work directory.
fn refused_clean(sb: &Sandbox, out: &Output, what: &str, needles: &[&str], d: Option<&Path>) {
    assert_refused(out, what, needles);
    assert!(!sb.out().exists(), "{what}: a result directory was made");
    if let Some(d) = d {
        let left: Vec<_> = std::fs::read_dir(d).unwrap().collect();
        assert!(left.is_empty(), "{what}: left in --dir: {left:?}");
    }
    sb.assert_clean();
}

#[test]
fn testbed_flags_with_dir_are_refused() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let wd = sb.workdir();
    let wd = wd.to_str().unwrap();
    let cases: [(&[&str], &str); 9] = [
        (&["--fs-size", "1G"], "--fs-size"),
        (&["--journal", "ram:8M"], "--journal"),
        (&["--backing", "ram"], "--backing"),
        // The default, given explicitly, is as meaningless with --dir.
        (&["--backing", "file"], "--backing"),
        (&["--workdir", wd], "--workdir"),
        (&["--mkfs-opts", "-b 1024"], "--mkfs-opts"),
        (&["--mount-opts", "noatime"], "--mount-opts"),
        (&["--loop-direct-io", "off"], "--loop-direct-io"),
        (&["--device", "/dev/null", "--destroy-data"], "--device"),
    ];
    for (flags, flag) in cases {
        let args = [&["--dir", d.to_str().unwrap()][..], flags, &TREE].concat();
        let out = bench(&sb, "tree", &args);
        refused_clean(
            &sb,
            &out,
            &format!("{flags:?}"),
            &[
                "--dir",
                flag,
                "cannot be used with",
                "fsgauge builds nothing",
                "--fs KIND",
            ],
            Some(&d),
        );
    }
    // The same flags on other commands that take a --dir.
    let out = sb
        .cmd()
        .args(["age", "--quiet", "--dir"])
        .arg(&d)
        .args(["--fs-size", "1G", "--out"])
        .arg(sb.out())
        .output()
        .unwrap();
    refused_clean(&sb, &out, "age", &["--dir", "--fs-size"], Some(&d));
}

#[test]
fn device_flags_that_do_not_apply_are_refused() {
    let sb = Sandbox::new();
    let dev = ["--fs", "ext4", "--device", "/dev/null", "--destroy-data"];
    for (flags, flag) in [
        (&["--backing", "ram"][..], "--backing"),
        (&["--fs-size", "64M"][..], "--fs-size"),
    ] {
        let args = [&dev[..], flags, &TREE].concat();
        let out = bench(&sb, "tree", &args);
        refused_clean(
            &sb,
            &out,
            &format!("{flags:?}"),
            &[
                "--device",
                flag,
                "cannot be used with",
                "its size is the filesystem's",
            ],
            None,
        );
    }
    // --destroy-data confirms a --device; alone it confirms nothing.
    let args = [&["--fs", "ext4", "--destroy-data"][..], &TREE].concat();
    let out = bench(&sb, "tree", &args);
    refused_clean(
        &sb,
        &out,
        "--destroy-data alone",
        &["--device <DEV>", "--destroy-data only confirms"],
        None,
    );
}

const TIO: [&str; 10] = [
    "--mode",
    "randread",
    "--block",
    "4K",
    "--file-size",
    "1M",
    "--threads",
    "1",
    "--time",
    "1s",
];

#[test]
fn rate_per_without_a_rate_and_absurd_rates_are_refused() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let cases: [(&[&str], &[&str]); 7] = [
        (
            &["--rate-per", "run"],
            &["--rate-iops <N>|--rate <BYTES/s>", "--rate-per says whom"],
        ),
        // Explicitly the default: still no rate for it to apply to.
        (&["--rate-per", "worker"], &["--rate-per says whom"]),
        (
            &["--rate-iops", "1e99"],
            &["--rate-iops 1e99", "outside", "leave it out"],
        ),
        (&["--rate-iops", "1e-9"], &["--rate-iops 1e-9", "outside"]),
        (&["--rate-iops", "inf"], &["--rate-iops"]),
        (
            &["--rate", "2T/s"],
            &["--rate 2T/s", "outside", "1K/s to 1T/s"],
        ),
        (&["--rate", "1/s"], &["--rate 1/s", "outside"]),
    ];
    for (flags, needles) in cases {
        let args = [&["--dir", d.to_str().unwrap()][..], &TIO, flags].concat();
        let out = bench(&sb, "tio", &args);
        refused_clean(&sb, &out, &format!("{flags:?}"), needles, Some(&d));
    }
    // Clients take the same flags.
    let args = [
        &["--dir", d.to_str().unwrap()][..],
        &["--clients", "1", "--time", "1s", "--rate-per", "run"],
    ]
    .concat();
    let out = bench(&sb, "clients", &args);
    refused_clean(&sb, &out, "clients", &["--rate-per says whom"], Some(&d));
}

fn plan(sb: &Sandbox, body: &str) -> PathBuf {
    let p = sb.path().join("plan.toml");
    std::fs::write(
        &p,
        format!("[[testbed]]\nfs = \"ext4\"\nsize = \"256M\"\n{body}"),
    )
    .unwrap();
    p
}

#[test]
fn a_plan_s_rate_per_without_a_rate_and_absurd_rate_are_refused_at_their_line() {
    let sb = Sandbox::new();
    for (body, line, needle) in [
        (
            "\n[[workload]]\nkind = \"tio\"\nthreads = 1\nrate_per = \"run\"\n",
            8,
            "no rate is given",
        ),
        (
            "\n[[workload]]\nkind = \"tio\"\nthreads = 1\nrate_iops = 1e99\n",
            8,
            "outside what fsgauge can pace",
        ),
    ] {
        let p = plan(&sb, body);
        for dry in [true, false] {
            let mut c = sb.cmd();
            c.arg("run").arg(&p).arg("--out").arg(sb.out());
            if dry {
                c.arg("--dry-run");
            }
            let out = c.output().unwrap();
            let at = format!("{}:{line}:", p.display());
            refused_clean(
                &sb,
                &out,
                &format!("{body} dry {dry}"),
                &[&at, needle],
                None,
            );
        }
    }
}

/// Item 13: `--dry-run` refused what the run refuses, a `workdir` that is no directory, with
/// the same message at the plan's line.
#[test]
fn dry_run_refuses_a_workdir_the_run_refuses() {
    let sb = Sandbox::new();
    let file = sb.path().join("regular-file");
    std::fs::write(&file, b"x").unwrap();
    for wd in [PathBuf::from("/dev/null"), file.join("below")] {
        let p = plan(
            &sb,
            &format!(
                "workdir = {:?}\n\n[[workload]]\nkind = \"tree\"\ndirs = 1\nfiles = 1\nfile_size = \"4K\"\n",
                wd.to_str().unwrap()
            ),
        );
        let at = format!("{}:4:", p.display());
        let mut messages = Vec::new();
        for dry in [true, false] {
            let mut c = sb.cmd();
            c.arg("run").arg(&p).arg("--out").arg(sb.out());
            if dry {
                c.arg("--dry-run");
            }
            let out = c.output().unwrap();
            refused_clean(
                &sb,
                &out,
                &format!("workdir {} dry {dry}", wd.display()),
                &[&at, "workdir", "is not a directory"],
                None,
            );
            messages.push(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        assert_eq!(messages[0], messages[1], "dry run and run say the same");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}
