//! What the kernel tells about this process and this machine through /proc: memory in use and
//! at its peak (recorded in every result as fsgauge's own footprint), /proc/meminfo fields
//! (the host's memory, the memory charger's target), the mount holding a path; and where a
//! program is installed. Plain file reads; nothing here changes the machine.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_fields_unescape() {
        assert_eq!(unescape_mount_field("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape_mount_field("/plain"), "/plain");
    }
}
