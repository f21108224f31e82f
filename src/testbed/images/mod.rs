//! The aged-image cache: a filesystem aged once (`fsgauge age --keep-image NAME`, a plan's
//! `[age] keep_image = true`) is kept as a sparse image, and every later run whose aging
//! would be the same starts from a copy of it instead of aging again, so every repetition of
//! every workload that shares the aging starts from a byte-identical state (fragmentation
//! studies after Smith and Seltzer's "File System Aging", where aging dominates run time).
//!
//! An entry is keyed by a hash of everything that determines the aged state ([`ImageKey`]):
//! the aging workload, its parameters and seed, the filesystem, its size, mkfs and mount
//! options, the emulated disk's profile and offset, the kernel release and fsgauge's version.
//! It lives in `STATE/images` (beside the ledger, `$FSGAUGE_STATE_DIR` to override) as
//! `KEY.img` (sparse: only the blocks the filesystem wrote) and `KEY.json` (its
//! [`Manifest`]); an entry exists once its manifest does. While an image is written it is in
//! the ledger, so `testbed cleanup` removes what a SIGKILL left. The cache has a size limit
//! ([`limit`]), checked before anything is aged.
//!
//! * [`copy`] — the sparse block copy and the digest of an image's contents.
//! * [`store`] — saving an entry, finding one, listing and pruning.
//! * [`entry`] — the checks every read of the cache makes: its directory, its files, an
//!   image's length and digest before use.
//! * [`series`] — an aging kept at each of its checkpoints (the append test's).
//! * [`snapshot`] — snapshots of a persistent testbed (`testbed snapshot`, `restore`).

pub mod copy;
pub mod entry;
pub mod series;
pub mod snapshot;
pub mod store;

use std::path::PathBuf;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::TestbedSpec;
use crate::base::error::bad_input;
use crate::base::units::parse_size;

fn human(b: u64) -> String {
    crate::base::units::format_bytes_human(b as f64)
}

pub use copy::{copy_data, copy_image, Copied, Keep};
pub use store::{find, list, prune, save, Entry, Kept, Manifest, Prune};

/// The variable that sets the cache's size limit (bytes, with a unit: `20G`).
pub const LIMIT_ENV: &str = "FSGAUGE_IMAGE_CACHE_MAX";

/// The share of the free space of the cache's filesystem it may take when [`LIMIT_ENV`] is
/// not set.
const DEFAULT_SHARE: f64 = 0.2;

/// The cache directory: `images` beside the ledger directory.
pub fn cache_dir() -> PathBuf {
    let ledger = super::ledger::state_dir();
    ledger
        .parent()
        .map_or_else(|| PathBuf::from("/var/lib/fsgauge"), |p| p.to_path_buf())
        .join("images")
}

/// What identifies an aged state: the hash and the fields hashed, in clear.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageKey {
    /// The first 16 hex digits of the SHA-256 of `fields`.
    pub key: String,
    pub fields: serde_json::Value,
}

/// The aging an image is kept of: the workload's kind and parameters, its seed, and where its
/// tree lives (`tree`: the directory name the run gives it, part of the state); for an aging
/// kept at each of its checkpoints ([`series`]), the checkpoint (usage, percent).
pub struct Aging<'a> {
    pub kind: &'a str,
    pub params: serde_json::Value,
    pub seed: u64,
    pub tree: &'a str,
    pub checkpoint: Option<f64>,
}

/// The key of `aging` on a testbed of `spec`. A `--device` or an external journal is refused:
/// the cache keeps one image, of a filesystem fsgauge made on an image file.
pub fn key(spec: &TestbedSpec, aging: &Aging<'_>) -> Result<ImageKey> {
    if spec.device.is_some() {
        return Err(bad_input(
            "aged images are kept of testbeds on an image file; a --device testbed cannot use the image cache (leave out --keep-image / keep_image)",
        ));
    }
    if spec.journal.is_some() {
        return Err(bad_input(
            "aged images keep one image; a testbed with an external journal (--journal) cannot use the image cache (leave out --keep-image / keep_image, or the journal)",
        ));
    }
    let kernel = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut of_aging = serde_json::json!({
        "kind": aging.kind, "params": aging.params, "seed": aging.seed, "tree": aging.tree,
    });
    // Only present when there is one, so the keys of whole agings stay as they were.
    if let Some(pc) = aging.checkpoint {
        of_aging["checkpoint"] = serde_json::json!(pc);
    }
    let fields = serde_json::json!({
        "aging": of_aging,
        "fs": spec.fs.name(),
        "size": spec.size,
        "mkfs_opts": spec.mkfs_opts,
        "mount_opts": spec.mount_opts,
        "device_model": spec.device_model.as_ref().map(|m| serde_json::json!({
            "profile": m.profile, "offset": m.offset,
        })),
        "kernel": kernel,
        "fsgauge": format!("{} {}", env!("CARGO_PKG_VERSION"), env!("FSGAUGE_GIT_COMMIT")),
    });
    let digest = Sha256::digest(serde_json::to_vec(&fields)?);
    let key = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    Ok(ImageKey { key, fields })
}

/// An overlay start keeps the disk's writes in the server's memory: refused (bad input,
/// before anything is made) when the testbed's disks keep their bytes in their image file
/// (`device_store` file, or `FSGAUGE_DEVICE_STORE=file`), which would write the kept image.
pub fn check_overlay_store(spec: &TestbedSpec) -> Result<()> {
    use crate::device::server::{store::STORE_ENV, StoreChoice};
    if spec.overlay_start() && spec.device_store == Some(StoreChoice::File) {
        return Err(bad_input(format!(
            "the store file (--device-store file, device_store = \"file\", or {STORE_ENV}=file) keeps an emulated disk's bytes in its image file, but a start from a kept image is served as an overlay over the image, which must stay as it was kept; leave the store memory (or memory:SIZE), or start from a copy with --image-start copy"
        )));
    }
    Ok(())
}

/// The cache's size limit: [`LIMIT_ENV`], else a fifth of what its filesystem has free plus
/// what the cache already holds.
pub fn limit(held: u64) -> Result<u64> {
    if let Some(v) = std::env::var_os(LIMIT_ENV) {
        let text = v.to_string_lossy();
        return parse_size(&text)
            .map_err(|e| bad_input(format!("{LIMIT_ENV}={text}: {e}; give a size such as 20G")));
    }
    let base = super::room::nearest_existing(&cache_dir());
    let free = super::room::free_space(&base).unwrap_or(0);
    Ok(((free + held) as f64 * DEFAULT_SHARE) as u64)
}

/// Refuses, before anything is aged, an image of up to `size` bytes the cache has no room
/// for under its limit, or its filesystem no room at all.
pub fn check_room(size: u64) -> Result<()> {
    let held: u64 = list()?.iter().map(|e| e.manifest.on_disk).sum();
    let max = limit(held)?;
    let dir = cache_dir();
    if held.saturating_add(size) > max {
        return Err(bad_input(format!(
            "the aged-image cache {} holds {} and may hold {} ({LIMIT_ENV}, default a fifth of its filesystem's free space); an image of this testbed may take up to {}. Remove entries (`fsgauge testbed images --prune --all`), set {LIMIT_ENV} higher, or leave out --keep-image",
            dir.display(),
            human(held),
            human(max),
            human(size)
        )));
    }
    let base = super::room::nearest_existing(&dir);
    if let Some(free) = super::room::free_space(&base) {
        if size > free {
            return Err(bad_input(format!(
                "the aged-image cache's filesystem ({}) has {} free but an image of this testbed may take up to {}; free space there or leave out --keep-image",
                super::room::describe(&base),
                human(free),
                human(size)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1G ext4 testbed's spec (the series tests' too).
    pub(super) fn spec() -> TestbedSpec {
        TestbedSpec::build(crate::testbed::TestbedInput {
            fs: crate::testbed::FsKind::Ext4,
            size: 1 << 30,
            mkfs: String::new(),
            mount: String::new(),
            journal: None,
            backing: crate::testbed::Backing::File,
            image_alloc: crate::testbed::ImageAlloc::Sparse,
            workdir: None,
            loop_direct_io: true,
            device_model: None,
            journal_device_model: None,
            image_start: None,
            serving: Default::default(),
            device: None,
            label: None,
        })
        .expect("a valid spec")
    }

    fn aging(seed: u64) -> Aging<'static> {
        Aging {
            kind: "age",
            params: serde_json::json!({"usage": [75.0]}),
            seed,
            tree: "fsgauge-pre-age",
            checkpoint: None,
        }
    }

    #[test]
    fn key_follows_seed_fs_and_options_but_not_the_label() {
        let a = key(&spec(), &aging(1)).expect("key");
        assert_eq!(a.key.len(), 16);
        assert_eq!(a, key(&spec(), &aging(1)).expect("key"));
        assert_ne!(a.key, key(&spec(), &aging(2)).expect("key").key);
        let mut s = spec();
        s.label = "other".into();
        assert_eq!(a.key, key(&s, &aging(1)).expect("key").key);
        s.mount_opts = "noatime".into();
        assert_ne!(a.key, key(&s, &aging(1)).expect("key").key);
        assert_eq!(a.fields["fs"], "ext4");
        assert_eq!(a.fields["aging"]["seed"], 1);
    }

    #[test]
    fn a_device_testbed_is_refused() {
        let mut s = spec();
        s.device = Some("/dev/loop-control".into());
        let e = key(&s, &aging(1)).expect_err("refused");
        assert!(format!("{e:#}").contains("--device"), "{e:#}");
        assert_eq!(crate::base::error::exit_code(&e), 2);
    }
}
