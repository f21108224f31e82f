//! The cleanup ledger: every image, loop device, mount, directory and cgroup fsgauge makes is
//! written here *before* it is made and struck off after it is released, so that a run killed
//! with SIGKILL can be cleaned up later by `fsgauge testbed cleanup`.
//!
//! One JSON file per owner (a testbed or a memory-limit cgroup) in the state directory
//! (`/var/lib/fsgauge/ledger` for root, `$FSGAUGE_STATE_DIR` to override). Files are replaced
//! atomically, so a crash mid-update leaves the old or the new list, never a torn one.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::locate::{Locator, Missing};
use super::loopdev;
use crate::base::atomic::{write_atomic, OutDir};
use crate::base::error::bad_input;
use crate::base::sys::trust::{self, FileId};

/// Something fsgauge made that must be released.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Resource {
    /// A directory fsgauge created (removed only if empty, and only if it is still the
    /// directory `id` when that is known).
    Dir {
        path: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<FileId>,
    },
    /// An image file (removed only if it is still the file `id` when that is known).
    Image {
        path: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<FileId>,
    },
    /// A loop device backed by this image: found again by the backing file's identity
    /// (`backing`, as LOOP_GET_STATUS64 reports it) where known, else by its path.
    Loop {
        image: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        backing: Option<FileId>,
    },
    /// A mount at this target. With `fsdev` (the loop device's number) and `backing` (the
    /// loop's image), it is found again in /proc/self/mountinfo wherever it was moved, and
    /// unmounted only while that device is still backed by that image.
    Mount {
        target: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fsdev: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        backing: Option<FileId>,
    },
    /// A cgroup directory (v1 or v2).
    Cgroup { path: PathBuf },
    /// A hold on the host's dirty-page thresholds (see [`super::dirty`]) by the process `pid`
    /// that started at `start`.
    #[serde(rename = "dirty-hold")]
    DirtyHold { pid: u32, start: u64 },
    /// A run's directory `fsgauge-…` directly inside a user's `--dir`, removed with its
    /// contents, but only after the checks of `rundir::remove`: `ino` is the inode
    /// fsgauge's `mkdir` made (absent while not yet confirmed: then only an empty one goes).
    #[serde(rename = "rundir")]
    RunDir {
        parent: PathBuf,
        name: String,
        #[serde(default)]
        ino: Option<u64>,
    },
    /// An emulated-device server (`fsgauge devices serve`, pid and start time so a reused pid
    /// is not taken for it) and its FUSE mount.
    #[serde(rename = "device-server")]
    DeviceServer {
        pid: u32,
        start: u64,
        mount: PathBuf,
    },
}

impl Resource {
    /// Releases the resource. Something that no longer applies counts as released: a path
    /// that is gone or cannot exist (ENOENT, ENOTDIR: below a regular file), a loop device
    /// already detached, a mount already gone. A cgroup, a run directory or a device server
    /// is released by the module that made it, through the [`Teardown`] it gives
    /// ([`Ledger::release_all_with`]); here it is [`NoTeardown`].
    pub fn release(&self) -> Result<()> {
        self.release_in(&Locator::default())
    }

    /// [`Resource::release`], where a directory or image of known identity is looked for
    /// wherever `loc` knows it may be now (renamed since; see [`super::locate`]). One found nowhere
    /// is [`Missing`], not released.
    pub fn release_in(&self, loc: &Locator) -> Result<()> {
        match self {
            Resource::Dir { path, id: Some(id) } => loc.remove(path, true, *id).map(|_| ()),
            Resource::Image { path, id: Some(id) } => loc.remove(path, false, *id).map(|_| ()),
            Resource::Dir { path, id: None } => remove_by_path(path, true, None)
                .with_context(|| format!("removing directory {}", path.display())),
            Resource::Image { path, id: None } => remove_by_path(path, false, None)
                .with_context(|| format!("removing image {}", path.display())),
            Resource::Loop {
                image,
                backing: Some(id),
            } => loopdev::detach_backed_by(*id)
                .with_context(|| format!("detaching the loop device of {}", image.display())),
            Resource::Loop {
                image,
                backing: None,
            } => {
                for dev in loopdev::devices_backed_by(image) {
                    loopdev::detach_path(&dev).with_context(|| {
                        format!(
                            "detaching {} (backed by {})",
                            dev.display(),
                            image.display()
                        )
                    })?;
                }
                Ok(())
            }
            Resource::Mount {
                target,
                fsdev: Some(dev),
                backing,
            } => super::mount::unmount_device(*dev, *backing)
                .with_context(|| format!("unmounting the testbed mounted at {}", target.display())),
            Resource::Mount { target, .. } => super::mount::unmount(target),
            Resource::Cgroup { .. }
            | Resource::DirtyHold { .. }
            | Resource::RunDir { .. }
            | Resource::DeviceServer { .. } => Err(NoTeardown(self.describe()).into()),
        }
    }

    fn describe(&self) -> String {
        match self {
            Resource::Dir { path, .. } => format!("directory {}", path.display()),
            Resource::Image { path, .. } => format!("image {}", path.display()),
            Resource::Loop { image, .. } => format!("loop device of {}", image.display()),
            Resource::Mount { target, .. } => format!("mount at {}", target.display()),
            Resource::Cgroup { path } => format!("cgroup {}", path.display()),
            Resource::DirtyHold { pid, .. } => {
                format!("the host's dirty-page thresholds process {pid} held")
            }
            Resource::RunDir { parent, name, .. } => {
                format!("run directory {}", parent.join(name).display())
            }
            Resource::DeviceServer { pid, mount, .. } => {
                format!("device server (pid {pid}) mounted at {}", mount.display())
            }
        }
    }
}

/// The release of the resources whose teardown lives in the module that makes them (a cgroup:
/// `memlimit`, a run directory: `rundir`, a device server: `device::emulated`): Some for the
/// kinds it knows, None for the rest. Those modules record into the ledger, so the ledger
/// does not use them; whoever releases passes their teardown in.
pub type Teardown<'a> = &'a dyn Fn(&Resource) -> Option<Result<()>>;

/// A resource released without the teardown of the module that made it: it stays in the
/// ledger, for `fsgauge testbed cleanup`, which has every teardown.
#[derive(Debug, thiserror::Error)]
#[error("releasing {0} needs the teardown of the module that made it, which was not given; `fsgauge testbed cleanup` releases it")]
pub struct NoTeardown(pub String);

/// Removes `path`, recorded without its identity (a run killed between making it and
/// recording what it made, or an older fsgauge), through its parent directory opened without
/// following any symlink (not there: nothing to do). A non-empty directory stays (a shared
/// directory another run still uses).
fn remove_by_path(path: &Path, is_dir: bool, id: Option<FileId>) -> Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
    else {
        return Ok(());
    };
    let dir = match trust::open_dir_nofollow(parent) {
        Ok(d) => d,
        Err(e) if not_there(&e) => return Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            anyhow::bail!(
                "{} now leads through a symlink; not following it (someone moved the run's directories)",
                parent.display()
            )
        }
        Err(e) => return Err(e).with_context(|| format!("opening {}", parent.display())),
    };
    match trust::remove_at(std::os::fd::AsFd::as_fd(&dir), name, is_dir, id) {
        Ok(()) => Ok(()),
        Err(e) if not_there(&e) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The path is not there, or cannot be (a component of it is not a directory).
fn not_there(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR)
}

/// One owner's list of resources, as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LedgerEntry {
    pub name: String,
    /// The process that made these; 0 for a persistent testbed (`testbed create`).
    pub owner_pid: u32,
    /// The owner's start time (clock ticks after boot), so a reused pid is not taken for it.
    pub owner_start: u64,
    pub created_at: String,
    /// Free-form facts for `testbed list` (fs, size, device, mount point, options).
    #[serde(default)]
    pub details: serde_json::Value,
    pub resources: Vec<Resource>,
}

impl LedgerEntry {
    pub fn persistent(&self) -> bool {
        self.owner_pid == 0
    }

    /// Whether the process that made this entry is still running.
    pub fn owner_alive(&self) -> bool {
        self.owner_pid != 0 && process_start_time(self.owner_pid) == Some(self.owner_start)
    }
}

/// A ledger directory set by a program that drives testbeds in-process (see
/// [`set_state_dir`]); it wins over the environment.
static STATE_DIR: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

/// Sets (or with `None` clears) the state directory for this process's own testbeds, as
/// `FSGAUGE_STATE_DIR` does for a command. For programs that use the library and must not
/// change their environment, which every child process would inherit (the integration tests
/// run many sandboxes in one process).
pub fn set_state_dir(dir: Option<PathBuf>) {
    if let Ok(mut d) = STATE_DIR.lock() {
        *d = dir;
    }
}

/// The ledger directory.
pub fn state_dir() -> PathBuf {
    if let Some(dir) = STATE_DIR.lock().ok().and_then(|d| d.clone()) {
        return dir.join("ledger");
    }
    if let Some(dir) = std::env::var_os("FSGAUGE_STATE_DIR") {
        return PathBuf::from(dir).join("ledger");
    }
    if nix::unistd::geteuid().is_root() {
        PathBuf::from("/var/lib/fsgauge/ledger")
    } else {
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(format!("/tmp/fsgauge-{}", nix::unistd::getuid())));
        base.join("fsgauge").join("ledger")
    }
}

/// Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat).
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses; fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A live ledger entry owned by this process.
#[derive(Debug)]
pub struct Ledger {
    path: PathBuf,
    entry: LedgerEntry,
}

/// Checks that `name` can name a ledger entry: letters, digits, '-', '_' and '.', not
/// starting with '.' (those are the atomic writer's temporary files), so that it can never
/// reach outside the ledger directory. Every way from a name to a ledger file goes through
/// here.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > MAX_NAME
        || name.starts_with('.')
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(bad_input(format!(
            "{name:?} is not a testbed name: names are 1 to {MAX_NAME} letters, digits, '-', '_' or '.', not starting with '.'"
        )));
    }
    Ok(())
}

/// Longest entry name: the file `NAME.json` stays well under NAME_MAX.
const MAX_NAME: usize = 200;

/// The ledger file of entry `name` in ledger directory `dir`.
fn entry_path(dir: &Path, name: &str) -> Result<PathBuf> {
    check_name(name)?;
    Ok(dir.join(format!("{name}.json")))
}

impl Ledger {
    /// Starts an entry. Fails if an entry of that name exists (a testbed name is taken).
    pub fn begin(name: &str, persistent: bool) -> Result<Self> {
        Self::begin_in(&state_dir(), name, persistent)
    }

    /// The ledger directory this entry lives in.
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or_else(|| Path::new("/"))
    }

    /// [`Ledger::begin`] in the ledger directory `dir`.
    pub fn begin_in(dir: &Path, name: &str, persistent: bool) -> Result<Self> {
        let path = entry_path(dir, name)?;
        // fsgauge's own directory: made 0700, and refused when someone else could change it.
        let dir_fd = trust::own_dir(dir).context("the ledger directory")?;
        let pid = std::process::id();
        let entry = LedgerEntry {
            name: name.to_string(),
            owner_pid: if persistent { 0 } else { pid },
            owner_start: if persistent {
                0
            } else {
                process_start_time(pid).unwrap_or(0)
            },
            created_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            details: serde_json::Value::Null,
            resources: Vec::new(),
        };
        // No-clobber: two runs can never share a name. The entry is written whole (a temporary
        // file, synced, then linked to its name), so a crash leaves no entry or the whole one.
        let file_name = format!("{name}.json");
        let made = OutDir::from_fd(dir_fd, dir.to_path_buf())
            .create_if_absent(&file_name, &serde_json::to_vec_pretty(&entry)?)
            .with_context(|| format!("creating ledger entry {}", path.display()))?;
        if !made {
            return Err(anyhow::Error::new(NameTaken(name.to_string()))
                .context(format!("a testbed named {name:?} exists already (ledger {}); pick another name or run `fsgauge testbed destroy {name}`", path.display())));
        }
        Ok(Self { path, entry })
    }

    pub fn name(&self) -> &str {
        &self.entry.name
    }

    pub fn entry(&self) -> &LedgerEntry {
        &self.entry
    }

    /// Records a resource before it is made.
    pub fn record(&mut self, r: Resource) -> Result<()> {
        if !self.entry.resources.contains(&r) {
            self.entry.resources.push(r);
        }
        self.save()
    }

    /// Replaces a recorded resource by what it turned out to be (e.g. with its inode).
    pub fn replace(&mut self, old: &Resource, new: Resource) -> Result<()> {
        match self.entry.resources.iter_mut().find(|x| *x == old) {
            Some(r) => *r = new,
            None => self.entry.resources.push(new),
        }
        self.save()
    }

    /// Strikes off a resource after it was released.
    /// Makes the file or directory `name` in the directory `dir` (at `dir_path`) with `make`,
    /// which must create it exclusively: recorded first without an identity (so a SIGKILL
    /// between the two leaves nothing unrecorded), struck off again when it could not be made
    /// (an existing one is not ours), then recorded with the identity of what was made.
    /// Returns what `make` gave, the resource as recorded and its identity. `what` names it
    /// in an error ("image ", "" for a directory).
    pub fn make_at<T: std::os::fd::AsFd>(
        &mut self,
        dir: std::os::fd::BorrowedFd<'_>,
        dir_path: &Path,
        name: &str,
        what: &str,
        make: impl FnOnce(std::os::fd::BorrowedFd<'_>, &str) -> std::io::Result<T>,
    ) -> Result<(T, Resource, FileId)> {
        let path = dir_path.join(name);
        let is_dir = what.is_empty();
        let resource = |id| {
            if is_dir {
                Resource::Dir {
                    path: path.clone(),
                    id,
                }
            } else {
                Resource::Image {
                    path: path.clone(),
                    id,
                }
            }
        };
        let recorded = resource(None);
        self.record(recorded.clone())?;
        let made = match make(dir, name) {
            Ok(m) => m,
            Err(e) => {
                let _ = self.forget(&recorded);
                return Err(e).with_context(|| format!("creating {what}{}", path.display()));
            }
        };
        let id = FileId::of(made.as_fd()).with_context(|| format!("stat {}", path.display()))?;
        let held = resource(Some(id));
        self.replace(&recorded, held.clone())?;
        Ok((made, held, id))
    }

    pub fn forget(&mut self, r: &Resource) -> Result<()> {
        self.entry.resources.retain(|x| x != r);
        self.save()
    }

    pub fn set_details(&mut self, details: serde_json::Value) -> Result<()> {
        self.entry.details = details;
        self.save()
    }

    /// Makes the entry persistent (owned by no process) or owned by this process again.
    pub fn set_persistent(&mut self, persistent: bool) -> Result<()> {
        let pid = std::process::id();
        self.entry.owner_pid = if persistent { 0 } else { pid };
        self.entry.owner_start = if persistent {
            0
        } else {
            process_start_time(pid).unwrap_or(0)
        };
        self.save()
    }

    fn save(&self) -> Result<()> {
        // A failed write (disk full, I/O error) leaves no temporary file: write_atomic's own.
        write_atomic(&self.path, &serde_json::to_vec_pretty(&self.entry)?)
            .with_context(|| format!("updating ledger {}", self.path.display()))
    }

    /// Releases every resource, newest first, and removes the entry when all are gone.
    /// Keeps going past failures and returns them all. For an entry of directories, images,
    /// loop devices and mounts only: the rest need their module's [`Teardown`]
    /// ([`Ledger::release_all_with`]).
    pub fn release_all(&mut self) -> Vec<anyhow::Error> {
        self.release_all_with(|_| None)
    }

    /// [`Ledger::release_all`], where `held` releases what the caller holds a descriptor for,
    /// or what its module's [`Teardown`] releases (Some), and leaves the rest to
    /// [`Resource::release`] (None).
    pub fn release_all_with(
        &mut self,
        mut held: impl FnMut(&Resource) -> Option<Result<()>>,
    ) -> Vec<anyhow::Error> {
        let mut errors = Vec::new();
        // Read before anything goes: unmounting lets the loop devices go, and with them where
        // the kernel says the images are now.
        let loc = locator(&self.entry.resources);
        while let Some(r) = self.entry.resources.last().cloned() {
            match release_with_retry(&r, &mut held, &loc) {
                Ok(()) => {
                    self.entry.resources.pop();
                    if let Err(e) = self.save() {
                        errors.push(e);
                    }
                }
                // Found nowhere: reported, and struck off (looking again finds nothing more);
                // what was made before it can still go.
                Err(e) if e.is::<Missing>() => {
                    errors.push(e.context(format!("releasing {}", r.describe())));
                    self.entry.resources.pop();
                    if let Err(e) = self.save() {
                        errors.push(e);
                    }
                }
                Err(e) => {
                    errors.push(e.context(format!("releasing {}", r.describe())));
                    // Leave it in the ledger for `testbed cleanup`, but go on with the rest
                    // only where that is safe: an image under a live loop device must stay.
                    break;
                }
            }
        }
        if self.entry.resources.is_empty() {
            let _ = fs::remove_file(&self.path);
        }
        errors
    }

    /// Opens an existing entry by name for tearing it down. A name that is not a valid
    /// entry name is bad input; a missing entry is [`NoSuchEntry`].
    pub fn open(name: &str) -> Result<Self> {
        Self::open_in(&state_dir(), name)
    }

    /// [`Ledger::open`] in the ledger directory `dir`.
    pub fn open_in(dir: &Path, name: &str) -> Result<Self> {
        let path = entry_path(dir, name)?;
        if !path.exists() {
            return Err(anyhow::Error::new(NoSuchEntry(path)));
        }
        let entry = read_entry(&path)?;
        Ok(Self { path, entry })
    }
}

/// A ledger entry of that name exists already: the name is taken.
#[derive(Debug, thiserror::Error)]
#[error("the name {0:?} is taken")]
pub struct NameTaken(pub String);

/// No ledger entry of that name exists.
#[derive(Debug, thiserror::Error)]
#[error("no ledger entry {}", .0.display())]
pub struct NoSuchEntry(pub PathBuf);

/// The locator of an entry's resources; read before any of them is released (unmounting lets
/// the loop devices go, and with them where the kernel says the images are).
fn locator(resources: &[Resource]) -> Locator {
    let mut dirs = Vec::new();
    let mut images = Vec::new();
    for r in resources {
        match r {
            Resource::Dir { path, id: Some(id) } => dirs.push((path.clone(), *id)),
            Resource::Image { id: Some(id), .. } => images.push(*id),
            _ => {}
        }
    }
    Locator::new(dirs, &images)
}

fn release_with_retry(
    r: &Resource,
    held: &mut impl FnMut(&Resource) -> Option<Result<()>>,
    loc: &Locator,
) -> Result<()> {
    let mut last = None;
    for attempt in 0..5 {
        match held(r).unwrap_or_else(|| r.release_in(loc)) {
            Ok(()) => return Ok(()),
            Err(e) if e.is::<Missing>() || e.is::<NoTeardown>() => return Err(e),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(50 << attempt));
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("release failed")))
}

/// Reads and checks one ledger file: it must parse, name itself after its file, and belong to
/// this user (an entry someone else put here is not trusted to name things to remove).
fn read_entry(path: &Path) -> Result<LedgerEntry> {
    use std::os::unix::fs::MetadataExt;
    let md =
        fs::symlink_metadata(path).with_context(|| format!("reading ledger {}", path.display()))?;
    if !md.is_file() {
        anyhow::bail!("ledger {} is not a regular file", path.display());
    }
    let me = nix::unistd::geteuid().as_raw();
    if md.uid() != me {
        anyhow::bail!(
            "ledger {} belongs to uid {}, not to this user (uid {me})",
            path.display(),
            md.uid()
        );
    }
    let bytes = crate::base::bounded::read_regular(
        path,
        crate::base::bounded::LEDGER_LIMIT,
        "ledger entries",
    )
    .with_context(|| format!("reading ledger {}", path.display()))?;
    let entry: LedgerEntry = serde_json::from_slice(&bytes)
        .with_context(|| format!("ledger {} is not valid", path.display()))?;
    let stem = path.file_stem().and_then(|s| s.to_str());
    if stem != Some(entry.name.as_str()) || check_name(&entry.name).is_err() {
        anyhow::bail!(
            "ledger {} names itself {:?}, not after its file",
            path.display(),
            entry.name
        );
    }
    Ok(entry)
}

/// The writer's pid of an atomic-write temporary file as fsgauge before 0.1's descriptor-based
/// writes named them (`.NAME.tmp-PID`); such litter may still sit in a ledger made by it.
fn stale_temp_pid(p: &Path) -> Option<u32> {
    let name = p.file_name()?.to_str()?;
    if !name.starts_with('.') {
        return None;
    }
    name.rsplit_once(".tmp-")?.1.parse().ok()
}

/// A ledger file that could not be read; it is skipped, and left for a person to look at.
#[derive(Debug)]
pub struct DamagedEntry {
    pub path: PathBuf,
    pub error: anyhow::Error,
}

impl DamagedEntry {
    /// The entry name its file stands for (taken: no new entry may use it).
    pub fn name(&self) -> Option<&str> {
        self.path.file_stem().and_then(|s| s.to_str())
    }

    /// A warning that says what was skipped and how to get rid of it.
    pub fn warning(&self) -> String {
        format!(
            "skipped damaged ledger entry {} ({:#}); if nothing it named is left (check `losetup -a`, `findmnt` and the work directory), remove it: rm {}",
            self.path.display(),
            self.error,
            self.path.display()
        )
    }
}

/// What the ledger directory holds: the entries that could be read, and those that could not.
#[derive(Debug, Default)]
pub struct Scan {
    /// Sorted by name.
    pub entries: Vec<LedgerEntry>,
    pub damaged: Vec<DamagedEntry>,
}

impl Scan {
    /// Every name in use, damaged entries included.
    pub fn taken_names(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|e| e.name.clone())
            .chain(
                self.damaged
                    .iter()
                    .filter_map(|d| d.name().map(String::from)),
            )
            .collect()
    }
}

/// Every ledger entry on this machine; one that cannot be read is listed as damaged, and
/// does not keep the others from being used.
pub fn scan() -> Result<Scan> {
    scan_in(&state_dir())
}

/// [`scan`] of the ledger directory `dir`.
pub fn scan_in(dir: &Path) -> Result<Scan> {
    let mut out = Scan::default();
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    for de in rd {
        let p = de
            .with_context(|| format!("reading {}", dir.display()))?
            .path();
        let hidden = p
            .file_name()
            .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."));
        if hidden {
            if let Some(pid) = stale_temp_pid(&p) {
                // An older fsgauge killed (SIGKILL) inside an atomic write left its temporary
                // file: the entry it was writing is the old one or none, so it is only litter.
                // (Today's writes use unnamed or random, guarded temporaries.)
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = fs::remove_file(&p);
                }
            }
        } else if p.extension().is_some_and(|e| e == "json") {
            match read_entry(&p) {
                Ok(e) => out.entries.push(e),
                Err(error) => out.damaged.push(DamagedEntry { path: p, error }),
            }
        }
    }
    out.entries.sort_by(|a, b| a.name.cmp(&b.name));
    out.damaged.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Every ledger entry that can be read, sorted by name ([`scan`] also says which cannot).
pub fn entries() -> Result<Vec<LedgerEntry>> {
    Ok(scan()?.entries)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    fn ledger_dir(tmp: &tempfile::TempDir) -> PathBuf {
        tmp.path().join("ledger")
    }

    #[test]
    fn names_that_could_leave_the_ledger_are_refused_everywhere() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ledger_dir(&tmp);
        fs::create_dir_all(&dir).unwrap();
        // An entry outside the ledger that a path in a name would reach.
        let outside = tmp.path().join("evil.json");
        fs::write(&outside, b"{}").unwrap();
        for bad in ["../evil", "a/b", "/tmp/x", "", ".hidden", "..", "x\0y"] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
            let e = Ledger::open_in(&dir, bad).unwrap_err();
            assert!(
                e.is::<crate::base::error::BadInput>(),
                "{bad:?}: not bad input: {e:#}"
            );
            assert!(Ledger::begin_in(&dir, bad, true).is_err(), "{bad:?} begun");
        }
        assert_eq!(fs::read(&outside).unwrap(), b"{}");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        assert!(check_name(&"a".repeat(MAX_NAME + 1)).is_err());
        for good in ["ext4-1", "plain_ext4.2-77-0", "cgroup-fsgauge-1-0"] {
            check_name(good).unwrap();
        }
    }

    #[test]
    fn begin_writes_a_whole_entry_and_no_name_twice() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ledger_dir(&tmp);
        let l = Ledger::begin_in(&dir, "tb", false).unwrap();
        let on_disk = read_entry(&dir.join("tb.json")).unwrap();
        assert_eq!(on_disk.name, "tb");
        assert_eq!(on_disk.owner_pid, std::process::id());
        let e = Ledger::begin_in(&dir, "tb", false).unwrap_err();
        assert!(format!("{e:#}").contains("exists already"), "{e:#}");
        // Neither the first write nor the refused second one leaves a temporary file.
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["tb.json"]);
        drop(l);
    }

    /// A tmpfs of its own, unmounted on drop.
    struct TinyFs(tempfile::TempDir);

    impl Drop for TinyFs {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(self.0.path(), nix::mount::MntFlags::MNT_DETACH);
        }
    }

    /// Issue 22 item 15: an update of an entry that cannot be written (the disk is full)
    /// fails, and leaves no temporary file in the ledger directory.
    #[test]
    fn a_failed_update_leaves_no_temporary_file() {
        if !nix::unistd::geteuid().is_root() {
            assert!(
                std::env::var("CI").map_or(true, |v| v.is_empty() || v == "false"),
                "CI must run every test, but this one needs root (mount)"
            );
            eprintln!("skipped: needs root to mount a tiny tmpfs");
            return;
        }
        let tiny = TinyFs(tempfile::tempdir().unwrap());
        nix::mount::mount(
            Some("tmpfs"),
            tiny.0.path(),
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some("size=64k"),
        )
        .unwrap();
        let dir = tiny.0.path().join("ledger");
        let mut l = Ledger::begin_in(&dir, "tb", false).unwrap();
        // Fill the filesystem.
        let mut filler = fs::File::create(tiny.0.path().join("filler")).unwrap();
        while std::io::Write::write_all(&mut filler, &[7u8; 4096]).is_ok() {}
        let e = l
            .record(Resource::Dir {
                path: PathBuf::from("/x".repeat(4096)),
                id: None,
            })
            .unwrap_err();
        assert!(format!("{e:#}").contains("updating ledger"), "{e:#}");
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert_eq!(names, ["tb.json"]);
    }

    #[test]
    fn temporary_files_are_not_entries() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ledger_dir(&tmp);
        fs::create_dir_all(&dir).unwrap();
        // A live writer's temporary stays; a dead writer's (pid beyond pid_max) is litter.
        let live = dir.join(format!(".a.json.tmp-{}", std::process::id()));
        let dead = dir.join(".b.json.tmp-4000000000");
        fs::write(&live, b"").unwrap();
        fs::write(&dead, b"{\"trunc").unwrap();
        // Even a temporary whose own name ends in .json is not an entry.
        fs::write(dir.join(".c.json"), b"").unwrap();
        let scan = scan_in(&dir).unwrap();
        assert!(
            scan.entries.is_empty() && scan.damaged.is_empty(),
            "{scan:?}"
        );
        assert!(live.exists());
        assert!(!dead.exists());
    }

    #[test]
    fn a_damaged_entry_is_skipped_and_named_with_how_to_remove_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ledger_dir(&tmp);
        let mut good = Ledger::begin_in(&dir, "good", true).unwrap();
        good.record(Resource::Dir {
            path: tmp.path().join("d"),
            id: None,
        })
        .unwrap();
        fs::write(dir.join("empty.json"), b"").unwrap();
        fs::write(
            dir.join("other.json"),
            fs::read(dir.join("good.json")).unwrap(),
        )
        .unwrap();
        let scan = scan_in(&dir).unwrap();
        assert_eq!(
            scan.entries.iter().map(|e| &e.name).collect::<Vec<_>>(),
            ["good"]
        );
        let damaged: Vec<_> = scan.damaged.iter().map(|d| d.path.clone()).collect();
        assert_eq!(damaged, [dir.join("empty.json"), dir.join("other.json")]);
        let w = scan.damaged[0].warning();
        assert!(
            w.contains(&format!("rm {}", dir.join("empty.json").display())),
            "{w}"
        );
        assert_eq!(scan.taken_names(), ["good", "empty", "other"]);
    }

    /// The ledger does not reach up to the modules that record into it: a cgroup, a run
    /// directory or a device server is released only through the teardown its module gives,
    /// and without it stays in the entry (for `testbed cleanup`), tried once.
    #[test]
    fn a_resource_its_module_made_goes_only_through_that_modules_teardown() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ledger_dir(&tmp);
        let cgroup = Resource::Cgroup {
            path: tmp.path().join("cg"),
        };
        let mut l = Ledger::begin_in(&dir, "owned", false).unwrap();
        l.record(cgroup.clone()).unwrap();
        let errors = l.release_all();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].is::<NoTeardown>(), "{:#}", errors[0]);
        let message = format!("{:#}", errors[0]);
        assert!(
            message.contains(&format!("cgroup {}", tmp.path().join("cg").display()))
                && message.contains("fsgauge testbed cleanup"),
            "{message}"
        );
        assert_eq!(
            Ledger::open_in(&dir, "owned").unwrap().entry().resources,
            std::slice::from_ref(&cgroup)
        );
        let mut asked = Vec::new();
        let errors = l.release_all_with(|r| {
            asked.push(r.clone());
            matches!(r, Resource::Cgroup { .. }).then_some(Ok(()))
        });
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(asked, [cgroup]);
        assert!(!entry_path(&dir, "owned").unwrap().exists());
    }

    /// Every kind the ledger leaves to its module has a teardown among the testbed's, and
    /// each teardown takes only its own kind.
    #[test]
    fn every_kind_the_ledger_leaves_to_a_module_has_one_teardown() {
        let gone = PathBuf::from("/nonexistent/fsgauge-test");
        let owned = [
            Resource::Cgroup { path: gone.clone() },
            Resource::RunDir {
                parent: gone.clone(),
                name: "fsgauge-tree-1-0".into(),
                ino: None,
            },
            Resource::DeviceServer {
                pid: 0,
                start: 0,
                mount: gone.clone(),
            },
        ];
        for r in &owned {
            assert!(r.release().unwrap_err().is::<NoTeardown>(), "{r:?}");
            let takers = crate::testbed::TEARDOWNS
                .iter()
                .filter(|t| t(r).is_some())
                .count();
            assert_eq!(takers, 1, "teardowns that release {r:?}");
        }
        let own = Resource::Dir {
            path: gone,
            id: None,
        };
        assert!(crate::testbed::TEARDOWNS.iter().all(|t| t(&own).is_none()));
    }

    #[test]
    fn what_no_longer_applies_counts_as_released() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("regular");
        fs::write(&file, b"x").unwrap();
        let below = file.join("sub");
        Resource::Dir {
            path: below.clone(),
            id: None,
        }
        .release()
        .unwrap();
        Resource::Image {
            path: below.clone(),
            id: None,
        }
        .release()
        .unwrap();
        Resource::Loop {
            image: below.clone(),
            backing: None,
        }
        .release()
        .unwrap();
        Resource::Dir {
            path: tmp.path().join("gone"),
            id: None,
        }
        .release()
        .unwrap();
        if nix::unistd::geteuid().is_root() {
            Resource::Mount {
                target: below.clone(),
                fsdev: None,
                backing: None,
            }
            .release()
            .unwrap();
            Resource::Mount {
                target: tmp.path().to_path_buf(),
                fsdev: None,
                backing: None,
            }
            .release()
            .unwrap();
        } else {
            eprintln!("skipped the mount cases: umount2 needs root");
        }
        assert_eq!(fs::read(&file).unwrap(), b"x");
    }

    /// One entry's resources, in a directory of their own: the entry's directory, an image
    /// in it, and a run directory with a small tree in it.
    fn make_entry(dir: &Path, res: &Path, i: usize) -> (String, PathBuf) {
        let name = format!("e{i}");
        let base = res.join(&name);
        let mut l = Ledger::begin_in(dir, &name, false).unwrap();
        l.record(Resource::Dir {
            path: base.clone(),
            id: None,
        })
        .unwrap();
        fs::create_dir(&base).unwrap();
        let img = base.join("fs.img");
        l.record(Resource::Image {
            path: img.clone(),
            id: None,
        })
        .unwrap();
        fs::write(&img, vec![0u8; 4096]).unwrap();
        let rd = format!("fsgauge-tree-1-{i}");
        let tree = base.join(&rd);
        fs::create_dir_all(tree.join("d0/d1")).unwrap();
        fs::write(tree.join("d0/f"), b"data").unwrap();
        fs::write(tree.join("d0/d1/g"), b"data").unwrap();
        let ino = fs::symlink_metadata(&tree).unwrap().ino();
        l.record(Resource::RunDir {
            parent: base.clone(),
            name: rd,
            ino: Some(ino),
        })
        .unwrap();
        // The process "dies" (no pid is that large): the entry stays for cleanup.
        l.entry.owner_pid = 4_000_000_000;
        l.save().unwrap();
        (name, base)
    }

    /// Damages `bytes` one of several ways; the result is never a readable entry of `name`.
    fn corrupt(rng: &mut ChaCha8Rng, bytes: &[u8], other: &[u8], name: &str) -> Vec<u8> {
        loop {
            let mut b = bytes.to_vec();
            match rng.gen_range(0..6) {
                0 => b.clear(),
                1 => b.truncate(rng.gen_range(0..bytes.len())),
                2 => {
                    let at = rng.gen_range(0..b.len());
                    let n = rng.gen_range(1..=16).min(b.len() - at);
                    rng.fill(&mut b[at..at + n]);
                }
                3 => {
                    let shapes: [&[u8]; 5] = [b"[]", b"{}", b"null", b"{\"name\": 1}", b"\0\0\0"];
                    b = shapes[rng.gen_range(0..shapes.len())].to_vec();
                }
                // Another entry's content: readable, but not this file's entry.
                4 => b = other.to_vec(),
                _ => {
                    let at = rng.gen_range(0..b.len());
                    b.insert(at, 0xff);
                }
            }
            let readable = serde_json::from_slice::<LedgerEntry>(&b).is_ok_and(|e| e.name == name);
            if !readable {
                return b;
            }
        }
    }

    /// What must hold: random truncation and corruption of ledger files never keeps cleanup
    /// from removing the resources of the intact entries, and never touches what a damaged
    /// entry names. Seeded; `FSGAUGE_TEST_SEED=N` replays a failure.
    #[test]
    fn corrupted_entries_never_stop_cleanup_of_the_intact_ones() {
        let seed = std::env::var("FSGAUGE_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        eprintln!("ledger corruption seed {seed} (replay: FSGAUGE_TEST_SEED={seed})");
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let iterations = 150;
        for it in 0..iterations {
            // On tmpfs where there is one: the ledger fsyncs every update.
            let tmp = tempfile::tempdir_in("/dev/shm")
                .or_else(|_| tempfile::tempdir())
                .unwrap();
            let root = tmp.path().canonicalize().unwrap();
            let dir = root.join("ledger");
            let res = root.join("res");
            fs::create_dir(&res).unwrap();
            let n = rng.gen_range(1..=8);
            let made: Vec<_> = (0..n).map(|i| make_entry(&dir, &res, i)).collect();
            let mut damaged = Vec::new();
            for (i, (name, _)) in made.iter().enumerate() {
                if rng.gen_bool(0.4) {
                    let path = dir.join(format!("{name}.json"));
                    let other = dir.join(format!("{}.json", made[(i + 1) % n].0));
                    let bytes = corrupt(
                        &mut rng,
                        &fs::read(&path).unwrap(),
                        &fs::read(&other).unwrap(),
                        name,
                    );
                    fs::write(&path, bytes).unwrap();
                    damaged.push(i);
                }
            }
            // Litter of writers killed inside an atomic write.
            fs::write(dir.join(".e0.json.tmp-4000000000"), b"{").unwrap();
            let ctx = format!("seed {seed}, iteration {it}, damaged {damaged:?} of {n}");
            let report = crate::testbed::cleanup_in(&dir, false)
                .unwrap_or_else(|e| panic!("{ctx}: cleanup failed: {e:#}"));
            assert!(report.failed.is_empty(), "{ctx}: {:?}", report.failed);
            let reported: Vec<_> = report.damaged.iter().map(|d| d.path.clone()).collect();
            for (i, (name, base)) in made.iter().enumerate() {
                let file = dir.join(format!("{name}.json"));
                if damaged.contains(&i) {
                    assert!(reported.contains(&file), "{ctx}: {name} not reported");
                    assert!(file.exists(), "{ctx}: damaged {name} removed");
                    let tree = base.join(format!("fsgauge-tree-1-{i}"));
                    assert!(
                        base.join("fs.img").exists() && tree.join("d0/d1/g").exists(),
                        "{ctx}: what damaged {name} names was touched"
                    );
                } else {
                    assert!(report.removed.contains(name), "{ctx}: {name} not removed");
                    assert!(!file.exists(), "{ctx}: {name}'s entry left");
                    assert!(!base.exists(), "{ctx}: {name}'s resources left");
                }
            }
            assert!(!dir.join(".e0.json.tmp-4000000000").exists(), "{ctx}");
            // Removing the damaged files by hand, as the warning says, leaves a clean ledger.
            for d in &report.damaged {
                fs::remove_file(&d.path).unwrap();
            }
            assert!(scan_in(&dir).unwrap().entries.is_empty(), "{ctx}");
        }
    }
}
