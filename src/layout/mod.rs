//! Block layout and fragmentation: where a workload's files ended up on disk, and how broken up
//! the free space is — the "fibmap" tool of the journaling-filesystem fragmentation project
//! (seed study 3, Loizides 2001–2004), done with today's interfaces and exactly as `filefrag` and
//! `e2freefrag` count.
//!
//! # Public API (reused by the aging engine and by workloads that record layout per phase)
//! * [`scan_file`]`(path) -> FileLayout` — one file's extents (FIEMAP with FIEMAP_FLAG_SYNC,
//!   FIBMAP where FIEMAP is missing), counted as filefrag counts them, with its ideal extent
//!   count, layout score, holes and flags.
//! * [`scan_tree`]`(paths, &WalkOptions, sink) -> LayoutSummary` — a parallel walk of whole
//!   trees (no mount crossing unless asked; vanishing files, permission errors, special files and
//!   bind-mount loops are counted, not fatal), summarized in constant memory; `sink` sees every
//!   file when per-file output is wanted. By default ([`ScanMethod::Auto`]) files on ext2/3/4
//!   are mapped from the filesystem's own inode tables and extent trees read from the block
//!   device ([`ext`]), without opening them — the same extents FIEMAP gives, several times
//!   faster — and with FIEMAP wherever that cannot be done.
//! * [`summarize`]`(files, top_k) -> LayoutSummary` — the same summary over files you have.
//! * [`free_space`]`(mountpoint) -> FreeSpace` — the free-extent histogram (as e2freefrag),
//!   from GETFSMAP, the ext2/3/4 block bitmaps, e2freefrag or the btrfs tree search; an
//!   [`Unsupported`] error elsewhere.
//! * [`snapshot`]`(root, mountpoint) -> serde_json::Value` — what `--layout` stores in a run
//!   result: `{"tree": LayoutSummary, "free_space": FreeSpace | {"error": …}}`.
//!
//! The metric definitions are in [`metrics`] (ARCHITECTURE.md, "Fragmentation metrics").

mod btrfs;
pub mod ext;
mod free;
mod free_extents;
pub mod metrics;
mod scan;
pub mod sys;
mod walk;

use std::path::{Path, PathBuf};

use anyhow::Result;

pub use free::{
    bitmap_free, e2freefrag, freefrag_label, parse_e2freefrag, E2freefragReport, FreeBucket,
    FreeHistogram, FreeSpace, Unsupported,
};
pub use metrics::{
    file_layout, filefrag_count, summarize, FileLayout, FlagsMet, FormatRules, LayoutSummary,
    MapMethod, SummaryBuilder,
};
pub use scan::FsRules;
pub use sys::fs_name;
pub use walk::{scan_tree, FileSink, ScanMethod, WalkOptions};

/// The layout of one regular file (see [`FileLayout`]).
pub fn scan_file(path: &Path) -> Result<FileLayout> {
    scan::scan_path(path, MapMethod::Fiemap)
}

/// As [`scan_file`], choosing the method: `MapMethod::Fibmap` reads the map block by block with
/// FIBMAP, as `filefrag -B` does (needs root).
pub fn scan_file_with(path: &Path, method: MapMethod) -> Result<FileLayout> {
    scan::scan_path(path, method)
}

/// The free space of the filesystem mounted at (or holding) `mountpoint`.
pub fn free_space(mountpoint: &Path) -> Result<FreeSpace> {
    free::free_space(mountpoint)
}

/// The `--layout` record of a run: the tree below `root` (top 10 worst files) and the free
/// space of the filesystem at `mountpoint`. A filesystem whose free space cannot be read gets
/// `{"error": "..."}` there instead of numbers.
pub fn snapshot(root: &Path, mountpoint: &Path) -> Result<serde_json::Value> {
    let opts = WalkOptions::default();
    let tree = scan_tree(&[PathBuf::from(root)], &opts, None)?;
    let free = match free_space(mountpoint) {
        Ok(f) => serde_json::to_value(f)?,
        Err(e) => serde_json::json!({ "error": format!("{e:#}") }),
    };
    Ok(serde_json::json!({
        "root": root.display().to_string(),
        "tree": tree,
        "free_space": free,
    }))
}
