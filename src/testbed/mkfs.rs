//! The mkfs command line for each filesystem kind, and the mount options that go with it.
//!
//! Defaults fsgauge adds, and why (users' own options come after and win):
//! - ext2/3/4: `-E lazy_itable_init=0,lazy_journal_init=0` — otherwise ext4lazyinit keeps
//!   zeroing inode tables in the background during the first minutes after mount and pollutes
//!   every measurement; `nodiscard`, since the image is fresh and discard would punch holes into
//!   the image that was preallocated.
//! - xfs and btrfs: `-K` (no discard), for the same reason.
//! - ext4 with `-O ^extent` also gets `^64bit` unless the options mention 64bit: mke2fs refuses
//!   a block-mapped 64bit filesystem.
//! - external journal: ext3/ext4 get a `mke2fs -O journal_dev` device of the same block size and
//!   mount with `journal_path=`; xfs gets `-l logdev=DEV,size=SIZE` and mounts with `logdev=`.

use std::path::Path;
use std::process::Command;

use anyhow::Result;

use super::spec::{FsKind, TestbedSpec};
use crate::base::error::bad_input;

/// One or two commands to run (the journal device first).
#[derive(Debug, Clone)]
pub struct MkfsCommand {
    pub journal: Option<Vec<String>>,
    pub main: Vec<String>,
}

const EXT_DEFAULT_E: &str = "lazy_itable_init=0,lazy_journal_init=0,nodiscard";

impl MkfsCommand {
    /// Runs the commands; a failure names the command line and quotes mkfs's stderr.
    pub fn run(&self) -> Result<()> {
        if let Some(j) = &self.journal {
            run_one(j)?;
        }
        run_one(&self.main)
    }

    pub fn main_args(&self) -> Vec<String> {
        self.main.clone()
    }
}

fn run_one(args: &[String]) -> Result<()> {
    let out = crate::base::signals::output(Command::new(&args[0]).args(&args[1..]))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let said = if stderr.trim().is_empty() {
        stdout.trim()
    } else {
        stderr.trim()
    };
    // mkfs rejecting its options is bad input (exit 2), with mkfs's own words.
    Err(bad_input(format!(
        "`{}` failed ({}):\n{}",
        args.join(" "),
        out.status,
        // The usage text mkfs prints after its complaint only buries the reason.
        said.lines()
            .take_while(|l| !l.trim_start().starts_with("Usage:"))
            .take(12)
            .collect::<Vec<_>>()
            .join("\n")
    )))
}

/// Builds the mkfs command(s) for a spec on `dev`, with the journal on `journal_dev`.
pub fn mkfs_command(
    spec: &TestbedSpec,
    dev: &Path,
    journal_dev: Option<&Path>,
) -> Result<MkfsCommand> {
    let program = spec.fs.find_mkfs().ok_or_else(|| {
        bad_input(format!(
            "{} is not installed; apt-get install {}",
            spec.fs.mkfs_program(),
            spec.fs.package()
        ))
    })?;
    let mut main = vec![program.display().to_string()];
    let mut user = spec.mkfs_opts.clone();
    let mut journal = None;
    match spec.fs {
        FsKind::Ext2 | FsKind::Ext3 | FsKind::Ext4 => {
            main.extend(["-F".into(), "-q".into()]);
            // mke2fs keeps only the last -E, so the user's -E is merged after ours.
            let mut e_value = EXT_DEFAULT_E.to_string();
            let mut i = 0;
            while i < user.len() {
                if user[i] == "-E" && i + 1 < user.len() {
                    e_value = format!("{e_value},{}", user[i + 1]);
                    user.drain(i..i + 2);
                } else if let Some(v) = user[i].strip_prefix("-E").filter(|v| !v.is_empty()) {
                    e_value = format!("{e_value},{v}");
                    user.remove(i);
                } else {
                    i += 1;
                }
            }
            main.extend(["-E".into(), e_value]);
            disable_64bit_without_extents(&mut user);
            if let Some(jdev) = journal_dev {
                let block = user_block_size(&user).unwrap_or_else(|| "4096".into());
                if user_block_size(&user).is_none() {
                    main.extend(["-b".into(), block.clone()]);
                }
                let mke2fs = crate::base::sys::proc::find_program("mke2fs").ok_or_else(|| {
                    bad_input("mke2fs is not installed; apt-get install e2fsprogs")
                })?;
                journal = Some(vec![
                    mke2fs.display().to_string(),
                    "-F".into(),
                    "-q".into(),
                    "-O".into(),
                    "journal_dev".into(),
                    "-E".into(),
                    "nodiscard".into(),
                    "-b".into(),
                    block,
                    jdev.display().to_string(),
                ]);
                main.extend(["-J".into(), format!("device={}", jdev.display())]);
            }
        }
        FsKind::Xfs => {
            main.extend(["-f".into(), "-q".into(), "-K".into()]);
            if let (Some(jdev), Some(j)) = (journal_dev, spec.journal) {
                main.extend([
                    "-l".into(),
                    format!("logdev={},size={}", jdev.display(), j.size),
                ]);
            }
        }
        FsKind::Btrfs => {
            main.extend(["-f".into(), "-q".into(), "-K".into()]);
        }
    }
    main.extend(user);
    main.push(dev.display().to_string());
    Ok(MkfsCommand { journal, main })
}

/// mke2fs refuses `-O ^extent` on a 64bit filesystem ("Extents MUST be enabled for a 64-bit
/// filesystem"), and 64bit is ext4's default: an engineer asking for a block-mapped ext4 (the
/// low-memory study's "no extents" configuration) means ^64bit too. Added only when the user's
/// options say nothing about 64bit; the mkfs command line in the result shows it.
fn disable_64bit_without_extents(user: &mut [String]) {
    if user.iter().any(|a| a.contains("64bit")) {
        return;
    }
    let mut i = 0;
    while i < user.len() {
        let (is_o, value_at) = if user[i] == "-O" {
            (true, i + 1)
        } else {
            (user[i].starts_with("-O"), i)
        };
        if is_o && value_at < user.len() {
            let has = |v: &str| {
                v.trim_start_matches("-O")
                    .split(',')
                    .any(|f| f == "^extent" || f == "^extents")
            };
            if has(&user[value_at]) {
                user[value_at].push_str(",^64bit");
                return;
            }
        }
        i += 1;
    }
}

fn user_block_size(user: &[String]) -> Option<String> {
    user.iter()
        .position(|a| a == "-b")
        .and_then(|i| user.get(i + 1).cloned())
}

/// Mount options: the user's, plus where the external journal is.
pub fn mount_options(spec: &TestbedSpec, journal_dev: Option<&Path>) -> String {
    let mut opts: Vec<String> = spec
        .mount_opts
        .split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(String::from)
        .collect();
    if let Some(j) = journal_dev {
        match spec.fs {
            FsKind::Xfs => opts.push(format!("logdev={}", j.display())),
            FsKind::Ext3 | FsKind::Ext4 => opts.push(format!("journal_path={}", j.display())),
            _ => {}
        }
    }
    opts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn ext_merges_user_extended_options_after_ours() {
        if FsKind::Ext4.find_mkfs().is_none() {
            eprintln!("skipped: mkfs.ext4 not installed");
            return;
        }
        let mut spec = TestbedSpec::new(FsKind::Ext4, 1 << 30);
        spec.mkfs_opts = vec![
            "-O".into(),
            "^extent".into(),
            "-E".into(),
            "stride=4".into(),
        ];
        let c = mkfs_command(&spec, &PathBuf::from("/dev/loop9"), None).unwrap();
        let joined = c.main.join(" ");
        assert!(
            joined.contains("-E lazy_itable_init=0,lazy_journal_init=0,nodiscard,stride=4"),
            "{joined}"
        );
        assert!(joined.ends_with("-O ^extent,^64bit /dev/loop9"), "{joined}");
        assert_eq!(joined.matches("-E").count(), 1);
    }

    #[test]
    fn turning_extents_off_turns_64bit_off_unless_the_user_said_otherwise() {
        let mut u: Vec<String> = ["-O", "^extent", "-I", "256"].map(String::from).to_vec();
        disable_64bit_without_extents(&mut u);
        assert_eq!(u, ["-O", "^extent,^64bit", "-I", "256"]);
        let mut u: Vec<String> = ["-O^extents"].map(String::from).to_vec();
        disable_64bit_without_extents(&mut u);
        assert_eq!(u, ["-O^extents,^64bit"]);
        let mut u: Vec<String> = ["-O", "^extent,64bit"].map(String::from).to_vec();
        disable_64bit_without_extents(&mut u);
        assert_eq!(
            u,
            ["-O", "^extent,64bit"],
            "the user's word wins (and mkfs will say why it refuses)"
        );
        let mut u: Vec<String> = ["-O", "metadata_csum"].map(String::from).to_vec();
        disable_64bit_without_extents(&mut u);
        assert_eq!(u, ["-O", "metadata_csum"]);
    }

    #[test]
    fn external_journal_goes_into_mkfs_and_mount() {
        if FsKind::Ext4.find_mkfs().is_none() {
            eprintln!("skipped: mkfs.ext4 not installed");
            return;
        }
        let mut spec = TestbedSpec::new(FsKind::Ext4, 1 << 30);
        spec.journal = Some("ram:64M".parse().unwrap());
        spec.mount_opts = "data=writeback".into();
        let j = PathBuf::from("/dev/loop8");
        let c = mkfs_command(&spec, &PathBuf::from("/dev/loop9"), Some(&j)).unwrap();
        let jcmd = c.journal.unwrap().join(" ");
        assert!(
            jcmd.contains("-O journal_dev")
                && jcmd.contains("-b 4096")
                && jcmd.ends_with("/dev/loop8"),
            "{jcmd}"
        );
        assert!(c.main.join(" ").contains("-J device=/dev/loop8"));
        assert_eq!(
            mount_options(&spec, Some(&j)),
            "data=writeback,journal_path=/dev/loop8"
        );
        spec.fs = FsKind::Xfs;
        assert_eq!(
            mount_options(&spec, Some(&j)),
            "data=writeback,logdev=/dev/loop8"
        );
    }
}
