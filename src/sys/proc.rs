//! What the kernel tells about this process and this machine through /proc: memory in use and
//! at its peak (recorded in every result as fsgauge's own footprint), and /proc/meminfo fields
//! (the host's memory, the memory charger's target). Plain file reads; nothing here changes
//! the machine.

use std::fs;

/// Resident set size of this process, from /proc/self/status.
pub fn own_rss() -> u64 {
    status_kib("VmRSS:").unwrap_or(0) * 1024
}

/// Peak resident set size of this process.
pub fn own_peak_rss() -> u64 {
    status_kib("VmHWM:").unwrap_or(0) * 1024
}

fn status_kib(key: &str) -> Option<u64> {
    let s = fs::read_to_string("/proc/self/status").ok()?;
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
