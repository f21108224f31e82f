//! Measurement: what a phase cost, exactly. Per phase: wall time on the monotonic clock, user
//! and system CPU time, operation counts and bytes, a per-operation latency histogram (HDR,
//! nanoseconds, 1 ns to 1 h at 3 significant digits), the block device's I/O deltas and a
//! per-second time series.
//!
//! The per-operation path is one clock read per operation boundary (the invariant TSC where
//! there is one, see [`Clock`]), one histogram increment and a few additions, all in the
//! worker's own [`Recorder`] (no sharing, no locks); recorders are merged exactly when the
//! phase ends.

mod clock;
mod diskstats;
mod hostload;
mod latency;
mod phase;
pub mod progress;
mod recorder;
mod rusage;
mod schedstat;
mod scheduled;
mod totals;

pub use clock::{Clock, Tick};
pub use diskstats::{Devices, DiskStat, ModelProbe, PhaseEnd, Probe};
pub use hostload::LoadMark;
pub use latency::{
    decode, decode_text, encode, histogram_up_to, new_histogram, summarize, FastHistogram,
    LatencyHistogram,
};
pub use phase::{run_workers, PhaseMeter, SeriesSpec};
pub use progress::Progress;
pub use recorder::{Lane, OpDef, OpId, Recorder};
pub use rusage::CpuTimes;
pub use schedstat::{SchedMark, TaskSched};
pub use totals::{LatencyTotals, PhaseTotals, Probes};
