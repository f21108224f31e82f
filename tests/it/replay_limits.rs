//! Replay logs, the exerciser's outputs and loadfiles under the rules every input follows
//! (issue 41, items 2, 9 and 12): a log's `# params` header obeys the limits of the flags it
//! records, and an operation no file can take (a copy onto itself) is the log's fault; the
//! `--log` directory and the `--minimize` output are settled before any work; a loadfile that
//! uses a handle it never opened is refused on its line; `--crash-at` without an emulated disk
//! names the flag given. Each refusal is exit 2 naming the file, line and field, before
//! anything is made. All but the last run in a directory, without root.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{assert_refused, have_root, Sandbox};

const MAGIC: &str = "# fsgauge exercise replay log v1";

/// A replay log with these `# params` and steps, written in the sandbox.
pub fn log_with(sb: &Sandbox, name: &str, params: &str, steps: &str) -> PathBuf {
    let p = sb.path().join(name);
    std::fs::write(&p, format!("{MAGIC}\n# seed 7\n# params {params}\n{steps}")).unwrap();
    p
}

/// `fsgauge exercise --dir D --out OUT ARGS…` with D made empty first.
fn exercise_in(sb: &Sandbox, d: &Path, args: &[&str]) -> Output {
    std::fs::create_dir_all(d).unwrap();
    sb.cmd()
        .arg("exercise")
        .arg("--dir")
        .arg(d)
        .arg("--out")
        .arg(sb.out())
        .args(args)
        .output()
        .unwrap()
}

/// Refused as bad input with every needle, and nothing made: no results, nothing in `d`.
fn refused_here(sb: &Sandbox, d: &Path, out: &Output, what: &str, needles: &[&str]) {
    assert_refused(out, what, needles);
    assert!(!sb.out().exists(), "{what}: a result directory was made");
    let left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "{what}: left in the directory: {left:?}");
    sb.assert_clean();
}

#[test]
fn a_replay_header_past_the_flags_limits_is_refused_before_anything() {
    let sb = Sandbox::new();
    let d = sb.path().join("d");
    let max = u64::MAX;
    // Before: SIGSEGV in memcpy (exit 139, a panic in a debug build), a panic at
    // model.rs:57, an abort allocating 4 EiB.
    for (i, (params, step, field, needle)) in [
        (
            format!(r#"{{"max_len":{max},"max_op_len":{max}}}"#),
            "1 write 0x1000000000 0x10",
            "max_len",
            "is over 16",
        ),
        (
            format!(r#"{{"max_len":{max},"max_op_len":{max}}}"#),
            "1 write 0x0 0x100000000",
            "max_len",
            "is over 16",
        ),
        (
            r#"{"max_len":4611686018427387904}"#.to_string(),
            "1 write 0x0 0x10",
            "max_len",
            "is over 16",
        ),
        (
            r#"{"max_len":4096,"max_op_len":8192}"#.to_string(),
            "1 write 0x0 0x10",
            "max_op_len",
            "larger than --max-len",
        ),
        (
            r#"{"procs":0}"#.to_string(),
            "1 write 0x0 0x10",
            "procs",
            "1 or more",
        ),
        (
            r#"{"log":"/proc/self"}"#.to_string(),
            "1 write 0x0 0x10",
            "log",
            "names no log",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let log = log_with(&sb, &format!("h{i}.log"), &params, &format!("{step}\n"));
        let out = exercise_in(&sb, &d, &["--replay", log.to_str().unwrap()]);
        let at = format!(
            "--replay {} line 3: params field \"{field}\"",
            log.display()
        );
        refused_here(&sb, &d, &out, &params, &[&at, needle]);
    }
}

#[test]
fn an_operation_no_file_can_take_is_the_logs_fault() {
    let sb = Sandbox::new();
    let d = sb.path().join("d");
    // Before: exit 1, a "failure" blamed on the filesystem, with a run made.
    let log = log_with(
        &sb,
        "self-copy.log",
        r#"{"max_len":1048576}"#,
        "1 write 0x0 0x2000\n2 copy 0x0 0x1000 0x800\n",
    );
    let out = exercise_in(&sb, &d, &["--replay", log.to_str().unwrap()]);
    let at = format!("--replay {} line 5: copy 0x0 0x1000 0x800", log.display());
    refused_here(&sb, &d, &out, "an overlapping self-copy", &[&at, "overlap"]);
}

#[test]
fn the_log_directory_is_settled_before_the_run() {
    let sb = Sandbox::new();
    let d = sb.path().join("d");
    let fifo = sb.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let file = sb.path().join("file");
    std::fs::write(&file, "x").unwrap();
    // Before: /proc/self failed after the run (exit 1); the others likewise, or not at all.
    for (dir, needle) in [
        (PathBuf::from("/proc/self"), "kernel interface"),
        (
            PathBuf::from("/sys/kernel/fsgauge-logs"),
            "kernel interface",
        ),
        (PathBuf::from("/dev/null"), "a character device"),
        (fifo.clone(), "a FIFO"),
        (file.clone(), "not a directory"),
    ] {
        let out = exercise_in(&sb, &d, &["--ops", "50", "--log", dir.to_str().unwrap()]);
        let flag = format!("--log {}", dir.display());
        refused_here(&sb, &d, &out, &flag, &[&flag, needle]);
    }
}

#[test]
fn the_minimize_output_is_settled_before_any_candidate_runs() {
    let sb = Sandbox::new();
    let d = sb.path().join("d");
    let log = log_with(&sb, "a.log", r#"{"max_len":65536}"#, "1 write 0x0 0x1000\n");
    let fifo = sb.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let mut outs = vec![
        (PathBuf::from("/dev/null"), "a character device".to_string()),
        (fifo.clone(), "a FIFO".into()),
        (sb.path().to_path_buf(), "is a directory".into()),
        (
            PathBuf::from("/sys/kernel/min.log"),
            "kernel interface".into(),
        ),
        (sb.path().join("missing/min.log"), "does not exist".into()),
    ];
    if nix::unistd::geteuid().is_root() {
        // nobody's directory with nobody's link to a root-only one: OUT through it.
        let vault = sb.path().join("vault");
        std::fs::create_dir(&vault).unwrap();
        let att = sb.path().join("nobody");
        std::fs::create_dir(&att).unwrap();
        std::os::unix::fs::symlink(&vault, att.join("to-vault")).unwrap();
        for p in [att.join("to-vault"), att.clone()] {
            std::os::unix::fs::lchown(&p, Some(65534), Some(65534)).unwrap();
        }
        outs.push((att.join("to-vault/min.log"), "to-vault".into()));
    }
    for (out_path, needle) in outs {
        let out = exercise_in(
            &sb,
            &d,
            &[
                "--replay",
                log.to_str().unwrap(),
                "--crash-shutdown",
                "--minimize",
                out_path.to_str().unwrap(),
            ],
        );
        let flag = format!("--minimize {}", out_path.display());
        refused_here(&sb, &d, &out, &flag, &[&flag, &needle]);
    }
}

#[test]
fn a_loadfile_handle_never_opened_is_refused_on_its_line() {
    let sb = Sandbox::new();
    let d = sb.path().join("d");
    std::fs::create_dir_all(&d).unwrap();
    let lf = sb.path().join("handles.txt");
    std::fs::write(
        &lf,
        "NTCreateX \"\\clients\\client1\\a\" 0x0 0x2 7 NT_STATUS_OK\nWriteX 7 0 16 16 NT_STATUS_OK\nClose 7 NT_STATUS_OK\nReadX 7 0 16 16 NT_STATUS_OK\n",
    )
    .unwrap();
    // Before: the run stopped at line 4, exit 1 (the filesystem blamed).
    let out = sb
        .cmd()
        .args(["bench", "clients", "--dir"])
        .arg(&d)
        .args(["--clients", "1", "--loops", "1", "--out"])
        .arg(sb.out())
        .arg("--loadfile")
        .arg(&lf)
        .output()
        .unwrap();
    let at = format!("loadfile {} line 4: ReadX uses handle 7", lf.display());
    refused_here(&sb, &d, &out, "a closed handle", &[&at]);
}

#[test]
fn crash_at_without_an_emulated_disk_names_itself_and_the_device_model() {
    if !have_root() {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .bench(&[
            "exercise",
            "--fs",
            "ext4",
            "--fs-size",
            "64M",
            "--ops",
            "10",
            "--crash-at",
            "5",
        ])
        .output()
        .unwrap();
    assert_refused(
        &out,
        "--crash-at alone",
        &["--crash-at needs", "--device-model"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("--crash-points"), "{err}");
    assert!(!sb.out().exists());
    sb.assert_clean();
}
