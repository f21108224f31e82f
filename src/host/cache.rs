//! Cold caches: `sync` then `echo 3 > /proc/sys/vm/drop_caches` (page cache, dentries, inodes).

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};

use crate::base::error::bad_input;

/// Drops this process asked of the kernel (each `3` counts once for the page cache and once for
/// the slab, as the kernel's own counters do).
static OWN_DROPS: AtomicU64 = AtomicU64::new(0);

/// Writes back everything and drops clean caches. Needs root.
pub fn drop_caches() -> Result<()> {
    nix::unistd::sync();
    OWN_DROPS.fetch_add(2, Ordering::SeqCst);
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            bad_input("--cold drop needs root (it writes /proc/sys/vm/drop_caches); run as root or use --cold none")
        } else {
            anyhow::Error::from(e).context("writing 3 to /proc/sys/vm/drop_caches")
        }
    })
}

/// Flushes one filesystem (syncfs(2)) through any open file or directory on it.
pub fn syncfs(path: &std::path::Path) -> Result<()> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    nix::unistd::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f))
        .with_context(|| format!("syncfs {}", path.display()))
}

/// A mark for counting cache drops that came from *other* processes: the kernel counts every
/// write to `/proc/sys/vm/drop_caches` in `/proc/vmstat` (`drop_pagecache`, `drop_slab`, since
/// Linux 3.15); this process counts its own. A drop by another process (a `sync; echo 3 >
/// drop_caches` of another benchmark or test suite) empties the caches a measured phase
/// relies on in the middle of it: the phase then reads its metadata again and measures the
/// neighbour.
#[derive(Debug, Clone, Copy)]
pub struct DropMark {
    kernel: Option<u64>,
    own: u64,
}

impl DropMark {
    pub fn now() -> Self {
        Self {
            kernel: kernel_drops(),
            own: OWN_DROPS.load(Ordering::SeqCst),
        }
    }

    /// Drops by other processes since `self` (0 when the kernel does not count them).
    pub fn foreign_since(&self) -> u64 {
        self.foreign_until(&Self::now()) + test_hook::injected()
    }

    fn foreign_until(&self, later: &Self) -> u64 {
        match (self.kernel, later.kernel) {
            (Some(a), Some(b)) => b
                .saturating_sub(a)
                .saturating_sub(later.own.saturating_sub(self.own)),
            _ => 0,
        }
    }
}

/// `FSGAUGE_TEST_FOREIGN_DROPS=N` (debug builds only, inert in release builds): the first N
/// phases of the process count one foreign drop each, as if another process had written
/// `drop_caches` during them, without emptying the caches of the tests running beside.
mod test_hook {
    #[cfg(debug_assertions)]
    pub fn injected() -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        static SEEN: AtomicU64 = AtomicU64::new(0);
        let Some(n) = std::env::var("FSGAUGE_TEST_FOREIGN_DROPS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        else {
            return 0;
        };
        u64::from(SEEN.fetch_add(1, Ordering::SeqCst) < n)
    }

    #[cfg(not(debug_assertions))]
    pub fn injected() -> u64 {
        0
    }
}

fn kernel_drops() -> Option<u64> {
    parse_drops(&std::fs::read_to_string("/proc/vmstat").ok()?)
}

/// `drop_pagecache` + `drop_slab` of a `/proc/vmstat` text; `None` when neither is there.
fn parse_drops(vmstat: &str) -> Option<u64> {
    let mut found = None;
    for line in vmstat.lines() {
        let mut it = line.split_whitespace();
        if let (Some("drop_pagecache" | "drop_slab"), Some(v)) = (it.next(), it.next()) {
            *found.get_or_insert(0) += v.parse::<u64>().ok()?;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_counts_of_drops_are_summed() {
        assert_eq!(
            parse_drops("nr_dirty 1\ndrop_pagecache 7\ndrop_slab 5\npgsteal_kswapd 9\n"),
            Some(12)
        );
        assert_eq!(parse_drops("nr_dirty 1\n"), None);
    }

    #[test]
    fn own_drops_are_not_foreign() {
        let mark = |kernel, own| DropMark { kernel, own };
        // Six drops counted by the kernel, two of them ours (one `echo 3`): four foreign.
        assert_eq!(mark(Some(10), 3).foreign_until(&mark(Some(16), 5)), 4);
        assert_eq!(mark(Some(10), 3).foreign_until(&mark(Some(12), 5)), 0);
        // A kernel that does not count drops sees none.
        assert_eq!(mark(None, 0).foreign_until(&mark(None, 0)), 0);
    }
}
