//! A plan's matrix over Open MPI ranks (`run --on mpirun[:HOSTFILE]`), `status` and `--resume`:
//! two ranks on this machine make the same runs (spec hashes) as a one-process run of the plan;
//! a block whose results were deleted is run again alone and the other blocks' files stay
//! untouched; bad input is refused before anything is made. Needs root, mkfs.ext4 and `mpirun`
//! (openmpi-bin); otherwise skipped (failed under CI).

use std::path::Path;

use crate::fleet::{assert_ok, files, results, runs, status, write_plan};
use crate::support::Sandbox;

fn have_mpirun() -> bool {
    crate::support::have_fs("ext4") && crate::support::have_program("mpirun")
}

/// `run PLAN --on mpirun --machines 2 --quiet --out DIR` and more.
fn launch(sb: &Sandbox, plan: &Path, dir: &Path, more: &[&str]) -> std::process::Output {
    sb.cmd()
        .args(["run", plan.to_str().unwrap(), "--on", "mpirun", "--quiet"])
        .args(["--machines", "2", "--out", dir.to_str().unwrap()])
        .args(more)
        .output()
        .unwrap()
}

fn record(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("fleet.json")).unwrap()).unwrap()
}

#[test]
fn two_mpirun_ranks_make_the_runs_of_a_one_process_run() {
    if !have_mpirun() {
        return;
    }
    let sb = Sandbox::new();
    let plan = write_plan(&sb, "mpi-same");
    let (local, ranks) = (sb.path().join("local"), sb.path().join("ranks"));
    let out = sb
        .cmd()
        .args(["run", plan.to_str().unwrap(), "--quiet", "--out"])
        .arg(&local)
        .output()
        .unwrap();
    assert_ok(&out, "the one-process run");
    let out = launch(&sb, &plan, &ranks, &[]);
    assert_ok(&out, "the mpirun run");
    let (a, b) = (results(&local), results(&ranks));
    assert_eq!(a.len(), 6);
    assert_eq!(runs(&a), runs(&b), "the same runs, by spec hash");
    let rec = record(&ranks);
    assert_eq!(rec["launcher"], "mpirun");
    assert_eq!(rec["jobs"][0]["blocks"], serde_json::json!([0, 1, 2]));
    // The findings are printed as a local run prints them.
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("create-time"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let st = status(&sb, &ranks);
    assert!(st.values().all(|(s, n)| s == "done" && *n == 2), "{st:?}");
    sb.assert_clean();
}

#[test]
fn a_hostfile_of_one_host_runs_every_block_on_its_one_rank() {
    if !have_mpirun() {
        return;
    }
    let sb = Sandbox::new();
    let plan = write_plan(&sb, "mpi-hostfile");
    let hosts = sb.path().join("hosts");
    std::fs::write(&hosts, "# this machine only\nlocalhost slots=1\n").unwrap();
    let dir = sb.path().join("ranks");
    let out = sb
        .cmd()
        .args(["run", plan.to_str().unwrap(), "--on"])
        .arg(format!("mpirun:{}", hosts.display()))
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert_ok(&out, "the mpirun run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("on 1 mpirun rank(s) over the hosts of"),
        "{err}"
    );
    assert!(
        err.contains("block 2 of 3 on") && err.contains("(rank 0 of 1)"),
        "{err}"
    );
    let rec = record(&dir);
    assert_eq!(rec["hostfile"], hosts.to_str().unwrap());
    assert_eq!(results(&dir).len(), 6);
    let st = status(&sb, &dir);
    assert!(st.values().all(|(s, n)| s == "done" && *n == 2), "{st:?}");
    sb.assert_clean();
}

#[test]
fn resume_after_mpirun_remakes_only_the_missing_block() {
    if !have_mpirun() {
        return;
    }
    let sb = Sandbox::new();
    let plan = write_plan(&sb, "mpi-resume");
    let dir = sb.path().join("ranks");
    assert_ok(&launch(&sb, &plan, &dir, &[]), "the mpirun run");
    for f in fsgauge::results::load_dir(&dir).unwrap().results {
        if f.result.rep == 1 {
            std::fs::remove_file(&f.path).unwrap();
        }
    }
    let before = files(&dir);
    assert_eq!(before.len(), 4, "blocks 0 and 2: two runs each");
    let st = status(&sb, &dir);
    assert_eq!(st[&1], ("missing".to_string(), 0), "{st:?}");
    assert_eq!((st[&0].0.as_str(), st[&2].0.as_str()), ("done", "done"));
    let text = sb.cmd().arg("status").arg(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("2 done, 1 missing") && text.contains("--on mpirun --resume --out"),
        "{text}"
    );
    // Without --resume a second launch into the same directory is refused.
    let again = launch(&sb, &plan, &dir, &[]);
    assert_eq!(again.status.code(), Some(2));

    assert_ok(&launch(&sb, &plan, &dir, &["--resume"]), "the resume");
    assert_eq!(
        record(&dir)["jobs"][1]["blocks"],
        serde_json::json!([1]),
        "only the missing block"
    );
    let after = files(&dir);
    assert_eq!(after.len(), 6);
    for (name, was) in &before {
        assert_eq!(
            after.get(name),
            Some(was),
            "{name} was rewritten or removed"
        );
    }
    let st = status(&sb, &dir);
    assert!(st.values().all(|(s, n)| s == "done" && *n == 2), "{st:?}");
    let out = launch(&sb, &plan, &dir, &["--resume"]);
    assert_ok(&out, "a resume of a finished run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to run"));
    assert_eq!(record(&dir)["jobs"].as_array().unwrap().len(), 2);
    sb.assert_clean();
}

#[test]
fn bad_mpirun_input_is_refused_before_anything_is_made() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let plan = write_plan(&sb, "mpi-refused");
    let p = plan.to_str().unwrap();
    let empty = sb.path().join("empty-hosts");
    std::fs::write(&empty, "# no hosts yet\n\n").unwrap();
    let two = sb.path().join("two-hosts");
    std::fs::write(&two, "node1 slots=1\nnode2\n").unwrap();
    let missing = format!("mpirun:{}", sb.path().join("no-such-hostfile").display());
    let (empty_on, two_on) = (
        format!("mpirun:{}", empty.display()),
        format!("mpirun:{}", two.display()),
    );
    let no_path = sb.path().join("empty-path");
    std::fs::create_dir(&no_path).unwrap();
    let dir = sb.path().join("never");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--on", &missing], "cannot read the hostfile"),
        (vec!["--on", &empty_on], "names no host"),
        (vec!["--on", "mpirun", "--machines", "0"], "--machines 0"),
        (vec!["--on", &two_on, "--machines", "3"], "names 2 host(s)"),
        (vec!["--on", "mpirun:"], "HOSTFILE"),
        (vec!["--on", "mpirun", "PATH"], "`mpirun` is not on PATH"),
    ];
    for (args, needle) in cases {
        let mut c = sb.cmd();
        c.args(["run", p]);
        match args.split_last() {
            Some((&"PATH", rest)) => {
                c.args(rest).env("PATH", &no_path);
            }
            _ => {
                c.args(&args);
            }
        }
        let out = c.arg("--out").arg(&dir).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!dir.exists(), "{args:?} made {}", dir.display());
    }
    sb.assert_clean();
}
