//! Memory conditioning: a memory cgroup that caps the workload's memory, page cache included
//! (`--mem-limit`), and the low-memory study's "memory charger" that pins memory until only a
//! given amount is left free (`--mem-charge`).
//!
//! cgroup2's `memory.max` is used where the unified hierarchy offers the memory controller;
//! otherwise cgroup v1's `memory.limit_in_bytes`. The whole fsgauge process moves into the cgroup
//! for the run (all its threads with it) and moves back out before the cgroup is removed.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::dirty::{DirtyHold, DirtyLimits, Host};
use super::ledger::{Ledger, Resource};
use crate::base::error::bad_input;
use crate::base::units::format_size;

const V2_ROOT: &str = "/sys/fs/cgroup/unified";
const V2_ROOT_PLAIN: &str = "/sys/fs/cgroup";
const V1_ROOT: &str = "/sys/fs/cgroup/memory";

/// Which cgroup interface a limit went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    V1,
    V2,
}

/// A memory cgroup the process lives in until drop.
#[derive(Debug)]
pub struct MemLimit {
    path: PathBuf,
    version: CgroupVersion,
    /// Where the process came from, to go back to.
    origin: PathBuf,
    limit: u64,
    /// On cgroup v1: the host's dirty thresholds, held at the limit's share for the run.
    dirty: Option<DirtyHold>,
    ledger: Option<Ledger>,
}

fn v2_root() -> Option<PathBuf> {
    for root in [V2_ROOT, V2_ROOT_PLAIN] {
        let ctl = Path::new(root).join("cgroup.controllers");
        if let Ok(s) = fs::read_to_string(&ctl) {
            if s.split_whitespace().any(|c| c == "memory") {
                return Some(PathBuf::from(root));
            }
        }
    }
    None
}

/// The cgroup path of this process for a v1 controller or for v2 ("" controller).
fn own_cgroup(controller: &str) -> Option<String> {
    let s = fs::read_to_string("/proc/self/cgroup").ok()?;
    s.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let _id = parts.next()?;
        let ctrls = parts.next()?;
        let path = parts.next()?;
        let hit = if controller.is_empty() {
            ctrls.is_empty()
        } else {
            ctrls.split(',').any(|c| c == controller)
        };
        hit.then(|| path.to_string())
    })
}

impl MemLimit {
    /// Creates a cgroup limited to `limit` bytes and moves this process into it. `needs` is what
    /// the workload itself must have (its buffers, plus this process); a smaller limit is refused.
    pub fn apply(limit: u64, needs: u64) -> Result<Self> {
        if limit < needs {
            return Err(bad_input(format!(
                "--mem-limit {} is below what the workload itself needs ({}: fsgauge's own memory plus its I/O buffers); the run would be killed by the OOM killer instead of measured. Give at least {}",
                format_size(limit),
                format_size(needs),
                format_size(needs.next_multiple_of(1 << 20))
            )));
        }
        if !nix::unistd::geteuid().is_root() {
            return Err(bad_input(
                "--mem-limit needs root (it creates a memory cgroup)",
            ));
        }
        let (version, root, origin) = if let Some(root) = v2_root() {
            let own = own_cgroup("").unwrap_or_else(|| "/".into());
            (
                CgroupVersion::V2,
                root.clone(),
                root.join(own.trim_start_matches('/')),
            )
        } else if Path::new(V1_ROOT).join("memory.limit_in_bytes").exists() {
            let own = own_cgroup("memory").unwrap_or_else(|| "/".into());
            let root = PathBuf::from(V1_ROOT);
            (
                CgroupVersion::V1,
                root.clone(),
                root.join(own.trim_start_matches('/')),
            )
        } else {
            bail!("no memory cgroup controller: neither cgroup2 with the memory controller nor cgroup v1 at {V1_ROOT}");
        };
        // Under our own cgroup where we may create children (v1), else at the root. For v2 a
        // process may only live in leaves, so the new group goes beside us at the root.
        let parent = match version {
            CgroupVersion::V1 => origin.clone(),
            CgroupVersion::V2 => root.clone(),
        };
        let name = format!("fsgauge-{}-{}", std::process::id(), unique());
        let path = parent.join(&name);
        let mut ledger = Ledger::begin(&format!("cgroup-{name}"), false)?;
        ledger.record(Resource::Cgroup { path: path.clone() })?;
        let made = (|| -> Result<()> {
            fs::create_dir(&path).with_context(|| format!("creating cgroup {}", path.display()))?;
            match version {
                CgroupVersion::V2 => {
                    write(&path.join("memory.max"), &limit.to_string())?;
                    let _ = write(&path.join("memory.swap.max"), "0");
                }
                CgroupVersion::V1 => {
                    write(&path.join("memory.limit_in_bytes"), &limit.to_string())?;
                    let _ = write(&path.join("memory.swappiness"), "0");
                }
            }
            write(&path.join("cgroup.procs"), &std::process::id().to_string())
        })();
        // On failure, dropping `this` moves us back and removes the cgroup.
        let mut this = Self {
            path,
            version,
            origin,
            limit,
            dirty: None,
            ledger: Some(ledger),
        };
        made?;
        if version == CgroupVersion::V1 {
            this.hold_dirty_thresholds()?;
        }
        Ok(this)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// cgroup v1 does not throttle a cgroup's dirty pages against its limit (see
    /// [`super::dirty`]): the host's thresholds are held at the limit's share while the run
    /// lives in the cgroup. Recorded in the ledger first, so a killed run's hold is given back.
    fn hold_dirty_thresholds(&mut self) -> Result<()> {
        let me = super::dirty::this_process()?;
        if let Some(ledger) = self.ledger.as_mut() {
            ledger.record(Resource::DirtyHold {
                pid: me.0,
                start: me.1,
            })?;
        }
        // Where the host's sysctls cannot be written (a container's read-only /proc/sys), the
        // run goes on as before, warned; its result then records no thresholds.
        match DirtyHold::take(Host::system(), self.limit, me) {
            Ok(hold) => self.dirty = Some(hold),
            Err(e) => eprintln!(
                "fsgauge: warning: cgroup v1 does not throttle the run's dirty pages against its --mem-limit, and holding the host's dirty thresholds failed ({e:#}); a small limit may end in the OOM killer"
            ),
        }
        Ok(())
    }

    /// The dirty-page thresholds held for the run (cgroup v1 only).
    pub fn dirty_limits(&self) -> Option<DirtyLimits> {
        self.dirty.as_ref().map(DirtyHold::limits)
    }

    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Peak memory use of the cgroup so far (page cache included), where the kernel reports it.
    pub fn peak(&self) -> Option<u64> {
        let f = match self.version {
            CgroupVersion::V1 => "memory.max_usage_in_bytes",
            CgroupVersion::V2 => "memory.peak",
        };
        fs::read_to_string(self.path.join(f))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    fn release_inner(&mut self) {
        let _ = write(
            &self.origin.join("cgroup.procs"),
            &std::process::id().to_string(),
        );
        // Given back here; the ledger's entry for it then finds nothing left to give.
        drop(self.dirty.take());
        if let Some(mut ledger) = self.ledger.take() {
            for e in ledger.release_all_with(teardown) {
                eprintln!("warning: {e:#}");
            }
        }
    }
}

impl Drop for MemLimit {
    fn drop(&mut self) {
        self.release_inner();
    }
}

/// The [`Teardown`](super::ledger::Teardown) of a cgroup the ledger recorded.
pub fn teardown(r: &Resource) -> Option<Result<()>> {
    match r {
        Resource::Cgroup { path } => Some(remove_cgroup(path)),
        Resource::DirtyHold { pid, start } => Some(super::dirty::leave_dead(*pid, *start)),
        _ => None,
    }
}

/// The prefix of a cgroup path outside every cgroup fsgauge made (`fsgauge-*`), when the path
/// is inside one: where a process that must not be limited with the run goes.
fn outside_ours(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let first = parts.iter().position(|p| p.starts_with("fsgauge-"))?;
    Some(format!("/{}", parts[..first].join("/")))
}

/// Moves this process out of every memory cgroup fsgauge made (cgroup v1's memory hierarchy
/// and cgroup2), into the cgroup the run came from. The emulated disk's server calls it: a
/// process that serves a testbed's block requests must never be reclaimed, throttled or
/// OOM-killed against the workload's limit. Returns what could not be done.
pub fn leave_fsgauge_cgroups() -> Vec<String> {
    let me = std::process::id().to_string();
    let mut failed = Vec::new();
    let mut moves = Vec::new();
    if let Some(own) = own_cgroup("memory") {
        moves.push((PathBuf::from(V1_ROOT), own));
    }
    if let (Some(root), Some(own)) = (v2_root(), own_cgroup("")) {
        moves.push((root, own));
    }
    for (root, own) in moves {
        let Some(to) = outside_ours(&own) else {
            continue;
        };
        let procs = root.join(to.trim_start_matches('/')).join("cgroup.procs");
        if let Err(e) = fs::write(&procs, &me) {
            failed.push(format!(
                "could not leave the run's cgroup {own} (writing {}: {e})",
                procs.display()
            ));
        }
    }
    failed
}

fn write(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).with_context(|| format!("writing {value} to {}", path.display()))
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Removes a cgroup directory: its processes (ours, or dead ones) moved to the parent first.
pub fn remove_cgroup(path: &Path) -> Result<()> {
    if !path.exists() {
        return Ok(());
    }
    if let (Ok(procs), Some(parent)) =
        (fs::read_to_string(path.join("cgroup.procs")), path.parent())
    {
        for pid in procs.split_whitespace() {
            let _ = fs::write(parent.join("cgroup.procs"), pid);
        }
    }
    let mut last = None;
    for _ in 0..20 {
        match fs::remove_dir(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(last
        .map(anyhow::Error::from)
        .unwrap_or_else(|| anyhow::anyhow!("busy")))
    .with_context(|| format!("removing cgroup {}", path.display()))
}

/// The seed study's memory charger: locks anonymous memory until `MemAvailable` is down to the
/// target, and gives it back on drop.
#[derive(Debug)]
pub struct MemCharger {
    /// Unmapped (and so given back) when the charger is dropped.
    chunks: Vec<crate::base::sys::mmap::Mmap>,
    locked: u64,
    target: u64,
    available_after: u64,
}

impl MemCharger {
    /// Pins memory until only about `target` bytes are available.
    pub fn charge(target: u64) -> Result<Self> {
        if target < (1 << 20) {
            return Err(bad_input(format!(
                "--mem-charge {} leaves less than 1M free; the kernel itself would stall. Give 1M or more",
                format_size(target)
            )));
        }
        if !nix::unistd::geteuid().is_root() {
            return Err(bad_input(
                "--mem-charge needs root (it locks memory with mlock)",
            ));
        }
        let mut me = Self {
            chunks: Vec::new(),
            locked: 0,
            target,
            available_after: 0,
        };
        // Reclaimable cache must go first, or the charger measures how much cache there was.
        super::cache::drop_caches()?;
        loop {
            crate::base::signals::check()?;
            let avail = crate::base::sys::proc::meminfo("MemAvailable")
                .context("reading MemAvailable from /proc/meminfo")?;
            if avail <= target + (256 << 10) {
                break;
            }
            let want = ((avail - target) / 2).clamp(256 << 10, 1 << 30) as usize & !4095;
            // Locked and populated in one pass; a refusal (RLIMIT_MEMLOCK, no memory) ends it.
            let Ok(chunk) = crate::base::sys::mmap::Mmap::anonymous_locked(want) else {
                break;
            };
            me.chunks.push(chunk);
            me.locked += want as u64;
        }
        me.available_after = crate::base::sys::proc::meminfo("MemAvailable").unwrap_or(0);
        Ok(me)
    }

    pub fn locked(&self) -> u64 {
        self.locked
    }

    pub fn target(&self) -> u64 {
        self.target
    }

    /// MemAvailable when charging was done.
    pub fn available_after(&self) -> u64 {
        self.available_after
    }
}
