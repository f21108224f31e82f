//! `read`: the fragmentation project's read tool (seed study 3) — how fast a tree reads back,
//! in four measured phases, each after making the cache cold:
//!
//! * `walk` reads every file in directory-walk order (readdir order, depth first, each entry
//!   stat'ed as the walk goes). Two figures, as the study's two bars: KiB/s counting only the
//!   time inside read(2) (`read_kbps`) and KiB/s over the whole walk (`walk_kbps`), plus the
//!   metadata rate: files stat'ed per second of walk time outside read(2) (`meta_files_per_s`).
//! * `random` reads the files in a shuffled order (seeded) from paths held in memory — no stat
//!   or readdir cost — again both figures.
//! * `blockorder` reads the files in the order of their first physical block (FIEMAP, before
//!   the cache is made cold); files without one (empty, inline data) are listed and skipped.
//! * `stat` walks the tree stat'ing every entry without reading: files stat'ed per second.

use std::fs;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::errno::Errno;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use super::params::{self, CommaList};
use super::{RunContext, Workload};
use crate::base::error::{bad_input, bad_param, SystemFailure};
use crate::measure::{OpDef, Recorder};
use crate::results::MetricDef;

crate::choice! {
    /// One phase of the read test.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ReadPhase("read phase") {
        Walk = "walk",
        Random = "random",
        Blockorder = "blockorder",
        Stat = "stat",
    }
}

/// Parameters of the read test (plan kind `read`; the flags of `fsgauge read`, whose doc
/// comments are their help and whose defaults are a plan's).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct ReadTest {
    /// The tree to read; none: the workload's own directory (e.g. after an `age` step).
    /// `fsgauge read PATH` takes it as its argument (required there).
    #[arg(skip)]
    pub path: Option<PathBuf>,
    /// Phases in order: walk (directory order; KiB/s of read time and of the whole walk),
    /// random (shuffled, paths in memory), blockorder (by first physical block), stat (files
    /// stat'ed per second).
    #[arg(
        long,
        value_name = "LIST",
        default_value = "walk,random,blockorder,stat"
    )]
    pub phases: CommaList<ReadPhase>,
    /// Size of each read(2).
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = params::size)]
    #[serde(deserialize_with = "crate::base::units::de_size")]
    pub block: u64,
    /// Prefix for the phase names (the append study uses `aged-25-`).
    #[serde(skip)]
    #[arg(skip)]
    pub prefix: String,
}

impl Default for ReadTest {
    fn default() -> Self {
        params::defaults()
    }
}

const READ_OPS: [OpDef; 3] = [
    OpDef::primary("file").reading(),
    OpDef::secondary("read").reading(),
    OpDef::secondary("stat"),
];
const STAT_OPS: [OpDef; 1] = [OpDef::primary("stat")];

fn fail(op: &str, path: &Path, e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(SystemFailure(format!(
        "{op} {} failed: {e}",
        path.display()
    )))
}

/// Reads one file whole; returns (bytes, time inside read(2)).
fn read_file(path: &Path, buf: &mut [u8], rec: &mut Recorder) -> Result<(u64, Duration)> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| fail("open", path, "NUL in path"))?;
    let open = |flags| crate::base::sys::open(&c, flags | libc::O_RDONLY | libc::O_CLOEXEC, 0);
    let fd = match open(libc::O_NOATIME) {
        Err(Errno::EPERM) => open(0),
        other => other,
    }
    .map_err(|e| crate::base::sys::fs_error("open", &path.display().to_string(), e))?;
    let read_op = rec.op("read");
    let mut total = 0u64;
    let mut in_read = Duration::ZERO;
    loop {
        let t0 = Instant::now();
        let n = crate::base::sys::read(fd.as_fd(), buf);
        let now = rec.record(read_op, t0, n.map_or(0, |n| n as u64));
        in_read += now - t0;
        let n = match n {
            Ok(0) => break,
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(e) => {
                return Err(crate::base::sys::fs_error(
                    "read",
                    &path.display().to_string(),
                    e,
                ))
            }
        };
        total += n as u64;
    }
    Ok((total, in_read))
}

#[derive(Default)]
struct Tally {
    files: u64,
    bytes: u64,
    read_time: Duration,
    entries: u64,
    paths: Vec<PathBuf>,
}

/// Walks `dir` depth first in readdir order; `lstat`s every entry; reads regular files when
/// `read` is set (into `tally`).
fn walk(
    dir: &Path,
    read: bool,
    keep_paths: bool,
    buf: &mut [u8],
    rec: &mut Recorder,
    tally: &mut Tally,
) -> Result<()> {
    let rd = fs::read_dir(dir).map_err(|e| fail("opendir", dir, e))?;
    let stat_op = rec.op("stat");
    for ent in rd {
        if rec.should_stop() {
            rec.check()?;
        }
        let ent = ent.map_err(|e| fail("readdir", dir, e))?;
        let p = ent.path();
        let t0 = Instant::now();
        let md = fs::symlink_metadata(&p).map_err(|e| fail("stat", &p, e))?;
        rec.record(stat_op, t0, 0);
        tally.entries += 1;
        if md.is_dir() {
            walk(&p, read, keep_paths, buf, rec, tally)?;
        } else if md.is_file() {
            tally.files += 1;
            if read {
                let t0 = Instant::now();
                let (n, t) = read_file(&p, buf, rec)?;
                rec.record(rec.op("file"), t0, n);
                tally.bytes += n;
                tally.read_time += t;
            }
            if keep_paths {
                tally.paths.push(p);
            }
        }
    }
    Ok(())
}

fn kbps(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 / 1024.0 / secs
    } else {
        0.0
    }
}

impl ReadTest {
    fn tree(&self, ctx: &RunContext) -> PathBuf {
        self.path
            .clone()
            .unwrap_or_else(|| ctx.root().to_path_buf())
    }

    fn list(&self, root: &Path) -> Result<Vec<PathBuf>> {
        let meter = crate::measure::PhaseMeter::start(
            "list",
            &READ_OPS,
            &crate::measure::Devices::default(),
            None,
            &crate::measure::Progress::hidden(),
        );
        let mut rec = meter.recorder(0);
        let mut t = Tally::default();
        walk(root, false, true, &mut [], &mut rec, &mut t)?;
        Ok(t.paths)
    }

    fn read_list(
        &self,
        ctx: &mut RunContext,
        name: &str,
        paths: &[PathBuf],
        skipped: Option<usize>,
    ) -> Result<()> {
        let block = self.block as usize;
        let out: Mutex<(u64, Duration)> = Mutex::new((0, Duration::ZERO));
        let phase = ctx.phase(name, &READ_OPS, Some(paths.len() as u64), 1, |_, rec| {
            let mut buf = vec![0u8; block];
            let mut bytes = 0;
            let mut rt = Duration::ZERO;
            let file_op = rec.op("file");
            for p in paths {
                if rec.should_stop() {
                    rec.check()?;
                }
                let t0 = Instant::now();
                let (n, t) = read_file(p, &mut buf, rec)?;
                rec.record(file_op, t0, n);
                bytes += n;
                rt += t;
            }
            *out.lock().unwrap_or_else(|e| e.into_inner()) = (bytes, rt);
            Ok(())
        })?;
        let (bytes, rt) = *out.lock().unwrap_or_else(|e| e.into_inner());
        let wall = phase.wall_s;
        phase.extra.insert("files".into(), paths.len() as f64);
        phase.extra.insert("bytes".into(), bytes as f64);
        phase.extra.insert("read_s".into(), rt.as_secs_f64());
        phase
            .extra
            .insert("read_kbps".into(), kbps(bytes, rt.as_secs_f64()));
        phase.extra.insert("total_kbps".into(), kbps(bytes, wall));
        if let Some(n) = skipped {
            phase.extra.insert("skipped_files".into(), n as f64);
        }
        Ok(())
    }
}

/// The figures this workload records in a phase's `extra`.
pub const METRICS: &[MetricDef] = &[
    MetricDef::count("files", "files", ""),
    MetricDef::count("entries", "entries", ""),
    MetricDef::count("bytes", "bytes read", "B"),
    MetricDef::lower("read_s", "read time", "s"),
    MetricDef::rate("read_kbps", "read rate (read time only)", "KiB/s"),
    MetricDef::rate("total_kbps", "read rate (with the walk)", "KiB/s"),
    MetricDef::rate("meta_files_per_s", "metadata rate", "files/s"),
    MetricDef::rate("files_per_s", "stat rate", "files/s"),
    MetricDef::lower("skipped_files", "files skipped", ""),
];

impl Workload for ReadTest {
    fn metrics(&self) -> &'static [MetricDef] {
        METRICS
    }

    fn kind(&self) -> &'static str {
        "read"
    }

    fn op_kinds(&self) -> Vec<OpDef> {
        [&READ_OPS[..], &STAT_OPS].concat()
    }

    fn params(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("plain struct serializes")
    }

    fn validate(&self) -> Result<()> {
        if self.phases.is_empty() {
            return Err(bad_param(
                "phases",
                "--phases needs at least one of walk,random,blockorder,stat",
            ));
        }
        params::check_block("block", self.block)?;
        if let Some(p) = &self.path {
            let md = fs::metadata(p).map_err(|e| bad_input(format!("{}: {e}", p.display())))?;
            if !md.is_dir() {
                return Err(bad_input(format!("{} is not a directory", p.display())));
            }
        }
        Ok(())
    }

    fn memory_needed(&self) -> Result<u64, crate::base::units::Overflow> {
        self.block
            .checked_add(16 << 20)
            .ok_or_else(crate::base::units::Overflow::of(
                "read",
                "memory estimate",
                format!("--block {}", self.block),
                "--block",
            ))
    }

    fn run(&self, ctx: &mut RunContext) -> Result<()> {
        let root = self.tree(ctx);
        let mut paths: Option<Vec<PathBuf>> = None;
        for ph in &self.phases {
            let name = format!("{}{}", self.prefix, ph.name());
            match ph {
                ReadPhase::Walk | ReadPhase::Stat => {
                    let read = *ph == ReadPhase::Walk;
                    let keep = read && paths.is_none();
                    ctx.make_cold()?;
                    let block = if read { self.block as usize } else { 0 };
                    let out: Mutex<Tally> = Mutex::new(Tally::default());
                    let defs: &[OpDef] = if read { &READ_OPS } else { &STAT_OPS };
                    let phase = ctx.phase(&name, defs, None, 1, |_, rec| {
                        let mut buf = vec![0u8; block];
                        let mut t = Tally::default();
                        walk(&root, read, keep, &mut buf, rec, &mut t)?;
                        *out.lock().unwrap_or_else(|e| e.into_inner()) = t;
                        Ok(())
                    })?;
                    let t = std::mem::take(&mut *out.lock().unwrap_or_else(|e| e.into_inner()));
                    let wall = phase.wall_s;
                    phase.extra.insert("files".into(), t.files as f64);
                    phase.extra.insert("entries".into(), t.entries as f64);
                    if read {
                        let rt = t.read_time.as_secs_f64();
                        phase.extra.insert("bytes".into(), t.bytes as f64);
                        phase.extra.insert("read_s".into(), rt);
                        phase.extra.insert("read_kbps".into(), kbps(t.bytes, rt));
                        phase.extra.insert("total_kbps".into(), kbps(t.bytes, wall));
                        let meta = (wall - rt).max(1e-9);
                        phase
                            .extra
                            .insert("meta_files_per_s".into(), t.entries as f64 / meta);
                        if keep {
                            paths = Some(t.paths);
                        }
                    } else {
                        phase
                            .extra
                            .insert("files_per_s".into(), t.entries as f64 / wall.max(1e-9));
                    }
                }
                ReadPhase::Random => {
                    let mut list = match &paths {
                        Some(p) => p.clone(),
                        None => {
                            let l = self.list(&root)?;
                            paths = Some(l.clone());
                            l
                        }
                    };
                    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(ctx.seed());
                    list.shuffle(&mut rng);
                    ctx.make_cold()?;
                    self.read_list(ctx, &name, &list, None)?;
                }
                ReadPhase::Blockorder => {
                    let list = match &paths {
                        Some(p) => p.clone(),
                        None => {
                            let l = self.list(&root)?;
                            paths = Some(l.clone());
                            l
                        }
                    };
                    let mut placed = Vec::with_capacity(list.len());
                    let mut skipped = Vec::new();
                    for p in list {
                        let fl = crate::layout::scan_file(&p)
                            .with_context(|| format!("mapping {}", p.display()))?;
                        match fl.first_block {
                            Some(b) => placed.push((b, p)),
                            None => skipped.push(p),
                        }
                    }
                    placed.sort();
                    let ordered: Vec<PathBuf> = placed.into_iter().map(|(_, p)| p).collect();
                    let n = skipped.len();
                    ctx.make_cold()?;
                    self.read_list(ctx, &name, &ordered, Some(n))?;
                    if n > 0 {
                        let shown: Vec<String> = skipped
                            .iter()
                            .take(10)
                            .map(|p| p.display().to_string())
                            .collect();
                        ctx.warn(format!(
                            "{name}: {n} file(s) without a first physical block (empty or inline) were skipped: {}{}",
                            shown.join(", "),
                            if n > 10 { ", …" } else { "" }
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The read test of an existing tree (`fsgauge read PATH`), checked: the tree itself is read
/// (no workload directory is made or removed; see [`crate::lab::runner::run_in_place`]), so `path`
/// must be a directory, and cold caches need root and cannot remount what fsgauge did not
/// mount. Returns the tree's resolved path and the test set to read it.
pub fn in_place(
    path: &Path,
    test: &ReadTest,
    cold: super::ColdMode,
) -> Result<(PathBuf, ReadTest)> {
    test.validate()?;
    let md = fs::metadata(path).map_err(|e| bad_input(format!("{}: {e}", path.display())))?;
    if !md.is_dir() {
        return Err(bad_input(format!("{} is not a directory", path.display())));
    }
    if cold != super::ColdMode::None && !nix::unistd::geteuid().is_root() {
        return Err(bad_input(
            "--cold drop/remount needs root (drop_caches); run as root or pass --cold none",
        ));
    }
    if cold == super::ColdMode::Remount {
        return Err(bad_input(
            "--cold remount needs a testbed fsgauge built; on an existing tree use --cold drop",
        ));
    }
    let path = path
        .canonicalize()
        .with_context(|| format!("resolving {}", path.display()))?;
    let test = ReadTest {
        path: Some(path.clone()),
        ..test.clone()
    };
    Ok((path, test))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::workload::params::from_flags;

    /// `fsgauge read` flags and a plan's `kind = "read"` table give the same parameters; the
    /// defaults, now written once in the flags, are those both had. The path is the command's
    /// argument, not a flag.
    #[test]
    fn flags_and_plan_give_the_same_read_test() {
        let kind = crate::workload::registry::find("read").unwrap();
        let flags = from_flags::<ReadTest>(&[]).unwrap();
        let plan = (kind.build)(serde_json::json!({})).unwrap().params();
        assert_eq!(flags.params(), plan);
        assert_eq!(
            plan,
            serde_json::json!({
                "path": null, "phases": ["walk", "random", "blockorder", "stat"],
                "block": 1 << 20
            })
        );
        let flags = from_flags::<ReadTest>(&["--phases", "stat, walk", "--block", "64K"]).unwrap();
        let plan =
            (kind.build)(serde_json::json!({"phases": ["stat", "walk"], "block": "64K"})).unwrap();
        assert_eq!(flags.params(), plan.params());
        let e = from_flags::<ReadTest>(&["--phases", "walk,sideways"]).unwrap_err();
        assert!(
            e.to_string().contains("unknown read phase \"sideways\""),
            "{e}"
        );
        assert!(
            from_flags::<ReadTest>(&["/tmp"]).is_err(),
            "the path is no flag"
        );
        // One --phases with the whole list: a second one is refused, not appended.
        let e = from_flags::<ReadTest>(&["--phases", "walk", "--phases", "stat"]).unwrap_err();
        assert!(
            e.to_string()
                .contains("'--phases <LIST>' cannot be used multiple times"),
            "{e}"
        );
    }
}
