//! What the kernel tells about this process and this machine through /proc: memory in use and
//! at its peak (recorded in every result as fsgauge's own footprint), /proc/meminfo fields
//! (the host's memory, the memory charger's target), the mount holding a path, the kernel
//! threads a filesystem runs its journal on; and where a program is installed. Plain file
//! reads; nothing here changes the machine.

use std::fs;
use std::path::{Path, PathBuf};

/// Resident set size of this process, from /proc/self/status.
pub fn own_rss() -> u64 {
    status_kib("VmRSS:").unwrap_or(0) * 1024
}

/// Peak resident set size of this process.
pub fn own_peak_rss() -> u64 {
    status_kib("VmHWM:").unwrap_or(0) * 1024
}

/// Peak resident set size of process `pid` (VmHWM), if it can be read.
pub fn peak_rss_of(pid: u32) -> Option<u64> {
    status_kib_of(&format!("/proc/{pid}/status"), "VmHWM:").map(|k| k * 1024)
}

fn status_kib(key: &str) -> Option<u64> {
    status_kib_of("/proc/self/status", key)
}

fn status_kib_of(path: &str, key: &str) -> Option<u64> {
    let s = fs::read_to_string(path).ok()?;
    s.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Reads a field of /proc/meminfo in bytes.
pub fn meminfo(key: &str) -> Option<u64> {
    let s = fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.split(':').next() == Some(key))?;
    line.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|k| k * 1024)
}

/// Finds the mount holding `path`: (mount point, fs type, source).
pub fn mount_of(path: &Path) -> Option<(PathBuf, String, String)> {
    let canon = path.canonicalize().ok()?;
    let text = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<(PathBuf, String, String)> = None;
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(mp) = fields.get(4) else { continue };
        let mp = PathBuf::from(unescape_mount_field(mp));
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(fstype), Some(src)) = (fields.get(dash + 1), fields.get(dash + 2)) else {
            continue;
        };
        if canon.starts_with(&mp)
            && best
                .as_ref()
                .is_none_or(|b| mp.as_os_str().len() >= b.0.as_os_str().len())
        {
            best = Some((mp, fstype.to_string(), unescape_mount_field(src)));
        }
    }
    best
}

/// /proc/mounts escapes spaces and friends as octal (`\040`).
pub fn unescape_mount_field(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8) {
                out.push(v as char);
                i += 4;
                continue;
            }
        }
        out.push(b[i] as char);
        i += 1;
    }
    out
}

/// Looks a program up on PATH and in the sbin directories (which a non-root PATH may lack).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// A kernel thread's id, name and nice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelThread {
    pub tid: u32,
    pub name: String,
    pub nice: i32,
}

/// The kernel marks its own threads with PF_KTHREAD in /proc/PID/stat's flags.
const PF_KTHREAD: u64 = 0x0020_0000;

/// The names the kernel gives the threads a filesystem on block device `dev` (`loop3`) runs its
/// journal on: ext3's and ext4's journal thread (`jbd2/loop3-8`, the journal in inode 8) and
/// XFS's log-tail pusher (`xfsaild/loop3`). Btrfs names its threads without the device
/// (`btrfs-transacti`), so they cannot be told from another btrfs's and are not among them.
fn fs_thread_names(dev: &str) -> [String; 2] {
    [format!("jbd2/{dev}-8"), format!("xfsaild/{dev}")]
}

/// The kernel threads of the filesystem on block device `dev` (see [`fs_thread_names`]), read
/// from `proc` (`/proc`; tests pass a fake tree). A user process named like one is not taken.
pub fn fs_threads(proc: &Path, dev: &str) -> Vec<KernelThread> {
    let names = fs_thread_names(dev);
    let Ok(dir) = fs::read_dir(proc) else {
        return Vec::new();
    };
    let mut out: Vec<KernelThread> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|tid| {
            let stat = fs::read_to_string(proc.join(tid.to_string()).join("stat")).ok()?;
            let t = kernel_thread_of_stat(tid, &stat)?;
            names.contains(&t.name).then_some(t)
        })
        .collect();
    out.sort_by_key(|t| t.tid);
    out
}

/// Parses /proc/PID/stat for a kernel thread (`None` for a user process or a torn line): the
/// name is between the first '(' and the last ')', flags are the 9th field and nice the 19th.
fn kernel_thread_of_stat(tid: u32, stat: &str) -> Option<KernelThread> {
    let name = &stat[stat.find('(')? + 1..stat.rfind(')')?];
    let rest: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    let flags: u64 = rest.get(6)?.parse().ok()?;
    let nice: i32 = rest.get(16)?.parse().ok()?;
    (flags & PF_KTHREAD != 0).then(|| KernelThread {
        tid,
        name: name.to_string(),
        nice,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_fields_unescape() {
        assert_eq!(unescape_mount_field("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape_mount_field("/plain"), "/plain");
    }

    /// A /proc/PID/stat line with `name`, `flags` and `nice` (the other fields as a kthread's).
    fn stat_line(tid: u32, name: &str, flags: u64, nice: i32) -> String {
        format!("{tid} ({name}) S 2 0 0 0 -1 {flags} 0 0 0 0 0 0 0 0 20 {nice} 1 0 100 0 0\n")
    }

    #[test]
    fn the_journal_threads_of_a_device_are_found_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        for (tid, name, flags, nice) in [
            (10, "jbd2/loop3-8", PF_KTHREAD | 0x40, 0),
            (11, "jbd2/loop31-8", PF_KTHREAD, 0),
            (12, "xfsaild/loop3", PF_KTHREAD, -20),
            // A user process that named itself like the journal thread.
            (13, "jbd2/loop3-8", 0x0040_0100, 0),
            (14, "kworker/u8:1-flush-7:3", PF_KTHREAD, 0),
        ] {
            let d = dir.path().join(tid.to_string());
            fs::create_dir(&d).unwrap();
            fs::write(d.join("stat"), stat_line(tid, name, flags, nice)).unwrap();
        }
        fs::create_dir(dir.path().join("self")).unwrap();
        let got = fs_threads(dir.path(), "loop3");
        let want = vec![
            KernelThread {
                tid: 10,
                name: "jbd2/loop3-8".into(),
                nice: 0,
            },
            KernelThread {
                tid: 12,
                name: "xfsaild/loop3".into(),
                nice: -20,
            },
        ];
        assert_eq!(got, want);
        assert!(fs_threads(&dir.path().join("absent"), "loop3").is_empty());
    }

    #[test]
    fn a_name_with_spaces_and_parentheses_is_read_whole() {
        let t = kernel_thread_of_stat(7, &stat_line(7, "a) (b", PF_KTHREAD, 5)).unwrap();
        assert_eq!((t.name.as_str(), t.nice), ("a) (b", 5));
        assert_eq!(kernel_thread_of_stat(7, "7 (x) S 2"), None, "a torn line");
    }
}
