//! The settings of how runs are made, declared once: [`RunParams`] derives `clap::Args` (the
//! run flags of `bench`, `age`, `exercise` and `run`, its doc comments their `--help` text)
//! and serde. Those a plan's top level also takes, `reps`, `seed`, `cold` and `layout`, are
//! [`RunSettings`], which a plan reads its keys into: a key and its flag have one name, parser,
//! bound and default (`cli::plan_keys` walks both to keep it so); the command line's win over
//! the plan's ([`RunSettings::over`]). How results are printed (`--format`, `--json`,
//! `--quiet`) is declared with the output, not here.
//!
//! `--seed`, `--cold` and `--out` are also taken by commands that have no use for the other run
//! settings (`read`, `study append`, `devices check` and `fit`), so each is a one-flag type of
//! its own ([`Seed`], [`Cold`], [`ResultsDir`]) that they and [`RunParams`] flatten: one name,
//! help, value parser and default, wherever it appears (`tests/it/flag_definitions.rs` walks
//! the command tree to keep it so). Serde sees through them: the plan keys stay plain values.

use std::path::PathBuf;

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::base::units::Size;
use crate::lab::crash::points::{CrashArgs, CutChoice};
use crate::measure::Progress;
use crate::results::crash::CrashCache;
use crate::workload::ColdMode;

use super::RunOptions;

/// The most repetitions a run may have, the `--reps` flag and a plan's `reps` and `max_reps`
/// alike: enough for any study (the published ones ran 5 to 10), few enough that the matrix a
/// run expands (a plan's runs, `--dry-run`'s listing) stays small.
pub const MAX_REPS: u32 = 10_000;

/// Repetitions when neither `--reps` nor a plan's `reps` says how many.
pub const DEFAULT_REPS: u32 = 1;

/// The repetitions the run settings may ask for, 1 to [`MAX_REPS`]: `n` as a count, if it is
/// one. The one bound of `--reps` and a plan's `reps`.
fn rep_count(n: u64) -> Option<u32> {
    u32::try_from(n).ok().filter(|n| (1..=MAX_REPS).contains(n))
}

/// `--reps N`: 1 to [`MAX_REPS`].
fn reps(text: &str) -> Result<RepsSetting, String> {
    let n: u64 = text.trim().parse().map_err(|_| {
        format!("{text:?} is not a number of repetitions; give a whole number from 1 to {MAX_REPS}, e.g. --reps 5")
    })?;
    rep_count(n).map(RepsSetting::Count).ok_or_else(|| {
        format!("{n} repetitions are out of range; give 1 to {MAX_REPS}, e.g. --reps 5")
    })
}

/// How often a run is made: a count, or, in a plan, `"auto"` (repeat until the plan's questions
/// are decided or the run time varies little; see [`crate::lab::plan::Reps`]). The command line
/// takes a count only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepsSetting {
    /// This many repetitions, 1 to [`MAX_REPS`].
    Count(u32),
    /// `reps = "auto"`.
    Auto,
}

impl RepsSetting {
    /// The count, when it is one.
    pub fn count(self) -> Option<u32> {
        match self {
            RepsSetting::Count(n) => Some(n),
            RepsSetting::Auto => None,
        }
    }
}

impl Serialize for RepsSetting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RepsSetting::Count(n) => s.serialize_u32(*n),
            RepsSetting::Auto => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for RepsSetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = RepsSetting;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "a number of repetitions from 1 to {MAX_REPS}, or \"auto\" (repeat until the run time varies by less than cv_target)")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<RepsSetting, E> {
                rep_count(n).map(RepsSetting::Count).ok_or_else(|| {
                    E::custom(format!("{n} is not allowed; give a number of repetitions from 1 to {MAX_REPS}, or \"auto\" (repeat until the run time varies by less than cv_target)"))
                })
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<RepsSetting, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(n), &self)),
                }
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<RepsSetting, E> {
                match s {
                    "auto" => Ok(RepsSetting::Auto),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(s), &self)),
                }
            }
        }
        d.deserialize_any(Visit)
    }
}

/// The run settings a plan's top level also takes, under the same names (`reps`, `seed`,
/// `cold`, `layout`): one declaration of each, its name, parser, bound and help, whether it is
/// given as a flag or as a plan key. A plan reads them into this type itself (see
/// [`crate::lab::plan`]), and the flags given on the command line win over the plan's
/// ([`Self::over`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
pub struct RunSettings {
    // The help names the default from its constant (see `reps_help`).
    #[arg(long, value_name = "N", value_parser = reps, help = reps_help())]
    pub reps: Option<RepsSetting>,
    #[command(flatten)]
    pub seed: Seed,
    #[command(flatten)]
    pub cold: Cold,
    /// After the workload's last write phase, record the block layout of its tree (extents as
    /// filefrag counts them, fragmentation factor, layout score, ...) and the free-space
    /// fragmentation of the target in the result, under `layout`.
    #[arg(long)]
    pub layout: bool,
    /// After the run, build the emulated disk (--device-model) as a power cut just after N of
    /// its requests would have left it (the media its model had written, plus what
    /// --crash-cache keeps of its volatile cache), with no copy of the image, and judge each:
    /// mount it (journal replay), compare what the workload had made durable (the exerciser:
    /// every file against its model; others: the mount and the checker alone), unmount, and
    /// run the filesystem's checker read-only (e2fsck -fn, xfs_repair -n, btrfs check
    /// --readonly). Failures are counted by class in the result's `crash` record, each with
    /// the command that checks it again; any failure makes the exit status 1.
    #[arg(long, value_name = "N", help_heading = "Crash points")]
    pub crash_points: Option<u32>,
    /// Which requests the cuts come after: random (seeded, among writes and flushes) or
    /// flushes (every one, or N spread over the run) [default: random].
    #[arg(long, value_name = "HOW", help_heading = "Crash points")]
    pub crash_choose: Option<CutChoice>,
    /// What a cut keeps of the drive's volatile write cache: lose-all, random (seeded: a real
    /// drive may have destaged any part of it) or keep-all (a cache that survives) [default: random].
    #[arg(long, value_name = "WHICH", help_heading = "Crash points")]
    pub crash_cache: Option<CrashCache>,
    /// Check the one cut just after request K (a failure's replay names it); with
    /// --crash-points, that many cuts from K on.
    #[arg(long, value_name = "K", help_heading = "Crash points")]
    pub crash_at: Option<u64>,
    /// The most the write log keeps on disk (writes' data and pre-images, in a file beside
    /// the image, removed with the run; only its index is in memory); a run that writes more
    /// is refused part-way with a message, never checked on a partial log. Checked against
    /// the free space there [default: what fits: that free space less 256M].
    #[arg(long, value_name = "SIZE", help_heading = "Crash points")]
    pub crash_log_limit: Option<Size>,
    /// Instead of cuts of an emulated disk, end the run with a crash the kernel makes: shut
    /// the filesystem down without flushing its log (FS_IOC_SHUTDOWN, NOLOGFLUSH: xfstests'
    /// godown), mount it again (journal replay), and judge that one state as a cut's is
    /// judged, then run the checker. Any testbed fsgauge builds with ext2/3/4 or xfs, with or
    /// without an emulated disk: the disk keeps every write it completed, so this cross-checks
    /// the emulated cuts (which also lose the drive's cache) with the kernel's own mechanism.
    /// One state per run: vary --ops or --seed, or use --reps, for more.
    #[arg(
        long,
        help_heading = "Crash points",
        conflicts_with_all = ["crash_points", "crash_at"]
    )]
    pub crash_shutdown: bool,
    /// Hold the host's vm.dirty_expire_centisecs at this for each run and give the host's
    /// value back after (e.g. 5min; 1s to 24h): the age at which the kernel's periodic
    /// writeback writes dirty data, 30 s by default, counted in wall time from the first
    /// write. Phases that end near that age meet the writeback in one phase on one machine
    /// and in the next on a slower or busier one; an expiry longer than the run keeps it out
    /// of every run's phases alike. Recorded in the result (conditions.dirty_expire_s);
    /// needs root [default: the host's]
    #[arg(long, value_name = "DURATION", value_parser = dirty_expire)]
    #[serde(deserialize_with = "dirty_expire_key")]
    pub dirty_expire: Option<DirtyExpire>,
}

/// An expiry of dirty data to hold for a run (`--dirty-expire`), in the kernel's unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirtyExpire {
    pub centisecs: u64,
}

impl DirtyExpire {
    /// The shortest expiry a run may hold.
    pub const MIN_S: u64 = 1;
    /// The longest: a day.
    pub const MAX_S: u64 = 24 * 3600;

    fn of_secs(secs: f64, shown: &str) -> Result<Self, String> {
        if !(secs.is_finite() && (Self::MIN_S as f64..=Self::MAX_S as f64).contains(&secs)) {
            return Err(format!(
                "{shown} is out of range; give an expiry from {}s to 24h, e.g. 5min",
                Self::MIN_S
            ));
        }
        Ok(Self {
            centisecs: (secs * 100.0).round() as u64,
        })
    }

    /// Seconds, as the result records them.
    pub fn secs(self) -> f64 {
        self.centisecs as f64 / 100.0
    }
}

impl Serialize for DirtyExpire {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.secs())
    }
}

/// `--dirty-expire DURATION`: `5min`, `300s`, or seconds.
fn dirty_expire(text: &str) -> Result<DirtyExpire, String> {
    let d = crate::base::units::parse_setting_duration(text).map_err(|_| {
        format!(
            "{text:?} is not a duration; give an expiry from 1s to 24h, e.g. --dirty-expire 5min"
        )
    })?;
    DirtyExpire::of_secs(d.as_secs_f64(), &format!("{text:?}"))
}

/// A plan's `dirty_expire = "5min"` (or seconds), refused in the flag's words.
fn dirty_expire_key<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<DirtyExpire>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(f64),
        S(String),
    }
    match Option::<Raw>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::N(n)) => DirtyExpire::of_secs(n, &n.to_string())
            .map(Some)
            .map_err(serde::de::Error::custom),
        Some(Raw::S(s)) => dirty_expire(&s).map(Some).map_err(serde::de::Error::custom),
    }
}

/// `--reps`'s help, its default [`DEFAULT_REPS`] written in.
fn reps_help() -> String {
    format!(
        "Repetitions; with --fs each gets a fresh filesystem [default: {DEFAULT_REPS}; with a plan, the plan's reps, which may also be \"auto\"]"
    )
}

impl Default for RunSettings {
    fn default() -> Self {
        crate::workload::params::defaults()
    }
}

impl RunSettings {
    /// These settings over `under`: each one given here wins, the others are `under`'s (the
    /// command line's flags over a plan's keys).
    pub fn over(self, under: Self) -> Self {
        Self {
            reps: self.reps.or(under.reps),
            seed: Seed {
                value: self.seed.value.or(under.seed.value),
            },
            cold: Cold {
                mode: self.cold.mode.or(under.cold.mode),
            },
            layout: self.layout || under.layout,
            crash_points: self.crash_points.or(under.crash_points),
            crash_choose: self.crash_choose.or(under.crash_choose),
            crash_cache: self.crash_cache.or(under.crash_cache),
            crash_at: self.crash_at.or(under.crash_at),
            crash_log_limit: self.crash_log_limit.or(under.crash_log_limit),
            crash_shutdown: self.crash_shutdown || under.crash_shutdown,
            dirty_expire: self.dirty_expire.or(under.dirty_expire),
        }
    }

    /// The crash-point settings.
    pub fn crash(&self) -> CrashArgs {
        CrashArgs {
            crash_points: self.crash_points,
            crash_choose: self.crash_choose,
            crash_cache: self.crash_cache,
            crash_at: self.crash_at,
            crash_log_limit: self.crash_log_limit,
            shutdown: self.crash_shutdown,
        }
    }
}

/// How runs are repeated, seeded, conditioned and kept. A setting left out takes the
/// command's default (`bench`: 1 repetition, a seed from the clock, warm caches) or, with
/// `run PLAN`, the plan's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Args)]
#[serde(default)]
#[command(next_help_heading = "Runs and results")]
pub struct RunParams {
    /// The settings a plan also takes.
    #[command(flatten)]
    #[serde(flatten)]
    pub settings: RunSettings,
    /// Run inside a memory cgroup limited to SIZE, page cache included (cgroup2 memory.max,
    /// else cgroup v1 memory.limit_in_bytes); with a plan, for every testbed (a testbed's
    /// mem_limit).
    #[arg(
        long,
        value_name = "SIZE",
        conflicts_with = "mem_charge",
        allow_hyphen_values = true
    )]
    pub mem_limit: Option<Size>,
    /// The low-memory study's memory charger: lock memory until only SIZE is available
    /// (MemAvailable), and give it back at the end.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub mem_charge: Option<Size>,
    #[command(flatten)]
    pub out: ResultsDir,
}

impl Default for RunParams {
    fn default() -> Self {
        crate::workload::params::defaults()
    }
}

impl RunParams {
    /// The runner's options, `silent` saying whether progress is shown, run as `coordinator`
    /// says. Under MPI only rank 0 writes results and shows progress.
    pub fn options(&self, silent: bool, coordinator: crate::dist::Coord) -> RunOptions {
        RunOptions {
            // The command line gives a count or nothing: "auto" is a plan's.
            reps: self
                .settings
                .reps
                .and_then(RepsSetting::count)
                .unwrap_or(DEFAULT_REPS),
            seed: self.settings.seed.value,
            cold: self.settings.cold.or_default(),
            mem_limit: self.mem_limit.map(Size::bytes),
            mem_charge: self.mem_charge.map(Size::bytes),
            out: (!coordinator.is_secondary()).then(|| self.out.dir.clone()),
            progress: Progress::new(silent || coordinator.is_secondary()),
            layout: self.settings.layout,
            crash: self.settings.crash(),
            dirty_expire: self.settings.dirty_expire,
            precondition: None,
            keep_image: None,
            study: None,
            coordinator,
        }
    }
}

/// `--seed`, declared once for every command that takes one: the run settings, `read`,
/// `study append`, `devices check` and `devices fit`. What it defaults to is the command's,
/// and its help says each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, Args)]
#[serde(transparent)]
#[group(skip)]
pub struct Seed {
    // The help names the default of a plan from its constant (see `seed_help`).
    #[arg(
        id = "seed",
        long = "seed",
        value_name = "SEED",
        help = seed_help(),
        value_parser = seed
    )]
    #[serde(deserialize_with = "seed_key")]
    pub value: Option<u64>,
}

/// What a seed may be, for the refusal of `shown`: the flag's and the plan key's words.
fn not_a_seed(shown: impl std::fmt::Display) -> String {
    format!(
        "{shown} is not a seed; give a whole number from 0 to {}",
        u64::MAX
    )
}

/// `--seed S`.
fn seed(text: &str) -> Result<u64, String> {
    text.trim()
        .parse()
        .map_err(|_| not_a_seed(format!("{text:?}")))
}

/// A plan's `seed = S`, refused in the flag's words.
fn seed_key<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct Visit;
    impl<'de> serde::de::Visitor<'de> for Visit {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a seed, a whole number from 0 to {}", u64::MAX)
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Self::Value, E> {
            Ok(Some(n))
        }
        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Self::Value, E> {
            u64::try_from(n)
                .map(Some)
                .map_err(|_| E::custom(not_a_seed(n)))
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    d.deserialize_option(Visit)
}

/// `--seed`'s help, its plan default [`Seed::IN_A_PLAN`] written in.
fn seed_help() -> String {
    format!(
        "Seed for every random choice (recorded in results) [default: from the clock; with a plan, the plan's seed, {} when it names none; `devices check` and `fit`: 1]",
        Seed::IN_A_PLAN
    )
}

impl Seed {
    /// The seed of a plan that names none (and is not given one by `--seed`): plans are
    /// reproducible by default, and `--resume` recognises finished runs by a hash that includes
    /// the seed. `--seed`'s help states it.
    pub const IN_A_PLAN: u64 = 1;

    /// The seed given, else one from the clock (the default of a run without a plan).
    pub fn or_clock(self) -> u64 {
        self.value.unwrap_or_else(super::admit::clock_seed)
    }

    /// The seed given, else [`Self::IN_A_PLAN`] (the default of a plan's runs).
    pub fn in_a_plan(self) -> u64 {
        self.value.unwrap_or(Self::IN_A_PLAN)
    }
}

/// `--cold`, declared once: the run settings and `read`. Its two defaults are here, and its
/// help is written from them: [`Cold::BY_DEFAULT`] (a plan's too), but [`Cold::FOR_READ`] for
/// `read`, whose study read every tree cold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, Args)]
#[serde(transparent)]
#[group(skip)]
pub struct Cold {
    // The help names the defaults from their constants (see `cold_help`).
    #[arg(
        id = "cold",
        long = "cold",
        value_name = "drop|remount|none",
        help = cold_help()
    )]
    pub mode: Option<ColdMode>,
}

/// `--cold`'s help, its defaults written in.
fn cold_help() -> String {
    format!(
        "Make the cache cold between phases: drop (sync + drop_caches), remount (unmount and mount again, testbeds only) or none [default: {}, but {} for `read` (the study's read tool read cold); with a plan, the plan's cold, {} when it names none]",
        Cold::BY_DEFAULT,
        Cold::FOR_READ,
        Cold::BY_DEFAULT
    )
}

impl Cold {
    /// The caches between phases when no `--cold` (or plan's `cold`) says: as they are.
    pub const BY_DEFAULT: ColdMode = ColdMode::None;
    /// `read`'s when no `--cold` says: the fragmentation study's read tool read every tree
    /// cold, so each phase starts from an emptied cache.
    pub const FOR_READ: ColdMode = ColdMode::Drop;

    /// The mode given, else [`Self::BY_DEFAULT`].
    pub fn or_default(self) -> ColdMode {
        self.mode.unwrap_or(Self::BY_DEFAULT)
    }

    /// The mode given, else [`Self::FOR_READ`] (`read`'s).
    pub fn for_read(self) -> ColdMode {
        self.mode.unwrap_or(Self::FOR_READ)
    }
}

/// `--out`, the results directory, declared once: the run settings, `read` and `study
/// append`. (`devices fit --out FILE` is another thing: the file a fitted profile goes to.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Args)]
#[serde(transparent)]
#[group(skip)]
pub struct ResultsDir {
    /// Directory for result files (one JSON per run).
    #[arg(
        id = "out",
        long = "out",
        value_name = "DIR",
        default_value = "fsgauge-results"
    )]
    pub dir: PathBuf,
}

impl Default for ResultsDir {
    fn default() -> Self {
        crate::workload::params::defaults()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared flags keep the plan keys and values they had as plain fields.
    #[test]
    fn seed_cold_and_out_are_plain_keys() {
        let p: RunParams = serde_json::from_value(serde_json::json!({
            "seed": 7, "cold": "drop", "out": "res"
        }))
        .unwrap();
        assert_eq!(p.settings.seed.value, Some(7));
        assert_eq!(p.settings.cold.or_default(), ColdMode::Drop);
        assert_eq!(p.out.dir, PathBuf::from("res"));
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(
            (&v["seed"], &v["cold"], &v["out"]),
            (&7.into(), &"drop".into(), &"res".into())
        );
        let d = RunParams::default();
        assert_eq!((d.settings.seed.value, d.settings.cold.mode), (None, None));
        assert_eq!(d.out.dir, PathBuf::from("fsgauge-results"));
    }

    /// `--seed` and a plan's `seed` refuse what is no seed in the same words.
    #[test]
    fn a_seed_is_refused_alike_as_a_flag_and_as_a_key() {
        assert_eq!(seed("7"), Ok(7));
        assert_eq!(seed(&u64::MAX.to_string()), Ok(u64::MAX));
        let want = "is not a seed; give a whole number from 0 to 18446744073709551615";
        assert_eq!(seed("-1"), Err(format!("\"-1\" {want}")));
        let key = |v: serde_json::Value| {
            serde_json::from_value::<RunSettings>(serde_json::json!({ "seed": v }))
        };
        assert_eq!(key(serde_json::json!(7)).unwrap().seed.value, Some(7));
        assert_eq!(key(serde_json::Value::Null).unwrap().seed.value, None);
        let e = key(serde_json::json!(-1)).unwrap_err().to_string();
        assert_eq!(e, format!("-1 {want}"));
        let e = key(serde_json::json!("x")).unwrap_err().to_string();
        assert!(
            e.contains("expected a seed, a whole number from 0 to"),
            "{e}"
        );
    }

    /// Each command's default cold mode is one constant, and `--cold`'s help states both.
    #[test]
    fn cold_defaults_are_the_constants_the_help_states() {
        let none = Cold::default();
        assert_eq!(none.or_default(), ColdMode::None);
        assert_eq!(none.for_read(), ColdMode::Drop);
        let given = Cold {
            mode: Some(ColdMode::Remount),
        };
        assert_eq!(
            (given.or_default(), given.for_read()),
            (ColdMode::Remount, ColdMode::Remount)
        );
        assert!(
            cold_help().contains("[default: none, but drop for `read`"),
            "{}",
            cold_help()
        );
    }

    #[test]
    fn reps_are_one_to_the_limit() {
        assert_eq!(reps("1"), Ok(RepsSetting::Count(1)));
        assert_eq!(reps("10000"), Ok(RepsSetting::Count(MAX_REPS)));
        for (text, needle) in [
            (
                "0",
                "0 repetitions are out of range; give 1 to 10000, e.g. --reps 5",
            ),
            (
                "10001",
                "10001 repetitions are out of range; give 1 to 10000",
            ),
            ("4294967295", "4294967295 repetitions are out of range"),
            (
                "18446744073709551615",
                "18446744073709551615 repetitions are out of range",
            ),
            (
                "-1",
                "\"-1\" is not a number of repetitions; give a whole number from 1 to 10000",
            ),
            ("2.5", "\"2.5\" is not a number of repetitions"),
        ] {
            let e = reps(text).expect_err(text);
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
