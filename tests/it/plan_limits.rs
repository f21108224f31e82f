//! A plan's expansion has caps, counted from the sizes as written before anything is expanded
//! (issue 41, item 7): a sweep of more than 10,000 cells and a plan of more than 100,000 runs
//! are refused at the workload entry, naming the product; and SIGTERM reaches a plan being
//! read. Needs nothing of the machine: every command here stops before it would need root.

use std::io::BufRead;

use crate::support::{assert_refused, refused, Sandbox};

/// A plan of `testbeds` testbeds (`tN`) and one tio workload sweeping `threads` × `block`.
fn tio_plan(testbeds: usize, threads: usize, blocks: usize, reps: u32) -> String {
    let mut p = format!("reps = {reps}\n");
    for i in 0..testbeds {
        p.push_str(&format!(
            "[[testbed]]\nlabel = \"t{i}\"\nfs = \"ext4\"\nfs_size = \"1G\"\n\n"
        ));
    }
    let threads: Vec<String> = (1..=threads).map(|t| t.to_string()).collect();
    let blocks: Vec<String> = (0..blocks)
        .map(|b| format!("\"{}K\"", 4 << (b % 8)))
        .collect();
    p.push_str(&format!(
        "[[workload]]\nkind = \"tio\"\nmode = \"seqwrite\"\nfile_size = \"2M\"\nthreads = [{}]\nblock = [{}]\n",
        threads.join(", "),
        blocks.join(", ")
    ));
    p
}

fn run_dry(sb: &Sandbox, text: &str) -> (std::process::Output, String) {
    let p = sb.path().join("big.toml");
    std::fs::write(&p, text).unwrap();
    let out = sb
        .bench(&["run", p.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    (out, p.display().to_string())
}

#[test]
fn a_sweep_of_more_cells_than_the_cap_is_refused_before_it_is_expanded() {
    let sb = Sandbox::new();
    // Before: 101 × 100 cells were expanded (300 × 300 took 25 s and 564 MB to be refused).
    let (out, p) = run_dry(&sb, &tio_plan(1, 101, 100, 1));
    let at = format!("{p}:7:1: [[workload]] tio:");
    assert_refused(
        &out,
        "a 10100-cell sweep",
        &[
            &at,
            "the tio sweep has 100 block × 101 threads = 10100 cells",
            "more than the 10000 one sweep may have",
        ],
    );
    assert!(!sb.out().exists());
    sb.assert_clean();
    // The command line's sweep has the same cap, counted before any cell is made.
    let threads: Vec<String> = (1..=101).map(|t| t.to_string()).collect();
    let blocks: Vec<String> = (0..100).map(|b| format!("{}K", 4 << (b % 8))).collect();
    refused(
        &sb,
        &[
            "bench",
            "tio",
            "--fs",
            "ext4",
            "--mode",
            "seqwrite",
            "--file-size",
            "2M",
            "--threads",
            &threads.join(","),
            "--block",
            &blocks.join(","),
        ],
        &["100 block × 101 threads = 10100 cells"],
    );
}

#[test]
fn a_plan_of_more_runs_than_the_cap_is_refused_naming_the_product() {
    let sb = Sandbox::new();
    // 2 testbeds × 100 cells × 501 repetitions = 100200 runs; before, all were listed.
    let (out, p) = run_dry(&sb, &tio_plan(2, 100, 1, 501));
    let at = format!("{p}:12:1: [[workload]] tio:");
    assert_refused(
        &out,
        "100200 runs",
        &[
            &at,
            "the plan makes 2 testbed(s) × 100 workload cell(s) up to this entry × 501 repetition(s) = 100200 runs",
            "more than the 100000 a plan may make",
        ],
    );
    assert!(!sb.out().exists());
    sb.assert_clean();
    // At the cap it is a plan like any other.
    let (out, _) = run_dry(&sb, &tio_plan(2, 100, 1, 500));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sigterm_stops_a_plan_being_read() {
    let sb = Sandbox::new();
    let p = sb.path().join("three.toml");
    std::fs::write(&p, tio_plan(3, 1, 1, 1)).unwrap();
    // Stopped (SIGSTOP) at the first testbed entry; SIGTERM then SIGCONT once it is stopped.
    // Before, the reading never looked at the signal: the whole matrix was printed and a
    // signal that came during the reading was noticed only at the end.
    let mut child = sb
        .bench(&["run", p.to_str().unwrap(), "--dry-run"])
        .env("FSGAUGE_TEST_STOP_AT", "plan-entry")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line == "fsgauge: test stop at plan-entry" {
            break;
        }
    }
    if !seen.contains("test stop at plan-entry") {
        let _ = child.kill();
        panic!("never stopped at a plan entry: {seen}");
    }
    // The line comes just before the stop: wait until the process is stopped, so that
    // SIGCONT cannot come first (it would then stay stopped).
    let stat = format!("/proc/{pid}/stat");
    while !std::fs::read_to_string(&stat)
        .unwrap()
        .rsplit(") ")
        .next()
        .unwrap()
        .starts_with('T')
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(143), "{seen}{}", rest.join("\n"));
    assert!(
        !stdout.contains("estimate:"),
        "the plan was expanded after SIGTERM: {stdout}"
    );
    assert!(!sb.out().exists());
    sb.assert_clean();
}
