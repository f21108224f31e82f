//! Copying a filesystem image block by block into a sparse file, with the digest of what was
//! copied: only 4 KiB blocks holding something other than zeros are written (the copy is as
//! sparse as the filesystem's use of its device), holes of a regular file are skipped with
//! `SEEK_DATA`, and the digest covers each non-zero block with its offset, so two images with
//! the same contents have the same digest however sparse each one is on its host.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;

use anyhow::{Context, Result};

/// The unit of sparseness and of the digest.
const BLOCK: usize = 4096;
/// Bytes read per call.
const CHUNK: usize = 1 << 20;
/// The errors of `copy_file_range` that say the kernel cannot copy between the two files.
const CROSS: [crate::base::sys::Errno; 4] = [
    crate::base::sys::Errno::EXDEV,
    crate::base::sys::Errno::EOPNOTSUPP,
    crate::base::sys::Errno::EINVAL,
    crate::base::sys::Errno::ENOSYS,
];
/// A block of zeros, compared against (memcmp) to find the blocks to skip.
static ZEROS: [u8; BLOCK] = [0; BLOCK];

/// What a copy did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    /// Bytes of non-zero blocks written.
    pub written: u64,
    /// `blake3:` and the hex digest of every non-zero block with its offset. BLAKE3, not
    /// SHA-256: a start from a kept image hashes the whole filesystem, and SHA-256 ran at
    /// 0.25 GB/s here, half of a 1G start (BLAKE3: several GB/s with SIMD).
    pub digest: String,
}

/// How long a copy must last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Written to its disk before the copy is done (a kept image, a snapshot, a restore).
    Durable,
    /// A testbed's scratch image, made and used by one run: left in the page cache, written
    /// back by the kernel (a sync of the whole image cost more than the copy).
    Scratch,
}

/// Copies the first `len` bytes of `src` (a regular file or a block device) into `dst`
/// (sized to `len`), non-zero blocks only; `what` names the copy in errors.
pub fn copy_image(src: &File, len: u64, dst: &File, what: &str, keep: Keep) -> Result<Copied> {
    dst.set_len(len)
        .with_context(|| format!("{what}: sizing the copy"))?;
    let mut written = 0u64;
    let digest = scan(src, len, what, |bytes, at| {
        dst.write_all_at(bytes, at)
            .with_context(|| format!("{what}: writing {} bytes at {at}", bytes.len()))?;
        written += bytes.len() as u64;
        Ok(())
    })?;
    if keep == Keep::Durable {
        dst.sync_all()
            .with_context(|| format!("{what}: writing the copy to its disk"))?;
    }
    Ok(Copied { written, digest })
}

/// The digest [`copy_image`] gives a copy of the first `len` bytes of `src`, without copying.
pub fn digest(src: &File, len: u64, what: &str) -> Result<String> {
    scan(src, len, what, |_, _| Ok(()))
}

/// Reads the first `len` bytes of `src` and hands each run of non-zero blocks to `run` with
/// its offset; returns the digest of every non-zero block with its offset.
fn scan(
    src: &File,
    len: u64,
    what: &str,
    mut run: impl FnMut(&[u8], u64) -> Result<()>,
) -> Result<String> {
    let mut hash = blake3::Hasher::new();
    let mut buf = vec![0u8; CHUNK];
    for (start, end) in data_ranges(src, len) {
        let mut off = start;
        while off < end {
            crate::base::signals::check()?;
            let want = usize::try_from((end - off).min(CHUNK as u64)).unwrap_or(CHUNK);
            src.read_exact_at(&mut buf[..want], off)
                .with_context(|| format!("{what}: reading {want} bytes at {off}"))?;
            // Runs of non-zero blocks, each handed over in one call.
            let mut first_of_run: Option<usize> = None;
            let blocks = want.div_ceil(BLOCK);
            for i in 0..=blocks {
                let block = (i < blocks).then(|| &buf[i * BLOCK..((i + 1) * BLOCK).min(want)]);
                match block.filter(|b| *b != &ZEROS[..b.len()]) {
                    Some(b) => {
                        hash.update(&(off + (i * BLOCK) as u64).to_le_bytes());
                        hash.update(b);
                        first_of_run.get_or_insert(i);
                    }
                    None => {
                        if let Some(first) = first_of_run.take() {
                            let bytes = &buf[first * BLOCK..(i * BLOCK).min(want)];
                            run(bytes, off + (first * BLOCK) as u64)?;
                        }
                    }
                }
            }
            off += want as u64;
        }
    }
    Ok(format!("blake3:{}", hash.finalize().to_hex()))
}

/// Copies the data segments of the first `len` bytes of `src` (a regular file) into `dst` (sized
/// to `len`) with `copy_file_range`: the kernel copies (or shares, where the filesystem can),
/// nothing passes through fsgauge, and the holes stay holes. For a start from a kept image,
/// whose digest was taken when it was kept: a copy and a digest cost a 1G start 1.2 s here,
/// the kernel's copy alone about 0.3 s. Where the kernel cannot copy between the two
/// (`EXDEV` before Linux 5.19 and between some filesystems, `EOPNOTSUPP`, `EINVAL`), the
/// non-zero blocks are copied through fsgauge ([`copy_image`]). Returns the bytes copied.
pub fn copy_data(src: &File, len: u64, dst: &File, what: &str) -> Result<u64> {
    dst.set_len(len)
        .with_context(|| format!("{what}: sizing the copy"))?;
    let mut copied = 0u64;
    for (start, end) in data_ranges(src, len) {
        let mut off = start;
        while off < end {
            crate::base::signals::check()?;
            let want = usize::try_from(end - off)
                .unwrap_or(usize::MAX)
                .min(1 << 30);
            let n = match crate::base::sys::copy_between(src.as_fd(), dst.as_fd(), off, want) {
                Ok(n) => n,
                Err(crate::base::sys::Errno::EINTR) => continue,
                // Another filesystem (a RAM-backed testbed, a work directory on tmpfs), or
                // one that cannot copy in the kernel: copied through fsgauge instead.
                Err(e) if CROSS.contains(&e) => {
                    return copy_image(src, len, dst, what, Keep::Scratch).map(|c| c.written)
                }
                Err(e) => anyhow::bail!(
                    "{what}: copy_file_range of {want} bytes at {off}: {}",
                    e.desc()
                ),
            };
            if n == 0 {
                break;
            }
            off += n as u64;
            copied += n as u64;
        }
    }
    Ok(copied)
}

/// The ranges of `src` below `len` that may hold data: the data segments `SEEK_DATA` and
/// `SEEK_HOLE` find in a regular file, block-aligned, or all of it where they do not apply
/// (a block device).
fn data_ranges(src: &File, len: u64) -> Vec<(u64, u64)> {
    let whole = vec![(0, len)];
    if !src.metadata().map(|m| m.is_file()).unwrap_or(false) {
        return whole;
    }
    let block = BLOCK as u64;
    match crate::base::sys::data_extents(src.as_fd(), len) {
        Ok(extents) => extents
            .into_iter()
            .map(|(a, b)| {
                (
                    a / block * block,
                    b.div_ceil(block).saturating_mul(block).min(len),
                )
            })
            .collect(),
        Err(_) => whole,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(blocks: &[(u64, u8)], len: u64) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().expect("temp file");
        f.as_file().set_len(len).expect("size");
        for &(at, byte) in blocks {
            f.as_file().write_all_at(&[byte; BLOCK], at).expect("write");
        }
        f
    }

    #[test]
    fn copies_nonzero_blocks_sparsely_with_a_digest_of_contents() {
        let len = 64 * BLOCK as u64;
        let src = file_with(
            &[(0, 1), (10 * BLOCK as u64, 2), (20 * BLOCK as u64, 0)],
            len,
        );
        let dst = tempfile::NamedTempFile::new().expect("temp file");
        let c = copy_image(src.as_file(), len, dst.as_file(), "test", Keep::Scratch).expect("copy");
        // Two non-zero blocks: the zero block written at 20 is left a hole.
        assert_eq!(c.written, 2 * BLOCK as u64);
        assert_eq!(dst.as_file().metadata().expect("stat").len(), len);
        let mut b = [0u8; BLOCK];
        dst.as_file()
            .read_exact_at(&mut b, 10 * BLOCK as u64)
            .expect("read");
        assert!(b.iter().all(|&x| x == 2));
        // The copy's contents have the source's digest; other contents another.
        let again = tempfile::NamedTempFile::new().expect("temp file");
        let c2 =
            copy_image(dst.as_file(), len, again.as_file(), "test", Keep::Scratch).expect("copy");
        assert_eq!(c2.digest, c.digest);
        let other = file_with(&[(0, 1), (11 * BLOCK as u64, 2)], len);
        let c3 =
            copy_image(other.as_file(), len, again.as_file(), "test", Keep::Scratch).expect("copy");
        assert_ne!(c3.digest, c.digest);
    }
}
