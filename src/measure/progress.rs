//! Progress on a terminal: one bar per phase with rate and ETA, fed from the workers' shared
//! counter by a ticker thread. Silent under `--quiet` or when stderr is not a terminal.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// Whether progress is shown.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    enabled: bool,
}

impl Progress {
    /// Shown when stderr is a terminal and not quiet.
    pub fn new(quiet: bool) -> Self {
        Self {
            enabled: !quiet && std::io::stderr().is_terminal(),
        }
    }

    pub fn hidden() -> Self {
        Self { enabled: false }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// A bar for a phase; `None` when hidden.
    pub fn phase_bar(
        &self,
        name: &str,
        total: Option<u64>,
        counter: Arc<AtomicU64>,
    ) -> Option<PhaseBar> {
        if !self.enabled {
            return None;
        }
        let bar = match total {
            Some(t) => ProgressBar::new(t).with_style(
                ProgressStyle::with_template(
                    "{prefix:>12} [{bar:30}] {pos}/{len} ops, {elapsed} elapsed, ETA {eta}",
                )
                .expect("static template")
                .progress_chars("=> "),
            ),
            None => ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template("{prefix:>12} {spinner} {pos} ops, {elapsed} elapsed")
                    .expect("static template"),
            ),
        };
        bar.set_prefix(name.to_string());
        let done = Arc::new(AtomicBool::new(false));
        let ticker = {
            let (bar, done) = (bar.clone(), Arc::clone(&done));
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    bar.set_position(counter.load(Ordering::Relaxed));
                    std::thread::sleep(Duration::from_millis(150));
                }
            })
        };
        Some(PhaseBar {
            bar,
            done,
            ticker: Some(ticker),
        })
    }

    /// Prints a status line (above any bar), unless hidden.
    pub fn note(&self, msg: &str) {
        if self.enabled {
            eprintln!("{msg}");
        }
    }
}

/// A live bar; cleared on drop.
pub struct PhaseBar {
    bar: ProgressBar,
    done: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
}

impl Drop for PhaseBar {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}
