//! The block layout of the files a write phase produced, as the block-reservation study checked
//! it ("the blocks for a file are more contiguous with the reservation mount option on"):
//! FIEMAP extents per file (physically adjacent extents merged, as `filefrag` counts them) and
//! the layout score — the share of a file's blocks, after its first, placed right after the
//! previous block of the same file (1.0 = perfectly contiguous), over files of 2+ blocks.
//!
//! The extents come from the `layout` module's FIEMAP reader; the `layout` module also does the
//! full fragmentation analysis under `--layout`.

use std::os::fd::AsFd;
use std::path::Path;

use anyhow::{Context, Result};

/// One mapped extent: logical and physical byte offsets and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappedExtent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
}

/// The extents of one file, in logical order, flushed first (FIEMAP_FLAG_SYNC).
pub fn extents(path: &Path) -> Result<Vec<MappedExtent>> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut out = Vec::new();
    crate::layout::sys::fiemap(f.as_fd(), crate::layout::sys::FIEMAP_FLAG_SYNC, |e| {
        out.push(MappedExtent {
            logical: e.logical,
            physical: e.physical,
            length: e.length,
        })
    })
    .map_err(|e| {
        anyhow::Error::new(e).context(format!(
            "FIEMAP on {} (the filesystem may not support it)",
            path.display()
        ))
    })?;
    Ok(out)
}

/// Layout figures of one file.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FileLayout {
    /// Extents after merging those that continue each other physically (filefrag's count).
    pub extents: u64,
    /// Blocks of the file (of `block` bytes).
    pub blocks: u64,
    /// Blocks (after the first) that follow the previous block physically.
    pub contiguous: u64,
}

/// Merges adjacent extents and scores the file, in blocks of `block` bytes.
pub fn score(ext: &[MappedExtent], block: u64) -> FileLayout {
    let block = block.max(1);
    let mut l = FileLayout::default();
    let mut prev_end: Option<(u64, u64)> = None; // (logical end, physical end)
    for e in ext {
        let blocks = e.length.div_ceil(block);
        if blocks == 0 {
            continue;
        }
        // As filefrag counts: an extent continues the previous one when it lies where the
        // previous one's physical run, carried across any hole, would put it.
        let adjacent = prev_end.is_some_and(|(le, pe)| {
            e.logical >= le && e.physical == pe.wrapping_add(e.logical - le)
        });
        if !adjacent {
            l.extents += 1;
        }
        // Within an extent every block follows its predecessor; the extent's first block
        // follows only when it continues the previous extent physically.
        l.contiguous += blocks - 1 + u64::from(adjacent);
        l.blocks += blocks;
        prev_end = Some((e.logical + e.length, e.physical + e.length));
    }
    l
}

/// The record of a set of files: mean and largest extent counts, and the layout score.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LayoutRecord {
    pub files: u64,
    pub extents_mean: f64,
    pub extents_max: u64,
    /// Share of contiguous blocks over files of 2+ blocks; 1.0 when there are none.
    pub score: f64,
}

/// Scans every file and sums the figures.
pub fn record(paths: &[std::path::PathBuf], block: u64) -> Result<LayoutRecord> {
    let (mut ext_sum, mut ext_max, mut cont, mut pairs) = (0u64, 0u64, 0u64, 0u64);
    for p in paths {
        let l = score(&extents(p)?, block);
        ext_sum += l.extents;
        ext_max = ext_max.max(l.extents);
        if l.blocks >= 2 {
            cont += l.contiguous;
            pairs += l.blocks - 1;
        }
    }
    let files = paths.len() as u64;
    Ok(LayoutRecord {
        files,
        extents_mean: if files > 0 {
            ext_sum as f64 / files as f64
        } else {
            0.0
        },
        extents_max: ext_max,
        score: if pairs > 0 {
            cont as f64 / pairs as f64
        } else {
            1.0
        },
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn e(logical: u64, physical: u64, length: u64) -> MappedExtent {
        MappedExtent {
            logical,
            physical,
            length,
        }
    }

    #[test]
    fn adjacent_extents_merge_and_breaks_lower_the_score() {
        // 4 blocks contiguous, split in two extents that touch: one extent, score 1.
        let l = score(&[e(0, 4096, 8192), e(8192, 12288, 8192)], 4096);
        assert_eq!((l.extents, l.blocks, l.contiguous), (1, 4, 3));
        // Second half elsewhere: two extents, 2 of 3 successors contiguous.
        let l = score(&[e(0, 4096, 8192), e(8192, 1 << 20, 8192)], 4096);
        assert_eq!((l.extents, l.blocks, l.contiguous), (2, 4, 2));
        // A hole whose physical gap matches the logical one does not break the run.
        let l = score(
            &[e(0, 1 << 20, 4096), e(65536, (1 << 20) + 65536, 4096)],
            4096,
        );
        assert_eq!((l.extents, l.contiguous), (1, 1));
    }

    #[test]
    fn extent_counts_agree_with_filefrag() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let p = dir.path().join("holes");
        let f = std::fs::File::create(&p).unwrap();
        for k in 0..3u64 {
            f.write_all_at(&[7u8; 8192], k << 20).unwrap();
        }
        f.sync_all().unwrap();
        let ours = score(&extents(&p).unwrap(), 4096);
        assert_eq!(ours.blocks, 6);
        let Ok(out) = std::process::Command::new("filefrag").arg(&p).output() else {
            eprintln!("skipped the filefrag comparison: filefrag is not installed");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let theirs: u64 = text
            .rsplit(": ")
            .next()
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("filefrag said {text:?}"));
        assert_eq!(ours.extents, theirs, "filefrag: {text}");
    }
}
