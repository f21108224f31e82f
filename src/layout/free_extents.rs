//! What a free-space scan finds, whichever reader found it: the [`FreeSpace`] report and the
//! e2freefrag-style [`FreeHistogram`] that the readers (GETFSMAP, the ext block bitmaps,
//! e2freefrag, the btrfs extent tree) fill.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The e2freefrag histogram has 32 buckets: bucket i holds extents of [2^(i-1), 2^i) blocks.
pub const BUCKETS: usize = 32;

/// One row of the free-extent histogram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FreeBucket {
    /// Smallest extent in the bucket, bytes.
    pub from_bytes: u64,
    /// Largest extent in the bucket is below this, bytes.
    pub to_bytes: u64,
    /// e2freefrag's label, e.g. `4K...8K-`.
    pub range: String,
    /// Free extents in the bucket.
    pub extents: u64,
    /// Free blocks in those extents.
    pub blocks: u64,
    /// Share of all free blocks, percent.
    pub percent: f64,
}

/// The free-space report of one filesystem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FreeSpace {
    /// The mount point (or path) asked about.
    pub path: String,
    /// Filesystem name.
    pub fs: String,
    /// Where the numbers come from: `getfsmap`, `block-bitmaps`, `e2freefrag` or
    /// `btrfs-tree-search`.
    pub method: String,
    /// Block size, bytes.
    pub block_size: u64,
    /// Blocks in the filesystem (the space the map covers).
    pub total_blocks: u64,
    /// Free blocks.
    pub free_blocks: u64,
    /// Free bytes.
    pub free_bytes: u64,
    /// Free extents.
    pub free_extents: u64,
    /// Smallest free extent, bytes.
    pub min_free_extent: u64,
    /// Largest free extent, bytes.
    pub largest_free_extent: u64,
    /// Mean free extent, bytes.
    pub mean_free_extent: f64,
    /// largest free extent / free bytes.
    pub largest_free_share: Option<f64>,
    /// Free extents per GiB of free space.
    pub free_extents_per_gib: Option<f64>,
    /// The log2 histogram (buckets with extents only).
    pub histogram: Vec<FreeBucket>,
    /// btrfs: device space not allocated to any chunk, bytes (included in the figures above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unallocated_bytes: Option<u64>,
}

/// The filesystem offers no way to read its free space.
#[derive(Debug, thiserror::Error)]
#[error("free-space scan not supported on {fs} ({path}): {why}")]
pub struct Unsupported {
    pub fs: String,
    pub path: String,
    pub why: String,
}

/// Accumulates free extents (in blocks) into e2freefrag's histogram.
#[derive(Debug, Clone)]
pub struct FreeHistogram {
    block_size: u64,
    extents: [u64; BUCKETS],
    blocks: [u64; BUCKETS],
    count: u64,
    total: u64,
    min: u64,
    max: u64,
}

pub(super) fn log2_floor(v: u64) -> usize {
    if v == 0 {
        0
    } else {
        63 - v.leading_zeros() as usize
    }
}

impl FreeHistogram {
    /// An empty histogram for a filesystem of `block_size`-byte blocks.
    pub fn new(block_size: u64) -> Self {
        Self {
            block_size: block_size.max(1),
            extents: [0; BUCKETS],
            blocks: [0; BUCKETS],
            count: 0,
            total: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Adds one free extent of `blocks` blocks (e2freefrag `update_chunk_stats`).
    pub fn add(&mut self, blocks: u64) {
        if blocks == 0 {
            return;
        }
        let idx = (log2_floor(blocks) + 1).min(BUCKETS - 1);
        self.extents[idx] += 1;
        self.blocks[idx] += blocks;
        self.count += 1;
        self.total += blocks;
        self.min = self.min.min(blocks);
        self.max = self.max.max(blocks);
    }

    /// The report, given where it came from.
    pub fn report(
        &self,
        path: &Path,
        fs: &str,
        method: &str,
        total_blocks: u64,
        free_blocks: u64,
    ) -> FreeSpace {
        let bs = self.block_size;
        let free_bytes = free_blocks * bs;
        let mut histogram = Vec::new();
        for i in 0..BUCKETS {
            if self.extents[i] == 0 {
                continue;
            }
            let from = if i == 0 { 0 } else { (1u64 << (i - 1)) * bs };
            let to = (1u64 << i) * bs;
            histogram.push(FreeBucket {
                from_bytes: from,
                to_bytes: to,
                range: freefrag_label(i, bs),
                extents: self.extents[i],
                blocks: self.blocks[i],
                percent: if free_blocks > 0 {
                    self.blocks[i] as f64 * 100.0 / free_blocks as f64
                } else {
                    0.0
                },
            });
        }
        let gib = free_bytes as f64 / (1u64 << 30) as f64;
        FreeSpace {
            path: path.display().to_string(),
            fs: fs.into(),
            method: method.into(),
            block_size: bs,
            total_blocks,
            free_blocks,
            free_bytes,
            free_extents: self.count,
            min_free_extent: if self.count > 0 { self.min * bs } else { 0 },
            largest_free_extent: self.max * bs,
            mean_free_extent: if self.count > 0 {
                self.total as f64 * bs as f64 / self.count as f64
            } else {
                0.0
            },
            largest_free_share: (free_bytes > 0)
                .then(|| (self.max * bs) as f64 / free_bytes as f64),
            free_extents_per_gib: (free_bytes > 0).then(|| self.count as f64 / gib),
            histogram,
            unallocated_bytes: None,
        }
    }
}

/// e2freefrag's range label for bucket `i` (`    4K...    8K-`, trimmed).
pub fn freefrag_label(i: usize, block_size: u64) -> String {
    let units = ['K', 'M', 'G', 'T', 'P', 'E', 'Z', 'Y'];
    let bits = log2_floor(block_size) as u32;
    // Walk the buckets as dump_chunk_info does, carrying start/end and the unit.
    let mut unit = 0usize;
    let mut shift: u32 = 10;
    let mut start: u64 = 0;
    for j in 0..=i {
        let e_exp = (j as u32 + bits).saturating_sub(shift);
        let end = 1u64 << e_exp.min(63);
        if j == i {
            let end_s = if i == BUCKETS - 1 {
                "max".to_string()
            } else {
                format!("{end}{}-", units[unit])
            };
            return format!("{start}{}...{end_s}", units[unit]);
        }
        start = end;
        if start == 1 << 10 {
            start = 1;
            shift += 10;
            unit = (unit + 1).min(units.len() - 1);
        }
    }
    String::new()
}
