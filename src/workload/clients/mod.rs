//! `clients`: concurrent client load in the manner of dbench, the second benchmark of the
//! block-reservation study (seed study 2: dbench throughput at 1–64 clients, "4 clients from
//! 144 to 286 MB/s").
//!
//! N clients, each a thread working in its own directory (`clients/clientN`), replay a stream
//! of file operations: a dbench loadfile ([`loadfile`], the format of the `client.txt` the
//! Debian dbench package installs) or the built-in file-server-like [`mix`]. Each operation is
//! done the way dbench's own file backend (`fileio.c`) does it — the same system calls, the
//! same name resolution, the same treatment of expected failures — so that on the same
//! loadfile and client count fsgauge and dbench perform the same operations, kind for kind.
//! Results: MB/s (bytes read and written over wall time, as dbench reports) and, per operation
//! kind, count, mean and max latency (dbench's table) plus percentiles.
//!
//! Each client count is one phase (`clients-4`). A pass ends at the loadfile's end and the next
//! begins at its start, until `--time` runs out or `--loops` passes are done.

pub mod loadfile;
pub mod mix;
pub mod table;

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::errno::Errno;
use serde::{Deserialize, Serialize};

use super::params::CommaList;
use super::rate::{self, Achieved, Pace, Pacer, RateUnit};
use super::{RunContext, Workload};
use crate::base::error::{bad_input, bad_param, SystemFailure};
use crate::base::sys;
use crate::base::units::Overflow;
use crate::measure::{OpDef, OpId, Recorder, Tick};
use crate::results::MetricDef;
use loadfile::{Kind, Op};

/// An operation stream shared by every client.
type Stream = Arc<Vec<Op>>;

/// The block-reservation study's client load (dbench): N clients, each in its own
/// directory, replay a dbench loadfile (--loadfile) or the built-in file-server-like mix;
/// MB/s, and per operation kind count, mean and max latency and percentiles.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, clap::Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Workload")]
pub struct Clients {
    /// Client counts to sweep, e.g. 1,4,8,16,32,64.
    #[arg(long, value_name = "LIST", default_value = "1,4")]
    #[serde(deserialize_with = "CommaList::one_or_many")]
    pub clients: CommaList<u32>,
    /// A dbench loadfile (e.g. /usr/share/dbench/client.txt from the dbench package); without
    /// it, the built-in file-server-like mix.
    #[arg(long, value_name = "FILE")]
    pub loadfile: Option<PathBuf>,
    /// How long each client count runs (a pass in progress stops when it runs out)
    /// [default: 60s, or no limit with --loops].
    #[arg(long, value_name = "DURATION", value_parser = super::params::seconds, default_value = "60s",
          default_value_if("loops", clap::builder::ArgPredicate::IsPresent, None), hide_default_value = true)]
    #[serde(deserialize_with = "crate::base::units::de_opt_seconds")]
    pub time: Option<f64>,
    /// Exactly N passes over the loadfile (or mix) per client.
    #[arg(long, value_name = "N")]
    pub loops: Option<u64>,
    /// Built-in mix: directories per client.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub mix_dirs: u32,
    /// Built-in mix: files per client (4K..128K each).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub mix_files: u32,
    /// Built-in mix: transactions per pass.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub mix_ops: u32,
    /// With --fs: a new filesystem for every client count (each its own run).
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = super::params::on_off, action = clap::ArgAction::Set)]
    pub fresh_fs: bool,
    /// Time-based phases and CPU pinning.
    #[command(flatten)]
    #[serde(flatten)]
    pub control: crate::workload::control::RunControl,
}

impl Default for Clients {
    fn default() -> Self {
        super::params::defaults()
    }
}

const DEFS: [OpDef; 17] = [
    OpDef::primary("NTCreateX"),
    OpDef::primary("Close"),
    OpDef::primary("Rename"),
    OpDef::primary("Unlink"),
    OpDef::primary("Deltree"),
    OpDef::primary("Mkdir"),
    OpDef::primary("Rmdir"),
    OpDef::primary("Qpathinfo"),
    OpDef::primary("Qfileinfo"),
    OpDef::primary("Qfsinfo"),
    OpDef::primary("Sfileinfo"),
    OpDef::primary("Find"),
    OpDef::primary("WriteX"),
    OpDef::primary("ReadX").reading(),
    OpDef::primary("LockX"),
    OpDef::primary("UnlockX"),
    OpDef::primary("Flush"),
];

/// Parsed loadfiles, by path: a sweep checks and runs the same file many times.
fn cached_load(path: &Path) -> Result<Arc<Vec<Op>>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<Vec<Op>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(v) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(path) {
        return Ok(Arc::clone(v));
    }
    let ops = Arc::new(loadfile::load(path)?);
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(path.to_path_buf(), Arc::clone(&ops));
    Ok(ops)
}

/// A failure of the filesystem under test during replay (exit 1).
fn failure(client: usize, op: &Op, what: String) -> anyhow::Error {
    anyhow::Error::new(SystemFailure(format!(
        "client {client}, operation {} (line {}): {what}",
        op.kind.name(),
        op.line
    )))
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap_or_else(|_| CString::from(c"/nonexistent"))
}

const FILE_CREATE: i64 = 2;
const FILE_OVERWRITE: i64 = 4;
const FILE_OVERWRITE_IF: i64 = 5;
const FILE_DIRECTORY_FILE: i64 = 0x1;
/// dbench's file table size per client.
const MAX_FILES: usize = 200;

/// One client's replay state: its name, open handles and buffers.
struct Client<'a> {
    id: usize,
    root: &'a Path,
    name: String,
    handles: Vec<(i64, OwnedFd, PathBuf)>,
    zeros: Vec<u8>,
    rbuf: Vec<u8>,
    ids: [OpId; 17],
    /// Operations that ended otherwise than the stream expected, and the first few of them.
    unexpected: u64,
    notes: Vec<String>,
}

impl<'a> Client<'a> {
    fn new(id: usize, root: &'a Path, rec: &Recorder) -> Self {
        let ids = DEFS.map(|d| rec.op(d.name));
        Self {
            id,
            root,
            name: format!("client{id}"),
            handles: Vec::new(),
            zeros: Vec::new(),
            rbuf: Vec::new(),
            ids,
            unexpected: 0,
            notes: Vec::new(),
        }
    }

    /// The stream's path for this client: under the run directory, `client1` renamed.
    fn path(&self, rel: &str) -> PathBuf {
        let mut s = self.root.as_os_str().to_owned();
        s.push(rel.replace("client1", &self.name));
        PathBuf::from(s)
    }

    fn note(&mut self, op: &Op, what: String) {
        self.unexpected += 1;
        if self.notes.len() < 5 {
            self.notes
                .push(format!("client {} line {}: {what}", self.id, op.line));
        }
    }

    fn handle(&self, op: &Op) -> Result<usize> {
        let h = op.params[0];
        self.handles
            .iter()
            .position(|(x, _, _)| *x == h)
            .ok_or_else(|| {
                failure(
                    self.id,
                    op,
                    format!("handle {h} is not open (its NTCreateX failed or never happened)"),
                )
            })
    }

    fn kind_id(&self, k: Kind) -> OpId {
        let i = Kind::COUNTED
            .iter()
            .position(|c| *c == k)
            .expect("only counted kinds are recorded");
        self.ids[i]
    }

    /// Runs one operation and records it; returns bytes moved.
    fn exec(&mut self, op: &Op, rec: &mut Recorder) -> Result<()> {
        if op.kind == Kind::Sleep {
            std::thread::sleep(Duration::from_micros(op.params[0].max(0) as u64));
            return Ok(());
        }
        let t0 = Instant::now();
        let bytes = self.run(op)?;
        let id = self.kind_id(op.kind);
        rec.record(id, t0, bytes);
        Ok(())
    }

    /// Runs one operation the way dbench's file backend does; returns the bytes it counts.
    fn run(&mut self, op: &Op) -> Result<u64> {
        let path = op.path.as_deref().map(|r| self.path(r)).unwrap_or_default();
        match op.kind {
            Kind::NtCreateX => self.create(op, &path)?,
            Kind::Close => {
                let i = self.handle(op)?;
                let (_, fd, _) = self.handles.swap_remove(i);
                drop(fd);
            }
            Kind::Rename => self.rename(op, &path)?,
            Kind::Unlink => self.remove(op, &path, "unlink", std::fs::remove_file)?,
            Kind::Rmdir => self.remove(op, &path, "rmdir", std::fs::remove_dir)?,
            Kind::Mkdir => {
                resolve_name(&path);
                // The result is ignored, as dbench does.
                let _ = nix::unistd::mkdir(&path, nix::sys::stat::Mode::from_bits_truncate(0o777));
            }
            Kind::Deltree => deltree(&path),
            Kind::Qpathinfo => resolve_name(&path),
            Kind::Qfileinfo => {
                let i = self.handle(op)?;
                let _ = crate::base::sys::fstat(self.handles[i].1.as_fd());
            }
            Kind::Qfsinfo => {
                let _ = nix::sys::statvfs::statvfs(self.root);
            }
            Kind::Sfileinfo => self.set_times(op)?,
            Kind::Find => find(op, &path),
            Kind::WriteX => return self.write(op),
            Kind::ReadX => return self.read(op),
            Kind::LockX | Kind::UnlockX => self.lock(op)?,
            Kind::Flush => {
                let i = self.handle(op)?;
                let _ = nix::unistd::fsync(self.handles[i].1.as_raw_fd());
            }
            Kind::Sleep => {}
        }
        Ok(0)
    }

    /// Rename: both names resolved first; the outcome must be the one the stream expects.
    /// unlink or rmdir (`call`, by `remove`), as dbench's file backend does: the name resolved
    /// first, the outcome checked against the one the loadfile expects.
    fn remove<'p>(
        &mut self,
        op: &Op,
        path: &'p Path,
        call: &str,
        remove: fn(&'p Path) -> std::io::Result<()>,
    ) -> Result<()> {
        resolve_name(path);
        let ok = remove(path);
        self.expect_outcome(op, ok.is_ok(), || {
            format!("{call} {}: {}", path.display(), err_text(&ok))
        })
    }

    fn rename(&mut self, op: &Op, a: &Path) -> Result<()> {
        let b = self.path(op.path2.as_deref().unwrap_or_default());
        resolve_name(a);
        resolve_name(&b);
        let ok = std::fs::rename(a, &b);
        self.expect_outcome(op, ok.is_ok(), || {
            format!("rename {} {}: {}", a.display(), b.display(), err_text(&ok))
        })
    }

    /// Sfileinfo: set the open file's times back a little, as dbench does (errors ignored).
    fn set_times(&self, op: &Op) -> Result<()> {
        let i = self.handle(op)?;
        let (_, fd, name) = &self.handles[i];
        if let Ok(st) = crate::base::sys::fstat(fd.as_fd()) {
            use nix::sys::time::TimeVal;
            let _ = nix::sys::stat::utimes(
                name.as_path(),
                &TimeVal::new(st.st_atime - 10, 0),
                &TimeVal::new(st.st_mtime - 12, 0),
            );
        }
        Ok(())
    }

    /// WriteX: zeros at the stream's offset; a short or failed write is a failure of the
    /// filesystem under test. Returns the bytes written.
    fn write(&mut self, op: &Op) -> Result<u64> {
        let i = self.handle(op)?;
        let (off, size, want) = (op.params[1], op.params[2].max(0) as usize, op.params[3]);
        if self.zeros.len() < size {
            self.zeros.resize(size, 0);
        }
        let fd = self.handles[i].1.as_fd();
        let r = sys::pwrite(fd, &self.zeros[..size], off as u64);
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                return Err(failure(
                    self.id,
                    op,
                    format!(
                        "write {} at offset {off}: {e} ({})",
                        self.handles[i].2.display(),
                        e.desc()
                    ),
                ))
            }
        };
        if r as i64 != want {
            return Err(failure(
                self.id,
                op,
                format!(
                    "wrote {r} bytes to {}, the loadfile expects {want}",
                    self.handles[i].2.display()
                ),
            ));
        }
        Ok(size as u64)
    }

    /// ReadX: a read of a length other than the stream's is noted, not fatal (as in dbench).
    /// Returns the bytes requested.
    fn read(&mut self, op: &Op) -> Result<u64> {
        let i = self.handle(op)?;
        let (off, size, want) = (op.params[1], op.params[2].max(0) as usize, op.params[3]);
        if self.rbuf.len() < size {
            self.rbuf.resize(size, 0);
        }
        let fd = self.handles[i].1.as_fd();
        let r = sys::pread(fd, &mut self.rbuf[..size], off as u64).map_or(-1, |n| n as i64);
        if r != want {
            let name = self.handles[i].2.display().to_string();
            self.note(
                op,
                format!("read {name} at {off}: got {r} bytes, expected {want}"),
            );
        }
        // dbench counts the requested size whatever the read returned.
        Ok(size as u64)
    }

    /// LockX / UnlockX: a blocking write lock (or unlock) of the stream's range (errors
    /// ignored, as in dbench).
    fn lock(&self, op: &Op) -> Result<()> {
        let i = self.handle(op)?;
        let lock = libc::flock {
            l_type: if op.kind == Kind::LockX {
                libc::F_WRLCK as i16
            } else {
                libc::F_UNLCK as i16
            },
            l_whence: libc::SEEK_SET as i16,
            l_start: (op.params[1] as u32) as libc::off_t,
            l_len: op.params[2] as libc::off_t,
            l_pid: 0,
        };
        let _ = nix::fcntl::fcntl(
            self.handles[i].1.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETLKW(&lock),
        );
        Ok(())
    }

    fn expect_outcome(&mut self, op: &Op, ok: bool, what: impl FnOnce() -> String) -> Result<()> {
        if ok != op.expect_ok {
            let expected = if op.expect_ok { "success" } else { "a failure" };
            return Err(failure(
                self.id,
                op,
                format!("{} (the loadfile expects {expected})", what()),
            ));
        }
        Ok(())
    }

    /// NTCreateX: open or create as dbench's file backend maps the SMB dispositions.
    fn create(&mut self, op: &Op, path: &Path) -> Result<()> {
        let (options, disposition, fnum) = (op.params[0], op.params[1], op.params[2]);
        resolve_name(path);
        let mut flags = libc::O_RDWR | libc::O_CLOEXEC;
        if disposition == FILE_CREATE {
            flags |= libc::O_CREAT;
        }
        if disposition == FILE_OVERWRITE || disposition == FILE_OVERWRITE_IF {
            flags |= libc::O_CREAT | libc::O_TRUNC;
        }
        let c = cstr(path);
        if options & FILE_DIRECTORY_FILE != 0 {
            // An existing directory is fine.
            let _ = nix::unistd::mkdir(path, nix::sys::stat::Mode::from_bits_truncate(0o700));
            flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        }
        let mut fd = sys::open(&c, flags, 0o600);
        if matches!(fd, Err(Errno::EISDIR)) {
            fd = sys::open(
                &c,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                0o600,
            );
        }
        let fd = match fd {
            Ok(fd) => fd,
            Err(e) => {
                if op.expect_ok {
                    self.note(op, format!("open {} failed: {e}", path.display()));
                }
                return Ok(());
            }
        };
        if !op.expect_ok {
            self.note(
                op,
                format!(
                    "open {} succeeded, the loadfile expects a failure",
                    path.display()
                ),
            );
            return Ok(());
        }
        if self.handles.len() >= MAX_FILES {
            return Err(failure(self.id, op, format!(
                "more than {MAX_FILES} files open at once (dbench's file table is full); the loadfile does not close its files"
            )));
        }
        self.handles.push((fnum, fd, path.to_path_buf()));
        Ok(())
    }
}

/// Find: resolve the name and, for a wildcard pattern, list its directory as far as the
/// stream's entry count (errors ignored, as in dbench).
fn find(op: &Op, path: &Path) {
    resolve_name(path);
    let s = op.path.as_deref().unwrap_or_default();
    if s.contains(['<', '>', '*', '?', '"']) {
        if let Some(parent) = path.parent() {
            if let Ok(rd) = std::fs::read_dir(parent) {
                let max = op.params[1].max(0) as usize;
                // dbench reads up to maxcnt entries, `.` and `..` included.
                let _ = rd.take(max.saturating_sub(2)).count();
            }
        }
    }
}

fn err_text(r: &std::io::Result<()>) -> String {
    match r {
        Ok(()) => "succeeded".into(),
        Err(e) => e.to_string(),
    }
}

/// dbench's simulation of an SMB server's name resolution: stat the name, and when it does
/// not exist, scan its directory for a case-insensitive match.
fn resolve_name(path: &Path) {
    if std::fs::metadata(path).is_ok() {
        return;
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let want = name.to_string_lossy().to_lowercase();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().to_lowercase() == want {
                break;
            }
        }
    }
}

/// Removes everything below `path` (errors ignored, as dbench's Deltree does).
fn deltree(path: &Path) {
    let Ok(rd) = std::fs::read_dir(path) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        match std::fs::symlink_metadata(&p) {
            Ok(md) if md.is_dir() => {
                deltree(&p);
                let _ = std::fs::remove_dir(&p);
            }
            Ok(_) => {
                let _ = std::fs::remove_file(&p);
            }
            Err(_) => {}
        }
    }
}

/// Replays `ops` as client `id` until `loops` passes are done or `deadline` passes; returns
/// completed passes.
fn replay(
    client: &mut Client,
    ops: &[Op],
    rec: &mut Recorder,
    loops: Option<u64>,
    deadline: Option<Instant>,
) -> Result<u64> {
    passes(client, ops, rec, loops, |client, op, rec| {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(false);
        }
        client.exec(op, rec)?;
        Ok(true)
    })
}

/// The passes of [`replay`] and [`replay_paced`]: `step` runs each operation of `ops` in turn
/// (false: the client is done) until `loops` passes are done or the phase is to end (checked
/// every 256 operations; a recorder's error is returned). Returns completed passes.
fn passes(
    client: &mut Client,
    ops: &[Op],
    rec: &mut Recorder,
    loops: Option<u64>,
    mut step: impl FnMut(&mut Client, &Op, &mut Recorder) -> Result<bool>,
) -> Result<u64> {
    let mut passes = 0u64;
    'outer: loop {
        if loops.is_some_and(|l| passes >= l) {
            break;
        }
        for (i, op) in ops.iter().enumerate() {
            if i & 255 == 0 && rec.should_stop() {
                rec.check()?;
                break 'outer;
            }
            if !step(client, op, rec)? {
                break 'outer;
            }
        }
        passes += 1;
    }
    // Handles left open at the end are closed as the process exit would close them.
    client.handles.clear();
    Ok(passes)
}

/// [`replay`] at `pace` (`--rate-iops`, `--rate`): each operation is issued at its due time on
/// the client's open-loop schedule (at once when the client is behind) and recorded twice,
/// from its submission and from its due time. A byte rate counts the bytes of reads and
/// writes; other operations are due with the next one that moves data. Returns completed
/// passes and what the client achieved.
fn replay_paced(
    client: &mut Client,
    ops: &[Op],
    rec: &mut Recorder,
    loops: Option<u64>,
    deadline: Option<Instant>,
    pace: Pace,
) -> Result<(u64, Achieved)> {
    let clock = rec.clock();
    let mut pacer = Pacer::start(pace, clock);
    let deadline = deadline.map(|d| {
        let left = d.saturating_duration_since(Instant::now());
        Tick(clock.now().0.saturating_add(clock.ticks(left)))
    });
    let (mut last, mut issued) = (pacer.t0(), 0u64);
    let passes = passes(client, ops, rec, loops, |client, op, rec| {
        if op.kind == Kind::Sleep {
            client.exec(op, rec)?;
            return Ok(true);
        }
        let units = match (pace.unit, op.kind) {
            (RateUnit::Requests, _) => 1,
            (RateUnit::Bytes, Kind::ReadX | Kind::WriteX) => op.params[2].max(0) as u64,
            (RateUnit::Bytes, _) => 0,
        };
        let due = pacer.next(units);
        // A client behind its schedule stops at the deadline too (`last` is about now).
        if deadline.is_some_and(|d| due >= d || last >= d) {
            return Ok(false);
        }
        if !pacer.wait(due, || rec.should_stop()) {
            rec.check()?;
            return Ok(false);
        }
        let s = clock.now();
        let bytes = client.run(op)?;
        let e = clock.now();
        let id = client.kind_id(op.kind);
        rec.span(id, s, e, bytes);
        rec.scheduled(id, clock.ns(due, e), e);
        last = e;
        issued += units;
        Ok(true)
    })?;
    let achieved = Achieved {
        worker: rec.worker(),
        units: issued,
        seconds: clock.ns(pacer.t0(), last) as f64 / 1e9,
    };
    Ok((passes, achieved))
}

impl Clients {
    fn shape(&self) -> mix::MixShape {
        mix::MixShape {
            dirs: self.mix_dirs,
            files: self.mix_files,
            ops: self.mix_ops,
        }
    }

    fn program(&self, seed: u64) -> Result<(Stream, Stream)> {
        match &self.loadfile {
            Some(p) => Ok((Arc::new(Vec::new()), cached_load(p)?)),
            None => {
                let (s, b) = mix::program(seed, self.shape());
                Ok((Arc::new(s), Arc::new(b)))
            }
        }
    }

    fn run_count(&self, ctx: &mut RunContext, n: u32) -> Result<()> {
        let (setup, body) = self.program(ctx.seed())?;
        let root = ctx.root().to_path_buf();
        // Client numbers run across MPI ranks that share one directory (`--shared-dir`).
        let off = ctx.worker_base(n as u64) as usize;
        if !setup.is_empty() {
            ctx.phase(&format!("setup-c{n}"), &DEFS, None, n as usize, |i, rec| {
                let mut c = Client::new(off + i, &root, rec);
                replay(&mut c, &setup, rec, Some(1), None).map(drop)
            })?;
            ctx.make_cold()?;
        }
        let notes: Mutex<(u64, Vec<String>, u64)> = Mutex::new((0, Vec::new(), 0));
        let ramp = self.control.ramp.unwrap_or(0.0);
        let (time, loops) = (self.time.map(|t| t + ramp), self.loops);
        let pace = self.control.rate().pace(n as usize);
        let achieved = Mutex::new(Vec::new());
        let phase = ctx.phase(
            &format!("clients-{n}"),
            &DEFS,
            None,
            n as usize,
            |i, rec| {
                let _pinned = self.control.pin(i)?;
                let deadline = time
                    .map(crate::base::units::deadline_after)
                    .transpose()
                    .map_err(|e| crate::base::error::bad_param("time", format!("--time: {e}")))?;
                let mut c = Client::new(off + i, &root, rec);
                let passes = match pace {
                    Some(pace) => {
                        let (passes, a) = replay_paced(&mut c, &body, rec, loops, deadline, pace)?;
                        achieved.lock().unwrap_or_else(|p| p.into_inner()).push(a);
                        passes
                    }
                    None => replay(&mut c, &body, rec, loops, deadline)?,
                };
                let mut g = notes.lock().unwrap_or_else(|p| p.into_inner());
                g.0 += c.unexpected;
                g.2 += passes;
                let room = 5usize.saturating_sub(g.1.len());
                g.1.extend(c.notes.into_iter().take(room));
                Ok(())
            },
        )?;
        let (unexpected, first, passes) = notes.into_inner().unwrap_or_else(|p| p.into_inner());
        phase.extra.insert("clients".into(), n as f64);
        phase
            .extra
            .insert("mb_per_s".into(), phase.bytes_per_s / 1e6);
        phase.extra.insert("passes".into(), passes as f64);
        phase
            .extra
            .insert("unexpected_status".into(), unexpected as f64);
        if let Some(pace) = pace {
            let done = achieved.into_inner().unwrap_or_else(|p| p.into_inner());
            let (outcome, warning) = rate::outcome(pace, done, &format!("clients-{n}"));
            phase.rate = Some(outcome);
            if let Some(w) = warning {
                ctx.warn(w);
            }
        }
        if unexpected > 0 {
            ctx.warn(format!(
                "clients-{n}: {unexpected} operation(s) ended otherwise than the loadfile expects (as dbench, the replay went on); first: {}",
                first.join("; ")
            ));
        }
        // dbench's cleanup: every client's directory goes (not measured).
        let dir = root.join("clients");
        // In a directory shared by MPI ranks, rank 0 removes it once every rank is done.
        let remove = match ctx.shared_rank() {
            Some(rank) => {
                ctx.barrier();
                rank == 0
            }
            None => true,
        };
        if remove && dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        Ok(())
    }
}

/// The figures this workload records in a phase's `extra`.
const METRICS: &[MetricDef] = &[
    MetricDef::count("clients", "clients", ""),
    MetricDef::rate("mb_per_s", "client throughput", "MB/s"),
    MetricDef::count("passes", "loadfile passes", ""),
    MetricDef::lower("unexpected_status", "unexpected status", ""),
];

impl Workload for Clients {
    fn metrics(&self) -> &'static [MetricDef] {
        METRICS
    }

    fn kind(&self) -> &'static str {
        "clients"
    }

    fn params(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("plain struct serializes")
    }

    fn sweep_axes(&self) -> &'static [&'static str] {
        &["clients"]
    }

    fn line_axis(&self) -> Option<&'static str> {
        Some("clients")
    }

    fn op_kinds(&self) -> Vec<OpDef> {
        DEFS.to_vec()
    }

    fn fresh_per_cell(&self) -> bool {
        self.fresh_fs
    }

    fn validate(&self) -> Result<()> {
        if self.clients.is_empty() {
            return Err(bad_param("clients", "--clients needs at least one count"));
        }
        if let Some(&c) = self.clients.iter().find(|&&c| c == 0 || c > 4096) {
            return Err(bad_param(
                "clients",
                format!("--clients {c}: use 1 to 4096 clients"),
            ));
        }
        self.control.validate_load(self.time)?;
        if self.control.time_based && self.loops.is_some() {
            return Err(bad_input(
                "--time-based runs every phase for --time; leave out --loops",
            ));
        }
        if self.time.is_none() && self.loops.is_none() {
            return Err(bad_param(
                "time",
                "give --time or --loops (or both), or the run would never end",
            ));
        }
        if let Some(t) = self.time {
            if t.is_nan() || t <= 0.0 {
                return Err(bad_param("time", "--time must be more than 0s"));
            }
        }
        if self.loops == Some(0) {
            return Err(bad_param("loops", "--loops must be 1 or more"));
        }
        if let Some(p) = &self.loadfile {
            cached_load(p)?;
        } else if self.mix_files == 0 || self.mix_ops == 0 || self.mix_dirs == 0 {
            let field = match (self.mix_dirs, self.mix_files) {
                (0, _) => "mix_dirs",
                (_, 0) => "mix_files",
                _ => "mix_ops",
            };
            return Err(bad_param(
                field,
                "--mix-dirs, --mix-files and --mix-ops must be 1 or more",
            ));
        }
        Ok(())
    }

    fn space_needed(&self) -> Result<u64, Overflow> {
        if self.loadfile.is_some() {
            return Ok(0);
        }
        let max = self.clients.iter().copied().max().unwrap_or(1) as u64;
        // Sizes depend on the seed; bound them by the largest a file can be. Every factor is
        // at most 32 bits, so the product fits; checked all the same.
        (self.mix_files as u64 * (128 << 10) + (1 << 20))
            .checked_mul(max)
            .ok_or_else(Overflow::of(
                "clients",
                "space estimate",
                format!("--clients {max} --mix-files {}", self.mix_files),
                "--clients or --mix-files",
            ))
    }

    fn memory_needed(&self) -> Result<u64, Overflow> {
        let max = self.clients.iter().copied().max().unwrap_or(1) as u64;
        let over = Overflow::of(
            "clients",
            "memory estimate",
            format!("--clients {max} --mix-ops {}", self.mix_ops),
            "--clients, --mix-ops or the loadfile",
        );
        let stream = match &self.loadfile {
            Some(p) => std::fs::metadata(p)
                .map_or(Some(0), |m| m.len().checked_mul(3))
                .ok_or_else(&over)?,
            None => self.mix_ops as u64 * 2048,
        };
        max.checked_mul(256 << 10)
            .and_then(|m| m.checked_add(stream))
            .ok_or_else(&over)
    }

    fn run(&self, ctx: &mut RunContext) -> Result<()> {
        // --time is how long the load runs: a ramp comes on top of it.
        ctx.set_series(self.control.series_spec(None)?);
        for &n in &self.clients {
            self.run_count(ctx, n)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_validation() {
        let c = Clients::default();
        assert!(c.validate().is_ok());
        let e = Clients {
            time: None,
            loops: None,
            ..Clients::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("--loops"), "{e}");
        assert_eq!(
            crate::workload::registry::sweep::cells(&Clients {
                clients: vec![1, 4, 8].into(),
                ..Clients::default()
            })
            .unwrap()
            .len(),
            3
        );
        assert_eq!(DEFS.len(), Kind::COUNTED.len());
        for (d, k) in DEFS.iter().zip(Kind::COUNTED) {
            assert_eq!(d.name, k.name());
        }
    }
}
