//! `tio`: threaded I/O in the manner of tiobench, the benchmark of the block-reservation study
//! (seed study 2: ext3 reservation on 1–64 threads × sequential/random write/read × 4 KiB and
//! 128 KiB blocks; throughput, average and maximum latency, and the share of requests slower
//! than 2 s and 10 s).
//!
//! Every combination of `--threads`, `--mode` and `--block` is a *cell* and one measured phase,
//! named like `seqwrite-4K-t4`. Each thread works on its own file (the default) or on its own
//! region of one shared file; every block of a region is visited exactly once (random modes
//! in a seeded order), so bytes moved are exactly threads × file size. Read modes read files
//! written in an untimed setup step, after the cache is made cold (`--cold`). After each write
//! phase the layout of every written file is recorded (extents per file, layout score).
//!
//! The study made a fresh filesystem for every run. With a testbed and `fresh_fs` (the default),
//! callers run each cell as its own run (see [`crate::workload::sweep`]), so every cell gets a new
//! filesystem and its own result file; in a `--dir`, all cells run in one run, one after another,
//! each in a directory of its own that is removed afterwards.
//!
//! Two engines move the data: `psync` (pread/pwrite, one request in flight per thread) and
//! `io_uring` (Q requests in flight per thread). `--verify` writes self-identifying blocks
//! ([`pattern`]) and checks every block read; a mismatch fails the run (exit 1) naming the
//! file, the offset, what was expected and what was found.

mod checks;
mod clock;
mod fiemap;
mod paced;
pub mod pattern;
mod psync;
pub mod table;
mod uring;

use std::fmt;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::control::RunControl;
use super::params::{self, CommaList};
use super::{RunContext, Workload};
use crate::base::error::{bad_input, bad_param, SystemFailure};
use crate::base::sys::AlignedBuf;
use crate::base::units::{blocks_4k, format_size, Overflow, Size};
use crate::measure::{OpDef, OpId, Recorder};
use crate::results::{Combine, MetricDef, PhaseResult};

pub use fiemap::{record as layout_record, LayoutRecord};

crate::choice! {
    /// What each thread does with its region. `ALL` is tiobench's order.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Mode("mode") {
        /// Create and fill the region front to back.
        Seqwrite = "seqwrite",
        /// Create the file and write every block of the region once, in random order.
        Randwrite = "randwrite",
        /// Read the region front to back (written beforehand, untimed).
        Seqread = "seqread",
        /// Read every block of the region once, in random order.
        Randread = "randread",
    }
}

impl Mode {
    pub fn writes(self) -> bool {
        matches!(self, Self::Seqwrite | Self::Randwrite)
    }

    pub fn random(self) -> bool {
        matches!(self, Self::Randwrite | Self::Randread)
    }
}

crate::choice! {
    /// How requests are issued.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum Engine("engine") {
        /// pread(2)/pwrite(2): one request in flight per thread.
        #[default]
        Psync = "psync",
        /// io_uring with `iodepth` requests in flight per thread.
        IoUring = "io_uring" | "io-uring" | "uring",
    }
}

/// When written data is forced out (write modes only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// Never: the phase ends when the last write returns.
    None,
    /// fsync each file once when its thread has written it, inside the phase (the default).
    #[default]
    End,
    /// fsync after every N writes of a thread, and at the end.
    Every(u64),
}

impl FromStr for FsyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        match t {
            "none" => Ok(Self::None),
            "end" => Ok(Self::End),
            _ => match t.strip_prefix("every:").map(|n| n.trim().parse::<u64>()) {
                Some(Ok(n)) if n > 0 => Ok(Self::Every(n)),
                _ => Err(format!(
                    "unknown fsync policy {s:?}; use none, end or every:N (N ≥ 1 writes)"
                )),
            },
        }
    }
}

impl fmt::Display for FsyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::End => f.write_str("end"),
            Self::Every(n) => write!(f, "every:{n}"),
        }
    }
}

impl Serialize for FsyncPolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FsyncPolicy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The block-reservation study's threaded I/O (tiobench): threads × mode × block size,
/// each combination one measured phase (a fresh filesystem per cell with --fs), with
/// MB/s, IOPS, latency percentiles, requests over 2 s and 10 s, CPU efficiency and the
/// block layout of every written file.
///
/// The study's sweep: --threads 1,4,8,16,32,64 --mode seqwrite,randwrite,seqread,randread
/// --block 4K,128K.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, clap::Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Workload")]
pub struct Tio {
    /// Thread counts to sweep, e.g. 1,4,8,16,32,64.
    #[arg(long, value_name = "LIST", default_value = "1,4")]
    #[serde(deserialize_with = "CommaList::one_or_many")]
    pub threads: CommaList<u32>,
    /// Modes to sweep: seqwrite, randwrite, seqread, randread.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "seqwrite,randwrite,seqread,randread"
    )]
    #[serde(deserialize_with = "CommaList::one_or_many")]
    pub mode: CommaList<Mode>,
    /// Block (request) sizes to sweep, e.g. 4K,128K.
    #[arg(long, value_name = "LIST", default_value = "4K,128K")]
    #[serde(deserialize_with = "CommaList::one_or_many")]
    pub block: CommaList<Size>,
    /// Bytes each thread writes or reads (its own file, or its region of the shared file).
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = params::size)]
    #[serde(deserialize_with = "crate::base::units::de_size")]
    pub file_size: u64,
    /// All threads share one file, each on its own region, instead of a file per thread.
    #[arg(long)]
    pub shared_file: bool,
    /// O_DIRECT with aligned buffers (the page cache stays out).
    #[arg(long)]
    pub direct: bool,
    /// When writes are forced out: none, end (fsync each file once, inside the phase) or
    /// every:N (fsync after every N writes of a thread, and at the end).
    #[arg(long, value_name = "none|end|every:N", default_value = "end")]
    pub fsync: FsyncPolicy,
    /// How requests are issued: psync (pread/pwrite) or io_uring.
    #[arg(long, value_name = "psync|io_uring", default_value = "psync", value_parser = params::item::<Engine>)]
    pub engine: Engine,
    /// Requests in flight per thread (io_uring only).
    #[arg(long, value_name = "Q", default_value_t = 1)]
    pub iodepth: u32,
    /// Cap on each cell's duration, e.g. 30s; a cell stops early when it is reached.
    #[arg(long, value_name = "DURATION", value_parser = params::seconds)]
    #[serde(deserialize_with = "crate::base::units::de_opt_seconds")]
    pub time: Option<f64>,
    /// Write seeded, self-identifying blocks and check every block read (write cells read
    /// their files back after the phase); a mismatch fails the run with exit code 1.
    #[arg(long)]
    pub verify: bool,
    /// With --fs: a new filesystem for every cell of the sweep (each cell its own run and
    /// result file). Off: all cells run on one filesystem per repetition.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = params::on_off, action = clap::ArgAction::Set)]
    pub fresh_fs: bool,
    /// Use psync when the kernel or filesystem refuses io_uring (with a warning in the
    /// result) instead of failing.
    #[arg(long)]
    pub engine_fallback: bool,
    /// Record per-request latency. --no-latency records only counts and bytes: for measuring
    /// what latency recording costs (latency columns are then empty).
    #[arg(long = "no-latency", action = clap::ArgAction::SetFalse)]
    pub latency: bool,
    /// Self-test of --verify: after a read cell's setup, overwrite block N of the first file
    /// with another block's data; the run must then fail naming that block.
    #[arg(long, value_name = "N", hide = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inject_corruption: Option<u64>,
    /// Measures what latency recording costs within one run: stretches of 2048 requests
    /// alternate with recording on and off, and the phase reports the time per request of
    /// each (latency_probe_on_ns, latency_probe_off_ns, latency_cost). psync only; only the
    /// recorded half of the requests has latencies.
    #[arg(long, hide = true)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub latency_probe: bool,
    /// Time-based phases and CPU pinning.
    #[command(flatten)]
    #[serde(flatten)]
    pub control: RunControl,
}

impl Default for Tio {
    fn default() -> Self {
        params::defaults()
    }
}

/// One cell of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub mode: Mode,
    pub block: u64,
    pub threads: u32,
}

impl Cell {
    /// The phase name: `seqwrite-4K-t4`.
    pub fn name(&self) -> String {
        format!(
            "{}-{}-t{}",
            self.mode.name(),
            format_size(self.block),
            self.threads
        )
    }

    /// Parses a phase name back (for tables).
    pub fn parse(name: &str) -> Option<Cell> {
        let mut it = name.rsplitn(3, '-');
        let t = it.next()?.strip_prefix('t')?.parse().ok()?;
        let block = crate::base::units::parse_size(it.next()?).ok()?;
        let mode = it.next()?.parse().ok()?;
        Some(Cell {
            mode,
            block,
            threads: t,
        })
    }
}

/// Operation kinds of a tio phase.
const WRITE_OPS: [OpDef; 3] = [
    OpDef::primary("write"),
    OpDef::secondary("open"),
    OpDef::secondary("fsync"),
];
const READ_OPS: [OpDef; 3] = [
    OpDef::primary("read").reading(),
    OpDef::secondary("open"),
    OpDef::secondary("fsync"),
];

/// The operation ids a worker records into.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ops {
    pub io: OpId,
    pub open: OpId,
    pub fsync: OpId,
}

/// What one thread does in one cell.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub path: PathBuf,
    /// File id in verification headers (thread index, or 0 for the shared file).
    pub file_id: u64,
    /// Start of the thread's region in the file.
    pub base: u64,
    pub len: u64,
    pub block: u64,
    pub mode: Mode,
    /// Create (and truncate) the file when opening it.
    pub create: bool,
    pub direct: bool,
    pub verify: bool,
    pub latency: bool,
    pub latency_probe: bool,
    pub fsync: FsyncPolicy,
    pub seed: u64,
    /// Seed of the random order of this thread's blocks.
    pub order_seed: u64,
    pub iodepth: u32,
    pub deadline: Option<Instant>,
    /// Start over from the first request when the last is done, until the deadline.
    pub time_based: bool,
}

impl Job {
    pub fn blocks(&self) -> u64 {
        self.len / self.block
    }

    /// The byte offset of the `i`-th request.
    #[inline]
    pub fn offset(&self, perm: Option<&pattern::Permutation>, i: u64) -> u64 {
        let b = match perm {
            Some(p) => p.at(i),
            None => i,
        };
        self.base + b * self.block
    }

    pub fn permutation(&self) -> Option<pattern::Permutation> {
        self.mode
            .random()
            .then(|| pattern::Permutation::new(self.blocks(), self.order_seed))
    }

    /// Opens the file as the job needs it.
    pub fn open(&self) -> Result<OwnedFd> {
        let mut flags = libc::O_CLOEXEC;
        if self.mode.writes() {
            flags |= libc::O_WRONLY;
            if self.create {
                flags |= libc::O_CREAT | libc::O_TRUNC;
            }
        } else {
            flags |= libc::O_RDONLY;
        }
        if self.direct {
            flags |= libc::O_DIRECT;
        }
        open_path(&self.path, flags).map_err(|e| {
            let hint = if self.direct && e == nix::errno::Errno::EINVAL {
                " (the filesystem refuses O_DIRECT; leave out --direct)"
            } else {
                ""
            };
            io_failure("open", &self.path, None, e, hint)
        })
    }

    /// A buffer for `n` blocks, aligned for O_DIRECT.
    pub fn buffer(&self, n: usize) -> AlignedBuf {
        AlignedBuf::zeroed(self.block as usize * n)
    }
}

pub(crate) fn open_path(path: &Path, flags: libc::c_int) -> Result<OwnedFd, nix::errno::Errno> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| nix::errno::Errno::EINVAL)?;
    crate::base::sys::open(&c, flags, 0o644)
}

/// An I/O error of the filesystem under test (exit 1), naming the call, file and offset.
pub(crate) fn io_failure(
    op: &str,
    path: &Path,
    offset: Option<u64>,
    e: nix::errno::Errno,
    hint: &str,
) -> anyhow::Error {
    let at = offset.map_or(String::new(), |o| format!(" at offset {o}"));
    let what = format!("{}{at}", path.display());
    anyhow::Error::new(SystemFailure(
        crate::base::sys::fs_message(op, &what, e) + hint,
    ))
}

/// A verification mismatch (exit 1).
pub(crate) fn verify_failure(path: &Path, m: &pattern::Mismatch) -> anyhow::Error {
    anyhow::Error::new(SystemFailure(format!(
        "verify failed: {} at offset {}: expected {}, found {}",
        path.display(),
        m.offset,
        m.expected,
        m.found
    )))
}

/// Fills a buffer of whole blocks with data for the blocks at `offset`, `offset + block`, ...
/// (verification blocks, or the same seeded noise for every write without `--verify`).
pub(crate) fn fill_blocks(
    buf: &mut [u8],
    block: usize,
    verify: bool,
    seed: u64,
    file: u64,
    offset: u64,
) {
    if verify {
        for (k, b) in buf.chunks_exact_mut(block).enumerate() {
            pattern::fill_block(b, seed, file, offset + (k * block) as u64);
        }
    }
}

/// Seeded noise for writes without verification (compressing or deduplicating filesystems
/// must not get an easy ride from zeros).
pub(crate) fn noise(buf: &mut [u8], seed: u64) {
    let mut s = seed ^ 0x004E_4F49_5345;
    for c in buf.chunks_exact_mut(8) {
        c.copy_from_slice(&pattern::splitmix(&mut s).to_le_bytes());
    }
}

impl Tio {
    /// Every cell of the sweep, in run order: per block size, per thread count, each mode.
    pub fn cell_list(&self) -> Vec<Cell> {
        let mut out = Vec::new();
        for b in &self.block {
            for &t in &self.threads {
                for &m in &self.mode {
                    out.push(Cell {
                        mode: m,
                        block: b.bytes(),
                        threads: t,
                    });
                }
            }
        }
        out
    }

    fn max_threads(&self) -> u64 {
        self.threads.iter().copied().max().unwrap_or(1) as u64
    }

    fn max_block(&self) -> u64 {
        self.block.iter().map(|b| b.bytes()).max().unwrap_or(4096)
    }

    fn ops(rec: &Recorder, mode: Mode) -> Ops {
        Ops {
            io: rec.op(if mode.writes() { "write" } else { "read" }),
            open: rec.op("open"),
            fsync: rec.op("fsync"),
        }
    }

    /// Each thread's job in `dir`; threads are numbered from `off` (see
    /// [`RunContext::worker_base`]: under MPI with a shared directory, across ranks).
    fn jobs(&self, cell: Cell, dir: &Path, seed: u64, create: bool, off: u64) -> Result<Vec<Job>> {
        let deadline = self
            .time
            .map(crate::base::units::deadline_after)
            .transpose()
            .map_err(|e| bad_param("time", format!("--time: {e}")))?;
        Ok((off..off + cell.threads as u64)
            .map(|i| {
                let (path, file_id, base) = if self.shared_file {
                    (dir.join("shared"), 0, i * self.file_size)
                } else {
                    (dir.join(format!("t{i:03}")), i, 0)
                };
                Job {
                    path,
                    file_id,
                    base,
                    len: self.file_size,
                    block: cell.block,
                    mode: cell.mode,
                    create: create && !self.shared_file,
                    direct: self.direct,
                    verify: self.verify,
                    latency: self.latency,
                    latency_probe: self.latency_probe,
                    fsync: self.fsync,
                    seed,
                    order_seed: seed ^ (i.wrapping_mul(0x9E37_79B9)) ^ cell.block,
                    iodepth: self.iodepth,
                    deadline,
                    time_based: self.control.time_based,
                }
            })
            .collect())
    }

    fn files(&self, cell: Cell, dir: &Path, off: u64) -> Vec<PathBuf> {
        if self.shared_file {
            vec![dir.join("shared")]
        } else {
            (off..off + cell.threads as u64)
                .map(|i| dir.join(format!("t{i:03}")))
                .collect()
        }
    }

    /// Writes the files a read cell reads (untimed), in 1 MiB requests of whole blocks.
    fn setup_files(&self, cell: Cell, dir: &Path, seed: u64, off: u64) -> Result<()> {
        let jobs = self.jobs(cell, dir, seed, true, off)?;
        if self.shared_file {
            create_empty(&dir.join("shared"))?;
        }
        let chunk_blocks = ((1u64 << 20) / cell.block).max(1);
        let mut buf = AlignedBuf::zeroed((chunk_blocks * cell.block) as usize);
        noise(&mut buf, seed);
        for j in &jobs {
            let flags = libc::O_WRONLY | libc::O_CLOEXEC | libc::O_CREAT;
            let fd =
                open_path(&j.path, flags).map_err(|e| io_failure("open", &j.path, None, e, ""))?;
            let mut off = j.base;
            let end = j.base + j.len;
            while off < end {
                let n = (end - off).min(buf.len() as u64) as usize;
                fill_blocks(
                    &mut buf[..n],
                    cell.block as usize,
                    self.verify,
                    seed,
                    j.file_id,
                    off,
                );
                psync::pwrite_all(&fd, &buf[..n], off, &j.path)?;
                off += n as u64;
            }
            nix::unistd::fsync(fd.as_raw_fd())
                .map_err(|e| io_failure("fsync", &j.path, None, e, ""))?;
        }
        if let Some(k) = self.inject_corruption {
            self.corrupt(&jobs[0], k)?;
        }
        Ok(())
    }

    /// Overwrites block `k` of the first job's region with the block that belongs one block
    /// further on (or zeros at the end): a misdirected write the verifier must catch.
    fn corrupt(&self, job: &Job, k: u64) -> Result<()> {
        let blocks = job.blocks();
        if k >= blocks {
            return Err(bad_input(format!(
                "--inject-corruption {k}: the region has only {blocks} blocks"
            )));
        }
        let mut buf = AlignedBuf::zeroed(job.block as usize);
        let at = job.base + k * job.block;
        if k + 1 < blocks {
            pattern::fill_block(&mut buf, job.seed, job.file_id, at + job.block);
        }
        let fd = open_path(&job.path, libc::O_WRONLY | libc::O_CLOEXEC)
            .map_err(|e| io_failure("open", &job.path, None, e, ""))?;
        psync::pwrite_all(&fd, &buf, at, &job.path)?;
        nix::unistd::fsync(fd.as_raw_fd())
            .map_err(|e| io_failure("fsync", &job.path, None, e, ""))?;
        Ok(())
    }

    /// Reads every written block back (untimed) and checks it.
    fn verify_written(&self, cell: Cell, dir: &Path, seed: u64, off: u64) -> Result<()> {
        for mut j in self.jobs(cell, dir, seed, false, off)? {
            j.mode = Mode::Seqread;
            let fd = open_path(&j.path, libc::O_RDONLY | libc::O_CLOEXEC)
                .map_err(|e| io_failure("open", &j.path, None, e, ""))?;
            let mut buf = AlignedBuf::zeroed(j.block as usize);
            for i in 0..j.blocks() {
                let off = j.base + i * j.block;
                psync::pread_exact(&fd, &mut buf, off, &j.path)?;
                pattern::check_block(&buf, seed, j.file_id, off)
                    .map_err(|m| verify_failure(&j.path, &m))?;
            }
        }
        Ok(())
    }

    fn run_cell(&self, ctx: &mut RunContext, cell: Cell, engine: Engine) -> Result<()> {
        let dir = ctx.root().join(cell.name());
        let off = ctx.worker_base(cell.threads as u64);
        match std::fs::create_dir(&dir) {
            // Another MPI rank made it (`--shared-dir`).
            Err(e)
                if e.kind() == std::io::ErrorKind::AlreadyExists && ctx.shared_rank().is_some() => {
            }
            r => r.with_context(|| format!("creating {}", dir.display()))?,
        }
        let seed = ctx.seed();
        let jobs = self.cell_jobs(ctx, cell, &dir, seed, off)?;
        let expected = cell.threads as u64 * (self.file_size / cell.block);
        let (phase, rate_warning) = self.measure(ctx, cell, engine, &jobs, expected)?;
        self.cell_figures(phase, cell, expected)?;
        let walled = phase.stonewall_s.is_some();
        if cell.mode.writes() {
            let files = self.files(cell, &dir, off);
            match layout_record(&files, fs_block_size(&dir)) {
                Ok(l) => {
                    let x = &mut phase.extra;
                    x.insert("files".into(), l.files as f64);
                    x.insert("extents_per_file_mean".into(), l.extents_mean);
                    x.insert("extents_per_file_max".into(), l.extents_max as f64);
                    x.insert("layout_score".into(), l.score);
                }
                Err(e) => ctx.warn(format!("{}: no layout record: {e:#}", cell.name())),
            }
            ctx.layout_point()?;
            if self.verify && walled {
                ctx.warn(format!(
                    "{}: cut at the stonewall, so the written files were not verified",
                    cell.name()
                ));
            } else if self.verify {
                ctx.make_cold()?;
                self.verify_written(cell, &dir, seed, off)?;
            }
        }
        if let Some(w) = rate_warning {
            ctx.warn(w);
        }
        // In a directory shared by MPI ranks, rank 0 removes it once every rank is done.
        let remove = match ctx.shared_rank() {
            Some(rank) => {
                ctx.barrier();
                rank == 0
            }
            None => true,
        };
        if remove {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        Ok(())
    }

    /// The jobs of a cell's threads in `dir` (worker offset `off`): a read cell first writes
    /// the files it reads (untimed) and starts cold; a shared-file write cell creates the file.
    fn cell_jobs(
        &self,
        ctx: &mut RunContext,
        cell: Cell,
        dir: &Path,
        seed: u64,
        off: u64,
    ) -> Result<Vec<Job>> {
        // Read cells read what this run (or under MPI --read-neighbour, rank r+1) set up.
        let (read_root, read_off) = ctx.read_source(cell.threads as u64);
        let read_dir = read_root.join(cell.name());
        if !cell.mode.writes() {
            ctx.progress()
                .note(&format!("{}: writing the files to read", cell.name()));
            self.setup_files(cell, dir, seed, off)?;
            // Under MPI, caches are dropped once every rank has written its files.
            ctx.barrier();
            ctx.make_cold()?;
        } else if self.shared_file {
            create_empty(&dir.join("shared"))?;
        }
        if cell.mode.writes() {
            self.jobs(cell, dir, seed, true, off)
        } else {
            self.jobs(cell, &read_dir, seed, true, read_off)
        }
    }

    /// The measured phase of a cell: every thread runs its job on `engine` (paced, probed or
    /// flat out); the rate outcome and the latency probe's figures go into the phase. Returns
    /// the phase and the rate warning to give once the cell is done.
    fn measure<'c>(
        &self,
        ctx: &'c mut RunContext,
        cell: Cell,
        engine: Engine,
        jobs: &[Job],
        expected: u64,
    ) -> Result<(&'c mut PhaseResult, Option<String>)> {
        let defs: &[OpDef] = if cell.mode.writes() {
            &WRITE_OPS
        } else {
            &READ_OPS
        };
        let probes = std::sync::Mutex::new(Vec::new());
        let pace = self.control.rate().pace(cell.threads as usize);
        let achieved = std::sync::Mutex::new(Vec::new());
        let phase = ctx.phase(
            &cell.name(),
            defs,
            (!self.control.time_based).then_some(expected),
            cell.threads as usize,
            |i, rec| {
                let _pinned = self.control.pin(i)?;
                let ops = Self::ops(rec, cell.mode);
                let mut job = jobs[i].clone();
                if let Some(t) = self.control.phase_time(self.time) {
                    // The cap counts from when the workers start, not from when jobs were made.
                    job.deadline = Some(
                        crate::base::units::deadline_after(t)
                            .map_err(|e| bad_param("time", format!("--time: {e}")))?,
                    );
                }
                match engine {
                    Engine::Psync if pace.is_some() => {
                        let pace = pace.expect("checked by the guard");
                        let a = paced::run(&job, rec, ops, pace)?;
                        achieved.lock().unwrap_or_else(|e| e.into_inner()).push(a);
                        Ok(())
                    }
                    Engine::Psync if job.latency_probe => {
                        let p = psync::run_probe(&job, rec, ops)?;
                        probes.lock().unwrap_or_else(|e| e.into_inner()).push(p);
                        Ok(())
                    }
                    Engine::Psync => psync::run(&job, rec, ops),
                    Engine::IoUring => uring::run(&job, rec, ops),
                }
            },
        )?;
        let probes = probes.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut rate_warning = None;
        if let Some(pace) = pace {
            let done = achieved.into_inner().unwrap_or_else(|e| e.into_inner());
            let (outcome, warning) = super::rate::outcome(pace, done, &cell.name());
            phase.rate = Some(outcome);
            rate_warning = warning;
        }
        if !probes.is_empty() {
            probe_figures(&mut phase.extra, &probes);
        }
        Ok((phase, rate_warning))
    }

    /// The cell's own figures (throughput, CPU cost, share of slow requests, completeness);
    /// an error when an untimed phase that no stonewall cut lost requests.
    fn cell_figures(&self, phase: &mut PhaseResult, cell: Cell, expected: u64) -> Result<()> {
        let x = &mut phase.extra;
        let cpu = phase.user_s + phase.sys_s;
        let mb = phase.bytes as f64 / 1e6;
        x.insert("threads".into(), cell.threads as f64);
        x.insert("block".into(), cell.block as f64);
        x.insert("file_size".into(), self.file_size as f64);
        x.insert("iodepth".into(), self.iodepth.max(1) as f64);
        x.insert("mb_per_s".into(), phase.bytes_per_s / 1e6);
        x.insert("iops".into(), phase.ops_per_s);
        x.insert("cpu_s".into(), cpu);
        x.insert(
            "mb_per_cpu_s".into(),
            if cpu > 0.0 { mb / cpu } else { 0.0 },
        );
        let n = phase.latency.count.max(1) as f64;
        x.insert("over_2s_share".into(), phase.latency.over_2s as f64 / n);
        x.insert("over_10s_share".into(), phase.latency.over_10s as f64 / n);
        // A time-based phase does as much as fits in its time: `complete` is its whole time.
        let complete = if self.control.time_based {
            phase.stonewall_s.is_none()
        } else {
            phase.ops == expected
        };
        x.insert("complete".into(), if complete { 1.0 } else { 0.0 });
        let walled = phase.stonewall_s.is_some();
        if self.time.is_none() && !complete && !walled {
            return Err(anyhow::Error::new(SystemFailure(format!(
                "{}: {} of {expected} requests done; the phase lost requests",
                cell.name(),
                phase.ops
            ))));
        }
        Ok(())
    }

    /// Checks that io_uring works here: the kernel lets us set up a ring, and the filesystem
    /// takes a write and a read through it (with O_DIRECT when asked).
    fn probe_uring(&self, dir: &Path) -> Result<(), String> {
        let path = dir.join(".fsgauge-uring-probe");
        let r = uring::probe(&path, self.direct, self.iodepth.max(1));
        let _ = std::fs::remove_file(&path);
        r
    }
}

/// The latency probe's figures over the threads' probes: request-weighted mean latencies with
/// the probe on and off, and its cost (the median ratio over adjacent pairs of stretches).
fn probe_figures(x: &mut std::collections::BTreeMap<String, f64>, probes: &[psync::Probe]) {
    // Request-weighted means over the threads.
    let mean = |f: fn(&psync::Probe) -> (f64, u64)| {
        let (t, n) = probes
            .iter()
            .map(f)
            .fold((0.0, 0u64), |(t, n), (m, k)| (t + m * k as f64, n + k));
        t / n.max(1) as f64
    };
    let on = mean(|p| (p.on_ns, p.on_requests));
    let off = mean(|p| (p.off_ns, p.off_requests));
    // The median over adjacent pairs of stretches: a burst of other work on the
    // machine spoils a pair or two, not the figure.
    let mut ratios: Vec<f64> = probes.iter().flat_map(|p| p.pair_ratios.clone()).collect();
    ratios.sort_by(f64::total_cmp);
    let median = match ratios.len() {
        0 => None,
        n if n % 2 == 1 => Some(ratios[n / 2]),
        n => Some((ratios[n / 2 - 1] + ratios[n / 2]) / 2.0),
    };
    x.insert("latency_probe_on_ns".into(), on);
    x.insert("latency_probe_off_ns".into(), off);
    x.insert("latency_probe_pairs".into(), ratios.len() as f64);
    let cost = median.unwrap_or(if off > 0.0 { on / off } else { 1.0 }) - 1.0;
    x.insert("latency_cost".into(), cost);
}

fn create_empty(path: &Path) -> Result<()> {
    open_path(
        path,
        // No O_TRUNC: under MPI with a shared directory, other ranks may have written theirs.
        libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
    )
    .map(drop)
    .map_err(|e| io_failure("create", path, None, e, ""))
}

fn fs_block_size(dir: &Path) -> u64 {
    nix::sys::statvfs::statvfs(dir)
        .map(|s| s.block_size())
        .unwrap_or(4096)
        .max(512)
}

/// The figures this workload records in a phase's `extra`.
const METRICS: &[MetricDef] = &[
    MetricDef::count("threads", "threads", ""),
    MetricDef::count("block", "block size", "B").combine(Combine::Same),
    MetricDef::count("file_size", "file size", "B").combine(Combine::Same),
    MetricDef::count("iodepth", "queue depth", "").combine(Combine::Same),
    MetricDef::rate("mb_per_s", "tio throughput", "MB/s"),
    MetricDef::rate("iops", "IOPS", "ops/s"),
    MetricDef::lower("cpu_s", "CPU time", "s"),
    MetricDef::higher("mb_per_cpu_s", "MB per CPU second", "MB/CPU-s").combine(Combine::MbPerCpuS),
    MetricDef::lower("over_2s_share", "share of requests over 2 s", "")
        .combine(Combine::ShareOver2s),
    MetricDef::lower("over_10s_share", "share of requests over 10 s", "")
        .combine(Combine::ShareOver10s),
    MetricDef::higher("complete", "every request done", "").combine(Combine::Min),
    MetricDef::count("files", "files", ""),
    MetricDef::lower("extents_per_file_mean", "extents per file", "").combine(Combine::Mean),
    MetricDef::lower("extents_per_file_max", "most extents of a file", "").combine(Combine::Max),
    MetricDef::higher("layout_score", "layout score", "").combine(Combine::Mean),
    MetricDef::count(
        "latency_probe_on_ns",
        "probe time with latency timing",
        "ns",
    ),
    MetricDef::count(
        "latency_probe_off_ns",
        "probe time without latency timing",
        "ns",
    ),
    MetricDef::count("latency_probe_pairs", "probe pairs", ""),
    MetricDef::lower("latency_cost", "latency timing cost", ""),
];

impl Workload for Tio {
    fn metrics(&self) -> &'static [MetricDef] {
        METRICS
    }

    fn kind(&self) -> &'static str {
        "tio"
    }

    fn params(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("plain struct serializes")
    }

    fn sweep_axes(&self) -> &'static [&'static str] {
        &["block", "threads", "mode"]
    }

    fn line_axis(&self) -> Option<&'static str> {
        Some("threads")
    }

    fn op_kinds(&self) -> Vec<OpDef> {
        [WRITE_OPS, READ_OPS].concat()
    }

    fn fresh_per_cell(&self) -> bool {
        self.fresh_fs
    }

    fn validate(&self) -> Result<()> {
        self.control.validate(self.time)?;
        self.check_latency_and_rate()?;
        self.check_sweep_values()?;
        for b in &self.block {
            self.check_block(b.bytes())?;
        }
        self.check_iodepth()?;
        if let Some(t) = self.time {
            if t.is_nan() || t <= 0.0 {
                return Err(bad_param("time", "--time must be more than 0s"));
            }
        }
        self.check_engine()
    }

    fn space_needed(&self) -> Result<u64, Overflow> {
        // One cell's files at a time, rounded to 4 KiB, plus a little for metadata.
        blocks_4k(self.file_size)
            .and_then(|per| per.checked_mul(self.max_threads()))
            .and_then(|data| data.checked_add(1 << 20))
            .ok_or_else(Overflow::of(
                "tio",
                "space estimate",
                format!(
                    "--threads {} --file-size {}",
                    self.max_threads(),
                    self.file_size
                ),
                "--threads or --file-size",
            ))
    }

    fn memory_needed(&self) -> Result<u64, Overflow> {
        self.max_block()
            .checked_mul(self.iodepth.max(1) as u64)
            .and_then(|b| b.checked_add(256 << 10))
            .and_then(|per_thread| per_thread.checked_mul(self.max_threads()))
            .and_then(|m| m.checked_add(1 << 20))
            .ok_or_else(Overflow::of(
                "tio",
                "memory estimate",
                format!(
                    "--threads {} --block {} --iodepth {}",
                    self.max_threads(),
                    self.max_block(),
                    self.iodepth
                ),
                "--threads, --block or --iodepth",
            ))
    }

    fn run(&self, ctx: &mut RunContext) -> Result<()> {
        ctx.set_series(self.control.series_spec(self.time)?);
        let mut engine = self.engine;
        if engine == Engine::IoUring {
            let refusal = match uring::kernel_check(self.iodepth) {
                Err(e) => Some(e),
                Ok(()) => self.probe_uring(ctx.root()).err(),
            };
            if let Some(why) = refusal {
                if self.engine_fallback {
                    ctx.warn(format!(
                        "io_uring refused ({why}); ran with psync as --engine-fallback allows"
                    ));
                    engine = Engine::Psync;
                } else {
                    return Err(bad_input(format!(
                        "--engine io_uring refused on {}: {why}; use --engine psync, or add --engine-fallback",
                        ctx.shown_root().display()
                    )));
                }
            }
        }
        let cells = self.cell_list();
        if !self.direct
            && ctx.cold_mode() == super::ColdMode::None
            && cells.iter().any(|c| !c.mode.writes())
        {
            ctx.warn(
                "read cells ran with --cold none: the files were just written, so reads may come from the page cache; use --cold drop (or --direct) to measure the filesystem",
            );
        }
        for cell in cells {
            self.run_cell(ctx, cell, engine)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_engines_have_one_set_of_names() {
        crate::base::choice::testing::one_set_of_names::<Mode>();
        crate::base::choice::testing::one_set_of_names::<Engine>();
    }

    #[test]
    fn cells_are_named_and_parsed_back() {
        let c = Cell {
            mode: Mode::Seqwrite,
            block: 4096,
            threads: 4,
        };
        assert_eq!(c.name(), "seqwrite-4K-t4");
        assert_eq!(Cell::parse("seqwrite-4K-t4"), Some(c));
        assert_eq!(Cell::parse("randread-128K-t64").unwrap().block, 128 << 10);
        assert!(Cell::parse("create").is_none());
    }

    #[test]
    fn sweep_expands_to_one_workload_per_cell() {
        let t = Tio {
            threads: vec![1, 4, 8].into(),
            mode: vec![Mode::Seqwrite, Mode::Randread].into(),
            block: vec![Size(4096), Size(128 << 10)].into(),
            ..Tio::default()
        };
        let cells = crate::workload::registry::sweep::cells(&t).unwrap();
        assert_eq!(cells.len(), 12);
        assert!(cells.iter().all(|c| {
            let p = c.workload.params();
            ["threads", "mode", "block"]
                .iter()
                .all(|a| p[*a].as_array().map(Vec::len) == Some(1))
        }));
        assert!(crate::workload::registry::sweep::splits(&t));
    }

    #[test]
    fn parameters_parse_from_plan_values_and_bad_ones_are_refused() {
        let t: Tio = serde_json::from_value(serde_json::json!({
            "threads": [1, 2], "mode": ["randread"], "block": ["4K"], "file_size": "1M",
            "fsync": "every:16", "time": "2s", "engine": "io_uring", "iodepth": 8
        }))
        .unwrap();
        assert_eq!(t.fsync, FsyncPolicy::Every(16));
        assert_eq!(t.time, Some(2.0));
        assert_eq!(t.engine, Engine::IoUring);
        assert!(t.latency && t.fresh_fs);
        let big = Tio {
            block: vec![Size(1 << 20)].into(),
            file_size: 512 << 10,
            ..Tio::default()
        };
        let e = big.validate().unwrap_err().to_string();
        assert!(e.contains("larger than --file-size"), "{e}");
        let deep = Tio {
            iodepth: 8,
            ..Tio::default()
        };
        assert!(deep
            .validate()
            .unwrap_err()
            .to_string()
            .contains("io_uring"));
        assert!("every:0".parse::<FsyncPolicy>().is_err());
    }
}
