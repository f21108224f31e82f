//! A measured phase: probes taken at its start and end (clock, CPU, device counters), the
//! recorders of its workers merged exactly into one [`PhaseResult`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::clock::{Clock, Tick};
use super::diskstats::{Devices, DiskStat, PhaseEnd, Probe};
use super::progress::{PhaseBar, Progress};
use super::recorder::{OpDef, Recorder, StopFlags};
use super::rusage::CpuTimes;
use super::totals::{PhaseTotals, Probes};
use crate::results::device::ModelledIo;
use crate::results::PhaseResult;

/// How a phase's time series is cut (`--interval`), and how many of its first intervals are a
/// warm-up left out of every figure (`--ramp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeriesSpec {
    pub interval: Duration,
    pub ramp_intervals: u32,
}

impl Default for SeriesSpec {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            ramp_intervals: 0,
        }
    }
}

impl SeriesSpec {
    /// The ramp's length.
    pub fn ramp(&self) -> Duration {
        self.interval * self.ramp_intervals
    }
}

/// A phase in progress.
pub struct PhaseMeter {
    series: SeriesSpec,
    name: String,
    defs: Vec<OpDef>,
    start: Instant,
    /// The operation clock and its reading at `start`.
    clock: Clock,
    start_tick: Tick,
    cpu0: CpuTimes,
    devices: Devices,
    dev0: Option<DiskStat>,
    jdev0: Option<DiskStat>,
    /// What completes the emulated disks' records (main, journal) at the end.
    model_end: (Option<PhaseEnd>, Option<PhaseEnd>),
    progress: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    /// Set when the phase is cut at a stonewall: workers end their work early, without error.
    wall: Arc<AtomicBool>,
    bar: Option<PhaseBar>,
    /// Counts the cache drops of other processes over the phase.
    drops: crate::host::cache::DropMark,
    /// The host's writeback settings at the start, to see another process change them.
    writeback: crate::host::writeback::WritebackMark,
    /// The machine's steal and CPU pressure at the start.
    load: super::hostload::LoadMark,
    /// The scheduler's counters of this process's threads at the start.
    sched: super::schedstat::SchedMark,
}

impl PhaseMeter {
    /// Starts the clock. `expected` primary operations drive the progress bar's ETA.
    pub fn start(
        name: &str,
        defs: &[OpDef],
        devices: &Devices,
        expected: Option<u64>,
        ui: &Progress,
    ) -> Self {
        // Calibrates the TSC on a process's first phase, before this phase's clock starts.
        let clock = Clock::new(Instant::now());
        let progress = Arc::new(AtomicU64::new(0));
        let bar = ui.phase_bar(name, expected, Arc::clone(&progress));
        let dev0 = devices.main.as_deref().and_then(DiskStat::read);
        let jdev0 = devices.journal.as_deref().and_then(DiskStat::read);
        // A probe that fails (a dead server) leaves the record out; the run's check of its
        // devices names the failure.
        let begin = |p: &Option<Probe>| p.as_ref().and_then(|p| p.begin().ok());
        let model_end = (begin(&devices.model), begin(&devices.journal_model));
        let cpu0 = CpuTimes::now();
        let drops = crate::host::cache::DropMark::now();
        let writeback = crate::host::writeback::WritebackMark::now();
        let load = super::hostload::LoadMark::now();
        let sched = super::schedstat::SchedMark::now();
        let start = Instant::now();
        let clock = clock.with_origin(start);
        let start_tick = clock.now();
        Self {
            series: SeriesSpec::default(),
            name: name.to_string(),
            defs: defs.to_vec(),
            start,
            clock,
            start_tick,
            cpu0,
            devices: devices.clone(),
            dev0,
            jdev0,
            model_end,
            progress,
            stop: Arc::new(AtomicBool::new(false)),
            wall: Arc::new(AtomicBool::new(false)),
            bar,
            drops,
            writeback,
            load,
            sched,
        }
    }

    /// Cuts the phase's time series into intervals of `series.interval`, the first
    /// `series.ramp_intervals` of them a warm-up (call before making recorders).
    pub fn with_series(mut self, series: SeriesSpec) -> Self {
        self.series = series;
        self
    }

    /// The phase's series intervals and ramp.
    pub fn series(&self) -> SeriesSpec {
        self.series
    }

    /// A recorder for worker `worker`, sharing this phase's clock origin.
    pub fn recorder(&self, worker: u32) -> Recorder {
        Recorder::new(
            worker,
            self.start,
            self.clock,
            self.start_tick,
            self.series.interval,
            &self.defs,
            Arc::clone(&self.progress),
            StopFlags {
                stop: Arc::clone(&self.stop),
                wall: Arc::clone(&self.wall),
            },
        )
    }

    /// Cuts the phase at a stonewall: every worker sees [`Recorder::should_stop`] and
    /// [`Recorder::stonewalled`], and ends its work without error; what was done counts.
    pub fn stonewall(&self) {
        self.wall.store(true, Ordering::Relaxed);
        self.stop.store(true, Ordering::Relaxed);
    }

    /// True once [`PhaseMeter::stonewall`] was called.
    pub fn stonewalled(&self) -> bool {
        self.wall.load(Ordering::Relaxed)
    }

    /// Asks every worker to stop at its next check.
    pub fn stop_all(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops the clock and merges the workers' recorders.
    pub fn finish(self, mut recorders: Vec<Recorder>) -> PhaseResult {
        let wall = self.start.elapsed();
        let cpu = CpuTimes::now().since(self.cpu0);
        let foreign_cache_drops = self.drops.foreign_since();
        let writeback_changed = self.writeback.changes_since();
        let host_load = self.load.since();
        // A phase the model did not apply to (set-up while it is off) has no record.
        let end = |e: Option<PhaseEnd>| {
            e.and_then(|f| f().ok())
                .filter(|m: &ModelledIo| m.requests() > 0)
        };
        let modelled = (end(self.model_end.0), end(self.model_end.1));
        let delta = |d0: Option<DiskStat>, dev: Option<&std::path::Path>| match (
            d0,
            dev.and_then(DiskStat::read),
        ) {
            (Some(a), Some(b)) => Some(b.delta(a)),
            _ => None,
        };
        let probes = Probes {
            wall_s: wall.as_secs_f64(),
            cpu,
            device: delta(self.dev0, self.devices.main.as_deref()),
            journal_device: delta(self.jdev0, self.devices.journal.as_deref()),
            modelled,
            interval_s: self.series.interval.as_secs_f64(),
        };
        drop(self.bar);
        let mut totals = PhaseTotals::probed(&self.name, &probes);
        for r in &mut recorders {
            r.finish();
            totals.merge(&PhaseTotals::of_worker(&self.name, r));
        }
        let ramp = self.series.ramp_intervals as usize;
        totals.cut_ramp(ramp, self.series.ramp().as_secs_f64());
        let mut out = totals.into_result(&[]);
        out.foreign_cache_drops = out.foreign_cache_drops.max(foreign_cache_drops);
        out.host_load = host_load;
        out.writeback_changed = out.writeback_changed.or(writeback_changed);
        out.cpu_wait = self
            .sched
            .since(recorders.iter().filter_map(|r| r.sched_end));
        out
    }
}

/// Runs `n` workers on their own threads, started together behind a barrier, each with its
/// own recorder. The first failure stops the others and is returned naming its worker.
pub fn run_workers<F>(meter: &PhaseMeter, n: usize, work: F) -> Result<Vec<Recorder>>
where
    F: Fn(usize, &mut Recorder) -> Result<()> + Sync,
{
    if n == 1 {
        let mut r = meter.recorder(0);
        work(0, &mut r)?;
        r.finish();
        return Ok(vec![r]);
    }
    let barrier = Barrier::new(n);
    let failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let recorders: Vec<Recorder> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let mut r = meter.recorder(i as u32);
                let (barrier, failure, work) = (&barrier, &failure, &work);
                s.spawn(move || {
                    barrier.wait();
                    if let Err(e) = work(i, &mut r) {
                        meter.stop_all();
                        let mut f = failure.lock().unwrap_or_else(|p| p.into_inner());
                        if f.is_none() {
                            *f = Some(e.context(format!("worker {i}")));
                        }
                    }
                    r.finish();
                    r
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    if recorders.len() != n {
        anyhow::bail!("{} of {n} workers panicked", n - recorders.len());
    }
    Ok(recorders)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::measure::{new_histogram, summarize};

    fn meter() -> PhaseMeter {
        PhaseMeter::start(
            "p",
            &[OpDef::primary("op"), OpDef::secondary("part")],
            &Devices::default(),
            None,
            &Progress::hidden(),
        )
    }

    #[test]
    fn one_interval_has_the_phase_latency_and_intervals_add_up_to_the_phase() {
        // Two workers, all operations in second 0: the series point is the phase.
        let m = meter();
        let mut rs: Vec<Recorder> = (0..2).map(|w| m.recorder(w)).collect();
        for (w, r) in rs.iter_mut().enumerate() {
            let (op, part) = (r.op("op"), r.op("part"));
            let t0 = r.tick();
            r.with_lane(op, |rec, lane| {
                for i in 0..1000u64 {
                    lane.add(rec, 500 + i * 37 + w as u64 * 9000, 4096, t0);
                }
            });
            r.add_tick(part, 1, 1, t0);
        }
        let p = m.finish(rs);
        assert_eq!(p.series.len(), 1);
        let lat = p.series[0].latency.as_ref().unwrap();
        assert_eq!(lat, &p.latency);
        assert_eq!(lat.count, 2000);

        // Several seconds: per-second counts are the series' and add up to the phase.
        let m = meter();
        let mut r = m.recorder(0);
        let op = r.op("op");
        let t0 = r.tick();
        let per = r.clock().per_sec();
        for s in 0..4u64 {
            for i in 0..=s * 10 {
                r.add_tick(op, 1000 * (s + 1) + i, 10, Tick(t0.0 + s * per + 1));
            }
        }
        let p = m.finish(vec![r]);
        let counts: Vec<u64> = p
            .series
            .iter()
            .map(|s| s.latency.as_ref().map_or(0, |l| l.count))
            .collect();
        let ops: Vec<u64> = p.series.iter().map(|s| s.ops).collect();
        assert_eq!(counts, ops);
        assert_eq!(ops.iter().sum::<u64>(), p.ops);
        assert_eq!(p.series.iter().map(|s| s.bytes).sum::<u64>(), p.bytes);
        let mut all = new_histogram();
        for s in &p.series {
            all.add(crate::measure::decode(s.latency.as_ref().unwrap()).unwrap())
                .unwrap();
        }
        assert_eq!(summarize(&all, 0, 0), p.latency);
        // Each second's percentiles are its own: second 3 is all 4 us.
        let l3 = p.series[3].latency.as_ref().unwrap();
        assert!((4000..4100).contains(&l3.p50_ns), "{}", l3.p50_ns);
    }

    /// Work that stays on a CPU for a while.
    fn spin() {
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
    }

    #[test]
    fn the_wait_counts_each_worker_thread_once_even_after_it_has_exited() {
        for n in [1usize, 3] {
            let m = meter();
            let rs = run_workers(&m, n, |_, _| {
                spin();
                Ok(())
            })
            .unwrap();
            let tids: Vec<i32> = rs.iter().map(|r| r.sched_end.unwrap().0).collect();
            let p = m.finish(rs);
            let w = p.cpu_wait.expect("recorded");
            assert_eq!(w.threads as usize, n, "{w:?}");
            let me = crate::measure::schedstat::this_thread().unwrap().0;
            // One worker runs on the calling thread; several on threads of their own, which
            // had exited (joined) before the phase ended.
            assert_eq!(tids.contains(&me), n == 1, "{tids:?}");
            // No thread is on a CPU or waiting for one longer than the phase lasted.
            let budget = (p.wall_s * n as f64 * 1e9) as u64 + 10_000_000;
            assert!(
                w.on_cpu_ns + w.run_delay_ns <= budget,
                "{w:?} in {} s",
                p.wall_s
            );
        }
    }

    #[test]
    fn scheduled_latency_is_kept_per_kind_phase_and_second_and_only_when_recorded() {
        // Without a rate limit nothing is there.
        let m = meter();
        let mut r = m.recorder(0);
        let op = r.op("op");
        let t0 = r.tick();
        r.add_tick(op, 1000, 1, t0);
        let p = m.finish(vec![r]);
        assert!(p.scheduled_latency.is_none());
        assert!(p.op_stats["op"].scheduled_latency.is_none());
        assert!(p.series.iter().all(|s| s.scheduled_latency.is_none()));

        // Two workers, seconds 0 and 2: each request took 1 us from its submission; from its
        // due time, second 2's waited 5 ms (a queue behind a stall).
        let m = meter();
        let mut rs: Vec<Recorder> = (0..2).map(|w| m.recorder(w)).collect();
        for r in &mut rs {
            let op = r.op("op");
            let t0 = r.tick();
            let per = r.clock().per_sec();
            r.with_lane(op, |rec, lane| {
                for (sec, wait) in [(0u64, 2_000u64), (2, 5_000_000)] {
                    for _ in 0..10 {
                        let end = Tick(t0.0 + sec * per + 1);
                        lane.add(rec, 1_000, 4096, end);
                        rec.scheduled(op, wait, end);
                    }
                }
            });
        }
        let p = m.finish(rs);
        let s = p.scheduled_latency.as_ref().unwrap();
        assert_eq!(s.count, 40);
        assert_eq!(p.latency.count, 40);
        assert!(s.max_ns >= 4_990_000 && p.latency.max_ns < 1_100, "{s:?}");
        assert_eq!(p.op_stats["op"].scheduled_latency.as_ref(), Some(s));
        assert!(p.op_stats["part"].scheduled_latency.is_none());
        let per_sec: Vec<Option<u64>> = p
            .series
            .iter()
            .map(|x| x.scheduled_latency.as_ref().map(|l| l.count))
            .collect();
        assert_eq!(per_sec, [Some(20), None, Some(20)]);
        let s2 = p.series[2].scheduled_latency.as_ref().unwrap();
        assert!(s2.p50_ns >= 4_990_000, "{s2:?}");
        let s0 = p.series[0].scheduled_latency.as_ref().unwrap();
        assert!(s0.max_ns < 2_100, "{s0:?}");
        // The series' seconds add up to the phase, bucket for bucket.
        let mut all = new_histogram();
        for x in p.series.iter().filter_map(|x| x.scheduled_latency.as_ref()) {
            all.add(crate::measure::decode(x).unwrap()).unwrap();
        }
        assert_eq!(&summarize(&all, 0, 0), s);
    }
}

/// `finish` on fixed recorders, checked against a snapshot of what it gave before the phase
/// totals were shared with the MPI merge (`FSGAUGE_BLESS=1` rewrites the snapshot).
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod snapshot {
    use super::*;

    const SNAPSHOT: &str = "src/measure/testdata/finish_snapshot.json";

    /// A latency in ns, varied by worker, second and index; a few over 2 s and 10 s.
    fn lat(w: u64, s: u64, i: u64) -> u64 {
        match i % 97 {
            13 => 2_500_000_000 + w,
            41 if s == 1 => 12_000_000_000,
            _ => 700 + i * 131 + s * 50_000 + w * 7_777,
        }
    }

    /// Operations of worker `w` in series interval `s`, primary `op`, secondary `part`,
    /// reading primary `rd` (worker 0), scheduled latency (worker 1).
    fn fill(r: &mut Recorder, w: u64, intervals: u64, per: u64, has_rd: bool) {
        let (op, part) = (r.op("op"), r.op("part"));
        let t0 = r.tick();
        for s in 0..intervals {
            for i in 0..(40 + 10 * s + w) {
                let end = Tick(t0.0 + s * per + 1 + i);
                r.add_tick(op, lat(w, s, i), 4096 + i, end);
                if i % 5 == 0 {
                    r.add_tick(part, 100 + i, 512, end);
                }
                if w == 1 {
                    r.scheduled(op, lat(w, s, i) + 3_000 * s, end);
                }
            }
            if has_rd && w == 0 {
                let rd = r.op("rd");
                r.add_tick(rd, 9_000 + s, 65536, Tick(t0.0 + s * per + 2));
            }
        }
    }

    /// The figures that depend on the clock or the machine, zeroed.
    fn steady(mut p: PhaseResult) -> PhaseResult {
        (p.wall_s, p.user_s, p.sys_s, p.ops_per_s, p.bytes_per_s) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for w in &mut p.workers {
            w.wall_s = 0.0;
        }
        if let Some(r) = p.ramp_totals.as_mut() {
            r.seconds = 0.0;
        }
        // The machine's load beside the phase is the machine's, not finish's; that it is
        // recorded is checked here, its value by the host-load tests.
        assert!(
            p.host_load.is_some(),
            "every phase records the machine's load"
        );
        p.host_load = None;
        // The same for the threads' run-queue wait: its accounting is checked below.
        assert!(
            p.cpu_wait.is_some(),
            "every phase records its threads' wait"
        );
        p.cpu_wait = None;
        p
    }

    fn phases() -> Vec<PhaseResult> {
        let mut out = Vec::new();
        // Three workers, two primary kinds, one second fewer per worker.
        let defs = [
            OpDef::primary("op"),
            OpDef::secondary("part"),
            OpDef::primary("rd").reading(),
        ];
        let m = PhaseMeter::start("a", &defs, &Devices::default(), None, &Progress::hidden());
        let mut rs: Vec<Recorder> = (0..3).map(|w| m.recorder(w)).collect();
        for (w, r) in rs.iter_mut().enumerate() {
            let per = r.clock().per_sec();
            fill(r, w as u64, 3 - w as u64, per, true);
        }
        out.push(steady(m.finish(rs)));
        // Two workers, half-second intervals, the first two a ramp.
        let defs = [OpDef::primary("op"), OpDef::secondary("part")];
        let series = SeriesSpec {
            interval: Duration::from_millis(500),
            ramp_intervals: 2,
        };
        let m = PhaseMeter::start("b", &defs, &Devices::default(), None, &Progress::hidden())
            .with_series(series);
        let mut rs: Vec<Recorder> = (0..2).map(|w| m.recorder(w)).collect();
        for (w, r) in rs.iter_mut().enumerate() {
            let per = r.clock().ticks(series.interval);
            fill(r, w as u64, 5, per, false);
        }
        out.push(steady(m.finish(rs)));
        // One worker with a ramp: its one primary kind's figures are the phase's.
        let m = PhaseMeter::start("c", &defs, &Devices::default(), None, &Progress::hidden())
            .with_series(series);
        let mut r = m.recorder(0);
        let per = r.clock().ticks(series.interval);
        fill(&mut r, 1, 4, per, false);
        out.push(steady(m.finish(vec![r])));
        // Nothing done.
        let m = PhaseMeter::start("d", &defs, &Devices::default(), None, &Progress::hidden());
        let r = m.recorder(0);
        out.push(steady(m.finish(vec![r])));
        out
    }

    #[test]
    fn finish_gives_what_it_gave_before() {
        let got = serde_json::to_string_pretty(&phases()).unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SNAPSHOT);
        if std::env::var_os("FSGAUGE_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &got).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap();
        assert!(got == want, "finish differs from {SNAPSHOT}");
    }
}
