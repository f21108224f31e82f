//! Fragmentation metrics of one file and of a set of files (ARCHITECTURE.md, "Fragmentation
//! metrics"), computed from extent lists alone so that they can be tested on hand-made lists.
//!
//! * Extents (E) are counted by filefrag's rule (e2fsprogs 1.47 `filefrag_fiemap`): an extent
//!   continues the previous one when it starts where the previous one ends on disk, or where the
//!   previous one would have put it had the file been written without holes (so a hole whose
//!   blocks were skipped on disk too is not a new extent).
//! * Ideal extents (I): the fewest extents the file could have on this filesystem — one per
//!   logically contiguous run of data (a hole is not a fragment), plus, for block-mapped ext2/3/4
//!   files, one per indirect block found right between two data blocks (ext2/3 put them there;
//!   ext4 usually elsewhere), and at least size / largest extent; never more than E.
//! * Fragmentation factor FF = Σ(E − I) / ΣE (Loizides' "fibmap" external fragmentation).
//! * Layout score LS (Smith & Seltzer, "File System Aging", 1997): the share of a file's blocks,
//!   after the first block of each data run, that sit right after the previous block (or right
//!   after the indirect blocks of a block-mapped file); 1.0 is perfectly contiguous. Blocks right after a hole are not judged. Over a set of files the
//!   score is block-weighted (Σ contiguous / Σ judged) over files of 2+ blocks.
//! * Internal fragmentation IF = 1 − Σ data bytes / Σ allocated bytes, where data bytes are the
//!   file bytes that have blocks (holes excluded, so sparse files do not make it negative).
//! * Inter-file locality: over consecutive files of a directory in readdir order that both have
//!   blocks, the share whose first block lies exactly after (within 0) or within 256 blocks of
//!   the previous file's last block.

use serde::{Deserialize, Serialize};

use super::sys::{fe, RawExtent};

crate::choice! {
    /// How a file's map was read (its name is the one used in output).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum MapMethod("map method") {
        /// The FIEMAP ioctl (with FIEMAP_FLAG_SYNC).
        #[default]
        Fiemap = "fiemap",
        /// The FIBMAP ioctl, block by block (filesystems without FIEMAP).
        Fibmap = "fibmap",
        /// The filesystem's own structures read from its block device (ext2/3/4 inode tables and
        /// extent trees or block pointers), giving the extents FIEMAP gives.
        Ondisk = "ondisk",
    }
}

/// What the filesystem's format allows, for ideal-extent counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FormatRules {
    /// Block size in bytes.
    pub block_size: u64,
    /// Longest physically contiguous extent the format allows for ordinary data, bytes
    /// (`u64::MAX` when unknown).
    pub max_extent: u64,
    /// Longest extent for compressed (encoded) data, bytes.
    pub max_encoded_extent: u64,
    /// ext2/3/4 block-mapped file: indirect blocks sit between data blocks.
    pub block_mapped: bool,
}

impl FormatRules {
    /// Rules with nothing known but the block size.
    pub fn plain(block_size: u64) -> Self {
        Self {
            block_size: block_size.max(1),
            max_extent: u64::MAX,
            max_encoded_extent: u64::MAX,
            block_mapped: false,
        }
    }
}

/// The extent flags met in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FlagsMet {
    /// Data stored in the inode or metadata (FIEMAP_EXTENT_DATA_INLINE / DATA_TAIL).
    pub inline: bool,
    /// Allocated but unwritten (preallocated with fallocate).
    pub unwritten: bool,
    /// Shared with another file or snapshot (reflink).
    pub shared: bool,
    /// Encoded: compressed (btrfs) or otherwise transformed.
    pub encoded: bool,
    /// Encrypted data.
    pub encrypted: bool,
    /// Delayed allocation not yet placed (only when the sync flag could not be used).
    pub delalloc: bool,
    /// Location unknown.
    pub unknown: bool,
}

impl FlagsMet {
    fn add(&mut self, f: u32) {
        self.inline |= f & (fe::DATA_INLINE | fe::DATA_TAIL) != 0;
        self.unwritten |= f & fe::UNWRITTEN != 0;
        self.shared |= f & fe::SHARED != 0;
        self.encoded |= f & fe::ENCODED != 0;
        self.encrypted |= f & fe::DATA_ENCRYPTED != 0;
        self.delalloc |= f & fe::DELALLOC != 0;
        self.unknown |= f & fe::UNKNOWN != 0;
    }

    /// The names of the flags that are set, e.g. `["unwritten", "shared"]`.
    pub fn names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        for (on, name) in [
            (self.inline, "inline"),
            (self.unwritten, "unwritten"),
            (self.shared, "shared"),
            (self.encoded, "encoded"),
            (self.encrypted, "encrypted"),
            (self.delalloc, "delalloc"),
            (self.unknown, "unknown"),
        ] {
            if on {
                v.push(name);
            }
        }
        v
    }
}

/// The block layout of one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct FileLayout {
    /// Path as walked (empty when the caller did not need it).
    #[serde(default)]
    pub path: String,
    /// File size, bytes.
    pub size: u64,
    /// Bytes in extents (allocated, including preallocation beyond EOF).
    pub allocated: u64,
    /// File bytes that have blocks (holes excluded).
    pub data_bytes: u64,
    /// Extents, counted as filefrag counts them.
    pub extents: u32,
    /// Extents as the kernel reported them, before filefrag's merging (the on-disk method gives
    /// them as a warm ext4 extent-status cache does: extents that continue each other in the
    /// file and on disk, in the same state, as one).
    pub raw_extents: u32,
    /// The fewest extents the file could have (see module docs).
    pub ideal_extents: u32,
    /// Share of judged blocks placed right after the previous block; `None` under 2 blocks.
    pub layout_score: Option<f64>,
    /// Blocks placed right after their predecessor.
    pub contiguous_blocks: u64,
    /// Blocks judged for the layout score.
    pub judged_blocks: u64,
    /// Blocks with a place on disk.
    pub blocks: u64,
    /// Holes inside the file size (ranges without blocks), a leading and a trailing one included.
    pub holes: u32,
    /// Extent flags met.
    pub flags: FlagsMet,
    /// Physical block of the first block, for inter-file locality.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_block: Option<u64>,
    /// Physical block of the last block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_block: Option<u64>,
    /// How the map was read.
    pub method: MapMethod,
    /// ext2/3/4 block-mapped (indirect blocks) rather than extent-mapped.
    #[serde(default)]
    pub block_mapped: bool,
}

impl FileLayout {
    /// More extents than ideal.
    pub fn fragmented(&self) -> bool {
        self.extents > self.ideal_extents
    }
}

/// Whether an extent has a real place on disk (not inline, delayed or unknown).
fn placed(e: &RawExtent) -> bool {
    e.flags & (fe::DATA_INLINE | fe::DATA_TAIL | fe::DELALLOC | fe::UNKNOWN) == 0
}

/// Counts extents with filefrag's FIEMAP rule (e2fsprogs 1.47 `filefrag_fiemap`).
pub fn filefrag_count(extents: &[RawExtent]) -> u32 {
    let mut tot = 0u32;
    let mut last = RawExtent::default();
    for e in extents {
        let dense = last.physical.wrapping_add(last.length);
        let expected = last
            .physical
            .wrapping_add(e.logical.wrapping_sub(last.logical));
        if e.logical != 0 && e.physical != expected && e.physical != dense {
            tot += 1;
        } else if tot == 0 {
            tot = 1;
        }
        last = *e;
    }
    tot
}

/// Indirect-map blocks an ext2/3 block-mapped file has right before logical block `i`
/// (`bpib` block pointers per block): the rule filefrag's FIBMAP scan uses.
pub fn indirect_blocks_before(i: u64, bpib: u64) -> u64 {
    const DIRECT: u64 = 12;
    if i < DIRECT || bpib == 0 {
        return 0;
    }
    let mut n = 0;
    let k = i - DIRECT;
    if k % bpib == 0 {
        n += 1;
    }
    if k >= bpib && (k - bpib) % (bpib * bpib) == 0 {
        n += 1;
    }
    let b3 = bpib.saturating_mul(bpib).saturating_mul(bpib);
    if k >= bpib + bpib * bpib && (k - bpib - bpib * bpib) % b3 == 0 {
        n += 1;
    }
    n
}

/// Computes a file's layout from its extents (logical order) and size.
pub fn file_layout(extents: &[RawExtent], size: u64, rules: &FormatRules) -> FileLayout {
    let bs = rules.block_size.max(1);
    let bpib = bs / 4;
    let mut fl = FileLayout {
        size,
        extents: filefrag_count(extents),
        raw_extents: extents.len() as u32,
        block_mapped: rules.block_mapped,
        ..Default::default()
    };
    let mut runs = 0u64;
    let mut breaks = 0u64;
    let mut prev: Option<&RawExtent> = None;
    let mut enc_bytes = 0u64;
    let mut plain_bytes = 0u64;
    for e in extents {
        fl.flags.add(e.flags);
        fl.allocated += e.length;
        let end = e.logical.saturating_add(e.length);
        fl.data_bytes += end.min(size).saturating_sub(e.logical.min(size));
        if e.flags & fe::ENCODED != 0 {
            enc_bytes += e.length;
        } else {
            plain_bytes += e.length;
        }
        let adjacent = prev.is_some_and(|p| p.logical + p.length == e.logical);
        match prev {
            None => {
                if e.logical > 0 {
                    fl.holes += 1;
                }
                runs += 1;
            }
            Some(p) if !adjacent => {
                if e.logical > p.logical + p.length {
                    fl.holes += 1;
                }
                runs += 1;
            }
            _ => {}
        }
        if placed(e) {
            let first_lb = e.logical / bs;
            let nblocks = e.length.div_ceil(bs);
            fl.blocks += nblocks;
            if fl.first_block.is_none() {
                fl.first_block = Some(e.physical / bs);
            }
            fl.last_block = Some((e.physical / bs) + nblocks.saturating_sub(1));
            // Blocks inside one extent follow each other.
            fl.judged_blocks += nblocks.saturating_sub(1);
            fl.contiguous_blocks += nblocks.saturating_sub(1);
            if let Some(p) = prev.filter(|p| placed(p)) {
                if adjacent {
                    fl.judged_blocks += 1;
                    let dense = p.physical + p.length.div_ceil(bs) * bs;
                    // A block-mapped file may have its indirect block(s) right here, between
                    // two data blocks: placed as well as the format allows, so not a fragment.
                    let skip = if rules.block_mapped {
                        indirect_blocks_before(first_lb, bpib) * bs
                    } else {
                        0
                    };
                    if e.physical == dense {
                        fl.contiguous_blocks += 1;
                    } else if skip > 0 && e.physical == dense + skip {
                        fl.contiguous_blocks += 1;
                        breaks += 1;
                    }
                }
            }
        }
        prev = Some(e);
    }
    match prev {
        Some(p) => {
            let end = p.logical + p.length;
            if end < size && size.div_ceil(bs) * bs > end {
                fl.holes += 1;
            }
        }
        None if size > 0 => fl.holes += 1,
        None => {}
    }
    if fl.judged_blocks > 0 {
        fl.layout_score = Some(fl.contiguous_blocks as f64 / fl.judged_blocks as f64);
    }
    let by_size = plain_bytes.div_ceil(rules.max_extent.max(1))
        + enc_bytes.div_ceil(rules.max_encoded_extent.max(1));
    let ideal = (runs + breaks).max(by_size);
    fl.ideal_extents = ideal.min(fl.extents as u64) as u32;
    fl
}

/// Buckets of the extents-per-file histogram: 0, 1, 2, 3–4, 5–8, … (powers of two).
pub fn extent_bucket(e: u32) -> usize {
    match e {
        0 => 0,
        1 => 1,
        n => 1 + (32 - (n - 1).leading_zeros()) as usize,
    }
}

/// The label of a histogram bucket: `0`, `1`, `2`, `3-4`, `5-8`, …
pub fn extent_bucket_label(b: usize) -> String {
    match b {
        0 => "0".into(),
        1 => "1".into(),
        2 => "2".into(),
        b => {
            let hi = 1u64 << (b - 1);
            format!("{}-{}", hi / 2 + 1, hi)
        }
    }
}

/// Why entries were not scanned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// Gone between the directory read and the open (or during the map read).
    pub vanished: u64,
    /// Open or map refused (EACCES/EPERM).
    pub permission_denied: u64,
    /// FIFOs, sockets, device nodes.
    pub special_files: u64,
    /// Symbolic links (never followed).
    pub symlinks: u64,
    /// Directories on another filesystem, or mount points, not crossed (see --cross-mounts).
    pub other_mounts: u64,
    /// Directories met a second time (bind-mount loops).
    pub loops: u64,
    /// Files on a filesystem with no block map to read (neither FIEMAP nor FIBMAP).
    #[serde(default)]
    pub unsupported: u64,
    /// Other errors (I/O errors, maps that could not be read).
    pub errors: u64,
    /// The first few error messages, naming the path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<String>,
}

impl Skipped {
    const MAX_MESSAGES: usize = 20;

    /// Keeps a message (the first few only).
    pub fn note(&mut self, msg: String) {
        if self.messages.len() < Self::MAX_MESSAGES {
            self.messages.push(msg);
        }
    }

    fn merge(&mut self, o: Skipped) {
        self.vanished += o.vanished;
        self.permission_denied += o.permission_denied;
        self.special_files += o.special_files;
        self.symlinks += o.symlinks;
        self.other_mounts += o.other_mounts;
        self.loops += o.loops;
        self.unsupported += o.unsupported;
        self.errors += o.errors;
        for m in o.messages {
            self.note(m);
        }
    }

    /// Entries skipped in total (symlinks included).
    pub fn total(&self) -> u64 {
        self.vanished
            + self.permission_denied
            + self.special_files
            + self.symlinks
            + self.other_mounts
            + self.loops
            + self.unsupported
            + self.errors
    }
}

/// One row of the extents-per-file histogram.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtentBucket {
    /// `0`, `1`, `2`, `3-4`, `5-8`, …
    pub extents: String,
    /// Files with that many extents.
    pub files: u64,
}

/// Inter-file locality in directory order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Locality {
    /// Consecutive pairs of files (both with blocks) judged.
    pub pairs: u64,
    /// Pairs where the second file starts right after the first ends.
    pub within_0: u64,
    /// Pairs where the second file starts within 256 blocks of the first's end (either way).
    pub within_256: u64,
    /// within_0 / pairs.
    pub share_within_0: Option<f64>,
    /// within_256 / pairs.
    pub share_within_256: Option<f64>,
}

/// Files per extent flag.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagCounts {
    pub inline: u64,
    pub unwritten: u64,
    pub shared: u64,
    pub encoded: u64,
    pub encrypted: u64,
    pub delalloc: u64,
    pub unknown: u64,
}

/// The layout of a set of files: what `fsgauge frag` reports and `--layout` stores.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LayoutSummary {
    /// Regular files scanned.
    pub files: u64,
    /// Σ file size, bytes.
    pub bytes: u64,
    /// Σ bytes with blocks (holes excluded).
    pub data_bytes: u64,
    /// Σ bytes in extents.
    pub allocated_bytes: u64,
    /// Σ extents (filefrag's count).
    pub extents: u64,
    /// Σ ideal extents.
    pub ideal_extents: u64,
    /// Mean extents per file.
    pub extents_per_file_mean: Option<f64>,
    /// Most extents in one file.
    pub extents_per_file_max: u32,
    /// Files by extent count.
    pub extents_histogram: Vec<ExtentBucket>,
    /// FF = Σ(E − I) / ΣE.
    pub fragmentation_factor: Option<f64>,
    /// Block-weighted layout score over files of 2+ blocks.
    pub layout_score: Option<f64>,
    /// Files the layout score was computed over.
    pub layout_score_files: u64,
    /// Files with more extents than ideal.
    pub fragmented_files: u64,
    /// fragmented_files / files.
    pub fragmented_files_share: Option<f64>,
    /// Bytes of fragmented files / bytes.
    pub fragmented_bytes_share: Option<f64>,
    /// IF = 1 − data bytes / allocated bytes.
    pub internal_fragmentation: Option<f64>,
    /// Inter-file locality in directory order.
    pub locality: Locality,
    /// Files per extent flag.
    pub flags: FlagCounts,
    /// Files mapped with FIEMAP.
    pub fiemap_files: u64,
    /// Files mapped with FIBMAP (FIEMAP not supported).
    pub fibmap_files: u64,
    /// Files mapped from the filesystem's on-disk structures (ext2/3/4 inode tables).
    #[serde(default)]
    pub ondisk_files: u64,
    /// The map-reading method asked for: `auto`, `fiemap` or `ondisk`.
    #[serde(default)]
    pub method: String,
    /// Why the on-disk reader was not used for a filesystem, or for a file (the first few).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub method_notes: Vec<String>,
    /// Block-mapped (indirect) ext2/3/4 files.
    pub block_mapped_files: u64,
    /// The worst files by extents (then size), at most the K asked for.
    pub worst: Vec<FileLayout>,
    /// Entries not scanned, and why.
    pub skipped: Skipped,
}

/// Accumulates a [`LayoutSummary`] in constant memory (plus the top-K list).
#[derive(Debug, Clone, Default)]
pub struct SummaryBuilder {
    files: u64,
    bytes: u64,
    data_bytes: u64,
    allocated: u64,
    extents: u64,
    ideal: u64,
    max_extents: u32,
    hist: Vec<u64>,
    contiguous: u64,
    judged: u64,
    ls_files: u64,
    fragmented: u64,
    fragmented_bytes: u64,
    locality: Locality,
    flags: FlagCounts,
    fiemap: u64,
    fibmap: u64,
    ondisk: u64,
    block_mapped: u64,
    top_k: usize,
    /// Notes on the map-reading method (public so the walker can add to it).
    pub method_notes: Vec<String>,
    worst: Vec<FileLayout>,
    /// Skip counters (public so the walker can count into it).
    pub skipped: Skipped,
    prev_last: Option<u64>,
}

fn worse(a: &FileLayout, b: &FileLayout) -> std::cmp::Ordering {
    b.extents
        .cmp(&a.extents)
        .then(b.size.cmp(&a.size))
        .then(a.path.cmp(&b.path))
}

impl SummaryBuilder {
    /// A builder that keeps the `top_k` worst files.
    pub fn new(top_k: usize) -> Self {
        Self {
            top_k,
            ..Default::default()
        }
    }

    /// Whether `f` would enter the worst-K list (so a caller can skip building its path).
    pub fn wants_worst(&self, f: &FileLayout) -> bool {
        self.top_k > 0
            && (self.worst.len() < self.top_k
                || self
                    .worst
                    .last()
                    .is_some_and(|w| worse(f, w) == std::cmp::Ordering::Less))
    }

    /// Files added so far.
    pub fn mapped_files(&self) -> u64 {
        self.files
    }

    /// Keeps a note on the map-reading method (the first few, no repeats).
    pub fn note_method(&mut self, note: String) {
        if self.method_notes.len() < 20 && !self.method_notes.contains(&note) {
            self.method_notes.push(note);
        }
    }

    /// Starts a new directory: inter-file locality pairs never span two directories.
    pub fn new_directory(&mut self) {
        self.prev_last = None;
    }

    /// Adds one file (in directory order).
    pub fn add(&mut self, f: &FileLayout) {
        self.files += 1;
        self.bytes += f.size;
        self.data_bytes += f.data_bytes;
        self.allocated += f.allocated;
        self.extents += f.extents as u64;
        self.ideal += f.ideal_extents as u64;
        self.max_extents = self.max_extents.max(f.extents);
        let b = extent_bucket(f.extents);
        if self.hist.len() <= b {
            self.hist.resize(b + 1, 0);
        }
        self.hist[b] += 1;
        if f.judged_blocks > 0 {
            self.contiguous += f.contiguous_blocks;
            self.judged += f.judged_blocks;
            self.ls_files += 1;
        }
        if f.fragmented() {
            self.fragmented += 1;
            self.fragmented_bytes += f.size;
        }
        let fl = &f.flags;
        for (on, c) in [
            (fl.inline, &mut self.flags.inline),
            (fl.unwritten, &mut self.flags.unwritten),
            (fl.shared, &mut self.flags.shared),
            (fl.encoded, &mut self.flags.encoded),
            (fl.encrypted, &mut self.flags.encrypted),
            (fl.delalloc, &mut self.flags.delalloc),
            (fl.unknown, &mut self.flags.unknown),
        ] {
            if on {
                *c += 1;
            }
        }
        match f.method {
            MapMethod::Fiemap => self.fiemap += 1,
            MapMethod::Fibmap => self.fibmap += 1,
            MapMethod::Ondisk => self.ondisk += 1,
        }
        if f.block_mapped {
            self.block_mapped += 1;
        }
        if let (Some(first), Some(last)) = (f.first_block, f.last_block) {
            if let Some(prev) = self.prev_last {
                let gap = (first as i128 - (prev as i128 + 1)).unsigned_abs();
                self.locality.pairs += 1;
                if gap == 0 {
                    self.locality.within_0 += 1;
                }
                if gap <= 256 {
                    self.locality.within_256 += 1;
                }
            }
            self.prev_last = Some(last);
        }
        if self.wants_worst(f) {
            self.push_worst(f.clone());
        }
    }

    fn push_worst(&mut self, f: FileLayout) {
        let at = self
            .worst
            .binary_search_by(|w| worse(w, &f))
            .unwrap_or_else(|i| i);
        self.worst.insert(at, f);
        self.worst.truncate(self.top_k);
    }

    /// Folds another builder in (from another thread).
    pub fn merge(&mut self, o: SummaryBuilder) {
        self.files += o.files;
        self.bytes += o.bytes;
        self.data_bytes += o.data_bytes;
        self.allocated += o.allocated;
        self.extents += o.extents;
        self.ideal += o.ideal;
        self.max_extents = self.max_extents.max(o.max_extents);
        if self.hist.len() < o.hist.len() {
            self.hist.resize(o.hist.len(), 0);
        }
        for (i, n) in o.hist.iter().enumerate() {
            self.hist[i] += n;
        }
        self.contiguous += o.contiguous;
        self.judged += o.judged;
        self.ls_files += o.ls_files;
        self.fragmented += o.fragmented;
        self.fragmented_bytes += o.fragmented_bytes;
        self.locality.pairs += o.locality.pairs;
        self.locality.within_0 += o.locality.within_0;
        self.locality.within_256 += o.locality.within_256;
        self.flags.inline += o.flags.inline;
        self.flags.unwritten += o.flags.unwritten;
        self.flags.shared += o.flags.shared;
        self.flags.encoded += o.flags.encoded;
        self.flags.encrypted += o.flags.encrypted;
        self.flags.delalloc += o.flags.delalloc;
        self.flags.unknown += o.flags.unknown;
        self.fiemap += o.fiemap;
        self.fibmap += o.fibmap;
        self.ondisk += o.ondisk;
        self.block_mapped += o.block_mapped;
        for n in o.method_notes {
            self.note_method(n);
        }
        self.skipped.merge(o.skipped);
        for w in o.worst {
            if self.wants_worst(&w) {
                self.push_worst(w);
            }
        }
    }

    /// The summary.
    pub fn finish(self) -> LayoutSummary {
        let ratio = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
        let mut loc = self.locality;
        loc.share_within_0 = ratio(loc.within_0, loc.pairs);
        loc.share_within_256 = ratio(loc.within_256, loc.pairs);
        LayoutSummary {
            files: self.files,
            bytes: self.bytes,
            data_bytes: self.data_bytes,
            allocated_bytes: self.allocated,
            extents: self.extents,
            ideal_extents: self.ideal,
            extents_per_file_mean: ratio(self.extents, self.files),
            extents_per_file_max: self.max_extents,
            extents_histogram: self
                .hist
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(b, n)| ExtentBucket {
                    extents: extent_bucket_label(b),
                    files: *n,
                })
                .collect(),
            fragmentation_factor: ratio(self.extents.saturating_sub(self.ideal), self.extents),
            layout_score: ratio(self.contiguous, self.judged),
            layout_score_files: self.ls_files,
            fragmented_files: self.fragmented,
            fragmented_files_share: ratio(self.fragmented, self.files),
            fragmented_bytes_share: ratio(self.fragmented_bytes, self.bytes),
            internal_fragmentation: ratio(self.data_bytes, self.allocated).map(|r| 1.0 - r),
            locality: loc,
            flags: self.flags,
            fiemap_files: self.fiemap,
            fibmap_files: self.fibmap,
            ondisk_files: self.ondisk,
            method: String::new(),
            method_notes: self.method_notes,
            block_mapped_files: self.block_mapped,
            worst: self.worst,
            skipped: self.skipped,
        }
    }
}

/// Summarizes files given in directory order (one directory), keeping the `top_k` worst.
pub fn summarize<'a>(
    files: impl IntoIterator<Item = &'a FileLayout>,
    top_k: usize,
) -> LayoutSummary {
    let mut b = SummaryBuilder::new(top_k);
    for f in files {
        b.add(f);
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BS: u64 = 4096;

    fn ext(lblk: u64, pblk: u64, blocks: u64) -> RawExtent {
        RawExtent {
            logical: lblk * BS,
            physical: pblk * BS,
            length: blocks * BS,
            flags: 0,
        }
    }

    fn ext4() -> FormatRules {
        FormatRules {
            block_size: BS,
            max_extent: 32768 * BS,
            max_encoded_extent: 32768 * BS,
            block_mapped: false,
        }
    }

    #[test]
    fn contiguous_file_scores_one() {
        let f = file_layout(&[ext(0, 1000, 10)], 10 * BS, &ext4());
        assert_eq!(f.extents, 1);
        assert_eq!(f.ideal_extents, 1);
        assert_eq!(f.layout_score, Some(1.0));
        assert_eq!((f.contiguous_blocks, f.judged_blocks), (9, 9));
        assert!(!f.fragmented());
        assert_eq!(f.holes, 0);
        assert_eq!(f.first_block, Some(1000));
        assert_eq!(f.last_block, Some(1009));
    }

    #[test]
    fn every_block_elsewhere_scores_zero() {
        let e: Vec<_> = (0..5).map(|i| ext(i, 5000 - i * 100, 1)).collect();
        let f = file_layout(&e, 5 * BS, &ext4());
        assert_eq!(f.extents, 5);
        assert_eq!(f.ideal_extents, 1);
        assert_eq!(f.layout_score, Some(0.0));
        assert!(f.fragmented());
        let s = summarize([&f], 1);
        assert_eq!(s.fragmentation_factor, Some(0.8));
        assert_eq!(s.fragmented_files_share, Some(1.0));
    }

    #[test]
    fn a_hole_is_not_a_fragment() {
        // Two contiguous runs with a hole between, the second placed far away.
        let f = file_layout(&[ext(0, 100, 4), ext(10, 9000, 4)], 14 * BS, &ext4());
        assert_eq!(f.extents, 2);
        assert_eq!(f.ideal_extents, 2);
        assert!(!f.fragmented());
        assert_eq!(f.holes, 1);
        assert_eq!(f.layout_score, Some(1.0));
        assert_eq!(f.data_bytes, 8 * BS);
        let s = summarize([&f], 0);
        assert_eq!(s.fragmentation_factor, Some(0.0));
        assert_eq!(s.internal_fragmentation, Some(0.0));
    }

    #[test]
    fn filefrag_merges_physically_adjacent_extents() {
        // Logically and physically adjacent: one extent.
        assert_eq!(filefrag_count(&[ext(0, 100, 4), ext(4, 104, 4)]), 1);
        // Across a hole, placed where the hole's blocks would have gone: one extent.
        assert_eq!(filefrag_count(&[ext(0, 100, 4), ext(10, 110, 4)]), 1);
        // Across a hole, placed right after the previous extent on disk: one extent.
        assert_eq!(filefrag_count(&[ext(0, 100, 4), ext(10, 104, 4)]), 1);
        // Elsewhere: two.
        assert_eq!(filefrag_count(&[ext(0, 100, 4), ext(4, 200, 4)]), 2);
        // Nothing: zero; a file starting with a hole: one.
        assert_eq!(filefrag_count(&[]), 0);
        assert_eq!(filefrag_count(&[ext(7, 300, 1)]), 1);
        // Sparse file laid out at logical distances: one extent, and ideal clamps to it.
        let f = file_layout(
            &[ext(0, 100, 1), ext(16, 116, 1), ext(32, 132, 1)],
            33 * BS,
            &ext4(),
        );
        assert_eq!((f.extents, f.raw_extents, f.ideal_extents), (1, 3, 1));
        assert_eq!(f.holes, 2);
        assert_eq!(f.layout_score, None, "blocks after holes are not judged");
    }

    #[test]
    fn empty_and_tail_files() {
        let f = file_layout(&[], 0, &ext4());
        assert_eq!((f.extents, f.ideal_extents, f.blocks), (0, 0, 0));
        assert_eq!(f.layout_score, None);
        // Truncated up: a trailing hole.
        let f = file_layout(&[], 3 * BS, &ext4());
        assert_eq!(f.holes, 1);
        // A 10-byte file in one block: internal fragmentation.
        let f = file_layout(&[ext(0, 50, 1)], 10, &ext4());
        assert_eq!(f.extents, 1);
        assert_eq!(f.layout_score, None);
        let s = summarize([&f], 0);
        let want = 1.0 - 10.0 / BS as f64;
        assert!((s.internal_fragmentation.expect("allocated") - want).abs() < 1e-12);
    }

    #[test]
    fn block_mapped_indirect_blocks_are_not_fragments() {
        assert_eq!(indirect_blocks_before(11, 1024), 0);
        assert_eq!(indirect_blocks_before(12, 1024), 1);
        assert_eq!(indirect_blocks_before(13, 1024), 0);
        assert_eq!(indirect_blocks_before(12 + 1024, 1024), 2);
        assert_eq!(indirect_blocks_before(12 + 2048, 1024), 1);
        assert_eq!(indirect_blocks_before(12 + 1024 + 1024 * 1024, 1024), 3);
        // Blocks 0..11 at 100.., indirect block at 112, blocks 12..19 at 113..
        let rules = FormatRules {
            block_mapped: true,
            ..ext4()
        };
        let f = file_layout(&[ext(0, 100, 12), ext(12, 113, 8)], 20 * BS, &rules);
        assert_eq!(f.extents, 2);
        assert_eq!(f.ideal_extents, 2);
        assert!(!f.fragmented());
        assert_eq!(f.layout_score, Some(1.0));
        // The same file on an extent-mapped inode is fragmented.
        let g = file_layout(&[ext(0, 100, 12), ext(12, 113, 8)], 20 * BS, &ext4());
        assert!(g.fragmented());
        assert_eq!(g.contiguous_blocks, 18);
    }

    #[test]
    fn largest_extent_bounds_the_ideal() {
        let max = 32768;
        let f = file_layout(
            &[ext(0, 0, max), ext(max, max + 10, max)],
            2 * max * BS,
            &ext4(),
        );
        assert_eq!((f.extents, f.ideal_extents), (2, 2));
        // Compressed extents hold 128 KiB each.
        let rules = FormatRules {
            max_encoded_extent: 128 << 10,
            ..ext4()
        };
        let e: Vec<_> = (0..4)
            .map(|i| RawExtent {
                flags: fe::ENCODED,
                ..ext(i * 32, 1000 + i * 10, 32)
            })
            .collect();
        let f = file_layout(&e, 128 * BS, &rules);
        assert_eq!((f.extents, f.ideal_extents), (4, 4));
        assert!(f.flags.encoded);
    }

    #[test]
    fn flags_are_collected() {
        let e = [
            RawExtent {
                flags: fe::UNWRITTEN,
                ..ext(0, 10, 2)
            },
            RawExtent {
                flags: fe::SHARED | fe::LAST,
                ..ext(2, 12, 2)
            },
        ];
        let f = file_layout(&e, 4 * BS, &ext4());
        assert_eq!(f.flags.names(), vec!["unwritten", "shared"]);
        let s = summarize([&f], 0);
        assert_eq!(
            (s.flags.unwritten, s.flags.shared, s.flags.inline),
            (1, 1, 0)
        );
    }

    #[test]
    fn inter_file_locality_in_directory_order() {
        let a = file_layout(&[ext(0, 100, 10)], 10 * BS, &ext4());
        let b = file_layout(&[ext(0, 110, 10)], 10 * BS, &ext4());
        let c = file_layout(&[ext(0, 300, 1)], BS, &ext4());
        let empty = file_layout(&[], 0, &ext4());
        let d = file_layout(&[ext(0, 100_000, 1)], BS, &ext4());
        let s = summarize([&a, &b, &c, &empty, &d], 0);
        assert_eq!(s.locality.pairs, 3);
        assert_eq!(s.locality.within_0, 1);
        assert_eq!(s.locality.within_256, 2);
        // Pairs never span directories.
        let mut bld = SummaryBuilder::new(0);
        bld.add(&a);
        bld.new_directory();
        bld.add(&b);
        assert_eq!(bld.finish().locality.pairs, 0);
    }

    #[test]
    fn summary_histogram_worst_and_merge() {
        assert_eq!(
            (0..10).map(extent_bucket).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 3, 4, 4, 4, 4, 5]
        );
        assert_eq!(extent_bucket_label(3), "3-4");
        assert_eq!(extent_bucket_label(5), "9-16");
        let mk = |n: u64, path: &str| {
            let e: Vec<_> = (0..n).map(|i| ext(i, 10_000 - i * 10, 1)).collect();
            let mut f = file_layout(&e, n * BS, &ext4());
            f.path = path.into();
            f
        };
        let files = [mk(1, "a"), mk(7, "b"), mk(3, "c"), mk(12, "d")];
        let mut x = SummaryBuilder::new(2);
        x.add(&files[0]);
        x.add(&files[1]);
        let mut y = SummaryBuilder::new(2);
        y.add(&files[2]);
        y.add(&files[3]);
        x.merge(y);
        let s = x.finish();
        assert_eq!(s.files, 4);
        assert_eq!(s.extents, 23);
        assert_eq!(s.ideal_extents, 4);
        assert_eq!(s.extents_per_file_max, 12);
        let w: Vec<_> = s.worst.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(w, vec!["d", "b"]);
        let h: Vec<_> = s
            .extents_histogram
            .iter()
            .map(|b| (b.extents.as_str(), b.files))
            .collect();
        assert_eq!(h, vec![("1", 1), ("3-4", 1), ("5-8", 1), ("9-16", 1)]);
        assert_eq!(s.fragmented_files, 3);
        assert_eq!(s.fragmented_bytes_share, Some(22.0 / 23.0));
    }
}
