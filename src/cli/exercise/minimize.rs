//! `fsgauge exercise --replay LOG --minimize OUT` with a crash (`--crash-shutdown`,
//! `--crash-points`, `--crash-at`): the log cut down to the steps its crash failure needs
//! ([`crate::workload::exercise::minimize::ddmin`]), each candidate run as a fresh `fsgauge exercise`
//! with the same flags (its own testbed, results in a scratch directory), and the smallest
//! log that still fails written to OUT. A kernel developer gets a handful of operations
//! instead of thousands.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;

use crate::base::error::{bad_input, SystemFailure};
use crate::base::outfile::OutFile;
use crate::results::crash::CrashClass;
use crate::workload::exercise::minimize::{ddmin, log_text};
use crate::workload::exercise::{ReplayLog, Step};

/// The minimizer's flags (part of `fsgauge exercise`).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Minimizing a crash failure")]
pub struct MinimizeArgs {
    /// With --replay LOG and a crash (--crash-shutdown, --crash-points or --crash-at): cut
    /// the log down to the fewest steps that still fail with the class of its first failure
    /// (delta debugging; each candidate is a fresh run with the same flags, its operations
    /// renumbered from 1), and write them to OUT as a replay log.
    #[arg(long, value_name = "OUT")]
    pub minimize: Option<PathBuf>,
    /// Runs a candidate gets before it counts as not failing (failures some runs only show:
    /// the kernel orders its writes differently from run to run).
    #[arg(long, value_name = "N", default_value_t = 3, requires = "minimize",
          value_parser = clap::value_parser!(u32).range(1..=20))]
    pub minimize_tries: u32,
}

/// Flags of the outer command a candidate's run does not take (the minimizer sets its own
/// log, output and quietness): those with a value, then those without.
const DROP_WITH_VALUE: [&str; 6] = [
    "--minimize",
    "--minimize-tries",
    "--replay",
    "--out",
    "--log",
    "--format",
];
const DROP_ALONE: [&str; 3] = ["--json", "--quiet", "-q"];

/// The command line of this process without the flags [`DROP_WITH_VALUE`] and
/// [`DROP_ALONE`] (either form: `--out DIR` or `--out=DIR`).
fn candidate_args(argv: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip_next = false;
    for a in argv {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        let s = a.to_string_lossy();
        let name = s.split_once('=').map_or(&*s, |(n, _)| n);
        if DROP_WITH_VALUE.contains(&name) {
            skip_next = !s.contains('=');
            continue;
        }
        if DROP_ALONE.contains(&&*s) {
            continue;
        }
        out.push(a);
    }
    out
}

/// One candidate run: `fsgauge exercise ... --replay LOG --out DIR --quiet`; the classes of
/// its crash failures (none: it passed).
struct Runner {
    exe: PathBuf,
    args: Vec<OsString>,
    scratch: tempfile::TempDir,
    header: String,
    runs: u32,
}

impl Runner {
    fn classes(&mut self, steps: &[Step]) -> Result<Vec<CrashClass>> {
        crate::base::signals::check()?;
        let log = self.scratch.path().join("candidate.log");
        let text = log_text(&self.header, steps);
        if ReplayLog::parse(&text, &log).is_err() {
            // A cut that leaves an operation the file cannot take (a read past the end, a
            // copy onto itself) is refused as bad input before any run: it does not fail the
            // way the log did, and it needs no testbed to say so.
            return Ok(Vec::new());
        }
        self.runs += 1;
        std::fs::write(&log, text).with_context(|| format!("writing {}", log.display()))?;
        let out = self.scratch.path().join(format!("out-{}", self.runs));
        let child = Command::new(&self.exe)
            .args(&self.args)
            .arg("--replay")
            .arg(&log)
            .arg("--out")
            .arg(&out)
            .arg("--quiet")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .with_context(|| format!("running {}", self.exe.display()))?;
        crate::base::signals::check()?;
        match child.status.code() {
            Some(0) | Some(1) => {}
            Some(code) => {
                let err = String::from_utf8_lossy(&child.stderr);
                return Err(anyhow::Error::new(SystemFailure(format!(
                    "a candidate run (its log: {}) ended with exit {code}: {}",
                    log.display(),
                    err.trim()
                ))));
            }
            None => {
                use std::os::unix::process::ExitStatusExt;
                let sig = child.status.signal().unwrap_or(0);
                let name = nix::sys::signal::Signal::try_from(sig)
                    .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string());
                return Err(anyhow::Error::new(SystemFailure(format!(
                    "a candidate run was killed by {name} before it could tear down its testbed; `fsgauge testbed cleanup` removes what it left (its log was {})",
                    log.display()
                ))));
            }
        }
        let mut classes = Vec::new();
        if !out.exists() {
            // The exerciser itself failed (an operation the shorter log makes impossible,
            // such as a read past the end): no crash was judged.
            return Ok(classes);
        }
        for r in crate::results::load_dir(&out)?.results {
            if let Some(c) = r.result.crash {
                classes.extend(c.failures.iter().map(|f| f.class));
            }
        }
        Ok(classes)
    }

    /// Whether `steps` fail with `class` in any of `tries` runs.
    fn fails_with(&mut self, steps: &[Step], class: CrashClass, tries: u32) -> Result<bool> {
        for _ in 0..tries {
            if self.classes(steps)?.contains(&class) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// Checks what needs no run: a log to cut, a crash to judge, and an OUT that is not the log
/// and can be written (settled as every output file is, [`OutFile::resolve`]).
fn check(replay: Option<&Path>, crash: bool, out: &Path) -> Result<(PathBuf, OutFile)> {
    let Some(log) = replay else {
        return Err(bad_input(
            "--minimize cuts down a replay log: give the failing run's log with --replay LOG (written by --log DIR)",
        ));
    };
    if !crash {
        return Err(bad_input(
            "--minimize keeps the steps a crash failure needs: give the crash the log failed with (--crash-shutdown, --crash-points N or --crash-at K)",
        ));
    }
    let dir = out
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let same = match (std::fs::canonicalize(log), std::fs::canonicalize(dir)) {
        (Ok(l), Ok(d)) => out.file_name().is_some_and(|n| d.join(n) == l),
        _ => false,
    };
    if same {
        return Err(bad_input(format!(
            "--minimize {} is the log being cut down; write the result to another file",
            out.display()
        )));
    }
    let resolved = OutFile::resolve(out, "--minimize")?;
    Ok((log.to_path_buf(), resolved))
}

/// Runs the minimizer for `exercise` with these flags; `crash` says whether a crash is
/// judged, `quiet` silences the progress lines.
pub fn run(m: &MinimizeArgs, replay: Option<&Path>, crash: bool, quiet: bool) -> Result<ExitCode> {
    let out = m.minimize.as_deref().expect("called with --minimize");
    let (log_path, out_file) = check(replay, crash, out)?;
    let log = ReplayLog::load(&log_path)?;
    let t0 = Instant::now();
    let mut r = Runner {
        exe: std::env::current_exe().context("finding fsgauge's own executable")?,
        args: candidate_args(std::env::args_os().skip(1)),
        scratch: tempfile::Builder::new()
            .prefix("fsgauge-minimize.")
            .tempdir()
            .context("making a scratch directory for the candidates")?,
        header: log.header_lines.clone(),
        runs: 0,
    };
    let mut class = None;
    for _ in 0..m.minimize_tries {
        if let Some(c) = r.classes(&log.steps)?.first() {
            class = Some(*c);
            break;
        }
    }
    let Some(class) = class else {
        return Err(bad_input(format!(
            "{} did not fail with these flags in {} run(s): nothing to cut down (check the crash flags and the testbed the failure was seen on)",
            log_path.display(),
            m.minimize_tries
        )));
    };
    let note = |s: String| {
        if !quiet {
            eprintln!("{s}");
        }
    };
    note(format!(
        "minimize: {} steps fail ({class}); cutting down, {} run(s) a candidate",
        log.steps.len(),
        m.minimize_tries
    ));
    let tries = m.minimize_tries;
    let found = {
        let r = &mut r;
        ddmin(
            &log.steps,
            |c| r.fails_with(c, class, tries),
            |kept, tried| {
                note(format!(
                    "minimize: {kept} steps still fail ({tried} candidates)"
                ))
            },
        )?
    };
    out_file
        .write(log_text(&log.header_lines, &found.steps).as_bytes())
        .with_context(|| format!("--minimize {}", out.display()))?;
    note(format!(
        "{} of {} steps still fail ({class}), after {} runs in {:.0} s: {}",
        found.steps.len(),
        log.steps.len(),
        r.runs,
        t0.elapsed().as_secs_f64(),
        out.display()
    ));
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_candidate_runs_with_the_flags_given_but_its_own_log_output_and_quietness() {
        let got = candidate_args(os(&[
            "exercise",
            "--replay",
            "a.log",
            "--crash-shutdown",
            "--minimize=min.log",
            "--minimize-tries",
            "2",
            "--out",
            "res",
            "-q",
            "--json",
            "--fs",
            "xfs",
            "--log=dir",
        ]));
        assert_eq!(got, os(&["exercise", "--crash-shutdown", "--fs", "xfs"]));
    }

    #[test]
    fn the_log_itself_is_refused_as_out_and_a_crash_is_required() {
        let t = tempfile::tempdir().unwrap();
        let log = t.path().join("a.log");
        std::fs::write(&log, "x").unwrap();
        let e = check(Some(&log), true, &log).unwrap_err().to_string();
        assert!(e.contains("is the log being cut down"), "{e}");
        let e = check(Some(&log), false, &t.path().join("b.log"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--crash-shutdown, --crash-points N or --crash-at K"),
            "{e}"
        );
        let e = check(None, true, &t.path().join("b.log"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--replay LOG"), "{e}");
        assert_eq!(
            check(Some(&log), true, &t.path().join("b.log")).unwrap().0,
            log
        );
        for (out, needle) in [
            (PathBuf::from("/dev/null"), "a character device"),
            (t.path().to_path_buf(), "is a directory"),
            (t.path().join("missing/min.log"), "does not exist"),
            (PathBuf::from("/sys/kernel/min.log"), "kernel interface"),
        ] {
            let e = check(Some(&log), true, &out).unwrap_err();
            assert_eq!(crate::base::error::exit_code(&e), 2, "{e:#}");
            assert!(
                format!("{e:#}").contains(needle),
                "{}: {e:#}",
                out.display()
            );
        }
    }
}
