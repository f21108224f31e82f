//! Room for a testbed's images where they go: the free space of the filesystem that holds
//! them, and on tmpfs (RAM backing, RAM journals, /dev/shm) no more than the memory the
//! kernel says is available, less a margin for fsgauge and the page cache the run itself
//! needs: tmpfs pages are memory, and a RAM disk that outgrows it ends in the OOM killer or
//! swap, not in ENOSPC.

use std::path::{Path, PathBuf};

use super::params::{SIZE_FLAG, SIZE_KEY};
use super::spec::{default_workdir, Backing, ImageAlloc, TestbedSpec, SPARSE_MKFS};
use crate::base::error::bad_param;
use crate::base::sys::statfs::Space;
use crate::base::units::{format_bytes_human, format_size};

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
    let free = Space::of(&st).available;
    if !is_ram(p) {
        return Some(free);
    }
    let mem = crate::base::sys::proc::meminfo("MemAvailable")?.saturating_sub(RAM_MARGIN);
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

/// The nearest existing ancestor of `p` (itself if it exists): where its free space is read.
pub fn nearest_existing(p: &Path) -> PathBuf {
    let mut cur = p.to_path_buf();
    loop {
        if cur.exists() {
            return cur;
        }
        if !cur.pop() {
            return PathBuf::from("/");
        }
    }
}

/// Refuses a testbed whose image (and journal image) would not fit where they go, for a
/// workload that writes about `written` bytes (a sparse image takes that and what mkfs writes,
/// see [`TestbedSpec::image_room`]; 0 counts mkfs's share alone): the image and a journal on
/// the same backing share the work directory's filesystem; a RAM journal of a file-backed
/// testbed lives on tmpfs. Runs are made one at a time, so one testbed's room is what must be
/// free. A `--device` needs none. The one check of room, for a run's admission, a plan's
/// testbeds and every testbed's preflight; the error is bad input at `size` or `journal`.
pub fn check(spec: &TestbedSpec, written: u64) -> anyhow::Result<()> {
    if spec.device.is_some() {
        return Ok(());
    }
    let mut need = spec.image_room(written);
    if let Some(j) = spec.journal {
        if j.backing == spec.backing {
            need = need.saturating_add(j.size);
        } else {
            // A RAM journal always goes to /dev/shm, whatever --workdir says.
            let base = nearest_existing(&default_workdir(j.backing));
            if let Some(avail) = free_space(&base) {
                if j.size > avail {
                    return Err(bad_param(
                        "journal",
                        format!(
                            "testbed {:?} needs {} of {} for its journal but {} has only {} free; make the journal smaller (--journal {}:SIZE, now {}) or put it {}",
                            spec.label,
                            format_bytes_human(j.size as f64),
                            if j.backing == Backing::Ram { "RAM disk" } else { "disk" },
                            describe(&base),
                            format_bytes_human(avail as f64),
                            j.backing,
                            format_size(j.size),
                            if j.backing == Backing::Ram {
                                "on the image's filesystem (--journal file:SIZE)"
                            } else {
                                "in RAM (--journal ram:SIZE)"
                            }
                        ),
                    ));
                }
            }
        }
    }
    let base = nearest_existing(&spec.workdir);
    let Some(avail) = free_space(&base) else {
        return Ok(());
    };
    if need > avail {
        return Err(bad_param(
            "size",
            format!(
                "testbed {:?} needs {} for its image(s) but {} has only {} free; {}",
                spec.label,
                format_bytes_human(need as f64),
                describe(&base),
                format_bytes_human(avail as f64),
                advice(spec, written, need - avail)
            ),
        ));
    }
    Ok(())
}

/// What would make an image fit that is `short` bytes too large for its work directory: a
/// full image can be made smaller or sparse; a sparse one already takes only what is written
/// (and, on a plain loop device, what mkfs zeroes), so only a bigger filesystem, fewer writes,
/// or a smaller size where the size is what counts.
fn advice(spec: &TestbedSpec, written: u64, short: u64) -> String {
    const BIGGER: &str = "pass --workdir on a bigger filesystem";
    if spec.image_alloc == ImageAlloc::Full {
        return format!(
            "make {SIZE_FLAG} smaller (in a plan, {SIZE_KEY}, or a smaller --scale), {BIGGER}, or keep the image sparse (--image-alloc sparse; in a plan, image_alloc = \"sparse\")"
        );
    }
    let image = spec.image_room(written);
    let zeroed = spec.zeroed_room();
    let writes = if written > 0 {
        format!(
            "about twice what the workload writes (2 × {}) plus ",
            format_bytes_human(written as f64)
        )
    } else {
        String::new()
    };
    let mut takes = format!("{writes}{} for mkfs", format_size(SPARSE_MKFS));
    if zeroed > 0 {
        takes.push_str(&format!(
            " and {} for the inode tables mkfs zeroes on a plain loop device",
            format_bytes_human(zeroed as f64)
        ));
    }
    let why = if image == spec.size {
        format!(
            "the image is sparse already, and {takes} would fill all of its {}",
            format_size(spec.size)
        )
    } else {
        format!("the image is sparse already and takes {takes}")
    };
    // A part of the image is named where it makes up at least half of what is short: fewer
    // writes, or a smaller size (where the size is what the image takes, or for the zeroed
    // share, a fraction of the size).
    let half = short / 2;
    let mut helps = vec![BIGGER.to_string()];
    if written.saturating_mul(2) >= half {
        helps.push(
            "have the workload write less (fewer or smaller files, or a smaller --scale)".into(),
        );
    }
    if image == spec.size || zeroed >= half {
        helps.push(format!("make {SIZE_FLAG} smaller (in a plan, {SIZE_KEY})"));
    }
    let last = helps.pop().expect("a bigger filesystem always helps");
    if helps.is_empty() {
        format!("{why}; {last}")
    } else {
        format!("{why}; {}, or {last}", helps.join(", "))
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
        // MemAvailable moves while a build runs beside the test: the room read between two
        // readings is capped by the larger of them.
        let before = crate::base::sys::proc::meminfo("MemAvailable").expect("meminfo");
        let room = free_space(shm).expect("statvfs /dev/shm");
        let after = crate::base::sys::proc::meminfo("MemAvailable").expect("meminfo");
        let mem = before.max(after);
        assert!(room <= mem.saturating_sub(RAM_MARGIN), "{room} > {mem}");
        assert!(describe(shm).contains("RAM"));
    }

    /// The advice says what would help: never `--image-alloc sparse` when the image is sparse
    /// already, and a smaller size only where the size is what the image takes.
    #[test]
    fn a_sparse_image_that_does_not_fit_is_not_told_to_be_sparse() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let free = free_space(dir.path()).expect("statvfs").max(1 << 20);
        let refused = |size: u64, alloc: ImageAlloc, written: u64| {
            let mut spec = TestbedSpec::new(super::super::FsKind::Ext4, size);
            spec.workdir = dir.path().to_path_buf();
            spec.image_alloc = alloc;
            let e = check(&spec, written).expect_err("does not fit");
            assert_eq!(crate::base::error::bad_field(&e), Some("size"));
            format!("{e:#}")
        };
        // The writes are what does not fit: a bigger filesystem or fewer writes.
        let m = refused(1000 * free, ImageAlloc::Sparse, 100 * free);
        assert!(
            !m.contains("image-alloc") && !m.contains("image_alloc"),
            "{m}"
        );
        assert!(
            m.contains("the image is sparse already and takes about twice what the workload writes")
                && m.contains("for the inode tables mkfs zeroes on a plain loop device")
                && m.ends_with("; pass --workdir on a bigger filesystem, or have the workload write less (fewer or smaller files, or a smaller --scale)"),
            "{m}"
        );
        // The size is what the image takes: a smaller one helps too.
        let m = refused(4 * free, ImageAlloc::Sparse, 100 * free);
        assert!(!m.contains("image-alloc"), "{m}");
        assert!(
            m.ends_with("or make --fs-size smaller (in a plan, fs_size)"),
            "{m}"
        );
        // Nothing written, but the inode tables mkfs zeroes are more than the shortfall.
        if free > 2 << 30 {
            let m = refused(1000 * free, ImageAlloc::Sparse, 0);
            assert!(
                m.ends_with("plain loop device; pass --workdir on a bigger filesystem, or make --fs-size smaller (in a plan, fs_size)"),
                "{m}"
            );
        }
        // A full image may still be made sparse.
        let m = refused(2 * free, ImageAlloc::Full, 0);
        assert!(
            m.contains("make --fs-size smaller")
                && m.contains("keep the image sparse (--image-alloc sparse; in a plan, image_alloc = \"sparse\")"),
            "{m}"
        );
    }

    #[test]
    fn disk_room_is_the_free_space() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"));
        if is_ram(p) {
            eprintln!("skipped: the checkout is on tmpfs");
            return;
        }
        let st = nix::sys::statvfs::statvfs(p).expect("statvfs");
        let free = Space::of(&st).available;
        let room = free_space(p).expect("room");
        // Other processes write meanwhile: within 64 MiB.
        assert!(room.abs_diff(free) < 64 << 20, "{room} vs {free}");
        assert_eq!(describe(p), p.display().to_string());
    }
}
