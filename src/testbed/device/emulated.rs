//! [`EmulatedDevice`]: the library's handle on a running device server (see [`super::server`]):
//! starts `fsgauge devices serve` as a child process, waits until its FUSE file is ready,
//! attaches a loop device to that file with direct I/O, reads the server's stats, and tears
//! everything down on drop (loop device, server, mount, mount directory). Each of these is in
//! the ledger before it is made, so `fsgauge testbed cleanup` removes what a SIGKILL left.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::profile::{load_ref, Kind, Profile};
use super::server::DISK_NAME;
use super::stats::Snapshot;
use crate::testbed::ledger::{process_start_time, Ledger, Resource};
use crate::testbed::LoopDevice;

/// A running emulated device. Dropping it detaches the loop device, stops the server and
/// removes its mount.
pub struct EmulatedDevice {
    profile: Profile,
    child: Child,
    /// The control pipe; closing it ends the server.
    control: Option<ChildStdin>,
    replies: BufReader<ChildStdout>,
    mount: PathBuf,
    file: PathBuf,
    loop_dev: Option<LoopDevice>,
    ledger: Ledger,
}

impl std::fmt::Debug for EmulatedDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatedDevice")
            .field("profile", &self.profile.name)
            .field("server_pid", &self.child.id())
            .field("file", &self.file)
            .finish()
    }
}

static SERIAL: AtomicU32 = AtomicU32::new(0);

/// An empty root-only directory for the mount, under the system's temporary directory.
fn make_mount_dir() -> Result<PathBuf> {
    let base = std::env::temp_dir();
    for _ in 0..100 {
        let n = SERIAL.fetch_add(1, Ordering::Relaxed);
        let path = base.join(format!("fsgauge-device-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("creating mount directory {}", path.display()))
            }
        }
    }
    bail!(
        "no free name for a device mount directory in {}",
        base.display()
    )
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
        let (profile, _) = load_ref(profile_ref)?;
        let image = image
            .canonicalize()
            .with_context(|| format!("device image {}", image.display()))?;
        let exe = std::env::current_exe()
            .context("finding the fsgauge executable to run the device server")?;
        let exe = server_executable(&exe);
        let n = SERIAL.fetch_add(1, Ordering::Relaxed);
        let name = format!("device-{}-{n}", std::process::id());
        let mut ledger = match ledger_dir {
            Some(dir) => Ledger::begin_in(dir, &name, false)?,
            None => Ledger::begin(&name, false)?,
        };
        ledger.set_details(
            serde_json::json!({"kind": "emulated device", "profile": profile_ref, "image": image}),
        )?;
        let mount = make_mount_dir()?;
        ledger.record(Resource::Dir {
            path: mount.clone(),
            id: None,
        })?;
        let mut child = Command::new(&exe)
            .args(["devices", "serve", "--profile", profile_ref, "--size"])
            .arg(size.to_string())
            .arg("--offset")
            .arg(offset.to_string())
            .arg("--image")
            .arg(&image)
            .arg("--mount")
            .arg(&mount)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| {
                format!("starting the device server {} devices serve", exe.display())
            })?;
        let pid = child.id();
        ledger.record(Resource::DeviceServer {
            pid,
            start: process_start_time(pid).unwrap_or(0),
            mount: mount.clone(),
        })?;
        let control = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("the device server's stdout was not piped"))?;
        let mut dev = EmulatedDevice {
            profile,
            child,
            control,
            replies: BufReader::new(stdout),
            file: mount.join(DISK_NAME),
            mount,
            loop_dev: None,
            ledger,
        };
        dev.wait_ready()?;
        Ok(dev)
    }

    fn wait_ready(&mut self) -> Result<()> {
        // The server's first line; a server that fails closes its stdout.
        let pid = self.child.id();
        let mut line = String::new();
        let r = self.replies.read_line(&mut line);
        match r {
            Ok(_) if line.trim() == "ready" => Ok(()),
            Ok(_) => Err(self.died().context(format!(
                "the device server for {} did not start (it said {:?})",
                self.profile.name,
                line.trim()
            ))),
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

    /// The server's process id.
    pub fn server_pid(&self) -> u32 {
        self.child.id()
    }

    /// The profile served.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Attaches a loop device to the disk file with direct I/O (refused if the kernel falls
    /// back to buffered I/O: the file would be cached a second time and every timing would be
    /// meaningless), marked rotational for a rotating profile. Returns its path.
    pub fn attach_loop(&mut self) -> Result<PathBuf> {
        if let Some(l) = &self.loop_dev {
            return Ok(l.path().to_path_buf());
        }
        self.ledger.record(Resource::Loop {
            image: self.file.clone(),
            backing: None,
        })?;
        let disk = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.file)
            .with_context(|| format!("opening the emulated disk {}", self.file.display()))?;
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
        let rotational = if self.profile.kind == Kind::Hdd {
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
        let pid = self.child.id();
        let ctl = self
            .control
            .as_mut()
            .ok_or_else(|| anyhow!("the device server (pid {pid}) is being stopped"))?;
        ctl.write_all(b"stats\n")
            .and_then(|_| ctl.flush())
            .map_err(|e| {
                self.died().context(format!(
                    "asking the device server (pid {pid}) for its stats: {e}"
                ))
            })?;
        let mut line = String::new();
        match self.replies.read_line(&mut line) {
            Ok(n) if n > 0 => serde_json::from_str(line.trim()).with_context(|| {
                format!(
                    "the device server's (pid {pid}) stats line {:?}",
                    line.trim()
                )
            }),
            _ => Err(self.died()),
        }
    }

    /// Ok while the server runs; an error naming it and how it ended otherwise.
    pub fn check(&mut self) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            _ => Err(self.died()),
        }
    }

    fn died(&mut self) -> anyhow::Error {
        let pid = self.child.id();
        let how = match self.child.try_wait() {
            Ok(Some(st)) => format!("exited ({st})"),
            Ok(None) => "stopped answering".to_string(),
            Err(e) => format!("cannot be waited for ({e})"),
        };
        anyhow!(
            "the emulated device server for {} (pid {pid}, serving {}) {how}: its disk fails every request; see its messages above, and `fsgauge testbed cleanup` removes what it left",
            self.profile.name,
            self.file.display()
        )
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
        if let Some(l) = self.loop_dev.take() {
            if let Err(e) = l.detach() {
                errs.push(e);
            }
        }
        // Closing the control pipe asks the server to unmount and exit.
        drop(self.control.take());
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
        errs.extend(self.ledger.release_all());
        errs
    }
}

impl Drop for EmulatedDevice {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// The executable that serves: this one, unless it is a test harness (`target/*/deps/…`),
/// whose `fsgauge` binary sits one directory up.
fn server_executable(exe: &Path) -> PathBuf {
    if let Some(deps) = exe.parent() {
        if deps.file_name().is_some_and(|n| n == "deps") {
            if let Some(up) = deps.parent() {
                let bin = up.join("fsgauge");
                if bin.exists() {
                    return bin;
                }
            }
        }
    }
    exe.to_path_buf()
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
    crate::testbed::mount::unmount(mount).with_context(|| {
        format!(
            "unmounting the device server's FUSE mount {}",
            mount.display()
        )
    })
}
