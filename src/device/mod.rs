//! Emulated devices: the storage a question is about, modelled. The seeds ran on 7200 rpm disks;
//! a VM's virtual disk has no seek, no rotation and a cache larger than any workload, so on it
//! fragmentation costs nothing. A device model gives each block request the time the profiled
//! drive would take.
//!
//! - [`profile`]: profiles as TOML data with the source of every parameter (built-in ones for the
//!   seeds' drives, SSDs and `ram`; users bring their own file), and [`ablation`]s
//!   (`PROFILE:seek=off,rotation=off,cache=off` or `PROFILE:constant=12ms`).
//! - [`model`]: the model, a pure function of (profile, request, state, time) run on the
//!   caller's clock ([`model::DeviceModel`]), and its expectations and the demerit figure
//!   ([`model::expect`]).
//!
//! # The server (design note)
//! Built in [`server`] (the process), [`transport`] (how requests reach it: /dev/fuse or FUSE
//! over io_uring, one seam the timing thread knows them by), [`emulated`] (the library's
//! handle, [`EmulatedDevice`]), [`stats`] (lateness and histograms, per phase by snapshot
//! deltas), and [`calibrate`] (`fsgauge devices check` and `fit`). A disk's transport and
//! store are settings of the disk ([`server::Serving`]), like its profile.
//!
//! The model is applied by a server that fsgauge starts (for an image testbed with
//! `device_model`, once testbeds take it; today through [`EmulatedDevice`] and
//! `fsgauge devices check`):
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
//!   (Where the sandbox lacks CAP_SYS_RESOURCE, `PR_SET_IO_FLUSHER` is refused and the server
//!   says so on stderr.)
//! - **Closed loop.** Requests are submitted to the model at their arrival (monotonic clock,
//!   stamped by the FUSE thread that takes the request, which then does its data I/O on the
//!   image at once); one scheduler thread asks [`model::DeviceModel::ready_at`] / `next` and
//!   replies at `done_ns` (sleeping until 60 µs before, then spinning). Every server thread
//!   runs SCHED_FIFO so that replies leave on time on a busy machine. `ram` answers on the
//!   FUSE thread itself (its model completes on arrival). FUSE async direct I/O and
//!   `max_background` let the kernel keep several requests outstanding, so the drive's queue
//!   policy is the model's. FLUSH comes as `fsync` on the FUSE file; FUA has no FUSE form and is
//!   treated as write + flush of that write.
//! - **Lateness.** Each reply records actual − modelled completion, with requests, bytes,
//!   cache hits, seek-distance, size, service- and response-time histograms, cumulative in the
//!   server; a client asks for a [`stats::Snapshot`] over the control pipe and takes a phase's
//!   figures as the delta of two. p99 above 0.5 ms flags the phase: the emulator could not
//!   keep up. What the server cannot see is the kernel's path to it and back (loop's worker,
//!   FUSE): `devices check` shows it as measured − modelled.
//! - **Ledger.** The mount directory, the daemon with its FUSE mount (pid + start time,
//!   `device-server`) and the loop device are ledger resources; teardown on success, error
//!   and signals; the daemon exits when its control pipe closes (its parent's death included);
//!   a daemon that dies fails requests with EIO at once and [`EmulatedDevice::check`] names it
//!   (it asks the daemon, so one whose disk just failed is found dead before it is reaped).
//!   The control pipe is a socket on the daemon's stdin and stdout: a command to a dead
//!   daemon fails with EPIPE rather than ending fsgauge by SIGPIPE.
//! - **Power cuts.** [`writelog`]: a write log kept when asked (each write's data, flushes,
//!   discards, replies and the model's cache events, bounded), crash states built from it as
//!   an overlay over the store and served as a second file, `crash`, for a second loop device
//!   ([`EmulatedDevice::attach_crash_loop`]).
//! - **The backing store.** A write to the image that fails with ENOSPC is counted
//!   ([`stats::Snapshot::image_full`]): the testbed names the full store, not the filesystem.

pub mod ablation;
pub mod calibrate;
pub mod disk;
pub mod emulated;
pub mod model;
pub mod profile;
pub mod server;
pub mod stats;
pub mod transport;
pub mod writelog;

pub use emulated::EmulatedDevice;
pub use model::expect::{demerit, expectations, random_read_service, Expectations};
pub use model::{Breakdown, CacheEvent, DeviceModel, Dispatch, Op, Request};
pub use profile::{
    load, load_ref, parse_ablations, Ablations, Kind, ModelDuring, Profile, ProfileRef, QueuePolicy,
};
