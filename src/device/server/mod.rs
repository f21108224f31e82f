//! The emulated-device server: a FUSE filesystem holding one file, the emulated disk, whose
//! bytes live in a real image and whose every request is answered when the device model says
//! the drive would have finished it. Runs as its own process (`fsgauge devices serve`, started
//! by [`super::emulated::EmulatedDevice`]), see the module docs of [`super`] for the design.
//!
//! Threads, and what each does (real-time priorities: the timing thread's above the FUSE
//! threads', both above every normal thread):
//! - the FUSE session's threads (SCHED_FIFO [`FUSE_PRIORITY`], [`fuse`]) take each request,
//!   stamp its arrival on the monotonic clock, move its data at once (a write into the
//!   [`store`], a read out of it into a preallocated buffer) and hand it to the timing thread
//!   (the /dev/fuse transport, [`crate::device::transport::dev`]);
//! - the timing thread ([`timing`], SCHED_FIFO [`TIMING_PRIORITY`]) owns the model and replies
//!   to each request at its modelled completion, through its transport's seam
//!   ([`crate::device::transport::Transport`]); a FUSE thread copying a large write never
//!   delays it;
//! - through FUSE over io_uring (the default where the kernel has it,
//!   [`crate::device::transport::ring`]) the data requests come through the ring instead: for
//!   a disk that answers at once (`ram`) one ring thread per CPU (SCHED_FIFO
//!   [`FUSE_PRIORITY`], pinned) takes them, for a modelled disk the timing thread itself;
//! - the stats thread ([`records`], normal priority) keeps the counters and histograms;
//! - the main thread (normal priority) reads the control channel (stdin): `stats` answers one
//!   JSON [`Snapshot`] line on stdout, `ping` answers `ok`, `model on`/`model off` switch the
//!   model, `log start LIMIT_BYTES`/`log stop`/`log summary` and `crash CUT CACHE SEED` drive
//!   the write log and the `crash` file ([`crashfile`]); end of file (the parent closed it or died) unmounts and ends the server.
//!
//! The disk's bytes are held in memory ([`store`]): the emulator's own cost per request is a
//! memory copy, never the host disk's latency.

pub(crate) mod args;
pub(crate) mod core;
mod crashfile;
mod fuse;
mod heldoff;
mod records;
mod stall;
pub mod store;
mod timing;

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use anyhow::{Context, Result};
use fuser::MountOption;

use super::stats::Snapshot;
use super::transport::dev::{Dev, Pool};
use super::transport::ring::{taken, Ring};
use super::transport::Transport;
pub use super::transport::{DISK_NAME, MAX_REQUEST};
use super::writelog::record::WriteLog;
use super::DeviceModel;
use crate::base::sys::rt;
pub use args::{
    DiskSettings, Misfit, ServeArgs, Serving, StoreChoice, TransportChoice, TRANSPORT_ENV,
};
pub use crashfile::CRASH_NAME;
use fuse::DiskFs;
use records::Recorder;
use store::Store;

/// Buffers of [`MAX_REQUEST`] bytes preallocated for requests in flight.
const BUFFERS: usize = 64;
/// FUSE requests the kernel may keep outstanding in the background (async direct I/O).
const MAX_BACKGROUND: u16 = 64;
/// Threads reading /dev/fuse.
const FUSE_THREADS: usize = 4;
/// SCHED_FIFO priority of the FUSE threads (low among real-time ones: above every normal
/// thread, below the kernel's own).
pub const FUSE_PRIORITY: i32 = 10;
/// SCHED_FIFO priority of the timing thread: above the FUSE threads, so that completing a
/// request on time always comes before moving another's data.
pub const TIMING_PRIORITY: i32 = 20;

/// Set by the parent on every server after its first: the machine's limits were said once.
pub const QUIET_SETUP_ENV: &str = "FSGAUGE_DEVICE_QUIET_SETUP";

/// A limit of this machine met while setting the server up (no CAP_SYS_RESOURCE, no real
/// time), said by the first server an fsgauge process starts, not by each of them.
fn setup_warning(m: &str) {
    if std::env::var_os(QUIET_SETUP_ENV).is_none() {
        eprintln!("fsgauge devices serve: {m}");
    }
}

/// Moves this process out of every memory cgroup a run made (v1 and v2): the daemon must not
/// be reclaimed against a workload's limit.
fn leave_memory_cgroups() {
    for m in crate::host::memlimit::leave_fsgauge_cgroups() {
        eprintln!("fsgauge devices serve: {m}; the server's memory counts against the run's limit");
    }
}

/// The process-wide set-up of a server: out of the run's memory cgroups, no recursion into
/// writeback, its memory locked as it is touched, timer slack of 1 ns.
fn prepare_process() {
    // No PR_SET_PDEATHSIG: it fires when the parent *thread* ends, which in a library user
    // need not be the process. The control pipe's end of file tells of the parent's death.
    if let Err(e) = rt::set_io_flusher() {
        setup_warning(&format!("prctl(PR_SET_IO_FLUSHER) failed ({e}); the server may deadlock under memory pressure (needs Linux 5.6+ and CAP_SYS_RESOURCE)"));
    }
    let _ = rt::set_timer_slack_min();
    leave_memory_cgroups();
    if let Err(e) = rt::lock_all_memory() {
        setup_warning(&format!(
            "mlockall failed ({e}); the server's memory may be paged out under pressure"
        ));
    }
}

/// Runs the server until the control pipe (stdin) closes. Prints `ready TRANSPORT SET` on
/// stdout once the disk file can be opened: TRANSPORT `ring` or `dev`, SET 1 when this server
/// turned the machine's `enable_uring` on (0 otherwise).
pub fn serve(args: &ServeArgs) -> Result<()> {
    let d = &args.disk;
    prepare_process();
    let (want_ring, set_uring) = taken::wanted(d.transport(), &mut |m| setup_warning(m));
    let (model, immediate) = model_of(args)?;
    let store = Arc::new(if d.overlay {
        Store::overlay(&args.image, d.size, d.store_budget())?
    } else {
        Store::open(&args.image, d.size, d.store_budget(), &mut |m| {
            setup_warning(&m)
        })?
    });
    let (rec, stats_thread) =
        records::start(store.budget()).context("starting the stats thread")?;
    let modelled = Arc::new(AtomicBool::new(d.modelled));
    let log = Arc::new(WriteLog::default());
    let core = Arc::new(core::Core::new(
        store,
        d.size,
        immediate,
        modelled.clone(),
        rec.clone(),
        log.clone(),
    ));
    let (tx, rx) = mpsc::channel();
    let mut fs = DiskFs {
        core: core.clone(),
        pool: Arc::new(Pool::new(BUFFERS, MAX_REQUEST)),
        to_timing: Mutex::new(tx),
        started: SystemTime::now(),
        ring_offer: None,
        wake_ring: None,
    };
    // A disk that answers at once takes the ring on a thread per CPU; a modelled one on the
    // timing thread, which commits each reply when it is due.
    let (mut ring, timing) = match (want_ring, immediate) {
        (true, true) => {
            let ring = taken::prepare(&core, fs.started);
            let dev = Dev::beside(rx, ring.as_ref().map(Ring::offer));
            (ring, start_timing(model, dev, &core)?)
        }
        (true, false) => match taken::prepare_taken(&core, fs.started, Dev::new(rx)) {
            Ok((ring, t)) => {
                fs.wake_ring = Some(ring.waker());
                (Some(ring), start_timing(model, t, &core)?)
            }
            Err(dev) => (None, start_timing(model, dev, &core)?),
        },
        (false, _) => (None, start_timing(model, Dev::new(rx), &core)?),
    };
    fs.ring_offer = ring.as_ref().map(Ring::offer);
    // The FUSE threads inherit this thread's policy when the session starts them; this thread
    // then goes back to normal: it only reads the control channel.
    realtime(FUSE_PRIORITY);
    let bg = mount(fs, &d.profile.profile().name, &args.mount, ring.as_mut())?;
    let _ = rt::set_normal();
    {
        let transport = if ring.is_some() { "ring" } else { "dev" };
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready {transport} {}", u8::from(set_uring))
            .context("telling the parent the device is ready")?;
        out.flush()
            .context("telling the parent the device is ready")?;
    }
    control(&core)?;
    // Detach the mount; the session ends when the last user (a loop device) lets go.
    let _ = nix::mount::umount2(&args.mount, nix::mount::MntFlags::MNT_DETACH);
    let _ = bg.join();
    if let Some(r) = ring {
        r.join();
    }
    let _ = timing.join();
    drop(core);
    drop(rec);
    let _ = stats_thread.join();
    Ok(())
}

/// The model of the disk `args` describes, placed at its offset, and whether it answers every
/// request at once (`ram`, no constant time): the settings as decoded, held to the profile
/// the parent loaded, through the same rule the parent checked them by
/// ([`DiskSettings::model`]); refused where the image does not fit on it.
fn model_of(args: &ServeArgs) -> Result<(DeviceModel, bool)> {
    let (d, profile) = (&args.disk, args.checked_profile()?);
    let model = d.model().map_err(|misfit| match misfit {
        Misfit::Profile(m) => anyhow::anyhow!("profile {}: {m}", profile.name),
        Misfit::TooLarge => anyhow::anyhow!(
            "an image of {} bytes at offset {} does not fit on {} ({} bytes); give a smaller size or offset",
            d.size,
            d.offset,
            profile.name,
            profile.capacity_bytes
        ),
    })?;
    let immediate = profile.kind == super::Kind::Ram && d.profile.ablations().constant_ns.is_none();
    Ok((model, immediate))
}

/// Starts the timing thread on `transport`.
fn start_timing<T: Transport + Send + 'static>(
    model: DeviceModel,
    transport: T,
    core: &Arc<core::Core>,
) -> Result<std::thread::JoinHandle<()>> {
    let core = core.clone();
    std::thread::Builder::new()
        .name("device-timing".into())
        .spawn(move || {
            realtime(TIMING_PRIORITY);
            timing::run(model, transport, &core)
        })
        .context("starting the timing thread")
}

/// SCHED_FIFO at `priority` for the calling thread (and the threads it starts after): replies
/// leave on time even when the workload keeps every core busy. Spins are short and the
/// kernel's RT throttling keeps a runaway from freezing the machine.
fn realtime(priority: i32) {
    if let Err(e) = rt::set_realtime(priority) {
        setup_warning(&format!(
            "SCHED_FIFO refused ({e}); replies may be late when the CPUs are busy"
        ));
    }
}

/// Mounts the disk's FUSE filesystem on `on` and starts its threads (the ring's first).
fn mount(
    fs: DiskFs,
    profile: &str,
    on: &std::path::Path,
    ring: Option<&mut Ring>,
) -> Result<fuser::BackgroundSession> {
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        MountOption::FSName(format!("fsgauge-{profile}")),
        MountOption::Subtype("fsgauge-device".into()),
        MountOption::RW,
        MountOption::NoAtime,
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::NoExec,
    ];
    config.n_threads = Some(FUSE_THREADS);
    config.clone_fd = true;
    let session = fuser::Session::new(fs, on, &config).with_context(|| {
        format!(
            "mounting the device server's FUSE filesystem on {}",
            on.display()
        )
    })?;
    if let Some(r) = ring {
        // On an error the session is dropped, which unmounts: nothing waits for the ring.
        r.start(&session)?;
    }
    session.spawn().context("starting the FUSE session threads")
}

/// Answers the control channel (stdin) until it closes or says `quit`.
fn control(core: &core::Core) -> Result<()> {
    let (rec, log): (&Recorder, &WriteLog) = (&core.rec, &core.log);
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        line.clear();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => return Ok(()),
            Ok(_) => {}
        }
        let answer = match line.trim() {
            "stats" => {
                let snap: Snapshot = rec
                    .snapshot()
                    .context("the stats thread has ended before the server")?;
                serde_json::to_string(&snap)?
            }
            "ping" => "ok".to_string(),
            "model on" | "model off" => {
                core.modelled
                    .store(line.trim() == "model on", Ordering::Release);
                "ok".to_string()
            }
            "quit" => return Ok(()),
            other if other.starts_with("crash") && !core.crash_file.load(Ordering::Acquire) => {
                format!("error: {other:?}: {}", crashfile::NOT_ON_THE_RING)
            }
            other => match crashfile::command(log, other, core.size) {
                Some(answer) => answer,
                None => format!("error: unknown command {other:?}"),
            },
        };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{answer}").and_then(|_| out.flush()).is_err() {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server builds its model by the rule the testbed checked ([`DiskSettings::model`]),
    /// and refuses a disk that does not hold its image in its own words (a `devices serve`
    /// started by hand is told of its flags).
    #[test]
    fn the_server_refuses_an_image_past_its_disk_in_its_own_words() {
        let profile: crate::device::ProfileRef = "st3500641as".parse().expect("a profile");
        let cap = profile.profile().capacity_bytes;
        let args = |offset: u64| ServeArgs {
            disk: DiskSettings::new(profile.clone(), 1 << 30, offset),
            profile_hash: Some(profile.profile().fingerprint()),
            image: "/proc/1/fd/3".into(),
            mount: "/var/tmp/fsgauge/.fsgauge-0".into(),
        };
        let (_, immediate) = model_of(&args(cap - (1 << 30))).expect("ends at the last byte");
        assert!(!immediate);
        let e = model_of(&args(cap - (1 << 30) + 1)).expect_err("one byte past the end");
        assert_eq!(
            e.to_string(),
            format!("an image of 1073741824 bytes at offset {} does not fit on st3500641as ({cap} bytes); give a smaller size or offset", cap - (1 << 30) + 1)
        );
        let ram = ServeArgs {
            disk: DiskSettings::new("ram".parse().expect("a profile"), u64::MAX / 2, 0),
            profile_hash: None,
            ..args(0)
        };
        assert!(model_of(&ram).expect("ram holds any image").1);
    }
}
