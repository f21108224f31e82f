//! What a result records of an emulated disk (`--device-model`): the model it ran on (profile,
//! ablations, parameters, hash, where the filesystem sat and when the model applied) and, per
//! phase, what the disk served and how faithfully (requests, bytes, cache hits, seek-distance
//! and service-time histograms, lateness). Nothing above the testbed knows a device is
//! emulated except through these records.

use serde::{Deserialize, Serialize};

/// Lateness above which a request is late and a phase (its p99) is flagged: the emulator
/// could not keep up (DEVICES.md). 0.5 ms.
pub const LATE_NS: u64 = 500_000;

/// [`LATE_NS`] in ms, as a phase's lateness percentiles are recorded.
pub const LATE_P99_MS: f64 = LATE_NS as f64 / 1e6;

/// The device model a testbed's image (or its journal) was served through.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct DeviceModelInfo {
    /// The profile as given (`st3500641as`, `deskstar-7k250:seek=off`, a file's path).
    pub reference: String,
    /// The profile's name.
    pub profile: String,
    /// `hdd`, `ssd` or `ram`.
    pub kind: String,
    /// The ablations applied (`seek=off,cache=off`), empty for the full model.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ablations: String,
    /// SHA-256 of the profile's kind, capacity and parameters: two results with the same hash
    /// ran on the same modelled disk.
    pub hash: String,
    /// The modelled disk's capacity, bytes (0: unbounded).
    pub capacity_bytes: u64,
    /// Bytes from the modelled disk's start to the filesystem's first byte.
    pub offset: u64,
    /// `phases` (the measured run only) or `always`.
    pub during: String,
    /// Every parameter as the profile wrote it, with its unit and source.
    #[serde(default)]
    pub parameters: serde_json::Value,
    /// Which transport served the disk: `ring` (FUSE over io_uring) or `dev` (/dev/fuse);
    /// empty in results written before it was recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub transport: String,
    /// The run turned the machine's `enable_uring` module parameter on (it stays on after
    /// the run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub enable_uring_set_by_run: bool,
}

/// A histogram's summary and its exact buckets.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct HistogramSummary {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// The whole histogram, HDR V2 serialized and base64 encoded (values in the unit the field
    /// names: ns, cylinders), so any other percentile can be read again later.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hdr: String,
}

/// An emulated disk's counters: since its server started, or over a phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskCounts {
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Requests the drive's cache served (read-ahead, dirty data, or into the write cache).
    pub cache_hits: u64,
    /// Requests answered over 0.5 ms after their modelled completion.
    pub late: u64,
    /// Requests that failed on the image (answered with an error).
    pub errors: u64,
    /// Requests answered before their modelled completion (0 unless the server is broken;
    /// the lateness histogram holds them as 0).
    #[serde(default)]
    pub early: u64,
    /// Requests answered at native speed because the model was off (set-up outside the
    /// measured phases); in no histogram.
    #[serde(default)]
    pub unmodelled: u64,
    /// Of the late requests, those late mostly because the machine held the server's timing
    /// thread off its CPU past the wake-up it had asked for (on a kernel without preemption,
    /// any task running a long path in the kernel on that CPU; a halted virtual CPU its host
    /// had not run yet); the others were late for the emulator's own work (its data copies,
    /// the kernel's copies of the FUSE ring's requests on its thread). Absent: none (and in
    /// results written before it was counted).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub late_held_off: u64,
}

pub(super) fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl DiskCounts {
    /// The counters as a list, in declaration order (for field-wise arithmetic).
    fn fields(&self) -> [(&'static str, u64); 11] {
        [
            ("reads", self.reads),
            ("writes", self.writes),
            ("flushes", self.flushes),
            ("bytes read", self.bytes_read),
            ("bytes written", self.bytes_written),
            ("cache hits", self.cache_hits),
            ("late requests", self.late),
            ("errors", self.errors),
            ("early replies", self.early),
            ("unmodelled requests", self.unmodelled),
            ("late requests held off the CPU", self.late_held_off),
        ]
    }

    fn from_fields(v: [u64; 11]) -> DiskCounts {
        let [reads, writes, flushes, bytes_read, bytes_written, cache_hits, late, errors, early, unmodelled, late_held_off] =
            v;
        DiskCounts {
            reads,
            writes,
            flushes,
            bytes_read,
            bytes_written,
            cache_hits,
            late,
            errors,
            early,
            unmodelled,
            late_held_off,
        }
    }

    /// Requests answered under the model: reads, writes and flushes.
    pub fn requests(&self) -> u64 {
        self.reads + self.writes + self.flushes
    }

    /// What was counted between `earlier` and these counts; an error when a counter went
    /// down (counts of different servers, or out of order).
    pub fn since(&self, earlier: &DiskCounts) -> Result<DiskCounts, String> {
        let mut out = [0u64; 11];
        for (o, ((what, x), (_, y))) in out
            .iter_mut()
            .zip(self.fields().into_iter().zip(earlier.fields()))
        {
            *o = x.checked_sub(y).ok_or_else(|| {
                format!("{what} went down from {y} to {x}: the snapshots are from different servers or out of order")
            })?;
        }
        Ok(DiskCounts::from_fields(out))
    }
}

/// What an emulated disk served during one phase, and its own timing error.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ModelledIo {
    #[serde(flatten)]
    pub counts: DiskCounts,
    /// Actual reply − modelled completion, ms: p50, p99, max.
    pub lateness_p50_ms: f64,
    pub lateness_p99_ms: f64,
    pub lateness_max_ms: f64,
    /// Modelled service time (completion − start), ns.
    pub service_ns: HistogramSummary,
    /// Modelled response time (completion − arrival: queueing included), ns.
    pub response_ns: HistogramSummary,
    /// Cylinders moved per request (0 for solid-state profiles).
    pub seek_cylinders: HistogramSummary,
    /// Request sizes, bytes.
    pub size_bytes: HistogramSummary,
    /// The emulator's own time per request, from its arrival until the model had it (the
    /// data copy and the hand-over), ns; absent from older results (none recorded).
    #[serde(default)]
    pub emulator_ns: HistogramSummary,
    /// How far the disk's own clock fell behind the wall clock over the phase, ns (0: it kept time).
    #[serde(default)]
    pub pause_ns: u64,
    /// How many times the disk's clock stopped over the phase.
    #[serde(default)]
    pub pauses: u64,
}

impl ModelledIo {
    /// Requests answered under the model.
    pub fn requests(&self) -> u64 {
        self.counts.requests()
    }

    /// Whether the emulator fell behind the model in this phase (lateness p99 over 0.5 ms).
    pub fn fell_behind(&self) -> bool {
        self.lateness_p99_ms > LATE_P99_MS
    }

    /// Why its late requests were late, said after a lateness warning: how many of them the
    /// machine held the server's timing thread off its CPU for (empty when none were late).
    pub fn why_late(&self) -> String {
        let c = &self.counts;
        if c.late == 0 {
            return String::new();
        }
        format!(
            "; {} of its {} late requests were late while the machine held the emulator's timing thread off its CPU (on a kernel without preemption, another task in a long kernel path on that CPU, or a halted virtual CPU), the rest for the emulator's own work",
            c.late_held_off, c.late
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lateness_warning_says_how_many_late_requests_were_the_machines() {
        let mut io = ModelledIo::default();
        assert_eq!(io.why_late(), "");
        io.counts.late = 5;
        io.counts.late_held_off = 4;
        assert!(
            io.why_late().starts_with("; 4 of its 5 late requests were late while the machine held the emulator's timing thread off its CPU"),
            "{}",
            io.why_late()
        );
        // Results written before the count existed read as none held off.
        let old: DiskCounts = serde_json::from_str(
            r#"{"reads":1,"writes":0,"flushes":0,"bytes_read":4096,"bytes_written":0,"cache_hits":0,"late":1,"errors":0}"#,
        )
        .expect("an older record");
        assert_eq!((old.late, old.late_held_off), (1, 0));
    }
}
