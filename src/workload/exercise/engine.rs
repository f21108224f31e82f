//! One exerciser: a file, its model, and the loop of operation → check.
//!
//! Every operation goes to the kernel as one system call where it can (pread, pwrite,
//! fallocate, ftruncate, copy_file_range, FICLONERANGE; mmap ops map exactly the range), data
//! is compared in place (the read buffer against the model's range, the mapping against the
//! model), and after every operation the size is checked twice, with fstat and with
//! lseek(SEEK_END), as fsx does. Only the affected range is read, so an operation costs its
//! own I/O and two cheap calls; the whole file is read only after a remount.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nix::errno::Errno;

use super::durable::{Record, What};
use super::model::{first_difference, Model};
pub use super::ops::Step;
use super::ops::{Limits, Op, OpGen, OpKind};
use super::report::{Failure, FailureKind};
use crate::base::error::bad_input;
use crate::base::sys::{self, AlignedBuf};

/// How many operations a failure report lists.
pub const HISTORY: usize = 100;

/// What an exerciser is asked to do (validated by the caller).
#[derive(Debug, Clone)]
pub struct Config {
    pub max_len: u64,
    pub max_op_len: u64,
    /// O_DIRECT: every offset and length a multiple of the block size; no mmap operations.
    pub direct: bool,
    /// Before every operation that moves EOF, fill the tail of the EOF page past EOF with
    /// garbage through a mapping (fsx -e 1): the filesystem must zero it when the file grows.
    pub pollute_eof: bool,
    /// Kinds the user allows (before probing), each with its weight: a kind of weight 2 is
    /// picked twice as often as one of weight 1.
    pub kinds: Vec<(OpKind, u32)>,
    /// Seed of this exerciser's operation stream and data.
    pub seed: u64,
    /// Keep a durability record ([`super::durable::Record`]) with room for this many
    /// operations made in advance; the set-up then fsyncs the file and its directory.
    pub record: Option<usize>,
}

/// A running exerciser on one file.
pub struct Exerciser {
    path: PathBuf,
    fd: Option<OwnedFd>,
    cfg: Config,
    model: Model,
    scratch: AlignedBuf,
    gen: OpGen,
    lim: Limits,
    page: u64,
    n: u64,
    history: std::collections::VecDeque<Step>,
    log: Option<BufWriter<File>>,
    enabled: Vec<OpKind>,
    disabled: Vec<(OpKind, String)>,
    record: Option<Record>,
    /// When the file was last closed (CLOCK_MONOTONIC ns; the start of a remount).
    closed_at: u64,
}

/// `EOPNOTSUPP (Operation not supported)`.
pub fn errno_text(e: Errno) -> String {
    let msg = std::io::Error::from_raw_os_error(e as i32).to_string();
    let msg = msg.split(" (os error").next().unwrap_or(&msg).to_string();
    format!("{e:?} ({msg})")
}

/// The scratch buffer's length: the longest read, of the whole file or of one operation, in
/// this machine's address space.
fn scratch_len(cfg: &Config) -> Result<usize> {
    usize::try_from(cfg.max_len.max(cfg.max_op_len)).map_err(|_| {
        bad_input(format!(
            "--max-len {} does not fit this machine's address space",
            cfg.max_len
        ))
    })
}

fn open_file(path: &Path, direct: bool, create: bool) -> Result<OwnedFd, Errno> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    let mut flags = libc::O_RDWR | libc::O_CLOEXEC;
    if create {
        flags |= libc::O_CREAT | libc::O_TRUNC;
    }
    if direct {
        flags |= libc::O_DIRECT;
    }
    crate::base::sys::open(&c, flags, 0o644)
}

fn fallocate(fd: BorrowedFd<'_>, mode: i32, off: u64, len: u64) -> Result<(), Errno> {
    sys::fallocate(fd, mode, off, len)
}

fn ftruncate(fd: BorrowedFd<'_>, size: u64) -> Result<(), Errno> {
    nix::unistd::ftruncate(fd, size as i64)
}

fn clone_range(fd: BorrowedFd<'_>, src: u64, len: u64, dst: u64) -> Result<(), Errno> {
    sys::clone_range(fd, src, len, dst)
}

/// The plain kind a mapped or dontcache kind falls back to when it cannot run (fsx turns
/// mapped reads and writes into plain ones under -R/-W, and dontcache I/O when unsupported).
fn plain_variant(k: OpKind) -> Option<OpKind> {
    match k {
        OpKind::MapRead | OpKind::ReadDontcache => Some(OpKind::Read),
        OpKind::MapWrite | OpKind::WriteDontcache => Some(OpKind::Write),
        _ => None,
    }
}

/// Refuses a path that exists and is not a regular file (a directory, a symlink, a device).
fn refuse_non_file(path: &Path) -> Result<()> {
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if !md.file_type().is_file() {
            return Err(bad_input(format!(
                "{} exists and is not a regular file; the exerciser needs a regular file it may overwrite",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Opens (creating or truncating) the exerciser's file, turning the refusals a user can fix
/// (read-only filesystem, no O_DIRECT, a directory) into bad-input errors.
fn open_target(path: &Path, direct: bool) -> Result<OwnedFd> {
    open_file(path, direct, true).map_err(|e| match e {
        Errno::EROFS => bad_input(format!(
            "{} is on a read-only filesystem; the exerciser writes, so it needs a writable one",
            path.display()
        )),
        Errno::EINVAL if direct => bad_input(format!(
            "the filesystem of {} does not support O_DIRECT; leave out --direct",
            path.display()
        )),
        Errno::EISDIR => bad_input(format!(
            "{} is a directory, not a regular file",
            path.display()
        )),
        e => anyhow::anyhow!(
            "opening {} for the exerciser: {}",
            path.display(),
            errno_text(e)
        ),
    })
}

/// Checks that the opened file is a regular one and returns its block size (at least 512).
fn regular_file_block(fd: BorrowedFd<'_>, path: &Path) -> Result<u64> {
    let st = crate::base::sys::fstat(fd)
        .map_err(|e| anyhow::anyhow!("fstat {}: {}", path.display(), e))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(bad_input(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    Ok((st.st_blksize as u64).max(512))
}

/// With `--direct`, refuses a `--max-len` or `--max-op-len` that is not a multiple of the
/// file's block size, suggesting one that is.
fn check_direct_lengths(path: &Path, cfg: &Config, block: u64) -> Result<()> {
    for (flag, v) in [("--max-len", cfg.max_len), ("--max-op-len", cfg.max_op_len)] {
        if v % block != 0 {
            return Err(bad_input(format!(
                "{flag} {v} is not a multiple of the block size of {} ({block} bytes); with --direct every offset and length must be, e.g. {flag} {}",
                path.display(),
                (v / block).max(1) * block
            )));
        }
    }
    Ok(())
}

/// The system's page size, at least 4 KiB (4 KiB when it cannot be read).
fn page_size() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .unwrap_or(4096)
        .max(4096) as u64
}

/// Errors that mean "this filesystem does not do that" (fsx's list, plus EINVAL for probes
/// made with well-formed arguments).
fn unsupported(e: Errno) -> bool {
    matches!(
        e,
        Errno::EOPNOTSUPP | Errno::ENOTTY | Errno::ENOSYS | Errno::EXDEV | Errno::EINVAL
    )
}

impl Exerciser {
    /// Creates (or truncates) the file, probes which operations the filesystem supports and
    /// turns the others off. `log` receives every step as a line (the replay log).
    pub fn create(path: &Path, cfg: Config, log: Option<File>) -> Result<Self> {
        refuse_non_file(path)?;
        let fd = open_target(path, cfg.direct)?;
        let block = regular_file_block(fd.as_fd(), path)?;
        if cfg.direct {
            check_direct_lengths(path, &cfg, block)?;
        }
        let lim = Limits {
            max_len: cfg.max_len,
            max_op_len: cfg.max_op_len,
            align: if cfg.direct { block } else { 1 },
            block,
        };
        let mut ex = Self {
            path: path.to_path_buf(),
            fd: Some(fd),
            model: Model::new(cfg.max_len, cfg.max_op_len, cfg.seed)?,
            scratch: AlignedBuf::try_zeroed(scratch_len(&cfg)?)?,
            gen: OpGen::new(cfg.seed, &[OpKind::Write], lim),
            lim,
            page: page_size(),
            n: 0,
            history: std::collections::VecDeque::with_capacity(HISTORY),
            log: log.map(|f| BufWriter::with_capacity(1 << 16, f)),
            enabled: Vec::new(),
            disabled: Vec::new(),
            record: None,
            closed_at: 0,
            cfg,
        };
        ex.probe()?;
        if let Some(capacity) = ex.cfg.record {
            ex.durable_setup(capacity)?;
        }
        let slots = ex.mix_slots();
        ex.gen = OpGen::new(ex.cfg.seed, &slots, lim);
        Ok(ex)
    }

    /// The generator's slots after probing: each asked-for kind repeated by its weight, with
    /// kinds that cannot run here replaced by their plain variant, and a write added when the
    /// mix has none.
    fn mix_slots(&self) -> Vec<OpKind> {
        self.cfg
            .kinds
            .iter()
            .filter_map(|&(k, w)| {
                // As fsx does, the mapped and dontcache variants that cannot run here become
                // plain reads and writes, so the mix keeps its proportions.
                if self.enabled.contains(&k) {
                    Some((k, w))
                } else {
                    plain_variant(k)
                        .filter(|p| self.enabled.contains(p))
                        .map(|p| (p, w))
                }
            })
            .flat_map(|(k, w)| std::iter::repeat_n(k, w as usize))
            .chain(
                // Writes stay on even when asked out of the mix by weight: the generator's
                // fallback needs them, and without them nothing is verified.
                (!self
                    .cfg
                    .kinds
                    .iter()
                    .any(|(k, w)| *k == OpKind::Write && *w > 0))
                .then_some(OpKind::Write),
            )
            .collect()
    }

    /// Makes the probed, empty file durable (fsync of the file and of its directory) and starts
    /// the record with that point.
    fn durable_setup(&mut self, capacity: usize) -> Result<()> {
        let cfg = &self.cfg;
        let mut rec = Record::new(
            self.path.clone(),
            cfg.seed,
            cfg.max_len,
            cfg.max_op_len,
            capacity.saturating_add(16),
        );
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let start = sys::rt::monotonic_ns();
        nix::unistd::fsync(self.fd().as_raw_fd())
            .map_err(|e| anyhow::anyhow!("fsync {}: {}", self.path.display(), errno_text(e)))?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("fsync of directory {}", dir.display()))?;
        rec.push(What::Setup, start, sys::rt::monotonic_ns());
        self.record = Some(rec);
        Ok(())
    }

    /// The durability record, when [`Config::record`] asked for one.
    pub fn record(&self) -> Option<&Record> {
        self.record.as_ref()
    }

    /// Takes the durability record out (the exerciser keeps none afterwards).
    pub fn take_record(&mut self) -> Option<Record> {
        self.record.take()
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.fd
            .as_ref()
            .expect("operations run only while the file is open")
            .as_fd()
    }

    /// Tries each kind once with well-formed arguments on the empty file and keeps those the
    /// filesystem accepts; the file is empty again afterwards.
    fn probe(&mut self) -> Result<()> {
        let fd = self
            .fd
            .as_ref()
            .expect("operations run only while the file is open")
            .as_fd();
        let b = self.lim.block.max(self.lim.align);
        let setup = |what: &str, r: Result<(), Errno>| -> Result<()> {
            r.map_err(|e| {
                anyhow::anyhow!(
                    "{what} while probing {}: {}",
                    self.path.display(),
                    errno_text(e)
                )
            })
        };
        for (kind, _) in self.cfg.kinds.clone() {
            let outcome: Result<(), Errno> = match kind {
                OpKind::ReadDontcache | OpKind::WriteDontcache if self.cfg.direct => {
                    self.disabled.push((
                        kind,
                        "off with --direct, plain I/O instead (O_DIRECT does not use the page cache; as fsx -Z)"
                            .into(),
                    ));
                    continue;
                }
                OpKind::ReadDontcache => {
                    let mut buf = [0u8; 4096];
                    pread_all(fd, &mut buf, 0, RWF_DONTCACHE).map(|_| ())
                }
                OpKind::WriteDontcache => pwrite_all(fd, &[0u8; 4096], 0, RWF_DONTCACHE),
                OpKind::MapRead | OpKind::MapWrite if self.cfg.direct => {
                    self.disabled.push((
                        kind,
                        "off with --direct, plain I/O instead (page-cache mappings and O_DIRECT do not mix; as fsx -Z -R -W)".into(),
                    ));
                    continue;
                }
                OpKind::Falloc => fallocate(fd, 0, 0, b)
                    .and_then(|_| fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, b, b)),
                OpKind::Punch => fallocate(
                    fd,
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    0,
                    b,
                ),
                OpKind::Zero => fallocate(fd, libc::FALLOC_FL_ZERO_RANGE, 0, b).and_then(|_| {
                    fallocate(
                        fd,
                        libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
                        b,
                        b,
                    )
                }),
                OpKind::Collapse => ftruncate(fd, 3 * b)
                    .and_then(|_| fallocate(fd, libc::FALLOC_FL_COLLAPSE_RANGE, b, b)),
                OpKind::Insert => ftruncate(fd, 3 * b)
                    .and_then(|_| fallocate(fd, libc::FALLOC_FL_INSERT_RANGE, b, b)),
                OpKind::Copy => ftruncate(fd, 2 * b)
                    .and_then(|_| sys::copy_range(fd, 0, b, b as usize).map(|_| ())),
                OpKind::Clone => ftruncate(fd, 2 * b).and_then(|_| clone_range(fd, 0, b, b)),
                _ => Ok(()),
            };
            match outcome {
                Ok(()) => self.enabled.push(kind),
                Err(e) if unsupported(e) => {
                    let mut why = errno_text(e);
                    if let Some(p) = plain_variant(kind) {
                        why.push_str(&format!(", plain {p} instead"));
                    }
                    self.disabled.push((kind, why))
                }
                Err(e) => setup(kind.name(), Err(e))?,
            }
            setup("ftruncate", ftruncate(fd, 0))?;
        }
        if !self.enabled.contains(&OpKind::Write) {
            self.enabled.insert(0, OpKind::Write);
        }
        Ok(())
    }

    /// Kinds in use, and kinds turned off with the reason.
    pub fn kinds(&self) -> (&[OpKind], &[(OpKind, String)]) {
        (&self.enabled, &self.disabled)
    }

    /// Operations done so far.
    pub fn ops_done(&self) -> u64 {
        self.n
    }

    /// The model of the file.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The next operation of the seeded stream (not yet done).
    pub fn next_op(&mut self) -> Op {
        self.gen.next(self.model.size())
    }

    /// Generates and performs the next operation.
    pub fn step(&mut self) -> Result<Op, Box<Failure>> {
        let op = self.next_op();
        self.apply(op)?;
        Ok(op)
    }

    fn remember(&mut self, s: Step) {
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(s);
        if let Some(l) = self.log.as_mut() {
            // A failing log write must not hide the filesystem's result; it is reported at
            // flush time.
            let _ = writeln!(l, "{s}");
        }
    }

    /// The last steps, oldest first.
    pub fn history(&self) -> Vec<Step> {
        self.history.iter().copied().collect()
    }

    fn fail(&self, op: Option<Op>, kind: FailureKind) -> Box<Failure> {
        Box::new(Failure {
            file: self.path.clone(),
            op_number: self.n,
            op,
            kind,
            size: self.model.size(),
            history: self.history(),
        })
    }

    fn io_fail(&self, op: Option<Op>, call: &str, e: Errno) -> Box<Failure> {
        self.fail(
            op,
            FailureKind::Io {
                call: call.to_string(),
                detail: errno_text(e),
            },
        )
    }

    /// Performs one operation, updates the model, compares what it read and checks the size;
    /// with a record, notes its start and end.
    pub fn apply(&mut self, op: Op) -> Result<(), Box<Failure>> {
        self.n += 1;
        self.remember(Step::Op(self.n, op));
        if let Some(why) = self.misfit(op) {
            return Err(self.fail(
                Some(op),
                FailureKind::Io {
                    call: "(the operation itself)".into(),
                    detail: why,
                },
            ));
        }
        if self.record.is_none() {
            return self.perform(op);
        }
        let start = sys::rt::monotonic_ns();
        let r = self.perform(op);
        let end = sys::rt::monotonic_ns();
        if let Some(rec) = self.record.as_mut() {
            rec.push(What::Op(self.n, op), start, end);
            if r.is_err() {
                // A failed fsync (or a failed check after it) promises nothing.
                rec.forget_last();
            }
        }
        r
    }

    /// The system calls of `op` and the model's update, the comparison and the size check.
    fn perform(&mut self, op: Op) -> Result<(), Box<Failure>> {
        let fd = self
            .fd
            .as_ref()
            .expect("operations run only while the file is open")
            .as_fd();
        if self.cfg.pollute_eof {
            if let Some(limit) = self.pollute_limit(op) {
                self.pollute_eof_page(op, limit)?;
            }
        }
        let r: Result<(), Box<Failure>> =
            match op.kind {
                OpKind::Read => self.do_read(op, 0),
                OpKind::ReadDontcache => self.do_read(op, RWF_DONTCACHE),
                OpKind::Write => {
                    let data = self.model.write(self.n, op.off, op.len);
                    pwrite_all(fd, data, op.off, 0).map_err(|e| self.io_fail(Some(op), "pwrite", e))
                }
                OpKind::WriteDontcache => {
                    let data = self.model.write(self.n, op.off, op.len);
                    pwrite_all(fd, data, op.off, RWF_DONTCACHE)
                        .map_err(|e| self.io_fail(Some(op), "pwritev2(RWF_DONTCACHE)", e))
                }
                OpKind::MapRead => self.do_mapread(op),
                OpKind::MapWrite => self.do_mapwrite(op),
                OpKind::Truncate => {
                    self.model.truncate(op.len);
                    ftruncate(fd, op.len).map_err(|e| self.io_fail(Some(op), "ftruncate", e))
                }
                OpKind::Falloc => {
                    let mode = if op.keep {
                        libc::FALLOC_FL_KEEP_SIZE
                    } else {
                        0
                    };
                    if !op.keep {
                        self.model.extend(op.off + op.len);
                    }
                    fallocate(fd, mode, op.off, op.len)
                        .map_err(|e| self.io_fail(Some(op), "fallocate", e))
                }
                OpKind::Punch => {
                    self.model.zero(op.off, op.len);
                    fallocate(
                        fd,
                        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                        op.off,
                        op.len,
                    )
                    .map_err(|e| self.io_fail(Some(op), "fallocate(PUNCH_HOLE)", e))
                }
                OpKind::Zero => {
                    let mut mode = libc::FALLOC_FL_ZERO_RANGE;
                    if op.keep {
                        mode |= libc::FALLOC_FL_KEEP_SIZE;
                    } else {
                        self.model.extend(op.off + op.len);
                    }
                    self.model.zero(op.off, op.len);
                    fallocate(fd, mode, op.off, op.len)
                        .map_err(|e| self.io_fail(Some(op), "fallocate(ZERO_RANGE)", e))
                }
                OpKind::Collapse => {
                    self.model.collapse(op.off, op.len);
                    fallocate(fd, libc::FALLOC_FL_COLLAPSE_RANGE, op.off, op.len)
                        .map_err(|e| self.io_fail(Some(op), "fallocate(COLLAPSE_RANGE)", e))
                }
                OpKind::Insert => {
                    self.model.insert(op.off, op.len);
                    fallocate(fd, libc::FALLOC_FL_INSERT_RANGE, op.off, op.len)
                        .map_err(|e| self.io_fail(Some(op), "fallocate(INSERT_RANGE)", e))
                }
                OpKind::Fsync => nix::unistd::fsync(fd.as_raw_fd())
                    .map_err(|e| self.io_fail(Some(op), "fsync", e)),
                OpKind::Fdatasync => nix::unistd::fdatasync(fd.as_raw_fd())
                    .map_err(|e| self.io_fail(Some(op), "fdatasync", e)),
                OpKind::Syncfs => nix::unistd::syncfs(fd.as_raw_fd())
                    .map_err(|e| self.io_fail(Some(op), "syncfs", e)),
                OpKind::Copy => {
                    self.model.copy(op.off, op.len, op.dst);
                    self.copy_all(fd, op)
                }
                OpKind::Clone => {
                    self.model.copy(op.off, op.len, op.dst);
                    clone_range(fd, op.off, op.len, op.dst)
                        .map_err(|e| self.io_fail(Some(op), "ioctl(FICLONERANGE)", e))
                }
            };
        r?;
        self.check_size(Some(op))
    }

    /// Copies `op`'s range within the file with copy_file_range, which may copy less than
    /// asked: on from where it stopped, until all is copied or it copies nothing.
    fn copy_all(&self, fd: BorrowedFd<'_>, op: Op) -> Result<(), Box<Failure>> {
        let (mut i, mut o) = (op.off, op.dst);
        let mut left = op.len;
        while left > 0 {
            let r = match sys::copy_range(fd, i, o, left as usize) {
                Ok(r) => r as u64,
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(self.io_fail(Some(op), "copy_file_range", e)),
            };
            if r == 0 {
                let short = FailureKind::Short {
                    call: "copy_file_range".into(),
                    done: op.len - left,
                    wanted: op.len,
                };
                return Err(self.fail(Some(op), short));
            }
            left -= r;
            i += r;
            o += r;
        }
        Ok(())
    }

    /// How far garbage may be put past EOF before `op` (exclusive file offset), where fsx -e
    /// pollutes: before truncates, collapses, inserts, and operations that extend the file
    /// past a gap. Only bytes the operation brings inside the file (or that a shrink must
    /// zero) are polluted, never bytes that stay past the new EOF.
    fn pollute_limit(&self, op: Op) -> Option<u64> {
        let (size, max) = (self.model.size(), self.cfg.max_len);
        match op.kind {
            OpKind::Truncate if op.len < size => Some(max),
            OpKind::Truncate if op.len > size => Some(op.len),
            OpKind::Collapse | OpKind::Insert => Some(max),
            OpKind::Write | OpKind::WriteDontcache | OpKind::MapWrite if op.off > size => {
                Some(op.off + op.len)
            }
            OpKind::Falloc | OpKind::Zero if !op.keep && op.off > size => Some(op.off + op.len),
            OpKind::Copy | OpKind::Clone if op.dst > size => Some(op.dst + op.len),
            _ => None,
        }
    }

    /// Writes 0xa5 past EOF in the EOF page, up to `limit`, through a shared mapping (not
    /// part of the file; the model keeps zeros there).
    fn pollute_eof_page(&self, op: Op, limit: u64) -> Result<(), Box<Failure>> {
        let size = self.model.size();
        let tail = size % self.page;
        if tail == 0 {
            return Ok(());
        }
        let base = size - tail;
        let end = (limit - base).min(self.page) as usize;
        let mut map = Mapping::new(self.fd(), base, tail, self.page, true)
            .map_err(|e| self.io_fail(Some(op), "mmap (pollute EOF page)", e))?;
        let page = map.page_mut();
        page[tail as usize..end].fill(0xa5);
        Ok(())
    }

    /// Why an operation cannot be modelled (see [`Model::misfit`]).
    fn misfit(&self, op: Op) -> Option<String> {
        self.model.misfit(op)
    }

    fn check_size(&self, op: Option<Op>) -> Result<(), Box<Failure>> {
        let fd = self
            .fd
            .as_ref()
            .expect("operations run only while the file is open")
            .as_fd();
        let st = sys::fstat(fd).map_err(|e| self.io_fail(op, "fstat", e))?;
        let end = nix::unistd::lseek(fd.as_raw_fd(), 0, nix::unistd::Whence::SeekEnd)
            .map_err(|e| self.io_fail(op, "lseek(SEEK_END)", e))?;
        let want = self.model.size();
        if st.st_size as u64 != want || end as u64 != want {
            return Err(self.fail(
                op,
                FailureKind::Size {
                    expected: want,
                    stat: st.st_size as u64,
                    seek: end as u64,
                },
            ));
        }
        Ok(())
    }

    fn compare(&self, op: Option<Op>, off: u64, found: &[u8]) -> Result<(), Box<Failure>> {
        let expected = self.model.range(off, found.len() as u64);
        match first_difference(expected, found) {
            None => Ok(()),
            Some((at, run)) => {
                // The differing run, and at least 16 bytes so the neighbourhood shows too.
                let show = run.clamp(16, 64).min(found.len() - at);
                Err(self.fail(
                    op,
                    FailureKind::Data {
                        read_off: off,
                        read_len: found.len() as u64,
                        offset: off + at as u64,
                        run: run as u64,
                        expected: expected[at..at + show].to_vec(),
                        found: found[at..at + show].to_vec(),
                    },
                ))
            }
        }
    }

    fn do_read(&mut self, op: Op, flags: i32) -> Result<(), Box<Failure>> {
        let fd = self
            .fd
            .as_ref()
            .expect("operations run only while the file is open")
            .as_fd();
        let len = op.len as usize;
        let call = if flags == 0 {
            "pread"
        } else {
            "preadv2(RWF_DONTCACHE)"
        };
        let got = pread_all(fd, &mut self.scratch[..len], op.off, flags)
            .map_err(|e| self.io_fail(Some(op), call, e))?;
        if got < len {
            return Err(self.fail(
                Some(op),
                FailureKind::Short {
                    call: call.into(),
                    done: got as u64,
                    wanted: op.len,
                },
            ));
        }
        self.compare(Some(op), op.off, &self.scratch[..len])
    }

    fn do_mapread(&mut self, op: Op) -> Result<(), Box<Failure>> {
        let map = Mapping::new(self.fd(), op.off, op.len, self.page, false)
            .map_err(|e| self.io_fail(Some(op), "mmap", e))?;
        let res = self.compare(Some(op), op.off, map.range());
        res.and_then(|_| self.check_eof_page(op, &map))
    }

    /// The tail of the file's last page, past EOF, must read as zeros in a mapping (POSIX).
    fn check_eof_page(&self, op: Op, map: &Mapping) -> Result<(), Box<Failure>> {
        let size = self.model.size();
        let tail = size % self.page;
        if tail == 0 || (op.off + op.len - 1) / self.page != (size - 1) / self.page {
            return Ok(());
        }
        let page_bytes = map.last_page_after(size);
        if let Some(i) = page_bytes.iter().position(|&b| b != 0) {
            return Err(self.fail(
                Some(op),
                FailureKind::EofPage {
                    offset: size + i as u64,
                    byte: page_bytes[i],
                },
            ));
        }
        Ok(())
    }

    fn do_mapwrite(&mut self, op: Op) -> Result<(), Box<Failure>> {
        let fd = self
            .fd
            .as_ref()
            .expect("operations run only while the file is open")
            .as_fd();
        let end = op.off + op.len;
        if end > self.model.size() {
            ftruncate(fd, end).map_err(|e| self.io_fail(Some(op), "ftruncate", e))?;
        }
        let mut map = Mapping::new(fd, op.off, op.len, self.page, true)
            .map_err(|e| self.io_fail(Some(op), "mmap", e))?;
        map.range_mut()
            .copy_from_slice(self.model.write(self.n, op.off, op.len));
        map.sync().map_err(|e| self.io_fail(Some(op), "msync", e))?;
        self.check_eof_page(op, &map)
    }

    /// Closes the file (before an unmount).
    pub fn close(&mut self) -> Result<()> {
        self.closed_at = sys::rt::monotonic_ns();
        self.flush_log()?;
        if let Some(fd) = self.fd.take() {
            crate::base::sys::close(fd).map_err(|e| {
                anyhow::Error::new(crate::base::error::SystemFailure(format!(
                    "close {} failed: {}",
                    self.path.display(),
                    e
                )))
            })?;
        }
        Ok(())
    }

    /// Opens the file again after a remount (or a close) and records the step.
    pub fn reopen(&mut self, step: Step) -> Result<()> {
        self.remember(step);
        if let (Step::Remount(n), Some(rec)) = (step, self.record.as_mut()) {
            // The unmount (which writes everything) ended before this call.
            rec.push(What::Remount(n), self.closed_at, sys::rt::monotonic_ns());
        }
        let fd = open_file(&self.path, self.cfg.direct, false)
            .with_context(|| format!("reopening {}", self.path.display()))?;
        self.fd = Some(fd);
        Ok(())
    }

    /// Reads the whole file and compares it with the model, and checks the size.
    pub fn verify_all(&mut self) -> Result<(), Box<Failure>> {
        self.check_size(None)?;
        let fd = self
            .fd
            .as_ref()
            .expect("operations run only while the file is open")
            .as_fd();
        let size = self.model.size() as usize;
        let got = pread_all(fd, &mut self.scratch[..size], 0, 0)
            .map_err(|e| self.io_fail(None, "pread (full verification)", e))?;
        if got < size {
            return Err(self.fail(
                None,
                FailureKind::Short {
                    call: "pread (full verification)".into(),
                    done: got as u64,
                    wanted: size as u64,
                },
            ));
        }
        self.compare(None, 0, &self.scratch[..size])
    }

    /// Flips the byte at `off` through a second descriptor, behind the exerciser's back (fault
    /// injection, to prove that corruption is found). Recorded in the log so that a replay
    /// does the same.
    pub fn corrupt(&mut self, off: u64) -> Result<()> {
        self.remember(Step::Corrupt(self.n, off));
        corrupt_byte(
            &self.path,
            off,
            self.model.content().get(off as usize).copied(),
        )
    }

    /// Writes buffered log lines out.
    pub fn flush_log(&mut self) -> Result<()> {
        if let Some(l) = self.log.as_mut() {
            l.flush().context("writing the replay log")?;
        }
        Ok(())
    }

    /// Lengths the generator uses.
    pub fn limits(&self) -> Limits {
        self.lim
    }
}

/// Writes the complement of `expected` (or 0xff) at `off` through a fresh descriptor.
pub fn corrupt_byte(path: &Path, off: u64, expected: Option<u8>) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .with_context(|| format!("opening {} a second time", path.display()))?;
    let b = !expected.unwrap_or(0);
    f.write_all_at(&[b], off)
        .with_context(|| format!("corrupting {} at {off:#x}", path.display()))?;
    Ok(())
}

/// RWF_DONTCACHE (Linux 6.14): drop the pages once the I/O is done.
const RWF_DONTCACHE: i32 = 0x80;

fn pwrite_all(fd: BorrowedFd<'_>, mut data: &[u8], mut off: u64, flags: i32) -> Result<(), Errno> {
    while !data.is_empty() {
        let r = match sys::pwrite_flags(fd, data, off, flags) {
            Ok(r) => r,
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        };
        if r == 0 {
            return Err(Errno::EIO);
        }
        data = &data[r..];
        off += r as u64;
    }
    Ok(())
}

/// Reads until `buf` is full or EOF; returns the bytes read.
pub(super) fn pread_all(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    off: u64,
    flags: i32,
) -> Result<usize, Errno> {
    let mut done = 0;
    while done < buf.len() {
        let r = match sys::pread_flags(fd, &mut buf[done..], off + done as u64, flags) {
            Ok(r) => r,
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        };
        if r == 0 {
            break;
        }
        done += r;
    }
    Ok(done)
}

/// A shared mapping of the pages that hold `off..off+len`, unmapped on drop.
struct Mapping {
    map: sys::mmap::Mmap,
    /// Offset of `off` inside the mapping.
    inner: usize,
    len: usize,
    /// File offset of the mapping's start.
    base: u64,
}

impl Mapping {
    fn new(fd: BorrowedFd<'_>, off: u64, len: u64, page: u64, write: bool) -> Result<Self, Errno> {
        let base = off - off % page;
        let inner = (off - base) as usize;
        // Checked: the mapping's length goes to mmap(2), and `len` comes from a log's step.
        let map_len = usize::try_from(len)
            .ok()
            .and_then(|l| l.checked_add(inner))
            .ok_or(Errno::EOVERFLOW)?;
        // A read mapping is populated in one call (the same fault path, page by page in the
        // kernel instead of one trap per page); a write mapping faults as the copy goes, so
        // that every page takes the filesystem's page_mkwrite.
        let access = if write {
            sys::mmap::Access::Write
        } else {
            sys::mmap::Access::Read { populate: true }
        };
        Ok(Self {
            map: sys::mmap::Mmap::file(fd, base, map_len, access)?,
            inner,
            len: map_len - inner,
            base,
        })
    }

    fn range(&self) -> &[u8] {
        &self.map.pages()[self.inner..self.inner + self.len]
    }

    /// The whole last mapped page, including the bytes past the mapped length.
    fn page_mut(&mut self) -> &mut [u8] {
        self.map.pages_mut().expect("made with write = true")
    }

    fn range_mut(&mut self) -> &mut [u8] {
        let (inner, len) = (self.inner, self.len);
        &mut self.map.pages_mut().expect("made with write = true")[inner..inner + len]
    }

    /// Bytes of the mapping's last page from file offset `eof` to the page's end (the kernel
    /// maps whole pages, so these are addressable).
    fn last_page_after(&self, eof: u64) -> &[u8] {
        &self.map.pages()[(eof - self.base) as usize..]
    }

    fn sync(&self) -> Result<(), Errno> {
        self.map.sync()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cfg(seed: u64) -> Config {
        Config {
            max_len: 256 << 10,
            max_op_len: 64 << 10,
            direct: false,
            pollute_eof: true,
            kinds: OpKind::ALL.map(|k| (k, 1)).to_vec(),
            seed,
            record: None,
        }
    }

    #[test]
    fn steps_round_trip_through_text() {
        for s in [
            Step::Op(12, Op::new(OpKind::Read, 5, 9)),
            Step::Remount(40),
            Step::Reopen(41),
            Step::Corrupt(7, 0x123),
        ] {
            assert_eq!(s.to_string().parse::<Step>().unwrap(), s);
        }
    }

    #[test]
    fn runs_clean_on_the_host_filesystem_and_catches_a_flipped_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut ex = Exerciser::create(&path, cfg(42), None).unwrap();
        for _ in 0..3000 {
            if let Err(f) = ex.step() {
                panic!("false alarm:\n{}", f.render());
            }
        }
        assert_eq!(ex.ops_done(), 3000);
        ex.verify_all().unwrap();
        // Make sure there is data, then flip one byte and read it back with a read op.
        ex.apply(Op::new(OpKind::Write, 0, 8192)).unwrap();
        ex.corrupt(1000).unwrap();
        let f = ex.apply(Op::new(OpKind::Read, 512, 4096)).unwrap_err();
        match &f.kind {
            FailureKind::Data { offset, run, .. } => {
                assert_eq!(*offset, 1000);
                assert_eq!(*run, 1);
            }
            k => panic!("unexpected {k:?}"),
        }
        assert_eq!(f.op_number, 3002);
        assert_eq!(f.history.len(), HISTORY);
        assert_eq!(
            f.history.last(),
            Some(&Step::Op(3002, Op::new(OpKind::Read, 512, 4096)))
        );
    }

    #[test]
    fn history_is_in_order_once_the_ring_wraps() {
        let dir = tempfile::tempdir().unwrap();
        let mut ex = Exerciser::create(&dir.path().join("f"), cfg(1), None).unwrap();
        for _ in 0..250 {
            ex.step().unwrap();
        }
        let h = ex.history();
        assert_eq!(h.len(), HISTORY);
        let nums: Vec<u64> = h
            .iter()
            .map(|s| match s {
                Step::Op(n, _) => *n,
                _ => 0,
            })
            .collect();
        assert_eq!(nums, (151..=250).collect::<Vec<_>>());
    }
}
