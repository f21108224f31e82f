//! A workload's parameters are one struct that derives both `clap::Args` (the flags of
//! `fsgauge bench KIND`, its doc comments the `--help` text) and serde (a plan's
//! `[[workload]]` table, and the `workload` object of every result). Its defaults are written
//! once, in the `#[arg(default_value…)]` attributes: [`defaults`] reads them back, so the
//! struct's `Default` (which serde fills absent plan keys from) is the command line's.
//!
//! The value parsers here are the command line's forms of the units plans accept as text:
//! sizes (`4K`), durations (`30s`), switches (`on`/`off`).

use clap::{Args, Command, FromArgMatches};

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
    crate::units::parse_size(s).map_err(|e| e.to_string())
}

/// `--time 30s`: a duration in seconds.
pub fn seconds(s: &str) -> Result<f64, String> {
    crate::units::parse_duration(s)
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
pub fn item<T: std::str::FromStr>(s: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    let t = s.trim();
    if t.is_empty() {
        return Err("an empty item in the list; write values like 1,4,8".into());
    }
    t.parse().map_err(|e: T::Err| e.to_string())
}

/// The largest buffer one read(2) or write(2) of a workload takes (`--block`, `--read-block`):
/// each is one allocation of that size.
pub const MAX_BLOCK: u64 = 1 << 30;

/// Checks an I/O block size against 1 byte and [`MAX_BLOCK`]. `field` is the plan key; the
/// message names its flag (the key with `-` for `_`).
pub fn check_block(field: &'static str, bytes: u64) -> anyhow::Result<()> {
    if bytes == 0 || bytes > MAX_BLOCK {
        let flag = field.replace('_', "-");
        return Err(crate::error::bad_param(
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

    #[test]
    fn a_block_size_from_1_byte_to_1g_passes_and_the_refusal_names_the_flag() {
        assert!(check_block("block", 1).is_ok());
        assert!(check_block("block", MAX_BLOCK).is_ok());
        for bytes in [0, MAX_BLOCK + 1] {
            let e = check_block("read_block", bytes).expect_err("out of range");
            assert_eq!(e.to_string(), "--read-block must be between 1 byte and 1G");
            assert_eq!(crate::error::bad_field(&e), Some("read_block"));
        }
    }
}
