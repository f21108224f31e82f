//! Judging a crash state the filesystem's own way: mount it (the journal or log is replayed, as
//! at the next boot), let the caller compare what it promised, unmount, then run the
//! filesystem's checker read-only on what the replay left.
//!
//! The order departs from "checker, then mount" on purpose: a read-only checker does not replay
//! the journal (`e2fsck -n` skips recovery, `xfs_repair -n` ignores a dirty log and warns of
//! spurious inconsistencies), so on a state cut mid-transaction it would report errors that the
//! next boot's replay removes. The state a machine comes back in is the replayed one; xfstests'
//! log-writes tests check the same way (replay to the mark, mount, unmount, fsck).
//!
//! The crash state is a second block device (`dev`) with the same filesystem UUID as the
//! testbed's own, which stays attached and unmounted meanwhile: xfs mounts it with `nouuid`, and
//! btrfs (single device) takes it as a temporary fsid.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use super::mount;
use super::spec::FsKind;

pub use crate::results::crash::CrashClass;

/// The longest checker output kept (its head and tail); a damaged filesystem can make e2fsck
/// print a line per inode.
const OUTPUT_KEPT: usize = 4000;

/// What the read-only checker said.
#[derive(Debug, Clone)]
pub struct CheckerOutcome {
    /// The command line.
    pub command: String,
    /// Its exit status (-1: killed by a signal).
    pub status: i32,
    pub clean: bool,
    /// stdout and stderr, shortened to [`OUTPUT_KEPT`] characters.
    pub output: String,
}

/// The read-only checker's command line for `fs` on `dev`.
pub fn checker_args(fs: FsKind, dev: &Path) -> Vec<String> {
    let dev = dev.display().to_string();
    let words: Vec<&str> = match fs {
        FsKind::Ext2 | FsKind::Ext3 | FsKind::Ext4 => vec!["e2fsck", "-fn", &dev],
        FsKind::Xfs => vec!["xfs_repair", "-n", &dev],
        FsKind::Btrfs => vec!["btrfs", "check", "--readonly", &dev],
    };
    words.into_iter().map(String::from).collect()
}

/// Whether `status` from the checker of `fs` means a consistent filesystem. e2fsck -n: 0 (4:
/// errors left uncorrected, 8 and up: it could not check); xfs_repair -n: 0 (1: corruption);
/// btrfs check: 0.
pub fn checker_clean(status: i32) -> bool {
    status == 0
}

/// Runs the read-only checker of `fs` on `dev`. An error: the checker could not be started.
pub fn run_checker(fs: FsKind, dev: &Path, external_log: Option<&Path>) -> Result<CheckerOutcome> {
    let mut args = checker_args(fs, dev);
    if let (FsKind::Xfs, Some(log)) = (fs, external_log) {
        args.splice(2..2, ["-l".to_string(), log.display().to_string()]);
    }
    let out = crate::base::signals::output(Command::new(&args[0]).args(&args[1..]))
        .with_context(|| format!("running `{}`", args.join(" ")))?;
    let status = out.status.code().unwrap_or(-1);
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok(CheckerOutcome {
        command: args.join(" "),
        status,
        clean: checker_clean(status),
        output: shorten(&text, OUTPUT_KEPT),
    })
}

/// The mount options for a crash state of a testbed mounted with `opts`: xfs refuses a second
/// filesystem with a UUID it has seen mounted, unless told `nouuid`.
pub fn crash_mount_options(fs: FsKind, opts: &str) -> String {
    match fs {
        FsKind::Xfs if !opts.split(',').any(|o| o == "nouuid") => {
            if opts.is_empty() {
                "nouuid".to_string()
            } else {
                format!("{opts},nouuid")
            }
        }
        _ => opts.to_string(),
    }
}

/// Mounts the crash state `dev` at `target` (replaying its journal). The error says so, with
/// the kernel's reason: a mount failure is a finding about the state, not a set-up error.
pub fn mount_crash_state(fs: FsKind, dev: &Path, target: &Path, opts: &str) -> Result<()> {
    mount::mount(dev, target, fs.name(), &crash_mount_options(fs, opts))
}

/// Unmounts a crash state mounted by [`mount_crash_state`].
pub fn unmount_crash_state(target: &Path) -> Result<()> {
    mount::unmount(target)
}

/// `text` shortened to about `max` characters: its head and its tail, with what was left out
/// named.
fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let half = max / 2;
    let head_end = (0..=half)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let tail_start = (text.len() - half..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    format!(
        "{}\n[… {} bytes left out …]\n{}",
        &text[..head_end],
        tail_start - head_end,
        &text[tail_start..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_filesystem_has_its_read_only_checker() {
        let d = Path::new("/dev/loop9");
        assert_eq!(
            checker_args(FsKind::Ext4, d),
            ["e2fsck", "-fn", "/dev/loop9"]
        );
        assert_eq!(checker_args(FsKind::Ext2, d)[1], "-fn");
        assert_eq!(
            checker_args(FsKind::Xfs, d),
            ["xfs_repair", "-n", "/dev/loop9"]
        );
        assert_eq!(
            checker_args(FsKind::Btrfs, d),
            ["btrfs", "check", "--readonly", "/dev/loop9"]
        );
        assert!(checker_clean(0));
        assert!(!checker_clean(4) && !checker_clean(1) && !checker_clean(-1));
    }

    #[test]
    fn an_xfs_crash_state_mounts_without_the_uuid_check_and_others_as_given() {
        assert_eq!(crash_mount_options(FsKind::Xfs, ""), "nouuid");
        assert_eq!(
            crash_mount_options(FsKind::Xfs, "logbsize=256k"),
            "logbsize=256k,nouuid"
        );
        assert_eq!(crash_mount_options(FsKind::Xfs, "nouuid"), "nouuid");
        assert_eq!(
            crash_mount_options(FsKind::Ext4, "data=journal"),
            "data=journal"
        );
    }

    #[test]
    fn a_long_checker_output_keeps_its_head_and_tail() {
        let text = format!("HEAD{}TAIL", "x".repeat(10_000));
        let s = shorten(&text, 100);
        assert!(s.starts_with("HEAD") && s.ends_with("TAIL"), "{s}");
        assert!(s.contains("bytes left out"), "{s}");
        assert!(s.len() < 200);
        assert_eq!(shorten("short", 100), "short");
    }
}
