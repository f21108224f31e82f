//! The result schema, version 1 (`fsgauge.run/1`): one JSON document per run, the source of
//! truth for every table, plot and comparison made later. Fields are only ever added within a
//! schema version, never renamed; readers ignore fields they do not know.

pub mod clock;
pub mod cpuwait;
pub mod crash;
pub mod device;
mod env;
mod host;
pub mod metric;
mod store;
mod study;
pub mod tables;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use env::{
    differ_text, env_diff, env_fields, env_spread, BlockQueue, BuildInfo, Difference, Environment,
    Spread,
};
pub use host::HostInfo;
pub use metric::{Better, Combine, MetricDef};
pub use store::{
    check_dir_for, check_out_dir, load, load_dir, parse_result, unsaved, unsaved_exit,
    write_result, DirResults, ResultFile, Skipped, Unsaved,
};
pub use study::{Compares, Looks, Question, StudyInfo, DEFAULT_EPSILON};

/// The schema tag every run document carries.
pub const SCHEMA: &str = "fsgauge.run/1";

/// One run: a testbed, a workload, a repetition.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunResult {
    /// Always [`SCHEMA`].
    pub schema: String,
    pub tool: ToolInfo,
    pub host: HostInfo,
    pub testbed: TestbedInfo,
    /// The workload's kind and every parameter, defaults filled in.
    pub workload: WorkloadInfo,
    /// Repetition number, from 0.
    pub rep: u32,
    /// Seed of every random choice the run made.
    pub seed: u64,
    /// RFC 3339 UTC time the run started.
    pub started_at: String,
    /// Hash of the run's full specification (testbed, workload, conditions, seed rule, rep):
    /// equal hashes mean the same experiment.
    pub spec_hash: String,
    /// Conditioning applied to the run: cold-cache mode, memory limit, memory charger.
    pub conditions: Conditions,
    pub phases: Vec<PhaseResult>,
    /// Block layout and free-space snapshot, when `--layout` was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<serde_json::Value>,
    /// Anything that went wrong without stopping the run, and warnings about the setup.
    #[serde(default)]
    pub errors: Vec<String>,
    /// Peak resident memory of fsgauge itself during the run, bytes.
    #[serde(default)]
    pub tool_peak_rss: u64,
    /// How the run was spread over MPI ranks (runs under `mpirun` only): the phases then hold
    /// every rank's operations, summed, with histograms merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi: Option<MpiInfo>,
    /// Settings that explain differences between runs (sysctls, block queues, CPU, tool and
    /// mkfs versions); absent in results from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    /// The plan the run was part of and the questions it asks (plan runs only); not part of
    /// the spec hash: a question added later does not make finished runs new experiments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub study: Option<StudyInfo>,
    /// What the run's crash points found (`--crash-points` only): states judged, failures by
    /// class, each failure's replay command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash: Option<crash::CrashReport>,
    /// Why the earlier attempts of this run were set aside, one line each (a plan's run that
    /// another process disturbed is made again: see [`RunResult::disturbed`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<String>,
}

/// What a run produced and what defined it; [`RunResult::assemble`] adds what every result
/// carries (schema, tool, host, fsgauge's own peak memory).
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub testbed: TestbedInfo,
    pub workload: WorkloadInfo,
    pub rep: u32,
    pub seed: u64,
    /// When the run started.
    pub started: std::time::SystemTime,
    /// Everything that defines the run, hashed into [`RunResult::spec_hash`] by [`spec_hash`].
    pub spec: serde_json::Value,
    pub conditions: Conditions,
    pub phases: Vec<PhaseResult>,
    pub layout: Option<serde_json::Value>,
    pub errors: Vec<String>,
    pub mpi: Option<MpiInfo>,
    /// The machine settings that explain a figure, read once after the measured phases.
    pub environment: Option<Environment>,
    /// The crash points' report, when the run had them.
    pub crash: Option<crash::CrashReport>,
}

impl RunResult {
    /// Why a run's figures measure a neighbour too: another process dropped the kernel's caches
    /// (`drop_caches`) during one of its phases, so the phase read back what it had cached and
    /// wrote what the drop's `sync` forced out, or changed the host's writeback settings
    /// (`PhaseResult::writeback_changed`). A plan's run is made again (`lab::plan::execute`),
    /// what was set aside said in [`RunResult::set_aside`]; a bench run says so.
    pub fn disturbed(&self) -> Option<String> {
        let hit: Vec<String> = self
            .phases
            .iter()
            .filter(|p| p.foreign_cache_drops > 0)
            .map(|p| format!("{} ({}×)", p.name, p.foreign_cache_drops))
            .collect();
        let drops = (!hit.is_empty()).then(|| {
            format!(
                "another process dropped the kernel's caches during phase {}",
                hit.join(", ")
            )
        });
        let settings = self.phases.iter().filter_map(|p| {
            p.writeback_changed
                .as_ref()
                .map(|w| format!("{} (phase {})", w, p.name))
        });
        let all: Vec<String> = drops.into_iter().chain(settings).collect();
        (!all.is_empty()).then(|| all.join("; "))
    }

    /// The one place a result document is put together.
    pub fn assemble(r: RunRecord) -> Self {
        let result = RunResult {
            schema: SCHEMA.into(),
            tool: ToolInfo::current(),
            host: HostInfo::current(),
            testbed: r.testbed,
            workload: r.workload,
            rep: r.rep,
            seed: r.seed,
            started_at: humantime::format_rfc3339_seconds(r.started).to_string(),
            spec_hash: spec_hash(&r.spec),
            conditions: r.conditions,
            phases: r.phases,
            layout: r.layout,
            errors: r.errors,
            tool_peak_rss: crate::base::sys::proc::own_peak_rss(),
            mpi: r.mpi,
            environment: r.environment,
            study: None,
            crash: r.crash,
            set_aside: Vec::new(),
        };
        // Every figure a workload records is declared next to its operations (so reports read
        // its unit and direction); the integration tests run every workload in debug builds.
        debug_assert!(
            result.undeclared_metrics().is_empty(),
            "the {} workload records undeclared figures {:?}; add them to its METRICS",
            result.workload.kind,
            result.undeclared_metrics()
        );
        result
    }
}

impl RunResult {
    /// The identity of the run this document records: SHA-256 over where and when it ran
    /// (host, start second), what it ran (spec hash, testbed, workload, seed, repetition) and
    /// what it measured (every phase's figures). A copy of the file shares it; two real runs
    /// never do, because no two runs measure the same nanoseconds. The `study` is left out,
    /// since `run --resume` rewrites it in place.
    pub fn identity(&self) -> String {
        use sha2::{Digest, Sha256};
        let key = serde_json::json!([
            self.host,
            self.started_at,
            self.spec_hash,
            self.testbed.label,
            self.workload.kind,
            self.seed,
            self.rep,
            self.phases,
        ]);
        let digest = Sha256::digest(key.to_string().as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The spec hash of a run: SHA-256 of the JSON text of everything that defines it, in hex.
/// Equal hashes are the same experiment (plans skip runs whose hash has a result already).
pub fn spec_hash(spec: &serde_json::Value) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(spec.to_string().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// An MPI run: its ranks, where they ran, and the rules they ran under.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct MpiInfo {
    /// Number of ranks (processes), each running the workload's workers.
    pub ranks: u32,
    /// `unique-dir` (each rank its own subtree, as mdtest -u) or `shared-dir` (one directory).
    pub dir_mode: String,
    /// Stonewall time limit, seconds: every rank stops a phase when the first reaches it.
    pub stonewall_s: Option<f64>,
    /// Read and stat phases of rank r used the files rank r+1 wrote (mdtest -N 1).
    pub read_neighbour: bool,
    /// The MPI library's own version string.
    pub library: String,
    /// Every rank: its number, host and process id.
    pub rank_hosts: Vec<RankHost>,
}

/// Where one rank ran.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RankHost {
    pub rank: u32,
    pub host: String,
    pub pid: u32,
}

/// One rank's share of a phase of an MPI run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RankPhase {
    pub rank: u32,
    pub host: String,
    /// Seconds from the common start (after the barrier) until this rank finished.
    pub wall_s: f64,
    pub ops: u64,
    pub bytes: u64,
    pub ops_per_s: f64,
    pub bytes_per_s: f64,
    /// CPU time of this rank's process over the phase, seconds.
    pub user_s: f64,
    pub sys_s: f64,
    /// Latency of this rank's primary operations (its histogram is merged into the phase's).
    pub latency: LatencySummary,
    /// This rank stopped at the stonewall, before its work was done.
    #[serde(default)]
    pub stonewalled: bool,
}

/// Name and version of the tool that made a result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
}

impl ToolInfo {
    pub fn current() -> Self {
        Self {
            name: env!("CARGO_PKG_NAME").to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// Where a run ran: a testbed fsgauge built, or an existing directory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct TestbedInfo {
    /// Label used in tables (`ext4`, `ext4-nodelalloc`, `dir`).
    pub label: String,
    /// Filesystem kind (ext2/ext3/ext4/xfs/btrfs, or what statfs reported for `--dir`).
    pub fs: String,
    /// Filesystem size in bytes.
    pub size: u64,
    /// The exact mkfs command line, as run (empty for `--dir`).
    pub mkfs_args: Vec<String>,
    /// Mount options as passed to mount(2), including ones fsgauge added (logdev, journal_path).
    pub mount_options: String,
    /// External journal, `ram:64M` / `file:64M`.
    pub journal: Option<String>,
    /// Memory limit in bytes, when one applied.
    pub memory_limit: Option<u64>,
    /// `file`, `ram`, `device` or `dir`.
    pub backing: String,
    /// The block device the filesystem lives on, when known.
    pub device: Option<String>,
    /// Whether the loop device really did direct I/O on its backing file.
    pub loop_direct_io: Option<bool>,
    /// How the image's blocks were allocated on the host (`full` or `sparse`); absent for a
    /// `--device`, a `--dir` and in results written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_alloc: Option<String>,
    /// Where the filesystem was mounted (or the `--dir` path).
    pub path: String,
    /// The emulated disk the image was served through (`--device-model`); absent on this
    /// machine's own storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_model: Option<device::DeviceModelInfo>,
    /// The emulated disk of the external journal (`--journal-device-model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_device_model: Option<device::DeviceModelInfo>,
    /// How the run's aged starting state was made, when its aging used the image cache
    /// (`[age] keep_image`, `age --keep-image`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aged_image: Option<AgedStart>,
}

/// How a run's aged starting state was made with the image cache (see
/// [`crate::testbed::images`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AgedStart {
    /// The image cache's key of the aging.
    pub key: String,
    /// `aged` (aged in this run, then kept), `image` (a copy of the kept image) or
    /// `image-overlay` (the kept image served by a device server as a copy-on-write overlay,
    /// never written; on a plain testbed by a `ram` disk, see `device_model`).
    pub from: String,
    /// Seconds the aging took (`aged`), or building the testbed from the image (`image`,
    /// `image-overlay`): from finding the image to the mounted testbed.
    pub seconds: f64,
    /// The digest of the starting state's contents: every non-zero 4 KiB block of the
    /// filesystem's image with its offset (`sha256:HEX`).
    pub digest: String,
}

impl AgedStart {
    /// `from` of a start served as an overlay over the kept image.
    pub const OVERLAY: &'static str = "image-overlay";

    /// "aged in X s" / "from image KEY in Y s" / "from image KEY (overlay) in Y s".
    pub fn describe(&self) -> String {
        match self.from.as_str() {
            "image" => format!("from image {} in {:.2} s", self.key, self.seconds),
            Self::OVERLAY => format!("from image {} (overlay) in {:.2} s", self.key, self.seconds),
            _ => format!("aged in {:.2} s, kept as image {}", self.seconds, self.key),
        }
    }
}

/// A workload's identity and parameters.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkloadInfo {
    pub kind: String,
    /// Every parameter under its plan-file name, defaults filled in.
    pub params: serde_json::Value,
    /// The declarations of the figures the workload records in its phases' `extra` (unit,
    /// direction, rate), so that reports read them from the result rather than guess them.
    /// Absent in results written before it was added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<MetricDef>,
    /// The list-valued parameters that are sweep axes, outermost first, as the workload
    /// declares them. Absent in results written before it was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_axes: Option<Vec<String>>,
    /// The parameter that counts the workload's concurrent workers (threads, client processes): report
    /// tables and plots draw a phase's throughput along it. Absent when the workload declares
    /// none, and in results written before it was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_axis: Option<String>,
    /// The parameters that are sizes in bytes (labels show them as `4K`, `1M`). Absent in
    /// results written before it was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_params: Option<Vec<String>>,
}

impl WorkloadInfo {
    /// The declaration of an `extra` figure, when the result carries one.
    pub fn metric(&self, key: &str) -> Option<&MetricDef> {
        self.metrics.iter().find(|m| m.key == key)
    }

    /// Whether the workload declared the parameter a size in bytes.
    pub fn is_size(&self, param: &str) -> bool {
        self.size_params
            .as_ref()
            .is_some_and(|s| s.iter().any(|k| k == param))
    }
}

impl RunResult {
    /// The `extra` figures of the phases that the workload did not declare, each once: a
    /// workload must declare every figure it records, so reports never have to guess.
    pub fn undeclared_metrics(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for k in self.phases.iter().flat_map(|p| p.extra.keys()) {
            if self.workload.metric(k).is_none() && !out.contains(&k.as_str()) {
                out.push(k);
            }
        }
        out
    }
}

/// Conditioning applied around the workload.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Conditions {
    /// `none`, `drop` or `remount`: what happened between phases.
    pub cold: String,
    /// Memory cgroup limit in bytes.
    pub mem_limit: Option<u64>,
    /// cgroup interface used for the limit (`v1`, `v2`).
    pub mem_limit_cgroup: Option<String>,
    /// Peak memory of the cgroup (page cache included), bytes.
    pub mem_limit_peak: Option<u64>,
    /// On cgroup v1, which does not throttle a cgroup's dirty pages against its limit: the
    /// host's `vm.dirty_bytes` held at 20% of the limit for the run, as a machine with that
    /// much memory has it (`host::dirty`). None on v2, where the kernel does this per cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_limit_dirty_bytes: Option<u64>,
    /// With it: `vm.dirty_background_bytes`, 10% of the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_limit_dirty_background_bytes: Option<u64>,
    /// Memory charger target: free memory left, bytes.
    pub mem_charge: Option<u64>,
    /// Bytes the charger locked.
    pub mem_charge_locked: Option<u64>,
    /// MemAvailable right after the charger finished locking, bytes.
    #[serde(default)]
    pub mem_charge_available: Option<u64>,
    /// `--dirty-expire` / a plan's `dirty_expire`: the host's `vm.dirty_expire_centisecs`
    /// held for the run, in seconds (`host::dirty::ExpireHold`); absent when the host's
    /// applied (the environment records the value either way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_expire_s: Option<f64>,
}

/// One measured phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhaseResult {
    pub name: String,
    /// Wall time, monotonic clock, seconds.
    pub wall_s: f64,
    /// User CPU time of the fsgauge process over the phase, seconds.
    pub user_s: f64,
    /// System (kernel) CPU time of the fsgauge process over the phase, seconds.
    pub sys_s: f64,
    /// Count of the phase's primary operations (e.g. files created plus directories made).
    pub ops: u64,
    /// Bytes read or written by the phase's operations.
    pub bytes: u64,
    pub ops_per_s: f64,
    pub bytes_per_s: f64,
    /// Latency of the primary operations, merged.
    pub latency: LatencySummary,
    /// Rate-limited phases (`--rate-iops`, `--rate`): latency of the primary operations from
    /// each request's scheduled (due) time to its completion, rather than from its submission,
    /// so that requests queued behind a stall count the wait (no coordinated omission). Absent
    /// without a rate limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_latency: Option<LatencySummary>,
    /// Rate-limited phases: the rate asked of each worker and the rate it achieved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateOutcome>,
    /// Every operation kind of the phase, primary or not, by name.
    #[serde(default)]
    pub op_stats: BTreeMap<String, OpStats>,
    /// I/O on the testbed's device over the phase (from /sys/block/DEV/stat).
    pub device: Option<DeviceDelta>,
    /// I/O on the external journal device, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_device: Option<DeviceDelta>,
    /// What the emulated disk served over the phase and how late (`--device-model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_model: Option<device::ModelledIo>,
    /// The same for the external journal's emulated disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_device_model: Option<device::ModelledIo>,
    /// Time series from the phase start, one point per interval.
    pub series: Vec<SeriesPoint>,
    /// Length of one series interval in seconds (`--interval`); absent: 1 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
    /// Seconds from the phase start excluded from every figure as warm-up (`--ramp`); the
    /// series keeps the ramp's intervals, marked `ramp`, and `ramp_totals` has what they held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_s: Option<f64>,
    /// What the ramp held (left out of `ops`, `bytes`, the rates and the latency above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_totals: Option<RampTotals>,
    /// Each worker's own figures, when the phase ran several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerSummary>,
    /// Workload-specific figures (e.g. KiB/s of a file-create phase), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
    /// MPI runs: seconds until the fastest rank finished (`wall_s` is the slowest rank's), so
    /// stragglers show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_done_s: Option<f64>,
    /// Set when the phase was cut at the stonewall (`--stonewall`): the limit, seconds. The
    /// counts are what was done by then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stonewall_s: Option<f64>,
    /// MPI runs: each rank's own figures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<RankPhase>,
    /// How often *another* process dropped one of the kernel's caches
    /// (`/proc/sys/vm/drop_caches`) while the phase ran, counted as the kernel counts them: the
    /// page cache and the slab each once, so one `echo 3` is 2. Its figures then measure that
    /// neighbour too. The run is made
    /// again (see `lab::plan::execute`); absent when none.
    #[serde(default, skip_serializing_if = "device::is_zero")]
    pub foreign_cache_drops: u64,
    /// What another process changed of the host's writeback settings (`vm.dirty_*`) while the
    /// phase ran, in words (`host::writeback`): its figures then measure that process too,
    /// and the run is made again as after a foreign cache drop; absent when nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writeback_changed: Option<String>,
    /// What the machine did beside the phase: CPU steal and CPU pressure (absent in results
    /// written before fsgauge recorded them, and where the kernel tells neither).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_load: Option<HostLoad>,
    /// How long the threads that did the phase's work were on a CPU and how long they were
    /// runnable but waited for one (absent in results written before fsgauge recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_wait: Option<CpuWait>,
}

/// The scheduler's account of a phase's own threads (`/proc/self/task/*/schedstat`), summed
/// over the threads that did its work.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct CpuWait {
    /// Time runnable, waiting on a run queue for a CPU, nanoseconds.
    pub run_delay_ns: u64,
    /// Time on a CPU, nanoseconds.
    pub on_cpu_ns: u64,
    /// How many threads did the phase's work.
    pub threads: u32,
}

/// The machine's load over a phase, as shares (0–1).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct HostLoad {
    /// Of all CPU time of all CPUs, the share the hypervisor stole (`/proc/stat` steal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal: Option<f64>,
    /// Of the phase's wall time, the share in which some runnable task waited for a CPU
    /// (`/proc/pressure/cpu` `some`; fsgauge's own threads count too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pressure: Option<f64>,
}

/// Latency percentiles of a set of operations, from an HDR histogram (1 ns to 1 h, 3
/// significant digits). `hdr` keeps the histogram itself (V2 serialization, base64) so that
/// histograms can be merged or re-cut later.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// Operations slower than 2 s (tiobench's column).
    pub over_2s: u64,
    /// Operations slower than 10 s.
    pub over_10s: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hdr: String,
}

/// Count, bytes and latency of one kind of operation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct OpStats {
    pub count: u64,
    pub bytes: u64,
    /// Whether this kind counts toward the phase's `ops`.
    pub primary: bool,
    /// Whether this kind reads file data (as its workload declared it), so that its speed
    /// depends on the page cache. Absent (false) in results written before it was added.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reads: bool,
    pub latency: LatencySummary,
    /// Rate-limited phases: this kind's latency from each operation's scheduled (due) time
    /// to its completion (see [`PhaseResult::scheduled_latency`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_latency: Option<LatencySummary>,
}

/// What a rate-limited phase asked of its workers and what they achieved.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RateOutcome {
    /// `ops/s` (`--rate-iops`) or `B/s` (`--rate`).
    pub unit: String,
    /// Each worker's rate.
    pub workers: Vec<WorkerRate>,
}

/// One worker's asked and achieved rate: units issued over the time from its first due time
/// to its last completion.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct WorkerRate {
    pub worker: u32,
    pub asked: f64,
    pub achieved: f64,
}

/// Block-device counter deltas over a phase.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct DeviceDelta {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_ios: u64,
    pub write_ios: u64,
    /// Discard bytes (where the kernel reports them).
    #[serde(default)]
    pub discard_bytes: u64,
    /// Flush requests (where the kernel reports them).
    #[serde(default)]
    pub flush_ios: u64,
}

/// One interval of a phase's time series (a second unless `--interval` says otherwise).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct SeriesPoint {
    /// Seconds from the phase start to the interval's start (the interval is
    /// [t, t + [`PhaseResult::interval_s`])). Results written before `--interval` existed hold
    /// whole seconds here, which read the same.
    pub t: f64,
    /// Inside the ramp (`--ramp`): left out of every figure of the phase.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ramp: bool,
    pub ops: u64,
    pub bytes: u64,
    /// Latency of the primary operations that ended in this second, from the HDR histogram of
    /// this second alone (its `hdr` kept, so that ranks merge bucket by bucket);
    /// `over_2s`/`over_10s` are counted from the histogram's buckets. Absent for a second in
    /// which no primary operation ended, and in results written before it was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
    /// Rate-limited phases: latency from the scheduled time of the primary operations that
    /// ended in this second (see [`PhaseResult::scheduled_latency`]), from this second's own
    /// histogram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_latency: Option<LatencySummary>,
}

/// The figures of a phase's ramp (`--ramp`), left out of the phase's own: with them added
/// back, a phase's figures are those of the whole run of it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RampTotals {
    pub seconds: f64,
    /// Primary operations that ended in the ramp, and the bytes of every operation there.
    pub ops: u64,
    pub bytes: u64,
    /// Latency of the ramp's primary operations.
    pub latency: LatencySummary,
}

/// One worker's share of a multi-worker phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct WorkerSummary {
    pub worker: u32,
    pub ops: u64,
    pub bytes: u64,
    /// Seconds from the phase start until this worker finished.
    pub wall_s: f64,
    pub latency: LatencySummary,
}
