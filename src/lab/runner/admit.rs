//! Admission: whether a workload fits on a testbed before anything is made — its space, its
//! inodes and its memory — decided in one place for `bench` (and every command that runs on
//! `--fs`) and for plans, so that the same tree on the same testbed is admitted or refused
//! alike, with the same words. A plan prefixes the refusal with where it is written
//! (`file:line:column: fs_size: ...`); the command line prints it as it is.
//!
//! An ext testbed whose mkfs options say nothing about inodes gets `-N` when its default
//! would be too few, with a note; an explicit `-N` or `-i` that is too small is refused.

use std::path::Path;
use std::time::SystemTime;

use anyhow::{Context, Result};

use super::request::{Place, RunOptions};
use crate::base::error::{bad_input, bad_param};
use crate::base::units::{format_bytes_human, format_size, Overflow};
use crate::testbed::inodes::{count_for, predict, Inodes, RESERVED};
use crate::testbed::params::{SIZE_FLAG, SIZE_KEY};
use crate::testbed::{own_rss, preflight, TestbedSpec};
use crate::workload::{ColdMode, Workload};

/// Filesystems keep space for metadata and the journal: 90% of a testbed's size is usable.
pub fn usable(size: u64) -> u64 {
    size / 10 * 9
}

/// The testbed size (a multiple of 64M) whose usable 90% holds `need` bytes, or `None` past
/// 2^64 bytes.
pub fn fitting_size(need: u64) -> Option<u64> {
    (need / 9)
        .checked_mul(10)?
        .checked_add(1)?
        .checked_next_multiple_of(64 << 20)
}

/// The smallest testbed size, in whole GiB, whose 90% holds `needed` bytes, as a size to give
/// to the testbed (computed in 128 bits: `needed` may be close to 2^64).
fn size_to_hold(needed: u64) -> String {
    const GIB: u128 = 1 << 30;
    let bytes = (u128::from(needed) * 10 / 9).div_ceil(GIB).max(1) * GIB;
    match u64::try_from(bytes) {
        Ok(b) => format_size(b),
        Err(_) => format!("{}G", bytes / GIB),
    }
}

/// Refuses a workload whose space estimate is over the usable 90% of the testbed. The error
/// is bad input at the testbed's `size`.
pub fn space(spec: &TestbedSpec, wl: &dyn Workload) -> anyhow::Result<()> {
    let need = wl.space_needed().map_err(|e| bad_input(e.to_string()))?;
    let usable = usable(spec.size);
    if need <= usable {
        return Ok(());
    }
    Err(bad_param(
        "size",
        format!(
            "the {} workload needs about {} but a {} {} testbed holds at most about {} (90% of its size); make {SIZE_FLAG} larger (at least {SIZE_FLAG} {}; in a plan, {SIZE_KEY}) or the workload smaller",
            wl.kind(),
            format_bytes_human(need as f64),
            format_size(spec.size),
            spec.fs,
            format_bytes_human(usable as f64),
            size_to_hold(need),
        ),
    ))
}

/// Makes sure the workload's files fit in the inodes the testbed's mkfs will make: adds `-N`
/// to an ext testbed whose mkfs options say nothing about inodes when its default would be
/// too few, and returns the note saying so; refuses (bad input at `mkfs`) an explicit `-N`
/// or `-i` that is too small, naming the `-N` that fits.
pub fn inodes(spec: &mut TestbedSpec, wl: &dyn Workload) -> anyhow::Result<Option<String>> {
    let files = wl.inodes_needed();
    let need = files.saturating_add(RESERVED);
    let predicted = predict(spec.fs, spec.size, &spec.mkfs_opts);
    let Some(have) = predicted.count() else {
        return Ok(None);
    };
    if have >= need {
        return Ok(None);
    }
    let fits = count_for(files);
    match predicted {
        Inodes::Default { .. } => {
            spec.mkfs_opts
                .extend(["-N".to_string(), fits.to_string()]);
            Ok(Some(format!(
                "testbed {}: mkfs would make about {have} inodes, but the {} workload makes {files}; added -N {fits}",
                spec.label,
                wl.kind(),
            )))
        }
        _ => Err(bad_param(
            "mkfs",
            format!(
                "testbed {:?} gets {have} inodes from its mkfs options ({}), but the {} workload makes {files}; use -N {fits} (or leave inodes out of mkfs and fsgauge sizes them)",
                spec.label,
                spec.mkfs_opts.join(" "),
                wl.kind(),
            ),
        )),
    }
}

/// fsgauge's own resident memory before a workload starts (about 10-13 MiB measured), for
/// checking a plan's memory limit ahead of the run, where the checking process is not the
/// one that will run (a test harness, say).
pub const TOOL_RSS_ESTIMATE: u64 = 16 << 20;

/// Why a memory limit cannot take a workload, or its need cannot be told: said in one place,
/// for the run's check (bad input, [`refused`]) and a plan's testbed (a fault at its
/// `mem_limit`).
#[derive(Debug, thiserror::Error)]
pub enum MemoryRefusal {
    /// The workload's own estimate overflows.
    #[error(transparent)]
    Estimate(#[from] Overflow),
    /// Its estimate with fsgauge's own memory overflows.
    #[error("the {kind} workload's memory estimate overflows 64 bits; make its counts and sizes smaller")]
    Overflows { kind: &'static str },
    /// The limit is below the need.
    #[error(
        "--mem-limit {} is below what the workload itself needs ({kind}: about {}, fsgauge's own memory plus its buffers); give at least {} (in a plan, mem_limit) or make the workload's threads or block size smaller",
        format_size(*.limit),
        format_bytes_human(*.needs as f64),
        format_size(.needs.next_multiple_of(1 << 20))
    )]
    Below {
        limit: u64,
        kind: &'static str,
        needs: u64,
    },
}

impl MemoryRefusal {
    /// The refusal as bad input (at `mem_limit` when the limit is below the need).
    pub fn refused(self) -> anyhow::Error {
        match self {
            MemoryRefusal::Below { .. } => bad_param("mem_limit", self.to_string()),
            _ => bad_input(self.to_string()),
        }
    }
}

/// What a run of `wl` needs inside a memory limit when fsgauge itself holds `tool_rss`: the
/// workload's own estimate, that, and an 8 MiB margin.
pub fn memory_needs_with(wl: &dyn Workload, tool_rss: u64) -> Result<u64, MemoryRefusal> {
    let own = wl.memory_needed()?;
    own.checked_add(tool_rss + (8 << 20))
        .ok_or(MemoryRefusal::Overflows { kind: wl.kind() })
}

/// Refuses a memory limit below what the workload needs for itself when fsgauge holds
/// `tool_rss` (see [`memory_needs_with`]).
pub fn memory(limit: u64, wl: &dyn Workload, tool_rss: u64) -> Result<(), MemoryRefusal> {
    let needs = memory_needs_with(wl, tool_rss)?;
    if limit >= needs {
        return Ok(());
    }
    Err(MemoryRefusal::Below {
        limit,
        kind: wl.kind(),
        needs,
    })
}

/// Admits a workload onto a testbed: its space, then its inodes (adding `-N` where mkfs would
/// make too few). Returns the notes to show (the `-N` added).
pub fn testbed(spec: &mut TestbedSpec, wl: &dyn Workload) -> anyhow::Result<Vec<String>> {
    space(spec, wl)?;
    Ok(inodes(spec, wl)?.into_iter().collect())
}

/// Checks a run request without making anything.
pub fn check(place: &Place, wl: &dyn Workload, opts: &RunOptions) -> Result<()> {
    wl.validate()?;
    let need = space_needed(wl)?;
    memory_needs(wl).map_err(MemoryRefusal::refused)?;
    if opts.reps == 0 {
        return Err(bad_input("--reps must be 1 or more"));
    }
    let root_needed = opts.cold != ColdMode::None
        || opts.mem_limit.is_some()
        || opts.mem_charge.is_some()
        || opts.dirty_expire.is_some();
    if root_needed && !nix::unistd::geteuid().is_root() {
        let what = if opts.cold != ColdMode::None {
            "--cold drop/remount"
        } else if opts.dirty_expire.is_some() {
            "--dirty-expire (it writes vm.dirty_expire_centisecs)"
        } else {
            "--mem-limit/--mem-charge"
        };
        return Err(bad_input(format!(
            "{what} needs root; run as root or leave it out"
        )));
    }
    match place {
        Place::Testbed(spec) => {
            crate::testbed::room::check(spec, need)?;
            preflight(spec)?;
            space(spec, wl)?;
        }
        Place::Dir(dir) => {
            check_dir(dir)?;
            if opts.cold == ColdMode::Remount {
                return Err(bad_input("--cold remount needs a testbed fsgauge builds (--fs KIND); with --dir use --cold drop"));
            }
            let st = nix::sys::statvfs::statvfs(dir)
                .with_context(|| format!("statvfs {}", dir.display()))?;
            let avail = crate::base::sys::statfs::Space::of(&st).available;
            if need > avail {
                return Err(bad_input(format!(
                    "the {} workload needs about {} but {} has {} free",
                    wl.kind(),
                    format_bytes_human(need as f64),
                    dir.display(),
                    format_bytes_human(avail as f64)
                )));
            }
        }
    }
    if let Some(limit) = opts.mem_limit {
        memory(limit, wl, own_rss()).map_err(MemoryRefusal::refused)?;
    }
    let testbed = match place {
        Place::Testbed(spec) => Some(spec),
        Place::Dir(_) => None,
    };
    crate::lab::crash::points::admissible(testbed, &opts.crash)?;
    // Last, so that bad input makes nothing: a results directory that cannot take the
    // result is found before the workload runs, not after.
    if let Some(out) = &opts.out {
        crate::results::check_out_dir(out)?;
    }
    Ok(())
}

/// The workload's space estimate; parameters whose estimate does not fit in 64 bits are bad
/// input, refused before anything is made.
pub(super) fn space_needed(wl: &dyn Workload) -> Result<u64> {
    wl.space_needed().map_err(|e| bad_input(e.to_string()))
}

/// What a run of `wl` needs inside a memory limit: the workload's own estimate, fsgauge's
/// resident memory now and a margin.
pub(super) fn memory_needs(wl: &dyn Workload) -> Result<u64, MemoryRefusal> {
    memory_needs_with(wl, own_rss())
}

/// `--dir` must exist, be a directory, and be writable.
pub fn check_dir(dir: &Path) -> Result<()> {
    let md =
        std::fs::metadata(dir).map_err(|e| bad_input(format!("--dir {}: {e}", dir.display())))?;
    if !md.is_dir() {
        return Err(bad_input(format!(
            "--dir {} is not a directory",
            dir.display()
        )));
    }
    nix::unistd::access(
        dir,
        nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
    )
    .map_err(|e| bad_input(format!("--dir {} is not writable: {e}", dir.display())))?;
    Ok(())
}

/// The place a run is made on, admitted: a testbed gets the inode fitting a plan's testbed
/// gets when the plan is read ([`inodes`]; a no-op on those), and the note saying so.
pub fn admitted(place: &Place, wl: &dyn Workload) -> Result<(Place, Option<String>)> {
    let mut place = place.clone();
    let note = match &mut place {
        Place::Testbed(spec) => inodes(spec, wl)?,
        Place::Dir(_) => None,
    };
    Ok((place, note))
}

/// A seed from the clock, for runs given none (recorded in their results).
pub fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x5eed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::plan::{parse, ParseOptions};
    use crate::lab::runner::{admitted, check, Place, RunOptions};
    use crate::testbed::{FsKind, TestbedSpec};

    /// The workload `kind` with `params`, as `bench KIND --flags` and a plan build it.
    fn workload(kind: &str, params: serde_json::Value) -> Box<dyn Workload> {
        let k = crate::workload::registry::find(kind).expect("a registered kind");
        (k.build)(params).unwrap_or_else(|e| panic!("{kind}: {}", e.msg))
    }

    fn plan(fs_size: &str, workload: &str) -> String {
        format!(
            "[[testbed]]\nlabel = \"ext4\"\nfs = \"ext4\"\nfs_size = \"{fs_size}\"\n\n[[workload]]\n{workload}\n"
        )
    }

    fn opts() -> ParseOptions {
        ParseOptions {
            scale: None,
            workdir: Some(std::env::temp_dir()),
            ..Default::default()
        }
    }

    /// A tree with more files than a 1G ext4's default inodes: `bench` gets the `-N` a plan
    /// gets, with the same note.
    #[test]
    fn a_tree_short_of_inodes_gets_the_same_n_from_bench_and_a_plan() {
        let wl = workload("interleave", serde_json::json!({"dirs": 9890, "files": 14}));
        let mut spec = TestbedSpec::new(FsKind::Ext4, 1 << 30);
        spec.workdir = std::env::temp_dir();
        let (place, note) = admitted(&Place::Testbed(spec), &*wl).expect("admitted");
        let Place::Testbed(bench) = place else {
            panic!("a testbed stays a testbed")
        };
        let note = note.expect("bench says it added -N");
        assert!(note.contains("added -N"), "{note}");
        let p = parse(
            &plan("1G", "kind = \"interleave\"\ndirs = 9890\nfiles = 14"),
            "t.toml",
            &opts(),
        )
        .expect("the plan is admitted");
        assert_eq!(bench.mkfs_opts, p.testbeds[0].spec.mkfs_opts);
        assert_eq!(bench.mkfs_opts[0], "-N");
        assert_eq!(p.notes.len(), 1);
        assert!(p.notes[0].starts_with(&note), "{} / {note}", p.notes[0]);
        // Admitted again (a plan's testbed when it runs), nothing more is added.
        let (again, note) = admitted(&Place::Testbed(bench.clone()), &*wl).expect("admitted");
        assert!(note.is_none());
        assert!(matches!(again, Place::Testbed(s) if s.mkfs_opts == bench.mkfs_opts));
    }

    /// A tree that does not fit: `bench` and a plan refuse it with the same message (the
    /// plan's says where, first).
    #[test]
    fn a_tree_that_does_not_fit_is_refused_alike_by_bench_and_a_plan() {
        let params = serde_json::json!({"dirs": 2, "files": 3, "file_size": "64M"});
        let wl = workload("tree", params);
        let mut spec = TestbedSpec::new(FsKind::Ext4, 256 << 20);
        spec.label = "ext4".into();
        spec.workdir = std::env::temp_dir();
        let msg = space(&spec, &*wl).expect_err("does not fit").to_string();
        assert!(
            msg.contains("needs about") && msg.contains("--fs-size"),
            "{msg}"
        );
        let e = parse(
            &plan(
                "256M",
                "kind = \"tree\"\ndirs = 2\nfiles = 3\nfile_size = \"64M\"",
            ),
            "t.toml",
            &opts(),
        )
        .expect_err("the plan is refused");
        let e = format!("{e:#}");
        assert!(e.starts_with("t.toml:4:11: fs_size: "), "{e}");
        assert!(e.contains(&msg), "{e}\n{msg}");
        // bench's own check, as `bench tree --fs ext4 --fs-size 256M` makes it (after the
        // checks of the machine: root and mkfs.ext4).
        let ready = nix::unistd::geteuid().is_root() && FsKind::Ext4.find_mkfs().is_some();
        if !ready {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run this as root with mkfs.ext4"
            );
            eprintln!("skipped bench's half: needs root and mkfs.ext4");
            return;
        }
        let e = check(&Place::Testbed(spec), &*wl, &RunOptions::default())
            .expect_err("bench refuses it");
        assert_eq!(format!("{e:#}"), msg);
    }

    /// A testbed bigger than the disk under its work directory: `bench` and a plan refuse it
    /// with the same message, before anything is made.
    #[test]
    fn a_testbed_bigger_than_its_disk_is_refused_alike_by_bench_and_a_plan() {
        let wl = workload("tree", serde_json::json!({"dirs": 1, "files": 1}));
        let mut spec = TestbedSpec::new(FsKind::Ext4, 64 << 50);
        spec.workdir = std::env::temp_dir();
        let msg = crate::testbed::room::check(&spec, 0)
            .expect_err("64P is more than any disk")
            .to_string();
        assert!(msg.contains("free") && msg.contains("--fs-size"), "{msg}");
        let e = parse(
            &plan("64P", "kind = \"tree\"\ndirs = 1\nfiles = 1"),
            "t.toml",
            &opts(),
        )
        .expect_err("the plan is refused");
        let e = format!("{e:#}");
        assert_eq!(e, format!("t.toml:4:11: fs_size: {msg}"));
        let e = check(&Place::Testbed(spec), &*wl, &RunOptions::default())
            .expect_err("bench refuses it");
        assert_eq!(format!("{e:#}"), msg);
    }
}
