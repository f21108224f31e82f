//! The aging engine: agesystem (seed study 3) and Geriatrix-style stable aging, reproducibly.
//!
//! An [`Ager`] works below one root directory of a mounted filesystem and drives the
//! filesystem's *used blocks* (statvfs `f_blocks - f_bfree`) to each usage checkpoint:
//!
//! * `fill` creates files whose sizes are drawn from a distribution until the checkpoint;
//! * `append` creates the N×C files of the tree and then appends to them one after the other,
//!   round-robin, a fixed or drawn number of bytes each — the study's worst case for
//!   allocators; `--prealloc` first fallocates every file to its expected final length and then
//!   truncates each back to its first block, as the study's "with preallocation" runs did;
//! * `churn` fills to the last checkpoint and then deletes (oldest first or at random) and
//!   creates files, keeping the fullness steady, until a multiple of the filesystem size has
//!   been written (Geriatrix's stable aging, Kadekodi et al., ATC'18).
//!
//! Every operation is fed to a SHA-256 "manifest" (kind, file id, offset/size), so two runs
//! with the same seed on filesystems of the same size and options can be compared by one
//! digest. Free space is tracked by an estimate (allocated blocks of what was written)
//! recalibrated with statvfs; near a target every step is checked with statvfs and the target
//! is confirmed after a syncfs, so a checkpoint lands within 1% of the filesystem size.

use std::collections::VecDeque;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::errno::Errno;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::dist::SizeDist;
use super::shape::{DepthDist, TreeShape};
use crate::base::error::{bad_input, bad_param};
use crate::base::sys::statfs::Space;
use crate::base::sys::{self, fs_error, Dir};
use crate::base::units::format_size;
use crate::measure::{OpDef, Recorder};
use crate::workload::params::{self, CommaList};

crate::choice! {
    /// How the filesystem is aged.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum AgeMode("aging mode") {
        Fill = "fill",
        Append = "append",
        Churn = "churn",
    }
}

crate::choice! {
    /// Which file churn deletes.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum DeleteOrder("delete order") {
        /// The oldest live file first.
        Oldest = "oldest",
        /// A live file chosen at random.
        Random = "random",
    }
}

/// Parameters of aging (the `age` workload kind; plan names as flags with `_`). One struct for
/// both: the flags of `fsgauge age` (its doc comments are their help) and a plan's table (its
/// defaults are the flags' defaults, see [`params::defaults`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, clap::Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Aging")]
pub struct AgeParams {
    /// Usage checkpoints: percentages of the filesystem's blocks (statvfs), ascending.
    #[arg(long, value_name = "PCT,...", default_value = "25,50,75,99")]
    pub usage: CommaList<f64>,
    /// fill: create files until each checkpoint; append: create the N×C tree, then append to
    /// its files round-robin; churn: fill, then delete and create at steady fullness.
    #[arg(long, value_name = "fill|append|churn", default_value = "fill")]
    pub mode: AgeMode,
    /// File-size distribution: agrawal, impressions, loizides-1g, fixed:SIZE, uniform:MIN..MAX,
    /// or a CSV file of size,weight rows (see --list-dists).
    #[arg(long, value_name = "NAME|FILE", default_value = "agrawal")]
    pub dist: String,
    /// Tree shape: N directories × C files each.
    #[arg(long, value_name = "NxC", default_value = "10x100")]
    pub tree: TreeShape,
    /// Depths of the N directories: fixed:D, uniform:A..B, poisson:L or impressions.
    #[arg(long, value_name = "NAME")]
    pub depth_dist: Option<String>,
    /// Bytes per append (append mode).
    #[arg(long, value_name = "SIZE", default_value = "4K", value_parser = params::size)]
    #[serde(deserialize_with = "crate::base::units::de_size")]
    pub append: u64,
    /// Draw each append's size from this distribution instead (append mode).
    #[arg(long, value_name = "NAME|FILE")]
    pub append_dist: Option<String>,
    /// Append mode: fallocate every file to its expected final length and truncate it back to
    /// its first block before appending (the study's "with preallocation" runs).
    #[arg(long)]
    pub prealloc: bool,
    /// Churn mode: write this multiple of the filesystem size after filling, e.g. 3x.
    #[arg(long, value_name = "Nx", default_value = "3x", value_parser = multiple)]
    pub churn: f64,
    /// Churn mode: delete the oldest file first or one at random.
    #[arg(long, value_name = "oldest|random", default_value = "oldest")]
    pub delete: DeleteOrder,
    /// Allocate with fallocate instead of writing data (fast; delayed allocation does not act).
    #[arg(long)]
    pub fallocate_only: bool,
    /// Size of each write(2).
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = params::size)]
    #[serde(deserialize_with = "crate::base::units::de_size")]
    pub block: u64,
}

impl Default for AgeParams {
    fn default() -> Self {
        params::defaults()
    }
}

/// `--churn 3x`: a positive multiple (the `x` is optional).
fn multiple(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches(['x', 'X']);
    t.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("{s:?} is not a positive multiple like 3x or 0.5x"))
}

/// A checkpoint label: `25` for 25.0, `12.5` for 12.5.
pub fn pct_label(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as u64)
    } else {
        format!("{p}")
    }
}

impl AgeParams {
    /// Checks everything that does not need the filesystem. Errors are bad input.
    pub fn validate(&self) -> Result<()> {
        if self.usage.is_empty() {
            return Err(bad_param(
                "usage",
                "--usage needs at least one percentage, e.g. 25,50,75",
            ));
        }
        for u in &self.usage {
            if !u.is_finite() || *u <= 0.0 || *u > 100.0 {
                return Err(bad_param(
                    "usage",
                    format!(
                        "--usage {u}: a usage checkpoint is a percentage above 0 and at most 100"
                    ),
                ));
            }
        }
        for w in self.usage.windows(2) {
            if w[1] <= w[0] {
                return Err(bad_param(
                    "usage",
                    format!(
                    "--usage {}: checkpoints must be ascending (each one continues from the last)",
                    self.usage
                        .iter()
                        .map(|u| pct_label(*u))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                ));
            }
        }
        SizeDist::parse(&self.dist)?;
        if let Some(d) = &self.depth_dist {
            DepthDist::parse(d)
                .map_err(|e| bad_param("depth_dist", format!("--depth-dist: {e}")))?;
        }
        if let Some(d) = &self.append_dist {
            SizeDist::parse(d).map_err(|e| e.context("--append-dist"))?;
        } else if self.append == 0 {
            return Err(bad_param("append", "--append must be at least 1 byte"));
        }
        if self.block == 0 || self.block > (1 << 30) {
            return Err(bad_param("block", "--block must be between 1 byte and 1G"));
        }
        if self.mode == AgeMode::Churn && !(self.churn.is_finite() && self.churn > 0.0) {
            return Err(bad_param(
                "churn",
                format!(
                    "--churn {}: give a positive multiple of the filesystem size, e.g. 3x",
                    self.churn
                ),
            ));
        }
        if self.prealloc && self.mode != AgeMode::Append {
            return Err(bad_param(
                "prealloc",
                "--prealloc applies to --mode append only",
            ));
        }
        Ok(())
    }

    /// Checks the request against a filesystem of `size` bytes before anything is made: the
    /// tree must fit below the first checkpoint (one block per file in append mode).
    pub fn check_fits(&self, size: u64, block: u64) -> Result<()> {
        let first = self.usage[0];
        let room = (size as f64 * first / 100.0) as u64;
        if self.mode == AgeMode::Append {
            let need = self.tree.total_files() * block + self.tree.dirs * block;
            if need > room {
                return Err(bad_input(format!(
                    "the tree {} ({} files) needs at least {} (a block per file and directory) but the first checkpoint, {}% of {}, is {}; use fewer files or a higher --usage",
                    self.tree,
                    self.tree.total_files(),
                    format_size(need),
                    pct_label(first),
                    format_size(size),
                    format_size(room)
                )));
            }
        }
        Ok(())
    }
}

/// The operation kinds aging records.
pub const AGE_OPS: [OpDef; 8] = [
    OpDef::primary("create"),
    OpDef::primary("append"),
    OpDef::primary("unlink"),
    OpDef::primary("mkdir"),
    OpDef::secondary("write"),
    OpDef::secondary("fallocate"),
    OpDef::secondary("truncate"),
    OpDef::secondary("syncfs"),
];

/// Where aging stood at a checkpoint. Counts are cumulative since the aging began.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Checkpoint {
    /// Phase name, e.g. `age-25` or `churn-1x`.
    pub name: String,
    /// Target usage, percent (for churn: the steady fullness).
    pub target_pct: f64,
    /// Usage measured with statvfs after a syncfs, percent.
    pub usage_pct: f64,
    /// Live files and their logical bytes.
    pub files: u64,
    pub bytes: u64,
    /// Bytes written (or fallocated) so far, deletions not subtracted.
    pub written: u64,
    /// Seconds spent aging so far (scans between checkpoints excluded).
    pub seconds: f64,
    /// Operations so far.
    pub ops: u64,
    /// ENOSPC stopped aging before the target.
    pub enospc: bool,
}

impl Checkpoint {
    /// A warning when the usage is more than 1% of the filesystem size past the target: the
    /// filesystem used more than asked before or while the checkpoint was approached (e.g.
    /// btrfs keeps a preallocated extent whole after truncation).
    pub fn overshoot(&self) -> Option<String> {
        (self.usage_pct > self.target_pct + 1.0).then(|| {
            format!(
                "{}: usage {:.1}% is past the {}% target by more than 1% of the filesystem size (the filesystem used that much before or while aging approached it{})",
                self.name,
                self.usage_pct,
                pct_label(self.target_pct),
                if self.written == 0 { "; nothing was written for it" } else { "" }
            )
        })
    }

    /// Write throughput so far, KiB/s.
    pub fn write_kbps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.written as f64 / 1024.0 / self.seconds
        } else {
            0.0
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Live {
    id: u64,
    size: u64,
}

/// `f_type` of xfs (xfs_fs.h `XFS_SB_MAGIC`, "XFSB").
const XFS_SUPER_MAGIC: i64 = 0x5846_5342;

/// The aging state of one root directory.
pub struct Ager {
    p: AgeParams,
    root: PathBuf,
    root_fd: Dir,
    /// The root is on xfs: usage is read after its post-EOF preallocation is freed.
    is_xfs: bool,
    dist: SizeDist,
    append_dist: Option<SizeDist>,
    rng: ChaCha8Rng,
    manifest: Sha256,
    ops: u64,
    dirs: Vec<String>,
    live: VecDeque<Live>,
    next_id: u64,
    /// Append mode: sizes of the N×C files, by id.
    sizes: Vec<u64>,
    cursor: u64,
    buf: Vec<u8>,
    total: u64,
    bsize: u64,
    est: u64,
    since_cal: u64,
    bytes_since_cal: u64,
    written: u64,
    active: Duration,
    set_up: bool,
    churn_base: Option<u64>,
    bar: Option<indicatif::ProgressBar>,
}

/// Outcome of one aging step.
enum Step {
    Done(u64),
    NoSpace,
}

impl Ager {
    /// Opens the root and reads the filesystem's size. `progress`: show a bar with ETA.
    pub fn new(p: &AgeParams, root: &Path, seed: u64, progress: bool) -> Result<Self> {
        p.validate()?;
        let dist = SizeDist::parse(&p.dist)?;
        let append_dist = p.append_dist.as_deref().map(SizeDist::parse).transpose()?;
        let root_fd = Dir::open_path(root)?;
        let is_xfs = crate::base::sys::statfs::fstatfs(root_fd.as_fd())
            .is_ok_and(|st| st.magic == XFS_SUPER_MAGIC);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut buf = vec![0u8; p.block as usize];
        rng.fill_bytes(&mut buf);
        let mut me = Self {
            p: p.clone(),
            root: root.to_path_buf(),
            root_fd,
            is_xfs,
            dist,
            append_dist,
            rng,
            manifest: Sha256::new(),
            ops: 0,
            dirs: Vec::new(),
            live: VecDeque::new(),
            next_id: 0,
            sizes: Vec::new(),
            cursor: 0,
            buf,
            total: 0,
            bsize: 4096,
            est: 0,
            since_cal: 0,
            bytes_since_cal: 0,
            written: 0,
            active: Duration::ZERO,
            set_up: false,
            churn_base: None,
            bar: None,
        };
        let st = me.statvfs()?;
        me.bsize = (st.fragment_size() as u64).max(512);
        me.total = Space::of(&st).total;
        me.manifest
            .update(format!("fsgauge-age/1 {seed} {}\n", me.total));
        if progress {
            let bar = indicatif::ProgressBar::new(0).with_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix:>12} [{bar:30}] {bytes}/{total_bytes}, {elapsed} elapsed, ETA {eta}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            // Drawn only while a checkpoint is being approached.
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
            me.bar = Some(bar);
        }
        Ok(me)
    }

    fn statvfs(&self) -> Result<nix::sys::statvfs::Statvfs> {
        nix::sys::statvfs::fstatvfs(&self.root_fd)
            .with_context(|| format!("statvfs {}", self.root.display()))
    }

    /// Used bytes of the filesystem now (statvfs).
    pub fn used(&self) -> Result<u64> {
        Ok(Space::of(&self.statvfs()?).used())
    }

    /// The filesystem size in bytes (statvfs f_blocks × f_frsize).
    pub fn fs_size(&self) -> u64 {
        self.total
    }

    /// Usage now, percent.
    pub fn usage_pct(&self) -> Result<f64> {
        Ok(self.used()? as f64 * 100.0 / self.total as f64)
    }

    /// The manifest digest of every operation so far (hex SHA-256).
    pub fn digest(&self) -> String {
        self.manifest
            .clone()
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Operations so far.
    pub fn ops(&self) -> u64 {
        self.ops
    }

    /// Runs `f` with the aging root let go of (an unmount of its filesystem needs every
    /// descriptor on it closed), then opens the root again by its path (a pinned
    /// `/proc/self/fd/N/.` path follows its directory across a remount). Until then every
    /// operation of the ager fails (ENOTDIR), never reaching another directory.
    pub fn without_root<T>(&mut self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let parked = Dir::parked().context("parking the aging root")?;
        drop(std::mem::replace(&mut self.root_fd, parked));
        let out = f()?;
        self.root_fd = Dir::open_path(&self.root)?;
        Ok(out)
    }

    /// The aging root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn note(&mut self, kind: u8, id: u64, a: u64, b: u64) {
        let mut rec = [0u8; 25];
        rec[0] = kind;
        rec[1..9].copy_from_slice(&id.to_le_bytes());
        rec[9..17].copy_from_slice(&a.to_le_bytes());
        rec[17..25].copy_from_slice(&b.to_le_bytes());
        self.manifest.update(rec);
        self.ops += 1;
    }

    fn file_path(&self, id: u64) -> String {
        let d = self.p.tree.dir_of(id) as usize;
        format!("{}/f{id:08}", self.dirs[d])
    }

    fn blocks_of(&self, n: u64) -> u64 {
        n.div_ceil(self.bsize) * self.bsize
    }

    /// Checks the checkpoints against the filesystem as it is now: none below what is already
    /// used, and the tree fits. Errors are bad input.
    #[allow(clippy::unnecessary_cast)] // statvfs field types differ between platforms
    pub fn check_targets(&self) -> Result<()> {
        let used = self.used()?;
        let pct = used as f64 * 100.0 / self.total as f64;
        if self.p.usage[0] < pct {
            return Err(bad_input(format!(
                "--usage {}: the filesystem at {} already uses {pct:.1}% ({} of {}); give checkpoints above that",
                pct_label(self.p.usage[0]),
                self.root.display(),
                format_size(used),
                format_size(self.total)
            )));
        }
        let room = (self.total as f64 * self.p.usage[0] / 100.0) as u64;
        if self.p.mode == AgeMode::Append {
            let need = used + (self.p.tree.total_files() + self.p.tree.dirs) * self.bsize;
            if need > room {
                return Err(bad_input(format!(
                    "the tree {} ({} files) needs at least {} beyond the {} already used (a block per file and directory), more than the first checkpoint {}% of {} allows; use fewer files or a higher --usage",
                    self.p.tree,
                    self.p.tree.total_files(),
                    format_size(need - used),
                    format_size(used),
                    pct_label(self.p.usage[0]),
                    format_size(self.total)
                )));
            }
            let st = self.statvfs()?;
            let free_inodes = st.files_free() as u64;
            let want = self.p.tree.total_files() + self.p.tree.dirs * 2;
            if st.files() as u64 > 0 && free_inodes < want {
                return Err(bad_input(format!(
                    "the tree {} needs {want} inodes but the filesystem has {free_inodes} free; use fewer files",
                    self.p.tree
                )));
            }
        }
        Ok(())
    }

    /// Makes the directories (and in append mode the files, and preallocation).
    fn setup(&mut self, rec: &mut Recorder) -> Result<Option<()>> {
        let mkdir = rec.op("mkdir");
        let depth = self
            .p
            .depth_dist
            .as_deref()
            .map(DepthDist::parse)
            .transpose()
            .map_err(bad_input)?;
        for i in 0..self.p.tree.dirs {
            let levels = depth.map_or(1, |d| d.sample(&mut self.rng));
            let mut path = format!("d{i:05}");
            for l in 0..levels {
                if l > 0 {
                    path.push_str(&format!("/l{l}"));
                }
                let t0 = Instant::now();
                match crate::base::sys::mkdir_at(self.root_fd.as_fd(), path.as_str(), 0o755) {
                    Ok(()) => {}
                    Err(Errno::ENOSPC) => return Ok(None),
                    Err(e) => {
                        return Err(fs_error(
                            "mkdir",
                            &format!("{}/{path}", self.root.display()),
                            e,
                        ))
                    }
                }
                rec.record(mkdir, t0, 0);
                self.note(b'M', i, l as u64, 0);
            }
            self.dirs.push(path);
        }
        if self.p.mode == AgeMode::Append {
            let n = self.p.tree.total_files();
            let create = rec.op("create");
            for id in 0..n {
                let path = self.file_path(id);
                let t0 = Instant::now();
                match self.open(&path, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL) {
                    Ok(fd) => drop(fd),
                    Err(Errno::ENOSPC) => return Ok(None),
                    Err(e) => return Err(fs_error("create", &self.show(&path), e)),
                }
                rec.record(create, t0, 0);
                self.note(b'C', id, 0, 0);
                self.sizes.push(0);
                self.live.push_back(Live { id, size: 0 });
            }
            self.next_id = n;
            if self.p.prealloc {
                self.preallocate(rec)?;
            }
        }
        self.set_up = true;
        Ok(Some(()))
    }

    /// Fallocates every file to its expected final length (an equal share of the space up to
    /// the last checkpoint), then truncates each back to its first block.
    fn preallocate(&mut self, rec: &mut Recorder) -> Result<()> {
        let (fall, trunc) = (rec.op("fallocate"), rec.op("truncate"));
        let last = *self.p.usage.last().expect("validated: not empty");
        let target = (self.total as f64 * last / 100.0) as u64;
        let used = self.used()?;
        let n = self.sizes.len() as u64;
        let share = target.saturating_sub(used) / n.max(1) / self.bsize * self.bsize;
        let share = share.max(self.bsize);
        let mut done = 0;
        let mut written_prealloc = false;
        for id in 0..n {
            let path = self.file_path(id);
            let fd = self
                .open(&path, libc::O_WRONLY)
                .map_err(|e| fs_error("open", &self.show(&path), e))?;
            let t0 = Instant::now();
            let r = if written_prealloc {
                Err(Errno::EOPNOTSUPP)
            } else {
                sys::fallocate(fd.as_fd(), 0, 0, share)
            };
            match r {
                Ok(()) => {}
                Err(Errno::ENOSPC) => break,
                // No fallocate (ext2): write the expected length as the 2001 study had to.
                Err(Errno::EOPNOTSUPP) => {
                    written_prealloc = true;
                    if !write_zeros(&fd, share)
                        .map_err(|e| fs_error("write", &self.show(&path), e))?
                    {
                        break;
                    }
                }
                Err(e) => return Err(fs_error("fallocate", &self.show(&path), e)),
            }
            rec.record(fall, t0, 0);
            self.note(b'P', id, 0, share);
            done += 1;
        }
        for id in 0..done {
            let path = self.file_path(id);
            let fd = self
                .open(&path, libc::O_WRONLY)
                .map_err(|e| fs_error("open", &self.show(&path), e))?;
            let t0 = Instant::now();
            let first = self.bsize.min(share);
            nix::unistd::ftruncate(&fd, first as i64)
                .map_err(|e| fs_error("truncate", &self.show(&path), e))?;
            rec.record(trunc, t0, 0);
            self.note(b'T', id, first, 0);
            self.sizes[id as usize] = first;
            self.live[id as usize].size = first;
        }
        Ok(())
    }

    fn show(&self, rel: &str) -> String {
        format!("{}/{rel}", self.root.display())
    }

    fn open(&self, rel: &str, flags: i32) -> Result<OwnedFd, Errno> {
        let c = CString::new(rel).map_err(|_| Errno::EINVAL)?;
        loop {
            match sys::open_at(self.root_fd.raw(), &c, flags | libc::O_CLOEXEC, 0o644) {
                Err(Errno::EINTR) => continue,
                r => return r,
            }
        }
    }

    /// Writes (or fallocates) `len` bytes at `off`; returns bytes done before any ENOSPC.
    fn put(
        &self,
        rec: &mut Recorder,
        fd: &OwnedFd,
        off: u64,
        len: u64,
    ) -> Result<(u64, Option<Errno>)> {
        if self.p.fallocate_only {
            let t0 = Instant::now();
            if let Err(e) = sys::fallocate(fd.as_fd(), 0, off, len) {
                if e == Errno::EOPNOTSUPP {
                    return Err(bad_input(format!(
                        "--fallocate-only: the filesystem at {} does not support fallocate(2) (ext2 does not); age it with real data instead",
                        self.root.display()
                    )));
                }
                return Ok((0, Some(e)));
            }
            rec.record(rec.op("fallocate"), t0, len);
            return Ok((len, None));
        }
        let write = rec.op("write");
        let mut left = len;
        let mut t = Instant::now();
        while left > 0 {
            let n = left.min(self.buf.len() as u64) as usize;
            let w = match sys::write(fd.as_fd(), &self.buf[..n]) {
                Ok(w) => w,
                Err(Errno::EINTR) => continue,
                Err(e) => return Ok((len - left, Some(e))),
            };
            if w == 0 {
                return Ok((len - left, Some(Errno::EIO)));
            }
            left -= w as u64;
            t = rec.record(write, t, w as u64);
        }
        Ok((len, None))
    }

    fn create_file(&mut self, rec: &mut Recorder, size: u64) -> Result<Step> {
        let id = self.next_id;
        let path = self.file_path(id);
        let t0 = Instant::now();
        let fd = match self.open(&path, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL) {
            Ok(fd) => fd,
            Err(Errno::ENOSPC) => return Ok(Step::NoSpace),
            Err(e) => return Err(fs_error("create", &self.show(&path), e)),
        };
        self.next_id += 1;
        self.note(b'C', id, size, 0);
        let (done, err) = self.put(rec, &fd, 0, size)?;
        sys::close(fd).map_err(|e| fs_error("close", &self.show(&path), e))?;
        self.live.push_back(Live { id, size: done });
        self.written += done;
        rec.record(rec.op("create"), t0, done);
        match err {
            None => Ok(Step::Done(self.blocks_of(done))),
            Some(Errno::ENOSPC) => Ok(Step::NoSpace),
            Some(e) => Err(fs_error("write", &self.show(&path), e)),
        }
    }

    fn append_next(&mut self, rec: &mut Recorder, max: u64) -> Result<Step> {
        let id = self.cursor % self.sizes.len() as u64;
        self.cursor += 1;
        let len = match &self.append_dist {
            Some(d) => d.sample(&mut self.rng),
            None => self.p.append,
        }
        .min(max)
        .max(1);
        let path = self.file_path(id);
        let t0 = Instant::now();
        let fd = match self.open(&path, libc::O_WRONLY | libc::O_APPEND) {
            Ok(fd) => fd,
            Err(e) => return Err(fs_error("open", &self.show(&path), e)),
        };
        let old = self.sizes[id as usize];
        self.note(b'A', id, old, len);
        let (done, err) = self.put(rec, &fd, old, len)?;
        sys::close(fd).map_err(|e| fs_error("close", &self.show(&path), e))?;
        let new = old + done;
        self.sizes[id as usize] = new;
        self.live[id as usize].size = new;
        self.written += done;
        rec.record(rec.op("append"), t0, done);
        match err {
            None => Ok(Step::Done(self.blocks_of(new) - self.blocks_of(old))),
            Some(Errno::ENOSPC) => Ok(Step::NoSpace),
            Some(e) => Err(fs_error("write", &self.show(&path), e)),
        }
    }

    fn delete_one(&mut self, rec: &mut Recorder) -> Result<u64> {
        let victim = match self.p.delete {
            DeleteOrder::Oldest => self.live.pop_front(),
            DeleteOrder::Random => {
                let i = self.rng.gen_range(0..self.live.len());
                self.live.swap_remove_back(i)
            }
        };
        let Some(v) = victim else { return Ok(0) };
        let path = self.file_path(v.id);
        let c = CString::new(path.as_str()).expect("generated names have no NUL");
        let t0 = Instant::now();
        self.root_fd
            .unlink(&c, false)
            .map_err(|e| fs_error("unlink", &self.show(&path), e))?;
        rec.record(rec.op("unlink"), t0, 0);
        self.note(b'D', v.id, v.size, 0);
        Ok(self.blocks_of(v.size))
    }

    /// Re-reads used space. With `synced`, after a syncfs the figure is the truth and replaces
    /// the estimate; without, statvfs may not yet count unwritten data (btrfs) or may still
    /// count blocks of deleted files, so it only raises the estimate.
    fn calibrate(&mut self, rec: &mut Recorder, synced: bool) -> Result<u64> {
        if synced {
            self.sync(rec)?;
            self.est = self.used()?;
        } else {
            self.est = self.est.max(self.used()?);
        }
        self.since_cal = 0;
        self.bytes_since_cal = 0;
        Ok(self.est)
    }

    fn sync(&mut self, rec: &mut Recorder) -> Result<()> {
        let t0 = Instant::now();
        nix::unistd::syncfs(self.root_fd.as_raw_fd())
            .map_err(|e| fs_error("syncfs", &self.root.display().to_string(), e))?;
        rec.record(rec.op("syncfs"), t0, 0);
        self.trim_preallocation()
    }

    /// On xfs, frees the speculative preallocation past each file's end before usage is read
    /// (see [`Dir::xfs_free_eofblocks`]): otherwise the figure depends on when the host evicts
    /// inodes, and a checkpoint reads up to a percent more than the files hold, then less
    /// once a `drop_caches` elsewhere trimmed it. The trim is what eviction would do, done at
    /// a point of the aging's own choosing, so the same seed ages to the same layout.
    fn trim_preallocation(&mut self) -> Result<()> {
        if !self.is_xfs {
            return Ok(());
        }
        self.root_fd.xfs_free_eofblocks().map_err(|e| {
            fs_error(
                "XFS_IOC_FREE_EOFBLOCKS",
                &self.root.display().to_string(),
                e,
            )
        })
    }

    fn progress(&self, name: &str, start: u64, target: u64) {
        if let Some(b) = &self.bar {
            b.reset();
            b.set_prefix(name.to_string());
            b.set_length(target.saturating_sub(start));
            b.set_position(0);
            b.reset_eta();
            b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
    }

    fn tick(&self, start: u64) {
        if let Some(b) = &self.bar {
            b.set_position(self.est.saturating_sub(start));
        }
    }

    /// Ages until the filesystem's used blocks reach `pct` percent (within 0.5% of the
    /// filesystem size, confirmed after a syncfs), or ENOSPC. Fill and churn create files,
    /// append appends round-robin.
    pub fn run_to(&mut self, pct: f64, rec: &mut Recorder) -> Result<Checkpoint> {
        let t_start = Instant::now();
        let name = format!("age-{}", pct_label(pct));
        let mut enospc = false;
        if !self.set_up && self.setup(rec)?.is_none() {
            enospc = true;
        }
        let target = (self.total as f64 * pct / 100.0) as u64;
        if !enospc {
            let start = self.calibrate(rec, true)?;
            self.progress(&name, start, target);
            let append = self.p.mode == AgeMode::Append;
            enospc = self.reach(target, rec, append, start)?;
            // The figure the checkpoint reports is read once more after a syncfs. Space the
            // filesystem held only for a while (xfs trims speculative preallocation when it
            // evicts inodes; btrfs frees pinned extents at the next commit) can leave it short
            // of the target; then aging goes on until the reported figure itself is in range.
            let tol = self.total / 100;
            for _ in 0..8 {
                if enospc || self.calibrate(rec, true)? + tol / 2 >= target {
                    break;
                }
                enospc = self.reach(target, rec, append, start)?;
            }
        }
        self.active += t_start.elapsed();
        self.finish_bar();
        self.checkpoint(name, pct, enospc)
    }

    /// Creates files (or appends, with `append`) until used space is within 0.5% of the
    /// filesystem size below `target`, confirmed after a syncfs. Returns true on ENOSPC.
    /// statvfs is read before every step, so a filesystem that reserves space ahead (xfs's
    /// speculative preallocation) cannot carry the usage far past the target unseen.
    fn reach(&mut self, target: u64, rec: &mut Recorder, append: bool, start: u64) -> Result<bool> {
        let tol = self.total / 100;
        loop {
            if rec.should_stop() {
                rec.check()?;
            }
            self.calibrate(rec, false)?;
            if self.since_cal == 0 && self.ops % 64 == 0 {
                self.tick(start);
            }
            if self.est + tol / 2 >= target {
                self.calibrate(rec, true)?;
                if self.est + tol / 2 >= target {
                    return Ok(false);
                }
            }
            let gap = target.saturating_sub(self.est).max(1);
            let step = if append {
                self.append_next(rec, gap)?
            } else {
                let size = self.dist.sample(&mut self.rng).min(gap);
                self.create_file(rec, size)?
            };
            match step {
                Step::Done(b) => self.est += b,
                Step::NoSpace => return Ok(true),
            }
        }
    }

    /// Deletes files until used space, confirmed after a syncfs, is at most `limit` (a few
    /// rounds: each deletes what the estimate says is over, then syncs and reads again).
    fn shed_to(&mut self, limit: u64, rec: &mut Recorder) -> Result<()> {
        for _ in 0..8 {
            if self.calibrate(rec, true)? <= limit {
                break;
            }
            while self.est > limit && !self.live.is_empty() {
                let freed = self.delete_one(rec)?;
                self.est = self.est.saturating_sub(freed);
            }
        }
        Ok(())
    }

    fn finish_bar(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
            b.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
    }

    fn checkpoint(&mut self, name: String, pct: f64, enospc: bool) -> Result<Checkpoint> {
        nix::unistd::syncfs(self.root_fd.as_raw_fd())
            .map_err(|e| fs_error("syncfs", &self.root.display().to_string(), e))?;
        self.trim_preallocation()?;
        Ok(Checkpoint {
            name,
            target_pct: pct,
            usage_pct: self.usage_pct()?,
            files: self.live.len() as u64,
            bytes: self.live.iter().map(|l| l.size).sum(),
            written: self.written,
            seconds: self.active.as_secs_f64(),
            ops: self.ops,
            enospc,
        })
    }

    /// Churn (after filling to `pct`): delete and create files keeping usage at `pct` until
    /// `until` × the filesystem size has been written since churn began. Call it once per
    /// reporting point (`churn-1x`, `churn-2x`, …).
    pub fn churn_step(&mut self, pct: f64, until: f64, rec: &mut Recorder) -> Result<Checkpoint> {
        let t_start = Instant::now();
        let target = (self.total as f64 * pct / 100.0) as u64;
        let tol = self.total / 100;
        let goal = (self.total as f64 * until) as u64;
        let name = format!("churn-{}x", pct_label((until * 100.0).round() / 100.0));
        self.calibrate(rec, true)?;
        let base = *self.churn_base.get_or_insert(self.written);
        let mut enospc = false;
        if let Some(b) = &self.bar {
            b.reset();
            b.set_prefix(name.clone());
            b.set_length(goal);
            b.set_position(self.written - base);
            b.reset_eta();
            b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
        while self.written - base < goal {
            if rec.should_stop() {
                rec.check()?;
            }
            if self.bytes_since_cal >= tol / 2 {
                self.calibrate(rec, true)?;
                if let Some(b) = &self.bar {
                    b.set_position(self.written - base);
                }
            }
            let want = self
                .dist
                .sample(&mut self.rng)
                .min(goal - (self.written - base))
                .max(1);
            let ceiling = target + tol / 4;
            while self.est + self.blocks_of(want) > ceiling && !self.live.is_empty() {
                let freed = self.delete_one(rec)?;
                self.est = self.est.saturating_sub(freed);
                self.since_cal += 1;
            }
            let size = want.min(ceiling.saturating_sub(self.est)).max(1);
            match self.create_file(rec, size)? {
                Step::Done(b) => {
                    self.est += b;
                    self.bytes_since_cal += b;
                    self.since_cal += 1;
                }
                Step::NoSpace => {
                    enospc = true;
                    break;
                }
            }
        }
        // Deleting a large file to make room for a small one leaves the fullness below the
        // target: top it up. And the other way: space the estimate did not see (xfs keeps
        // speculative preallocation past EOF when close could not trim it, as happens under
        // load, and trims it later, when it evicts the inodes) can leave the synced figure
        // above the target, or below it again after shedding. Settle until the synced figure
        // is in range, so each churn checkpoint reports the steady fullness asked for.
        for _ in 0..8 {
            if enospc {
                break;
            }
            let now = self.calibrate(rec, true)?;
            if now + tol / 2 < target {
                enospc = self.reach(target, rec, false, now)?;
            } else if now > target + tol / 2 {
                self.shed_to(target + tol / 2, rec)?;
            } else {
                break;
            }
        }
        self.active += t_start.elapsed();
        self.finish_bar();
        self.checkpoint(name, pct, enospc)
    }
}

/// Writes `len` zero bytes from offset 0; false on ENOSPC.
fn write_zeros(fd: &OwnedFd, len: u64) -> Result<bool, Errno> {
    let zeros = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(zeros.len() as u64) as usize;
        let w = match sys::pwrite(fd.as_fd(), &zeros[..n], off) {
            Ok(w) => w,
            Err(Errno::EINTR) => continue,
            Err(Errno::ENOSPC) => return Ok(false),
            Err(e) => return Err(e),
        };
        off += w as u64;
    }
    Ok(true)
}
