//! Every built-in preset runs end to end, so none can break silently: each at a tiny scale
//! with one repetition, on real loop-device filesystems. The list comes from `fsgauge
//! presets`, so a preset added later is covered without touching this test.

use crate::support::*;

/// Scale of the smoke runs: every preset in a few seconds to a minute here.
const SCALE: &str = "0.02";

/// The preset names `fsgauge presets` lists (the first word of each line).
fn preset_names(sb: &Sandbox) -> Vec<String> {
    let out = sb.cmd().arg("presets").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect()
}

/// How many runs `--dry-run` plans: the numbered lines under "runs (in order):".
fn planned_runs(sb: &Sandbox, name: &str) -> usize {
    let out = sb
        .cmd()
        .args(["run", name, "--scale", SCALE, "--reps", "1", "--dry-run"])
        .arg("--workdir")
        .arg(sb.workdir())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name} --dry-run failed: {text}");
    text.lines()
        .skip_while(|l| !l.starts_with("runs (in order)"))
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .count()
}

#[test]
fn every_preset_runs_end_to_end_at_a_tiny_scale() {
    if !["ext2", "ext3", "ext4", "xfs", "btrfs"]
        .iter()
        .all(|fs| have_fs(fs))
    {
        return;
    }
    let sb = Sandbox::new();
    let names = preset_names(&sb);
    assert!(names.len() >= 6, "{names:?}");
    for name in &names {
        let start = std::time::Instant::now();
        let runs = planned_runs(&sb, name);
        assert!(runs > 0, "{name}: no runs planned");
        let out_dir = sb.path().join(format!("results-{name}"));
        let out = sb
            .cmd()
            // The tests beside drop the kernel's caches all the time: a remade run would only
            // be disturbed again (the guard itself is tested in disturbed.rs).
            .args(["run", name, "--scale", SCALE, "--reps", "1", "--quiet"])
            .args(["--attempts", "1"])
            .arg("--workdir")
            .arg(sb.workdir())
            .arg("--out")
            .arg(&out_dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = fsgauge::results::load_dir(&out_dir).unwrap();
        assert!(
            dir.skipped.is_empty(),
            "{name}: damaged results {:?}",
            dir.skipped
        );
        assert_eq!(
            dir.results.len(),
            runs,
            "{name}: one result per planned run"
        );
        for f in &dir.results {
            assert!(
                !f.result.phases.is_empty(),
                "{name}: a result without phases"
            );
            // An as-published preset runs on the seed's disk, and its results say so.
            if name.ends_with("-as-published") {
                assert!(
                    f.result.testbed.device_model.is_some(),
                    "{name}: a result without its emulated disk"
                );
            }
        }
        eprintln!(
            "{name}: {runs} run(s) in {:.1} s",
            start.elapsed().as_secs_f64()
        );
    }
    sb.assert_clean();
}

/// `fsgauge run PRESET --device-model PROFILE` puts every testbed on that disk, and the dry run
/// shows it; an as-published preset shows its own; a bad profile and a testbed that names a
/// real device are refused before anything is made.
#[test]
fn device_model_override_shows_in_the_dry_run_and_bad_ones_are_refused() {
    let sb = Sandbox::new();
    let dry = |args: &[&str]| {
        let out = sb
            .cmd()
            .args(["run"])
            .args(args)
            .args(["--dry-run", "--workdir"])
            .arg(sb.workdir())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let testbed_lines = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with("testbeds:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .map(String::from)
            .collect()
    };
    for (args, disk) in [
        (
            &["lowmem", "--device-model", "deskstar-7k250:seek=off"][..],
            "disk=deskstar-7k250:seek=off",
        ),
        (&["journal-size-as-published"][..], "disk=st3500641as"),
        (
            &["journal-size-as-published", "--device-model", "ram"][..],
            "disk=ram",
        ),
    ] {
        let (code, text) = dry(args);
        assert_eq!(code, Some(0), "{args:?}: {text}");
        let lines = testbed_lines(&text);
        assert!(!lines.is_empty(), "{args:?}: {text}");
        for l in &lines {
            assert!(l.contains(&format!(" {disk}")), "{args:?}: {l}");
        }
    }
    let (code, text) = dry(&["lowmem", "--device-model", "nope"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("--device-model") && text.contains("st3500641as"),
        "{text}"
    );
    let plan = sb.path().join("real.toml");
    std::fs::write(
        &plan,
        "name = \"real\"\n[[testbed]]\nfs = \"ext4\"\nfs_size = \"1G\"\ndevice = \"/dev/sdz\"\n[[workload]]\nkind = \"tree\"\n",
    )
    .unwrap();
    let (code, text) = dry(&[plan.to_str().unwrap(), "--device-model", "ram"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("real.toml:5:1: device"), "{text}");
}
