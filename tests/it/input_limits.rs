//! Limits of the input: counts and sizes whose products do not fit in 64 bits are refused
//! (exit 2, before anything is made) instead of wrapping into a too-small estimate; every
//! workload's estimates are driven with extreme values by a property test.
//!
//! The command-line tests here need nothing special: the refusal comes before any testbed.

use crate::support::{refused, Sandbox};
use fsgauge::workload::registry::find;
use proptest::prelude::*;

#[test]
fn tree_sizes_over_64_bits_are_refused_naming_the_parameters() {
    let sb = Sandbox::new();
    refused(
        &sb,
        &[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--dirs",
            "1",
            "--files",
            "1",
            "--file-size",
            "18446744073709551615",
        ],
        &[
            "overflows 64 bits",
            "--file-size 18446744073709551615",
            "make --dirs, --files or --file-size smaller",
        ],
    );
    refused(
        &sb,
        &[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--dirs",
            "4503599627370496",
            "--file-size",
            "0",
        ],
        &["overflows 64 bits", "--dirs 4503599627370496"],
    );
}

#[test]
fn plan_sizes_over_64_bits_are_refused_at_the_workload() {
    let sb = Sandbox::new();
    for (i, params) in [
        "dirs = 1\nfiles = 1\nfile_size = \"18446744073709551615\"",
        "dirs = 4503599627370496\nfile_size = 0",
    ]
    .iter()
    .enumerate()
    {
        let plan = sb.path().join(format!("big{i}.toml"));
        std::fs::write(
            &plan,
            format!(
                "name = \"big\"\n\n[[testbed]]\nfs = \"ext4\"\nsize = \"256M\"\n\n[[workload]]\nkind = \"tree\"\n{params}\n"
            ),
        )
        .unwrap();
        for extra in [&[][..], &["--dry-run"][..]] {
            let mut args = vec!["run", plan.to_str().unwrap()];
            args.extend_from_slice(extra);
            let out = sb.bench(&args).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{params} {extra:?}: {stderr}");
            assert!(
                stderr.contains("overflows 64 bits") && stderr.contains(":7:1"),
                "{params} {extra:?}: the error should point at the workload table: {stderr}"
            );
            assert!(!sb.out().join("runs").exists(), "{stderr}");
        }
    }
    sb.assert_clean();
}

// ---- the property test: every workload's estimates with extreme values ----

/// Numbers that break arithmetic: the edges, powers of two near them, and anything.
fn extreme() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(4095),
        Just(4096),
        Just(1 << 32),
        Just(1 << 52),
        Just(1 << 63),
        Just(u64::MAX - 4095),
        Just(u64::MAX),
        0u64..1_000_000,
        any::<u64>(),
    ]
}

fn extreme32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1),
        Just(1024),
        Just(u32::MAX),
        0u32..100_000,
        any::<u32>(),
    ]
}

/// `size` in whole 4 KiB blocks, exactly.
fn blocks(size: u64) -> u128 {
    u128::from(size).div_ceil(4096) * 4096
}

/// Saturating u128 arithmetic: a saturated figure is still a lower bound of the exact value
/// and far above u64::MAX, so `estimate >= figure` stays the right check.
fn m(a: u128, b: u128) -> u128 {
    a.saturating_mul(b)
}
fn a(x: u128, y: u128) -> u128 {
    x.saturating_add(y)
}

/// Builds `kind` from `params`; when it builds, each estimate must be an error or at least the
/// exact figure.
fn check(kind: &str, params: serde_json::Value, space: u128, memory: u128) {
    let Ok(w) = (find(kind).unwrap().build)(params.clone()) else {
        return; // refused at parsing (e.g. a count over u32)
    };
    if let Ok(s) = w.space_needed() {
        assert!(
            u128::from(s) >= space,
            "{kind} {params}: space estimate {s} < exact {space}"
        );
    }
    if let Ok(mem) = w.memory_needed() {
        assert!(
            u128::from(mem) >= memory,
            "{kind} {params}: memory estimate {mem} < exact {memory}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(3000)
    })]

    #[test]
    fn tree_estimates_are_exact_or_refused(dirs in extreme(), files in extreme(), size in extreme(), block in extreme()) {
        let (d, f) = (u128::from(dirs), u128::from(files));
        check(
            "tree",
            serde_json::json!({"dirs": dirs, "files": files, "file_size": size, "block": block}),
            a(m(m(d, f), blocks(size)), m(d, 4096)),
            u128::from(block.min(size)) + (1 << 20),
        );
        // The file and inode counts must fit too: with file size 0 they are all there is.
        if let Ok(w) = (find("tree").unwrap().build)(serde_json::json!({"dirs": dirs, "files": files, "file_size": size})) {
            if w.space_needed().is_ok() {
                prop_assert!(a(m(d, f), d) <= u128::from(u64::MAX));
            }
        }
    }

    #[test]
    fn fdtree_estimates_are_exact_or_refused(
        levels in prop_oneof![0u32..40, Just(64u32), Just(1000)],
        dpl in extreme(), fpd in extreme(), size in extreme(), block in extreme(), threads in extreme32(),
    ) {
        // Long chains of 1s are slow to sum; a level count over 1000 adds nothing here.
        let mut per_tree: u128 = 0;
        for _ in 0..=levels {
            per_tree = a(m(per_tree, u128::from(dpl)), 1);
        }
        let dirs = m(per_tree, u128::from(threads));
        let files = m(dirs, u128::from(fpd));
        check(
            "fdtree",
            serde_json::json!({"levels": levels, "dirs_per_level": dpl, "files_per_dir": fpd,
                "file_size": size, "block": block, "threads": threads}),
            a(m(dirs, 4608), m(files, blocks(size) + 512)),
            m(u128::from(block.max(4096)) + (2 << 20), u128::from(threads)) + (1 << 20),
        );
    }

    #[test]
    fn interleave_estimates_are_exact_or_refused(dirs in extreme(), files in extreme(), size in extreme()) {
        let d = u128::from(dirs);
        check(
            "interleave",
            serde_json::json!({"dirs": dirs, "files": files, "file_size": size}),
            a(m(d, 4608), m(m(d, u128::from(files)), blocks(size) + 512)),
            u128::from(size.min(1 << 20)) + (2 << 20),
        );
    }

    #[test]
    fn create_estimates_are_exact_or_refused(files in extreme(), threads in extreme32(), fpd in extreme(), size in extreme(), block in extreme()) {
        let t = u128::from(threads);
        let subdirs = if fpd == 0 { 0 } else { u128::from(files).div_ceil(u128::from(fpd)) };
        check(
            "create",
            serde_json::json!({"files": files, "threads": threads, "files_per_dir": fpd,
                "file_size": size, "block": block}),
            a(m(m(u128::from(files), t), blocks(size) + 512), m(m(t, 1 + subdirs), 4608)),
            a(u128::from(block.min(size)), m(t, 2 << 20)),
        );
    }

    #[test]
    fn tio_estimates_are_exact_or_refused(threads in extreme32(), size in extreme(), block in extreme(), iodepth in extreme32()) {
        let t = u128::from(threads);
        check(
            "tio",
            serde_json::json!({"threads": [threads], "file_size": size, "block": [block], "iodepth": iodepth}),
            a(m(t, blocks(size)), 1 << 20),
            a(m(a(m(u128::from(block), u128::from(iodepth.max(1))), 256 << 10), t), 1 << 20),
        );
    }

    #[test]
    fn clients_estimates_are_exact_or_refused(clients in extreme32(), mix_files in extreme32(), mix_ops in extreme32()) {
        let c = u128::from(clients);
        check(
            "clients",
            serde_json::json!({"clients": [clients], "mix_files": mix_files, "mix_ops": mix_ops}),
            m(c, u128::from(mix_files) * (128 << 10) + (1 << 20)),
            u128::from(mix_ops) * 2048 + m(c, 256 << 10),
        );
    }

    #[test]
    fn exercise_estimates_are_exact_or_refused(procs in extreme32(), max_len in extreme(), max_op_len in extreme()) {
        let p = u128::from(procs.max(1));
        let (l, o) = (u128::from(max_len), u128::from(max_op_len));
        check(
            "exercise",
            serde_json::json!({"procs": procs, "max_len": max_len, "max_op_len": max_op_len}),
            m(p, l + o + (1 << 20)),
            m(p, 2 * l + 3 * o + (1 << 20)),
        );
    }

    #[test]
    fn age_and_read_estimates_are_exact_or_refused(dirs in extreme(), files in extreme(), block in extreme()) {
        check(
            "age",
            serde_json::json!({"usage": [50], "tree": format!("{dirs}x{files}"), "block": block}),
            0,
            a(m(m(u128::from(dirs), u128::from(files)), 16), u128::from(block) + (4 << 20)),
        );
        check("read", serde_json::json!({"block": block}), 0, u128::from(block) + (16 << 20));
    }
}

// ---- damaged result files: named, counted, refused under --strict ----

/// A results directory of the tree study (3 reps on testbeds a and b) where testbed a's rep 2
/// is truncated, plus an empty and a garbage `*.json`.
fn damaged_results() -> (tempfile::TempDir, Vec<std::path::PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    crate::report_fixtures::write_all(dir.path(), &crate::report_fixtures::tree_study());
    let victim = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("-a-tree-rep2-"))
        .unwrap();
    let bytes = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &bytes[..bytes.len() / 2]).unwrap();
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, "").unwrap();
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "\u{1}\u{2}not json at all").unwrap();
    (dir, vec![victim, empty, garbage])
}

fn assert_names_each(stderr: &str, damaged: &[std::path::PathBuf]) {
    for d in damaged {
        let line = stderr
            .lines()
            .find(|l| l.contains(&*d.to_string_lossy()))
            .unwrap_or_else(|| panic!("{} is not named:\n{stderr}", d.display()));
        assert!(
            line.contains("line ") && line.contains("column "),
            "no parse position: {line}"
        );
    }
}

#[test]
fn report_names_damaged_result_files_counts_n_and_refuses_under_strict() {
    let (dir, damaged) = damaged_results();
    let sb = Sandbox::new();
    for format in ["md", "html", "json", "csv"] {
        let out = sb
            .cmd()
            .arg("report")
            .arg(dir.path())
            .args(["--format", format])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{format}: {stderr}");
        assert_names_each(&stderr, &damaged);
        match format {
            // Testbed a has 2 usable create runs, b 3: the n each figure stands on.
            "md" | "html" => {
                assert!(
                    stdout.contains("(n=2)") && stdout.contains("(n=3)"),
                    "{format}: {stdout}"
                );
                assert!(stdout.contains("garbage.json"), "{format}: {stdout}");
            }
            "csv" => assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with("a,tree,create,") && l.contains(",2,")),
                "{stdout}"
            ),
            _ => {
                let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
                let a = v["cells"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["testbed"] == "a" && c["phase"] == "create")
                    .unwrap();
                assert_eq!(a["metrics"][0]["summary"]["n"], 2, "{a}");
                assert!(v["warnings"][0].as_str().unwrap().contains("skipped"));
            }
        }
    }
    let out = sb
        .cmd()
        .arg("report")
        .arg(dir.path())
        .arg("--strict")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--strict"), "{stderr}");
    assert_names_each(&stderr, &damaged);
}

#[test]
fn compare_names_damaged_result_files_and_refuses_under_strict() {
    let (dir, damaged) = damaged_results();
    let sb = Sandbox::new();
    let run = |strict: bool| {
        let mut c = sb.cmd();
        c.arg("compare").arg(dir.path()).arg(dir.path()).args([
            "--base-testbed",
            "a",
            "--new-testbed",
            "b",
        ]);
        if strict {
            c.arg("--strict");
        }
        c.output().unwrap()
    };
    let out = run(false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_names_each(&stderr, &damaged);
    let out = run(true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_names_each(&stderr, &damaged);
}

/// Issue 29 item 13: a result of a schema version this fsgauge does not read, in a results
/// directory, is left out with a warning naming it, as damaged files are (before: `report`
/// and `compare` exited 2 on it); --strict refuses it, and so does naming the file itself.
#[test]
fn an_unknown_schema_version_in_a_directory_is_a_named_warning() {
    let dir = tempfile::tempdir().unwrap();
    crate::report_fixtures::write_all(dir.path(), &crate::report_fixtures::tree_study());
    let future = dir.path().join("future.json");
    std::fs::write(&future, br#"{"schema":"fsgauge.run/999"}"#).unwrap();
    let sb = Sandbox::new();
    let report = |extra: &[&str]| {
        sb.cmd()
            .arg("report")
            .arg(dir.path())
            .args(["--format", "md"])
            .args(extra)
            .output()
            .unwrap()
    };
    let compare = |extra: &[&str]| {
        sb.cmd()
            .arg("compare")
            .arg(dir.path())
            .arg(dir.path())
            .args(["--base-testbed", "a", "--new-testbed", "b"])
            .args(extra)
            .output()
            .unwrap()
    };
    let named = |stderr: &str| {
        stderr
            .lines()
            .any(|l| l.contains(&*future.to_string_lossy()) && l.contains("\"fsgauge.run/999\""))
    };
    for (what, out) in [("report", report(&[])), ("compare", compare(&[]))] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{what}: {stderr}");
        assert!(
            stderr.contains("warning: skipped") && named(&stderr),
            "{what}: {stderr}"
        );
        if what == "report" {
            // Every run of the study is still counted: 3 per testbed.
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.contains("(n=3)"), "{stdout}");
        }
    }
    for (what, out) in [
        ("report --strict", report(&["--strict"])),
        ("compare --strict", compare(&["--strict"])),
    ] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
        assert!(
            stderr.contains("--strict") && named(&stderr),
            "{what}: {stderr}"
        );
    }
    let out = sb.cmd().arg("report").arg(&future).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(named(&stderr), "{stderr}");
}

// ---- aging that does not reach its checkpoint ----

#[test]
fn age_short_of_its_checkpoint_exits_1_and_still_writes_the_result() {
    if !crate::support::have_root() || !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    // 64 inodes: creating 4K files runs out of inodes (ENOSPC) long before 30%.
    let out = sb
        .bench(&[
            "age",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--mkfs-opts",
            "-N 64",
            "--usage",
            "30,60",
            "--dist",
            "fixed:4K",
            "--seed",
            "1",
            "--quiet",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("short of the 30% checkpoint") && stderr.contains("% used"),
        "{stderr}"
    );
    let files: Vec<_> = std::fs::read_dir(sb.out())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    let reached = doc["phases"][0]["extra"]["usage_pct"].as_f64().unwrap();
    assert!(
        stderr.contains(&format!("{reached:.1}% used")),
        "the message should quote the usage reached ({reached:.1}%): {stderr}"
    );
    sb.assert_clean();
}

// ---- fdtree: the message blames the parameters really at fault, with the values given ----

#[test]
fn fdtree_too_deep_and_wide_blames_both_parameters_with_their_values() {
    let sb = Sandbox::new();
    let plan = sb.path().join("fd.toml");
    std::fs::write(
        &plan,
        "name = \"fd\"\n\n[[testbed]]\nfs = \"ext4\"\nsize = \"256M\"\n\n[[workload]]\nkind = \"fdtree\"\nlevels = 1000\ndirs_per_level = 1000\n",
    )
    .unwrap();
    let out = sb
        .bench(&["run", plan.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`levels`") && stderr.contains("`dirs_per_level`"),
        "both parameters are at fault: {stderr}"
    );
    assert!(
        stderr.contains("L=1000 D=1000") && !stderr.contains("L=4"),
        "the values given, not the defaults: {stderr}"
    );
    let out = sb
        .bench(&[
            "bench",
            "fdtree",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--levels",
            "1000",
            "--dirs-per-level",
            "1000",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--levels 1000") && stderr.contains("--dirs-per-level 1000"),
        "{stderr}"
    );
    sb.assert_clean();
}

// ---- external journal sizes: the real minimum per filesystem and block size ----

#[test]
fn journals_below_the_filesystems_minimum_are_refused_with_it() {
    let sb = Sandbox::new();
    let tree = ["--dirs", "1", "--files", "1", "--file-size", "4K"];
    let args = |fs: &str, size: &str, mkfs: Option<&str>, journal: &str| {
        let mut a: Vec<String> = [
            "bench",
            "tree",
            "--fs",
            fs,
            "--fs-size",
            size,
            "--journal",
            journal,
        ]
        .map(String::from)
        .to_vec();
        if let Some(m) = mkfs {
            a.extend(["--mkfs-opts".to_string(), m.to_string()]);
        }
        a.extend(tree.map(String::from));
        a
    };
    for (fs, size, mkfs, journal, needles) in [
        // mke2fs takes 1M, but 1024 blocks of 4K are 4M, and JBD2 wants 4K more.
        (
            "ext4",
            "64M",
            None,
            "ram:1M",
            &["ram:4100K", "1024 blocks of 4096 bytes"][..],
        ),
        ("ext4", "64M", None, "ram:4M", &["ram:4100K"][..]),
        (
            "ext4",
            "64M",
            Some("-b 1024"),
            "ram:1M",
            &["ram:1028K", "1024 bytes"][..],
        ),
        (
            "ext3",
            "64M",
            Some("-b 2048"),
            "file:2M",
            &["file:2052K"][..],
        ),
        ("xfs", "320M", None, "ram:32M", &["ram:64M", "mkfs.xfs"][..]),
        (
            "btrfs",
            "320M",
            None,
            "ram:64M",
            &["no external journal"][..],
        ),
    ] {
        let a = args(fs, size, mkfs, journal);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        refused(&sb, &a, needles);
    }
}

#[test]
fn journals_at_the_minimum_mount() {
    if !crate::support::have_root() || !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    for (mkfs, journal) in [("-b 4096", "ram:4100K"), ("-b 1024", "ram:1028K")] {
        let out = sb
            .bench(&[
                "bench",
                "tree",
                "--fs",
                "ext4",
                "--fs-size",
                "64M",
                "--mkfs-opts",
                mkfs,
                "--journal",
                journal,
                "--dirs",
                "1",
                "--files",
                "1",
                "--file-size",
                "4K",
                "--quiet",
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{mkfs} {journal}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    sb.assert_clean();
}

// ---- the backing store: images that cannot be preallocated, and a store that fills ----

/// A small ext2 filesystem (no fallocate there) made by fsgauge itself as the backing store of
/// a nested testbed; returns its mount point. `testbed destroy h2store` removes it.
fn ext2_store(sb: &Sandbox) -> std::path::PathBuf {
    let out = sb
        .cmd()
        .args(["testbed", "create", "--fs", "ext2", "--fs-size", "96M"])
        .args(["--name", "store", "--workdir"])
        .arg(sb.workdir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mnt = stdout
        .lines()
        .find_map(|l| l.strip_prefix("mountpoint:"))
        .unwrap()
        .trim()
        .to_string();
    std::path::PathBuf::from(mnt)
}

fn destroy_store(sb: &Sandbox) {
    let out = sb
        .cmd()
        .args(["testbed", "destroy", "store"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_image_that_cannot_be_preallocated_is_reported() {
    if !crate::support::have_root()
        || !crate::support::have_fs("ext2")
        || !crate::support::have_fs("ext4")
    {
        return;
    }
    let sb = Sandbox::new();
    let store = ext2_store(&sb);
    let out = sb
        .cmd()
        .args(["bench", "tree", "--fs", "ext4", "--fs-size", "32M"])
        .args([
            "--dirs",
            "1",
            "--files",
            "2",
            "--file-size",
            "1M",
            "--json",
            "--quiet",
        ])
        .arg("--workdir")
        .arg(store.join("w"))
        .arg("--out")
        .arg(sb.out())
        .output()
        .unwrap();
    destroy_store(&sb);
    let doc = crate::support::json_of(&out);
    let errors: Vec<&str> = doc["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("could not be preallocated") && e.contains("(ext2)")),
        "{errors:?}"
    );
    sb.assert_clean();
}

#[test]
fn a_full_backing_store_is_named_as_the_cause() {
    if !crate::support::have_root()
        || !crate::support::have_fs("ext2")
        || !crate::support::have_fs("ext4")
    {
        return;
    }
    let sb = Sandbox::new();
    let store = ext2_store(&sb);
    let work = store.join("w");
    let child = sb
        .cmd()
        .args(["bench", "tree", "--fs", "ext4", "--fs-size", "64M"])
        .args([
            "--dirs",
            "1",
            "--files",
            "40",
            "--file-size",
            "1M",
            "--quiet",
        ])
        .arg("--workdir")
        .arg(&work)
        .arg("--out")
        .arg(sb.out())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // Stop the run as soon as its (sparse) image exists, leave the store only room for mkfs,
    // and let it go on: the workload's writes then outgrow the store.
    let started = std::time::Instant::now();
    let image = loop {
        let found = std::fs::read_dir(&work).ok().and_then(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path().join("fs.img"))
                .find(|p| p.exists())
        });
        if let Some(p) = found {
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
            break p;
        }
        assert!(started.elapsed().as_secs() < 30, "no image appeared");
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    let st = nix::sys::statvfs::statvfs(&store).unwrap();
    let free = st.blocks_available() as u64 * st.fragment_size() as u64;
    let filler = store.join("filler");
    let leave = 12u64 << 20;
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0xa5u8; 1 << 20];
        for _ in 0..free.saturating_sub(leave) >> 20 {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let out = child.wait_with_output().unwrap();
    std::fs::remove_file(&filler).unwrap();
    destroy_store(&sb);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("the backing store is full")
            && stderr.contains(&*store.to_string_lossy())
            && stderr.contains("(ext2)")
            && stderr.contains("free of"),
        "image {}: {stderr}",
        image.display()
    );
    sb.assert_clean();
}
