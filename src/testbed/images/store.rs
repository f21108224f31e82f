//! The cache's entries on disk: `KEY.img` and `KEY.json` in [`cache_dir`]. Saving writes the
//! image as `KEY.img.part` (in the ledger while it is written), renames it into place and
//! then writes the manifest atomically: an entry exists once its manifest does.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{cache_dir, copy_image, Copied, ImageKey, Keep};
use crate::atomic::write_atomic;
use crate::error::bad_input;
use crate::results::PhaseResult;
use crate::sys::trust;
use crate::testbed::Ledger;

/// What the cache knows of an entry (`KEY.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub key: String,
    /// The name it was kept under (`--keep-image NAME`, the plan's name).
    pub name: String,
    /// Everything the key hashes, in clear.
    pub fields: serde_json::Value,
    pub fs: String,
    /// The filesystem's size (the image's length), bytes.
    pub fs_size: u64,
    /// Bytes the image takes on the cache's disk.
    pub on_disk: u64,
    /// RFC 3339, UTC.
    pub created: String,
    pub last_used: String,
    /// The digest of the aged state's contents (see [`super::copy`]).
    pub digest: String,
    /// Seconds the aging took.
    pub aging_s: f64,
    /// The aging's phases, as its run recorded them: a run from the image reports them.
    pub phases: Vec<PhaseResult>,
    /// The aging's layout record, when the run recorded one.
    pub layout: Option<serde_json::Value>,
}

/// An entry of the cache.
#[derive(Debug, Clone)]
pub struct Entry {
    pub manifest: Manifest,
    pub image: PathBuf,
}

/// What an entry is kept with besides its image.
pub struct Kept {
    pub name: String,
    pub aging_s: f64,
    pub phases: Vec<PhaseResult>,
    pub layout: Option<serde_json::Value>,
}

/// A key as the cache names files by it: 16 lowercase hex digits, so a key read from a file
/// can never reach outside the cache directory.
fn is_key(k: &str) -> bool {
    k.len() == 16
        && k.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The paths of entry `key` in `dir`, checked to be inside it.
fn paths(dir: &Path, key: &str) -> Result<(PathBuf, PathBuf)> {
    if !is_key(key) {
        anyhow::bail!("{key:?} is not an image key (16 hex digits)");
    }
    let (img, json) = (
        dir.join(format!("{key}.img")),
        dir.join(format!("{key}.json")),
    );
    for p in [&img, &json] {
        if p.parent() != Some(dir) {
            anyhow::bail!("{} is not inside {}", p.display(), dir.display());
        }
    }
    Ok((img, json))
}

fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// Copies the first `len` bytes of `src` (the unmounted testbed's image or device) into the
/// cache as entry `key`, replacing an older one of that key. The partial image is in the
/// ledger until it is renamed into place, and removed on any error.
pub fn save(key: &ImageKey, src: &File, len: u64, kept: Kept) -> Result<(Entry, Copied)> {
    let dir = cache_dir();
    let dir_fd = trust::own_dir(&dir).context("the aged-image cache directory")?;
    let (img, json) = paths(&dir, &key.key)?;
    let part = format!("{}.img.part", key.key);
    let mut ledger = Ledger::begin(&format!("image-{}-{}", key.key, std::process::id()), false)?;
    let made = ledger.make_at(dir_fd.as_fd(), &dir, &part, "image ", trust::create_file_at);
    let (f, res, _) = match made {
        Ok(m) => m,
        Err(e) => {
            ledger.release_all();
            return Err(e);
        }
    };
    crate::signals::test_pause("keep-image");
    let written = copy_image(
        src,
        len,
        &f,
        &format!("keeping image {}", img.display()),
        Keep::Durable,
    )
    .and_then(|c| {
        let on_disk = f.metadata()?.blocks() * 512;
        let raw = std::os::fd::AsRawFd::as_raw_fd(&dir_fd);
        nix::fcntl::renameat(
            Some(raw),
            part.as_str(),
            Some(raw),
            format!("{}.img", key.key).as_str(),
        )
        .with_context(|| format!("renaming {part} to {}", img.display()))?;
        Ok((c, on_disk))
    });
    let (copied, on_disk) = match written {
        Ok(w) => w,
        Err(e) => {
            for r in ledger.release_all() {
                eprintln!("fsgauge: warning: {r:#}");
            }
            return Err(e);
        }
    };
    let manifest = Manifest {
        key: key.key.clone(),
        name: kept.name,
        fields: key.fields.clone(),
        fs: key.fields["fs"].as_str().unwrap_or("?").to_string(),
        fs_size: len,
        on_disk,
        created: now(),
        last_used: now(),
        digest: copied.digest.clone(),
        aging_s: kept.aging_s,
        phases: kept.phases,
        layout: kept.layout,
    };
    write_atomic(&json, &serde_json::to_vec_pretty(&manifest)?)
        .with_context(|| format!("writing {}", json.display()))?;
    // In place: the image is the cache's now, no longer a leftover.
    ledger.forget(&res)?;
    ledger.release_all();
    Ok((
        Entry {
            manifest,
            image: img,
        },
        copied,
    ))
}

/// The entry of `key`, when the cache has one, its last use set to now.
pub fn find(key: &str) -> Result<Option<Entry>> {
    let dir = cache_dir();
    let (img, json) = paths(&dir, key)?;
    if !json.exists() || !img.exists() {
        return Ok(None);
    }
    let mut manifest = read(&json)?;
    manifest.last_used = now();
    write_atomic(&json, &serde_json::to_vec_pretty(&manifest)?)
        .with_context(|| format!("writing {}", json.display()))?;
    Ok(Some(Entry {
        manifest,
        image: img,
    }))
}

fn read(json: &Path) -> Result<Manifest> {
    let bytes = std::fs::read(json).with_context(|| format!("reading {}", json.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("reading {}", json.display()))
}

/// Every entry, oldest first; a manifest that cannot be read is skipped with a warning.
pub fn list() -> Result<Vec<Entry>> {
    let dir = cache_dir();
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut out = Vec::new();
    for ent in rd {
        let name = ent?.file_name().to_string_lossy().into_owned();
        let Some(key) = name.strip_suffix(".json").filter(|k| is_key(k)) else {
            continue;
        };
        let (img, json) = paths(&dir, key)?;
        match read(&json) {
            Ok(manifest) => out.push(Entry {
                manifest,
                image: img,
            }),
            Err(e) => eprintln!(
                "fsgauge: warning: {e:#}; remove it with `fsgauge testbed images --prune {key}`"
            ),
        }
    }
    out.sort_by(|a, b| a.manifest.created.cmp(&b.manifest.created));
    Ok(out)
}

/// Which entries `testbed images --prune` removes.
#[derive(Debug, Clone)]
pub enum Prune {
    All,
    /// Those last used longer ago than this.
    OlderThan(Duration),
    /// The entry of this key or name.
    Named(String),
}

/// Removes the entries `which` selects (their image and manifest, paths checked to be in the
/// cache directory) and returns them. A key or name no entry has is bad input.
pub fn prune(which: &Prune) -> Result<Vec<Manifest>> {
    let dir = cache_dir();
    let entries = list()?;
    let now = SystemTime::now();
    let chosen: Vec<&Entry> = entries
        .iter()
        .filter(|e| match which {
            Prune::All => true,
            Prune::Named(n) => e.manifest.key == *n || e.manifest.name == *n,
            Prune::OlderThan(d) => humantime::parse_rfc3339(&e.manifest.last_used)
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > *d),
        })
        .collect();
    if let (Prune::Named(n), true) = (which, chosen.is_empty()) {
        // A damaged entry's files go by their key too.
        if is_key(n) && paths(&dir, n)?.1.exists() {
            remove(&dir, n)?;
            return Ok(Vec::new());
        }
        return Err(bad_input(format!(
            "no kept image has key or name {n:?}; `fsgauge testbed images` lists them"
        )));
    }
    let mut out = Vec::new();
    for e in chosen {
        remove(&dir, &e.manifest.key)?;
        out.push(e.manifest.clone());
    }
    Ok(out)
}

/// Removes entry `key`'s manifest (first: the entry is gone) and image.
fn remove(dir: &Path, key: &str) -> Result<()> {
    let (img, json) = paths(dir, key)?;
    for p in [json, img] {
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", p.display())),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_from_files_cannot_leave_the_cache() {
        let dir = Path::new("/state/images");
        assert!(paths(dir, "0123456789abcdef").is_ok());
        for bad in [
            "../../etc/passwd",
            "0123456789ABCDEF",
            "",
            "0123456789abcde/",
        ] {
            assert!(paths(dir, bad).is_err(), "{bad}");
        }
    }
}
