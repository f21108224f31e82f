//! Outputs and inputs a hostile local user can reach (issue 22, items 3, 5, 6, 7, 10, 13): atomic
//! writes never follow a planted symlink, result names never collide, nothing measured is lost
//! to an unwritable `--out`, readers take regular files of bounded size only, duplicates count
//! once. Tests that mount, chown or build testbeds need root (and loop devices, mkfs.ext4);
//! they skip with a printed reason otherwise.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::support::{skip, Sandbox};

const TREE: &[&str] = &[
    "bench",
    "tree",
    "--dirs",
    "2",
    "--files",
    "5",
    "--file-size",
    "4K",
    "--seed",
    "5",
    "--quiet",
];

/// `bench tree` on `dir` (made if missing) writing into `out`.
fn bench_tree(sb: &Sandbox, dir: &Path, out: &Path, extra: &[&str]) -> Command {
    std::fs::create_dir_all(dir).unwrap();
    let mut c = sb.cmd();
    c.args(TREE)
        .arg("--dir")
        .arg(dir)
        .arg("--out")
        .arg(out)
        .args(extra);
    c
}

/// The `*.json` files of a directory (not dot-files), sorted.
fn jsons(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every entry of a directory whose name starts with a dot (temporary files left behind).
fn dot_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

use crate::support::run_within;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn need_root() -> bool {
    is_root() || skip("needs root (mount, chown)")
}

// Item 5: three runs of the same spec within one second keep three results.
#[test]
fn result_names_never_collide() {
    let sb = Sandbox::new();
    let (dir, out) = (sb.path().join("d"), sb.out());
    for i in 0..3 {
        let o = bench_tree(&sb, &dir, &out, &[]).output().unwrap();
        assert!(o.status.success(), "run {i}: {}", stderr(&o));
    }
    let files = jsons(&out);
    assert_eq!(files.len(), 3, "three runs, three results: {files:?}");
    assert!(dot_files(&out).is_empty(), "{:?}", dot_files(&out));
}

// Item 6: the same run read twice (a path given twice, a copied file) counts once, with a
// warning naming both files, in `report` and `compare`.
#[test]
fn duplicate_results_count_once_with_a_warning() {
    let sb = Sandbox::new();
    let (dir, out) = (sb.path().join("d"), sb.out());
    let o = bench_tree(&sb, &dir, &out, &["--reps", "2"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let files = jsons(&out);
    assert_eq!(files.len(), 2);
    let ns = |o: &Output| -> Vec<u64> {
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut v = Vec::new();
        fn walk(x: &serde_json::Value, v: &mut Vec<u64>) {
            match x {
                serde_json::Value::Object(m) => {
                    if let Some(n) = m.get("n").and_then(|n| n.as_u64()) {
                        v.push(n);
                    }
                    m.values().for_each(|y| walk(y, v));
                }
                serde_json::Value::Array(a) => a.iter().for_each(|y| walk(y, v)),
                _ => {}
            }
        }
        walk(&doc, &mut v);
        v
    };
    let twice = sb
        .cmd()
        .arg("report")
        .arg(&out)
        .arg(&out)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(twice.status.success(), "{}", stderr(&twice));
    let n = ns(&twice);
    assert!(
        !n.is_empty() && n.iter().all(|&n| n == 2),
        "n per cell: {n:?}"
    );
    assert!(
        stderr(&twice).contains("records the same run as"),
        "{}",
        stderr(&twice)
    );

    let copy = out.join("zz-copy.json");
    std::fs::copy(&files[0], &copy).unwrap();
    let one = sb
        .cmd()
        .arg("report")
        .arg(&out)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(one.status.success(), "{}", stderr(&one));
    let n = ns(&one);
    assert!(
        !n.is_empty() && n.iter().all(|&n| n == 2),
        "n per cell: {n:?}"
    );
    let e = stderr(&one);
    assert!(
        e.contains(&copy.display().to_string()) && e.contains(&files[0].display().to_string()),
        "the warning names both files: {e}"
    );
    let cmp = sb
        .cmd()
        .arg("compare")
        .arg(&out)
        .arg(&out)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(cmp.status.success(), "{}", stderr(&cmp));
    assert!(
        stderr(&cmp).contains("records the same run as"),
        "{}",
        stderr(&cmp)
    );
    let doc = String::from_utf8_lossy(&cmp.stdout);
    assert!(!doc.contains("\"n\": 3"), "compare counted the copy: {doc}");
}

/// Issue 41, item 12: `--out` naming a regular file says what is wrong — it must be a
/// directory — where it said the file "is not a regular file".
#[test]
fn an_out_that_is_a_regular_file_is_told_to_be_a_directory() {
    let sb = Sandbox::new();
    let file = sb.path().join("results.txt");
    std::fs::write(&file, "notes").unwrap();
    let o = bench_tree(&sb, &sb.path().join("d"), &file, &[])
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&format!(
            "--out {} is a regular file, not a directory: --out names the directory the result files go into",
            file.display()
        )),
        "{e}"
    );
    assert!(!e.contains("not a regular file"), "{e}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "notes");
}

// Item 7: --out that cannot take results is refused before anything runs.
#[test]
fn an_unusable_out_is_refused_before_the_run() {
    let sb = Sandbox::new();
    let dir = sb.path().join("d");
    for (out, needle) in [
        ("/dev/null", "not a directory"),
        ("/proc", "kernel interface"),
        ("/sys/kernel", "kernel interface"),
    ] {
        let o = bench_tree(&sb, &dir, Path::new(out), &[]).output().unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "--out {out}: {e}");
        assert!(e.contains(out) && e.contains(needle), "--out {out}: {e}");
        assert!(!e.contains("File exists"), "--out {out}: {e}");
    }
    if !need_root() {
        return;
    }
    // A read-only filesystem: found by creating a temporary file, before the workload runs.
    let ro = sb.path().join("ro");
    std::fs::create_dir_all(&ro).unwrap();
    let m = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=1m", "fsgauge-test-ro"])
        .arg(&ro)
        .status()
        .unwrap();
    assert!(m.success());
    let o = bench_tree(&sb, &dir, &ro, &[]).output().unwrap();
    let _ = Command::new("umount").arg(&ro).status();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("not writable") && e.contains(&ro.display().to_string()),
        "{e}"
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "the workload ran"
    );
}

// Item 7: an --out that fills up during the run: the result is printed, saved in the state
// directory's unsaved/ (named in the message), exit 1, no temporary left.
#[test]
fn a_result_that_cannot_be_written_is_kept_with_exit_1() {
    if !need_root() {
        return;
    }
    let sb = Sandbox::new();
    let (dir, out) = (sb.path().join("d"), sb.path().join("small"));
    std::fs::create_dir_all(&out).unwrap();
    let m = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "fsgauge-test-full"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(m.success());
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Unmount(out.clone());
    let mut c = bench_tree(&sb, &dir, &out, &[]);
    c.env("FSGAUGE_TEST_PAUSE_AT", "result")
        .env("FSGAUGE_TEST_PAUSE_MS", "1500")
        .args(["--format", "table"]);
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Fill the results filesystem while the run pauses before writing its result.
    let mut err = child.stderr.take().unwrap();
    let fill = out.join("filler");
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        let mut filled = false;
        loop {
            let n = err.read(&mut buf).unwrap_or(0);
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
            if !filled && String::from_utf8_lossy(&all).contains("test pause at result") {
                filled = true;
                let _ = std::fs::write(&fill, vec![1u8; 1 << 20]);
            }
        }
        String::from_utf8_lossy(&all).into_owned()
    });
    let status = child.wait().unwrap();
    let mut stdout = String::new();
    use std::io::Read;
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let e = reader.join().unwrap();
    assert_eq!(status.code(), Some(1), "{e}");
    let unsaved = sb.state().join("unsaved");
    let kept = jsons(&unsaved);
    assert_eq!(kept.len(), 1, "{e}");
    assert!(
        e.contains(&kept[0].display().to_string()),
        "the message names it: {e}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&kept[0]).unwrap()).unwrap();
    assert_eq!(doc["schema"], "fsgauge.run/1");
    assert!(stdout.contains("create"), "the table is printed: {stdout}");
    assert!(dot_files(&out).is_empty(), "{:?}", dot_files(&out));
    assert_eq!(
        std::fs::metadata(&unsaved).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

/// Issue 29 item 11: with room in --out for one result of two, the second is saved in the
/// state directory's unsaved/, and the closing line counts what is in --out and names where
/// the other went (before: "2 result file(s) in OUT" with one there).
#[test]
fn the_closing_count_says_which_results_went_elsewhere() {
    if !need_root() {
        return;
    }
    let sb = Sandbox::new();
    let run = |out: &Path| {
        let dir = sb.path().join("d");
        std::fs::create_dir_all(&dir).unwrap();
        sb.cmd()
            .args(&TREE[..TREE.len() - 1])
            .args(["--reps", "2", "--format", "table", "--dir"])
            .arg(&dir)
            .arg("--out")
            .arg(out)
            .output()
            .unwrap()
    };
    // The room for one result: a result's size, rounded up to tmpfs's pages.
    let cal = sb.path().join("cal");
    let o = run(&cal);
    assert!(o.status.success(), "{}", stderr(&o));
    let size = jsons(&cal)
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .max()
        .unwrap();
    let room = (size + 512).div_ceil(4096) * 4096;
    assert!(
        room < 2 * size,
        "results of {size} bytes: two fit in {room}"
    );
    let out = sb.path().join("small");
    std::fs::create_dir_all(&out).unwrap();
    let m = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "fsgauge-test-full"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(m.success());
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Unmount(out.clone());
    std::fs::write(out.join("filler"), vec![1u8; (256 * 1024 - room) as usize]).unwrap();
    let o = run(&out);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    let unsaved = sb.state().join("unsaved");
    assert_eq!((jsons(&out).len(), jsons(&unsaved).len()), (1, 1), "{e}");
    let line = format!(
        "1 result file(s) in {}; 1 saved in {} (see the warning above)",
        out.display(),
        unsaved.display()
    );
    assert!(e.lines().any(|l| l == line), "no {line:?} in: {e}");
}

// Item 10: devices, FIFOs and huge files are refused promptly, by report, compare and run.
#[test]
fn readers_refuse_devices_fifos_and_huge_files() {
    let sb = Sandbox::new();
    let (dir, out) = (sb.path().join("d"), sb.out());
    let o = bench_tree(&sb, &dir, &out, &[]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    std::os::unix::fs::symlink("/dev/zero", out.join("zero.json")).unwrap();
    nix::unistd::mkfifo(
        &out.join("fifo.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let big = std::fs::File::create(out.join("big.json")).unwrap();
    big.set_len(300 << 20).unwrap();
    let mut c = sb.cmd();
    c.arg("report").arg(&out).args(["--format", "table"]);
    let r = run_within(
        c,
        20,
        "report on a directory with /dev/zero, a FIFO, a 300M file",
    );
    let e = stderr(&r);
    assert!(r.status.success(), "{e}");
    for needle in ["a character device", "a FIFO", "more than the"] {
        assert!(e.contains(needle), "{needle}: {e}");
    }
    let mut c = sb.cmd();
    c.arg("compare").arg(&out).arg(&out);
    let r = run_within(c, 20, "compare");
    assert!(r.status.success(), "{}", stderr(&r));

    let mut c = sb.cmd();
    c.arg("report").arg(out.join("fifo.json"));
    let r = run_within(c, 20, "report FIFO");
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("a FIFO"), "{}", stderr(&r));

    let plan = sb.path().join("plan.toml");
    nix::unistd::mkfifo(&plan, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let mut c = sb.cmd();
    c.arg("run").arg(&plan).arg("--dry-run");
    let r = run_within(c, 20, "run FIFO plan");
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("a FIFO"), "{}", stderr(&r));
}

// Item 13: a symlink loop as the plan is said to be one; frag --free on /proc says why on
// stderr.
#[test]
fn a_plan_symlink_loop_and_frag_free_proc_say_what_is_wrong() {
    let sb = Sandbox::new();
    let plan = sb.path().join("loop.toml");
    std::os::unix::fs::symlink(&plan, &plan).unwrap();
    let r = sb
        .cmd()
        .arg("run")
        .arg(&plan)
        .arg("--dry-run")
        .output()
        .unwrap();
    let e = stderr(&r);
    assert_eq!(r.status.code(), Some(2), "{e}");
    assert!(
        e.contains("ELOOP") && !e.contains("no such plan file"),
        "{e}"
    );

    let r = sb.cmd().args(["frag", "--free", "/proc"]).output().unwrap();
    let e = stderr(&r);
    assert_eq!(r.status.code(), Some(2), "{e}");
    assert!(e.contains("/proc") && e.contains("not supported"), "{e}");
}

// Item 13: `run --resume` sets a damaged result aside (saying so) and makes its run again;
// the directory then reports.
#[test]
fn resume_sets_a_damaged_result_aside() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let plan = sb.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"damaged\"\nreps = 1\n\n[[testbed]]\nlabel = \"e\"\nfs = \"ext4\"\nsize = \"{}\"\n\n[[workload]]\nkind = \"tree\"\ndirs = 2\nfiles = 4\nfile_size = \"4K\"\n",
            crate::support::size_of("ext4")
        ),
    )
    .unwrap();
    let first = sb
        .bench(&["run", plan.to_str().unwrap(), "--quiet"])
        .output()
        .unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    let files = jsons(&sb.out());
    assert_eq!(files.len(), 1);
    std::fs::write(&files[0], br#"{"schema": "fsgauge.run/1", "rep": "x"}"#).unwrap();
    let again = sb
        .bench(&["run", plan.to_str().unwrap(), "--resume"])
        .output()
        .unwrap();
    let e = stderr(&again);
    assert!(again.status.success(), "{e}");
    assert!(e.contains(".damaged") && e.contains("made again"), "{e}");
    assert!(files[0].with_extension("json.damaged").exists(), "{e}");
    let r = sb
        .cmd()
        .arg("report")
        .arg(sb.out())
        .arg("--format")
        .arg("table")
        .output()
        .unwrap();
    assert!(r.status.success(), "report after resume: {}", stderr(&r));
    sb.assert_clean();
}

// Item 3: a user who owns the output directory plants symlinks at every name root's report
// and results will use (the report's name, the old predictable temporary names for the next
// pids, the result names for the next seconds); a root-only victim stays byte-identical, the
// report is written, no result is lost.
#[test]
fn planted_symlinks_in_an_output_directory_are_never_followed() {
    if !need_root() {
        return;
    }
    let sb = Sandbox::new();
    let secret = sb.path().join("secret");
    std::fs::create_dir(&secret).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o700)).unwrap();
    let victim = secret.join("victim");
    std::fs::write(&victim, b"root's precious bytes\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = std::fs::read(&victim).unwrap();

    // The user's directory (nobody owns it; the plants are nobody's too).
    let user = sb.path().join("user");
    std::fs::create_dir(&user).unwrap();
    std::os::unix::fs::chown(&user, Some(65534), Some(65534)).unwrap();
    let plant = |name: &str| {
        let p = user.join(name);
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        std::os::unix::fs::lchown(&p, Some(65534), Some(65534)).unwrap();
    };

    // Learn the result name's tail from a run elsewhere (as a --dry-run by the user would).
    let (dir, probe) = (sb.path().join("d"), sb.path().join("probe"));
    let o = bench_tree(&sb, &dir, &probe, &[]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let name = jsons(&probe)[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let tail = &name[14..];
    let now = std::time::SystemTime::now();
    for s in 0..30u64 {
        let t = now + Duration::from_secs(s);
        let stamp: String = humantime::format_rfc3339_seconds(t)
            .to_string()
            .chars()
            .filter(|c| c.is_ascii_digit())
            .take(14)
            .collect();
        plant(&format!("{stamp}{tail}"));
    }
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .map(|s| s.trim().parse().unwrap_or(1))
        .unwrap_or(1);
    for pid in last..last + 2000 {
        plant(&format!(".report.html.tmp-{pid}"));
        plant(&format!(".fresh.html.tmp-{pid}"));
        plant(&format!(".{name}.tmp-{pid}"));
    }
    plant("report.html");

    let o = bench_tree(&sb, &dir, &user, &[]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // The link planted at the report's own name is the user's, leading to root's file:
    // refused (exit 2, naming it and its owner), and left as it is.
    let rep = sb
        .cmd()
        .arg("report")
        .arg(&probe)
        .arg("-o")
        .arg(user.join("report.html"))
        .output()
        .unwrap();
    let e = stderr(&rep);
    assert_eq!(rep.status.code(), Some(2), "{e}");
    assert!(e.contains("report.html") && e.contains("uid 65534"), "{e}");
    let md = std::fs::symlink_metadata(user.join("report.html")).unwrap();
    assert!(md.file_type().is_symlink(), "the planted link was left");
    // A free name beside the planted temporaries: written, and none of them followed.
    let rep = sb
        .cmd()
        .arg("report")
        .arg(&probe)
        .arg("-o")
        .arg(user.join("fresh.html"))
        .output()
        .unwrap();
    assert!(rep.status.success(), "{}", stderr(&rep));
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        before,
        "the victim was written"
    );
    let md = std::fs::symlink_metadata(user.join("fresh.html")).unwrap();
    assert!(md.file_type().is_file(), "the report is a file of its own");
    let real: Vec<PathBuf> = jsons(&user)
        .into_iter()
        .filter(|p| std::fs::symlink_metadata(p).unwrap().file_type().is_file())
        .collect();
    assert_eq!(real.len(), 1, "the result was written under a free name");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&real[0]).unwrap()).unwrap();
    assert_eq!(doc["schema"], "fsgauge.run/1");
    let temps: Vec<String> = dot_files(&user)
        .into_iter()
        .filter(|n| n.starts_with(".fsgauge-"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
}
