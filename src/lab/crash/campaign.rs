//! Crash points of a run: after the workload, the testbed's emulated disk is cut at N requests
//! of its write log, and each state is judged (see [`crate::testbed::crashstate`]): mounted
//! (journal replay; a refusal is a `mount-failure`), compared by the workload's own verifier
//! against what it had made durable by then (the exerciser's model; a workload without one is
//! judged by the mount and the checker alone), unmounted, and checked read-only by the
//! filesystem's checker (`checker-error`). The report is the result's `crash` record.

use std::borrow::Cow;
use std::path::Path;
use std::time::Instant;

use super::points::{Candidate, CrashArgs};
use crate::device::server::TransportChoice;
use crate::device::writelog::EntryKind;
use crate::measure::Progress;
use crate::results::crash::{CrashClass, CrashFailure, CrashReport};
use crate::testbed::{Testbed, TestbedSpec};
use crate::workload::Target;
use crate::workload::{CrashTally, CrashVerifier};
use anyhow::Result;

/// Judges the crash states of `tb` after a run: `rel_root` is the workload's directory inside
/// the filesystem, `verifier` the workload's judge, `replay(cut)` the command that checks a cut
/// again. The testbed's filesystem is mounted again at the end.
pub fn campaign(
    tb: &mut Testbed,
    args: &CrashArgs,
    seed: u64,
    rel_root: &Path,
    mut verifier: Option<CrashVerifier>,
    replay: &dyn Fn(u64) -> String,
    progress: Progress,
) -> Result<CrashReport> {
    let mut states = tb.crash_states()?;
    let log = states.log().clone();
    let cands: Vec<Candidate> = log
        .cuts
        .iter()
        .map(|c| Candidate {
            index: c.index,
            flush: c.kind == EntryKind::Flush,
        })
        .collect();
    let cuts = args.cuts(&cands, seed)?;
    let mut report = CrashReport {
        cache: args.cache().name().into(),
        choose: args.choice().name().into(),
        log_requests: log.requests,
        log_writes: log.writes,
        log_flushes: log.flushes,
        log_fua: log.fua,
        log_zeroes: log.zeroes,
        log_bytes: log.write_bytes,
        log_file_bytes: log.bytes,
        log_index_bytes: log.index_bytes,
        ..Default::default()
    };
    report.name_all_classes();
    let started = Instant::now();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let bar = progress.phase_bar("crash states", Some(cuts.len() as u64), done.clone());
    let mut build_ms = 0.0;
    for &cut in &cuts {
        crate::base::signals::check()?;
        let info = states.build(cut, args.cache(), seed ^ cut)?;
        build_ms += info.build_ns as f64 / 1e6;
        report.image_bytes = info.image_bytes;
        let fail = |class, detail: String| CrashFailure {
            cut,
            class,
            detail,
            replay: replay(cut),
        };
        match states.mount() {
            Err(e) => report.fail(fail(CrashClass::MountFailure, format!("{e:#}"))),
            Ok(root) => {
                if let Some(v) = verifier.as_mut() {
                    for (class, detail) in v(info.reply_ns, &root.join(rel_root))? {
                        report.fail(fail(class, detail));
                    }
                }
            }
        }
        let checked = states.check()?;
        if !checked.clean {
            report.fail(fail(
                CrashClass::CheckerError,
                format!(
                    "`{}` exited {}:\n{}",
                    checked.command, checked.status, checked.output
                ),
            ));
        }
        report.states += 1;
        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    drop(bar);
    report.server_peak_bytes = states.server_peak_memory()?;
    let secs = started.elapsed().as_secs_f64();
    report.build_ms_mean = if report.states > 0 {
        build_ms / report.states as f64
    } else {
        0.0
    };
    report.states_per_minute = if secs > 0.0 {
        report.states as f64 * 60.0 / secs
    } else {
        0.0
    };
    states.finish()?;
    Ok(report)
}

/// The one crash state the kernel's shutdown makes of `tb` at the end of a run
/// (`--crash-shutdown`), judged as a cut's is: mounted (journal replay), compared by the
/// workload's verifier, checked read-only. The testbed's filesystem is mounted at the end.
fn shutdown(
    tb: &mut Testbed,
    rel_root: &Path,
    mut verifier: Option<CrashVerifier>,
    replay: &str,
) -> Result<CrashReport> {
    let mut report = CrashReport {
        cache: "none (shutdown)".into(),
        choose: crate::results::crash::SHUTDOWN.into(),
        ..Default::default()
    };
    report.name_all_classes();
    let started = Instant::now();
    let at = tb.shut_down()?;
    let fail = |class, detail: String| CrashFailure {
        cut: 0,
        class,
        detail,
        replay: replay.to_string(),
    };
    match tb.mount_after_crash() {
        Err(e) => report.fail(fail(CrashClass::MountFailure, format!("{e:#}"))),
        Ok(()) => {
            if let Some(v) = verifier.as_mut() {
                for (class, detail) in v(at, &tb.reach().join(rel_root))? {
                    report.fail(fail(class, detail));
                }
            }
        }
    }
    let checked = tb.check_unmounted()?;
    if !checked.clean {
        let words = format!(
            "`{}` exited {}:\n{}",
            checked.command, checked.status, checked.output
        );
        report.fail(fail(CrashClass::CheckerError, words));
    }
    report.states = 1;
    let secs = started.elapsed().as_secs_f64();
    report.states_per_minute = if secs > 0.0 { 60.0 / secs } else { 0.0 };
    Ok(report)
}

/// The testbed of a run with crash points, its emulated disks served through /dev/fuse: the
/// server offers its crash file there only (through FUSE over io_uring the ring knows the
/// disk file alone). Other runs' testbeds are served as their spec says.
pub fn pin_transport<'a>(spec: &'a TestbedSpec, args: &CrashArgs) -> Cow<'a, TestbedSpec> {
    if !args.on() {
        return Cow::Borrowed(spec);
    }
    Cow::Owned(TestbedSpec {
        device_transport: Some(TransportChoice::Dev),
        ..spec.clone()
    })
}

/// Starts the write log of the target's emulated disk when crash points follow the run, after
/// a syncfs: what the drive's cache holds when the log starts counts as on its media, so the
/// log starts with the cache flushed.
pub fn start(target: &mut Target, args: &CrashArgs) -> Result<()> {
    if !args.on() {
        return Ok(());
    }
    let Target::Testbed(t) = target else {
        anyhow::bail!(crate::base::error::bad_input(
            "--crash-points needs a testbed fsgauge builds (--fs KIND with --device-model)"
        ));
    };
    crate::base::sys::Dir::open(&t.reach())
        .and_then(|d| d.syncfs())
        .map_err(|e| anyhow::anyhow!("syncfs of {}: {}", t.mountpoint().display(), e.desc()))?;
    t.start_crash_log(args.log_limit())?;
    Ok(())
}

/// What a run leaves for its crash points.
pub struct After<'a> {
    /// The run went well (crash points follow only then).
    pub ran: bool,
    pub seed: u64,
    /// The workload's directory inside the filesystem.
    pub rel_root: &'a str,
    /// The workload's judge, if it set one.
    pub verifier: Option<CrashVerifier>,
    /// What the judge counts it checked, kept in the report (a tree workload's).
    pub tally: Option<CrashTally>,
    pub progress: Progress,
}

/// After a run (if it went well): its crash points judged (the run directories held on the
/// testbed let go of it meanwhile, as across a remount). None when no crash points were asked.
pub fn after(target: &mut Target, args: &CrashArgs, run: After<'_>) -> Result<Option<CrashReport>> {
    let After {
        ran,
        seed,
        rel_root,
        verifier,
        tally,
        progress,
    } = run;
    let Target::Testbed(t) = target else {
        return Ok(None);
    };
    if !args.judged() || !ran {
        return Ok(None);
    }
    let argv: Vec<String> = std::env::args().collect();
    let replay = |cut| replay_command(&argv, seed, (!args.shutdown).then_some(cut));
    let (mp, reach) = (t.mountpoint().to_path_buf(), t.reach());
    let mut report = None;
    crate::testbed::across_remount(&mp, &reach, || {
        if args.shutdown {
            report = Some(shutdown(t, Path::new(rel_root), verifier, &replay(0))?);
            return Ok(());
        }
        report = Some(campaign(
            t,
            args,
            seed,
            Path::new(rel_root),
            verifier,
            &replay,
            progress,
        )?);
        Ok(())
    })?;
    if let (Some(r), Some(t)) = (report.as_mut(), tally) {
        r.durable = Some(
            t.lock()
                .map_err(|_| anyhow::anyhow!("a crash judge panicked"))?
                .clone(),
        );
    }
    Ok(report)
}

/// The command that checks cut `cut` again: this process's command line with the crash-point
/// and seed flags replaced by `--seed SEED --crash-at CUT`. The same seed makes the same
/// operations; the kernel's writeback may still order the disk's requests differently, and
/// then request CUT is another state (the replay says so when it has no such request).
pub fn replay_command(argv: &[String], seed: u64, cut: Option<u64>) -> String {
    const DROP_WITH_VALUE: [&str; 5] = [
        "--seed",
        "--crash-points",
        "--crash-at",
        "--crash-choose",
        "--reps",
    ];
    let mut out: Vec<String> = Vec::new();
    let mut skip = false;
    for a in argv {
        if skip {
            skip = false;
            continue;
        }
        if DROP_WITH_VALUE.contains(&a.as_str()) {
            skip = true;
            continue;
        }
        if DROP_WITH_VALUE
            .iter()
            .any(|f| a.starts_with(&format!("{f}=")))
        {
            continue;
        }
        out.push(shell_word(a));
    }
    out.extend(["--seed".into(), seed.to_string()]);
    if let Some(cut) = cut {
        out.extend(["--crash-at".into(), cut.to_string()]);
    }
    out.join(" ")
}

/// `w` quoted for a POSIX shell where it needs it.
fn shell_word(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_names_the_seed_and_the_cut_in_place_of_the_campaign() {
        let argv: Vec<String> = [
            "fsgauge",
            "exercise",
            "--fs",
            "ext4",
            "--crash-points",
            "200",
            "--seed=5",
            "--mount-opts",
            "data=journal,barrier=0",
            "--label",
            "a b",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            replay_command(&argv, 5, Some(1234)),
            "fsgauge exercise --fs ext4 --mount-opts data=journal,barrier=0 --label 'a b' --seed 5 --crash-at 1234"
        );
    }
}
