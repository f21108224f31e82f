//! The cleanup ledger: every image, loop device, mount, directory and cgroup fsgauge makes is
//! written here *before* it is made and struck off after it is released, so that a run killed
//! with SIGKILL can be cleaned up later by `fsgauge testbed cleanup`.
//!
//! One JSON file per owner (a testbed or a memory-limit cgroup) in the state directory
//! (`/var/lib/fsgauge/ledger` for root, `$FSGAUGE_STATE_DIR` to override). Files are replaced
//! atomically, so a crash mid-update leaves the old or the new list, never a torn one.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::loopdev;
use crate::atomic::write_atomic;

/// Something fsgauge made that must be released.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Resource {
    /// A directory fsgauge created (removed only if empty).
    Dir { path: PathBuf },
    /// An image file.
    Image { path: PathBuf },
    /// A loop device backed by this image (found again by its backing file).
    Loop { image: PathBuf },
    /// A mount at this target.
    Mount { target: PathBuf },
    /// A cgroup directory (v1 or v2).
    Cgroup { path: PathBuf },
}

impl Resource {
    /// Releases the resource; releasing something that is already gone is not an error.
    pub fn release(&self) -> Result<()> {
        match self {
            Resource::Dir { path } => match fs::remove_dir(path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                // A shared work directory another run is still using stays.
                Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => Ok(()),
                Err(e) => Err(e).with_context(|| format!("removing directory {}", path.display())),
            },
            Resource::Image { path } => match fs::remove_file(path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e).with_context(|| format!("removing image {}", path.display())),
            },
            Resource::Loop { image } => {
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
            Resource::Mount { target } => super::mount::unmount(target),
            Resource::Cgroup { path } => super::memlimit::remove_cgroup(path),
        }
    }

    fn describe(&self) -> String {
        match self {
            Resource::Dir { path } => format!("directory {}", path.display()),
            Resource::Image { path } => format!("image {}", path.display()),
            Resource::Loop { image } => format!("loop device of {}", image.display()),
            Resource::Mount { target } => format!("mount at {}", target.display()),
            Resource::Cgroup { path } => format!("cgroup {}", path.display()),
        }
    }
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

/// The ledger directory.
pub fn state_dir() -> PathBuf {
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

impl Ledger {
    /// Starts an entry. Fails if an entry of that name exists (a testbed name is taken).
    pub fn begin(name: &str, persistent: bool) -> Result<Self> {
        let dir = state_dir();
        fs::create_dir_all(&dir)
            .with_context(|| format!("creating ledger directory {}", dir.display()))?;
        let path = dir.join(format!("{name}.json"));
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
        // create_new: two runs can never share a name.
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| format!("a testbed named {name:?} exists already (ledger {}); pick another name or run `fsgauge testbed destroy {name}`", path.display()))?;
        f.write_all(&serde_json::to_vec_pretty(&entry)?)?;
        f.sync_all()?;
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

    /// Strikes off a resource after it was released.
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
        write_atomic(&self.path, &serde_json::to_vec_pretty(&self.entry)?)
            .with_context(|| format!("updating ledger {}", self.path.display()))
    }

    /// Releases every resource, newest first, and removes the entry when all are gone.
    /// Keeps going past failures and returns them all.
    pub fn release_all(&mut self) -> Vec<anyhow::Error> {
        let mut errors = Vec::new();
        while let Some(r) = self.entry.resources.last().cloned() {
            match release_with_retry(&r) {
                Ok(()) => {
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

    /// Opens an existing entry by name for tearing it down.
    pub fn open(name: &str) -> Result<Self> {
        let path = state_dir().join(format!("{name}.json"));
        let entry = read_entry(&path)?;
        Ok(Self { path, entry })
    }
}

fn release_with_retry(r: &Resource) -> Result<()> {
    let mut last = None;
    for attempt in 0..5 {
        match r.release() {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(50 << attempt));
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("release failed")))
}

fn read_entry(path: &Path) -> Result<LedgerEntry> {
    let bytes = fs::read(path).with_context(|| format!("reading ledger {}", path.display()))?;
    serde_json::from_slice(&bytes)
        .with_context(|| format!("ledger {} is not valid", path.display()))
}

/// The writer's pid of an atomic-write temporary file (`.NAME.tmp-PID`).
fn stale_temp_pid(p: &Path) -> Option<u32> {
    let name = p.file_name()?.to_str()?;
    if !name.starts_with('.') {
        return None;
    }
    name.rsplit_once(".tmp-")?.1.parse().ok()
}

/// Every ledger entry on this machine, sorted by name.
pub fn entries() -> Result<Vec<LedgerEntry>> {
    let dir = state_dir();
    let mut out = Vec::new();
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    for de in rd {
        let p = de?.path();
        if p.extension().is_some_and(|e| e == "json") {
            out.push(read_entry(&p)?);
        } else if let Some(pid) = stale_temp_pid(&p) {
            // A process killed (SIGKILL) inside write_atomic leaves its temporary file: the
            // entry it was writing never existed, so the file is only litter.
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = fs::remove_file(&p);
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}
