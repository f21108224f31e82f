//! The device `devices check` and `devices fit` measure: a real block device, read only, or an
//! emulated disk of a profile on a sparse image fsgauge makes for it.
//!
//! The image follows the testbeds' rule (see [`crate::testbed`], "What a testbed trusts"):
//! it lives in a private directory with an unpredictable name, made 0700 with `mkdirat` in
//! fsgauge's own work directory (`/var/tmp/fsgauge`, refused when someone else could change
//! it), and is created `O_EXCL|O_NOFOLLOW` through that directory's descriptor; the server
//! reads it through this process's descriptor (`/proc/PID/fd/N`), never by a name. Both are
//! in the ledger before they are made, so `fsgauge testbed cleanup` removes them after a
//! SIGKILL; teardown deletes them through the held descriptors, only while the names are
//! still the inodes made.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use anyhow::{anyhow, Context, Result};

use super::check::{self, Bench, CheckOptions, CheckReport, Target};
use crate::base::error::bad_input;
use crate::base::sys::trust::{self as sys_trust, FileId};
use crate::base::units::parse_size;
use crate::device::emulated::Start;
use crate::device::profile::Kind;
use crate::device::server::{DiskSettings, Serving};
use crate::device::{disk, load_ref, ProfileRef};
use crate::host::ledger::{Ledger, Resource};
use crate::host::workdir::{default_workdir, Backing};

/// The emulated disk's size for `ram` (and profiles without a capacity).
const RAM_DEFAULT: u64 = 8 << 30;

/// What to measure and where.
#[derive(Debug, Clone)]
pub struct TargetSpec<'a> {
    /// A profile (name or file, with ablations) or a block device `/dev/X`.
    pub target: &'a str,
    /// The emulated disk's size (default: the profile's capacity).
    pub size: Option<&'a str>,
    /// Where the emulated disk starts on the modelled one.
    pub offset: &'a str,
    /// The profile a real device is compared with (and placed by).
    pub profile: Option<&'a str>,
    /// A shell command run after the micro-benchmarks (`--run`).
    pub run: Option<&'a str>,
}

impl TargetSpec<'_> {
    /// Whether the target is a real device.
    pub fn is_device(&self) -> bool {
        self.target.starts_with("/dev/")
    }
}

/// Checks the options and the target before anything is made: `--seconds` in range, a
/// `/dev/` target a block device, a profile that loads.
pub fn validate(spec: &TargetSpec<'_>, opts: &CheckOptions) -> Result<()> {
    if !(opts.seconds > 0.0 && opts.seconds <= 3600.0) {
        return Err(bad_input(format!(
            "--seconds {} is out of range: give 0 < seconds <= 3600",
            opts.seconds
        )));
    }
    if spec.is_device() {
        if opts.write {
            return Err(bad_input(format!(
                "--write is refused on the real device {}: `devices check` only reads real devices; check an emulated one (a profile name) to measure writes",
                spec.target
            )));
        }
        let md = std::fs::metadata(spec.target)
            .map_err(|e| bad_input(format!("{}: {e}", spec.target)))?;
        if !md.file_type().is_block_device() {
            return Err(bad_input(format!(
                "{} is not a block device: give a disk such as /dev/sdb, or a profile name to measure an emulated disk",
                spec.target
            )));
        }
        if let Some(p) = spec.profile {
            load_ref(p)?;
        }
    } else {
        load_ref(spec.target)?;
    }
    Ok(())
}

/// Runs the check on the target (an emulated one is torn down before this returns).
pub fn check(spec: &TargetSpec<'_>, opts: &CheckOptions) -> Result<CheckReport> {
    validate(spec, opts)?;
    if spec.is_device() {
        real(spec, opts)
    } else {
        emulated(spec, opts)
    }
}

fn real(spec: &TargetSpec<'_>, opts: &CheckOptions) -> Result<CheckReport> {
    let dev = Path::new(spec.target);
    let model = match spec.profile {
        Some(p) => {
            let (p, a) = load_ref(p)?;
            Some((p, a, 0))
        }
        None => None,
    };
    let t = Target {
        device: dev.to_path_buf(),
        size: check::device_size(dev)?,
        model,
        server: None,
    };
    let r = check::run(t, spec.target, opts)?;
    if let Some(cmd) = spec.run {
        run_command(cmd, dev, None)?;
    }
    Ok(r)
}

fn emulated(spec: &TargetSpec<'_>, opts: &CheckOptions) -> Result<CheckReport> {
    // How the disk is served: the user's fallback, read here where the command describes its
    // disk (the server reads no environment).
    let serving = Serving::from_env().map_err(bad_input)?;
    let (profile, _) = load_ref(spec.target)?;
    let offset =
        parse_size(spec.offset).map_err(|e| bad_input(format!("--offset {}: {e}", spec.offset)))?;
    let size = match spec.size {
        Some(s) => parse_size(s).map_err(|e| bad_input(format!("--size {s}: {e}")))?,
        None if profile.kind == Kind::Ram || profile.capacity_bytes == 0 => RAM_DEFAULT,
        None => profile.capacity_bytes.saturating_sub(offset),
    } / 4096
        * 4096;
    if size == 0 {
        return Err(bad_input(format!(
            "the emulated disk would be empty: --offset {} is past the profile's capacity, or --size is under 4 KiB",
            spec.offset
        )));
    }
    let mut scratch = Scratch::make(size)?;
    let r = with_image(spec, &scratch.image, (size, offset), serving, opts);
    let errs = scratch.release();
    let report = r?;
    if let Some(e) = errs.into_iter().next() {
        return Err(e);
    }
    Ok(report)
}

/// The private directory and sparse image of an emulated check, held by descriptors.
struct Scratch {
    ledger: Ledger,
    base: OwnedFd,
    name: String,
    dir: OwnedFd,
    image: File,
    ids: (FileId, FileId),
}

impl Scratch {
    /// Makes the private directory in fsgauge's work directory and the image of `size` bytes
    /// in it, each recorded in the ledger first.
    fn make(size: u64) -> Result<Scratch> {
        let mut ledger = Ledger::begin(&format!("device-check-{}", std::process::id()), false)?;
        match Scratch::make_in(&mut ledger, size) {
            Ok((base, name, dir, image, ids)) => Ok(Scratch {
                ledger,
                base,
                name,
                dir,
                image,
                ids,
            }),
            Err(e) => {
                let _ = ledger.release_all();
                Err(e)
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn make_in(
        ledger: &mut Ledger,
        size: u64,
    ) -> Result<(OwnedFd, String, OwnedFd, File, (FileId, FileId))> {
        let work = default_workdir(Backing::File);
        let base = sys_trust::own_dir(&work).context("fsgauge's work directory")?;
        let name = sys_trust::private_name("check");
        let (dir, _, dir_id) = ledger.make_at(base.as_fd(), &work, &name, "", |d, n| {
            sys_trust::make_dir_at(d, n, 0o700)
        })?;
        let path = work.join(&name);
        let (image, _, id) = ledger.make_at(
            dir.as_fd(),
            &path,
            "image",
            "the device image ",
            sys_trust::create_file_at,
        )?;
        let image_path = path.join("image");
        image.set_len(size).with_context(|| {
            format!(
                "making the sparse device image {} of {size} bytes (give a smaller --size?)",
                image_path.display()
            )
        })?;
        Ok((base, name, dir, image, (dir_id, id)))
    }

    /// Deletes the image and the directory through the held descriptors (only while their
    /// names are still the inodes made) and closes the ledger entry.
    fn release(&mut self) -> Vec<anyhow::Error> {
        let (dir_id, image_id) = self.ids;
        let (base, dir, name) = (&self.base, &self.dir, &self.name);
        self.ledger.release_all_with(|r| match r {
            Resource::Image { .. } => Some(
                sys_trust::remove_at(dir.as_fd(), "image", false, Some(image_id))
                    .context("removing the device image"),
            ),
            Resource::Dir { .. } => Some(
                sys_trust::remove_at(base.as_fd(), name, true, Some(dir_id))
                    .with_context(|| format!("removing the private directory {name}")),
            ),
            _ => None,
        })
    }
}

fn with_image(
    spec: &TargetSpec<'_>,
    image: &File,
    (size, offset): (u64, u64),
    serving: Serving,
    opts: &CheckOptions,
) -> Result<CheckReport> {
    let pref = ProfileRef::new(spec.target)?;
    let (profile, abl) = (pref.profile().clone(), pref.ablations());
    let (mut dev, loop_dev) = disk::start(&Start {
        ledger_dir: None,
        disk: DiskSettings::new(pref, size, offset).served(serving),
        image: disk::held_path(image),
        role: "",
    })?;
    check::settle();
    let t = Target {
        device: loop_dev.clone(),
        size,
        model: Some((profile, abl, offset)),
        server: Some(&mut dev),
    };
    let mut report = check::run(t, spec.target, opts)?;
    if let Some(cmd) = spec.run {
        let mut t = Target {
            device: loop_dev,
            size,
            model: None,
            server: Some(&mut dev),
        };
        report.benches.push(run_measured(&mut t, cmd)?);
    }
    dev.stop()?;
    Ok(report)
}

/// The server's CPU per request as `--run` says it: none measured where the command made no
/// requests (not "NaN").
fn server_cpu_said(cpu_us: Option<f64>, requests: u64) -> String {
    match cpu_us {
        Some(c) => format!("server CPU {c:.1} µs per request"),
        None if requests == 0 => "no requests, so no server CPU per request".into(),
        None => "server CPU not measured".into(),
    }
}

/// Runs `--run` on the emulated device `t` with the server's lateness and CPU over it.
fn run_measured(t: &mut Target<'_>, cmd: &str) -> Result<Bench> {
    let device = t.device.clone();
    let pid = t.server.as_ref().map(|s| s.server_pid());
    let s = check::served_over(t, || run_command(cmd, &device, pid))?
        .ok_or_else(|| anyhow!("--run on an emulated disk: its server gave no figures"))?;
    let l = s.lateness;
    eprintln!(
        "--run: {} requests; lateness p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms; the disk's clock paused {:.3} ms in {} stops; {}",
        s.requests,
        l.p50_ms,
        l.p99_ms,
        l.max_ms,
        l.pause_ms,
        l.pauses,
        server_cpu_said(s.cpu_us, s.requests)
    );
    Ok(Bench {
        name: format!("--run {}", cmd.split_whitespace().next().unwrap_or("")),
        unit: "requests",
        measured: s.requests as f64,
        modelled: None,
        error: None,
        requests: s.requests,
        demerit: None,
        p50_ms: None,
        p99_ms: None,
        lateness: Some(l),
        server_cpu_us_per_request: s.cpu_us,
    })
}

/// Runs `cmd` with `sh -c`, FSGAUGE_DEVICE set to the device (and FSGAUGE_SERVER_PID to an
/// emulated device's server).
fn run_command(cmd: &str, dev: &Path, pid: Option<u32>) -> Result<()> {
    let mut c = std::process::Command::new("sh");
    c.arg("-c").arg(cmd).env("FSGAUGE_DEVICE", dev);
    if let Some(pid) = pid {
        c.env("FSGAUGE_SERVER_PID", pid.to_string());
    }
    let st = c
        .status()
        .with_context(|| format!("running --run {cmd:?}"))?;
    if !st.success() {
        anyhow::bail!("--run {cmd:?} failed ({st})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_without_requests_says_so_not_nan() {
        let said = server_cpu_said(None, 0);
        assert!(
            !said.contains("NaN") && said.contains("no requests"),
            "{said}"
        );
        assert_eq!(
            server_cpu_said(Some(12.34), 5),
            "server CPU 12.3 µs per request"
        );
    }
}
