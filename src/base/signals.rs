//! SIGINT and SIGTERM become a flag that long work polls, so that a stopped run unwinds through
//! the testbed guards (unmount, detach, delete) instead of dying with mounts left behind.
//!
//! Three more things follow from that flag, and live here so that every command gets them:
//! - [`output`] runs every child process fsgauge starts (mkfs, e2freefrag, …). A child that a
//!   signal ends while fsgauge is being stopped (a Ctrl-C reaches the whole process group) is
//!   the interruption, not a set-up failure; a SIGTERM sent to fsgauge alone is passed on to
//!   the child, so that its device can be torn down promptly.
//! - [`note_kept`] records what a command has finished and left in place (a result file, a
//!   kept testbed); [`conclude`] turns a signal that arrived after the last check into the
//!   interruption (exit 130/143), naming what was already complete.
//! - [`test_pause`] is a fault-injection hook for the fault tests (debug builds only, inert in
//!   release builds): `FSGAUGE_TEST_PAUSE_AT=mkfs,mount,result` makes fsgauge print
//!   `fsgauge: test pause at POINT` on stderr and wait `FSGAUGE_TEST_PAUSE_MS` (default 200)
//!   at each named point; a child whose program name starts with a named point is started
//!   through `sh -c 'sleep …; exec …'`, so that it is running when the test's signal comes.
//!   With the variable set (even empty), [`conclude`] prints `fsgauge: test concluded` once
//!   its last check found no signal: a signal sent after that meets a process that is already
//!   ending, and exit status 0 is then right. `FSGAUGE_TEST_STOP_AT=POINT,…` instead prints
//!   `fsgauge: test stop at POINT` and stops the whole process (SIGSTOP) there until the test
//!   sends SIGCONT: what the test does meanwhile (kill a device server, fill a disk) happens
//!   at that point whatever the machine's load, never in a race with a timer.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitCode, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::base::error::{Interrupted, InterruptedAfter};

/// The number of the signal that arrived (the last one, if both did); 0 while none has.
static SIGNAL: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

/// What this process has completed and left in place, in order (see [`note_kept`]).
static KEPT: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Set when the process's outcome was settled by someone else (see [`outcome_settled`]).
static SETTLED: AtomicBool = AtomicBool::new(false);

/// Installs the handlers once. Safe to call more than once.
pub fn install() {
    let slot = SIGNAL.get_or_init(|| Arc::new(AtomicUsize::new(0)));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registration only fails for signals that may not be caught; these may.
        let _ = signal_hook::flag::register_usize(sig, Arc::clone(slot), sig as usize);
    }
}

/// The signal that arrived, if one has.
fn arrived() -> Option<i32> {
    let n = SIGNAL.get()?.load(Ordering::Relaxed);
    (n != 0).then_some(n as i32)
}

/// True once SIGINT or SIGTERM has arrived.
pub fn interrupted() -> bool {
    arrived().is_some()
}

/// `Err(Interrupted)` once a signal has arrived; call it between operations.
pub fn check() -> Result<(), Interrupted> {
    match arrived() {
        Some(sig) => Err(Interrupted(sig)),
        None => Ok(()),
    }
}

/// Records something the command finished and left in place ("the result of rep 2 was
/// written: PATH"), so that a signal arriving afterwards can say it is complete.
pub fn note_kept(what: impl Into<String>) {
    if let Ok(mut k) = KEPT.lock() {
        k.push(what.into());
    }
}

/// Records a result file just written (atomically) for repetition `rep`.
pub fn note_result_written(path: &Path, rep: u32) {
    note_kept(format!(
        "the result of rep {rep} was written: {} is complete",
        path.display()
    ));
}

/// Says that this process's outcome is settled elsewhere: an MPI rank other than 0 whose job
/// failed in a step every rank agreed on ends quietly while rank 0 reports, and mpirun's
/// SIGTERM to the remaining ranks is then not an interruption of this one's work.
pub fn outcome_settled() {
    SETTLED.store(true, Ordering::SeqCst);
}

/// The end of every command: a signal that arrived after the command's last check still ends
/// the process as interrupted (130/143). What was completed before it is named, so that the
/// user knows it can be kept.
pub fn conclude(res: Result<ExitCode>) -> Result<ExitCode> {
    let kept = || KEPT.lock().map(|k| k.clone()).unwrap_or_default();
    match res {
        Ok(code) if SETTLED.load(Ordering::SeqCst) => Ok(code),
        Ok(code) => match arrived() {
            None => {
                #[cfg(debug_assertions)]
                test_hook::concluded();
                Ok(code)
            }
            Some(sig) => {
                let kept = kept();
                if kept.is_empty() {
                    Err(anyhow::Error::new(Interrupted(sig)))
                } else {
                    Err(anyhow::Error::new(InterruptedAfter { sig, kept }))
                }
            }
        },
        Err(e) => {
            let stopped = e.chain().any(|c| c.is::<Interrupted>());
            let kept = kept();
            if stopped && !kept.is_empty() {
                // The error itself says what was stopped; say what was finished before it.
                for k in kept {
                    eprintln!("fsgauge: before the signal, {k}");
                }
            }
            Err(e)
        }
    }
}

/// Runs a child process to its end and collects its output, as `Command::output` does, but
/// aware of signals: one that reaches fsgauge while the child runs is passed on to the child,
/// and a child that then fails (the signal killed it, or it exited on it) ends as
/// [`Interrupted`] rather than as a failure of the child. Stdin is null.
pub fn output(cmd: &mut Command) -> Result<Output> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    #[cfg(debug_assertions)]
    let mut delayed = test_hook::delayed(cmd);
    #[cfg(debug_assertions)]
    let cmd = delayed.as_mut().unwrap_or(cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not run {program}"))?;
    let pipes = (child.stdout.take(), child.stderr.take());
    let (status, stdout, stderr) = std::thread::scope(|s| {
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            s.spawn(move || {
                let mut v = Vec::new();
                if let Some(mut p) = pipe {
                    // A read error only shortens what is quoted from the child.
                    let _ = p.read_to_end(&mut v);
                }
                v
            })
        };
        let out = drain(pipes.0.map(|p| Box::new(p) as Box<dyn Read + Send>));
        let err = drain(pipes.1.map(|p| Box::new(p) as Box<dyn Read + Send>));
        let mut passed_on = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break Ok(st),
                Ok(None) => {}
                Err(e) => break Err(e),
            }
            if let (Some(sig), false) = (arrived(), passed_on) {
                passed_on = true;
                // The child may have just ended on its own; then there is nobody to tell.
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::try_from(sig).ok(),
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        (
            status,
            out.join().unwrap_or_default(),
            err.join().unwrap_or_default(),
        )
    });
    let status = status.with_context(|| format!("waiting for {program}"))?;
    if !status.success() {
        if let Some(sig) = arrived() {
            return Err(anyhow::Error::new(Interrupted(sig)));
        }
    }
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

/// A named point for the fault tests to stop fsgauge at (see the module docs). Does nothing
/// unless this is a debug build and `FSGAUGE_TEST_PAUSE_AT` or `FSGAUGE_TEST_STOP_AT` names
/// `point`.
pub fn test_pause(point: &str) {
    #[cfg(debug_assertions)]
    test_hook::pause(point);
    #[cfg(not(debug_assertions))]
    let _ = point;
}

#[cfg(debug_assertions)]
mod test_hook {
    use std::process::Command;
    use std::time::Duration;

    fn armed(point: &str) -> Option<Duration> {
        named("FSGAUGE_TEST_PAUSE_AT", point).then(delay)
    }

    /// Whether the list in the environment variable `var` names `point`.
    fn named(var: &str, point: &str) -> bool {
        std::env::var(var)
            .map(|at| at.split(',').any(|p| p.trim() == point))
            .unwrap_or(false)
    }

    fn delay() -> Duration {
        let ms = std::env::var("FSGAUGE_TEST_PAUSE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(200);
        Duration::from_millis(ms)
    }

    /// Says, when the fault tests are watching (`FSGAUGE_TEST_PAUSE_AT` is set, even empty),
    /// that the last check found no signal: one sent from now on meets a process that is
    /// already ending with its own status.
    pub fn concluded() {
        if std::env::var_os("FSGAUGE_TEST_PAUSE_AT").is_some() {
            eprintln!("fsgauge: test concluded");
        }
    }

    /// Holds the window open for `FSGAUGE_TEST_PAUSE_MS`, or, with
    /// `FSGAUGE_TEST_RESUME_FILE`, until that file exists (at most that long): a test then
    /// acts inside the window however busy the machine is.
    pub fn pause(point: &str) {
        if let Some(d) = armed(point) {
            eprintln!("fsgauge: test pause at {point}");
            match std::env::var_os("FSGAUGE_TEST_RESUME_FILE") {
                Some(f) => {
                    let t0 = std::time::Instant::now();
                    while !std::path::Path::new(&f).exists() && t0.elapsed() < d {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                None => std::thread::sleep(d),
            }
        }
        if named("FSGAUGE_TEST_STOP_AT", point) {
            eprintln!("fsgauge: test stop at {point}");
            // Until the test's SIGCONT; a stop cannot be caught, so nothing of ours runs.
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
        }
    }

    /// The command started through a shell that first sleeps, when a pause point is a prefix
    /// of the program's file name.
    pub fn delayed(cmd: &Command) -> Option<Command> {
        let at = std::env::var("FSGAUGE_TEST_PAUSE_AT").ok()?;
        let program = std::path::Path::new(cmd.get_program())
            .file_name()?
            .to_string_lossy()
            .into_owned();
        let point = at
            .split(',')
            .map(str::trim)
            .find(|p| !p.is_empty() && program.starts_with(p))?;
        eprintln!("fsgauge: test pause at {point}");
        let mut sh = Command::new("/bin/sh");
        sh.arg("-c")
            .arg(format!(
                "sleep {:.3}; exec \"$0\" \"$@\"",
                delay().as_secs_f64()
            ))
            .arg(cmd.get_program())
            .args(cmd.get_args());
        Some(sh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_that_fails_on_its_own_is_its_own_failure() {
        // No signal has arrived in this process: the child's status is reported as it is.
        let out =
            output(Command::new("/bin/sh").args(["-c", "echo said >&2; exit 3"])).expect("sh runs");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), "said");
    }

    #[test]
    fn a_child_that_cannot_start_is_named() {
        let err = output(&mut Command::new("/nonexistent/mkfs.none")).expect_err("no such program");
        assert!(format!("{err:#}").contains("could not run /nonexistent/mkfs.none"));
    }
}
