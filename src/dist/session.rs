//! The MPI session of one rank: the phase protocol (start barrier, stonewall and failure
//! notices, end agreement), the run's directories, and the final gather to rank 0.
//!
//! All MPI calls are made from the thread that started the session (MPI_THREAD_FUNNELED): the
//! workload's workers always run on threads of their own while this thread polls for notices
//! from other ranks, so the workers' hot loops only ever read the phase's stop flag.
//!
//! A notice is one byte sent point to point (`TAG_STOP`): "stop at the stonewall" or "a rank
//! failed". Each rank sends at most one per phase; at the phase's end the ranks exchange how
//! many they sent (an all-gather, which also ends the phase on every rank together), and each
//! rank receives the rest of those addressed to it, so no notice leaks into the next phase.
//!
//! Without mpirun the session (kept only for `--stonewall`) is a single rank without MPI: every
//! collective is a no-op.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::merge::{merge_phases, merge_warnings, RankReport};
use super::{launched_by_mpirun, neighbour, Coordinator, DirMode, DistOptions, DistRoot, Work};
use crate::base::error::{bad_input, exit_code, Interrupted, SystemFailure};
use crate::measure::{PhaseMeter, Recorder};
use crate::results::{MetricDef, MpiInfo, PhaseResult, RankHost};
use anyhow::Error;

const TAG_STOP: i32 = 0x5701;
const TAG_REPORT: i32 = 0x5702;
const NOTICE_WALL: u8 = 1;
const NOTICE_FAILED: u8 = 2;

const STATUS_OK: u64 = 0;
const STATUS_FAILED: u64 = 1;
const STATUS_STOPPED: u64 = 2;

/// The MPI library's version string (first line).
pub fn library_version() -> String {
    mpi::environment::library_version()
        .ok()
        .and_then(|s| {
            s.lines().next().map(|l| {
                l.trim_matches(|c: char| c == '\0' || c.is_whitespace())
                    .to_string()
            })
        })
        .unwrap_or_else(|| "unknown MPI library".into())
}

/// A phase on a rank whose error was agreed by every rank; rank 0 reports it.
#[derive(Debug, thiserror::Error)]
#[error("rank {rank} on {host}")]
pub struct RankFailure {
    pub rank: u32,
    pub host: String,
}

/// One rank of a run.
pub struct Session {
    world: Option<SimpleCommunicator>,
    /// Keeps MPI initialized; MPI_Finalize runs when the session ends.
    _universe: Option<mpi::environment::Universe>,
    rank: u32,
    size: u32,
    host: String,
    pid: u32,
    opts: DistOptions,
    /// Rank 0's process id: names the run's directory the same on every rank.
    job: u64,
    walled: RefCell<Vec<String>>,
    agreed_failure: Cell<bool>,
    library: String,
}

impl Session {
    /// Starts this rank's session: MPI when launched by mpirun; a single local rank when not but
    /// `opts` need the session (a stonewall); nothing otherwise. MPI ends (MPI_Finalize) when
    /// the last handle of the session is dropped.
    pub fn start(opts: DistOptions) -> Result<Option<Rc<Session>>> {
        let host = crate::results::HostInfo::current().hostname;
        let pid = std::process::id();
        let s = if launched_by_mpirun() {
            let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            else {
                anyhow::bail!("MPI was initialized already");
            };
            let world = universe.world();
            let (rank, size) = (world.rank() as u32, world.size() as u32);
            let mut job = [pid as u64];
            world.process_at_rank(0).broadcast_into(&mut job[..]);
            let host = mpi::environment::processor_name().unwrap_or(host);
            Session {
                world: Some(world),
                _universe: Some(universe),
                rank,
                size,
                host,
                pid,
                opts,
                job: job[0],
                walled: RefCell::new(Vec::new()),
                agreed_failure: Cell::new(false),
                library: library_version(),
            }
        } else if opts.stonewall.is_some() {
            Session {
                world: None,
                _universe: None,
                rank: 0,
                size: 1,
                host,
                pid,
                opts,
                job: pid as u64,
                walled: RefCell::new(Vec::new()),
                agreed_failure: Cell::new(false),
                library: "none (one rank, no mpirun)".into(),
            }
        } else {
            return Ok(None);
        };
        Ok(Some(Rc::new(s)))
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn options(&self) -> DistOptions {
        self.opts
    }

    /// True when the last error came out of a phase or step every rank agreed on (so every
    /// rank ends in order and rank 0 reports it); false means this rank failed alone.
    pub fn failure_agreed(&self) -> bool {
        self.agreed_failure.get()
    }

    /// Ends the whole job at once (MPI_Abort): for a failure this rank alone saw, which would
    /// otherwise leave the other ranks waiting.
    pub fn abort(&self, err: &anyhow::Error) -> ! {
        eprintln!(
            "fsgauge: error: rank {} on {}: {err:#}; aborting every rank",
            self.rank, self.host
        );
        let code = exit_code(err) as i32;
        match &self.world {
            Some(w) => w.abort(code),
            None => std::process::exit(code),
        }
    }

    pub fn barrier(&self) {
        if let Some(w) = &self.world {
            w.barrier();
        }
    }

    /// Rank 0's value of `v`, on every rank.
    pub fn broadcast_u64(&self, v: u64) -> u64 {
        let mut buf = [v];
        if let Some(w) = &self.world {
            w.process_at_rank(0).broadcast_into(&mut buf[..]);
        }
        buf[0]
    }

    fn broadcast_text(&self, from: u32, text: String) -> String {
        let Some(w) = &self.world else { return text };
        let root = w.process_at_rank(from as i32);
        let mut len = [text.len() as u64];
        root.broadcast_into(&mut len[..]);
        let mut bytes = if self.rank == from {
            text.into_bytes()
        } else {
            vec![0u8; len[0] as usize]
        };
        root.broadcast_into(&mut bytes[..]);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn all_gather(&self, mine: [u64; 4]) -> Vec<[u64; 4]> {
        let Some(w) = &self.world else {
            return vec![mine];
        };
        let mut all = vec![0u64; 4 * self.size as usize];
        w.all_gather_into(&mine[..], &mut all[..]);
        all.chunks_exact(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect()
    }

    /// As [`Session::all_gather`], but waiting without spinning a core: a rank done early must
    /// not take CPU from ranks of the same host that are still in the phase (MPI libraries
    /// busy-poll in blocking calls). Used at a phase's end, after its clock stopped.
    fn all_gather_idle(&self, mine: [u64; 4]) -> Vec<[u64; 4]> {
        let Some(w) = &self.world else {
            return vec![mine];
        };
        let mut all = vec![0u64; 4 * self.size as usize];
        mpi::request::scope(|sc| {
            let mut req = w.immediate_all_gather_into(sc, &mine[..], &mut all[..]);
            let mut pause = Duration::from_micros(20);
            loop {
                match req.test() {
                    Ok(_) => break,
                    Err(pending) => {
                        req = pending;
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(Duration::from_millis(1));
                    }
                }
            }
        });
        all.chunks_exact(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect()
    }

    /// Every rank learns whether any rank failed a step; the first failing rank's error becomes
    /// every rank's error (its rank and host named).
    pub fn agree<T>(&self, r: Result<T>) -> Result<T> {
        let (status, code) = match &r {
            Ok(_) => (STATUS_OK, 0),
            Err(e) => (STATUS_FAILED, exit_code(e) as u64),
        };
        let all = self.all_gather([status, code, 0, 0]);
        self.settle(r, &all)
    }

    /// The outcome of a step given every rank's `[status, exit code, ..]`.
    fn settle<T>(&self, r: Result<T>, all: &[[u64; 4]]) -> Result<T> {
        let Some(bad) = all.iter().position(|s| s[0] == STATUS_FAILED) else {
            if all.iter().any(|s| s[0] != STATUS_OK) {
                // Stopped by a failure no rank owns: cannot happen, but must not pass as success.
                self.agreed_failure.set(true);
                return Err(anyhow::anyhow!(
                    "a rank stopped without an error of its own"
                ));
            }
            return r;
        };
        let text = match (&r, self.rank == bad as u32) {
            (Err(e), true) => format!("{e:#}"),
            _ => String::new(),
        };
        let text = self.broadcast_text(bad as u32, text);
        let hosts = self.broadcast_text(bad as u32, self.host.clone());
        self.agreed_failure.set(true);
        let code = all[bad][1] as u8;
        let inner = match code {
            1 => anyhow::Error::new(SystemFailure(text)),
            c @ 129..=159 => anyhow::Error::new(Interrupted(i32::from(c) - 128)).context(text),
            _ => bad_input(text),
        };
        Err(inner.context(RankFailure {
            rank: bad as u32,
            host: hosts,
        }))
    }

    fn notify_all(&self, what: u8) {
        if let Some(w) = &self.world {
            for r in 0..self.size {
                if r != self.rank {
                    w.process_at_rank(r as i32).send_with_tag(&what, TAG_STOP);
                }
            }
        }
    }

    /// Receives the notices waiting now and applies them to the running phase.
    fn take_notices(&self, meter: &PhaseMeter, flags: &mut Flags) {
        let Some(w) = &self.world else { return };
        while let Some(st) = w.any_process().immediate_probe_with_tag(TAG_STOP) {
            let (what, _) = w
                .process_at_rank(st.source_rank())
                .receive_with_tag::<u8>(TAG_STOP);
            flags.received += 1;
            if what == NOTICE_WALL {
                meter.stonewall();
            } else {
                flags.remote_failure = true;
                meter.stop_all();
            }
        }
    }

    /// Receives `n` more notices of a phase that has ended (they change nothing now).
    fn drain_notices(&self, n: usize) {
        let Some(w) = &self.world else { return };
        for _ in 0..n {
            let _ = w.any_process().receive_with_tag::<u8>(TAG_STOP);
        }
    }

    /// Runs one measured phase on this rank, together with every other rank.
    pub fn phase<F>(
        &self,
        name: &str,
        start: impl FnOnce() -> PhaseMeter,
        workers: usize,
        work: F,
    ) -> Result<PhaseResult>
    where
        F: Fn(usize, &mut Recorder) -> Result<()> + Sync,
    {
        self.barrier();
        let meter = start();
        // --stonewall is bounded (units::MAX_DURATION), so its deadline is representable;
        // were it not, there would be no stonewall rather than a panic.
        let deadline = self
            .opts
            .stonewall
            .and_then(crate::base::units::deadline_in);
        let mut flags = Flags::default();
        let (recorders, failure) = self.run_workers(&meter, workers, &work, deadline, &mut flags);
        let walled_here = meter.stonewalled();
        let mut result = meter.finish(recorders);

        let status = match &failure {
            None => STATUS_OK,
            Some(_) if flags.remote_failure => STATUS_STOPPED,
            Some(_) => STATUS_FAILED,
        };
        let code = failure.as_ref().map_or(0, |e| exit_code(e) as u64);
        // Every step exchanges [status, exit code, ..]; a phase adds [notice sent, walled].
        let all = self.all_gather_idle([status, code, flags.sent as u64, walled_here as u64]);
        let sent_to_me = all.iter().filter(|s| s[2] == 1).count() - flags.sent as usize;
        let missing = sent_to_me.saturating_sub(flags.received);
        self.drain_notices(missing);
        let outcome = match failure {
            Some(e) => Err(e),
            None => Ok(()),
        };
        self.settle(outcome, &all)?;
        if all.iter().any(|s| s[3] == 1) {
            result.stonewall_s = self.opts.stonewall.map(|d| d.as_secs_f64());
        }
        if walled_here {
            self.walled.borrow_mut().push(name.to_string());
        }
        Ok(result)
    }

    /// The workers on threads of their own ([`crate::measure::run_workers`]); this thread
    /// polls for notices and the stonewall. Returns the recorders, none when the phase failed
    /// here (its result is not kept then: every rank ends the step with the failure).
    fn run_workers<F>(
        &self,
        meter: &PhaseMeter,
        n: usize,
        work: &F,
        deadline: Option<Instant>,
        flags: &mut Flags,
    ) -> (Vec<Recorder>, Option<anyhow::Error>)
    where
        F: Fn(usize, &mut Recorder) -> Result<()> + Sync,
    {
        let n = n.max(1);
        let failed = AtomicBool::new(false);
        // Each worker says when it is done, so the phase's clock stops at once, not at the
        // next poll.
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        // A stonewall needs a prompt check; without one only failures are waited for.
        let every = if deadline.is_some() {
            Duration::from_millis(2)
        } else {
            Duration::from_millis(20)
        };
        let joined = std::thread::scope(|s| {
            let failed = &failed;
            // The channel closes when the workers are all gone (a panic ends a worker without
            // a word): the sender lives as long as they do.
            let workers = s.spawn(move || {
                crate::measure::run_workers(meter, n, |i, r: &mut Recorder| {
                    let out = work(i, r);
                    if out.is_err() {
                        failed.store(true, Ordering::Release);
                    }
                    let _ = done_tx.send(());
                    out
                })
            });
            let mut finished = 0;
            while finished < n {
                match done_rx.recv_timeout(every) {
                    Ok(()) => finished += 1,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                }
                self.take_notices(meter, flags);
                if !flags.sent {
                    if failed.load(Ordering::Acquire) {
                        self.notify_all(NOTICE_FAILED);
                        flags.sent = true;
                    } else if !meter.stonewalled() && deadline.is_some_and(|d| Instant::now() >= d)
                    {
                        meter.stonewall();
                        self.notify_all(NOTICE_WALL);
                        flags.sent = true;
                    }
                }
            }
            workers.join()
        });
        match joined {
            Ok(Ok(recorders)) => (recorders, None),
            Ok(Err(e)) => (Vec::new(), Some(e)),
            // Only a worker run on the workers' own thread (a single worker) panics through.
            Err(_) => (
                Vec::new(),
                Some(anyhow::anyhow!("{n} of {n} workers panicked")),
            ),
        }
    }

    /// Makes the run's directory below `parent`: `fsgauge-KIND-JOB-REP`, and in it `rank.<r>`
    /// for each rank under `--unique-dir`.
    pub fn make_root(&self, parent: &Path, kind: &str, rep: u32) -> Result<DistRoot> {
        let base = parent.join(format!("fsgauge-{kind}-{}-{rep}", self.job));
        let made = if self.rank == 0 {
            std::fs::create_dir(&base)
                .with_context(|| format!("creating workload directory {}", base.display()))
        } else {
            Ok(())
        };
        self.agree(made)?;
        let root = match self.opts.dir_mode {
            DirMode::Shared => base.clone(),
            DirMode::Unique => {
                let own = rank_dir(&base, self.rank);
                let made = std::fs::create_dir(&own)
                    .with_context(|| format!("creating rank directory {}", own.display()));
                self.agree(made)?;
                own
            }
        };
        Ok(DistRoot {
            root,
            base,
            released: false,
        })
    }

    /// The first worker number of this rank in names shared by all ranks (`--shared-dir`:
    /// rank × workers per rank; 0 in a directory of its own).
    pub fn worker_base(&self, per_rank: u64) -> u64 {
        match self.opts.dir_mode {
            DirMode::Shared => self.rank as u64 * per_rank,
            DirMode::Unique => 0,
        }
    }

    /// Where the read and stat phases find their files: this rank's own root and worker
    /// numbers, or under `--read-neighbour` those of rank r+1.
    pub fn read_source(&self, own_root: &Path, per_rank: u64) -> (PathBuf, u64) {
        if !self.opts.read_neighbour || self.size < 2 {
            return (own_root.to_path_buf(), self.worker_base(per_rank));
        }
        let n = neighbour(self.rank, self.size);
        match self.opts.dir_mode {
            DirMode::Shared => (own_root.to_path_buf(), n as u64 * per_rank),
            DirMode::Unique => match own_root.parent() {
                Some(base) => (rank_dir(base, n), 0),
                None => (own_root.to_path_buf(), 0),
            },
        }
    }

    /// Sends every rank's phases to rank 0 and merges them there (the workload's `extra`
    /// figures as `metrics` declare). Rank 0 gets the merged
    /// phases, warnings and the run's MPI record; the other ranks get their own back.
    pub fn gather_run(
        &self,
        phases: Vec<PhaseResult>,
        warnings: Vec<String>,
        metrics: &[MetricDef],
    ) -> Result<(Vec<PhaseResult>, Vec<String>, Option<MpiInfo>)> {
        let report = RankReport {
            rank: self.rank,
            host: self.host.clone(),
            pid: self.pid,
            phases,
            walled: self.walled.borrow_mut().drain(..).collect(),
            warnings,
        };
        let mut reports = Vec::with_capacity(self.size as usize);
        match &self.world {
            Some(w) if self.rank != 0 => {
                let bytes =
                    serde_json::to_vec(&report).context("serializing this rank's phases")?;
                w.process_at_rank(0).send_with_tag(&bytes[..], TAG_REPORT);
                return Ok((report.phases, report.warnings, None));
            }
            Some(w) => {
                reports.push(report);
                for r in 1..self.size {
                    let (bytes, _) = w
                        .process_at_rank(r as i32)
                        .receive_vec_with_tag::<u8>(TAG_REPORT);
                    let rep: RankReport = serde_json::from_slice(&bytes)
                        .with_context(|| format!("reading the phases rank {r} sent"))?;
                    reports.push(rep);
                }
            }
            None => reports.push(report),
        }
        let phases = merge_phases(&reports, metrics)?;
        let warnings = merge_warnings(&reports);
        let info = MpiInfo {
            ranks: self.size,
            dir_mode: self.opts.dir_mode.name().into(),
            stonewall_s: self.opts.stonewall.map(|d| d.as_secs_f64()),
            read_neighbour: self.opts.read_neighbour,
            library: self.library.clone(),
            rank_hosts: reports
                .iter()
                .map(|r| RankHost {
                    rank: r.rank,
                    host: r.host.clone(),
                    pid: r.pid,
                })
                .collect(),
        };
        Ok((phases, warnings, Some(info)))
    }
}

#[derive(Debug, Default)]
struct Flags {
    /// This rank sent its one notice of the phase.
    sent: bool,
    /// Notices received in the phase.
    received: usize,
    /// A notice said another rank failed.
    remote_failure: bool,
}

fn rank_dir(base: &Path, rank: u32) -> PathBuf {
    base.join(format!("rank.{rank}"))
}

impl Coordinator for Session {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn options(&self) -> DistOptions {
        self.opts
    }

    fn phase(
        &self,
        name: &str,
        start: &mut dyn FnMut() -> PhaseMeter,
        workers: usize,
        work: Work<'_>,
    ) -> Result<PhaseResult> {
        Session::phase(self, name, start, workers, work).with_context(|| format!("phase {name}"))
    }

    fn barrier(&self) {
        Session::barrier(self)
    }

    fn agree(&self, r: Result<()>) -> Result<()> {
        Session::agree(self, r)
    }

    fn broadcast_u64(&self, v: u64) -> u64 {
        Session::broadcast_u64(self, v)
    }

    fn failure_agreed(&self) -> bool {
        self.agreed_failure.get()
    }

    fn abort(&self, err: &Error) -> ! {
        Session::abort(self, err)
    }

    fn make_root(&self, parent: &Path, kind: &str, rep: u32) -> Result<Option<DistRoot>> {
        Session::make_root(self, parent, kind, rep).map(Some)
    }

    /// Removes this rank's directory, waits for every rank, then rank 0 removes the rest.
    fn release_root(&self, root: DistRoot) {
        let (own, base) = root.take();
        if self.opts.dir_mode == DirMode::Unique {
            let _ = std::fs::remove_dir_all(&own);
        }
        self.barrier();
        if self.rank == 0 {
            let _ = std::fs::remove_dir_all(&base);
        }
    }

    fn worker_base(&self, per_rank: u64) -> u64 {
        Session::worker_base(self, per_rank)
    }

    fn read_source(&self, own_root: &Path, per_rank: u64) -> (PathBuf, u64) {
        Session::read_source(self, own_root, per_rank)
    }

    fn gather(
        &self,
        phases: Vec<PhaseResult>,
        warnings: Vec<String>,
        metrics: &[MetricDef],
    ) -> Result<(Vec<PhaseResult>, Vec<String>, Option<MpiInfo>)> {
        self.gather_run(phases, warnings, metrics)
    }
}
