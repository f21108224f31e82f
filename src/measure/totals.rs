//! The totals of a phase in a form that merges exactly, and the one place a [`PhaseResult`] is
//! built from them. The workers of a phase ([`PhaseTotals::of_worker`], with the phase's own
//! probes, [`PhaseTotals::probed`]) and the ranks of an MPI run ([`PhaseTotals::of_rank`]) are
//! parts folded by the same [`PhaseTotals::merge`]; a new figure is added here once.
//!
//! How parts combine: operations, bytes and CPU time are summed; latency is kept as histogram
//! buckets and merged bucket by bucket (never averaged percentiles), with the counts over 2 s
//! and 10 s summed; the wall time is the slowest part's and `first_done_s` the fastest rank's;
//! device counters are taken once per host (the parts on one host share its devices); series
//! intervals add up index by index; workers and rate records are numbered across parts in the
//! order they are merged; workload figures (`extra`) combine as their workload declares
//! ([`Combine`] in its [`MetricDef`]).

use std::collections::BTreeMap;

use anyhow::{bail, Result};

use super::latency::{decode, new_histogram, summarize, FastHistogram};
use super::recorder::Recorder;
use super::rusage::CpuTimes;
use crate::results::device::ModelledIo;
use crate::results::{
    Combine, DeviceDelta, LatencySummary, MetricDef, OpStats, PhaseResult, RampTotals, RankPhase,
    RateOutcome, SeriesPoint, WorkerRate, WorkerSummary,
};

/// Latency of a set of operations, mergeable exactly: the non-empty buckets of its HDR
/// histogram (numbered as [`FastHistogram`] numbers them, ascending) and its operations over
/// 2 s and over 10 s. Sparse, so that a long series keeps one per interval cheaply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyTotals {
    buckets: Vec<(u32, u64)>,
    over_2s: u64,
    over_10s: u64,
}

impl LatencyTotals {
    /// A worker's histogram and its exact slow-operation counts.
    pub(crate) fn of_fast(h: &FastHistogram, over_2s: u64, over_10s: u64) -> Self {
        Self {
            buckets: h.buckets(),
            over_2s,
            over_10s,
        }
    }

    /// Buckets as [`FastHistogram::drain_into`] lists them (in any order, a bucket possibly
    /// more than once), the slow-operation counts taken from the buckets.
    pub(crate) fn of_buckets(list: &[(u32, u64)]) -> Self {
        let mut buckets = list.to_vec();
        buckets.sort_unstable_by_key(|b| b.0);
        buckets.dedup_by(|b, a| {
            let same = a.0 == b.0;
            if same {
                a.1 += b.1;
            }
            same
        });
        let above = |ns: u64| {
            let i = FastHistogram::bucket_of(ns) as u32;
            buckets.iter().filter(|b| b.0 > i).map(|b| b.1).sum::<u64>()
        };
        Self {
            over_2s: above(2_000_000_000),
            over_10s: above(10_000_000_000),
            buckets,
        }
    }

    /// A stored summary: its histogram (`hdr`) and counts.
    pub fn of_summary(s: &LatencySummary) -> Result<Self> {
        let mut out = Self {
            buckets: Vec::new(),
            over_2s: s.over_2s,
            over_10s: s.over_10s,
        };
        if s.count == 0 {
            return Ok(out);
        }
        let Some(h) = decode(s) else {
            bail!(
                "a latency summary of {} operations carries no readable histogram",
                s.count
            );
        };
        // Into the standard layout first, so that the buckets are numbered as ours are.
        let mut std = new_histogram();
        std.add(&h)
            .map_err(|e| anyhow::anyhow!("merging latency histograms: {e:?}"))?;
        out.buckets = std
            .iter_recorded()
            .map(|v| {
                let i = FastHistogram::bucket_of(v.value_iterated_to());
                (i as u32, v.count_at_value())
            })
            .collect();
        Ok(out)
    }

    /// Adds every operation of `other`.
    pub fn merge(&mut self, other: &Self) {
        self.over_2s += other.over_2s;
        self.over_10s += other.over_10s;
        if other.buckets.is_empty() {
            return;
        }
        if self.buckets.is_empty() {
            self.buckets.clone_from(&other.buckets);
            return;
        }
        let (a, b) = (std::mem::take(&mut self.buckets), &other.buckets);
        let mut out = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => {
                    out.push(a[i]);
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    out.push(b[j]);
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    out.push((a[i].0, a[i].1 + b[j].1));
                    i += 1;
                    j += 1;
                }
            }
        }
        out.extend_from_slice(&a[i..]);
        out.extend_from_slice(&b[j..]);
        self.buckets = out;
    }

    /// `a` merged with `b`, either possibly absent.
    fn merge_opt(a: &mut Option<Self>, b: &Option<Self>) {
        match (a.as_mut(), b) {
            (_, None) => {}
            (None, Some(b)) => *a = Some(b.clone()),
            (Some(a), Some(b)) => a.merge(b),
        }
    }

    /// Operations held.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.1).sum()
    }

    /// Percentiles and counts, with the histogram itself kept (`hdr`).
    pub fn summary(&self) -> LatencySummary {
        let mut h = new_histogram();
        FastHistogram::add_buckets_to(&self.buckets, &mut h);
        summarize(&h, self.over_2s, self.over_10s)
    }
}

/// One operation kind's totals.
#[derive(Debug, Clone, Default, PartialEq)]
struct OpTotals {
    count: u64,
    bytes: u64,
    primary: bool,
    reads: bool,
    latency: LatencyTotals,
    scheduled: Option<LatencyTotals>,
}

impl OpTotals {
    fn merge(&mut self, o: &OpTotals) {
        self.count += o.count;
        self.bytes += o.bytes;
        self.primary |= o.primary;
        self.reads |= o.reads;
        self.latency.merge(&o.latency);
        LatencyTotals::merge_opt(&mut self.scheduled, &o.scheduled);
    }
}

/// One series interval's totals.
#[derive(Debug, Clone, Default, PartialEq)]
struct IntervalTotals {
    ramp: bool,
    ops: u64,
    bytes: u64,
    /// Of the primary operations that ended in the interval; `None` when none did.
    latency: Option<LatencyTotals>,
    scheduled: Option<LatencyTotals>,
}

impl IntervalTotals {
    fn merge(&mut self, o: &IntervalTotals) {
        self.ramp |= o.ramp;
        self.ops += o.ops;
        self.bytes += o.bytes;
        LatencyTotals::merge_opt(&mut self.latency, &o.latency);
        LatencyTotals::merge_opt(&mut self.scheduled, &o.scheduled);
    }
}

/// What a ramp held.
#[derive(Debug, Clone, Default, PartialEq)]
struct RampPart {
    seconds: f64,
    ops: u64,
    bytes: u64,
    latency: LatencyTotals,
}

/// How the series is cut: the interval (absent: 1 s) and the ramp's length.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Cut {
    interval_s: Option<f64>,
    ramp_s: Option<f64>,
}

/// A host's device counters over the phase.
type HostDevices = (Option<DeviceDelta>, Option<DeviceDelta>);

/// What a phase's own probes measured on this machine: the wall clock, the process's CPU time
/// and the testbed's device counters.
#[derive(Debug, Clone, Default)]
pub struct Probes {
    pub wall_s: f64,
    pub cpu: CpuTimes,
    pub device: Option<DeviceDelta>,
    pub journal_device: Option<DeviceDelta>,
    /// What the emulated disks (main, journal) served, when the testbed has them.
    pub modelled: (Option<ModelledIo>, Option<ModelledIo>),
    /// The series interval (`--interval`), seconds.
    pub interval_s: f64,
}

/// The totals of a phase, or of a part of one (a worker, a rank), mergeable exactly (see the
/// module docs). Built by [`PhaseTotals::of_worker`], [`PhaseTotals::probed`] and
/// [`PhaseTotals::of_rank`], folded by [`PhaseTotals::merge`], turned into a [`PhaseResult`]
/// by [`PhaseTotals::into_result`] only.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PhaseTotals {
    name: String,
    /// The first part's that has one.
    cut: Option<Cut>,
    /// The slowest part's.
    wall_s: Option<f64>,
    /// The fastest rank's.
    first_done_s: Option<f64>,
    user_s: f64,
    sys_s: f64,
    ops: u64,
    bytes: u64,
    latency: LatencyTotals,
    scheduled: Option<LatencyTotals>,
    op_stats: BTreeMap<String, OpTotals>,
    /// By host; the first part of a host gives its counters.
    devices: BTreeMap<String, HostDevices>,
    /// The emulated disks' records (main, journal): the first part's that has them (only
    /// this process's testbed has an emulated disk).
    modelled: (Option<ModelledIo>, Option<ModelledIo>),
    /// Every interval any part recorded into, by index.
    series: Vec<IntervalTotals>,
    /// Series intervals reported: the longest part's series (a latency recorded past it
    /// counts in the ramp's cut only).
    points: usize,
    ramp: Option<RampPart>,
    rate: Option<RateOutcome>,
    workers: Vec<WorkerSummary>,
    /// Each part's workload figures and wall time, combined when the result is built.
    extras: Vec<(BTreeMap<String, f64>, f64)>,
    stonewall_s: Option<f64>,
    ranks: Vec<RankPhase>,
    /// Cache drops by other processes that any part saw (the most of them: ranks of one
    /// machine see the same drops).
    foreign_cache_drops: u64,
    /// Another process's change of the host's writeback settings, of the first part that saw one.
    writeback_changed: Option<String>,
    /// The machine's load, of the first part that had it (ranks of one machine share it).
    host_load: Option<crate::results::HostLoad>,
    /// The run-queue wait of the parts' threads, added up (ranks are processes of their own).
    cpu_wait: Option<crate::results::CpuWait>,
}

/// Where this machine's devices are filed in [`PhaseTotals`] (ranks file theirs by host name).
const THIS_HOST: &str = "";

fn rate(n: f64, secs: f64) -> f64 {
    if secs > 0.0 {
        n / secs
    } else {
        0.0
    }
}

fn add_wait(
    a: Option<crate::results::CpuWait>,
    b: Option<crate::results::CpuWait>,
) -> Option<crate::results::CpuWait> {
    match (a, b) {
        (Some(a), Some(b)) => Some(crate::results::CpuWait {
            run_delay_ns: a.run_delay_ns + b.run_delay_ns,
            on_cpu_ns: a.on_cpu_ns + b.on_cpu_ns,
            threads: a.threads + b.threads,
        }),
        (a, b) => a.or(b),
    }
}

fn add_device(a: Option<DeviceDelta>, b: Option<DeviceDelta>) -> Option<DeviceDelta> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(a), Some(b)) => Some(DeviceDelta {
            read_bytes: a.read_bytes + b.read_bytes,
            write_bytes: a.write_bytes + b.write_bytes,
            read_ios: a.read_ios + b.read_ios,
            write_ios: a.write_ios + b.write_ios,
            discard_bytes: a.discard_bytes + b.discard_bytes,
            flush_ios: a.flush_ios + b.flush_ios,
        }),
    }
}

impl PhaseTotals {
    /// Nothing yet, of the phase called `name`.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            ..Default::default()
        }
    }

    /// The phase's own probes on this machine: its wall time, the process's CPU time over it,
    /// its device counters and how its series is cut. Merged with the workers' parts.
    pub fn probed(name: &str, p: &Probes) -> Self {
        let mut devices = BTreeMap::new();
        devices.insert(THIS_HOST.to_string(), (p.device, p.journal_device));
        Self {
            cut: Some(Cut {
                interval_s: (p.interval_s != 1.0).then_some(p.interval_s),
                ramp_s: None,
            }),
            wall_s: Some(p.wall_s),
            user_s: p.cpu.user_s,
            sys_s: p.cpu.sys_s,
            devices,
            modelled: p.modelled.clone(),
            ..Self::new(name)
        }
    }

    /// One worker's recorder (finished: [`Recorder::finish`]).
    pub fn of_worker(name: &str, r: &Recorder) -> Self {
        let mut t = Self::new(name);
        for (i, s) in r.ops.iter().enumerate() {
            let scheduled = r
                .scheduled
                .get(i)
                .filter(|x| x.count > 0)
                .map(|x| LatencyTotals::of_fast(&x.hist, x.over_2s, x.over_10s));
            let op = OpTotals {
                count: s.count,
                bytes: s.bytes,
                primary: s.def.primary,
                reads: s.def.reads,
                latency: LatencyTotals::of_fast(&s.hist, s.over_2s, s.over_10s),
                scheduled,
            };
            t.bytes += op.bytes;
            if op.primary {
                t.ops += op.count;
                t.latency.merge(&op.latency);
                LatencyTotals::merge_opt(&mut t.scheduled, &op.scheduled);
            }
            t.op_stats
                .entry(s.def.name.to_string())
                .or_default()
                .merge(&op);
        }
        t.series = worker_series(r);
        t.points = r.series.len();
        let mut latency = t.latency.summary();
        latency.hdr.clear();
        t.workers.push(WorkerSummary {
            // Numbered by the order in which parts merge.
            worker: 0,
            ops: t.ops,
            bytes: t.bytes,
            wall_s: r.finished.unwrap_or_default().as_secs_f64(),
            latency,
        });
        t
    }

    /// Rank `rank`'s phase, measured on `host`; `walled` when it stopped at the stonewall.
    pub fn of_rank(rank: u32, host: &str, walled: bool, p: &PhaseResult) -> Result<Self> {
        let mut t = Self::new(&p.name);
        t.cut = Some(Cut {
            interval_s: p.interval_s,
            ramp_s: p.ramp_s,
        });
        (t.wall_s, t.first_done_s) = (Some(p.wall_s), Some(p.wall_s));
        (t.user_s, t.sys_s, t.ops, t.bytes) = (p.user_s, p.sys_s, p.ops, p.bytes);
        t.latency = LatencyTotals::of_summary(&p.latency)?;
        t.scheduled = of_some(&p.scheduled_latency)?;
        for (name, s) in &p.op_stats {
            let op = OpTotals {
                count: s.count,
                bytes: s.bytes,
                primary: s.primary,
                reads: s.reads,
                latency: LatencyTotals::of_summary(&s.latency)?,
                scheduled: of_some(&s.scheduled_latency)?,
            };
            t.op_stats.insert(name.clone(), op);
        }
        t.devices
            .insert(host.to_string(), (p.device, p.journal_device));
        // Every rank cuts its series into the same intervals; a point sits at its index.
        let ivl = p.interval_s.unwrap_or(1.0);
        t.points = p.series.len();
        t.series = (0..t.points)
            .map(
                |i| match p.series.iter().find(|s| (s.t / ivl).round() as usize == i) {
                    Some(s) => Ok(IntervalTotals {
                        ramp: s.ramp,
                        ops: s.ops,
                        bytes: s.bytes,
                        latency: of_some(&s.latency)?,
                        scheduled: of_some(&s.scheduled_latency)?,
                    }),
                    None => Ok(IntervalTotals::default()),
                },
            )
            .collect::<Result<_>>()?;
        if let Some(r) = &p.ramp_totals {
            t.ramp = Some(RampPart {
                seconds: r.seconds,
                ops: r.ops,
                bytes: r.bytes,
                latency: LatencyTotals::of_summary(&r.latency)?,
            });
        }
        t.rate = p.rate.clone();
        t.workers = p.workers.clone();
        t.extras = vec![(p.extra.clone(), p.wall_s)];
        t.stonewall_s = p.stonewall_s;
        t.foreign_cache_drops = p.foreign_cache_drops;
        t.writeback_changed = p.writeback_changed.clone();
        t.host_load = p.host_load;
        t.cpu_wait = p.cpu_wait;
        let mut latency = p.latency.clone();
        latency.hdr.clear();
        t.ranks.push(RankPhase {
            rank,
            host: host.to_string(),
            wall_s: p.wall_s,
            ops: p.ops,
            bytes: p.bytes,
            ops_per_s: rate(p.ops as f64, p.wall_s),
            bytes_per_s: rate(p.bytes as f64, p.wall_s),
            user_s: p.user_s,
            sys_s: p.sys_s,
            latency,
            stonewalled: walled,
        });
        Ok(t)
    }

    /// Adds the part `o` (see the module docs for how each figure combines).
    pub fn merge(&mut self, o: &PhaseTotals) {
        self.cut = self.cut.or(o.cut);
        self.wall_s = max_opt(self.wall_s, o.wall_s, f64::max);
        self.first_done_s = max_opt(self.first_done_s, o.first_done_s, f64::min);
        self.user_s += o.user_s;
        self.sys_s += o.sys_s;
        self.ops += o.ops;
        self.bytes += o.bytes;
        self.latency.merge(&o.latency);
        LatencyTotals::merge_opt(&mut self.scheduled, &o.scheduled);
        for (name, s) in &o.op_stats {
            self.op_stats.entry(name.clone()).or_default().merge(s);
        }
        for (host, d) in &o.devices {
            self.devices.entry(host.clone()).or_insert(*d);
        }
        if self.modelled.0.is_none() && self.modelled.1.is_none() {
            self.modelled = o.modelled.clone();
        }
        if self.series.len() < o.series.len() {
            self.series.resize_with(o.series.len(), Default::default);
        }
        for (a, b) in self.series.iter_mut().zip(&o.series) {
            a.merge(b);
        }
        self.points = self.points.max(o.points);
        self.merge_ramp(o.ramp.as_ref());
        self.merge_numbered(o);
        self.extras.extend(o.extras.iter().cloned());
        self.stonewall_s = self.stonewall_s.or(o.stonewall_s);
        self.foreign_cache_drops = self.foreign_cache_drops.max(o.foreign_cache_drops);
        if self.writeback_changed.is_none() {
            self.writeback_changed = o.writeback_changed.clone();
        }
        self.host_load = self.host_load.or(o.host_load);
        self.cpu_wait = add_wait(self.cpu_wait, o.cpu_wait);
        self.ranks.extend(o.ranks.iter().cloned());
    }

    fn merge_ramp(&mut self, o: Option<&RampPart>) {
        let Some(o) = o else { return };
        let r = self.ramp.get_or_insert_with(Default::default);
        r.seconds = r.seconds.max(o.seconds);
        r.ops += o.ops;
        r.bytes += o.bytes;
        r.latency.merge(&o.latency);
    }

    /// Workers and rate records of `o`, numbered on from this part's.
    fn merge_numbered(&mut self, o: &PhaseTotals) {
        let next = self.workers.len() as u32;
        self.workers.extend(o.workers.iter().map(|w| WorkerSummary {
            worker: next + w.worker,
            ..w.clone()
        }));
        let Some(r) = &o.rate else { return };
        let mine = self.rate.get_or_insert_with(|| RateOutcome {
            unit: r.unit.clone(),
            workers: Vec::new(),
        });
        let next = mine.workers.len() as u32;
        mine.workers.extend(r.workers.iter().map(|w| WorkerRate {
            worker: next + w.worker,
            ..w.clone()
        }));
    }

    /// Leaves the first `n` series intervals (`secs` long) out of every figure as a warm-up:
    /// their operations, bytes and latency buckets come off the phase's figures (the ramp ends
    /// at an interval boundary, so what it held is exactly its intervals) and are kept as the
    /// ramp's totals. For a phase measured here, before it is merged with others.
    pub fn cut_ramp(&mut self, n: usize, secs: f64) {
        if n == 0 {
            return;
        }
        for (t, p) in self.series.iter_mut().enumerate() {
            p.ramp = t < n;
        }
        let (mut r_ops, mut r_bytes) = (0, 0);
        for p in self.series.iter().take(n.min(self.points)) {
            (r_ops, r_bytes) = (r_ops + p.ops, r_bytes + p.bytes);
        }
        let (mut held, mut kept, mut kept_sched) = Default::default();
        for (t, p) in self.series.iter().enumerate() {
            let (into, sched): (&mut LatencyTotals, _) = if t < n {
                (&mut held, None)
            } else {
                (&mut kept, Some(&mut kept_sched))
            };
            if let Some(l) = &p.latency {
                into.merge(l);
            }
            if let (Some(into), Some(l)) = (sched, &p.scheduled) {
                LatencyTotals::merge(into, l);
            }
        }
        self.ops -= r_ops.min(self.ops);
        self.bytes -= r_bytes.min(self.bytes);
        self.latency = kept;
        if self.scheduled.is_some() {
            self.scheduled = Some(kept_sched);
        }
        // With one primary kind (a request loop), its own figures are the phase's.
        let mut primary = self.op_stats.values_mut().filter(|s| s.primary);
        if let (Some(only), None) = (primary.next(), primary.next()) {
            only.count = self.ops;
            only.bytes = only.bytes.saturating_sub(r_bytes);
            only.latency = self.latency.clone();
            if self.scheduled.is_some() {
                only.scheduled.clone_from(&self.scheduled);
            }
        }
        let wall = self.wall_s.unwrap_or(0.0);
        self.ramp = Some(RampPart {
            seconds: secs.min(wall),
            ops: r_ops,
            bytes: r_bytes,
            latency: held,
        });
        self.cut.get_or_insert_with(Cut::default).ramp_s = Some(secs);
        self.wall_s = Some((wall - secs).max(0.0));
    }

    /// The phase's result; `metrics` are its workload's declarations of the `extra` figures
    /// parts bring (how each combines).
    pub fn into_result(self, metrics: &[MetricDef]) -> PhaseResult {
        let wall_s = self.wall_s.unwrap_or(0.0);
        let cut = self.cut.unwrap_or_default();
        let ivl = cut.interval_s.unwrap_or(1.0);
        let op_stats = self
            .op_stats
            .iter()
            .map(|(name, s)| {
                let stats = OpStats {
                    count: s.count,
                    bytes: s.bytes,
                    primary: s.primary,
                    reads: s.reads,
                    latency: s.latency.summary(),
                    scheduled_latency: s.scheduled.as_ref().map(LatencyTotals::summary),
                };
                (name.clone(), stats)
            })
            .collect();
        let series = self.series[..self.points.min(self.series.len())]
            .iter()
            .enumerate()
            .map(|(t, p)| SeriesPoint {
                t: t as f64 * ivl,
                ramp: p.ramp,
                ops: p.ops,
                bytes: p.bytes,
                latency: p.latency.as_ref().map(LatencyTotals::summary),
                scheduled_latency: p.scheduled.as_ref().map(LatencyTotals::summary),
            })
            .collect();
        let (device, journal_device) =
            self.devices.values().fold((None, None), |(d, j), (a, b)| {
                (add_device(d, *a), add_device(j, *b))
            });
        let mut out = PhaseResult {
            name: self.name,
            wall_s,
            user_s: self.user_s,
            sys_s: self.sys_s,
            ops: self.ops,
            bytes: self.bytes,
            ops_per_s: rate(self.ops as f64, wall_s),
            bytes_per_s: rate(self.bytes as f64, wall_s),
            latency: self.latency.summary(),
            scheduled_latency: self.scheduled.as_ref().map(LatencyTotals::summary),
            rate: self.rate,
            op_stats,
            device,
            journal_device,
            device_model: self.modelled.0,
            journal_device_model: self.modelled.1,
            series,
            interval_s: cut.interval_s,
            ramp_s: cut.ramp_s,
            ramp_totals: self.ramp.map(|r| RampTotals {
                seconds: r.seconds,
                ops: r.ops,
                bytes: r.bytes,
                latency: r.latency.summary(),
            }),
            // A table of one worker would repeat the phase.
            workers: if self.workers.len() > 1 {
                self.workers
            } else {
                Vec::new()
            },
            extra: BTreeMap::new(),
            first_done_s: self.first_done_s,
            stonewall_s: self.stonewall_s,
            ranks: self.ranks,
            foreign_cache_drops: self.foreign_cache_drops,
            writeback_changed: self.writeback_changed,
            host_load: self.host_load,
            cpu_wait: self.cpu_wait,
        };
        out.extra = combine_extras(&self.extras, &out, metrics);
        out
    }
}

/// The larger (or, with `f64::min`, the smaller) of two figures either may lack.
fn max_opt(a: Option<f64>, b: Option<f64>, pick: fn(f64, f64) -> f64) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(pick(a, b)),
        (a, b) => a.or(b),
    }
}

fn of_some(s: &Option<LatencySummary>) -> Result<Option<LatencyTotals>> {
    s.as_ref().map(LatencyTotals::of_summary).transpose()
}

/// A worker's series: per interval its operations, bytes and primary latencies (from the
/// closed intervals' buckets), as far as it recorded any.
fn worker_series(r: &Recorder) -> Vec<IntervalTotals> {
    let primary: Vec<bool> = r.ops.iter().map(|s| s.def.primary).collect();
    let scheduled = || {
        r.scheduled
            .iter()
            .zip(&primary)
            .filter(|(_, &p)| p)
            .map(|(s, _)| s)
    };
    let len = scheduled()
        .map(|s| s.intervals.len())
        .chain([r.series.len(), r.intervals.len()])
        .max()
        .unwrap_or(0);
    (0..len)
        .map(|t| {
            let (ops, bytes) = r.series.get(t).copied().unwrap_or_default();
            let buckets = r.intervals.get(t).filter(|b| !b.is_empty());
            let sched: Vec<(u32, u64)> = scheduled()
                .filter_map(|s| s.intervals.get(t))
                .flatten()
                .copied()
                .collect();
            IntervalTotals {
                ramp: false,
                ops,
                bytes,
                latency: buckets.map(|b| LatencyTotals::of_buckets(b)),
                scheduled: (!sched.is_empty()).then(|| LatencyTotals::of_buckets(&sched)),
            }
        })
        .collect()
}

/// Each workload figure combined over the parts as its declaration says: rates are
/// recomputed over the merged wall time from each part's rate × its own wall time; settings
/// every part shares stay as they are; shares of slow requests and CPU efficiency are
/// recomputed from the merged figures; means are averaged over parts; maxima stay maxima,
/// minima minima; counts are summed, as is a figure left undeclared.
fn combine_extras(
    parts: &[(BTreeMap<String, f64>, f64)],
    merged: &PhaseResult,
    metrics: &[MetricDef],
) -> BTreeMap<String, f64> {
    let keys: std::collections::BTreeSet<&String> = parts.iter().flat_map(|p| p.0.keys()).collect();
    let mut out = BTreeMap::new();
    let n_lat = merged.latency.count.max(1) as f64;
    for key in keys {
        let vals: Vec<(f64, f64)> = parts
            .iter()
            .filter_map(|(x, wall)| x.get(key).map(|&v| (v, *wall)))
            .collect();
        let combine = metrics
            .iter()
            .find(|m| m.key == key.as_str())
            .map_or(Combine::Sum, |m| m.combine);
        let values = vals.iter().map(|v| v.0);
        let v = match combine {
            Combine::Sum => values.sum(),
            Combine::Rate => rate(vals.iter().map(|(v, w)| v * w).sum::<f64>(), merged.wall_s),
            Combine::Mean => values.sum::<f64>() / vals.len().max(1) as f64,
            Combine::Max | Combine::Same => values.fold(f64::MIN, f64::max),
            Combine::Min => values.fold(f64::INFINITY, f64::min),
            Combine::ShareOver2s => merged.latency.over_2s as f64 / n_lat,
            Combine::ShareOver10s => merged.latency.over_10s as f64 / n_lat,
            Combine::MbPerCpuS => rate(merged.bytes as f64 / 1e6, merged.user_s + merged.sys_s),
        };
        out.insert(key.clone(), v);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::measure::{Devices, OpDef, PhaseMeter, Progress, Tick};

    /// Deterministic latencies, ns: mostly micro- to milliseconds, a few over 2 s and 10 s.
    fn samples(n: usize) -> Vec<u64> {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                match i % 211 {
                    7 => 2_000_000_000 + x % 5_000_000_000,
                    99 => 10_500_000_000 + x % 1_000_000,
                    _ => 1 + (x >> (x % 32 + 30)),
                }
            })
            .collect()
    }

    fn fast(values: &[u64]) -> LatencyTotals {
        let mut h = FastHistogram::default();
        let (mut o2, mut o10) = (0, 0);
        for &v in values {
            h.record(v);
            o2 += (v > 2_000_000_000) as u64;
            o10 += (v > 10_000_000_000) as u64;
        }
        LatencyTotals::of_fast(&h, o2, o10)
    }

    #[test]
    fn latency_merged_from_parts_is_the_latency_of_all_operations() {
        let all = samples(20_000);
        let whole = fast(&all);
        for n in [1, 2, 3, 7] {
            let mut merged = LatencyTotals::default();
            for part in all.chunks(all.len().div_ceil(n)) {
                merged.merge(&fast(part));
            }
            assert_eq!(merged, whole, "{n} parts");
        }
        let s = whole.summary();
        assert_eq!(s.count, 20_000);
        assert!(s.over_2s > 0 && s.over_10s > 0, "{s:?}");
        let mut h = new_histogram();
        for &v in &all {
            h.saturating_record(v.max(1));
        }
        for (q, got) in [(0.5, s.p50_ns), (0.99, s.p99_ns), (0.999, s.p999_ns)] {
            assert_eq!(got, h.value_at_quantile(q), "p{q}");
        }
        // A stored summary reads back into the very buckets.
        assert_eq!(LatencyTotals::of_summary(&s).unwrap(), whole);
    }

    #[test]
    fn listed_buckets_coalesce_and_count_slow_operations_from_the_buckets() {
        let mut h = FastHistogram::new();
        for v in [1_000, 2_000_000_000, 2_100_000_000, 11_000_000_000] {
            h.record(v);
        }
        let mut list = h.buckets();
        list.reverse();
        list.extend(h.buckets());
        let t = LatencyTotals::of_buckets(&list);
        assert_eq!((t.over_2s, t.over_10s), (4, 2));
        assert_eq!(t.count(), 8);
        assert_eq!(t.buckets.len(), 4);
        assert!(t.buckets.windows(2).all(|w| w[0].0 < w[1].0));
    }

    const DEFS: [OpDef; 2] = [OpDef::primary("op"), OpDef::secondary("part")];

    /// The phase of one worker per slice of `parts`, each value an operation ending in the
    /// second the value says (`v % 3`), so that any split gives the same seconds.
    fn measured(parts: &[&[u64]]) -> PhaseResult {
        let m = PhaseMeter::start("p", &DEFS, &Devices::default(), None, &Progress::hidden());
        let mut rs: Vec<Recorder> = (0..parts.len()).map(|w| m.recorder(w as u32)).collect();
        // One start for all, so that each operation's second is the one its value says.
        let t0 = rs[0].tick();
        for (r, part) in rs.iter_mut().zip(parts) {
            let (op, sub) = (r.op("op"), r.op("part"));
            let per = r.clock().per_sec();
            // Second by second, as time goes (each change of second closes one).
            for &v in (0..3).flat_map(|sec| part.iter().filter(move |&&v| v % 3 == sec)) {
                let end = Tick(t0.0 + (v % 3) * per + 1);
                r.add_tick(op, v, 4096, end);
                r.add_tick(sub, v / 2 + 1, 100, end);
            }
        }
        m.finish(rs)
    }

    /// What does not depend on how the operations were split.
    fn figures(p: &PhaseResult) -> impl PartialEq + std::fmt::Debug {
        (
            (p.ops, p.bytes, p.latency.clone()),
            p.op_stats.clone(),
            p.series.clone(),
        )
    }

    #[test]
    fn workers_merged_give_the_phase_of_all_their_operations() {
        let all = samples(6_000);
        let one = measured(&[&all]);
        let three = measured(&[&all[..1000], &all[1000..4500], &all[4500..]]);
        assert_eq!(one.ops, 6_000);
        assert_eq!(one.bytes, 6_000 * (4096 + 100));
        assert_eq!(figures(&three), figures(&one));
        let ids: Vec<u32> = three.workers.iter().map(|w| w.worker).collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(three.workers.iter().map(|w| w.ops).sum::<u64>(), 6_000);
        assert!(one.workers.is_empty(), "a lone worker has no table");
    }

    /// Rank `rank`'s part on `host`, with its own device counters.
    fn rank_part(rank: u32, host: &str, values: &[u64]) -> PhaseTotals {
        let mut p = measured(&[values]);
        // CPU seconds that add up exactly in any order (sums of floats in general do not).
        (p.user_s, p.sys_s) = (0.25 * rank as f64, 0.5);
        p.device = Some(DeviceDelta {
            write_bytes: 1 << rank,
            ..Default::default()
        });
        PhaseTotals::of_rank(rank, host, false, &p).unwrap()
    }

    #[test]
    fn ranks_merged_in_any_grouping_give_the_phase_of_all_their_operations() {
        let all = samples(6_000);
        let (a, b, c) = (&all[..2000], &all[2000..2500], &all[2500..]);
        let parts = [
            rank_part(0, "x", a),
            rank_part(1, "x", b),
            rank_part(2, "y", c),
        ];
        let mut left = PhaseTotals::new("p");
        for p in &parts {
            left.merge(p);
        }
        let mut bc = parts[1].clone();
        bc.merge(&parts[2]);
        let mut right = parts[0].clone();
        right.merge(&bc);
        assert_eq!(left, right, "merging is associative");
        let merged = left.into_result(&[]);
        assert_eq!(figures(&merged), figures(&measured(&[&all])));
        // Host x's counters once (rank 0's, the first of x), host y's once.
        assert_eq!(merged.device.unwrap().write_bytes, 1 + 4);
        let ranks: Vec<(u32, u64)> = merged.ranks.iter().map(|r| (r.rank, r.ops)).collect();
        assert_eq!(ranks, [(0, 2000), (1, 500), (2, 3500)]);
        assert!(merged.first_done_s.unwrap() <= merged.wall_s);
    }

    #[test]
    fn a_ramp_comes_off_the_figures_and_is_kept_apart() {
        let all = samples(3_000);
        let m = PhaseMeter::start("p", &DEFS, &Devices::default(), None, &Progress::hidden());
        let mut r = m.recorder(0);
        let op = r.op("op");
        let t0 = r.tick();
        let per = r.clock().per_sec();
        for (i, &v) in all.iter().enumerate() {
            r.add_tick(op, v, 10, Tick(t0.0 + (i as u64 / 1000) * per + 1));
        }
        r.finish();
        let probes = Probes {
            wall_s: 3.0,
            interval_s: 1.0,
            ..Default::default()
        };
        let mut t = PhaseTotals::probed("p", &probes);
        t.merge(&PhaseTotals::of_worker("p", &r));
        t.cut_ramp(1, 1.0);
        let p = t.into_result(&[]);
        let ramp = p.ramp_totals.as_ref().unwrap();
        assert_eq!((ramp.ops, p.ops), (1000, 2000));
        assert_eq!(ramp.latency.count + p.latency.count, 3000);
        assert_eq!(p.op_stats["op"].latency, p.latency);
        assert_eq!((p.wall_s, ramp.seconds, p.ramp_s), (2.0, 1.0, Some(1.0)));
        let flags: Vec<bool> = p.series.iter().map(|s| s.ramp).collect();
        assert_eq!(flags, [true, false, false]);
        drop(m);
    }
}
