//! Room for a testbed's images where they go: the free space of the filesystem that holds
//! them, and on tmpfs (RAM backing, RAM journals, /dev/shm) no more than the memory the
//! kernel says is available, less a margin for fsgauge and the page cache the run itself
//! needs: tmpfs pages are memory, and a RAM disk that outgrows it ends in the OOM killer or
//! swap, not in ENOSPC.

use std::path::Path;

/// Memory left over when a RAM-backed image is as large as it may be.
pub const RAM_MARGIN: u64 = 512 << 20;

/// True when `p` is on tmpfs (its bytes live in RAM).
pub fn is_ram(p: &Path) -> bool {
    nix::sys::statfs::statfs(p)
        .map(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
        .unwrap_or(false)
}

/// Bytes that images may take on the filesystem holding `p` (an existing path): its free
/// space, and on tmpfs at most MemAvailable less [`RAM_MARGIN`]. None when it cannot be read.
pub fn free_space(p: &Path) -> Option<u64> {
    let st = nix::sys::statvfs::statvfs(p).ok()?;
    #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
    let free = st.blocks_available() as u64 * st.fragment_size() as u64;
    if !is_ram(p) {
        return Some(free);
    }
    let mem = crate::sys::proc::meminfo("MemAvailable")?.saturating_sub(RAM_MARGIN);
    Some(free.min(mem))
}

/// `p` as an error message names it: tmpfs says that its room is memory.
pub fn describe(p: &Path) -> String {
    if is_ram(p) {
        format!("{} (tmpfs: RAM, counting MemAvailable)", p.display())
    } else {
        p.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmpfs_room_is_capped_by_the_memory_available() {
        let shm = Path::new("/dev/shm");
        if !is_ram(shm) {
            eprintln!("skipped: /dev/shm is not tmpfs here");
            return;
        }
        let mem = crate::sys::proc::meminfo("MemAvailable").expect("meminfo");
        let room = free_space(shm).expect("statvfs /dev/shm");
        assert!(room <= mem.saturating_sub(RAM_MARGIN), "{room} > {mem}");
        assert!(describe(shm).contains("RAM"));
    }

    #[test]
    fn disk_room_is_the_free_space() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"));
        if is_ram(p) {
            eprintln!("skipped: the checkout is on tmpfs");
            return;
        }
        let st = nix::sys::statvfs::statvfs(p).expect("statvfs");
        #[allow(clippy::unnecessary_cast)]
        let free = st.blocks_available() as u64 * st.fragment_size() as u64;
        let room = free_space(p).expect("room");
        // Other processes write meanwhile: within 64 MiB.
        assert!(room.abs_diff(free) < 64 << 20, "{room} vs {free}");
        assert_eq!(describe(p), p.display().to_string());
    }
}
