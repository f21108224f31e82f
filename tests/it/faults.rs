//! Fault injection: SIGINT, SIGTERM and SIGKILL at random moments of every long-running command,
//! many times over. After each try nothing of the run is left (loop device, mount, memory
//! cgroup, image, ledger entry, work directory; after SIGKILL once `testbed cleanup` has run),
//! every result file parses, a result kept after the signal is named as complete on stderr, and
//! the exit code is 130/143 — or the run's own code when the signal came after it had ended.
//!
//! The moments are chosen two ways: at a random delay from the start, and deliberately inside
//! the narrow windows (mkfs, mount, result writing, teardown) through fsgauge's debug-build hook
//! `FSGAUGE_TEST_PAUSE_AT` (see `src/base/signals.rs`), which announces the window on stderr and
//! holds it open for `FSGAUGE_TEST_PAUSE_MS`.
//!
//! Every try prints its seed; `FSGAUGE_FAULT_SEED=S` replays a whole sequence and
//! `FSGAUGE_FAULT_TRY=N` only its try N. `FSGAUGE_SOAK=N` makes N tries (default: a CI-sized
//! round: every command meets every signal twice, at a window or a random moment).
//!
//! Needs root, loop devices and mkfs.ext4/ext2/xfs/btrfs (skips with a reason otherwise, fails
//! under CI).

use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::support::{have_fs, leaks_under, Sandbox};

/// How long each pause window is held open.
const PAUSE_MS: u64 = 250;

/// One command under test: its arguments (the sandbox's `--workdir` and `--out` are added when
/// `sandboxed`), the windows it passes through, and about how long it runs unhindered.
struct Scenario {
    name: &'static str,
    args: Vec<String>,
    sandboxed: bool,
    points: &'static [&'static str],
    typical_ms: u64,
}

const TESTBED_POINTS: &[&str] = &["mkfs", "mount", "result", "teardown"];

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn scenarios(plan: &Path) -> Vec<Scenario> {
    let sc = |name, args: &str, points, typical_ms| Scenario {
        name,
        args: words(args),
        sandboxed: true,
        points,
        typical_ms,
    };
    vec![
        sc(
            "bench tree",
            "bench tree --fs ext4 --fs-size 64M --journal ram:16M --mem-limit 256M --dirs 2 --files 8 --file-size 64K --reps 2 --quiet",
            TESTBED_POINTS,
            1500,
        ),
        sc(
            "bench fdtree",
            "bench fdtree --fs xfs --fs-size 300M --levels 2 --dirs-per-level 2 --files-per-dir 3 --file-size 4K --quiet",
            TESTBED_POINTS,
            1500,
        ),
        sc(
            "bench interleave",
            "bench interleave --fs ext2 --fs-size 64M --dirs 10 --files 4 --file-size 1000 --quiet",
            TESTBED_POINTS,
            1000,
        ),
        sc(
            "bench create",
            "bench create --fs btrfs --fs-size 256M --files 100 --threads 2 --file-size 4K --quiet",
            TESTBED_POINTS,
            1500,
        ),
        sc(
            "bench tio",
            "bench tio --fs ext4 --fs-size 64M --threads 1 --mode seqwrite,randread --block 4K --file-size 1M --quiet",
            TESTBED_POINTS,
            1500,
        ),
        sc(
            "bench clients",
            "bench clients --fs ext4 --fs-size 64M --clients 1 --loops 1 --mix-files 10 --mix-ops 50 --quiet",
            TESTBED_POINTS,
            1500,
        ),
        Scenario {
            name: "run plan",
            args: vec!["run".into(), plan.display().to_string(), "--quiet".into()],
            sandboxed: true,
            points: TESTBED_POINTS,
            typical_ms: 2000,
        },
        sc(
            "age",
            "age --fs ext4 --fs-size 64M --usage 30 --tree 2x20 --seed 1 --quiet",
            TESTBED_POINTS,
            2000,
        ),
        sc(
            "study append",
            "study append --fs ext4 --fs-size 64M --usage 30 --append 4K --files 20 --quiet",
            &["mkfs", "mount", "result", "teardown"],
            3000,
        ),
        sc(
            "exercise",
            "exercise --fs ext4 --fs-size 64M --ops 3000 --remount-every 1000 --seed 3",
            TESTBED_POINTS,
            2000,
        ),
        Scenario {
            name: "testbed create",
            args: words("testbed create --fs ext4 --fs-size 64M --name fault"),
            sandboxed: false,
            points: &["mkfs", "mount"],
            typical_ms: 500,
        },
    ]
}

const PLAN: &str = r#"name = "faults"
reps = 2

[[testbed]]
label = "plain"
fs = "ext4"
size = "64M"

[[workload]]
kind = "tree"
dirs = 2
files = 4
file_size = "16K"
"#;

const SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGKILL];

/// What one try does, all drawn from its own seed.
#[derive(Debug)]
struct Try {
    scenario: usize,
    signal: Signal,
    /// A pause window to hit, or none (a delay from the start).
    point: Option<&'static str>,
    /// After the window opened (or from the start).
    delay: Duration,
    /// SIGINT/SIGTERM to the whole process group (as a terminal's Ctrl-C), or to fsgauge only.
    to_group: bool,
}

fn draw(rng: &mut ChaCha8Rng, all: &[Scenario], scenario: usize, signal: Signal) -> Try {
    let sc = &all[scenario];
    let point = if rng.gen_bool(0.6) {
        Some(sc.points[rng.gen_range(0..sc.points.len())])
    } else {
        None
    };
    let delay = match point {
        Some(_) => Duration::from_millis(rng.gen_range(0..PAUSE_MS + 30)),
        // From 20 ms on: before that the handlers may not be installed yet.
        None => Duration::from_millis(rng.gen_range(20..sc.typical_ms * 3 / 2)),
    };
    Try {
        scenario,
        signal,
        point,
        delay,
        to_group: signal == Signal::SIGKILL || rng.gen_bool(0.5),
    }
}

/// What a try found wrong; empty when all held.
fn run_try(sc: &Scenario, t: &Try, plan: &Path) -> Vec<String> {
    let sb = Sandbox::new();
    let mut cmd = if sc.sandboxed {
        let s: Vec<&str> = sc.args.iter().map(String::as_str).collect();
        sb.bench(&s)
    } else {
        let mut c = sb.cmd();
        c.args(&sc.args).arg("--workdir").arg(sb.workdir());
        c
    };
    let _ = plan;
    // Set even without a window, so that fsgauge says when its last check has passed.
    cmd.env("FSGAUGE_TEST_PAUSE_AT", t.point.unwrap_or(""))
        .env("FSGAUGE_TEST_PAUSE_MS", PAUSE_MS.to_string());
    cmd.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let pid = Pid::from_raw(child.id() as i32);
    let (tx, rx) = mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // Wait for the window (if any), then the delay, then the signal.
    let mut reached = t.point.is_none();
    if let Some(p) = t.point {
        let marker = format!("fsgauge: test pause at {p}");
        let deadline = started + Duration::from_secs(60);
        while Instant::now() < deadline {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(l) if l == marker => {
                    reached = true;
                    break;
                }
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if child.try_wait().unwrap().is_some() {
                        break;
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
    }
    std::thread::sleep(t.delay);
    let ended_before = child.try_wait().unwrap().is_some() || is_zombie(pid);
    let sent = if t.to_group {
        killpg(pid, t.signal)
    } else {
        kill(pid, t.signal)
    };
    // A process that had already ended (a zombie) counts as ended before the signal; so does
    // one that had passed its last check for a signal (below: it is ending with its own
    // status, and said so).
    let ended_before = ended_before || sent.is_err() || is_zombie(pid);
    let status = wait_or_kill(&mut child, Duration::from_secs(120));
    let stderr = reader.join().unwrap();
    let ended_before = ended_before || stderr.contains("fsgauge: test concluded");
    let mut wrong = Vec::new();
    let Some(status) = status else {
        wrong.push("did not end within 120 s of the signal (killed)".to_string());
        return wrong;
    };
    if t.point.is_some() && !reached && !status.success() {
        wrong.push(format!(
            "never reached its pause window and failed: {status:?}"
        ));
    }
    // Children (a mkfs that a SIGKILL orphaned) must be gone before cleanup.
    let t0 = Instant::now();
    while killpg(pid, None).is_ok() && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let code = status.code();
    match t.signal {
        Signal::SIGKILL => {
            if !(status.signal() == Some(libc::SIGKILL) || (ended_before && code == Some(0))) {
                wrong.push(format!("after SIGKILL: {status:?}"));
            }
            let out = sb.cmd().args(["testbed", "cleanup"]).output().unwrap();
            if !out.status.success() {
                wrong.push(format!(
                    "testbed cleanup failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        sig => {
            let want = 128 + sig as i32;
            let ok = code == Some(want) || (ended_before && code == Some(0));
            if !ok {
                wrong.push(format!("{sig}: exit {status:?}, wanted {want}"));
            }
            if code == Some(want) && !stderr.contains(&format!("interrupted by {sig}")) {
                wrong.push(format!("{sig}: stderr does not say so"));
            }
            let tmp = dot_tmp_files(&sb.out());
            if !tmp.is_empty() {
                wrong.push(format!("temporary result files left: {tmp:?}"));
            }
        }
    }
    // A kept testbed is the command's product, not a leftover: its owner removes it.
    if !sc.sandboxed && (code == Some(0) || stderr.contains("was made and kept")) {
        let out = sb
            .cmd()
            .args(["testbed", "destroy", "fault"])
            .output()
            .unwrap();
        if !out.status.success() {
            wrong.push(format!(
                "testbed destroy after create: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    if t.signal == Signal::SIGKILL && !sc.sandboxed {
        // SIGKILL after the hand-over leaves a kept (persistent) testbed, which cleanup
        // rightly leaves alone; it is the user's to destroy.
        let _ = sb.cmd().args(["testbed", "destroy", "fault"]).output();
    }
    wrong.extend(check_results(&sb.out(), code, &stderr));
    wrong.extend(leftovers(&sb, pid));
    if !wrong.is_empty() {
        wrong.push(format!("stderr:\n{stderr}"));
    }
    wrong
}

fn wait_or_kill(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if t0.elapsed() > limit {
            let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn is_zombie(pid: Pid) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

fn dot_tmp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with('.') && n.contains(".tmp-"))
                .collect()
        })
        .unwrap_or_default()
}

/// Every result file parses; after an interruption, each one is named as complete.
fn check_results(dir: &Path, code: Option<i32>, stderr: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return wrong;
    };
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".json") || name.starts_with('.') {
            continue;
        }
        let parsed = std::fs::read(e.path())
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
        match parsed {
            Some(v) if v["schema"] == "fsgauge.run/1" && v["phases"].is_array() => {}
            _ => wrong.push(format!("result {name} does not parse")),
        }
        if matches!(code, Some(130) | Some(143)) && !stderr.contains(&name) {
            wrong.push(format!(
                "result {name} was kept, but the interrupted run did not say it is complete"
            ));
        }
    }
    wrong
}

/// Loop devices, mounts, ledger entries and work files of the sandbox; RAM images and memory
/// cgroups of the run's process.
fn leftovers(sb: &Sandbox, pid: Pid) -> Vec<String> {
    let mut left = leaks_under(sb.path());
    let tag = format!("fsgauge-{pid}-");
    if let Ok(rd) = std::fs::read_dir("/dev/shm/fsgauge") {
        for e in rd.filter_map(|e| e.ok()) {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.contains(&format!("-{pid}-")) {
                left.push(format!("RAM image /dev/shm/fsgauge/{n}"));
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir("/sys/block") {
        for e in rd.filter_map(|e| e.ok()) {
            if let Ok(b) = std::fs::read_to_string(e.path().join("loop/backing_file")) {
                if b.contains("/dev/shm/fsgauge") && b.contains(&format!("-{pid}-")) {
                    left.push(format!("loop device over {}", b.trim()));
                }
            }
        }
    }
    for root in [
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup",
    ] {
        for d in [
            Path::new(root).to_path_buf(),
            Path::new(root).join("fsgauge"),
        ] {
            if let Ok(rd) = std::fs::read_dir(&d) {
                for e in rd.filter_map(|e| e.ok()) {
                    if e.file_name().to_string_lossy().starts_with(&tag) {
                        left.push(format!("cgroup {}", e.path().display()));
                    }
                }
            }
        }
    }
    let ledger = sb.state().join("ledger");
    if let Ok(rd) = std::fs::read_dir(&ledger) {
        for e in rd.filter_map(|e| e.ok()) {
            left.push(format!("ledger entry {}", e.path().display()));
        }
    }
    if let Ok(rd) = std::fs::read_dir(sb.workdir()) {
        for e in rd.filter_map(|e| e.ok()) {
            left.push(format!("work file {}", e.path().display()));
        }
    }
    left
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn signals_at_random_moments_leave_nothing_behind() {
    if !["ext4", "ext2", "xfs", "btrfs"].iter().all(|f| have_fs(f)) {
        return;
    }
    let plan_dir = tempfile::tempdir().unwrap();
    let plan = plan_dir.path().join("faults.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let all = scenarios(&plan);
    let seed = env_u64("FSGAUGE_FAULT_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    // By default every command meets every signal twice (about 80 s in a debug build).
    let tries = env_u64("FSGAUGE_SOAK").unwrap_or((2 * all.len() * SIGNALS.len()) as u64);
    let only = env_u64("FSGAUGE_FAULT_TRY");
    eprintln!("fault seed {seed} ({tries} tries): replay with FSGAUGE_FAULT_SEED={seed}");
    let t0 = Instant::now();
    let mut failures = Vec::new();
    let mut tally = std::collections::BTreeMap::<String, u32>::new();
    for i in 0..tries {
        if only.is_some_and(|o| o != i) {
            continue;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        // Round-robin over commands and signals, so that a short run still covers them all.
        let scenario = (i as usize) % all.len();
        let signal = SIGNALS[(i as usize / all.len()) % SIGNALS.len()];
        let t = draw(&mut rng, &all, scenario, signal);
        let sc = &all[t.scenario];
        let label = format!(
            "try {i} (FSGAUGE_FAULT_SEED={seed} FSGAUGE_FAULT_TRY={i}): {} {} at {} +{} ms{}",
            sc.name,
            t.signal,
            t.point.unwrap_or("start"),
            t.delay.as_millis(),
            if t.to_group { " to the group" } else { "" }
        );
        eprintln!("{label}");
        *tally
            .entry(format!("{} {}", sc.name, t.signal))
            .or_default() += 1;
        let wrong = run_try(sc, &t, &plan);
        if !wrong.is_empty() {
            eprintln!("FAILED {label}:\n  {}", wrong.join("\n  "));
            failures.push(label);
        }
    }
    eprintln!(
        "{} tries in {:.1} s, {} failed; per command and signal: {tally:?}",
        tries,
        t0.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "failed tries:\n{}",
        failures.join("\n")
    );
}

/// The defect of issue 13 item 5, pinned: a Ctrl-C (to the whole process group, as a terminal
/// sends it) while mkfs.xfs runs ends as the interruption, not as a failed mkfs.
#[test]
fn ctrl_c_during_mkfs_is_an_interruption() {
    if !have_fs("xfs") {
        return;
    }
    for (sig, to_group) in [(Signal::SIGINT, true), (Signal::SIGTERM, false)] {
        let sb = Sandbox::new();
        let mut child = sb
            .bench(
                &words(
                    "bench tree --fs xfs --fs-size 300M --dirs 1 --files 1 --file-size 4K --quiet",
                )
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            )
            .env("FSGAUGE_TEST_PAUSE_AT", "mkfs")
            .env("FSGAUGE_TEST_PAUSE_MS", "2000")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(child.id() as i32);
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        assert!(
            lines
                .by_ref()
                .map_while(Result::ok)
                .any(|l| l == "fsgauge: test pause at mkfs"),
            "never reached mkfs"
        );
        // mkfs is now running (behind its delay) for two seconds.
        std::thread::sleep(Duration::from_millis(300));
        if to_group {
            killpg(pid, sig).unwrap();
        } else {
            kill(pid, sig).unwrap();
        }
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let status = child.wait().unwrap();
        let stderr = rest.join("\n");
        assert_eq!(status.code(), Some(128 + sig as i32), "{sig}: {stderr}");
        assert!(
            stderr.contains(&format!("interrupted by {sig}")),
            "{stderr}"
        );
        assert!(!stderr.contains("failed"), "{stderr}");
        sb.assert_clean();
    }
}

/// Item 8 of issue 13, pinned: a signal while the last result is being written (after the
/// workload and the teardown) still ends the run as interrupted, and the result written before
/// it is kept and named as complete.
#[test]
fn a_signal_while_the_result_is_written_is_not_ignored() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let mut child = sb
        .bench(&[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "64M",
            "--dirs",
            "1",
            "--files",
            "2",
            "--file-size",
            "4K",
            "--quiet",
        ])
        .env("FSGAUGE_TEST_PAUSE_AT", "result")
        .env("FSGAUGE_TEST_PAUSE_MS", "500")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    // The second pause is after the atomic rename.
    let mut seen = 0;
    for l in lines.by_ref().map_while(Result::ok) {
        if l == "fsgauge: test pause at result" {
            seen += 1;
            if seen == 2 {
                break;
            }
        }
    }
    assert_eq!(seen, 2, "never reached the result write");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let stderr: Vec<String> = lines.map_while(Result::ok).collect();
    let stderr = stderr.join("\n");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    let files: Vec<_> = std::fs::read_dir(sb.out())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        stderr.contains("interrupted by SIGINT after the result of rep 0 was written")
            && stderr.contains(&format!("{} is complete", files[0])),
        "{stderr}"
    );
    sb.assert_clean();
}
