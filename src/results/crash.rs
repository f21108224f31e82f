//! What a run's crash points found: the durability record of a result (`crash`).
//!
//! Each crash point is a state of the emulated disk as a power cut just after one request would
//! have left it (the media the drive's model had written, plus the part of its volatile cache
//! `cache` says survived). A state is judged by mounting it (journal replay), comparing what the
//! workload had made durable, unmounting and running the filesystem's read-only checker. The
//! report counts states and failures by class and keeps, for each failure, what is needed to see
//! it again (the replay command).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

crate::choice! {
    /// What went wrong with one crash state, by class (the durability report counts them).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum CrashClass("crash failure class") {
        /// The state did not mount (its journal did not replay).
        MountFailure = "mount-failure",
        /// Data made durable before the cut is not there (or a durable file is too short or gone).
        LostDurable = "lost-durable",
        /// A byte no version of the file ever held.
        Foreign = "foreign",
        /// The filesystem's own checker found the replayed state inconsistent.
        CheckerError = "checker-error",
    }
}

crate::choice! {
    /// Which part of the drive's volatile write cache a power cut leaves on the media.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub enum CrashCache("crash cache choice") {
        /// None of it: every write not yet destaged is lost.
        LoseAll = "lose-all",
        /// A random part (seeded, each 4 KiB chunk kept or lost): the drive may have
        /// destaged any of it.
        #[default]
        Random = "random",
        /// All of it: a drive whose cache survives the cut.
        KeepAll = "keep-all",
    }
}

/// One failed crash state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CrashFailure {
    /// The cut: the request index (reply order) the power failed after.
    pub cut: u64,
    pub class: CrashClass,
    /// What was wrong: the file and offset, the durable point and the operations since, or the
    /// checker's or the kernel's words.
    pub detail: String,
    /// The command that checks this state again.
    pub replay: String,
}

/// A run's crash points, all of them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CrashReport {
    /// The cache choice and how the cuts were chosen.
    pub cache: String,
    pub choose: String,
    /// Requests, writes and flushes in the write log, and its bytes.
    pub log_requests: u64,
    pub log_writes: u64,
    pub log_flushes: u64,
    /// FUA writes, and zeroings or discards (not modelled: on the media at their reply).
    #[serde(default)]
    pub log_fua: u64,
    #[serde(default)]
    pub log_zeroes: u64,
    pub log_bytes: u64,
    /// The write log as kept: its bytes (data and undo pre-images) in its file beside the
    /// image, and the memory its index was counted at in the disk's server.
    #[serde(default)]
    pub log_file_bytes: u64,
    #[serde(default)]
    pub log_index_bytes: u64,
    /// The peak resident memory of the disk's server (VmHWM) after the states were judged:
    /// its store, its buffers and the log's index.
    #[serde(default)]
    pub server_peak_bytes: u64,
    /// Crash states built and judged.
    pub states: u64,
    /// Failures by class (every class named, 0 included).
    pub by_class: BTreeMap<String, u64>,
    pub failures: Vec<CrashFailure>,
    /// Building one state: mean milliseconds, and the image's size it was built over (no copy
    /// of the image is made).
    pub build_ms_mean: f64,
    pub image_bytes: u64,
    /// States judged per minute of the campaign (build, mount, compare, unmount, checker).
    pub states_per_minute: f64,
    /// What the judge of a tree workload (`bench create`, `tree`, `fdtree`) checked in the
    /// states; absent for the exerciser, whose failures name what they judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durable: Option<DurableChecked>,
}

/// What a tree workload's judge checked in the crash states of a run: the files it had made
/// durable (by an fsync or a syncfs that ended before the cut), each compared whole, and the
/// removals a finished syncfs had made durable.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DurableChecked {
    /// What the workload makes durable, in words (with `--fsync none`: nothing, so its states
    /// are judged by the mount and the checker alone).
    pub judge: String,
    /// States the judge looked at.
    pub states: u64,
    /// Durable files checked (name, size and every byte), over all states.
    pub files: u64,
    /// The fewest and the most durable files checked in one state.
    pub files_min: u64,
    pub files_max: u64,
    /// Durable removals checked (the entry must be gone), over all states.
    pub removals: u64,
}

impl DurableChecked {
    /// Counts one state in which `files` durable files and `removals` durable removals were
    /// checked.
    pub fn count(&mut self, files: u64, removals: u64) {
        self.files_min = if self.states == 0 {
            files
        } else {
            self.files_min.min(files)
        };
        self.files_max = self.files_max.max(files);
        self.states += 1;
        self.files += files;
        self.removals += removals;
    }

    /// One clause for the summary line.
    pub fn summary(&self) -> String {
        format!(
            "durable files checked: {} to {} a state, {} in all; durable removals checked: {} ({})",
            self.files_min, self.files_max, self.files, self.removals, self.judge
        )
    }
}

/// `choose` of a state made by the kernel's shutdown (`--crash-shutdown`), not by cuts.
pub const SHUTDOWN: &str = "shutdown";

impl CrashReport {
    /// Whether the state was made by the kernel's shutdown (one state, no write log).
    pub fn is_shutdown(&self) -> bool {
        self.choose == SHUTDOWN
    }

    /// Counts `f` under its class and keeps it.
    pub fn fail(&mut self, f: CrashFailure) {
        *self.by_class.entry(f.class.name().to_string()).or_default() += 1;
        self.failures.push(f);
    }

    /// Every class named in `by_class`, 0 where none failed.
    pub fn name_all_classes(&mut self) {
        for c in <CrashClass as crate::base::choice::Choice>::all() {
            self.by_class.entry(c.name().to_string()).or_default();
        }
    }

    /// One line: states, failures by class.
    pub fn summary(&self) -> String {
        let classes: Vec<String> = self
            .by_class
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(c, n)| format!("{n} {c}"))
            .collect();
        let outcome = if classes.is_empty() {
            "no failures".to_string()
        } else {
            format!("{} failed ({})", self.failures.len(), classes.join(", "))
        };
        let durable = self
            .durable
            .as_ref()
            .map_or_else(String::new, |d| format!("; {}", d.summary()));
        if self.is_shutdown() {
            return format!(
                "the crash state of the kernel's shutdown (log not flushed): {outcome}{durable}"
            );
        }
        format!(
            "{} crash states ({} cache, cuts {}): {outcome}{durable}",
            self.states, self.cache, self.choose,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_counted_by_class_and_every_class_is_named() {
        let mut r = CrashReport {
            states: 3,
            cache: "random".into(),
            choose: "random".into(),
            ..Default::default()
        };
        r.name_all_classes();
        assert_eq!(r.by_class.len(), 4);
        assert!(r.summary().ends_with("no failures"), "{}", r.summary());
        r.fail(CrashFailure {
            cut: 7,
            class: CrashClass::LostDurable,
            detail: "x".into(),
            replay: "y".into(),
        });
        assert_eq!(r.by_class["lost-durable"], 1);
        assert_eq!(
            r.summary(),
            "3 crash states (random cache, cuts random): 1 failed (1 lost-durable)"
        );
        let back: CrashReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn a_tree_judge_s_count_keeps_the_fewest_and_most_files_a_state_and_shows_on_the_summary() {
        let mut d = DurableChecked {
            judge: "create --fsync file".into(),
            ..Default::default()
        };
        for (files, removals) in [(40, 0), (7, 2), (90, 5)] {
            d.count(files, removals);
        }
        assert_eq!(
            (d.states, d.files, d.files_min, d.files_max, d.removals),
            (3, 137, 7, 90, 7)
        );
        let r = CrashReport {
            states: 3,
            cache: "random".into(),
            choose: "random".into(),
            durable: Some(d),
            ..Default::default()
        };
        assert_eq!(
            r.summary(),
            "3 crash states (random cache, cuts random): no failures; durable files checked: 7 to 90 a state, 137 in all; durable removals checked: 7 (create --fsync file)"
        );
        let back: CrashReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
