//! A workload's parameters are one struct that derives both `clap::Args` (the flags of
//! `fsgauge bench KIND`, its doc comments the `--help` text) and serde (a plan's
//! `[[workload]]` table, and the `workload` object of every result). Its defaults are written
//! once, in the `#[arg(default_value…)]` attributes: [`defaults`] reads them back, so the
//! struct's `Default` (which serde fills absent plan keys from) is the command line's.
//!
//! The value parsers here are the command line's forms of the units plans accept as text:
//! sizes (`4K`), durations (`30s`), switches (`on`/`off`).

use std::ops::Deref;
use std::str::FromStr;

use clap::{Args, Command, FromArgMatches};
use serde::{Deserialize, Serialize};

/// The parameters a workload gets when no flag is given: its `#[arg]` defaults.
pub fn defaults<T: Args + FromArgMatches>() -> T {
    let cmd = T::augment_args(Command::new("defaults").no_binary_name(true));
    let m = cmd
        .try_get_matches_from(std::iter::empty::<String>())
        .expect("every workload parameter has a default or is optional");
    T::from_arg_matches(&m).expect("the defaults are values of their own types")
}

/// The parameters a command line gives (`args` without the program name), as the command
/// that flattens `T` reads them.
#[cfg(test)]
pub(crate) fn from_flags<T: Args + FromArgMatches>(args: &[&str]) -> Result<T, clap::Error> {
    let m =
        T::augment_args(Command::new("flags").no_binary_name(true)).try_get_matches_from(args)?;
    T::from_arg_matches(&m)
}

/// `--file-size 64M`: a size in bytes.
pub fn size(s: &str) -> Result<u64, String> {
    crate::base::units::parse_size(s).map_err(|e| e.to_string())
}

/// `--time 30s`: a duration in seconds, at most [`crate::base::units::MAX_DURATION`].
pub fn seconds(s: &str) -> Result<f64, String> {
    crate::base::units::parse_setting_duration(s)
        .map(|d| d.as_secs_f64())
        .map_err(|e| e.to_string())
}

/// `--fresh-fs on|off`.
pub fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        _ => Err(format!("{s:?} is not on or off")),
    }
}

/// One item of a comma list (`--threads 1, 4`), spaces around it ignored.
pub fn item<T: FromStr>(s: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    let t = s.trim();
    if t.is_empty() {
        return Err("an empty item in the list; write values like 1,4,8".into());
    }
    t.parse().map_err(|e: T::Err| e.to_string())
}

/// A comma-list parameter: `--usage 25,50,75` on the command line (items trimmed, each parsed
/// as [`item`] does) and an array in a plan and in results (`usage = [25.0, 50.0, 75.0]`). A
/// flag of this type states only its name, default and help; clap finds its parser through
/// `FromStr`. It reads as the `Vec` it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CommaList<T>(pub Vec<T>);

impl<T: FromStr> FromStr for CommaList<T>
where
    T::Err: std::fmt::Display,
{
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        s.split(',').map(item).collect::<Result<_, _>>().map(Self)
    }
}

impl<T> CommaList<T> {
    /// serde `deserialize_with` for a sweep's axis, which a plan may give as one value
    /// (`threads = 4`) or a list (`threads = [1, 4, 8]`).
    pub fn one_or_many<'de, D>(d: D) -> Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
        T: Deserialize<'de>,
    {
        crate::base::units::de_one_or_many(d).map(Self)
    }
}

impl<T> Deref for CommaList<T> {
    type Target = Vec<T>;

    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

impl<T> From<Vec<T>> for CommaList<T> {
    fn from(items: Vec<T>) -> Self {
        Self(items)
    }
}

impl<'a, T> IntoIterator for &'a CommaList<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// The largest buffer one read(2) or write(2) of a workload takes (`--block`, `--read-block`):
/// each is one allocation of that size.
pub const MAX_BLOCK: u64 = 1 << 30;

/// Checks an I/O block size against 1 byte and [`MAX_BLOCK`]. `field` is the plan key; the
/// message names its flag (the key with `-` for `_`).
pub fn check_block(field: &'static str, bytes: u64) -> anyhow::Result<()> {
    if bytes == 0 || bytes > MAX_BLOCK {
        let flag = field.replace('_', "-");
        return Err(crate::base::error::bad_param(
            field,
            format!("--{flag} must be between 1 byte and 1G"),
        ));
    }
    Ok(())
}

/// How one parameter reacts to a plan's `--scale` (the study's sizes from the preset's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleClass {
    /// Multiplied and rounded to a whole number, at least 1.
    Count,
    /// Multiplied and rounded to whole 4 KiB blocks, at least 4 KiB.
    Size,
    /// Kept as written.
    Fixed,
    /// The depth of a tree of directories only (fdtree with no files per directory): its
    /// amount of work is its directory count, about D^levels, so the depth changes by
    /// log_D(F), rounded, at least 1. Kept as written in a tree with files (its files per
    /// directory carry the scale).
    Levels,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flag as the workloads declare one: name, default and help only.
    #[derive(Debug, clap::Args)]
    struct Sweep {
        /// Thread counts.
        #[arg(long, value_name = "LIST", default_value = "1,4")]
        threads: CommaList<u32>,
    }

    #[test]
    fn a_comma_list_flag_takes_trimmed_items_once_and_defaults_to_its_list() {
        let d: Sweep = defaults();
        assert_eq!(*d.threads, vec![1, 4]);
        let s = from_flags::<Sweep>(&["--threads", " 8, 16 ,32"]).expect("a list");
        assert_eq!(*s.threads, vec![8, 16, 32]);
        let sizes: CommaList<crate::base::units::Size> = "4K, 128K".parse().expect("sizes");
        assert_eq!(
            *sizes,
            vec![
                crate::base::units::Size(4096),
                crate::base::units::Size(128 << 10)
            ]
        );
        let e = from_flags::<Sweep>(&["--threads", "8,,32"]).expect_err("an empty item");
        assert!(
            e.to_string()
                .contains("an empty item in the list; write values like 1,4,8"),
            "{e}"
        );
        let e = from_flags::<Sweep>(&["--threads", "8,x"]).expect_err("not a number");
        assert!(
            e.to_string()
                .contains("invalid value '8,x' for '--threads <LIST>'"),
            "{e}"
        );
        let e = from_flags::<Sweep>(&["--threads", "8", "--threads", "16"]).expect_err("twice");
        assert!(
            e.to_string()
                .contains("the argument '--threads <LIST>' cannot be used multiple times"),
            "{e}"
        );
    }

    #[test]
    fn a_comma_list_is_an_array_in_results_and_one_value_or_many_in_a_plan() {
        let l = CommaList(vec![25.0, 50.0]);
        assert_eq!(serde_json::to_string(&l).expect("json"), "[25.0,50.0]");
        let back: CommaList<f64> = serde_json::from_str("[25.0,50.0]").expect("an array");
        assert_eq!(back, l);
        let one = |v: serde_json::Value| -> CommaList<u32> {
            CommaList::one_or_many(v).expect("one or many")
        };
        assert_eq!(*one(serde_json::json!(4)), vec![4]);
        assert_eq!(*one(serde_json::json!([1, 8])), vec![1, 8]);
    }

    #[test]
    fn a_block_size_from_1_byte_to_1g_passes_and_the_refusal_names_the_flag() {
        assert!(check_block("block", 1).is_ok());
        assert!(check_block("block", MAX_BLOCK).is_ok());
        for bytes in [0, MAX_BLOCK + 1] {
            let e = check_block("read_block", bytes).expect_err("out of range");
            assert_eq!(e.to_string(), "--read-block must be between 1 byte and 1G");
            assert_eq!(crate::base::error::bad_field(&e), Some("read_block"));
        }
    }
}
