//! Every phase records how long the threads that did its work were on a CPU and how long they
//! waited for one (`cpu_wait`, from their schedstat), and the report's environment table
//! states it; results written before it was recorded load and read as they did. No figure of
//! the wait itself is asserted (the machine is shared): only that it is there and consistent.

use crate::support::{json_of, Sandbox};

fn fdtree(sb: &Sandbox, dir: &std::path::Path, threads: &str) -> serde_json::Value {
    let out = sb
        .bench(&[
            "bench",
            "fdtree",
            "--levels",
            "2",
            "--dirs-per-level",
            "3",
            "--files-per-dir",
            "20",
            "--file-size",
            "4K",
            "--threads",
            threads,
            "--json",
            "--quiet",
            "--dir",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    json_of(&out)
}

#[test]
fn every_phase_records_its_threads_cpu_wait_and_it_adds_up() {
    let sb = Sandbox::new();
    for threads in [1u64, 3] {
        let dir = sb.path().join(format!("t{threads}"));
        std::fs::create_dir(&dir).unwrap();
        let run = fdtree(&sb, &dir, &threads.to_string());
        for p in run["phases"].as_array().unwrap() {
            let w = &p["cpu_wait"];
            assert_eq!(w["threads"].as_u64(), Some(threads), "{p}");
            let delay = w["run_delay_ns"].as_u64().expect("run delay") as f64 / 1e9;
            let on_cpu = w["on_cpu_ns"].as_u64().expect("on-CPU time") as f64 / 1e9;
            let wall = p["wall_s"].as_f64().unwrap();
            // No worker is on a CPU or queued for one longer than the phase lasted (a
            // running thread's counters lag by at most a tick: the slack).
            assert!(
                delay + on_cpu <= threads as f64 * wall + 0.02,
                "{threads} threads, {wall} s: {w}"
            );
            // The workers' CPU time is part of the process's.
            let process = p["user_s"].as_f64().unwrap() + p["sys_s"].as_f64().unwrap();
            assert!(
                on_cpu <= process * 1.05 + 0.02,
                "{on_cpu} of {process}: {w}"
            );
        }
    }
    let o = sb
        .cmd()
        .args(["report", sb.out().to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("CPU wait"), "{text}");
}

#[test]
fn a_result_without_the_wait_loads_and_reads_as_before() {
    let sb = Sandbox::new();
    let dir = sb.path().join("t");
    std::fs::create_dir(&dir).unwrap();
    fdtree(&sb, &dir, "1");
    let file = std::fs::read_dir(sb.out())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a result file");
    // The result as an older fsgauge wrote it: no cpu_wait in any phase.
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    for p in v["phases"].as_array_mut().unwrap() {
        assert!(p.as_object_mut().unwrap().remove("cpu_wait").is_some());
    }
    let old_dir = sb.path().join("old");
    std::fs::create_dir(&old_dir).unwrap();
    let old = old_dir.join(file.file_name().unwrap());
    std::fs::write(&old, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    // It loads, and writes back exactly as it was read.
    let loaded = fsgauge::results::load(&old).unwrap();
    assert!(loaded.phases.iter().all(|p| p.cpu_wait.is_none()));
    assert_eq!(serde_json::to_value(&loaded).unwrap(), v);
    // Its report has no CPU-wait column, figure or warning.
    for format in ["text", "json"] {
        let o = sb
            .cmd()
            .args(["report", old_dir.to_str().unwrap(), "--format", format])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{text}");
        for absent in ["CPU wait", "cpu_wait", "run-queue", "runq"] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
    }
}
