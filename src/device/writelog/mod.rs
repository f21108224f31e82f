//! The emulated disk's write log and the crash states built from it: what a power cut at a
//! chosen moment would leave on the modelled drive, served as a second file of the device
//! server (`crash`, beside `disk`) for a checker and a mount to look at.
//!
//! # Design note
//! - **What the log holds** ([`record`]): off until `log start LIMIT_BYTES` on the server's
//!   control channel. While on, every request that changes the disk: each write's offset,
//!   length and data (as the drive received it), every FLUSH and FUA write, every discard or
//!   zeroing, each with its server request id, its arrival and its reply time on
//!   CLOCK_MONOTONIC (the clock clients read with `clock_gettime(CLOCK_MONOTONIC)`), and
//!   the model's completion time. Before a range of sectors is first changed after the log
//!   started its previous bytes are kept (the undo pre-image), so the state at any cut is the
//!   store's final content plus the log. And the model's cache events ([`CacheEvent`]):
//!   which writes went into the volatile write cache, which straight to the media, and every
//!   destage of a range from the cache to the media with its model time. What was in the
//!   drive's cache when the log started counts as on the media: start the log after a FLUSH.
//!   A write the model said nothing of (the model switched off, `ram`) and a discard (never
//!   modelled) count as on the media at their reply. The SSD model keeps no ranges for its
//!   cache: its cached writes reach the media at the next flush only (its background drain
//!   is a rate, not a place), which makes `lose-all` on an SSD pessimistic.
//! - **A cut** is an index K in reply order (the log's cut candidates, [`LogSummary::cuts`]):
//!   the state just after request K's reply. Every request replied after it never reached
//!   the drive. The power is cut at K's modelled completion: a destage that had not ended by
//!   then did not happen (no torn sectors are modelled).
//! - **The cache choice** ([`CrashCache`]) for what was still dirty in the write cache at the
//!   cut: `lose-all` (the media's version), `keep-all` (the cache's newest version: a drive
//!   whose cache survives) or `random` (per 4 KiB chunk of the disk, kept or lost by the
//!   seeded generator: a real drive may have destaged any part of its cache). The cache holds
//!   one version per sector: an overwrite of a dirty sector replaces it.
//! - **No copy** ([`cut`]): a crash state is an overlay map, sector range → where its bytes
//!   are (a logged write's data, an undo pre-image, zeros); every sector it does not map reads
//!   from the store as it is. Building one copies no byte of the image: its cost is the
//!   sectors written during the log, and what it maps is at most the log's bytes.
//! - **Where it is kept** ([`data`]): the writes' data and the pre-images in a file (the
//!   run's `write.log` beside the image, given at `log start LIMIT_BYTES FILE`; without one,
//!   an anonymous memory file), appended through one buffer by the thread that copies the
//!   write into the store; only the index (entries, replies, cache events, where each one's
//!   bytes are) is in memory. A crash state at cut K reads the data of requests up to K and
//!   the pre-images of sectors written after it, from the file, only where the crash file is
//!   read.
//! - **The limits**: LIMIT_BYTES caps the log's bytes (data and pre-images), and the index is
//!   counted at a fixed cost per entry, reply and event against [`record::INDEX_LIMIT`]. A
//!   request that would pass either (or a write to the file that fails) stops the log and
//!   marks it: the summary says why and no crash state is built from it (never a silently
//!   partial log).
//! - **Serving** ([`overlay`]): the `crash` file reads through the overlay at once (no model:
//!   it is a checker's disk, not measured); its writes (journal replay, a checker's repair)
//!   go to a private copy-on-write map dropped when the next crash state is set. The `disk`
//!   file must stay idle meanwhile (the caller unmounts its filesystem first): a write to
//!   `disk` changes the store under the overlay, so the crash file then fails every request
//!   with EIO until the next crash state is set, and a crash state is refused while the disk
//!   has been written outside the log.

pub mod cut;
pub mod data;
pub mod overlay;
pub mod record;

use serde::{Deserialize, Serialize};

pub use crate::device::model::CacheEvent;

/// What a power cut leaves of the data still dirty in the drive's volatile write cache:
/// lose-all (the media's version of every dirty sector), random (each 4 KiB chunk kept or lost
/// by the seeded generator) or keep-all (the cache's newest version: a cache that survives).
pub use crate::results::crash::CrashCache;

/// What a logged request was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A write (into the cache if the drive has one on).
    Write,
    /// A cache flush.
    Flush,
    /// A write with force unit access (on the media when it completes).
    Fua,
    /// A discard or zeroing (reads as zeros after it; not modelled: durable at its reply).
    Zero,
}

/// A cut the log offers: request `index` in reply order, and what it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutCandidate {
    /// The cut's index (reply order, from 0).
    pub index: u64,
    /// When its reply left (CLOCK_MONOTONIC, ns).
    pub reply_ns: u64,
    /// Its modelled completion (the model's clock, CLOCK_MONOTONIC, ns): the power-cut time.
    pub done_ns: u64,
    /// What it was.
    pub kind: EntryKind,
    /// Its byte offset on the disk (0 for a flush).
    pub offset: u64,
    /// Its bytes (0 for a flush).
    pub bytes: u64,
}

/// The log's figures (`log summary`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogSummary {
    /// Logging now.
    pub on: bool,
    /// The limit given at `log start`: the most bytes of data and pre-images it keeps.
    pub limit_bytes: u64,
    /// Bytes of data and pre-images kept (the log's length in its file).
    pub bytes: u64,
    /// The log stopped before it was told to (its limit, its index's limit, its file failed):
    /// no crash state is built from it.
    pub limit_reached: bool,
    /// Why it stopped so.
    #[serde(default)]
    pub stopped: Option<String>,
    /// Its bytes are in a file (the run's, beside the image) rather than in memory.
    #[serde(default)]
    pub in_file: bool,
    /// What its file takes on its filesystem, bytes.
    #[serde(default)]
    pub file_bytes: u64,
    /// Memory its index is counted at (a fixed cost per request, reply and cache event), and
    /// the most it may take.
    #[serde(default)]
    pub index_bytes: u64,
    #[serde(default)]
    pub index_limit_bytes: u64,
    /// Requests logged.
    pub requests: u64,
    /// Of which writes (not FUA), flushes, FUA writes, discards and zeroings.
    pub writes: u64,
    pub flushes: u64,
    pub fua: u64,
    pub zeroes: u64,
    /// Bytes of the logged writes' data.
    pub write_bytes: u64,
    /// Bytes of undo pre-images.
    pub undo_bytes: u64,
    /// Cache events from the model.
    pub cache_events: u64,
    /// Requests replied to (the cut candidates).
    pub replied: u64,
    /// Writes to the disk the log did not take (after it stopped or reached its limit).
    pub outside_log: u64,
    /// Writes not aligned to 512-byte sectors (no crash state is built then).
    pub unaligned: u64,
    /// The cut candidates, in reply order.
    pub cuts: Vec<CutCandidate>,
}

/// What `crash K MODE SEED` built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrashStateInfo {
    /// The cut (index in reply order).
    pub cut: u64,
    /// When the cut request's reply left (CLOCK_MONOTONIC, ns).
    pub reply_ns: u64,
    /// Its modelled completion: the power-cut time on the model's clock.
    pub done_ns: u64,
    /// The cache choice and seed.
    pub cache: CrashCache,
    pub seed: u64,
    /// Bytes dirty in the drive's write cache at the cut, and of them kept and lost.
    pub dirty_bytes: u64,
    pub cache_kept_bytes: u64,
    pub cache_lost_bytes: u64,
    /// Bytes the overlay maps to the log's data or pre-images (never more than the log's).
    pub bytes_mapped: u64,
    /// Bytes the overlay maps to zeros (discards).
    pub zero_bytes_mapped: u64,
    /// Sectors written during the log (the build's work).
    pub sectors_considered: u64,
    /// Ranges in the overlay.
    pub pieces: u64,
    /// Time to build the overlay, ns.
    pub build_ns: u64,
    /// The image's size (the crash file's), bytes.
    pub image_bytes: u64,
}
