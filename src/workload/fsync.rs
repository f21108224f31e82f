//! `--fsync`: when a tree workload (`tree`, `create`, `fdtree`) forces its written data out,
//! and whether that is timed. One set of modes, each with its one meaning; a workload takes
//! those it implements ([`FsyncModes`]), shows their meanings in its `--help`, and refuses the
//! others by name, on the command line and in a plan alike. (`tio` and `clients` force out
//! I/O, not trees: their `--fsync none|end|every:N` is [`super::tio::FsyncPolicy`].)

use std::ffi::OsStr;

use clap::builder::{PossibleValue, TypedValueParser};

crate::choice! {
    /// When written data is forced out; [`FsyncMode::meaning`] says what each mode does.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum FsyncMode("fsync mode") {
        /// No sync.
        None = "none",
        /// fsync each file before its close.
        File = "file",
        /// One syncfs at the end of each phase, inside it.
        End = "end",
        /// A timed syncfs phase of its own after each phase.
        Phase = "phase",
        /// One timed syncfs phase after the last phase.
        Last = "last",
    }
}

impl FsyncMode {
    /// What the mode does, as `--help` shows it: written once, for every workload that takes
    /// the mode.
    pub const fn meaning(self) -> &'static str {
        match self {
            Self::None => "no sync: a phase ends when its last call returns; what it leaves dirty is written back later, while the phases after it run or after the run",
            Self::File => "fsync each file before its close, inside the file's create time",
            Self::End => "one syncfs at the end of each phase that changes the tree (by each worker), inside the phase's time",
            Self::Phase => "each phase that changes the tree timed without a sync, then a phase of its own, `<phase>_sync` (e.g. dir_remove_sync), timing one syncfs: the writeback the phase left, with its device writes",
            Self::Last => "the phases timed without a sync, back to back, the writeback each leaves carried into the phases after it (as in a run of fdtree), then one phase of its own after the last (dir_remove_sync) timing one syncfs of what is still dirty",
        }
    }
}

/// The fsync modes one workload implements: its `--fsync` value parser (which lists them,
/// with their meanings, in `--help`) and its plan key's deserializer.
#[derive(Debug, Clone, Copy)]
pub struct FsyncModes {
    /// The workload, as messages name it.
    pub workload: &'static str,
    /// The modes it takes, in the order `--help` lists them.
    pub modes: &'static [FsyncMode],
}

impl FsyncModes {
    /// `s` as one of the modes, or why not: an unknown name lists the modes, as
    /// [`crate::base::choice`] refusals do; a mode of another workload says it does not apply here.
    pub fn parse(&self, s: &str) -> Result<FsyncMode, String> {
        let names: Vec<&str> = self.modes.iter().map(|m| m.name()).collect();
        let mode: FsyncMode = s.parse().map_err(|_| {
            format!(
                "unknown fsync mode {s:?}; use {}",
                crate::base::choice::sentence(&names)
            )
        })?;
        if self.modes.contains(&mode) {
            return Ok(mode);
        }
        Err(format!(
            "fsync mode {mode} does not apply to the {} workload; use {}",
            self.workload,
            crate::base::choice::sentence(&names)
        ))
    }

    /// Reads a plan's `fsync` as [`Self::parse`] reads the flag.
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        &self,
        d: D,
    ) -> Result<FsyncMode, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        self.parse(&s).map_err(serde::de::Error::custom)
    }
}

impl TypedValueParser for FsyncModes {
    type Value = FsyncMode;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<FsyncMode, clap::Error> {
        // A function parser words the refusal as clap words every other bad value.
        let modes = *self;
        let parse = move |s: &str| modes.parse(s);
        parse.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            self.modes
                .iter()
                .map(|m| PossibleValue::new(m.name()).help(m.meaning())),
        ))
    }
}

/// The check of a workload's `--fsync`, called from each workload's tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub mod testing {
    use super::{FsyncMode, FsyncModes};

    /// Parameters `P` (a workload's flags and plan keys) take exactly the modes of `takes`,
    /// as `--fsync` and as a plan's `fsync` alike (`fsync` reads the mode back), and refuse
    /// every other by name with the modes they take.
    pub fn takes_exactly<P>(takes: FsyncModes, fsync: fn(&P) -> FsyncMode)
    where
        P: clap::Args + clap::FromArgMatches + serde::de::DeserializeOwned,
    {
        let names: Vec<&str> = takes.modes.iter().map(|m| m.name()).collect();
        let names = crate::base::choice::sentence(&names);
        for mode in FsyncMode::ALL {
            let flags = crate::workload::params::from_flags::<P>(&["--fsync", mode.name()]);
            let plan = serde_json::from_value::<P>(serde_json::json!({ "fsync": mode.name() }));
            if takes.modes.contains(&mode) {
                assert_eq!(fsync(&flags.unwrap()), mode);
                assert_eq!(fsync(&plan.unwrap()), mode);
                continue;
            }
            let want = format!(
                "fsync mode {mode} does not apply to the {} workload; use {names}",
                takes.workload
            );
            let e = flags.err().unwrap().to_string();
            assert!(e.contains(&want), "--fsync {mode}: {e}");
            let e = plan.err().unwrap().to_string();
            assert!(e.contains(&want), "fsync = {mode}: {e}");
        }
        let e = crate::workload::params::from_flags::<P>(&["--fsync", "always"])
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains(&format!("unknown fsync mode \"always\"; use {names}")),
            "{e}"
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const SYNCS: FsyncModes = FsyncModes {
        workload: "demo",
        modes: &[FsyncMode::None, FsyncMode::End],
    };

    #[test]
    fn fsync_modes_have_one_set_of_names() {
        crate::base::choice::testing::one_set_of_names::<FsyncMode>();
    }

    #[test]
    fn a_workload_takes_its_modes_and_names_them_when_refusing() {
        assert_eq!(SYNCS.parse(" END"), Ok(FsyncMode::End));
        assert_eq!(
            SYNCS.parse("always").unwrap_err(),
            "unknown fsync mode \"always\"; use none or end"
        );
        assert_eq!(
            SYNCS.parse("phase").unwrap_err(),
            "fsync mode phase does not apply to the demo workload; use none or end"
        );
        let e = serde_json::from_value::<Wrapped>(serde_json::json!({"fsync": "file"}))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("fsync mode file does not apply to the demo workload; use none or end"),
            "{e}"
        );
    }

    #[derive(Debug, serde::Deserialize)]
    struct Wrapped {
        #[serde(deserialize_with = "demo_fsync")]
        #[allow(dead_code)]
        fsync: FsyncMode,
    }

    fn demo_fsync<'de, D: serde::Deserializer<'de>>(d: D) -> Result<FsyncMode, D::Error> {
        SYNCS.deserialize(d)
    }

    #[test]
    fn help_lists_the_workload_s_modes_with_their_meanings() {
        let names: Vec<String> = SYNCS
            .possible_values()
            .unwrap()
            .map(|p| format!("{}: {}", p.get_name(), p.get_help().unwrap()))
            .collect();
        assert_eq!(
            names,
            [
                format!("none: {}", FsyncMode::None.meaning()),
                format!("end: {}", FsyncMode::End.meaning())
            ]
        );
    }
}
