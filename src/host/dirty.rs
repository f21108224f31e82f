//! Dirty-page thresholds for a memory-limited run on cgroup v1.
//!
//! cgroup v2 throttles a cgroup's writers against the cgroup's own memory: a 96M cgroup holds
//! about 20% of 96M dirty, as a 96M machine would. cgroup v1 has no such throttling; the
//! thresholds are the host's (`vm.dirty_ratio` of all its memory: gigabytes on a 24G host). So
//! the cgroup fills with dirty pages, reclaim finds nothing clean to free, and a task that holds
//! a journal handle while it charges memory waits on writeback that waits on that handle, until
//! the OOM killer ends the run. Seen on this kind of machine: a lowmem run SIGKILLed with its
//! 96M cgroup full (56M dirty, 40M kernel memory, nothing under writeback) after jbd2 and the
//! flusher had waited 10 minutes.
//!
//! A machine with that little memory has thresholds of its own memory, so on v1 fsgauge sets
//! the host's `vm.dirty_bytes` and `vm.dirty_background_bytes` to the kernel's default ratios
//! (20% and 10%) of the limit while the run holds its cgroup, and puts the host's values back
//! after. The run's result records the thresholds (`conditions.mem_limit_dirty`).
//!
//! The thresholds are the host's, so every fsgauge process that holds them is listed in one
//! file, `/run/fsgauge/dirty-limits.json`, read and written under a lock: it keeps the values
//! the host had before the first hold; the strictest hold applies; the last to leave restores
//! the host's values. A holder that died without leaving (SIGKILL, the OOM killer) is dropped by
//! the next fsgauge that takes or leaves a hold, and by `testbed cleanup` through the run's
//! ledger entry. `/run` is emptied at boot, as the sysctls are reset.
//!
//! The same file keeps a second kind of hold, on `vm.dirty_expire_centisecs` (how old dirty
//! data must be before the periodic writeback writes it), which a run asks for with
//! `--dirty-expire` / a plan's `dirty_expire` ([`ExpireHold`]): the longest hold applies,
//! and the host's value comes back with the last. A process may hold both.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::ledger::{process_start_time, Ledger, Resource};
use crate::base::atomic::OutDir;
use crate::base::sys::trust;

/// The share of the limit at which writers are throttled (the kernel's default `dirty_ratio`).
const DIRTY_PERCENT: u64 = 20;
/// The share at which background writeback starts (the default `dirty_background_ratio`).
const BACKGROUND_PERCENT: u64 = 10;
/// The kernel refuses `dirty_bytes` under two pages; keep well above.
const MIN_BYTES: u64 = 1 << 20;

const STATE_FILE: &str = "dirty-limits.json";

/// The thresholds a run held, as its result records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirtyLimits {
    /// `vm.dirty_bytes`: writers wait above this many dirty bytes.
    pub dirty_bytes: u64,
    /// `vm.dirty_background_bytes`: the flusher starts above this many.
    pub background_bytes: u64,
}

impl DirtyLimits {
    /// The thresholds of a machine with `limit` bytes of memory.
    pub fn for_limit(limit: u64) -> Self {
        Self {
            dirty_bytes: (limit / 100 * DIRTY_PERCENT).max(2 * MIN_BYTES),
            background_bytes: (limit / 100 * BACKGROUND_PERCENT).max(MIN_BYTES),
        }
    }

    fn stricter(self, o: Self) -> Self {
        Self {
            dirty_bytes: self.dirty_bytes.min(o.dirty_bytes),
            background_bytes: self.background_bytes.min(o.background_bytes),
        }
    }
}

/// The host's four dirty sysctls before the first hold. Each pair is exclusive in the kernel
/// (writing one zeroes the other), so the nonzero one of a pair is what is put back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct HostValues {
    dirty_ratio: u64,
    dirty_bytes: u64,
    dirty_background_ratio: u64,
    dirty_background_bytes: u64,
    /// `dirty_expire_centisecs` (absent in a state file of an fsgauge before expire holds: it
    /// then held none, and the host's is read when the first is taken).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dirty_expire_centisecs: Option<u64>,
}

const EXPIRE: &str = "dirty_expire_centisecs";

/// One process's hold: the dirty thresholds of its memory limit, an expiry, or both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Holder {
    pid: u32,
    /// Start time (clock ticks since boot): a reused pid is not taken for the holder.
    start: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    limits: Option<DirtyLimits>,
    /// `vm.dirty_expire_centisecs` held ([`ExpireHold`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expire_centisecs: Option<u64>,
}

impl Holder {
    fn alive(&self) -> bool {
        process_start_time(self.pid) == Some(self.start)
    }

    fn holds_anything(&self) -> bool {
        self.limits.is_some() || self.expire_centisecs.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct State {
    version: u32,
    host: HostValues,
    holders: Vec<Holder>,
}

/// Where the sysctls and the shared state live: the machine's own, or a test's directories.
#[derive(Debug, Clone)]
pub struct Host {
    sysctl: PathBuf,
    state: PathBuf,
}

impl Host {
    /// `/proc/sys/vm` and `/run/fsgauge`.
    pub fn system() -> Self {
        Self {
            sysctl: PathBuf::from("/proc/sys/vm"),
            state: PathBuf::from("/run/fsgauge"),
        }
    }

    /// For tests: files named like the sysctls in `sysctl`, the state in `state`.
    pub fn at(sysctl: &Path, state: &Path) -> Self {
        Self {
            sysctl: sysctl.to_path_buf(),
            state: state.to_path_buf(),
        }
    }

    fn read(&self, name: &str) -> Result<u64> {
        let p = self.sysctl.join(name);
        let s = fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        s.trim()
            .parse()
            .with_context(|| format!("{} holds {:?}, not a number", p.display(), s.trim()))
    }

    fn write(&self, name: &str, v: u64) -> Result<()> {
        let p = self.sysctl.join(name);
        fs::write(&p, v.to_string()).with_context(|| format!("writing {v} to {}", p.display()))
    }

    fn host_values(&self) -> Result<HostValues> {
        Ok(HostValues {
            dirty_ratio: self.read("dirty_ratio")?,
            dirty_bytes: self.read("dirty_bytes")?,
            dirty_background_ratio: self.read("dirty_background_ratio")?,
            dirty_background_bytes: self.read("dirty_background_bytes")?,
            dirty_expire_centisecs: Some(self.read(EXPIRE)?),
        })
    }

    /// Background first when lowering, so that it never stands above the throttle point.
    fn set(&self, l: DirtyLimits) -> Result<()> {
        self.write("dirty_background_bytes", l.background_bytes)?;
        self.write("dirty_bytes", l.dirty_bytes)
    }

    /// The throttle point first when raising it back.
    fn restore(&self, h: &HostValues) -> Result<()> {
        if h.dirty_bytes > 0 {
            self.write("dirty_bytes", h.dirty_bytes)?;
        } else {
            self.write("dirty_ratio", h.dirty_ratio)?;
        }
        if h.dirty_background_bytes > 0 {
            self.write("dirty_background_bytes", h.dirty_background_bytes)
        } else {
            self.write("dirty_background_ratio", h.dirty_background_ratio)
        }
    }

    /// Runs `f` on the shared state under the lock, then writes back what it returns (`None`:
    /// no holder left, the file goes).
    fn with_state<T>(
        &self,
        f: impl FnOnce(Option<State>) -> Result<(Option<State>, T)>,
    ) -> Result<T> {
        let dir_fd = trust::own_dir(&self.state).context("fsgauge's run-time directory")?;
        // The directory itself is the lock: nothing in it can be planted (own_dir checked it).
        let lock = dir_fd
            .try_clone()
            .with_context(|| format!("duplicating the descriptor of {}", self.state.display()))?;
        let _held = Flock::lock(File::from(lock), FlockArg::LockExclusive)
            .map_err(|(_, e)| anyhow::anyhow!("locking {}: {}", self.state.display(), e.desc()))?;
        let dir = OutDir::from_fd(dir_fd, self.state.clone());
        let path = self.state.join(STATE_FILE);
        let old = match fs::read(&path) {
            Ok(b) => Some(
                serde_json::from_slice::<State>(&b)
                    .with_context(|| format!("reading {}", path.display()))?,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let (new, out) = f(old)?;
        match new {
            Some(s) => dir.replace(STATE_FILE, &serde_json::to_vec_pretty(&s)?)?,
            None => match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("removing {}", path.display()))
                }
                _ => {}
            },
        }
        Ok(out)
    }

    /// Applies the strictest of the live holders' limits and the longest of their expiries,
    /// the host's value of each that no one holds; the host's values all when none is left.
    fn settle(&self, mut s: State) -> Result<Option<State>> {
        s.holders.retain(|h| h.alive() && h.holds_anything());
        if s.holders.is_empty() {
            self.restore(&s.host)?;
            self.restore_expire(&s.host)?;
            return Ok(None);
        }
        match s
            .holders
            .iter()
            .filter_map(|h| h.limits)
            .reduce(DirtyLimits::stricter)
        {
            Some(l) => self.set(l)?,
            None => self.restore(&s.host)?,
        }
        match s.holders.iter().filter_map(|h| h.expire_centisecs).max() {
            Some(cs) => self.write(EXPIRE, cs)?,
            None => self.restore_expire(&s.host)?,
        }
        Ok(Some(s))
    }

    fn restore_expire(&self, h: &HostValues) -> Result<()> {
        match h.dirty_expire_centisecs {
            Some(cs) => self.write(EXPIRE, cs),
            None => Ok(()),
        }
    }

    /// Sets this process's part of its hold with `part` (a new holder when it holds nothing
    /// yet) and applies what all the holds together say.
    fn take(&self, (pid, start): (u32, u64), part: impl FnOnce(&mut Holder)) -> Result<()> {
        self.with_state(|old| {
            let mut s = match old {
                Some(s) => s,
                None => State {
                    version: 1,
                    host: self.host_values()?,
                    holders: Vec::new(),
                },
            };
            if s.host.dirty_expire_centisecs.is_none() {
                s.host.dirty_expire_centisecs = Some(self.read(EXPIRE)?);
            }
            // A holder of a reused pid is another process: its hold goes.
            s.holders.retain(|h| h.pid != pid || h.start == start);
            let i = match s.holders.iter().position(|h| h.pid == pid) {
                Some(i) => i,
                None => {
                    s.holders.push(Holder {
                        pid,
                        start,
                        limits: None,
                        expire_centisecs: None,
                    });
                    s.holders.len() - 1
                }
            };
            part(&mut s.holders[i]);
            Ok((self.settle(s)?, ()))
        })
    }

    /// Gives up `part` of the hold of process `pid` (started at `start`), and drops every
    /// holder that died; the host's values come back with the last.
    fn leave_part(&self, pid: u32, start: u64, part: impl Fn(&mut Holder)) -> Result<()> {
        self.with_state(|old| match old {
            None => Ok((None, ())),
            Some(mut s) => {
                for h in s
                    .holders
                    .iter_mut()
                    .filter(|h| h.pid == pid && h.start == start)
                {
                    part(h);
                }
                Ok((self.settle(s)?, ()))
            }
        })
    }

    /// Drops the whole hold of process `pid` (started at `start`) and of every holder that
    /// died; the host's values come back with the last.
    pub fn leave(&self, pid: u32, start: u64) -> Result<()> {
        self.leave_part(pid, start, |h| {
            h.limits = None;
            h.expire_centisecs = None;
        })
    }
}

/// The thresholds this process holds, while it holds them (`host::writeback` tells another
/// process's stricter hold from this one).
static HELD: std::sync::Mutex<Option<DirtyLimits>> = std::sync::Mutex::new(None);

fn set_held(l: Option<DirtyLimits>) {
    *HELD.lock().unwrap_or_else(|e| e.into_inner()) = l;
}

/// The thresholds this process holds now (`None`: it holds none).
pub fn held_limits() -> Option<DirtyLimits> {
    *HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// This process's hold on the host's dirty thresholds, given up on drop.
#[derive(Debug)]
pub struct DirtyHold {
    host: Host,
    pid: u32,
    start: u64,
    limits: DirtyLimits,
}

/// This process and its start time: the holder a hold is taken for (and the ledger records).
pub fn this_process() -> Result<(u32, u64)> {
    let pid = std::process::id();
    let start = process_start_time(pid).context("reading this process's start time")?;
    Ok((pid, start))
}

impl DirtyHold {
    /// Holds the thresholds of a machine with `limit` bytes of memory on `host`, for the
    /// process `me` ([`this_process`]).
    pub fn take(host: Host, limit: u64, (pid, start): (u32, u64)) -> Result<Self> {
        let limits = DirtyLimits::for_limit(limit);
        host.take((pid, start), |h| h.limits = Some(limits))?;
        set_held(Some(limits));
        Ok(Self {
            host,
            pid,
            start,
            limits,
        })
    }

    pub fn limits(&self) -> DirtyLimits {
        self.limits
    }
}

impl Drop for DirtyHold {
    fn drop(&mut self) {
        set_held(None);
        if let Err(e) = self
            .host
            .leave_part(self.pid, self.start, |h| h.limits = None)
        {
            eprintln!("fsgauge: warning: giving back the host's dirty-page thresholds: {e:#}");
        }
    }
}

/// This process's hold on the host's `vm.dirty_expire_centisecs`, given up on drop.
///
/// The kernel's periodic writeback writes an inode's dirty pages once the inode has been
/// dirty for that long (30 s by default), counted in wall time from its first dirtying: for a
/// filesystem's metadata, that of the block device's inode, dirtied by the run's first
/// write. A workload whose phases end near that age meets the writeback inside one phase on
/// one machine and after it on a slower or busier one. A run that asks for an expiry holds
/// it, so that every run meets the same writeback whatever the machine's pace.
#[derive(Debug)]
pub struct ExpireHold {
    host: Host,
    pid: u32,
    start: u64,
    centisecs: u64,
    /// The run's ledger entry for the hold, where one was made ([`Self::for_run`]).
    ledger: Option<Ledger>,
}

impl ExpireHold {
    /// A run's hold at `centisecs` on this machine: recorded in a ledger entry first, so that
    /// a killed run's hold is given back by the next fsgauge that takes or leaves a hold, and
    /// by `testbed cleanup`.
    pub fn for_run(centisecs: u64) -> Result<Self> {
        let me = this_process()?;
        let mut ledger = Ledger::begin(&format!("dirty-expire-{}-{}", me.0, me.1), false)?;
        ledger.record(Resource::DirtyHold {
            pid: me.0,
            start: me.1,
        })?;
        match Self::take(Host::system(), centisecs, me) {
            Ok(mut hold) => {
                hold.ledger = Some(ledger);
                Ok(hold)
            }
            Err(e) => {
                ledger.release_all_with(|_| Some(Ok(())));
                Err(e)
            }
        }
    }

    /// Holds the expiry at `centisecs` on `host` for the process `me` ([`this_process`]);
    /// where another process holds a longer one, that one applies.
    pub fn take(host: Host, centisecs: u64, (pid, start): (u32, u64)) -> Result<Self> {
        host.take((pid, start), |h| h.expire_centisecs = Some(centisecs))?;
        Ok(Self {
            host,
            pid,
            start,
            centisecs,
            ledger: None,
        })
    }

    /// The expiry this hold asked for.
    pub fn centisecs(&self) -> u64 {
        self.centisecs
    }
}

impl Drop for ExpireHold {
    fn drop(&mut self) {
        if let Err(e) = self
            .host
            .leave_part(self.pid, self.start, |h| h.expire_centisecs = None)
        {
            eprintln!("fsgauge: warning: giving back the host's dirty-data expiry: {e:#}");
            // The ledger entry stays for `testbed cleanup`.
            return;
        }
        if let Some(mut ledger) = self.ledger.take() {
            // Given back above: the entry has nothing left to release.
            for e in ledger.release_all_with(|_| Some(Ok(()))) {
                eprintln!("fsgauge: warning: {e:#}");
            }
        }
    }
}

/// For the ledger's teardown: what a dead holder left is given back.
pub fn leave_dead(pid: u32, start: u64) -> Result<()> {
    Host::system().leave(pid, start)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake {
        _dir: tempfile::TempDir,
        host: Host,
    }

    fn fake() -> Fake {
        let dir = tempfile::tempdir().expect("temp dir");
        let sysctl = dir.path().join("vm");
        fs::create_dir(&sysctl).expect("mkdir vm");
        for (n, v) in [
            ("dirty_ratio", 20),
            ("dirty_bytes", 0),
            ("dirty_background_ratio", 10),
            ("dirty_background_bytes", 0),
            (EXPIRE, 3000),
        ] {
            fs::write(sysctl.join(n), format!("{v}\n")).expect("write sysctl");
        }
        let host = Host::at(&sysctl, &dir.path().join("run"));
        Fake { _dir: dir, host }
    }

    fn get(h: &Host, n: &str) -> u64 {
        h.read(n).expect("read")
    }

    #[test]
    fn limits_are_the_default_ratios_of_the_limit() {
        let l = DirtyLimits::for_limit(96 << 20);
        assert_eq!(l.dirty_bytes, (96 << 20) / 100 * 20);
        assert_eq!(l.background_bytes, (96 << 20) / 100 * 10);
        let tiny = DirtyLimits::for_limit(1 << 20);
        assert_eq!(
            (tiny.dirty_bytes, tiny.background_bytes),
            (2 << 20, 1 << 20)
        );
    }

    #[test]
    fn a_hold_sets_the_thresholds_and_its_end_restores_the_hosts() {
        let f = fake();
        let hold =
            DirtyHold::take(f.host.clone(), 96 << 20, this_process().expect("me")).expect("take");
        assert_eq!(get(&f.host, "dirty_bytes"), hold.limits().dirty_bytes);
        assert_eq!(
            get(&f.host, "dirty_background_bytes"),
            hold.limits().background_bytes
        );
        assert!(f.host.state.join(STATE_FILE).exists());
        drop(hold);
        // The host's ratios are written back (a real kernel then zeroes the byte values).
        assert_eq!(get(&f.host, "dirty_ratio"), 20);
        assert_eq!(get(&f.host, "dirty_background_ratio"), 10);
        assert!(!f.host.state.join(STATE_FILE).exists());
    }

    #[test]
    fn the_strictest_hold_applies_and_the_last_to_leave_restores() {
        let f = fake();
        f.host.write("dirty_bytes", 1 << 30).expect("host bytes");
        let big = DirtyLimits::for_limit(512 << 20);
        let small = DirtyLimits::for_limit(64 << 20);
        // A second live holder: this test's parent process (alive for the test's length).
        let parent = nix::unistd::getppid().as_raw() as u32;
        let other = Holder {
            pid: parent,
            start: process_start_time(parent).expect("parent start"),
            limits: Some(small),
            expire_centisecs: None,
        };
        f.host
            .with_state(|_| {
                let s = State {
                    version: 1,
                    host: f.host.host_values()?,
                    holders: vec![other.clone()],
                };
                Ok((f.host.settle(s)?, ()))
            })
            .expect("other holds");
        let hold =
            DirtyHold::take(f.host.clone(), 512 << 20, this_process().expect("me")).expect("take");
        assert_eq!(get(&f.host, "dirty_bytes"), small.dirty_bytes, "strictest");
        drop(hold);
        // The other holder is still alive: its limits stay.
        assert_eq!(get(&f.host, "dirty_bytes"), small.dirty_bytes);
        f.host.leave(other.pid, other.start).expect("leave");
        assert_eq!(
            get(&f.host, "dirty_bytes"),
            1 << 30,
            "the host's bytes back"
        );
        assert!(big.dirty_bytes > small.dirty_bytes);
    }

    #[test]
    fn a_dead_holder_is_dropped_and_the_host_values_come_back() {
        let f = fake();
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id();
        let start = process_start_time(pid).unwrap_or(1);
        child.wait().expect("wait");
        f.host
            .with_state(|_| {
                let s = State {
                    version: 1,
                    host: f.host.host_values()?,
                    holders: vec![Holder {
                        pid,
                        start,
                        limits: Some(DirtyLimits::for_limit(64 << 20)),
                        expire_centisecs: Some(60000),
                    }],
                };
                f.host.set(DirtyLimits::for_limit(64 << 20))?;
                f.host.write(EXPIRE, 60000)?;
                Ok((Some(s), ()))
            })
            .expect("a dead holder's state");
        assert_ne!(get(&f.host, "dirty_bytes"), 0);
        // Anyone's leave (here: a pid that holds nothing) drops the dead and restores.
        f.host.leave(0, 0).expect("leave");
        assert_eq!(get(&f.host, "dirty_ratio"), 20);
        assert_eq!(get(&f.host, EXPIRE), 3000, "the host's expiry back");
        assert!(!f.host.state.join(STATE_FILE).exists());
    }

    /// An expiry hold sets the host's expiry and gives it back; the thresholds are untouched.
    /// A process holding both keeps the expiry when its thresholds go, and the longest of two
    /// processes' expiries applies while both hold.
    #[test]
    fn an_expiry_hold_sets_the_longest_and_the_last_to_leave_restores() {
        let f = fake();
        let me = this_process().expect("me");
        let expire = ExpireHold::take(f.host.clone(), 30_000, me).expect("expire");
        assert_eq!((get(&f.host, EXPIRE), expire.centisecs()), (30_000, 30_000));
        assert_eq!(
            get(&f.host, "dirty_bytes"),
            0,
            "the thresholds are the host's"
        );
        let dirty = DirtyHold::take(f.host.clone(), 96 << 20, me).expect("dirty");
        assert_eq!(get(&f.host, "dirty_bytes"), dirty.limits().dirty_bytes);
        drop(dirty);
        assert_eq!(get(&f.host, "dirty_ratio"), 20, "the thresholds back");
        assert_eq!(get(&f.host, EXPIRE), 30_000, "the expiry still held");
        // Another live process (this test's parent) holds a longer expiry: it applies, and
        // stays after this process leaves.
        let parent = nix::unistd::getppid().as_raw() as u32;
        let other = (parent, process_start_time(parent).expect("parent start"));
        f.host
            .take(other, |h| h.expire_centisecs = Some(60_000))
            .expect("other holds");
        assert_eq!(get(&f.host, EXPIRE), 60_000, "the longest");
        drop(expire);
        assert_eq!(get(&f.host, EXPIRE), 60_000);
        f.host.leave(other.0, other.1).expect("leave");
        assert_eq!(get(&f.host, EXPIRE), 3000, "the host's expiry back");
        assert!(!f.host.state.join(STATE_FILE).exists());
    }

    /// A state file written before expiry holds (no expiry in it) is read, and the host's
    /// expiry is recorded when the first expiry hold is taken.
    #[test]
    fn a_state_file_without_expiry_is_read_and_completed() {
        let f = fake();
        let parent = nix::unistd::getppid().as_raw() as u32;
        let start = process_start_time(parent).expect("parent start");
        let old = format!(
            r#"{{"version":1,"host":{{"dirty_ratio":20,"dirty_bytes":0,"dirty_background_ratio":10,"dirty_background_bytes":0}},"holders":[{{"pid":{parent},"start":{start},"limits":{{"dirty_bytes":1048576,"background_bytes":1048576}}}}]}}"#
        );
        fs::create_dir_all(&f.host.state).expect("state dir");
        fs::write(f.host.state.join(STATE_FILE), old).expect("old state");
        let hold =
            ExpireHold::take(f.host.clone(), 12_000, this_process().expect("me")).expect("expire");
        assert_eq!(get(&f.host, EXPIRE), 12_000);
        drop(hold);
        assert_eq!(get(&f.host, EXPIRE), 3000, "the host's expiry back");
        f.host.leave(parent, start).expect("leave");
        assert!(!f.host.state.join(STATE_FILE).exists());
    }
}
