//! The cache's entries on disk: `KEY.img` and `KEY.json` in [`super::cache_dir`]. Saving
//! writes the image under a name of its own (`.KEY.img.part-RANDOM`, in the ledger while it
//! is written), renames it into place and then writes the manifest atomically, both under a
//! lock on the cache directory: an entry exists once its manifest does. Reading goes through
//! [`entry`]'s checks.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use nix::fcntl::{Flock, FlockArg};

use anyhow::{Context, Result};

pub use super::entry::Manifest;
use super::{copy_image, entry, Copied, ImageKey, Keep};
use crate::base::atomic::write_atomic;
use crate::base::error::bad_input;
use crate::base::sys::trust;
use crate::results::PhaseResult;
use crate::testbed::Ledger;

/// An entry of the cache.
#[derive(Debug, Clone)]
pub struct Entry {
    pub manifest: Manifest,
    pub image: PathBuf,
    /// The image, opened when the entry was read and checked: what a start copies or serves.
    pub file: Arc<File>,
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

/// When this process first looked in the cache: an entry of a key made after it was made by
/// another keeper of the same aging running at the same time.
static FIRST_LOOK: OnceLock<SystemTime> = OnceLock::new();

fn first_look() -> SystemTime {
    *FIRST_LOOK.get_or_init(SystemTime::now)
}

/// The keys this process put in place: an entry of one of them is this process's own, which
/// a later aging of the same key (after it was found damaged) replaces.
static PLACED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether this process put entry `key` in place.
fn placed_here(key: &str) -> bool {
    PLACED.lock().is_ok_and(|p| p.iter().any(|k| k == key))
}

/// Holds a `flock` on the cache directory while entries are put in place, read or removed,
/// so an image and its manifest are always seen as a pair. Shared for reading.
fn lock(dir: &OwnedFd, path: &Path, exclusive: bool) -> Result<Flock<File>> {
    let fd = dir
        .try_clone()
        .with_context(|| format!("duplicating the descriptor of {}", path.display()))?;
    let how = if exclusive {
        FlockArg::LockExclusive
    } else {
        FlockArg::LockShared
    };
    Flock::lock(File::from(fd), how)
        .map_err(|(_, e)| anyhow::anyhow!("locking {}: {}", path.display(), e.desc()))
}

/// Copies the first `len` bytes of `src` (the unmounted testbed's image or device) into the
/// cache as entry `key`, replacing an older one of that key. The image is written under a
/// name of its own (in the ledger until it is in place, removed on any error); putting it in
/// place and writing its manifest happen under the cache's lock. When another run of the
/// same aging kept this key while this one aged, its entry stays and this copy goes: both
/// runs succeed, and later runs start from the first.
pub fn save(key: &ImageKey, src: &File, len: u64, kept: Kept) -> Result<(Entry, Copied)> {
    first_look();
    let (dir_fd, dir) = entry::open_dir(true)?.context("the aged-image cache directory")?;
    let (img, json) = paths(&dir, &key.key)?;
    let part = format!(".{}.img.part-{:016x}", key.key, rand::random::<u64>());
    let mut ledger = Ledger::begin(&format!("image-{}-{}", key.key, std::process::id()), false)?;
    let made = ledger.make_at(dir_fd.as_fd(), &dir, &part, "image ", trust::create_file_at);
    let (f, res, _) = match made {
        Ok(m) => m,
        Err(e) => {
            ledger.release_all();
            return Err(e);
        }
    };
    crate::base::signals::test_pause("keep-image");
    let written = copy_image(
        src,
        len,
        &f,
        &format!("keeping image {}", img.display()),
        Keep::Durable,
    )
    .and_then(|c| {
        let on_disk = f.metadata()?.blocks() * 512;
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
    let placed = place(&dir_fd, &dir, &part, f, manifest, &json);
    // In place, or another keeper's entry kept: the part is no longer a leftover; on error
    // it goes.
    let placed = match placed {
        Ok(p) => {
            ledger.forget(&res)?;
            if p.1 {
                let _ = crate::base::sys::unlink_at(dir_fd.as_fd(), part.as_str(), false);
            }
            p.0
        }
        Err(e) => {
            for r in ledger.release_all() {
                eprintln!("fsgauge: warning: {r:#}");
            }
            return Err(e);
        }
    };
    ledger.release_all();
    Ok((placed, copied))
}

/// Puts the written image `part` (open as `f`) in place as `KEY.img` with its manifest,
/// under the cache's lock, unless another keeper put an entry of the key there since this
/// process first looked: then that entry, and `true` (the part is to be removed).
fn place(
    dir_fd: &OwnedFd,
    dir: &Path,
    part: &str,
    f: File,
    manifest: Manifest,
    json: &Path,
) -> Result<(Entry, bool)> {
    let _lock = lock(dir_fd, dir, true)?;
    if let (Ok(Some(e)), false) = (
        open_pair(dir_fd, dir, &manifest.key),
        placed_here(&manifest.key),
    ) {
        // RFC 3339 to the second: an entry made in the second this process first looked
        // counts as made after.
        let made = humantime::parse_rfc3339(&e.manifest.created).ok();
        if made.is_some_and(|t| t + Duration::from_secs(1) > first_look()) {
            return Ok((e, true));
        }
    }
    let img = dir.join(format!("{}.img", manifest.key));
    let raw = dir_fd.as_raw_fd();
    nix::fcntl::renameat(
        Some(raw),
        part,
        Some(raw),
        format!("{}.img", manifest.key).as_str(),
    )
    .with_context(|| format!("renaming {part} to {}", img.display()))?;
    write_atomic(json, &serde_json::to_vec_pretty(&manifest)?)
        .with_context(|| format!("writing {}", json.display()))?;
    if let Ok(mut p) = PLACED.lock() {
        p.push(manifest.key.clone());
    }
    Ok((
        Entry {
            manifest,
            image: img,
            file: Arc::new(f),
        },
        false,
    ))
}

/// Entry `key`'s manifest and image, opened in the held cache directory and checked
/// ([`entry::open`], [`entry::read_manifest`]; the image's contents are not): `None` when
/// either is missing.
fn open_pair(dir_fd: &OwnedFd, dir: &Path, key: &str) -> Result<Option<Entry>> {
    let (img, json) = paths(dir, key)?;
    let Some(jf) = entry::open(dir_fd.as_fd(), dir, &format!("{key}.json"), key)? else {
        return Ok(None);
    };
    let Some(file) = entry::open(dir_fd.as_fd(), dir, &format!("{key}.img"), key)? else {
        return Ok(None);
    };
    let manifest = entry::read_manifest(&jf, &json, key)?;
    Ok(Some(Entry {
        manifest,
        image: img,
        file: Arc::new(file),
    }))
}

/// The entry of `key`, when the cache has one, checked before anything uses it (its image's
/// length and digest, [`entry::verify`]), its last use set to now. A damaged entry is named
/// with the command that removes it, and the run ages afresh (its new entry replaces it).
pub fn find(key: &str) -> Result<Option<Entry>> {
    first_look();
    let Some((dir_fd, dir)) = entry::open_dir(false)? else {
        return Ok(None);
    };
    let found = {
        let _lock = lock(&dir_fd, &dir, false)?;
        open_pair(&dir_fd, &dir, key)
    };
    let checked = found.and_then(|e| match e {
        Some(e) => entry::verify(&e.file, &e.image, key, &e.manifest).map(|()| Some(e)),
        None => Ok(None),
    });
    let mut entry = match checked {
        Ok(Some(e)) => e,
        Ok(None) => return Ok(None),
        Err(e) if e.is::<entry::Damaged>() => {
            eprintln!(
                "fsgauge: warning: {e:#}; aging afresh, and a kept image of this run replaces it"
            );
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    entry.manifest.last_used = now();
    let json = paths(&dir, key)?.1;
    let _lock = lock(&dir_fd, &dir, true)?;
    write_atomic(&json, &serde_json::to_vec_pretty(&entry.manifest)?)
        .with_context(|| format!("writing {}", json.display()))?;
    Ok(Some(entry))
}

/// Every entry, oldest first, with its files checked as [`find`] opens them (not the image's
/// contents); a damaged one is skipped with a warning naming the command that removes it.
/// The cache directory is checked as for writing: one that others own or can write is
/// refused (bad input).
pub fn list() -> Result<Vec<Entry>> {
    Ok(scan()?.0)
}

/// The entries that can be read, and the keys of the damaged ones.
fn scan() -> Result<(Vec<Entry>, Vec<String>)> {
    let Some((dir_fd, dir)) = entry::open_dir(false)? else {
        return Ok((Vec::new(), Vec::new()));
    };
    let _lock = lock(&dir_fd, &dir, false)?;
    let names = names_in(&dir_fd).with_context(|| format!("reading {}", dir.display()))?;
    let (mut out, mut damaged) = (Vec::new(), Vec::new());
    for name in names {
        let Some(key) = name.strip_suffix(".json").filter(|k| is_key(k)) else {
            continue;
        };
        match open_pair(&dir_fd, &dir, key) {
            Ok(Some(e)) => out.push(e),
            Ok(None) => {
                eprintln!(
                    "fsgauge: warning: the kept image {key} has no image file; remove it with `fsgauge testbed images --prune {key}`"
                );
                damaged.push(key.to_string());
            }
            Err(e) if e.is::<entry::Damaged>() => {
                eprintln!("fsgauge: warning: {e:#}");
                damaged.push(key.to_string());
            }
            Err(e) => return Err(e),
        }
    }
    out.sort_by(|a, b| a.manifest.created.cmp(&b.manifest.created));
    Ok((out, damaged))
}

/// The names in the held directory `dir`, read through a descriptor of its own.
fn names_in(dir: &OwnedFd) -> Result<Vec<String>> {
    use crate::base::sys::dirstream::DirStream;
    let fd = crate::base::sys::chase::reopen_dir(dir.as_fd())?;
    let mut stream = DirStream::new(fd).map_err(std::io::Error::from)?;
    let mut out = Vec::new();
    while let Some(e) = stream.next_entry() {
        let (name, _) = e.map_err(std::io::Error::from)?;
        out.push(name.to_string_lossy().into_owned());
    }
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

/// Removes the entries `which` selects (their image and manifest, removed inside the held
/// cache directory, checked as [`list`] checks it) and returns them. A key or name no entry
/// has is bad input.
pub fn prune(which: &Prune) -> Result<Vec<Manifest>> {
    let (entries, damaged) = scan()?;
    let Some((dir_fd, dir)) = entry::open_dir(false)? else {
        return prune_none(which);
    };
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
    let _lock = lock(&dir_fd, &dir, true)?;
    if let (Prune::Named(n), true) = (which, chosen.is_empty()) {
        // A damaged entry's files go by their key too.
        if damaged.contains(n) {
            remove(&dir_fd, &dir, n)?;
            return Ok(Vec::new());
        }
        return prune_none(which);
    }
    if matches!(which, Prune::All) {
        for k in &damaged {
            remove(&dir_fd, &dir, k)?;
        }
    }
    let mut out = Vec::new();
    for e in chosen {
        remove(&dir_fd, &dir, &e.manifest.key)?;
        out.push(e.manifest.clone());
    }
    Ok(out)
}

/// What pruning finds when nothing matches: a name is bad input, the rest remove nothing.
fn prune_none(which: &Prune) -> Result<Vec<Manifest>> {
    match which {
        Prune::Named(n) => Err(bad_input(format!(
            "no kept image has key or name {n:?}; `fsgauge testbed images` lists them"
        ))),
        _ => Ok(Vec::new()),
    }
}

/// Removes entry `key`'s manifest (first: the entry is gone) and image from the held cache
/// directory.
fn remove(dir_fd: &OwnedFd, dir: &Path, key: &str) -> Result<()> {
    paths(dir, key)?;
    for name in [format!("{key}.json"), format!("{key}.img")] {
        match crate::base::sys::unlink_at(dir_fd.as_fd(), name.as_str(), false) {
            Ok(()) | Err(crate::base::sys::Errno::ENOENT) => {}
            Err(e) => anyhow::bail!("removing {}: {}", dir.join(&name).display(), e.desc()),
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
