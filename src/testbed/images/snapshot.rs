//! Snapshots of a persistent testbed (`fsgauge testbed snapshot NAME [--as SNAP]`, `testbed
//! restore NAME [SNAP]`): the filesystem is unmounted (so its image is consistent; its loop
//! device goes with it, autoclear), its image copied sparsely ([`super::copy`]) to
//! `HOME/snapshots/SNAP.img` beside the testbed's own files, and it is attached and mounted
//! again with the same options. Restoring copies a snapshot back the same way. Snapshots are
//! in the testbed's ledger entry, so they go when it is destroyed.

use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{copy_image, Keep};
use crate::base::error::bad_input;
use crate::base::sys::trust::{self, FileId};
use crate::{
    host::{ledger, mount},
    testbed::{Ledger, LoopDevice, Resource},
};

/// The snapshot name when none is given.
pub const DEFAULT_SNAP: &str = "snap";

/// What a persistent testbed's ledger entry says about where it lives.
struct Parts {
    ledger: Ledger,
    image: PathBuf,
    image_id: FileId,
    mount: Resource,
    target: PathBuf,
    fsdev: u64,
    fs: String,
    options: String,
    home: PathBuf,
}

/// Opens testbed `name`'s entry and checks it can be snapshotted: persistent, on an image
/// file fsgauge made, without an external journal.
fn parts(name: &str) -> Result<Parts> {
    ledger::check_name(name)?;
    let ledger = Ledger::open(name).map_err(|e| {
        bad_input(format!(
            "no testbed named {name:?} ({e:#}); `fsgauge testbed list` shows the existing ones"
        ))
    })?;
    let e = ledger.entry().clone();
    if !e.persistent() {
        return Err(bad_input(format!(
            "testbed {name:?} is not persistent (it belongs to a run, pid {}); snapshots are of testbeds made by `fsgauge testbed create`",
            e.owner_pid
        )));
    }
    let d = &e.details;
    let text = |k: &str| d.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
    if d.get("journal_device").is_some_and(|j| !j.is_null()) {
        return Err(bad_input(format!(
            "testbed {name:?} has an external journal; snapshots keep one image, so it cannot be snapshotted"
        )));
    }
    let image = e.resources.iter().find_map(|r| match r {
        Resource::Image { path, id: Some(id) }
            if path.file_name().is_some_and(|n| n == "fs.img") =>
        {
            Some((path.clone(), *id))
        }
        _ => None,
    });
    let Some((image, image_id)) = image else {
        return Err(bad_input(format!(
            "testbed {name:?} is on a --device ({}), not an image fsgauge made; snapshots copy the image, so only testbeds on an image file can have them",
            text("device")
        )));
    };
    let (mount, target, fsdev) = e
        .resources
        .iter()
        .find_map(|r| match r {
            Resource::Mount {
                target,
                fsdev: Some(f),
                ..
            } => Some((r.clone(), target.clone(), *f)),
            _ => None,
        })
        .with_context(|| format!("testbed {name:?} has no mount in its ledger entry"))?;
    let home = image
        .parent()
        .context("the testbed's image has no directory")?
        .to_path_buf();
    Ok(Parts {
        ledger,
        image,
        image_id,
        mount,
        target,
        fsdev,
        fs: text("fs"),
        options: text("mount_options"),
        home,
    })
}

/// Checks a snapshot name: as a testbed name.
fn check_snap(snap: &str) -> Result<()> {
    ledger::check_name(snap).map_err(|e| bad_input(format!("snapshot name: {e:#}")))
}

/// Opens the testbed's image, checked to be the file the testbed made.
fn open_image(p: &Parts) -> Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&p.image)
        .with_context(|| format!("opening {}", p.image.display()))?;
    let id = FileId::of(f.as_fd()).with_context(|| format!("stat {}", p.image.display()))?;
    if id != p.image_id {
        anyhow::bail!(
            "{} is not the image testbed made (it was replaced); not touching it",
            p.image.display()
        );
    }
    Ok(f)
}

/// Unmounts the testbed, runs `copy` on its image, and attaches and mounts it again,
/// recording the new loop device's number in the ledger.
fn offline(p: &mut Parts, copy: impl FnOnce(&File) -> Result<()>) -> Result<()> {
    let backing = match &p.mount {
        Resource::Mount { backing, .. } => *backing,
        _ => None,
    };
    mount::unmount_device(p.fsdev, backing)
        .with_context(|| format!("unmounting {}", p.target.display()))?;
    let image = open_image(p)?;
    let copied = copy(&image);
    // Mounted again whatever the copy did: the testbed stays usable.
    let lo = LoopDevice::attach(&image, &p.image, true)?;
    let rdev = lo
        .rdev()
        .with_context(|| format!("reading the device number of {}", lo.path().display()))?;
    let new = Resource::Mount {
        target: p.target.clone(),
        fsdev: Some(rdev),
        backing: Some(p.image_id),
    };
    p.ledger.replace(&p.mount, new.clone())?;
    p.mount = new;
    p.fsdev = rdev;
    let mut details = p.ledger.entry().details.clone();
    details["device"] = serde_json::json!(lo.path());
    p.ledger.set_details(details)?;
    mount::mount(lo.path(), &p.target, &p.fs, &p.options)
        .with_context(|| format!("mounting {} again", p.target.display()))?;
    // Kept attached after this process, as `testbed create` leaves it: autoclear detaches it
    // at unmount.
    std::mem::forget(lo);
    copied
}

/// The snapshot directory of a testbed whose files are in `home`.
fn snap_dir(home: &Path) -> PathBuf {
    home.join("snapshots")
}

/// Snapshots testbed `name` as `snap`; returns the snapshot's path. An existing snapshot of
/// that name is replaced.
pub fn snapshot(name: &str, snap: &str) -> Result<PathBuf> {
    check_snap(snap)?;
    let mut p = parts(name)?;
    let home_fd = trust::open_dir_nofollow(&p.home)
        .with_context(|| format!("opening {}", p.home.display()))?;
    let dir = snap_dir(&p.home);
    let dir_fd = match trust::open_dir_in(home_fd.as_fd(), "snapshots") {
        Ok(fd) => fd,
        Err(_) => {
            let (fd, _, _) =
                p.ledger
                    .make_at(home_fd.as_fd(), &p.home, "snapshots", "", |d, n| {
                        trust::make_dir_at(d, n, 0o700)
                    })?;
            fd
        }
    };
    let file = format!("{snap}.img");
    let path = dir.join(&file);
    // Replaced: the old snapshot goes first (its ledger record stays and is reused).
    let old = dir_fd_unlink(&dir_fd, &file);
    if let Some(r) =
        old.and_then(|id| {
            p.ledger.entry().resources.iter().find(|r| {
            matches!(r, Resource::Image { path: q, id: Some(i) } if *q == path && *i == id)
        }).cloned()
        })
    {
        p.ledger.forget(&r)?;
    }
    let (f, _, _) =
        p.ledger
            .make_at(dir_fd.as_fd(), &dir, &file, "image ", trust::create_file_at)?;
    let len = std::fs::metadata(&p.image)?.len();
    offline(&mut p, |image| {
        copy_image(
            image,
            len,
            &f,
            &format!("snapshot {}", path.display()),
            Keep::Durable,
        )
        .map(|_| ())
    })?;
    Ok(path)
}

/// Unlinks `name` in the held directory if present; its identity when it was.
fn dir_fd_unlink(dir: &std::os::fd::OwnedFd, name: &str) -> Option<FileId> {
    let st = trust::stat_at(dir.as_fd(), name).ok()?;
    let id = FileId {
        dev: st.st_dev,
        ino: st.st_ino,
    };
    crate::base::sys::unlink_at(dir.as_fd(), name, false).ok()?;
    Some(id)
}

/// Restores testbed `name` to snapshot `snap`.
pub fn restore(name: &str, snap: &str) -> Result<()> {
    check_snap(snap)?;
    let mut p = parts(name)?;
    let path = snap_dir(&p.home).join(format!("{snap}.img"));
    let taken = list(name)?;
    if !taken.iter().any(|s| s == snap) {
        return Err(bad_input(format!(
            "testbed {name:?} has no snapshot {snap:?} ({}); take one with `fsgauge testbed snapshot {name} --as {snap}`",
            if taken.is_empty() {
                "it has none".to_string()
            } else {
                format!("it has {}", taken.join(", "))
            }
        )));
    }
    let src = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let len = src.metadata()?.len();
    offline(&mut p, |image| {
        // Every block the snapshot does not hold is zero: the image is emptied first.
        image.set_len(0)?;
        copy_image(
            &src,
            len,
            image,
            &format!("restoring {}", path.display()),
            Keep::Durable,
        )
        .map(|_| ())
    })
}

/// The snapshots of testbed `name` (recorded in its ledger entry), by name.
pub fn list(name: &str) -> Result<Vec<String>> {
    ledger::check_name(name)?;
    let l = Ledger::open(name)?;
    Ok(snapshots_of(l.entry()))
}

/// The snapshot names a ledger entry records.
pub fn snapshots_of(e: &ledger::LedgerEntry) -> Vec<String> {
    e.resources
        .iter()
        .filter_map(|r| match r {
            Resource::Image { path, .. }
                if path.parent().and_then(|d| d.file_name()) == Some("snapshots".as_ref()) =>
            {
                path.file_stem().map(|s| s.to_string_lossy().into_owned())
            }
            _ => None,
        })
        .collect()
}

/// Every snapshot of every testbed in the ledger: (testbed, snapshot, bytes on disk).
pub fn all() -> Result<Vec<(String, String, u64)>> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for e in ledger::scan()?.entries {
        for r in &e.resources {
            let Resource::Image { path, .. } = r else {
                continue;
            };
            if path.parent().and_then(|d| d.file_name()) != Some("snapshots".as_ref()) {
                continue;
            }
            let size = std::fs::metadata(path).map_or(0, |m| m.blocks() * 512);
            let snap = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push((e.name.clone(), snap, size));
        }
    }
    Ok(out)
}
