//! MPI runs: `mpirun -np 4 fsgauge bench fdtree|create|tio` against one rank of the same binary.
//!
//! Needs Open MPI or MPICH (`mpirun`, `mpicc`) and libclang (bindgen): the test builds the MPI
//! binary itself, once (`cargo build --features mpi --target-dir target/mpi`). Without them the
//! tests are skipped with a printed reason; under CI they fail. The failure tests also need root
//! (a small tmpfs to run out of space on).

use crate::support::{assert_schema, phase};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

const RANKS: usize = 4;

/// The MPI build of fsgauge, built once for all tests; `None` (after printing why) when this
/// machine cannot build or run it.
fn mpi_binary() -> Option<PathBuf> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        if !crate::support::have_program("mpirun") || !crate::support::have_program("mpicc") {
            return None;
        }
        if !have_libclang() {
            return None;
        }
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        // Beside the tests' own build (target/debug), whose lock `cargo test` holds.
        let main_profile = Path::new(env!("CARGO_BIN_EXE_fsgauge")).parent().unwrap();
        let target = main_profile.parent().unwrap().join("mpi");
        seed_from(main_profile, &target);
        let out = Command::new(env!("CARGO"))
            .current_dir(manifest)
            .args([
                "build",
                "--features",
                "mpi",
                "--bin",
                "fsgauge",
                "--target-dir",
            ])
            .arg(&target)
            .stdout(Stdio::null())
            .output()
            .expect("running cargo");
        assert!(
            out.status.success(),
            "cargo build --features mpi failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(target.join("debug").join("fsgauge"))
    })
    .clone()
}

/// Starts the MPI build from the compiled dependencies of the tests' own debug build (hard
/// links, so nothing is copied; cargo writes new units under new names), so that only the MPI
/// crates and fsgauge compile: well under a minute instead of every dependency again.
fn seed_from(main_profile: &Path, target: &Path) {
    let dest = target.join("debug");
    if dest.exists() || main_profile.file_name().is_none_or(|n| n != "debug") {
        return;
    }
    let partial = target.join("debug.seeding");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).unwrap();
    let mut ok = true;
    for (dir, how) in [("deps", "-al"), ("build", "-al"), (".fingerprint", "-r")] {
        if main_profile.join(dir).exists() {
            ok &= Command::new("cp")
                .arg(how)
                .arg(main_profile.join(dir))
                .arg(&partial)
                .status()
                .is_ok_and(|s| s.success());
        }
    }
    if ok {
        let _ = std::fs::rename(&partial, &dest);
    } else {
        // A full build then: slower, as correct.
        let _ = std::fs::remove_dir_all(&partial);
    }
}

/// libclang itself (libclang.so or libclang-N.so), not libclang-cpp: what bindgen loads.
fn have_libclang() -> bool {
    let is_libclang = |n: &str| {
        n.starts_with("libclang.so")
            || n.strip_prefix("libclang-")
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()) && r.contains(".so"))
    };
    let in_dir = |d: &Path| {
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| is_libclang(&e.file_name().to_string_lossy()))
    };
    let llvm = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("llvm-"))
        .any(|e| in_dir(&e.path().join("lib")));
    if llvm || in_dir(Path::new("/usr/lib/x86_64-linux-gnu")) || in_dir(Path::new("/usr/lib64")) {
        return true;
    }
    // The helper's skip-or-fail rule, with a name that is never on PATH.
    crate::support::have_program("libclang (bindgen needs it to build the mpi feature)")
}

fn mpirun(bin: &Path, np: usize, args: &[&str]) -> Command {
    let mut c = Command::new("mpirun");
    c.args(["--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(np.to_string())
        .arg(bin)
        .args(args)
        // Containers often forbid the cross-memory attach Open MPI uses for larger messages
        // on one host (the ranks' reports); plain copies work everywhere.
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
    c
}

fn run_ok(mut c: Command) -> Value {
    let out = c.output().expect("running");
    crate::support::json_of(&out)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// One rank (the MPI binary without mpirun) and 4 ranks of the same workload: every phase of
/// the 4-rank run holds exactly 4 times the operations and bytes, its merged histogram counts
/// every rank's operations, and it has one row per rank.
fn check_totals(bin: &Path, dir: &Path, args: &[&str]) -> (Value, Value) {
    let mut base: Vec<&str> = args.to_vec();
    let d = dir.to_str().unwrap();
    base.extend(["--dir", d, "--json", "--quiet", "--seed", "11"]);
    let out1 = dir.join("out1");
    let out4 = dir.join("out4");
    let mut one = Command::new(bin);
    one.args(&base).arg("--out").arg(&out1);
    let single = run_ok(one);
    assert!(
        single.get("mpi").is_none(),
        "one process without mpirun runs as before: {}",
        single["mpi"]
    );
    let mut args4 = base.clone();
    let o4 = out4.to_str().unwrap().to_string();
    args4.extend(["--out", &o4]);
    let multi = run_ok(mpirun(bin, RANKS, &args4));
    assert_schema(&multi);
    assert_schema(&single);
    let mpi = &multi["mpi"];
    assert_eq!(mpi["ranks"], RANKS as u64, "{mpi}");
    assert_eq!(mpi["rank_hosts"].as_array().unwrap().len(), RANKS);
    let ph1 = single["phases"].as_array().unwrap();
    let ph4 = multi["phases"].as_array().unwrap();
    assert_eq!(ph1.len(), ph4.len());
    for (a, b) in ph1.iter().zip(ph4) {
        let name = a["name"].as_str().unwrap();
        assert_eq!(b["name"], name);
        assert_eq!(u(&b["ops"]), RANKS as u64 * u(&a["ops"]), "{name} ops");
        assert_eq!(
            u(&b["bytes"]),
            RANKS as u64 * u(&a["bytes"]),
            "{name} bytes"
        );
        let ranks = b["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), RANKS, "{name}");
        let rank_counts: u64 = ranks.iter().map(|r| u(&r["latency"]["count"])).sum();
        assert_eq!(
            u(&b["latency"]["count"]),
            rank_counts,
            "{name} merged histogram"
        );
        assert_eq!(u(&b["latency"]["count"]), u(&b["ops"]), "{name}");
        for r in ranks {
            assert_eq!(r["ops"], a["ops"], "{name}: rank {} ops", r["rank"]);
        }
        for (op, s) in a["op_stats"].as_object().unwrap() {
            assert_eq!(
                u(&b["op_stats"][op]["count"]),
                RANKS as u64 * u(&s["count"]),
                "{name}/{op}"
            );
            assert_eq!(
                u(&b["op_stats"][op]["latency"]["count"]),
                u(&b["op_stats"][op]["count"]),
                "{name}/{op} merged histogram"
            );
        }
        let first = b["first_done_s"].as_f64().unwrap();
        let slowest = ranks
            .iter()
            .map(|r| r["wall_s"].as_f64().unwrap())
            .fold(0.0, f64::max);
        assert!(first <= b["wall_s"].as_f64().unwrap(), "{name}");
        assert_eq!(b["wall_s"].as_f64().unwrap(), slowest, "{name}");
    }
    // One result file, written by rank 0, and nothing left in the directory.
    let results = std::fs::read_dir(&out4)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .count();
    assert_eq!(results, 1);
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("fsgauge-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    (single, multi)
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("fsgauge-mpi-")
        .tempdir_in("/var/tmp")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

#[test]
fn fdtree_on_four_ranks_is_four_times_one() {
    let Some(bin) = mpi_binary() else { return };
    let dir = tempdir();
    let args = [
        "bench",
        "fdtree",
        "--levels",
        "2",
        "--dirs-per-level",
        "3",
        "--files-per-dir",
        "4",
        "--file-size",
        "8K",
        "--threads",
        "2",
        "--stat",
        "--read",
    ];
    let (_, multi) = check_totals(&bin, dir.path(), &args);
    assert_eq!(multi["mpi"]["dir_mode"], "unique-dir");
    assert_eq!(u(&phase(&multi, "file_create")["ops"]), 4 * 2 * 13 * 4);
}

#[test]
fn create_on_four_ranks_is_four_times_one() {
    let Some(bin) = mpi_binary() else { return };
    let dir = tempdir();
    let args = [
        "bench",
        "create",
        "--files",
        "150",
        "--threads",
        "2",
        "--files-per-dir",
        "50",
        "--file-size",
        "6K",
        "--block",
        "4K",
    ];
    let (_, multi) = check_totals(&bin, dir.path(), &args);
    let c = phase(&multi, "create");
    assert_eq!(u(&c["ops"]), 4 * 2 * 150);
    assert_eq!(u(&c["op_stats"]["write"]["count"]), 4 * 2 * 150 * 2);
    assert_eq!(c["extra"]["files"].as_f64(), Some(1200.0));
}

#[test]
fn tio_on_four_ranks_is_four_times_one() {
    let Some(bin) = mpi_binary() else { return };
    let dir = tempdir();
    let args = [
        "bench",
        "tio",
        "--threads",
        "1,2",
        "--mode",
        "seqwrite,randread",
        "--block",
        "4K",
        "--file-size",
        "256K",
        "--shared-file",
        "--shared-dir",
        "--verify",
    ];
    let (_, multi) = check_totals(&bin, dir.path(), &args);
    // One shared file for all 8 threads of the 4 ranks, each on its own region, verified.
    assert_eq!(multi["mpi"]["dir_mode"], "shared-dir");
    let w = phase(&multi, "seqwrite-4K-t2");
    assert_eq!(u(&w["bytes"]), 4 * 2 * 256 * 1024);
    assert_eq!(w["extra"]["threads"].as_f64(), Some(8.0));
    assert_eq!(w["extra"]["complete"].as_f64(), Some(1.0));
}

/// dbench-style clients in one shared directory: client numbers run across the ranks, so the
/// 8 clients' directories do not collide, and the totals are 4 times one rank's.
#[test]
fn clients_on_four_ranks_in_one_directory_are_four_times_one() {
    let Some(bin) = mpi_binary() else { return };
    let dir = tempdir();
    let args = [
        "bench",
        "clients",
        "--clients",
        "2",
        "--loops",
        "1",
        "--mix-ops",
        "300",
        "--shared-dir",
    ];
    let (_, multi) = check_totals(&bin, dir.path(), &args);
    assert_eq!(multi["mpi"]["dir_mode"], "shared-dir");
    assert_eq!(
        phase(&multi, "clients-2")["extra"]["clients"].as_f64(),
        Some(8.0)
    );
}

#[test]
fn shared_dir_puts_every_rank_in_one_directory() {
    let Some(bin) = mpi_binary() else { return };
    let dir = tempdir();
    let list = dir.path().join("tree.txt");
    let mut args = vec![
        "bench",
        "fdtree",
        "--levels",
        "1",
        "--dirs-per-level",
        "2",
        "--files-per-dir",
        "3",
        "--file-size",
        "4K",
        "--shared-dir",
        "--json",
        "--quiet",
        "--dir",
    ];
    let d = dir.path().to_str().unwrap();
    let l = list.to_str().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    args.extend([d, "--tree-list", l, "--out", o]);
    let r = run_ok(mpirun(&bin, RANKS, &args));
    assert_eq!(r["mpi"]["dir_mode"], "shared-dir");
    assert_eq!(u(&phase(&r, "file_create")["ops"]), 4 * 3 * 3);
    // Rank 0 listed the one shared directory: every rank's tree, numbered across ranks.
    let text = std::fs::read_to_string(&list).unwrap();
    let tops: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("d\t"))
        .filter(|p| !p.contains('/'))
        .collect();
    let mut tops = tops;
    tops.sort_unstable();
    assert_eq!(
        tops,
        ["LEVEL0.0", "LEVEL0.1", "LEVEL0.2", "LEVEL0.3"],
        "{text}"
    );
}

/// The stonewall cuts a long create phase on every rank soon after the limit; the counts are
/// what was done, and the remove phase removes exactly those files.
#[test]
fn stonewall_stops_every_rank_and_counts_what_was_done() {
    let Some(bin) = mpi_binary() else { return };
    let dir = tempdir();
    let d = dir.path().to_str().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let t0 = Instant::now();
    let r = run_ok(mpirun(
        &bin,
        RANKS,
        &[
            "bench",
            "create",
            "--files",
            "5000000",
            "--file-size",
            "0",
            "--stonewall",
            "1s",
            "--dir",
            d,
            "--out",
            o,
            "--json",
            "--quiet",
        ],
    ));
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    assert_schema(&r);
    let c = phase(&r, "create");
    assert_eq!(c["stonewall_s"].as_f64(), Some(1.0));
    assert_eq!(r["mpi"]["stonewall_s"].as_f64(), Some(1.0));
    let made = u(&c["ops"]);
    assert!(made > 0 && made < 4 * 5_000_000, "{made}");
    for rank in c["ranks"].as_array().unwrap() {
        assert_eq!(rank["stonewalled"], true, "{rank}");
        let w = rank["wall_s"].as_f64().unwrap();
        assert!((0.9..5.0).contains(&w), "rank wall {w}");
    }
    assert_eq!(c["extra"]["files"].as_f64(), Some(made as f64));
    let rm = phase(&r, "remove");
    assert_eq!(u(&rm["ops"]), made, "remove takes exactly the files made");
    assert!(rm.get("stonewall_s").is_none());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("fsgauge-"))
        .collect();
    assert!(left.is_empty());
}

/// mdtest -N: the stat and read phases of rank r go over rank r+1's files. Cut file creation at
/// a stonewall so that every rank's tree holds a different number of files: rank r then stats
/// and reads exactly as many files as rank r+1 made.
#[test]
fn read_neighbour_reads_the_next_ranks_files() {
    let Some(bin) = mpi_binary() else { return };
    let dir = tempdir();
    let d = dir.path().to_str().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let r = run_ok(mpirun(
        &bin,
        RANKS,
        &[
            "bench",
            "fdtree",
            "--levels",
            "1",
            "--dirs-per-level",
            "2",
            "--files-per-dir",
            "1000000",
            "--file-size",
            "0",
            "--stat",
            "--read",
            "--read-neighbour",
            "--stonewall",
            "1s",
            "--dir",
            d,
            "--out",
            o,
            "--json",
            "--quiet",
        ],
    ));
    assert_eq!(r["mpi"]["read_neighbour"], true);
    let made: Vec<u64> = phase(&r, "file_create")["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| u(&x["ops"]))
        .collect();
    for name in ["stat", "read"] {
        let seen: Vec<u64> = phase(&r, name)["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| u(&x["ops"]))
            .collect();
        let expect: Vec<u64> = (0..RANKS).map(|k| made[(k + 1) % RANKS]).collect();
        assert_eq!(
            seen, expect,
            "{name}: rank r goes over rank r+1's files ({made:?})"
        );
    }
    let removed: Vec<u64> = phase(&r, "file_remove")["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| u(&x["ops"]))
        .collect();
    assert_eq!(removed, made, "each rank removes its own files");
}

/// A rank running out of space stops the job with an error naming the rank (exit 1), and no
/// rank hangs.
#[test]
fn a_failing_rank_ends_the_job_naming_it() {
    let Some(bin) = mpi_binary() else { return };
    if !crate::support::have_root() {
        return;
    }
    let dir = tempdir();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=3m", "tmpfs"])
        .arg(&small)
        .status()
        .unwrap();
    assert!(st.success());
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Unmount(small.clone());
    let out = dir.path().join("out");
    let t0 = Instant::now();
    let o = mpirun(
        &bin,
        RANKS,
        &[
            "bench",
            "tio",
            "--threads",
            "1",
            "--mode",
            "seqwrite",
            "--block",
            "64K",
            "--file-size",
            "1M",
            "--dir",
            small.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(t0.elapsed() < Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("fsgauge: error: phase seqwrite-64K-t1: rank ")
            && err.contains("No space left"),
        "{err}"
    );
    assert_eq!(
        err.matches("fsgauge: error:").count(),
        1,
        "rank 0 alone reports: {err}"
    );
    assert_eq!(
        std::fs::read_dir(&small).unwrap().count(),
        0,
        "nothing left"
    );
}

/// A killed rank ends the whole job (through mpirun, naming the rank), not a hang.
#[test]
fn a_killed_rank_ends_the_job() {
    let Some(bin) = mpi_binary() else { return };
    let dir = tempdir();
    let out = dir.path().join("out");
    let mut child = mpirun(
        &bin,
        RANKS,
        &[
            "bench",
            "create",
            "--files",
            "5000000",
            "--file-size",
            "0",
            "--stonewall",
            "60s",
            "--dir",
            dir.path().to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Rank 2: a descendant of this mpirun with OMPI_COMM_WORLD_RANK=2 (or PMI_RANK=2).
    let t0 = Instant::now();
    let victim = loop {
        if let Some(p) = find_rank(child.id(), 2) {
            break p;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "rank 2 never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(1500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let t1 = Instant::now();
    let o = loop {
        if let Some(_st) = child.try_wait().unwrap() {
            break child.wait_with_output().unwrap();
        }
        if t1.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the job hung after rank 2 was killed");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("rank 2"), "{err}");
}

/// The descendant of `root` that is MPI rank `rank`.
fn find_rank(root: u32, rank: u32) -> Option<u32> {
    let want = [
        format!("OMPI_COMM_WORLD_RANK={rank}"),
        format!("PMI_RANK={rank}"),
    ];
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if !descends_from(pid, root) {
            continue;
        }
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let hit = env
            .split(|&b| b == 0)
            .any(|v| want.iter().any(|w| v == w.as_bytes()));
        if hit {
            return Some(pid);
        }
    }
    None
}

fn descends_from(mut pid: u32, root: u32) -> bool {
    for _ in 0..16 {
        if pid == root {
            return true;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // The parent is the second field after the parenthesized command name.
        let Some(after) = stat.rsplit_once(')').map(|x| x.1) else {
            return false;
        };
        match after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            Some(pp) if pp != pid && pp > 0 => pid = pp,
            _ => return false,
        }
    }
    false
}

/// Under mpirun with several ranks, a testbed (--fs) is refused before anything is made.
#[test]
fn testbeds_are_refused_for_several_ranks() {
    let Some(bin) = mpi_binary() else { return };
    let dir = tempdir();
    let o = mpirun(
        &bin,
        2,
        &[
            "bench",
            "create",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--workdir",
            dir.path().to_str().unwrap(),
            "--out",
            dir.path().join("out").to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("give --dir PATH"), "{err}");
    assert_eq!(err.matches("fsgauge: error:").count(), 1, "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn read_neighbour_without_mpirun_and_tree_under_mpirun_are_refused() {
    let Some(bin) = mpi_binary() else { return };
    let dir = tempdir();
    let d = dir.path().to_str().unwrap();
    let o = Command::new(&bin)
        .args(["bench", "fdtree", "--read-neighbour", "--dir", d, "--stat"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("mpirun -np N"));
    let o = mpirun(&bin, 2, &["bench", "tree", "--dir", d])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("bench tree has no MPI mode"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn version_says_whether_mpi_is_built_in() {
    let o = Command::new(env!("CARGO_BIN_EXE_fsgauge"))
        .arg("--version")
        .output()
        .unwrap();
    let v = String::from_utf8_lossy(&o.stdout);
    assert!(v.contains("MPI: not built in"), "{v}");
    let Some(bin) = mpi_binary() else { return };
    let o = Command::new(bin).arg("--version").output().unwrap();
    let v = String::from_utf8_lossy(&o.stdout);
    assert!(v.contains("MPI: built in"), "{v}");
}

/// Plans take `ranks` as documentation of the MPI job; `--dry-run` shows it (no MPI needed).
#[test]
fn plans_show_their_ranks_in_a_dry_run() {
    let dir = tempdir();
    let plan = dir.path().join("p.toml");
    std::fs::write(
        &plan,
        "name = \"mpi-doc\"\n[[testbed]]\nlabel = \"ext4\"\nfs = \"ext4\"\nsize = \"256M\"\n\n[[workload]]\nkind = \"create\"\nfiles = 100\nranks = 8\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_fsgauge"))
        .args(["run", "--dry-run", "--out"])
        .arg(dir.path().join("out"))
        .arg(&plan)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains("create files=100 ranks=8"), "{text}");
    assert!(text.contains("mpirun -np 8 fsgauge bench create"), "{text}");
    std::fs::write(
        &plan,
        std::fs::read_to_string(&plan)
            .unwrap()
            .replace("ranks = 8", "ranks = \"many\""),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_fsgauge"))
        .args(["run", "--dry-run"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("field `ranks`"));
}
