//! The exerciser as a workload: P exercisers on P files in one measured phase `exercise`,
//! remounts every K operations (all exercisers close their files, the testbed is unmounted,
//! caches dropped, mounted again, and every file is verified whole), progress by kind on a
//! terminal, and on a mismatch the report, the replay log and the expected image.
//!
//! Remounts need the run context (it owns the testbed) while the exercisers run on their own
//! threads, so the threads meet at two barriers per round: at the first every file is closed
//! and the main thread decides whether to remount or stop; after the second the exercisers
//! reopen and verify.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::engine::{Exerciser, Step};
use super::ops::OpKind;
pub use super::ops::MAX_FILE_LEN;
use super::replay::ReplayLog;
use super::report::Failure;
pub use super::spec::Exercise;
use super::spec::{report_failure, start_meter, METRICS};
use crate::base::error::{bad_input, bad_param};
use crate::base::units::Overflow;
use crate::measure::{OpId, Recorder};
use crate::results::MetricDef;
use crate::workload::{ColdMode, RunContext, Target, Workload};

impl Workload for Exercise {
    fn metrics(&self) -> &'static [MetricDef] {
        METRICS
    }

    fn kind(&self) -> &'static str {
        "exercise"
    }

    fn params(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("plain struct serializes")
    }

    fn space_needed(&self) -> Result<u64, Overflow> {
        // The file plus room for preallocation past EOF (keep-size) of one op.
        self.max_len
            .checked_add(self.max_op_len)
            .and_then(|b| b.checked_add(1 << 20))
            .and_then(|per| per.checked_mul(u64::from(self.procs.max(1))))
            .ok_or_else(self.overflow("space estimate"))
    }

    fn memory_needed(&self) -> Result<u64, Overflow> {
        self.max_len
            .checked_mul(2)
            .and_then(|b| b.checked_add(self.max_op_len.checked_mul(3)?))
            .and_then(|b| b.checked_add(1 << 20))
            .and_then(|per| per.checked_mul(u64::from(self.procs.max(1))))
            .ok_or_else(self.overflow("memory estimate"))
    }

    fn validate(&self) -> Result<()> {
        self.check_settings()?;
        // Settled before any work, as --out is: a device, FIFO, file, /proc or /sys path or an
        // unwritable place is refused now, not after the run (the directory is made when the
        // first log is written).
        if let Some(dir) = &self.log {
            crate::results::check_dir_for(dir, "--log", "the replay logs")?;
        }
        if let Some(r) = &self.replay {
            ReplayLog::load(r)?;
            if self.procs > 1 {
                return Err(bad_param(
                    "replay",
                    "--replay re-runs one exerciser's log; leave out --procs",
                ));
            }
        }
        Ok(())
    }

    fn run(&self, ctx: &mut RunContext) -> Result<()> {
        ctx.set_series(self.run_control().series_spec(self.time)?);
        if self.remount_every.is_some() && matches!(ctx.target(), Target::Dir(_)) {
            return Err(bad_input(
                "--remount-every needs a testbed fsgauge builds (--fs KIND); an existing directory cannot be remounted",
            ));
        }
        if ctx.crash_points() {
            return self.run_for_crash_points(ctx);
        }
        self.run_plain(ctx)
    }
}

impl Exercise {
    fn run_plain(&self, ctx: &mut RunContext) -> Result<()> {
        if let Some(r) = &self.replay {
            let log = ReplayLog::load(r)?;
            return super::replay::run_replay(self, &log, ctx);
        }
        Runner::new(self, ctx)?.run(ctx)
    }

    /// The run with a durability record of every exerciser, and the judge of crash states
    /// made from it left in the context. The files must be in the workload directory (the
    /// judge finds them in the crash state's).
    fn run_for_crash_points(&self, ctx: &mut RunContext) -> Result<()> {
        if self.file.contains('/') {
            return Err(bad_param(
                "file",
                "--crash-points judges the exercisers' files in the workload directory of the crash state; give --file a name, not a path",
            ));
        }
        let sink = super::durable::Sink::default();
        let with = Exercise {
            durable: Some(sink.clone()),
            ..self.clone()
        };
        let ran = with.run_plain(ctx);
        let names: Vec<(String, super::durable::Record)> = sink
            .take()
            .into_iter()
            .map(|(w, r)| {
                let name = self.file_path(Path::new(""), w);
                (name.to_string_lossy().into_owned(), r)
            })
            .collect();
        ctx.set_crash_verifier(super::crash::verifier(names));
        ran
    }
}

/// Opens a replay log in `dir` for exerciser `w` and writes its header.
fn open_log(dir: &Path, w: u32, header: &str) -> Result<File> {
    let p = dir.join(format!("exercise-{w}.log"));
    let mut f = crate::base::atomic::OutDir::make(dir)
        .with_context(|| format!("--log {}", dir.display()))?
        .create_stream(&format!("exercise-{w}.log"))?;
    f.write_all(header.as_bytes())
        .with_context(|| format!("writing {}", p.display()))?;
    Ok(f)
}

/// Shared live counts for the progress line.
struct Live {
    by_kind: [AtomicU64; OpKind::ALL.len()],
}

/// Round decision made by the main thread between the two barriers.
const CONTINUE: u8 = 0;
const LAST: u8 = 1;
const STOP: u8 = 2;

struct Runner {
    exercisers: Vec<Exerciser>,
    seed: u64,
    limit: u64,
    deadline: Option<Duration>,
    every: u64,
    inject: Vec<(u64, u64)>,
    log_dir: Option<PathBuf>,
    durable: Option<super::durable::Sink>,
}

impl Runner {
    fn new(wl: &Exercise, ctx: &mut RunContext) -> Result<Self> {
        let root = ctx.root().to_path_buf();
        let mut exercisers = Vec::new();
        let mut turned_off: Vec<String> = Vec::new();
        for w in 0..wl.procs {
            let path = wl.file_path(&root, w);
            let cfg = wl.config(ctx.seed(), w);
            let log = match &wl.log {
                Some(dir) => Some(open_log(
                    dir,
                    w,
                    // The log names the file as the user knows it, not the pinned path.
                    &ReplayLog::header(
                        wl,
                        &cfg,
                        w,
                        &wl.file_path(ctx.shown_root(), w),
                        &ctx.target().info(),
                    ),
                )?),
                None => None,
            };
            let ex = Exerciser::create(&path, cfg, log)?;
            if w == 0 {
                turned_off = ex
                    .kinds()
                    .1
                    .iter()
                    .map(|(k, why)| format!("{k}: {why}"))
                    .collect();
            }
            exercisers.push(ex);
        }
        if !turned_off.is_empty() {
            let msg = format!("turned off (not supported here): {}", turned_off.join("; "));
            ctx.progress().note(&msg);
            ctx.warn(msg);
        }
        Ok(Self {
            exercisers,
            seed: ctx.seed(),
            limit: wl.op_limit(),
            deadline: wl
                .run_control()
                .phase_time(wl.time)
                .map(Duration::from_secs_f64),
            every: wl.remount_every.filter(|&k| k > 0).unwrap_or(u64::MAX),
            inject: wl.inject.clone(),
            log_dir: wl.log.clone(),
            durable: wl.durable.clone(),
        })
    }

    fn run(self, ctx: &mut RunContext) -> Result<()> {
        let Runner {
            mut exercisers,
            seed,
            limit,
            deadline,
            every,
            inject,
            log_dir,
            durable,
        } = self;
        let procs = exercisers.len();
        let remounting = every != u64::MAX;
        let meter = start_meter(ctx);
        let live = std::sync::Arc::new(Live {
            by_kind: Default::default(),
        });
        let show = ctx.progress().enabled();
        let bar = show.then(|| progress_line(std::sync::Arc::clone(&live), procs));
        let started = Instant::now();
        let end_at = deadline.map(|d| started + d);
        let failure: Mutex<Option<(usize, Box<Failure>)>> = Mutex::new(None);
        let other_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
        let failed = AtomicBool::new(false);
        let finished = AtomicBool::new(false);
        let decision = AtomicU8::new(CONTINUE);
        let barrier = Barrier::new(procs + 1);
        let remounts = AtomicU64::new(0);
        let verifies = AtomicU64::new(0);

        let shared = Shared {
            live: show.then_some(&*live),
            failed: &failed,
            finished: &finished,
            decision: &decision,
            barrier: &barrier,
            failure: &failure,
            other_error: &other_error,
            verifies: &verifies,
        };
        let recorders: Vec<Recorder> = std::thread::scope(|s| {
            let handles: Vec<_> = exercisers
                .iter_mut()
                .enumerate()
                .map(|(w, ex)| {
                    let mut rec = meter.recorder(w as u32);
                    let inject: Vec<(u64, u64)> = if w == 0 { inject.clone() } else { Vec::new() };
                    s.spawn(move || {
                        worker(
                            w, ex, &mut rec, &shared, limit, end_at, every, remounting, &inject,
                        );
                        rec.finish();
                        rec
                    })
                })
                .collect();
            if remounting {
                shared.remount(ctx, &remounts);
            }
            handles
                .into_iter()
                .map(|h| h.join().expect("exerciser threads do not panic"))
                .collect()
        });
        drop(bar);
        let mut phase = meter.finish(recorders);
        let extra = [
            ("remounts", remounts.load(Ordering::Relaxed) as f64),
            (
                "full_verifications",
                verifies.load(Ordering::Relaxed) as f64,
            ),
            ("procs", procs as f64),
            ("kinds_turned_off", exercisers[0].kinds().1.len() as f64),
            ("seed", seed as f64),
        ];
        for (name, v) in extra {
            phase.extra.insert(name.into(), v);
        }
        close_all(&mut exercisers, durable.as_ref(), &other_error);
        if let Some((w, f)) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(report_failure(
                &f,
                w,
                &exercisers[w],
                log_dir.as_deref(),
                procs,
            ));
        }
        if let Some(e) = other_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        ctx.push_checked(phase)?;
        Ok(())
    }
}

/// Closes every exerciser's file (keeping the first error in `other_error`) and hands each
/// durability record to `durable`.
fn close_all(
    exercisers: &mut [Exerciser],
    durable: Option<&super::durable::Sink>,
    other_error: &Mutex<Option<anyhow::Error>>,
) {
    for (w, ex) in exercisers.iter_mut().enumerate() {
        // Files are closed already after a remount round; closing twice is a no-op.
        if let Err(e) = ex.close() {
            let mut g = other_error.lock().unwrap_or_else(|p| p.into_inner());
            g.get_or_insert(e);
        }
        if let (Some(sink), Some(r)) = (durable, ex.take_record()) {
            sink.put(w as u32, r);
        }
    }
}

/// What the workers and the remounting thread share: each worker a copy.
#[derive(Clone, Copy)]
struct Shared<'a> {
    live: Option<&'a Live>,
    failed: &'a AtomicBool,
    finished: &'a AtomicBool,
    decision: &'a AtomicU8,
    barrier: &'a Barrier,
    failure: &'a Mutex<Option<(usize, Box<Failure>)>>,
    other_error: &'a Mutex<Option<anyhow::Error>>,
    verifies: &'a AtomicU64,
}

impl Shared<'_> {
    fn fail(&self, w: usize, f: Box<Failure>) {
        self.failed.store(true, Ordering::SeqCst);
        let mut g = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some((w, f));
        }
    }

    fn error(&self, e: anyhow::Error) {
        self.failed.store(true, Ordering::SeqCst);
        let mut g = self.other_error.lock().unwrap_or_else(|p| p.into_inner());
        g.get_or_insert(e);
    }

    /// Remounts the testbed each time every worker has reached a remount point (counting them
    /// in `remounts`), and tells the workers whether to go on: until one has failed, the
    /// remount failed, or all have finished.
    fn remount(&self, ctx: &mut RunContext, remounts: &AtomicU64) {
        loop {
            self.barrier.wait();
            let d = if self.failed.load(Ordering::SeqCst) {
                STOP
            } else {
                match ctx.make_cold_with(ColdMode::Remount) {
                    Ok(()) => {
                        remounts.fetch_add(1, Ordering::Relaxed);
                        if self.finished.load(Ordering::SeqCst) {
                            LAST
                        } else {
                            CONTINUE
                        }
                    }
                    Err(e) => {
                        self.error(e.context("remounting the testbed"));
                        STOP
                    }
                }
            };
            self.decision.store(d, Ordering::SeqCst);
            self.barrier.wait();
            if d != CONTINUE {
                return;
            }
        }
    }
}

/// One exerciser's thread: chunks of operations, and between chunks (when remounting) the
/// two barriers, reopen and full verification.
#[allow(clippy::too_many_arguments)]
fn worker(
    w: usize,
    ex: &mut Exerciser,
    rec: &mut Recorder,
    sh: &Shared,
    limit: u64,
    end_at: Option<Instant>,
    every: u64,
    remounting: bool,
    inject: &[(u64, u64)],
) {
    let ids: Vec<OpId> = OpKind::ALL.iter().map(|k| rec.op(k.name())).collect();
    let (remount_id, verify_id) = (rec.op("remount"), rec.op("verify"));
    let mut t = Instant::now();
    loop {
        let chunk_end = ex.ops_done().saturating_add(every).min(limit);
        // The operations.
        while ex.ops_done() < chunk_end && !sh.failed.load(Ordering::Relaxed) {
            let op = ex.next_op();
            if let Err(f) = ex.apply(op) {
                sh.fail(w, f);
                break;
            }
            t = rec.record(ids[op.kind.index()], t, data_bytes(&op));
            if let Some(live) = sh.live {
                live.by_kind[op.kind.index()].fetch_add(1, Ordering::Relaxed);
            }
            if let Some(&(_, off)) = inject.iter().find(|(n, _)| *n == ex.ops_done()) {
                let size = ex.model().size();
                if size > 0 {
                    if let Err(e) = ex.corrupt(off.min(size - 1)) {
                        sh.error(e);
                        break;
                    }
                }
            }
            if ex.ops_done() % 256 == 0 {
                if rec.should_stop() {
                    // A signal (an error to report) or another worker's failure (reported
                    // by that worker).
                    if let Err(e) = rec.check() {
                        sh.error(e.into());
                    }
                    break;
                }
                if end_at.is_some_and(|e| Instant::now() >= e) {
                    break;
                }
            }
        }
        let done = ex.ops_done() >= limit || end_at.is_some_and(|e| Instant::now() >= e);
        if !remounting {
            break;
        }
        if done {
            sh.finished.store(true, Ordering::SeqCst);
        }
        if let Err(e) = ex.close() {
            sh.error(e);
        }
        let t0 = Instant::now();
        sh.barrier.wait();
        sh.barrier.wait();
        let d = sh.decision.load(Ordering::SeqCst);
        if w == 0 && d != STOP {
            rec.record(remount_id, t0, 0);
        }
        if d == STOP {
            break;
        }
        if let Err(e) = ex.reopen(Step::Remount(ex.ops_done())) {
            sh.error(e);
        } else {
            let tv = Instant::now();
            match ex.verify_all() {
                Ok(()) => {
                    rec.record(verify_id, tv, ex.model().size());
                    sh.verifies.fetch_add(1, Ordering::Relaxed);
                }
                Err(f) => sh.fail(w, f),
            }
        }
        t = Instant::now();
        if d == LAST {
            break;
        }
    }
    if let Err(e) = ex.flush_log() {
        sh.error(e);
    }
}

/// The bytes an operation moves, as recorded: its length for reads, writes, copies and clones,
/// 0 for the others.
fn data_bytes(op: &super::ops::Op) -> u64 {
    match op.kind {
        OpKind::Read
        | OpKind::Write
        | OpKind::ReadDontcache
        | OpKind::WriteDontcache
        | OpKind::MapRead
        | OpKind::MapWrite
        | OpKind::Copy
        | OpKind::Clone => op.len,
        _ => 0,
    }
}

/// The live progress line: operations, rate over the last tick, and counts by kind.
fn progress_line(counts: std::sync::Arc<Live>, procs: usize) -> ProgressGuard {
    let bar = indicatif::ProgressBar::new_spinner().with_style(
        indicatif::ProgressStyle::with_template("{prefix:>9} {spinner} {elapsed} {msg}")
            .expect("static template"),
    );
    bar.set_prefix("exercise");
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let ticker = {
        let (bar, done) = (bar.clone(), std::sync::Arc::clone(&done));
        std::thread::spawn(move || {
            let mut last = 0u64;
            let mut last_t = Instant::now();
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                let by: Vec<u64> = counts
                    .by_kind
                    .iter()
                    .map(|c| c.load(Ordering::Relaxed))
                    .collect();
                let total: u64 = by.iter().sum();
                let now = Instant::now();
                let rate = (total - last) as f64 / now.duration_since(last_t).as_secs_f64();
                last = total;
                last_t = now;
                let kinds: Vec<String> = OpKind::ALL
                    .iter()
                    .zip(&by)
                    .filter(|(_, &n)| n > 0)
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                bar.set_message(format!(
                    "{total} ops ({procs} file{}), {rate:.0} ops/s | {}",
                    if procs == 1 { "" } else { "s" },
                    kinds.join(" ")
                ));
                bar.tick();
            }
        })
    };
    ProgressGuard {
        bar,
        done,
        ticker: Some(ticker),
    }
}

struct ProgressGuard {
    bar: indicatif::ProgressBar,
    done: std::sync::Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::workload::exercise::spec::{worker_seed, DEFAULT_OPS};

    #[test]
    fn plan_parameters_use_the_flag_names_and_sizes() {
        let kind = crate::workload::registry::find("exercise").unwrap();
        let w = (kind.build)(serde_json::json!({
            "max_len": "1M",
            "max_op_len": "16K",
            "time": "2m",
            "no": ["clone", "fsync"],
            "weights": {"read": 2},
            "remount_every": 1000
        }))
        .unwrap();
        let p = w.params();
        assert_eq!(p["max_len"], 1 << 20);
        assert_eq!(p["max_op_len"], 16 << 10);
        assert_eq!(p["time"], 120.0);
        assert_eq!(p["no"], serde_json::json!(["clone", "fsync"]));
        assert_eq!(p["weights"]["read"], 2);
        assert_eq!(p["procs"], 1);
        assert_eq!(w.kind(), "exercise");
        let e = (kind.build)(serde_json::json!({"max_lenn": 1}))
            .err()
            .unwrap();
        assert!(e.to_string().contains("max_lenn"), "{e}");
        let e = (kind.build)(serde_json::json!({"no": ["frob"]}))
            .err()
            .unwrap();
        assert!(e.to_string().contains("unknown operation"), "{e}");
    }

    /// `fsgauge exercise` flags and a plan's `kind = "exercise"` table give the same
    /// parameters; the defaults, now written once in the flags, are those both had.
    #[test]
    fn flags_and_plan_give_the_same_exercise() {
        use crate::workload::params::from_flags;
        let kind = crate::workload::registry::find("exercise").unwrap();
        let flags = from_flags::<Exercise>(&[]).unwrap();
        let plan = (kind.build)(serde_json::json!({})).unwrap().params();
        assert_eq!(flags.params(), plan);
        assert_eq!(
            plan,
            serde_json::json!({
                "file": "exercise.dat", "ops": null, "time": null, "max_len": 256 << 10,
                "max_op_len": 64 << 10, "procs": 1, "direct": false, "pollute_eof": false,
                "no": [], "weights": {}, "remount_every": 0, "log": null, "replay": null
            })
        );
        let flags = from_flags::<Exercise>(&[
            "--file",
            "f",
            "--ops",
            "50",
            "--time",
            "2m",
            "--max-len",
            "1M",
            "--max-op-len",
            "16K",
            "--procs",
            "3",
            "--no",
            "clone,fsync",
            "--weights",
            "read=4,fsync=0",
            "--weights",
            "read=2",
            "--remount-every",
            "1000",
            "--log",
            "/l",
            "--pollute-eof",
        ])
        .unwrap();
        flags.validate().unwrap();
        let table = serde_json::json!({
            "file": "f", "ops": 50, "time": "2m", "max_len": "1M", "max_op_len": "16K",
            "procs": 3, "no": ["clone", "fsync"], "weights": {"fsync": 0, "read": 2},
            "remount_every": 1000, "log": "/l", "pollute_eof": true
        });
        let plan = (kind.build)(table).unwrap();
        assert_eq!(flags.params(), plan.params());
        // The last weight given counts, as it did when the flags were collected into a table.
        assert_eq!(flags.weight_of(OpKind::Read), Some(2));
        assert_eq!(flags.config(1, 0).kinds, {
            let plan: Exercise = serde_json::from_value(plan.params()).unwrap();
            plan.config(1, 0).kinds
        });
        // remount_every: 0 in a plan is never, as no flag is; --remount-every 0 is refused.
        let never = (kind.build)(serde_json::json!({"remount_every": 0})).unwrap();
        assert_eq!(never.params()["remount_every"], 0);
        never.validate().unwrap();
        let zero = from_flags::<Exercise>(&["--remount-every", "0"]).unwrap();
        let e = format!("{:#}", zero.validate().unwrap_err());
        assert!(e.contains("--remount-every must be 1 or more"), "{e}");
        assert_eq!(
            crate::base::error::bad_field(&zero.validate().unwrap_err()),
            Some("remount_every")
        );
    }

    #[test]
    fn validation_names_the_bad_flag() {
        let bad = |w: Exercise| format!("{:#}", w.validate().unwrap_err());
        let e = bad(Exercise {
            direct: true,
            max_len: 1000,
            max_op_len: 512,
            ..Default::default()
        });
        assert!(
            e.contains("--max-len 1000 is not a multiple of the block size"),
            "{e}"
        );
        let e = bad(Exercise {
            procs: 0,
            ..Default::default()
        });
        assert!(e.contains("--procs"), "{e}");
        let e = bad(Exercise {
            no: vec![OpKind::Write],
            ..Default::default()
        });
        assert!(e.contains("writes cannot be turned off"), "{e}");
        Exercise::default().validate().unwrap();
        assert_eq!(Exercise::default().op_limit(), DEFAULT_OPS);
    }

    /// A run with a sink hands each exerciser's record over, and the files it leaves pass the
    /// judge at the end of their records; a run without one measures the same.
    #[test]
    fn a_run_with_a_sink_hands_over_each_exercisers_record() {
        use crate::workload::exercise::durable::{judge, Found, Sink, What};
        use crate::workload::{ColdMode, Target};
        let run = |sink: Option<Sink>| {
            let dir = tempfile::tempdir().unwrap();
            let mut target = Target::Dir(dir.path().to_path_buf());
            let root = dir.path().to_path_buf();
            let progress = crate::measure::Progress::hidden();
            let mut ctx = RunContext::new(&mut target, root.clone(), 3, ColdMode::None, progress);
            let wl = Exercise {
                ops: Some(400),
                procs: 2,
                durable: sink.clone(),
                ..Default::default()
            };
            wl.run(&mut ctx).unwrap();
            let (phases, _) = ctx.into_parts();
            let files: Vec<Vec<u8>> = (0..2)
                .map(|w| std::fs::read(wl.file_path(&root, w)).unwrap())
                .collect();
            (phases[0].ops, files, root, dir)
        };
        let sink = Sink::default();
        let (ops, files, root, _dir) = run(Some(sink.clone()));
        let (plain_ops, plain_files, _, _d) = run(None);
        assert_eq!((ops, &files), (plain_ops, &plain_files));
        let records = sink.take();
        assert_eq!(records.iter().map(|(w, _)| *w).collect::<Vec<_>>(), [0, 1]);
        for ((w, r), found) in records.iter().zip(&files) {
            assert_eq!(r.file, root.join(format!("exercise.dat.{w}")));
            assert_eq!(r.events.len(), 401);
            assert_eq!(r.events[0].what, What::Setup);
            assert_eq!(r.seed, worker_seed(3, *w));
            let end = r.events.last().unwrap().end_ns;
            let v = judge(r, end, Found::File(found)).unwrap();
            assert!(v.failure().is_none(), "{v:?}");
        }
        assert!(sink.take().is_empty(), "taken once");
    }

    #[test]
    fn files_and_seeds_per_exerciser() {
        let w = Exercise {
            procs: 2,
            ..Default::default()
        };
        let root = Path::new("/r");
        assert_eq!(w.file_path(root, 1), Path::new("/r/exercise.dat.1"));
        let abs = Exercise {
            file: "/x/y".into(),
            ..Default::default()
        };
        assert_eq!(abs.file_path(root, 0), Path::new("/x/y"));
        assert_eq!(worker_seed(5, 0), 5);
        assert_ne!(worker_seed(5, 1), worker_seed(5, 2));
    }
}
