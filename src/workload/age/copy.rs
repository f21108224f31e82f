//! Copying a tree onto another filesystem, as the append study's `cp -R . /partition2` did:
//! directories made, regular files copied with read(2)/write(2) in 1 MiB pieces (no
//! copy_file_range, so the target's allocator sees ordinary sequential writes), symlinks
//! recreated, modes kept. Entries are copied in name order, depth first.

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::measure::Recorder;

/// What a copy did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyStats {
    pub files: u64,
    pub dirs: u64,
    pub bytes: u64,
    pub symlinks: u64,
}

/// Operation kinds a copy records: `file` (primary, bytes copied), `mkdir` (primary).
pub const COPY_OPS: [crate::measure::OpDef; 2] = [
    crate::measure::OpDef::primary("file"),
    crate::measure::OpDef::primary("mkdir"),
];

/// Copies the contents of `src` into the existing directory `dst`.
pub fn copy_tree(src: &Path, dst: &Path, rec: &mut Recorder) -> Result<CopyStats> {
    let mut stats = CopyStats::default();
    let mut buf = vec![0u8; 1 << 20];
    copy_dir(src, dst, rec, &mut buf, &mut stats)?;
    Ok(stats)
}

fn copy_dir(
    src: &Path,
    dst: &Path,
    rec: &mut Recorder,
    buf: &mut [u8],
    stats: &mut CopyStats,
) -> Result<()> {
    let mut names: Vec<OsString> = fs::read_dir(src)
        .with_context(|| format!("reading directory {}", src.display()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading directory {}", src.display()))?;
    names.sort();
    for name in names {
        if rec.should_stop() {
            rec.check()?;
        }
        let s = src.join(&name);
        let d = dst.join(&name);
        let md = fs::symlink_metadata(&s).with_context(|| format!("stat {}", s.display()))?;
        let ft = md.file_type();
        if ft.is_dir() {
            let t0 = Instant::now();
            fs::DirBuilder::new()
                .mode(md.permissions().mode() & 0o7777)
                .create(&d)
                .with_context(|| format!("mkdir {}", d.display()))?;
            rec.record(rec.op("mkdir"), t0, 0);
            stats.dirs += 1;
            copy_dir(&s, &d, rec, buf, stats)?;
        } else if ft.is_file() {
            let t0 = Instant::now();
            let mut from = fs::File::open(&s).with_context(|| format!("open {}", s.display()))?;
            let mut to = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(md.permissions().mode() & 0o7777)
                .open(&d)
                .with_context(|| format!("create {}", d.display()))?;
            let mut n = 0u64;
            loop {
                let k = from
                    .read(buf)
                    .with_context(|| format!("read {}", s.display()))?;
                if k == 0 {
                    break;
                }
                to.write_all(&buf[..k])
                    .with_context(|| format!("write {}", d.display()))?;
                n += k as u64;
            }
            drop(to);
            rec.record(rec.op("file"), t0, n);
            stats.files += 1;
            stats.bytes += n;
        } else if ft.is_symlink() {
            let target = fs::read_link(&s).with_context(|| format!("readlink {}", s.display()))?;
            std::os::unix::fs::symlink(&target, &d)
                .with_context(|| format!("symlink {}", d.display()))?;
            stats.symlinks += 1;
        }
    }
    Ok(())
}
