//! Emulated devices: the storage a question is about, modelled. The seeds ran on 7200 rpm disks;
//! a VM's virtual disk has no seek, no rotation and a cache larger than any workload, so on it
//! fragmentation costs nothing. A device model gives each block request the time the profiled
//! drive would take.
//!
//! - [`profile`]: profiles as TOML data with the source of every parameter (built-in ones for the
//!   seeds' drives, SSDs and `ram`; users bring their own file), and ablations
//!   (`PROFILE:seek=off,rotation=off,cache=off,constant=12ms`).
//! - [`model`]: the model, a pure function of (profile, request, state, time) run on the
//!   caller's clock ([`model::DeviceModel`]), and its expectations and the demerit figure
//!   ([`model::expect`]).
//!
//! # The server (design note)
//! Built in [`server`] (the process), [`emulated`] (the library's handle, [`EmulatedDevice`]),
//! [`stats`] (lateness and histograms, per phase by snapshot deltas) and [`check`]
//! (`fsgauge devices check`).
//!
//! The model is applied by a server that fsgauge starts for an image testbed with
//! `device_model`:
//! - **A FUSE file in a separate process.** The daemon (a re-exec of fsgauge, `fuser` crate,
//!   mount(2) as root, no libfuse) serves one file whose bytes live in the real image (sparse,
//!   may be smaller than the modelled capacity; [`model::DeviceModel::with_offset`] places it).
//!   The loop device is attached to the FUSE file with direct I/O (`loop/dio` = 1, refused
//!   otherwise) and `queue/rotational` = 1 for HDD profiles, so every block request reaches the
//!   daemon and the kernel schedules for a disk.
//! - **No deadlock under memory pressure.** The daemon calls `prctl(PR_SET_IO_FLUSHER)` and
//!   `mlockall(MCL_CURRENT|MCL_FUTURE)`, uses preallocated aligned buffers, does its own I/O on
//!   the image with O_DIRECT, and stays outside every memory cgroup a run makes. It never waits
//!   on writeback of the device it serves.
//! - **Closed loop.** Requests are submitted to the model at their arrival (monotonic clock);
//!   one thread asks [`model::DeviceModel::ready_at`] / `next`, does the data I/O, and replies
//!   at `done_ns` (sleeping until then; spinning the last ~50 µs). FUSE async direct I/O and
//!   `max_background` let the kernel keep several requests outstanding, so the drive's queue
//!   policy is the model's. FLUSH comes as `fsync` on the FUSE file; FUA has no FUSE form and is
//!   treated as write + flush of that write.
//! - **Lateness.** Each reply records actual − modelled completion; a phase's result carries
//!   lateness p50/p99/max, requests, bytes, cache hits, seek-distance and service-time
//!   histograms. p99 above 0.5 ms flags the phase: the emulator could not keep up.
//! - **Ledger.** The FUSE mount, the daemon (pid + start time) and the loop device are ledger
//!   resources; teardown on success, error and signals; a daemon that dies fails the run
//!   (exit 1) naming it.

pub mod check;
pub mod emulated;
pub mod model;
pub mod profile;
pub mod server;
pub mod stats;

pub use emulated::EmulatedDevice;
pub use model::expect::{demerit, expectations, random_read_service, Expectations};
pub use model::{Breakdown, DeviceModel, Dispatch, Op, Request};
pub use profile::{load, load_ref, parse_ablations, Ablations, Kind, Profile, QueuePolicy};
