//! The host's writeback settings over a phase: whether another process changed them.
//!
//! When the page cache is written back is the host's, not the run's: `vm.dirty_bytes` /
//! `dirty_ratio` (where writers are throttled), their background pair (where the flusher
//! starts), `dirty_writeback_centisecs` (the flusher's period) and `dirty_expire_centisecs`
//! (how old dirty data must be). A phase that writes is timed against them, so when another
//! process changes one while the phase runs (a benchmark that turns periodic writeback off, as
//! `scripts/bench-device --stalls` does; another memory-limited fsgauge run on cgroup v1, whose
//! dirty-threshold hold (`host::dirty`) applies machine-wide when it is the stricter), the
//! phase's figures measure that process too, as with a foreign cache drop (`host::cache`), and
//! the run is made again.
//!
//! Two things are seen: a setting that differs between the phase's start and its end, and,
//! while this process holds the dirty thresholds of its memory limit, thresholds other than
//! those at either end (another process's stricter hold). A change that is undone within one
//! phase is not seen.

use std::path::{Path, PathBuf};

use super::dirty::{held_limits as held, DirtyLimits};

/// The settings read, by their names under `/proc/sys/vm`.
const KNOBS: [&str; 6] = [
    "dirty_bytes",
    "dirty_background_bytes",
    "dirty_ratio",
    "dirty_background_ratio",
    "dirty_writeback_centisecs",
    "dirty_expire_centisecs",
];

/// The settings at one moment; a setting that cannot be read is left out (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritebackMark {
    dir: PathBuf,
    values: [Option<u64>; 6],
}

impl WritebackMark {
    /// The machine's settings now.
    pub fn now() -> Self {
        Self::read(Path::new("/proc/sys/vm"))
    }

    /// The settings of the files named like the sysctls in `dir` (tests).
    pub fn read(dir: &Path) -> Self {
        let value = |n: &str| {
            std::fs::read_to_string(dir.join(n))
                .ok()
                .and_then(|s| s.trim().parse().ok())
        };
        Self {
            dir: dir.to_path_buf(),
            values: KNOBS.map(value),
        }
    }

    /// What another process changed since `self`, read now, in words; `None` when nothing.
    pub fn changes_since(&self) -> Option<String> {
        if test_hook::injected() {
            let mut before = self.clone();
            before.values[4] = Some(500);
            let mut after = before.clone();
            after.values[4] = Some(0);
            return before.changes_until(&after, None);
        }
        self.changes_until(&Self::read(&self.dir), held())
    }

    fn changes_until(&self, later: &Self, held: Option<DirtyLimits>) -> Option<String> {
        let mut said: Vec<String> = KNOBS
            .iter()
            .zip(self.values.iter().zip(&later.values))
            .filter_map(|(n, (a, b))| match (a, b) {
                (Some(a), Some(b)) if a != b => Some(format!("vm.{n} {a} → {b}")),
                _ => None,
            })
            .collect();
        if let (Some(l), true) = (held, said.is_empty()) {
            let own = [l.dirty_bytes, l.background_bytes];
            let other = [self, later]
                .into_iter()
                .flat_map(|m| (0..2).map(move |i| (i, m.values[i])))
                .find_map(|(i, v)| v.filter(|&v| v != own[i]).map(|v| (i, v)));
            if let Some((i, v)) = other {
                said.push(format!(
                    "vm.{} is {v}, not the {} of this run's memory limit (another run's hold)",
                    KNOBS[i], own[i]
                ));
            }
        }
        (!said.is_empty()).then(|| {
            format!(
                "another process changed the host's writeback settings during the phase ({})",
                said.join(", ")
            )
        })
    }
}

/// `FSGAUGE_TEST_WRITEBACK_CHANGES=N` (debug builds only, inert in release builds): the first N
/// phases of the process see periodic writeback turned off (500 → 0) by another process,
/// without changing the host's settings under the tests running beside.
mod test_hook {
    #[cfg(debug_assertions)]
    pub fn injected() -> bool {
        use std::sync::atomic::{AtomicU64, Ordering};
        static SEEN: AtomicU64 = AtomicU64::new(0);
        std::env::var("FSGAUGE_TEST_WRITEBACK_CHANGES")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| SEEN.fetch_add(1, Ordering::SeqCst) < n)
    }

    #[cfg(not(debug_assertions))]
    pub fn injected() -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(values: &[(&str, u64)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        for (n, v) in values {
            std::fs::write(dir.path().join(n), format!("{v}\n")).expect("write sysctl");
        }
        dir
    }

    const DEFAULTS: [(&str, u64); 6] = [
        ("dirty_bytes", 0),
        ("dirty_background_bytes", 0),
        ("dirty_ratio", 20),
        ("dirty_background_ratio", 10),
        ("dirty_writeback_centisecs", 500),
        ("dirty_expire_centisecs", 3000),
    ];

    #[test]
    fn a_setting_changed_during_the_phase_is_named_with_both_values() {
        let dir = host(&DEFAULTS);
        let start = WritebackMark::read(dir.path());
        assert_eq!(
            start.changes_until(&WritebackMark::read(dir.path()), None),
            None
        );
        std::fs::write(dir.path().join("dirty_writeback_centisecs"), "0\n").expect("write");
        let why = start
            .changes_until(&WritebackMark::read(dir.path()), None)
            .expect("a change");
        assert_eq!(
            why,
            "another process changed the host's writeback settings during the phase (vm.dirty_writeback_centisecs 500 → 0)"
        );
    }

    #[test]
    fn a_setting_that_cannot_be_read_is_no_change() {
        let dir = host(&DEFAULTS[..2]);
        let start = WritebackMark::read(dir.path());
        std::fs::remove_file(dir.path().join("dirty_bytes")).expect("rm");
        assert_eq!(
            start.changes_until(&WritebackMark::read(dir.path()), None),
            None
        );
    }

    #[test]
    fn another_runs_stricter_hold_is_seen_while_this_process_holds_its_own() {
        let own = DirtyLimits::for_limit(96 << 20);
        let other = DirtyLimits::for_limit(48 << 20);
        let dir = host(&[
            ("dirty_bytes", other.dirty_bytes),
            ("dirty_background_bytes", other.background_bytes),
        ]);
        let m = WritebackMark::read(dir.path());
        // Unchanged over the phase, but not this run's thresholds.
        let why = m.changes_until(&m, Some(own)).expect("another hold");
        assert!(
            why.contains(&format!(
                "vm.dirty_bytes is {}, not the {} of this run's memory limit",
                other.dirty_bytes, own.dirty_bytes
            )),
            "{why}"
        );
        // Its own thresholds, or no hold at all: nothing to say.
        assert_eq!(m.changes_until(&m, Some(other)), None);
        assert_eq!(m.changes_until(&m, None), None);
    }
}
