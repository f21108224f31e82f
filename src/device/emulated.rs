//! [`EmulatedDevice`]: the library's handle on a running device server (see [`super::server`]):
//! starts `fsgauge devices serve` as a child process, waits until its FUSE file is ready,
//! attaches a loop device to that file with direct I/O, reads the server's stats, and tears
//! everything down on drop (loop device, server, mount, mount directory). Each of these is in
//! the ledger before it is made, so `fsgauge testbed cleanup` removes what a SIGKILL left.

pub(crate) mod argv;
mod crash;

use std::io::{BufRead, BufReader};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::profile::{Kind, ModelDuring, Profile, ProfileRef};
use super::server::{DiskSettings, ServeArgs, DISK_NAME};
use super::stats::Snapshot;
use crate::base::sys::trust::{self as sys_trust, FileId};
use crate::host::ledger::{process_start_time, Ledger, Resource};
use crate::host::loopdev::LoopDevice;
use crate::measure::{ModelProbe, PhaseEnd};
use crate::results::device::DeviceModelInfo;

/// A running emulated device. Dropping it detaches the loop device, stops the server and
/// removes its mount.
pub struct EmulatedDevice {
    /// The profile as given, with its ablations, loaded.
    profile: ProfileRef,
    offset: u64,
    child: Child,
    /// The control pipe and the server's replies, shared with the phase probes.
    channel: Arc<Channel>,
    mount: PathBuf,
    file: PathBuf,
    loop_dev: Option<LoopDevice>,
    /// The loop device on the crash file ([`EmulatedDevice::attach_crash_loop`]).
    crash_loop: Option<LoopDevice>,
    /// The disk file's identity, once the loop device is attached.
    backing: Option<FileId>,
    ledger: Ledger,
    /// The transport the server said it serves through (`ring`, `dev`), and whether it turned
    /// the machine's `enable_uring` on.
    transport: String,
    set_uring: bool,
}

impl std::fmt::Debug for EmulatedDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatedDevice")
            .field("profile", &self.profile.as_str())
            .field("server_pid", &self.child.id())
            .field("file", &self.file)
            .finish()
    }
}

static SERIAL: AtomicU32 = AtomicU32::new(0);

/// Our end of the server's control channel: commands go out (shutting it down ends the
/// server) and its replies come back, one line each. A socket rather than a pipe, so that a
/// command sent to a server that has just died fails with EPIPE (MSG_NOSIGNAL) instead of
/// ending fsgauge by SIGPIPE before it could tear anything down.
struct Control {
    commands: Option<UnixStream>,
    replies: BufReader<UnixStream>,
}

/// Sends all of `bytes` on `sock`, without SIGPIPE.
fn send_all(sock: &UnixStream, mut bytes: &[u8]) -> std::io::Result<()> {
    use nix::sys::socket::{send, MsgFlags};
    while !bytes.is_empty() {
        match send(
            std::os::fd::AsRawFd::as_raw_fd(sock),
            bytes,
            MsgFlags::MSG_NOSIGNAL,
        ) {
            Ok(n) => bytes = &bytes[n..],
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// How to talk to a server: one command at a time.
struct Channel {
    /// "the emulated device server for PROFILE (pid N, serving FILE)", for messages.
    what: String,
    control: Mutex<Control>,
}

impl Channel {
    /// Sends one command line and reads the one-line answer.
    fn ask(&self, command: &str) -> Result<String> {
        let mut c = self.control.lock().unwrap_or_else(|p| p.into_inner());
        let Some(sock) = c.commands.as_ref() else {
            bail!("{} is being stopped", self.what);
        };
        send_all(sock, format!("{command}\n").as_bytes()).map_err(|e| {
            anyhow!(
                "{} does not take commands any more ({e}): it has died",
                self.what
            )
        })?;
        let mut line = String::new();
        match c.replies.read_line(&mut line) {
            Ok(n) if n > 0 => Ok(line.trim().to_string()),
            _ => bail!("{} stopped answering: it has died", self.what),
        }
    }

    fn snapshot(&self) -> Result<Snapshot> {
        let line = self.ask("stats")?;
        serde_json::from_str(&line)
            .with_context(|| format!("the stats line {line:?} of {}", self.what))
    }
}

/// A phase's record of what the disk served: a snapshot at its start, the difference at its
/// end (see [`crate::measure::ModelProbe`]).
#[derive(Clone)]
struct Probe(Arc<Channel>);

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.what)
    }
}

impl ModelProbe for Probe {
    fn begin(&self) -> Result<PhaseEnd> {
        let start = self.0.snapshot()?;
        let channel = self.0.clone();
        Ok(Box::new(move || {
            let end = channel.snapshot()?;
            let d = end
                .delta(&start)
                .map_err(|e| anyhow!("the stats of {}: {e}", channel.what))?;
            Ok(d.record_of_phase())
        }))
    }
}

/// An empty directory for the mount (mode 0700, an unpredictable name) in fsgauge's own work
/// directory, which only root can change: the server mounts on it by path. Recorded in
/// `ledger` before it is made.
fn make_mount_dir(ledger: &mut Ledger) -> Result<PathBuf> {
    let base = crate::host::workdir::default_workdir(crate::host::workdir::Backing::File);
    let fd = sys_trust::own_dir(&base)?;
    let name = sys_trust::private_name("");
    ledger.make_at(fd.as_fd(), &base, &name, "", |d, n| {
        sys_trust::make_dir_at(d, n, 0o700)
    })?;
    Ok(base.join(name))
}

/// How to start a server ([`EmulatedDevice::start_with`]).
#[derive(Debug, Clone)]
pub struct Start<'a> {
    /// The ledger directory to record it in (default: the state directory's ledger).
    pub ledger_dir: Option<&'a Path>,
    /// The disk to serve, as its describer gave it. Its model applies from the start when
    /// `modelled` (else: native speed until [`EmulatedDevice::set_modelled`]).
    pub disk: DiskSettings,
    /// The image holding the disk's bytes: [`super::disk::held_path`] of one this process
    /// holds, or a path in a directory only root can change.
    pub image: PathBuf,
    /// What the disk is to the testbed, for messages: "" (its disk) or "journal ".
    pub role: &'a str,
}

/// Starts `fsgauge devices serve` for `disk` on `image`, recording what it makes in `ledger`
/// first: the mount directory, then the server. Its stdin and stdout are its control channel.
/// The server is held to the profile as this process loaded it (its fingerprint). On an
/// error nothing of it runs any more, and what it recorded is still in `ledger` for the
/// caller to release.
fn spawn_server(
    ledger: &mut Ledger,
    exe: &Path,
    disk: &DiskSettings,
    image: &Path,
) -> Result<Spawned> {
    ledger.set_details(serde_json::json!({
        "kind": "emulated device",
        "profile": disk.profile.as_str(),
        "image": image,
    }))?;
    let mount = make_mount_dir(ledger)?;
    let serve = ServeArgs {
        disk: disk.clone(),
        profile_hash: Some(disk.profile.profile().fingerprint()),
        image: image.to_path_buf(),
        mount: mount.clone(),
    };
    let mut command = Command::new(exe);
    command
        .arg0("fsgauge")
        .args(["devices", "serve"])
        .args(argv::server_argv(&serve));
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SAID.swap(true, Ordering::Relaxed) {
        command.env(super::server::QUIET_SETUP_ENV, "1");
    }
    let socket = "making the device server's control socket";
    let (commands, theirs) = UnixStream::pair().context(socket)?;
    let replies = commands.try_clone().context(socket)?;
    let theirs_out = theirs.try_clone().context(socket)?;
    let mut child = command
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs_out)))
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting the device server {} devices serve", exe.display()))?;
    let pid = child.id();
    let recorded = ledger.record(Resource::DeviceServer {
        pid,
        start: process_start_time(pid).unwrap_or(0),
        mount: mount.clone(),
    });
    if let Err(e) = recorded {
        // Not in the ledger: it goes now, and its mount with it.
        let _ = child.kill();
        let _ = child.wait();
        let _ = stop_server(pid, 0, &mount);
        return Err(e);
    }
    Ok(Spawned {
        child,
        commands,
        replies,
        mount,
    })
}

/// A device server just started ([`spawn_server`]).
struct Spawned {
    child: Child,
    /// Our end of its control channel, to send commands on and to read its replies from.
    commands: UnixStream,
    replies: UnixStream,
    mount: PathBuf,
}

impl EmulatedDevice {
    /// Starts a server for `profile_ref` (a profile name or file, with ablations) serving an
    /// emulated disk of `size` bytes whose bytes live in `image` (extended sparsely to `size`
    /// if shorter) placed `offset` bytes into the modelled disk. `image` must lie in a
    /// directory only root can change: the server opens it by path. Returns once the disk
    /// file can be opened.
    pub fn start(profile_ref: &str, image: &Path, size: u64, offset: u64) -> Result<Self> {
        Self::start_in(None, profile_ref, image, size, offset)
    }

    /// [`EmulatedDevice::start`] with its ledger entry in `ledger_dir` (default: the state
    /// directory's ledger), for programs that keep their own.
    pub fn start_in(
        ledger_dir: Option<&Path>,
        profile_ref: &str,
        image: &Path,
        size: u64,
        offset: u64,
    ) -> Result<Self> {
        Self::start_with(&Start {
            ledger_dir,
            disk: DiskSettings::new(ProfileRef::new(profile_ref)?, size, offset),
            image: image.to_path_buf(),
            role: "",
        })
    }

    /// Starts a server as `start` says (see [`EmulatedDevice::start`]). An image given as
    /// `/proc/PID/fd/N` (a descriptor this process holds) is opened by the server through it,
    /// never by a name.
    pub fn start_with(start: &Start<'_>) -> Result<Self> {
        let disk = start.disk.clone();
        let image = if start.image.starts_with("/proc") {
            start.image.clone()
        } else {
            start
                .image
                .canonicalize()
                .with_context(|| format!("device image {}", start.image.display()))?
        };
        let exe = server_executable()?;
        let n = SERIAL.fetch_add(1, Ordering::Relaxed);
        let name = format!("device-{}-{n}", std::process::id());
        let mut ledger = match start.ledger_dir {
            Some(dir) => Ledger::begin_in(dir, &name, false)?,
            None => Ledger::begin(&name, false)?,
        };
        // The entry is written before anything it records is made; a start that fails from
        // here on takes it away again, with whatever it recorded.
        let Spawned {
            child,
            commands,
            replies,
            mount,
        } = match spawn_server(&mut ledger, &exe, &disk, &image) {
            Ok(made) => made,
            Err(e) => {
                for left in ledger.release_all_with(teardown) {
                    eprintln!(
                        "fsgauge: warning: after the device server failed to start: {left:#}; `fsgauge testbed cleanup` removes it"
                    );
                }
                return Err(e);
            }
        };
        let pid = child.id();
        let file = mount.join(DISK_NAME);
        let channel = Arc::new(Channel {
            what: format!(
                "the emulated {}device server for {} (pid {pid}, serving {})",
                start.role,
                disk.profile.profile().name,
                file.display()
            ),
            control: Mutex::new(Control {
                commands: Some(commands),
                replies: BufReader::new(replies),
            }),
        });
        let mut dev = EmulatedDevice {
            profile: disk.profile,
            offset: disk.offset,
            child,
            channel,
            file,
            mount,
            loop_dev: None,
            crash_loop: None,
            backing: None,
            ledger,
            transport: String::new(),
            set_uring: false,
        };
        // On an error the device is dropped: its teardown releases the entry.
        dev.wait_ready()?;
        Ok(dev)
    }

    fn wait_ready(&mut self) -> Result<()> {
        // The server's first line; a server that fails closes its stdout.
        let pid = self.child.id();
        let mut line = String::new();
        let r = {
            let mut c = self
                .channel
                .control
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            c.replies.read_line(&mut line)
        };
        match r {
            Ok(_) if line.split_whitespace().next() == Some("ready") => {
                let mut words = line.split_whitespace().skip(1);
                self.transport = words.next().unwrap_or_default().to_string();
                self.set_uring = words.next() == Some("1");
                Ok(())
            }
            // A server that refuses to start is a set-up failure (exit 2), not the measured
            // system failing: nothing was measured on it.
            Ok(_) => {
                let how = self.ended();
                Err(anyhow!(
                    "the device server for {} (pid {pid}) did not start: it {how} (it said {:?}); see its messages above",
                    self.profile.profile().name,
                    line.trim()
                ))
            }
            Err(e) => Err(anyhow!(e).context(format!(
                "reading the device server's first line (pid {pid})"
            ))),
        }
    }

    /// The emulated disk: a file on the server's FUSE mount.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The directory the server's FUSE filesystem is mounted on.
    pub fn mount(&self) -> &Path {
        &self.mount
    }

    /// The identity of the disk file the loop device is attached to (as the loop driver
    /// reports its backing file), once attached.
    pub fn backing(&self) -> Option<FileId> {
        self.backing
    }

    /// The server's process id.
    pub fn server_pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's peak resident memory so far (VmHWM), bytes; 0 where it cannot be read.
    pub fn server_peak_memory(&self) -> u64 {
        crate::base::sys::proc::peak_rss_of(self.child.id()).unwrap_or(0)
    }

    /// The profile served.
    pub fn profile(&self) -> &Profile {
        self.profile.profile()
    }

    /// Attaches a loop device to the disk file with direct I/O (refused if the kernel falls
    /// back to buffered I/O: the file would be cached a second time and every timing would be
    /// meaningless), marked rotational for a rotating profile. Returns its path.
    pub fn attach_loop(&mut self) -> Result<PathBuf> {
        if let Some(l) = &self.loop_dev {
            return Ok(l.path().to_path_buf());
        }
        let disk = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.file)
            .with_context(|| format!("opening the emulated disk {}", self.file.display()))?;
        // Found again by the disk file's identity, as the loop driver reports its backing.
        let id =
            FileId::of(disk.as_fd()).with_context(|| format!("stat {}", self.file.display()))?;
        self.ledger.record(Resource::Loop {
            image: self.file.clone(),
            backing: Some(id),
        })?;
        self.backing = Some(id);
        let l = LoopDevice::attach(&disk, &self.file, true).with_context(|| {
            format!(
                "attaching a loop device to the emulated disk {}",
                self.file.display()
            )
        })?;
        if !l.direct_io() {
            bail!(
                "the loop device {} on {} does not do direct I/O (loop/dio is not 1): the disk file would be cached twice and the device model's timing lost; this kernel's loop driver cannot do direct I/O on a FUSE file",
                l.path().display(),
                self.file.display()
            );
        }
        let name = l
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let rotational = if self.profile().kind == Kind::Hdd {
            "1"
        } else {
            "0"
        };
        let attr = format!("/sys/block/{name}/queue/rotational");
        std::fs::write(&attr, rotational)
            .with_context(|| format!("writing {rotational} to {attr}"))?;
        let path = l.path().to_path_buf();
        self.loop_dev = Some(l);
        Ok(path)
    }

    /// The loop device, once attached.
    pub fn loop_device(&self) -> Option<&Path> {
        self.loop_dev.as_ref().map(|l| l.path())
    }

    /// The server's counters and histograms now (cumulative: a phase takes the
    /// [`Snapshot::delta`] of two).
    pub fn stats(&mut self) -> Result<Snapshot> {
        self.check()?;
        self.channel
            .snapshot()
            .map_err(|e| self.died().context(format!("{e:#}")))
    }

    /// Switches the model on (requests complete when the profiled drive would) or off (at
    /// native speed, counted as unmodelled): set-up outside the measured phases.
    pub fn set_modelled(&mut self, on: bool) -> Result<()> {
        self.check()?;
        let command = if on { "model on" } else { "model off" };
        match self.channel.ask(command) {
            Ok(a) if a == "ok" => Ok(()),
            Ok(a) => bail!("{} answered {a:?} to {command:?}", self.channel.what),
            Err(e) => Err(self.died().context(format!("{e:#}"))),
        }
    }

    /// Lets the drive finish its write cache before a cold phase: a cache flush through its
    /// loop device (fsync on the block device: FLUSH, which the loop device passes on as an
    /// fsync of its backing file, the server as the drive's flush), answered once the drive
    /// has destaged everything. The drive then starts the phase idle, whatever the host did
    /// meanwhile (see [`crate::testbed::Testbed::drop_caches_and_settle_disks`]). Nothing
    /// without a loop device.
    pub fn settle(&mut self) -> Result<()> {
        let Some(dev) = self.loop_device().map(Path::to_path_buf) else {
            return Ok(());
        };
        self.check()?;
        let f = std::fs::File::open(&dev).with_context(|| format!("opening {}", dev.display()))?;
        let flushed = f
            .sync_all()
            .with_context(|| format!("flushing the write cache of {}", dev.display()));
        // A server that died fails the flush: say so first.
        self.check()?;
        flushed
    }

    /// The per-phase probe of this device, for [`crate::measure::Devices`].
    pub fn probe(&self) -> Arc<dyn ModelProbe> {
        Arc::new(Probe(self.channel.clone()))
    }

    /// What a result records of the model (`during`: when it applied).
    pub fn info(&self, during: ModelDuring) -> DeviceModelInfo {
        let p = self.profile();
        DeviceModelInfo {
            reference: self.profile.as_str().to_string(),
            profile: p.name.clone(),
            kind: p.kind.to_string(),
            ablations: self.profile.ablations().to_string(),
            hash: p.fingerprint(),
            capacity_bytes: p.capacity_bytes,
            offset: self.offset,
            during: during.name().to_string(),
            parameters: serde_json::to_value(&p.sourced).unwrap_or_default(),
            transport: self.transport.clone(),
            enable_uring_set_by_run: self.set_uring,
        }
    }

    /// Ok while the server runs and answers; an error naming it and how it ended otherwise.
    /// A server that was killed fails its disk's requests as its descriptors close, a moment
    /// before it can be reaped; by then it can no longer answer its control pipe either (its
    /// threads are gone first), so it is asked: whoever sees its disk fail and calls this
    /// finds it dead, however busy the machine.
    pub fn check(&mut self) -> Result<()> {
        self.check_during(None)
    }

    /// [`EmulatedDevice::check`] after the set-up step `step` (e.g. "mkfs"): the error says
    /// that the server died during it.
    pub fn check_during(&mut self, step: Option<&str>) -> Result<()> {
        let running = matches!(self.child.try_wait(), Ok(None));
        if running && self.channel.ask("ping").is_ok_and(|a| a == "ok") {
            return Ok(());
        }
        Err(self.died_during(step))
    }

    fn died(&mut self) -> anyhow::Error {
        self.died_during(None)
    }

    /// How the server ended: its exit status, waited for a little (it no longer answers, so
    /// it is on its way out), or that it stopped answering.
    fn ended(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) => return format!("exited ({st})"),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(None) => return "stopped answering".to_string(),
                Err(e) => return format!("cannot be waited for ({e})"),
            }
        }
    }

    fn died_during(&mut self, step: Option<&str>) -> anyhow::Error {
        let how = self.ended();
        let what = &self.channel.what;
        // The run's device failed under it: the measured system failed (exit 1).
        let msg = match step {
            None => format!(
                "{what} {how}: its disk fails every request; see its messages above, and `fsgauge testbed cleanup` removes what it left"
            ),
            Some(step) => format!(
                "{what} died during {step}: it {how}, and its disk fails every request since; see its messages above, and `fsgauge testbed cleanup` removes what it left"
            ),
        };
        anyhow::Error::new(crate::base::error::SystemFailure(msg))
    }

    /// Writes the server's store refused for want of room (ENOSPC) since it started, and the
    /// store's memory budget (0: the store is the image file, whose filesystem is then full).
    pub fn image_full(&self) -> Result<(u64, u64)> {
        let s = self.channel.snapshot()?;
        Ok((s.image_full, s.memory_budget))
    }

    /// Tears down now, reporting failures (drop does the same, silently).
    pub fn stop(mut self) -> Result<()> {
        let errs = self.teardown();
        match errs.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn teardown(&mut self) -> Vec<anyhow::Error> {
        let mut errs = Vec::new();
        if let Some(l) = self.crash_loop.take() {
            if let Err(e) = l.detach() {
                errs.push(e);
            }
        }
        if let Some(l) = self.loop_dev.take() {
            if let Err(e) = l.detach() {
                errs.push(e);
            }
        }
        // Closing the control channel asks the server to unmount and exit.
        let commands = self
            .channel
            .control
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .commands
            .take();
        if let Some(c) = commands {
            let _ = c.shutdown(std::net::Shutdown::Write);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
            }
        }
        errs.extend(self.ledger.release_all_with(teardown));
        errs
    }
}

impl Drop for EmulatedDevice {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// The executable that serves the disk: this very program through `/proc/self/exe`, which
/// stays the running binary even when its file is replaced or deleted during a long run (a
/// rebuild, an upgrade) and is never looked up by a path others could change; in the test
/// harness (`target/*/deps/it-*`), the fsgauge binary next to it.
fn server_executable() -> Result<PathBuf> {
    let exe = std::env::current_exe()
        .context("finding the fsgauge executable to run the device server")?;
    if let Some(deps) = exe.parent() {
        if deps.file_name().is_some_and(|n| n == "deps") {
            if let Some(up) = deps.parent() {
                let bin = up.join("fsgauge");
                if bin.exists() {
                    return Ok(bin);
                }
            }
        }
    }
    Ok(PathBuf::from("/proc/self/exe"))
}

/// The [`Teardown`](crate::host::ledger::Teardown) of a device server the ledger recorded.
pub fn teardown(r: &Resource) -> Option<Result<()>> {
    match r {
        Resource::DeviceServer { pid, start, mount } => Some(stop_server(*pid, *start, mount)),
        _ => None,
    }
}

/// Stops a device server found in the ledger (if `pid` is still the process that started at
/// `start`) and removes its FUSE mount: what `testbed cleanup` does after a SIGKILL.
pub fn stop_server(pid: u32, start: u64, mount: &Path) -> Result<()> {
    if start != 0 && process_start_time(pid) == Some(start) {
        let p = nix::unistd::Pid::from_raw(pid as i32);
        let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(5);
        while process_start_time(pid) == Some(start) && Instant::now() < deadline {
            // Our own child is a zombie until waited for; reap it if it is ours.
            let _ = nix::sys::wait::waitpid(p, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // Not a mount point any more (EINVAL) counts as done; a dead server's mount (ENOTCONN on
    // every access) unmounts like any other.
    crate::host::mount::unmount(mount).with_context(|| {
        format!(
            "unmounting the device server's FUSE mount {}",
            mount.display()
        )
    })
}
