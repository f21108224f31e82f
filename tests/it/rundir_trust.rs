//! Run directories in a `--dir` another user can write (issue 22, items 2 and 8). Needs root
//! (the run's directory must be one an attacker cannot make: owned by root).
//!
//! The `--dir` is owned by nobody (65534), so its owner may rename and plant names in it. While
//! root's run works, a thread plays that owner: again and again it renames the run's directory
//! away (`NAME.x`) and puts a symlink to a root-only victim directory in its place, then undoes
//! it, at jittered moments (the seed is printed; `FSGAUGE_RACE_SEED` repeats one,
//! `FSGAUGE_SOAK=N` runs N rounds instead of 3). The victim directory and a victim file must stay
//! byte-identical, with no entry added or removed: fsgauge works through the descriptor of the
//! directory it made, never through its name.

use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{have_root, Sandbox};

/// Every entry below `dir` (not following symlinks) with its contents.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let md = std::fs::symlink_metadata(&p).unwrap();
        if md.is_dir() {
            out.insert(p.clone(), b"<dir>".to_vec());
            out.extend(snapshot(&p));
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    out
}

/// A small xorshift: the attacker's timing, repeatable from its seed.
struct Jitter(u64);

impl Jitter {
    fn micros(&mut self, max: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % max
    }
}

/// The attacker: while `stop` is false, swaps the run directory named `name` in `dir` for a
/// symlink to `victim` and back. Counts the swaps.
fn attack(dir: PathBuf, victim: PathBuf, seed: u64, stop: Arc<AtomicBool>, swaps: Arc<AtomicU64>) {
    let mut j = Jitter(seed | 1);
    // A name is swapped from its second sighting on, so that most swaps land while the
    // workload runs rather than between fsgauge's mkdir and its open (refused, also fine).
    let mut seen = std::collections::HashSet::new();
    let mut swapped = false;
    while !stop.load(Ordering::Relaxed) {
        // Swapped most of the time (1–20 ms), back briefly (50 µs–1 ms): every phase that
        // reaches the directory by its name meets the symlink.
        std::thread::sleep(Duration::from_micros(if swapped {
            1000 + j.micros(19_000)
        } else {
            50 + j.micros(1000)
        }));
        swapped = false;
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().to_string();
            if !name.starts_with("fsgauge-") || name.ends_with(".x") {
                continue;
            }
            if seen.insert(name.clone()) {
                continue;
            }
            let here = dir.join(&name);
            let away = dir.join(format!("{name}.x"));
            let Ok(m) = std::fs::symlink_metadata(&here) else {
                continue;
            };
            if m.is_dir() {
                if std::fs::rename(&here, &away).is_ok() && symlink(&victim, &here).is_ok() {
                    swaps.fetch_add(1, Ordering::Relaxed);
                    swapped = true;
                }
            } else if m.file_type().is_symlink() && away.exists() {
                // Undo, so that the next swap can land in another phase.
                let _ = std::fs::remove_file(&here);
                let _ = std::fs::rename(&away, &here);
            }
        }
    }
}

fn race_seed() -> u64 {
    std::env::var("FSGAUGE_RACE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_2022)
}

fn rounds() -> u64 {
    std::env::var("FSGAUGE_SOAK")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
        .max(1)
}

/// Runs `bench ARGS --dir SCRATCH` under attack and checks the victims and what is left.
fn swapped_run_dir_touches_nothing_else(kind_args: &[&str]) {
    if !have_root() {
        return;
    }
    let sb = Sandbox::new();
    let scratch = sb.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    std::os::unix::fs::chown(&scratch, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Root-only: a directory with files and a subdirectory, and a file beside it.
    let victim = sb.path().join("victimdir");
    std::fs::create_dir(&victim).unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o700)).unwrap();
    for i in 0..5 {
        std::fs::write(victim.join(format!("precious-{i}")), format!("keep {i}")).unwrap();
    }
    std::fs::create_dir(victim.join("d0")).unwrap();
    std::fs::write(victim.join("d0/f0"), b"keep nested").unwrap();
    let victim_file = sb.path().join("victim-file");
    std::fs::write(&victim_file, b"keep me").unwrap();
    let before = snapshot(&victim);

    let seed = race_seed();
    let (mut total_swaps, mut runs) = (0, 0);
    for round in 0..rounds() {
        let round_seed = seed.wrapping_add(round);
        eprintln!("attack timing seed {round_seed} (FSGAUGE_RACE_SEED repeats it)");
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let attacker = {
            let (d, v, s, n) = (scratch.clone(), victim.clone(), stop.clone(), swaps.clone());
            std::thread::spawn(move || attack(d, v, round_seed, s, n))
        };
        let out = sb
            .cmd()
            .args(["bench"])
            .args(kind_args)
            .args([
                "--dir",
                scratch.to_str().unwrap(),
                "--reps",
                "2",
                "--seed",
                "7",
            ])
            .arg("--out")
            .arg(sb.out())
            .output()
            .unwrap();
        stop.store(true, Ordering::Relaxed);
        attacker.join().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        eprintln!("fsgauge said ({}): {stderr}", out.status);
        runs += 1;
        total_swaps += swaps.load(Ordering::Relaxed);

        let after = snapshot(&victim);
        let changed: Vec<String> = before
            .keys()
            .chain(after.keys())
            .filter(|k| before.get(*k) != after.get(*k))
            .map(|k| match (before.contains_key(k), after.contains_key(k)) {
                (true, false) => format!("removed {}", k.display()),
                (false, true) => format!("added {}", k.display()),
                _ => format!("changed {}", k.display()),
            })
            .collect();
        assert!(
            changed.is_empty(),
            "the victim directory changed (seed {round_seed}): {changed:?}; stderr: {stderr}"
        );
        assert_eq!(std::fs::read(&victim_file).unwrap(), b"keep me");
        assert_eq!(
            std::fs::metadata(&victim).unwrap().uid(),
            0,
            "victim directory owner changed"
        );
        // Either the run went through, or it refused a directory that was not the one it made.
        assert!(
            out.status.success() || stderr.contains("not the directory fsgauge just made"),
            "seed {round_seed}: {stderr}"
        );
        // What fsgauge made is gone, wherever the attacker moved it: only empty directories
        // (renamed away) and the attacker's own symlinks may be left.
        for e in std::fs::read_dir(&scratch).unwrap() {
            let p = e.unwrap().path();
            let md = std::fs::symlink_metadata(&p).unwrap();
            if md.is_dir() {
                let left: Vec<_> = std::fs::read_dir(&p).unwrap().collect();
                assert!(left.is_empty(), "{} still holds {left:?}", p.display());
                std::fs::remove_dir(&p).unwrap();
            } else {
                assert!(md.file_type().is_symlink(), "{} left", p.display());
                std::fs::remove_file(&p).unwrap();
            }
        }
    }
    eprintln!("{runs} run(s), {total_swaps} swap(s) of the run directory");
    assert!(
        total_swaps > 0,
        "the attacker never got to swap the run directory"
    );
    sb.assert_clean();
}

#[test]
fn tree_in_a_dir_others_can_write_never_follows_a_swapped_run_directory() {
    swapped_run_dir_touches_nothing_else(&[
        "tree",
        "--dirs",
        "2",
        "--files",
        "200",
        "--file-size",
        "64K",
        "--fsync",
        "file",
        "--cold",
        "drop",
    ]);
}

#[test]
fn create_in_a_dir_others_can_write_never_follows_a_swapped_run_directory() {
    swapped_run_dir_touches_nothing_else(&[
        "create",
        "--files",
        "1000",
        "--threads",
        "2",
        "--cold",
        "drop",
    ]);
}

/// A plan's exerciser writes on the plan's testbed: a host path as its file is refused at the
/// field, before anything is made, and the host file is left alone.
#[test]
fn a_plan_exerciser_with_a_host_path_is_refused_at_the_field() {
    let sb = Sandbox::new();
    let host = sb.path().join("afile");
    std::fs::write(&host, b"host data").unwrap();
    let plan = sb.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "[[testbed]]\nfs = \"ext4\"\nsize = \"256M\"\n\n[[workload]]\nkind = \"exercise\"\nops = 100\nfile = \"{}\"\n",
            host.display()
        ),
    )
    .unwrap();
    for dry in [true, false] {
        let mut c = sb.bench(&["run", plan.to_str().unwrap()]);
        if dry {
            c.arg("--dry-run");
        }
        let out = c.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("plan.toml:8:1: [[workload]] exercise field `file`")
                && stderr.contains("give a plain name"),
            "{stderr}"
        );
        assert_eq!(std::fs::read(&host).unwrap(), b"host data");
        assert!(!sb.out().exists(), "results were written");
    }
    sb.assert_clean();
}
