//! `fsgauge run` with no arguments: the built-in quick study, side by side; as a non-root user
//! it runs on a temporary directory and says so on its first line.

use crate::support::{have_fs, Sandbox};

#[test]
fn quick_study_runs_every_installed_filesystem_side_by_side() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .current_dir(sb.path())
        .args(["run", "--reps", "1", "--quiet"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = stdout.lines().next().unwrap();
    assert!(first.starts_with("quick study:"), "{first}");
    // The findings lead (with one repetition each side they say why they cannot answer yet),
    // then the side-by-side table.
    assert!(
        stdout.lines().nth(1) == Some("Findings") && stdout.contains("data-journal-writes"),
        "{stdout}"
    );
    let header = stdout.lines().find(|l| l.starts_with("phase")).unwrap();
    assert!(
        header.contains("ext4") && header.contains("ext4-journal"),
        "{header}"
    );
    for fs in ["xfs", "btrfs"] {
        let installed = ["/usr/sbin", "/sbin"]
            .iter()
            .any(|d| std::path::Path::new(d).join(format!("mkfs.{fs}")).exists());
        assert_eq!(
            header.contains(fs),
            installed,
            "{fs} column iff mkfs.{fs} is installed: {header}"
        );
    }
    assert!(
        stdout.contains("create elapsed (sys) s") && stdout.contains("delete ops/s"),
        "{stdout}"
    );
    let results = std::fs::read_dir(sb.path().join("fsgauge-results"))
        .unwrap()
        .count();
    assert_eq!(
        results,
        header.split_whitespace().count() - 1,
        "one result per filesystem"
    );
    sb.assert_clean();
}

#[test]
fn quick_study_as_a_normal_user_runs_on_a_temporary_directory() {
    let sb = Sandbox::new();
    let Some((out_dir, mut nobody)) = crate::support::as_nobody(&sb) else {
        return;
    };
    let out = nobody
        .args(["run", "--reps", "1", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout
            .lines()
            .next()
            .unwrap()
            .starts_with("not root: running the quick study on the temporary directory"),
        "{stdout}"
    );
    assert_eq!(std::fs::read_dir(&out_dir).unwrap().count(), 1);
}
