//! `fsgauge devices check`: micro-benchmarks that hold a device (emulated, or a real one,
//! read-only) against the model — QD1 random 4K reads over the whole stroke and over 1% of it,
//! sequential 1M reads at the outer and inner zones, and optionally a write + flush rate —
//! the read pairs of [`super::pairs`] (the seek curve, and same-track reads for the
//! revolution) — each time-boxed, with the model's figure for the same sequence of requests,
//! the demerit of the random-read service times (Ruemmler & Wilkes) and, on an emulated
//! device, the server's lateness over each.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::pairs::{self, PairRun, Placement, SameTrack, SeekPoint};
use super::timed::{self, Percentile, Timed};
use crate::base::sys::rt;
use crate::base::sys::AlignedBuf;
use crate::device::profile::{Ablations, Profile};
use crate::device::stats::{Lateness, Snapshot};
use crate::device::EmulatedDevice;
use crate::device::Request;
use crate::device::{demerit, DeviceModel};
use crate::measure::{Clock, Tick};

const MIB: u64 = 1 << 20;

/// What to measure.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Time box of each micro-benchmark.
    pub seconds: f64,
    /// Also measure a write + flush rate (emulated devices only).
    pub write: bool,
    pub seed: u64,
}

/// One micro-benchmark's result.
#[derive(Debug, Clone, Serialize)]
pub struct Bench {
    pub name: String,
    /// "ms" (mean per request) or "MB/s".
    pub unit: &'static str,
    pub measured: f64,
    /// The model's figure for the same requests (None: no model, or unbounded).
    pub modelled: Option<f64>,
    /// measured / modelled − 1.
    pub error: Option<f64>,
    pub requests: u64,
    /// Demerit of measured against modelled service times (random reads only).
    pub demerit: Option<f64>,
    /// The median and 99th percentile of the measured request times, ms (from the timed
    /// loop's latency histogram; None for a figure not timed per request).
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// The server's lateness over this benchmark (emulated devices only).
    pub lateness: Option<Lateness>,
    /// The server's CPU time per request over this benchmark, µs (where measured).
    pub server_cpu_us_per_request: Option<f64>,
}

/// The whole check.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub target: String,
    pub profile: Option<String>,
    pub device: PathBuf,
    pub size_bytes: u64,
    pub benches: Vec<Bench>,
    /// The server's lateness over the whole check.
    pub lateness: Option<Lateness>,
    /// The server's CPU time per request, µs.
    pub server_cpu_us_per_request: Option<f64>,
    pub server_requests: Option<u64>,
    /// The seek curve: per distance, the mean time of the second read of a pair, measured and
    /// modelled.
    pub seek_curve: Vec<SeekPoint>,
    /// Same-track reads: their mean and the revolution estimated from them.
    pub same_track: Option<SameTrack>,
    /// The pairs' every read, for `devices fit`.
    #[serde(skip)]
    pub runs: PairRuns,
}

/// The reads of the pair benchmarks, as measured.
#[derive(Debug, Clone, Default)]
pub struct PairRuns {
    pub seek: PairRun,
    pub same_track: PairRun,
}

impl CheckReport {
    /// A bench's measured figure by name.
    pub fn measured(&self, name: &str) -> Option<f64> {
        self.benches
            .iter()
            .find(|b| b.name == name)
            .map(|b| b.measured)
    }
}

/// Names of the sequential benchmarks, outer and inner zone.
pub const SEQ_OUTER: &str = "sequential 1M read, outer zone";
pub const SEQ_INNER: &str = "sequential 1M read, inner zone";

/// The device under check and, for an emulated one, its server.
pub struct Target<'a> {
    pub device: PathBuf,
    pub size: u64,
    pub model: Option<(Profile, Ablations, u64)>,
    pub server: Option<&'a mut EmulatedDevice>,
}

fn open_device(dev: &Path, write: bool) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_DIRECT)
        .open(dev)
        .with_context(|| format!("opening {} with O_DIRECT", dev.display()))
}

/// The size of a block device or file, bytes.
pub fn device_size(dev: &Path) -> Result<u64> {
    let mut f = File::open(dev).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
            " (root is needed to read a block device; as root, a device cgroup or a container may still forbid it: check `dd if=DEV of=/dev/null count=1`)"
        } else {
            ""
        };
        anyhow::Error::from(e).context(format!("opening {}{hint}", dev.display()))
    })?;
    f.seek(SeekFrom::End(0))
        .with_context(|| format!("finding the size of {}", dev.display()))
}

fn io_error(t: &mut Target<'_>, e: crate::base::sys::Errno, what: &str) -> anyhow::Error {
    let base = anyhow!("{what} on {} failed: {e}", t.device.display());
    match t.server.as_mut().map(|s| s.check()) {
        Some(Err(dead)) => dead.context(base),
        _ => base,
    }
}

fn snapshot(t: &mut Target<'_>) -> Result<Option<Snapshot>> {
    match t.server.as_mut() {
        Some(s) => Ok(Some(s.stats()?)),
        None => Ok(None),
    }
}

/// The server's stats and CPU time at one moment (None: no server).
struct Mark {
    snap: Option<Snapshot>,
    cpu: Option<f64>,
}

fn mark(t: &mut Target<'_>) -> Result<Mark> {
    Ok(Mark {
        snap: snapshot(t)?,
        cpu: server_cpu(t),
    })
}

fn server_cpu(t: &Target<'_>) -> Option<f64> {
    t.server
        .as_ref()
        .and_then(|s| rt::process_cpu_seconds(s.server_pid()))
}

/// The server's CPU time per request, µs, from its CPU seconds before and after `requests`
/// (None without both readings, without requests, or when the time went down: not the same
/// process).
pub fn cpu_us_per_request(before: Option<f64>, after: Option<f64>, requests: u64) -> Option<f64> {
    match (before, after) {
        (Some(a), Some(b)) if requests > 0 && b >= a => Some((b - a) * 1e6 / requests as f64),
        _ => None,
    }
}

/// The server over a span of the check.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    pub lateness: Lateness,
    /// Its CPU time per request, µs (where measured).
    pub cpu_us: Option<f64>,
    pub requests: u64,
}

/// Runs `work` and returns the server's figures over it (None: no server).
pub fn served_over(
    t: &mut Target<'_>,
    work: impl FnOnce() -> Result<()>,
) -> Result<Option<Served>> {
    let before = mark(t)?;
    work()?;
    since(t, &before)
}

/// The server since `m` (None: no server).
fn since(t: &mut Target<'_>, m: &Mark) -> Result<Option<Served>> {
    let (Some(b), Some(a)) = (&m.snap, snapshot(t)?) else {
        return Ok(None);
    };
    let d = a
        .delta(b)
        .map_err(|e| anyhow!("device server stats: {e}"))?;
    Ok(Some(Served {
        lateness: d.lateness(),
        cpu_us: cpu_us_per_request(m.cpu, server_cpu(t), d.requests()),
        requests: d.requests(),
    }))
}

/// Where the inner-zone sequential benchmark starts on a device of `size` bytes: an eighth
/// of it (at most 512 MiB) before its end, on a MiB.
pub fn inner_zone_start(size: u64) -> u64 {
    size.saturating_sub(((size / 8) / MIB * MIB).min(512 * MIB)) / MIB * MIB
}

/// The rate of `n` sequential 1 MiB reads from `start` on the model's virtual clock, one
/// after another as the benchmark issues them, MB/s (None for no time taken).
pub fn sequential_on_model(m: &mut DeviceModel, start: u64, n: u64) -> Option<f64> {
    let mut now = 0;
    for i in 0..n {
        now = m
            .service(Request::read(i, start + i * MIB, MIB), now)
            .done_ns;
    }
    (now > 0).then(|| (n * MIB) as f64 / (now as f64 / 1e9) / 1e6)
}

fn model_of(t: &Target<'_>) -> Result<Option<DeviceModel>> {
    match &t.model {
        Some((p, a, offset)) => Ok(Some(
            DeviceModel::new(p, a)
                .map_err(|m| anyhow!("profile {}: {m}", p.name))?
                .with_offset(*offset),
        )),
        None => Ok(None),
    }
}

fn ratio(measured: f64, modelled: Option<f64>) -> Option<f64> {
    modelled
        .filter(|m| *m > 0.0 && m.is_finite())
        .map(|m| measured / m - 1.0)
}

/// Runs the micro-benchmarks. The measuring thread runs real-time meanwhile (when allowed), so
/// that on a busy machine its own wake-ups do not add to the times it measures.
pub fn run(t: Target<'_>, target: &str, opts: &CheckOptions) -> Result<CheckReport> {
    let rt_on = rt::set_realtime(5).is_ok();
    let r = run_benches(t, target, opts);
    if rt_on {
        let _ = rt::set_normal();
    }
    r
}

fn run_benches(mut t: Target<'_>, target: &str, opts: &CheckOptions) -> Result<CheckReport> {
    let f = open_device(&t.device, false)?;
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let mut benches = Vec::new();
    let first = mark(&mut t)?;
    for (name, span) in [
        ("QD1 random 4K read, whole stroke", t.size),
        ("QD1 random 4K read, first 1%", (t.size / 100).max(4096)),
    ] {
        benches.push(random_reads(&mut t, &f, name, span, opts, &mut rng)?);
    }
    for (name, start) in [(SEQ_OUTER, 0), (SEQ_INNER, inner_zone_start(t.size))] {
        benches.push(sequential(&mut t, &f, name, start, opts)?);
    }
    let (runs, seek_curve, same_track) = pair_benches(&mut t, &f, opts, &mut rng)?;
    if opts.write {
        benches.push(write_flush(&mut t, opts, &mut rng)?);
    }
    let whole = since(&mut t, &first)?;
    Ok(CheckReport {
        target: target.into(),
        profile: t.model.as_ref().map(|(p, a, _)| {
            if a.is_none() {
                p.name.clone()
            } else {
                format!("{}:{a}", p.name)
            }
        }),
        device: t.device.clone(),
        size_bytes: t.size,
        benches,
        lateness: whole.map(|w| w.lateness),
        server_cpu_us_per_request: whole.and_then(|w| w.cpu_us),
        server_requests: whole.map(|w| w.requests),
        seek_curve,
        same_track,
        runs,
    })
}

/// A benchmark's figures from its timed loop, the model's figure for the same requests and
/// the server's lateness and CPU time since `before`.
struct Measured<'a> {
    name: &'a str,
    unit: &'static str,
    timed: Timed,
    measured: f64,
    modelled: Option<f64>,
    demerit: Option<f64>,
}

fn bench(t: &mut Target<'_>, before: &Mark, m: Measured<'_>) -> Result<Bench> {
    let served = since(t, before)?;
    Ok(Bench {
        name: m.name.into(),
        unit: m.unit,
        measured: m.measured,
        modelled: m.modelled,
        error: ratio(m.measured, m.modelled),
        requests: m.timed.requests(),
        demerit: m.demerit,
        p50_ms: m.timed.percentile_ms(Percentile::P50),
        p99_ms: m.timed.percentile_ms(Percentile::P99),
        lateness: served.map(|s| s.lateness),
        server_cpu_us_per_request: served.and_then(|s| s.cpu_us),
    })
}

/// QD1 random 4 KiB reads in the first `span` bytes, with the model's service times for the
/// same offsets, one at a time.
fn random_reads(
    t: &mut Target<'_>,
    f: &File,
    name: &str,
    span: u64,
    opts: &CheckOptions,
    rng: &mut ChaCha8Rng,
) -> Result<Bench> {
    let mut buf = AlignedBuf::zeroed(4096);
    let blocks = (span / 4096).max(1);
    let mut offsets = Vec::new();
    let before = mark(t)?;
    let timed = timed::run(name, opts.seconds, || {
        let off = rng.gen_range(0..blocks) * 4096;
        crate::base::sys::pread(f.as_fd(), &mut buf, off)
            .map_err(|e| io_error(t, e, "a 4 KiB read"))?;
        offsets.push(off);
        Ok(Some(4096))
    })?;
    let modelled: Option<Vec<f64>> = model_of(t)?.map(|mut m| {
        let mut now = 0;
        offsets
            .iter()
            .enumerate()
            .map(|(i, &off)| {
                let d = m.service(Request::read(i as u64, off, 4096), now);
                now = d.done_ns;
                d.response_ns() as f64 / 1e6
            })
            .collect()
    });
    let mmean = modelled
        .as_ref()
        .map(|v| v.iter().sum::<f64>() / v.len().max(1) as f64);
    let measured: Vec<f64> = timed.times.iter().map(|&ns| ns as f64 / 1e6).collect();
    // Against a model that takes no time (ram) the demerit has no meaning.
    let demerit = modelled
        .as_ref()
        .filter(|_| mmean.is_some_and(|m| m > 0.0))
        .and_then(|v| demerit(&measured, v));
    let mean = timed.mean_ms();
    bench(
        t,
        &before,
        Measured {
            name,
            unit: "ms",
            timed,
            measured: mean,
            modelled: mmean,
            demerit,
        },
    )
}

/// Sequential 1 MiB reads from `start` (to the device's end at most), with the model's rate
/// for as many.
fn sequential(
    t: &mut Target<'_>,
    f: &File,
    name: &str,
    start: u64,
    opts: &CheckOptions,
) -> Result<Bench> {
    let mut buf = AlignedBuf::zeroed(MIB as usize);
    let mut off = start;
    let size = t.size;
    let before = mark(t)?;
    let timed = timed::run(name, opts.seconds, || {
        if off + MIB > size {
            return Ok(None);
        }
        crate::base::sys::pread(f.as_fd(), &mut buf, off)
            .map_err(|e| io_error(t, e, "a 1 MiB read"))?;
        off += MIB;
        Ok(Some(MIB))
    })?;
    let n = timed.requests();
    let modelled = model_of(t)?.and_then(|mut m| sequential_on_model(&mut m, start, n));
    let rate = timed.rate_mb_s();
    bench(
        t,
        &before,
        Measured {
            name,
            unit: "MB/s",
            timed,
            measured: rate,
            modelled,
            demerit: None,
        },
    )
}

/// The device as a [`pairs::Reader`]: O_DIRECT reads timed on [`crate::measure`]'s
/// operation clock.
struct DeviceReader<'a, 'b> {
    t: &'a mut Target<'b>,
    f: &'a File,
    buf: AlignedBuf,
    clock: Clock,
    origin: Tick,
}

impl pairs::Reader for DeviceReader<'_, '_> {
    fn now_ns(&mut self) -> u64 {
        self.clock.ns(self.origin, self.clock.now())
    }
    fn read(&mut self, offset: u64) -> Result<u64> {
        let t0 = self.clock.now();
        crate::base::sys::pread(self.f.as_fd(), &mut self.buf, offset)
            .map_err(|e| io_error(self.t, e, "a 4 KiB read"))?;
        Ok(self.clock.ns(t0, self.clock.now()))
    }
}

/// Where the pairs go: on the model's tracks and cylinders when there is a rotating disk's
/// model, else by bytes.
fn placement(t: &Target<'_>) -> Result<Placement> {
    let geo = model_of(t)?.and_then(|m| m.hdd().map(|h| h.geometry().clone()));
    let offset = t.model.as_ref().map_or(0, |m| m.2);
    Ok(Placement::new(t.size, geo.map(|g| (g, offset))))
}

/// The seek curve and the same-track reads, each for `--seconds`, with the model's times for
/// the same requests.
fn pair_benches(
    t: &mut Target<'_>,
    f: &File,
    opts: &CheckOptions,
    rng: &mut ChaCha8Rng,
) -> Result<(PairRuns, Vec<SeekPoint>, Option<SameTrack>)> {
    let place = placement(t)?;
    let ns = (opts.seconds * 1e9) as u64;
    let clock = Clock::new(Instant::now());
    let mut r = DeviceReader {
        t,
        f,
        buf: AlignedBuf::zeroed(pairs::BLOCK as usize),
        clock,
        origin: clock.now(),
    };
    let seek = pairs::seek_curve(&mut r, &place, ns, rng)?;
    let same = pairs::same_track(&mut r, &place, ns, rng)?;
    let replay = |run: &PairRun| -> Result<Option<Vec<u64>>> {
        Ok(model_of(t)?.map(|m| pairs::replay(m, &run.reads)))
    };
    let points = pairs::seek_points(&seek, replay(&seek)?.as_deref(), &place);
    let summary = pairs::same_track_summary(&same, replay(&same)?.as_deref());
    Ok((
        PairRuns {
            seek,
            same_track: same,
        },
        points,
        summary,
    ))
}

/// 4 KiB writes at random places, each followed by a cache flush (fdatasync of the device).
fn write_flush(t: &mut Target<'_>, opts: &CheckOptions, rng: &mut ChaCha8Rng) -> Result<Bench> {
    const NAME: &str = "QD1 random 4K write + flush";
    let f = open_device(&t.device, true)?;
    let mut buf = AlignedBuf::zeroed(4096);
    buf.fill(0x5a);
    let blocks = (t.size / 4096).max(1);
    let mut offsets = Vec::new();
    let before = mark(t)?;
    let timed = timed::run(NAME, opts.seconds, || {
        let off = rng.gen_range(0..blocks) * 4096;
        crate::base::sys::pwrite(f.as_fd(), &buf, off)
            .map_err(|e| io_error(t, e, "a 4 KiB write"))?;
        nix::unistd::fdatasync(std::os::fd::AsRawFd::as_raw_fd(&f))
            .map_err(|e| io_error(t, e, "a flush (fdatasync)"))?;
        offsets.push(off);
        Ok(Some(4096))
    })?;
    let modelled = model_of(t)?.map(|mut m| {
        let mut now = 0;
        let mut total = 0u64;
        for (i, &off) in offsets.iter().enumerate() {
            let w = m.service(Request::write(2 * i as u64, off, 4096), now);
            let fl = m.service(Request::flush(2 * i as u64 + 1), w.done_ns);
            total += fl.done_ns - now;
            now = fl.done_ns;
        }
        total as f64 / offsets.len().max(1) as f64 / 1e6
    });
    let mean = timed.mean_ms();
    bench(
        t,
        &before,
        Measured {
            name: NAME,
            unit: "ms",
            timed,
            measured: mean,
            modelled,
            demerit: None,
        },
    )
}

/// Waits a moment for the kernel to settle a freshly attached device (udev, partition scan).
pub fn settle() {
    std::thread::sleep(Duration::from_millis(100));
}

#[cfg(test)]
mod tests {
    use super::cpu_us_per_request;

    #[test]
    fn cpu_per_request_is_the_cpu_time_over_the_requests_in_microseconds() {
        assert_eq!(cpu_us_per_request(Some(1.0), Some(1.5), 1000), Some(500.0));
        assert_eq!(cpu_us_per_request(Some(2.0), Some(2.0), 10), Some(0.0));
    }

    #[test]
    fn cpu_per_request_is_none_without_requests_readings_or_with_time_going_down() {
        assert_eq!(cpu_us_per_request(Some(1.0), Some(1.5), 0), None);
        assert_eq!(cpu_us_per_request(None, Some(1.5), 10), None);
        assert_eq!(cpu_us_per_request(Some(1.0), None, 10), None);
        assert_eq!(cpu_us_per_request(Some(2.0), Some(1.0), 10), None);
    }
}
